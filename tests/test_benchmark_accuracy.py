"""The accuracy benchmark's comparison with a saved run (what 'no transfer cell worse by
more than half a point' is checked with), on hand-built summaries."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import accuracy as acc  # noqa: E402


def _summary(time_pt: float, power_pt: float) -> pd.DataFrame:
    return pd.DataFrame(
        [
            dict(target="t", method="PT", n=50, time_median=time_pt, power_median=power_pt),
            dict(target="t", method="NN", n=50, time_median=20.0, power_median=9.0),
        ]
    )


def test_compare_flags_a_cell_that_got_worse_by_more_than_half_a_point(capsys):
    saved = {"summary": _summary(10.0, 5.0).to_dict(orient="records")}
    acc.compare(_summary(10.4, 4.0), saved, "before.json")
    out = capsys.readouterr().out
    cell = next(line for line in out.splitlines() if "PT@50" in line)
    assert "REGRESSED" not in cell and "largest increase: +0.40" in out
    acc.compare(_summary(10.0, 5.7), saved, "before.json")
    out = capsys.readouterr().out
    assert "power   5.00 ->   5.70 REGRESSED" in out and "+0.70" in out
    assert "NN" not in out  # only the transfer's cells are compared


def test_checks_without_floors_leave_the_floor_criterion_out():
    s = _summary(10.0, 5.0).assign(paper_time=None, paper_power=None)
    checks = acc.target_checks(s, {})
    assert len(checks) == 0 or not checks.criterion.str.contains("floor").any()
    checks = acc.target_checks(s, {"t": (9.0, 4.0)})
    assert checks.criterion.str.contains("floor").sum() == 2
