"""The cross-device benchmark's split of cases and its verdicts, on hand-built records."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import cross_device as cd  # noqa: E402


def test_held_out_cases_are_never_tuning_and_the_new_workload_is_said():
    splits = {key: split for split, key, _, _ in cd.cases(quick=False)}
    tuning_devices = {k.split("_")[0] for k, s in splits.items() if s == "tuning"}
    held = {k.split("_")[0] for k, s in splits.items() if s != "tuning"}
    assert held == {"orin-nx-16gb", "orin-nano-super"} and not held & tuning_devices
    assert splits["orin-nx-16gb_transformer-char"] == "held-out workload"
    assert splits["orin-nano-super_resnet18"] == "held-out device"


def _row(ref: str, draw: int, t: float, seen: bool = False) -> dict:
    return {"split": "held-out device", "case": "x_resnet18", "reference": ref,
            "device_seen": seen, "draw": draw, "time_mape": t, "power_mape": 5.0,
            "transfer_s": 1.0, "floor_time": 10.0, "floor_power": 4.0}  # fmt: skip


def test_the_verdict_compares_the_median_with_1_15x_the_floor():
    rows = [_row("a", d, t) for d, t in enumerate((11.0, 11.5, 12.0))]
    rows += [_row("c", d, t) for d, t in enumerate((12.0, 12.5, 13.0))]
    rows += [_row("b", d, t, seen=True) for d, t in enumerate((11.6, 11.7, 11.8))]
    s = cd.summary(rows).set_index("reference")
    assert s.loc["a", "target_met"] and not s.loc["b", "target_met"]
    assert not s.loc["c", "target_met"]
    text = cd.report(s.reset_index())
    assert "b (seen)" in text and "MET" in text and "  seen" in text and "MISSED" in text


def test_calibration_summary_compares_expected_loss_with_the_realised_penalty():
    import calibration as cal
    import pandas as pd

    rows = [
        {"device": "d", "confidence": 0.95, "expected_loss_pct": 1.0, "penalty_pct": 0.0},
        {"device": "d", "confidence": 0.95, "expected_loss_pct": 1.0, "penalty_pct": 4.0},
        {"device": "d", "confidence": 0.20, "expected_loss_pct": 4.0, "penalty_pct": -1.0},
    ]
    s = cal.summary(pd.DataFrame(rows)).iloc[0]
    assert s.mean_expected_loss_pct == 2.0 and s.mean_realised_penalty_pct == 4.0 / 3
    assert s.ratio == 1.5 and s.sure_picks == 2 and s.sure_unbeaten_pct == 50.0


def test_calibration_verdicts_name_each_target_and_call_no_sure_pick_missed():
    import calibration as cal
    import pandas as pd

    rows = [
        {"device": "d", "confidence": 0.5, "expected_loss_pct": 1.0, "penalty_pct": p,
         "low_end": i == 0, "over_cap_w": -0.2}
        for i, p in enumerate((8.0, 0.0, 1.0, 2.0))
    ] + [{"device": "d", "confidence": 0.0, "expected_loss_pct": 1.0, "penalty_pct": None,
          "low_end": False, "over_cap_w": None}]  # fmt: skip
    s = cal.summary(pd.DataFrame(rows))
    r = s.iloc[0]
    assert r.no_pick == 1 and r.over_cap_1w == 0 and r.low_end_mean_pct == 8.0
    assert r.median_pct == 1.5 and r.mean_pct == 2.75
    lines = cal.verdicts(s, 50)
    assert "MET  d: median <= 1.5 % (1.50)" in lines
    assert any(x.startswith("MISSED  d: no cap without a pick (1)") for x in lines)
    assert any(x.startswith("MISSED  d: picks >= 90 % sure") and "of 0" in x for x in lines)
    assert [x for x in cal.verdicts(s, 25) if "median" in x] == ["MET  d: median <= 4.0 % (1.50)"]
