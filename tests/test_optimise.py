"""Pareto front and capped selection."""

import numpy as np
import pandas as pd
import pytest

import powertrain as pt
from powertrain.errors import DataError, NoFeasibleModeError


def _est(seed=0, n=500):
    rng = np.random.default_rng(seed)
    power = rng.uniform(10, 60, n)
    time = 2000 / power + rng.uniform(0, 30, n)
    return pd.DataFrame({"mode_id": np.arange(n), "power_w": power, "time_ms": time})


def test_pareto_front_is_exactly_the_non_dominated_set():
    est = _est()
    front = pt.pareto_front(est)
    p, t = est["power_w"].to_numpy(), est["time_ms"].to_numpy()
    dominated = np.array(
        [((p <= p[i]) & (t <= t[i]) & ((p < p[i]) | (t < t[i]))).any() for i in range(len(p))]
    )
    assert set(front["mode_id"]) == set(est["mode_id"][~dominated])
    assert (np.diff(front["power_w"]) > 0).all() and (np.diff(front["time_ms"]) < 0).all()


def test_fastest_under_never_exceeds_the_cap_and_is_optimal():
    est = _est()
    for cap in (15, 25, 40):
        best = pt.fastest_under(est, power_cap_w=cap)
        assert best["power_w"] <= cap
        assert best["time_ms"] == est.loc[est["power_w"] <= cap, "time_ms"].min()


def test_margin_and_uncertainty_shrink_the_feasible_set():
    est = _est().assign(power_w_std=2.0)
    plain = pt.fastest_under(est, 30)
    guarded = pt.fastest_under(est, 30, margin_w=1.0, k_sigma=1.0)
    assert guarded["power_w"] <= 27.0
    assert guarded["time_ms"] >= plain["time_ms"]


def test_no_feasible_mode_is_a_clear_error():
    with pytest.raises(NoFeasibleModeError, match="no configuration fits under 5 W: the lowest"):
        pt.fastest_under(_est(), 5)


def test_bad_arguments():
    with pytest.raises(DataError, match="power_cap_w"):
        pt.fastest_under(_est(), -1)
    with pytest.raises(DataError, match="power_w_std"):
        pt.fastest_under(_est(), 30, k_sigma=1)
    with pytest.raises(DataError, match="missing column"):
        pt.pareto_front(_est().drop(columns="time_ms"))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"power_cap_w": "30"}, "power_cap_w must be a number"),
        ({"power_cap_w": float("nan")}, "power_cap_w must be a finite"),
        ({"power_cap_w": 0}, "power_cap_w must be a finite number > 0"),
        ({"power_cap_w": 30, "k_sigma": float("nan")}, "k_sigma"),
        ({"power_cap_w": 30, "margin_w": float("nan")}, "margin_w"),
        ({"power_cap_w": 30, "margin_w": -1}, "margin_w"),
        ({"power_cap_w": 30, "k_sigma": True}, "k_sigma"),
    ],
)
def test_bad_numbers_reaching_a_decision_are_refused(kwargs, match):
    est = _est().assign(power_w_std=1.0)
    with pytest.raises(DataError, match=match):
        pt.fastest_under(est, **kwargs)


def test_a_negative_or_missing_spread_cannot_buy_a_pick_over_the_cap():
    est = _est().assign(power_w_std=0.5)
    hot = int(est.power_w.idxmax())
    est.loc[hot, "power_w_std"] = -100.0  # would pull a 60 W row under a 30 W cap
    with pytest.raises(DataError, match=r"row \d+, column 'power_w_std'.*negative"):
        pt.fastest_under(est, power_cap_w=30, k_sigma=1)
    est.loc[hot, "power_w_std"] = float("nan")
    with pytest.raises(DataError, match="power_w_std"):
        pt.fastest_under(est, power_cap_w=30, k_sigma=1)


def test_the_guarded_pick_is_under_the_cap_for_every_margin():
    est = _est().assign(power_w_std=np.random.default_rng(1).uniform(0, 3, 500))
    for k in (0, 1, 2):
        for m in (0, 0.5, 2):
            best = pt.fastest_under(est, power_cap_w=30, margin_w=m, k_sigma=k)
            assert best.power_w + m + k * best.power_w_std <= 30


def test_a_margin_stops_at_what_the_power_limit_guarantees():
    # two rows under a 100 W cap by prediction; the faster one is unsure (sigma 20 W), but
    # its 95 W power limit keeps it under the cap whatever the model's spread says
    est = pd.DataFrame(
        {"power_w": [80.0, 90.0], "power_w_std": [1.0, 20.0], "time_ms": [20.0, 10.0]}
    )
    assert pt.fastest_under(est, 100, k_sigma=1.5).time_ms == 20.0  # the margin rules it out
    bounded = est.assign(power_w_max=[300.0, 95.0])
    assert pt.fastest_under(bounded, 100, k_sigma=1.5).time_ms == 10.0
    # a limit above the cap guarantees nothing: the margin applies as before
    assert (
        pt.fastest_under(est.assign(power_w_max=[300.0, 150.0]), 100, k_sigma=1.5).time_ms == 20.0
    )
    # a fixed margin in watts still comes on top of the limit
    with pytest.raises(NoFeasibleModeError):
        pt.fastest_under(bounded.iloc[[1]], 100, margin_w=6.0, k_sigma=1.5)
