"""The optimisation benchmark's metrics (paper §5.2) on hand-built cases, and its bad
input errors."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powertrain.errors import DataError, PowerTrainError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import optimisation as opt  # noqa: E402

pytestmark = pytest.mark.slow

TRUTH = pd.DataFrame({"time_ms": [100.0, 80.0, 60.0, 50.0], "power_w": [10.0, 20.0, 30.0, 40.0]})


def test_optimum_under_each_cap():
    best = opt.optimum_times(TRUTH, np.array([5.0, 10.0, 25.0, 45.0]))
    assert np.isnan(best[0]) and list(best[1:]) == [100.0, 80.0, 50.0]


def test_penalty_al_al1_and_auc_on_a_hand_built_case():
    caps = np.array([20.0, 30.0, 40.0, 50.0])
    best = opt.optimum_times(TRUTH, caps)  # 80, 60, 50, 50
    # picks' true (time, power): exact optimum; slower but safe; faster but 0.5 W over;
    # 2 W over
    s = opt.score_picks(
        np.array([80.0, 80.0, 45.0, 50.0]), np.array([20.0, 20.0, 40.5, 52.0]), best, caps
    )
    np.testing.assert_allclose(s["penalty_pct"], [0.0, 100 * (80 / 60 - 1), -10.0, 0.0])
    np.testing.assert_allclose(s["excess_w"], [0.0, -10.0, 0.5, 2.0])
    m = opt.summarise(s["penalty_pct"], s["power_w"], caps)
    assert m["penalty_median"] == pytest.approx(0.0)
    assert m["al_pct"] == pytest.approx(50.0)  # two picks over the cap
    assert m["al1_pct"] == pytest.approx(25.0)  # one by more than 1 W
    assert m["auc_w"] == pytest.approx((0.5 + 2.0) / 4)  # W per solution


def test_pick_under_falls_back_to_the_lowest_power_when_nothing_fits():
    est = TRUTH.assign(power_w_std=[1.0, 1.0, 1.0, 1.0])
    assert list(opt.pick_under(est, np.array([35.0, 5.0]))) == [2, 0]
    # a 2-sigma margin moves the pick one step down
    assert list(opt.pick_under(est, np.array([31.0]), k_sigma=2.0)) == [1]


@pytest.mark.parametrize(
    "caps,match", [([], "empty"), ([20.0, 0.0], "0.0"), ([-3.0], "-3.0"), ([float("nan")], "nan")]
)
def test_bad_cap_sweeps_are_named(caps, match):
    with pytest.raises(DataError, match=match):
        opt.check_caps(caps)


def test_unknown_strategy_and_foreign_reference_are_named():
    with pytest.raises(DataError, match="'PT@5'"):
        opt.check_strategies(["PT@50", "PT@5"])
    with pytest.raises(PowerTrainError, match="xavier-agx"):
        opt.check_reference("xavier-agx/resnet18", "orin-agx")
    with pytest.raises(DataError, match="'RANDOM'"):
        opt.main(["--strategies", "RANDOM", "--workloads", "lstm"])
    with pytest.raises(DataError, match="empty"):
        opt.main(["--caps", "--workloads", "lstm"])


def test_ground_truth_strategies_run_on_the_twin():
    r = opt.score_workload(
        "orin-agx",
        "lstm",
        "orin-agx/resnet18",
        np.array([20.0, 35.0]),
        1,
        ["MAXN", "PRESET", "ORACLE", "RND@50"],
        n_samples=20,
    )
    assert set(r) == {"MAXN", "PRESET", "ORACLE", "RND@50"}
    assert r["ORACLE"]["penalty_median"] < 5.0 and r["MAXN"]["al_pct"] >= 50.0


def test_the_active_strategy_picks_a_measured_configuration_per_cap():
    """ACT@k: the fastest of the loop's first k measurements under each cap, as grid rows;
    the smaller budget's picks come from a prefix of the same measurements."""
    import powertrain as pt

    dev = pt.get_device("orin-agx")
    grid = dev.profiling_grid().reset_index(drop=True)
    caps = np.array([20.0, 35.0])
    got = dict(
        opt.active_picks(dev, "lstm", "orin-agx/resnet18", grid, 16, caps, 0, ["ACT@8", "ACT@12"])
    )
    assert set(got) == {"ACT@8", "ACT@12"}
    from powertrain.data.corpora import load_corpus

    corpus = load_corpus("orin-agx_lstm_bs16").set_index(list(grid.columns))
    for rows in got.values():
        assert rows.shape == (2,)
        seen = corpus.loc[[tuple(r) for r in grid.iloc[rows].to_numpy()]]
        assert (seen.power_w.to_numpy() <= caps).all()  # measured under each cap
    small = corpus.loc[[tuple(r) for r in grid.iloc[got["ACT@8"]].to_numpy()]].time_ms.to_numpy()
    large = corpus.loc[[tuple(r) for r in grid.iloc[got["ACT@12"]].to_numpy()]].time_ms.to_numpy()
    assert (large <= small).all()  # more measurements never pick a slower measured one


def test_profiled_configurations_per_strategy():
    assert opt.profiled_configurations("PT@50") == 50
    assert opt.profiled_configurations("PT@35+15+obs") == 50
    assert opt.profiled_configurations("ACT@25") == 25
    assert opt.profiled_configurations("ORACLE") == 0
