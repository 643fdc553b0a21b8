"""The one rule that tells measured rows from predicted ones (schema.measured_rows), and
the commands that use it: `select` judges a profiling output's rows by their measured
power, as decide does; `profile --strategy active` never resumes from predictions."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import powertrain as pt
from powertrain.cli import main
from powertrain.decisions.optimise import pick_under
from powertrain.errors import DataError
from powertrain.schema import check_measurements, measured_rows

REPO = Path(pt.__file__).resolve().parents[1]
MEASURED = REPO / "datasets" / "orin-agx_resnet18_bs16.csv"


def profiling_output(tmp_path: Path) -> Path:
    """Two rows of a real profiling output: the fastest measured at 29.9 W with a sample
    spread of 0.1 W (3 sigma of it would be over a 30 W cap), a slower one at 20 W."""
    df = pd.read_csv(MEASURED).head(2).copy()
    df["time_ms"] = [100.0, 130.0]
    df["power_w"] = [29.9, 20.0]
    df["power_w_std"] = [0.1, 0.1]
    path = tmp_path / "m.csv"
    df.to_csv(path, index=False)
    return path


def test_the_rule():
    prof = pd.read_csv(MEASURED).head(3)
    assert measured_rows(prof).all()  # minibatches and power samples recorded
    predicted = prof.drop(columns=["n_minibatches", "n_power_samples"])
    assert not measured_rows(predicted).any()  # a spread alone proves nothing
    prof.loc[1, "n_power_samples"] = np.nan  # a row with no power read is no measurement
    assert measured_rows(prof).tolist() == [True, False, True]
    flagged = pd.DataFrame({"measured": [True, "False", "1", 0]})
    assert measured_rows(flagged).tolist() == [True, False, True, False]
    with pytest.raises(DataError, match=r"t\.csv: row 2, column 'measured': must be True"):
        measured_rows(pd.DataFrame({"measured": [True, "maybe"]}), "t.csv")
    with pytest.raises(DataError, match=r"e\.csv: row 1 is not a measurement.*a prediction"):
        check_measurements(predicted, "e.csv")


def test_select_judges_a_profiling_output_by_its_measurements(tmp_path, capsys):
    path = profiling_output(tmp_path)
    assert main(["select", str(path), "--power-cap", "30"]) == 0
    out = capsys.readouterr()
    assert "pick under 30 W: measured" in out.err and "sigma" not in out.err
    pick = pd.read_csv(io.StringIO(out.out))
    assert pick["time_ms"].tolist() == [100.0]  # the fastest measured under the cap
    api = pt.select(pd.read_csv(path), {16: 1.0}, power_cap_w=30)
    assert api.time_ms == 100.0 and api.attrs["how"] == "measured"
    # the same rows as predictions keep 3 sigma of their spread below the cap
    est = pd.read_csv(path).drop(columns=["n_minibatches", "n_power_samples"])
    est.to_csv(path, index=False)
    assert main(["select", str(path), "--power-cap", "30"]) == 0
    assert "predicted with a margin (3 sigma)" in capsys.readouterr().err


def test_a_mixed_table_keeps_the_margin_on_predicted_rows_only():
    est = pd.DataFrame(
        {
            "time_ms": [90.0, 100.0, 130.0],
            "power_w": [29.0, 29.9, 20.0],
            "power_w_std": [2.0, 0.1, 0.1],
            "measured": [False, True, True],
        }  # fmt: skip
    )
    best = pick_under(est, 30)
    assert best.time_ms == 100.0 and best.attrs["how"] == "measured"  # 29 + 3 x 2 > 30
    assert pick_under(est, 30, k_sigma=0).attrs["how"] == "predicted"  # 29 fits plainly


@pytest.mark.parametrize(
    ("column", "value", "match"),
    [
        ("gpu_mhz", "xyz", r"m\.csv: row 2, column 'gpu_mhz'"),
        ("gpu_mhz", 999.9, r"m\.csv: row 2, column 'gpu_mhz': 999\.9 MHz is not a orin-agx"),
        ("power_w", "x", r"m\.csv: row 2, column 'power_w'"),
        ("power_w", -3, r"m\.csv: row 2, column 'power_w': -3 must be > 0"),
    ],
)
def test_select_errors_name_the_file_row_and_column(tmp_path, capsys, column, value, match):
    path = profiling_output(tmp_path)
    df = pd.read_csv(path).astype({column: object})
    df.loc[1, column] = value
    df.to_csv(path, index=False)
    assert main(["select", str(path), "--power-cap", "30"]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert re.search(match, err), err


def test_active_profiling_never_resumes_from_predictions(tmp_path, capsys):
    est = tmp_path / "est.csv"
    df = pd.read_csv(MEASURED).head(3).drop(columns=["n_minibatches", "n_power_samples"])
    df.to_csv(est, index=False)  # a predict output's shape: configuration, time, power, std
    before = est.read_bytes()
    argv = ["profile", "--strategy", "active", "--device", "orin-agx", "--workload",
            "resnet18", "--power-cap", "30", "--out", str(est), "--quiet"]  # fmt: skip
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"--out {est}: row 1 is not a measurement" in err
    assert est.read_bytes() == before
