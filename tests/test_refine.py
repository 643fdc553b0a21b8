"""Refinement sampling: profile the modes a first model would pick, then use what was measured."""

import numpy as np
import pandas as pd
import pytest

import powertrain as pt
from powertrain.errors import DataError


def _est(n=400, seed=0):
    rng = np.random.default_rng(seed)
    dev = pt.get_device("orin-agx")
    modes = dev.profiling_grid().sample(n, random_state=seed).reset_index(drop=True)
    power = rng.uniform(12, 60, n)
    return modes.assign(power_w=power, time_ms=3000 / power + rng.uniform(0, 40, n))


def test_refine_picks_the_predicted_winners_across_the_range_and_skips_profiled_modes():
    est = _est()
    first = est.sample(30, random_state=1)
    picks = pt.refine_modes(est, 10, (17, 50), exclude=first)
    assert len(picks) == 10
    assert not picks.index.duplicated().any()
    keys = ["cores", "cpu_mhz", "gpu_mhz", "mem_mhz"]
    profiled = set(map(tuple, first[keys].to_numpy()))
    assert not any(tuple(r) in profiled for r in picks[keys].to_numpy())
    # every pick is on the predicted front (nothing both faster and cheaper)
    front = pt.pareto_front(est.drop(first.index))
    assert set(picks.index) <= set(front.index) | set(est.index[(est.power_w > 50)])
    # the winner under the top of the range is among them unless it was profiled
    top = pt.fastest_under(est.drop(first.index), 50.0)
    assert top.name in picks.index


def test_refine_bad_arguments_are_named():
    est = _est()
    with pytest.raises(DataError, match="n must be a positive integer"):
        pt.refine_modes(est, 0, (17, 50))
    with pytest.raises(DataError, match="power_range"):
        pt.refine_modes(est, 5, (50, 17))


def test_with_observed_replaces_only_profiled_rows_and_zeroes_their_spread():
    est = _est().assign(time_ms_std=1.0, power_w_std=1.0)
    measured = est.iloc[[3, 7]].assign(time_ms=[1.0, 2.0], power_w=[3.0, 4.0])
    out = pt.with_observed(est, measured)
    assert out.time_ms.iloc[3] == 1.0 and out.power_w.iloc[7] == 4.0
    assert out.power_w_std.iloc[3] == 0.0 and out.power_w_std.iloc[4] == 1.0
    pd.testing.assert_frame_equal(out.drop(index=[3, 7]), est.drop(index=[3, 7]))


def test_refine_on_a_duplicated_index_picks_by_position():
    """Two tables concatenated keep their labels; the picks are the same rows as on a
    clean index, not a TypeError."""
    est = _est()
    clean = pt.refine_modes(est, 6, (17, 50))
    doubled = pd.concat([est.iloc[:200], est.iloc[200:]]).set_axis(list(range(200)) * 2, axis=0)
    picks = pt.refine_modes(doubled, 6, (17, 50))
    cols = ["cores", "cpu_mhz", "gpu_mhz", "mem_mhz", "time_ms"]
    assert picks[cols].to_numpy().tolist() == clean[cols].to_numpy().tolist()
