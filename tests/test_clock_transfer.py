"""ClockTransfer: the physics-shaped affine map of a reference's clock curve."""

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powertrain.errors import DataError
from powertrain.predictor.clock import ClockTransfer, affine_map

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import frequency  # noqa: E402

F = np.arange(855.0, 1741.0, 15.0)


def curve(a: float, b: float, static: float, c: float, cap_mhz: float = 1450.0) -> pd.DataFrame:
    """time = a + b / f_eff, power = static + c f_eff V^2, f_eff held at a power cap."""
    f_eff = np.minimum(F, cap_mhz)
    volts = 0.7 + 0.3 * (f_eff - F[0]) / (F[-1] - F[0])
    return pd.DataFrame(
        {"gpu_mhz": F, "time_ms": a + b / f_eff, "power_w": static + c * f_eff * volts**2}
    )


def test_exact_for_targets_of_the_physics_family():
    ref = curve(5.0, 1.5e5, 60.0, 0.15)  # compute-bound
    target = curve(150.0, 5e4, 90.0, 0.08)  # mostly memory-bound, less active
    model = ClockTransfer(ref).fit(target.iloc[[3, 30, 59]])
    got = model.predict(target[["gpu_mhz"]])
    assert np.allclose(got["time_ms"], target["time_ms"])
    assert np.allclose(got["power_w"], target["power_w"])
    naive = frequency.naive(ref, target.iloc[[3, 30, 59]], target)
    assert frequency.mape(target.time_ms, naive["time_ms"]) > 0.3  # log-linear cannot


def test_unidentified_or_unphysical_slopes_fall_back_to_a_scale():
    assert affine_map(np.array([100.0, 100.0]), np.array([120.0, 125.0])) == (0.0, 1.225)
    alpha, beta = affine_map(np.array([100.0, 150.0]), np.array([130.0, 120.0]))  # beta < 0
    assert alpha == 0.0 and beta == pytest.approx(np.mean([1.3, 0.8]))


def test_clear_errors():
    ref = curve(40.0, 9e4, 60.0, 0.15)
    with pytest.raises(DataError, match="at least 2 distinct gpu_mhz"):
        ClockTransfer(ref).fit(ref.iloc[[5, 5]])
    with pytest.raises(DataError, match="samples: no column 'power_w'"):
        ClockTransfer(ref).fit(ref.iloc[[1, 9]].drop(columns="power_w"))
    with pytest.raises(DataError, match="samples: row 2, column 'time_ms'"):
        ClockTransfer(ref).fit(ref.iloc[[1, 9]].assign(time_ms=[1.0, -1.0]))
    with pytest.raises(DataError, match="^this ClockTransfer is not fitted: call fit"):
        ClockTransfer(ref).predict(ref)
    with pytest.warns(RuntimeWarning, match="outside the reference's 855..1740 MHz"):
        ClockTransfer(ref).fit(ref.iloc[[1, 9]]).predict(pd.DataFrame({"gpu_mhz": [2000.0]}))


def test_beats_log_linear_on_a_shipped_a40_backward_pass():
    """Real data (Perseus A40): GPT-3's backward pass from its forward pass, k = 5."""
    data = frequency.load()
    ref, target = data[frequency.REFERENCE], data["gpt3-175b-stage3-backward"]
    errs = {"clock": [], "naive": []}
    for d in range(3):
        idx = frequency.draw_clocks(len(target), 5, np.random.default_rng(5000 + d))
        train, test = target.iloc[idx], target.drop(target.index[idx])
        p = ClockTransfer(ref).fit(train).predict(test)
        errs["clock"].append(frequency.mape(test.time_ms, p.time_ms))
        errs["naive"].append(
            frequency.mape(test.time_ms, frequency.naive(ref, train, test)["time_ms"])
        )
    assert np.mean(errs["clock"]) < np.mean(errs["naive"])


def test_an_ill_conditioned_fit_never_predicts_a_negative_time():
    """Two clocks where the reference is nearly flat (0.9 % apart, above the 0.1 %
    guard): the line through them would go below zero at the top clock."""
    ref = pd.DataFrame(
        {
            "gpu_mhz": [900.0, 1000.0, 1100.0, 1980.0],
            "time_ms": [200.0, 101.0, 100.1, 60.0],
            "power_w": [100.0, 150.0, 200.0, 300.0],
        }  # fmt: skip
    )
    got = pd.DataFrame({"gpu_mhz": [1000.0, 1100.0], "time_ms": [150.0, 100.0],
                        "power_w": [160.0, 210.0]})  # fmt: skip
    assert 0.005 < 1 - 100.1 / 101.0 < 0.01
    with pytest.warns(RuntimeWarning, match="would predict values <= 0.*pure scale"):
        model = ClockTransfer(ref).fit(got)
    pred = model.predict(pd.DataFrame({"gpu_mhz": [900.0, 1500.0, 1980.0]}))
    assert (pred["time_ms"] > 0).all() and (pred["power_w"] > 0).all()
    assert model.coef_["time_ms"][0] == 0.0  # the scale, not the line


def test_a_reference_without_a_clock_curve_is_refused():
    ref = curve(40.0, 9e4, 60.0, 0.15)
    one = ref.iloc[[4, 4]]
    with pytest.raises(DataError, match=r"reference: measured at one gpu_mhz only \(915\)"):
        ClockTransfer(one).fit(ref.iloc[[1, 9]])
    with pytest.raises(DataError, match="^reference: the table has no rows"):
        ClockTransfer(ref.iloc[:0]).fit(ref.iloc[[1, 9]])


def test_one_target_named_as_a_string_is_one_column():
    ref = curve(40.0, 9e4, 60.0, 0.15)
    got = ClockTransfer(ref, targets="time_ms").fit(ref.iloc[[1, 9, 30]])
    assert list(got.predict(ref[["gpu_mhz"]]).columns) == ["time_ms"]
    with pytest.raises(DataError, match="reference: no column 'epoch_s'"):
        ClockTransfer(ref, targets="epoch_s").fit(ref.iloc[[1, 9]])
    with pytest.raises(DataError, match="targets must name the columns"):
        ClockTransfer(ref, targets=()).fit(ref.iloc[[1, 9]])


def test_the_guards_of_the_map_at_their_edges():
    """The spread guard is relative, a negative intercept is
    fine where every prediction stays positive, and a zero time is refused."""
    import warnings

    assert affine_map(np.array([100.0, 100.01]), np.array([120.0, 125.0]))[0] == 0.0
    ref = pd.DataFrame({"gpu_mhz": [900.0, 1200.0, 1500.0], "time_ms": [200.0, 150.0, 100.0],
                        "power_w": [100.0, 150.0, 200.0]})  # fmt: skip
    target = ref.assign(time_ms=2 * ref.time_ms - 10, power_w=ref.power_w * 1.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback, and the top clock is inside
        model = ClockTransfer(ref).fit(target.iloc[[0, 2]])
        got = model.predict(pd.DataFrame({"gpu_mhz": [1500.0, 1200.0]}, index=[7, 3]))
    assert np.allclose(got.time_ms, [190.0, 290.0]) and list(got.index) == [7, 3]
    assert model.coef_["time_ms"][0] == pytest.approx(-10.0)
    two = ClockTransfer(ref.iloc[[0, 2]]).fit(target.iloc[[0, 2]])  # two clocks: a curve
    assert two.predict(ref[["gpu_mhz"]]).time_ms.iloc[2] == pytest.approx(190.0)
    with pytest.raises(DataError, match=r"^samples: row 2, column 'time_ms'"):
        ClockTransfer(ref).fit(target.iloc[[0, 2]].assign(time_ms=[1.0, 0.0]))
    with pytest.raises(DataError, match=r"^X: no column 'gpu_mhz'"):
        model.predict(pd.DataFrame({"clock": [1.0]}))
