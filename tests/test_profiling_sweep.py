"""The sweep: stabilisation, sparse sensors, crash-safe output and resume (SIGKILL too)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sim_backend import SimBoard

from powertrain.errors import DataError, ProfilingError
from powertrain.profiling import store
from powertrain.profiling.aggregate import power_per_minibatch, summarise_window
from powertrain.profiling.store import meta_path, raw_log_paths
from powertrain.profiling.sweep import profile, profile_one
from powertrain.schema import CONFIG_COLUMNS

HERE = Path(__file__).parent
#: the summary columns of a backend with the default configuration columns and no knobs
RESULT_COLUMNS = ("device", "workload", *CONFIG_COLUMNS, *store.MEASURED_COLUMNS)


def _modes(n: int = 6) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "cores": 4,
            "cpu_mhz": 1000.0,
            "gpu_mhz": [300.0 + 100 * i for i in range(n)],
            "mem_mhz": 2133.0,
        }
    )


def _check_no_duplicates(out: Path, n_expected: int) -> pd.DataFrame:
    df = pd.read_csv(out)
    keys = df[["cores", "cpu_mhz", "gpu_mhz", "mem_mhz", "batch_size"]]
    assert len(df) == n_expected and not keys.duplicated().any()
    mb, pw = (pd.read_csv(p) for p in raw_log_paths(out))
    # each configuration's raw minibatches come from exactly one run
    clean = mb[mb["clean"]].groupby("gpu_mhz").size()
    assert clean.to_dict() == df.set_index("gpu_mhz")["n_minibatches"].to_dict()
    assert set(pw["gpu_mhz"]) == set(df["gpu_mhz"])
    return df


def test_power_settles_first_minibatch_discarded_and_power_not_zero():
    board = SimBoard()
    row, mb, pw = profile_one(board, {**_modes(1).iloc[0], "batch_size": 8}, n_minibatches=40)
    assert row["n_minibatches"] >= 40 and row["n_power_samples"] >= 2
    assert not mb["clean"].iloc[0]  # warm-up discarded
    # the clean window starts after the power settled: readings within 3 % of the target
    assert row["power_w"] == pytest.approx(SimBoard.target_w({"gpu_mhz": 300}), rel=0.03)
    assert row["stable"]
    assert mb.loc[mb["clean"], "start_s"].min() >= 2.0


def test_fast_mode_extends_window_instead_of_averaging_zero():
    """1 ms minibatches: 40 of them fit between two 1 Hz readings (PowerTrain §2.5)."""
    row, mb, _ = profile_one(SimBoard(fixed_ms=1.0), {**_modes(1).iloc[0], "batch_size": 8})
    assert row["n_power_samples"] >= 2
    assert row["n_minibatches"] > 40  # the window grew backwards to hold the readings
    assert row["power_w"] == pytest.approx(13.0, rel=0.03)
    assert row["time_ms"] == pytest.approx(1.0)


def test_silent_sensor_in_window_gives_nan_not_zero():
    board = SimBoard(sensor_until=4.0)  # readings stop 4 s after each mode change
    with pytest.warns(RuntimeWarning, match="NaN"):
        row, _, _ = profile_one(board, {**_modes(1).iloc[0], "batch_size": 8}, n_minibatches=400)
    assert np.isnan(row["power_w"]) and row["n_power_samples"] == 0 and not row["stable"]


def test_dead_sensor_is_a_clear_error():
    with pytest.raises(ProfilingError, match="no reading"):
        profile_one(SimBoard(dead=True), {**_modes(1).iloc[0], "batch_size": 8})


def test_power_replicated_to_minibatch_count():
    starts = np.arange(4.0)
    w = power_per_minibatch(starts, starts + 1, np.array([[0.5, 10.0], [2.5, 20.0]]))
    assert list(w) == [10.0, 10.0, 20.0, 20.0]  # nearest reading stands in for the others
    assert np.isnan(power_per_minibatch(starts, starts + 1, np.empty((0, 2)))).all()
    row = summarise_window(starts, starts + 1, np.ones(4), np.empty((0, 2)))
    assert np.isnan(row["power_w"]) and row["n_power_samples"] == 0


def test_profile_writes_fsynced_rows_raw_logs_and_provenance(tmp_path):
    out = tmp_path / "s.csv"
    df = profile(SimBoard(), _modes(3), batch_size=8, n_minibatches=10, out=out, progress=False)
    assert len(df) == 3 and list(df.columns) == list(RESULT_COLUMNS)
    _check_no_duplicates(out, 3)
    meta = meta_path(out).read_text()
    assert '"device": "sim-board"' in meta and '"workload": "sim-wl"' in meta


def test_rerun_skips_done_rows(tmp_path):
    out = tmp_path / "s.csv"
    profile(SimBoard(), _modes(3), batch_size=8, n_minibatches=5, out=out, progress=False)
    board = SimBoard()
    df = profile(board, _modes(5), batch_size=8, n_minibatches=5, out=out, progress=False)
    assert len(board.configured) == 2 and len(df) == 5
    _check_no_duplicates(out, 5)


def test_failure_calls_on_error_and_resume_completes(tmp_path):
    out = tmp_path / "s.csv"
    board = SimBoard(fail_after=2)
    with pytest.raises(ProfilingError, match="simulated"):
        profile(board, _modes(5), batch_size=8, n_minibatches=5, out=out, progress=False)
    assert board.errors == 1 and len(pd.read_csv(out)) == 2
    profile(SimBoard(), _modes(5), batch_size=8, n_minibatches=5, out=out, progress=False)
    _check_no_duplicates(out, 5)


def test_killed_between_raw_logs_and_summary_row(tmp_path, monkeypatch):
    out = tmp_path / "s.csv"
    real = store.append_csv
    calls = {"n": 0}

    def dying_append(df, path, fsync=True, out_path=None):
        if Path(path) == out:
            calls["n"] += 1
            if calls["n"] == 3:  # raw logs of the 3rd configuration are on disk, its row is not
                raise KeyboardInterrupt
        real(df, path, fsync, out_path)

    monkeypatch.setattr(store, "append_csv", dying_append)
    with pytest.raises(KeyboardInterrupt):
        profile(SimBoard(), _modes(5), batch_size=8, n_minibatches=5, out=out, progress=False)
    mb_path, _ = raw_log_paths(out)
    assert pd.read_csv(mb_path)["gpu_mhz"].nunique() == 3  # one orphan in the raw log
    monkeypatch.setattr(store, "append_csv", real)
    profile(SimBoard(), _modes(5), batch_size=8, n_minibatches=5, out=out, progress=False)
    _check_no_duplicates(out, 5)


def test_torn_last_line_is_repaired(tmp_path):
    out = tmp_path / "s.csv"
    profile(SimBoard(), _modes(3), batch_size=8, n_minibatches=5, out=out, progress=False)
    with open(out, "a") as f:
        f.write("sim-board,sim-wl,4,1000.0,60")  # the process died inside a write
    df = profile(SimBoard(), _modes(4), batch_size=8, n_minibatches=5, out=out, progress=False)
    assert len(df) == 4
    _check_no_duplicates(out, 4)


@pytest.mark.slow
@pytest.mark.system
def test_sigkill_mid_sweep_then_resume(tmp_path):
    out = tmp_path / "k.csv"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")]),
    }
    child = subprocess.Popen([sys.executable, str(HERE / "sweep_child.py"), str(out)], env=env)
    try:
        deadline = time.time() + 180  # a loaded machine starts the child slowly
        while time.time() < deadline:
            if out.exists() and out.read_text().count("\n") >= 4:  # header + 3 rows
                break
            if child.poll() is not None:
                pytest.fail("the sweep finished before it could be killed")
            time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
    done_before = len(pd.read_csv(out))
    assert 3 <= done_before < 24
    board = SimBoard()
    modes = pd.DataFrame(
        {
            "cores": 4,
            "cpu_mhz": 1000.0,
            "gpu_mhz": [200.0 + 50 * i for i in range(24)],
            "mem_mhz": 2133.0,
        }
    )
    profile(board, modes, batch_size=8, n_minibatches=10, out=out, progress=False)
    assert len(board.configured) == 24 - done_before
    _check_no_duplicates(out, 24)


def test_output_of_another_device_or_workload_is_refused(tmp_path):
    out = tmp_path / "s.csv"
    profile(SimBoard(), _modes(2), batch_size=8, n_minibatches=5, out=out, progress=False)
    other = SimBoard()
    other.workload_name = "bert-base"
    with pytest.raises(DataError, match="written for workload sim-wl.*another output file"):
        profile(other, _modes(2), batch_size=8, n_minibatches=5, out=out, progress=False)
    meta_path(out).unlink()
    other = SimBoard()
    other.device_name = "orin-agx"
    with pytest.raises(DataError, match="device sim-board"):
        profile(other, _modes(2), batch_size=8, n_minibatches=5, out=out, progress=False)


def test_output_with_other_columns_is_refused(tmp_path):
    out = tmp_path / "s.csv"
    pd.DataFrame({"device": ["sim-board"], "x": [1]}).to_csv(out, index=False)
    with pytest.raises(DataError, match="columns differ"):
        profile(SimBoard(), _modes(2), batch_size=8, n_minibatches=5, out=out, progress=False)


def test_knob_columns_identify_configurations_and_observed_ones_do_not(tmp_path):
    out = tmp_path / "s.csv"
    modes = _modes(1).merge(pd.DataFrame({"num_workers": [0, 2]}), how="cross")
    board = SimBoard(knobs=("num_workers",), observed=("observed_gpu_mhz",))
    df = profile(board, modes, batch_size=8, n_minibatches=5, out=out, progress=False)
    assert list(df.columns) == [
        *RESULT_COLUMNS[:7],
        "num_workers",
        *store.MEASURED_COLUMNS,
        "observed_gpu_mhz",
    ]
    assert len(df) == 2 and list(df["num_workers"]) == [0, 2]  # differ only by the knob
    assert (df["gpu_mhz"] == 300.0).all()  # the requested clock stays what was set
    assert (df["observed_gpu_mhz"] == 999.0).all()  # the observation sits beside it
    board2 = SimBoard(knobs=("num_workers",), observed=("observed_gpu_mhz",))
    profile(board2, modes, batch_size=8, n_minibatches=5, out=out, progress=False)
    assert board2.configured == []  # resumed on the configuration columns alone


def test_observed_column_may_not_shadow_a_configuration_column():
    with pytest.raises(ProfilingError, match="gpu_mhz declared twice"):
        profile(SimBoard(observed=("gpu_mhz",)), _modes(1), batch_size=8, progress=False)


class LevelBoard(SimBoard):
    """A board whose only knob is a 'level': the sweep must need no schema column."""

    config_columns = ("level", "batch_size")

    def check_modes(self, modes, source="modes"):
        return modes

    def configure(self, config):
        super().configure({**config, "gpu_mhz": 100.0 * config["level"]})


def test_sweep_follows_the_backends_configuration_columns(tmp_path, capsys):
    out = tmp_path / "s.csv"
    modes = pd.DataFrame({"level": [3, 5]})
    df = profile(LevelBoard(), modes, batch_size=8, n_minibatches=3, out=out, progress=True)
    columns = ["device", "workload", "level", "batch_size", *store.MEASURED_COLUMNS]
    assert list(df.columns) == columns
    assert list(pd.read_csv(out).columns) == list(df.columns)
    assert df["time_ms"].tolist() == pytest.approx([2e4 / 300, 2e4 / 500])
    assert "level=3" in capsys.readouterr().err
    again = LevelBoard()
    profile(again, pd.DataFrame({"level": [3, 5, 7]}), batch_size=8, n_minibatches=3, out=out)
    assert [c["level"] for c in again.configured] == [7]  # resumed on level + batch_size
    assert len(pd.read_csv(out)) == 3


def test_resets_recomputed_for_the_rows_still_to_run():
    class Ordered(SimBoard):
        def sweep_order(self, modes):
            from powertrain.devices.device import get_device

            return get_device("orin-agx").sweep_order(modes)

    modes = pd.DataFrame(
        {
            "cores": 4,
            "cpu_mhz": [2201.6, 115.2, 2201.6, 115.2],
            "gpu_mhz": [1300.5, 1300.5, 114.75, 114.75],
            "mem_mhz": 3199.0,
        }
    )
    board = Ordered()
    profile(board, modes, batch_size=8, n_minibatches=3, progress=False)
    assert board.resets == 1
    assert [c["reset_before"] for c in board.configured] == [False, False, True, False]


def test_progress_bar_shows_configuration_and_eta(capsys):
    profile(SimBoard(), _modes(2), batch_size=8, n_minibatches=3, progress=True)
    err = capsys.readouterr().err
    assert "gpu=300" in err and "b=8" in err and "<" in err and "board" in err
