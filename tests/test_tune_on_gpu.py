"""tools/tune_on_gpu.py against the fake NVML: a real torch job tuned hands-off (no NVML
setter called), every run trains at its pick once settled, and what it records adds up."""

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import tune_on_gpu  # noqa: E402
from test_profiling_nvml import FakeNvml  # noqa: E402

from powertrain.backends.nvml_state import STATE_DIR_ENV  # noqa: E402


@pytest.mark.slow
def test_a_hands_off_tuned_job_calls_no_setter_and_settles_at_its_pick(tmp_path, monkeypatch):
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    nvml = FakeNvml(setters=False)  # any setter or reset raises
    out = tmp_path / "runs"
    argv = ["--out", str(out), "--small", "--device", "cpu", "--budget-s", "300"]
    argv += ["--after", "10", "--budget", "3", "--seeds", "0", "--cap-w", "300"]
    argv += ["--reference-epochs", "20", "--transfer-epochs", "5"]
    assert tune_on_gpu.main(argv, nvml=nvml) == 0
    assert not [c for c in nvml.calls if c.startswith("nvmlDeviceSet") or "Reset" in c]
    runs = json.loads((out / "runs.json").read_text())["runs"]
    assert [r["run"] for r in runs] == ["s0-plain-bg", "s0-safe-bg", "s0-plain-fg"]
    for r in runs:
        steps = pd.read_csv(out / f"{r['run']}.steps.csv")
        measured = pd.read_csv(out / f"{r['run']}.measured.csv")
        assert r["finished"] and steps.settled.sum() == 10  # --after steps at the pick
        assert (steps[steps.settled].batch_size == r["config"]["batch_size"]).all()
        assert len(measured) == r["n_measured"] <= 3
        assert r["over_cap_time_share"] == 0.0  # the fake draws 225 W, under 300 W
        assert (steps.wait_ms >= 0).all() and r["wait_ms_max"] == steps.wait_ms.max()


def test_a_spent_budget_runs_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    argv = ["--out", str(tmp_path), "--small", "--device", "cpu", "--budget-s", "0"]
    assert tune_on_gpu.main([*argv, "--reference-epochs", "2"], nvml=FakeNvml()) == 0
    assert "s0-plain-bg: not run, the budget is spent" in capsys.readouterr().out
    assert not (tmp_path / "runs.json").exists()
