"""benchmarks/super_caps.py: the Orin Nano Super held-out rows are what it says they are."""

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import super_caps  # noqa: E402


def test_a_preset_read_as_a_budget_is_picked_by_its_name():
    presets = pd.DataFrame(
        {"name": ["15W", "25W", "MAXN_SUPER"], "budget_w": [15, 25, np.nan],
         "time_ms": [100.0, 75.0, 69.0], "power_w": [6.1, 7.8, 8.7]}
    )  # fmt: skip
    assert super_caps._preset_by_name(presets, 20.0) == 0  # "15W" fits a 20 W cap
    assert super_caps._preset_by_name(presets, 30.0) == 1  # MAXN_SUPER never does
    assert super_caps._preset_by_name(presets, 10.0) == 0  # none: the lowest named


@pytest.mark.slow
def test_the_quick_run_holds_out_every_unprofiled_mode_and_picks_under_each_cap(tmp_path):
    out = super_caps.main(["--quick", "--n", "20", "--json", str(tmp_path / "r.json")])
    acc = out["accuracy"][0]
    assert acc["n_held_out"] == out["modes"] - 20 and acc["n_profiled"] == 20
    table = pd.DataFrame(out["cap_table"])
    assert table.cap_w.is_monotonic_increasing
    fits = table.dropna(subset=["predicted_w"])
    assert (fits.predicted_w <= fits.cap_w + 1e-9).all()  # predicted to fit, by construction
    assert {d["strategy"] for d in out["decisions"]} == {
        "PT@20", "PT@20+3s", "PRESET by name", "MAXN_SUPER"
    }  # fmt: skip
    assert (tmp_path / "r.json").exists()
