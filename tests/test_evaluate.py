"""Scoring a model's cap decisions against a known truth (PowerTrain §5 metrics)."""

import pandas as pd
import pytest

from powertrain.decisions.evaluate import cap_sweep
from powertrain.errors import DataError


def test_cap_sweep_on_a_hand_built_case():
    truth = pd.DataFrame({"time_ms": [100.0, 80.0, 60.0], "power_w": [10.0, 20.0, 30.0]})
    # the model thinks the 30 W mode draws 19 W: it picks it under a 20 W cap (10 W over)
    est = truth.assign(power_w=[10.0, 20.0, 19.0])
    table, s = cap_sweep(est, truth, [10, 20, 30])
    assert table.pick.tolist() == [0, 2, 2]
    assert table.penalty_pct.tolist() == pytest.approx([0.0, -25.0, 0.0])
    assert s["above_limit_pct"] == pytest.approx(100 / 3)
    assert s["above_limit_1w_pct"] == pytest.approx(100 / 3)
    assert s["excess_auc_w"] == pytest.approx(10 / 3)
    assert s["penalty_median_pct"] == 0.0


def test_cap_sweep_bad_input():
    truth = pd.DataFrame({"time_ms": [1.0], "power_w": [5.0]})
    with pytest.raises(DataError, match="same rows"):
        cap_sweep(truth.set_axis([7]), truth, [10])
    with pytest.raises(DataError, match="positive watts"):
        cap_sweep(truth, truth, [])
