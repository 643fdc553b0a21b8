"""The NVML backend with an injected fake pynvml: its own knobs (threads, workers, batch
size, and the power limit only when allowed), observed clocks as extra columns."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import types
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from powertrain.backends.nvml import NvmlBackend, slug
from powertrain.cli import main
from powertrain.errors import DataError, ProfilingError
from powertrain.profiling.store import MEASURED_COLUMNS, meta_path, raw_log_paths
from powertrain.profiling.sweep import profile

COLUMNS = [
    "device",
    "workload",
    "threads",
    "num_workers",
    "batch_size",
    *MEASURED_COLUMNS,
    "observed_gpu_mhz",
    "observed_mem_mhz",
    "observed_cpu_mhz",
]
JETSON = ["cores", "cpu_mhz", "gpu_mhz", "mem_mhz"]


class FakeNvml(types.ModuleType):
    """The NVML calls the backend needs. Every ``nvml*`` call is recorded; a setter raises
    unless ``setters`` (so a read-only run that calls one fails loudly)."""

    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2

    def __init__(self, fail_init: bool = False, setters: bool = False, fail_restore=False):
        super().__init__("pynvml")
        self.calls: list[str] = []
        self.sets: list[int] = []  # power limits set, in mW, in order
        self.fail_init, self.setters, self.fail_restore = fail_init, setters, fail_restore
        self.up = False
        self.limit_mw = 700_000
        self.sm_mhz = 1755

    def __getattribute__(self, name):
        if name.startswith("nvml"):
            object.__getattribute__(self, "calls").append(name)
            setter = name.startswith("nvmlDeviceSet") or "Reset" in name
            if setter and not object.__getattribute__(self, "setters"):
                raise AssertionError(f"the NVML backend must not call {name} here")
        return object.__getattribute__(self, name)

    def nvmlInit(self):
        if self.fail_init:
            raise RuntimeError("NVML Shared Library Not Found")
        self.up = True

    def nvmlShutdown(self):
        self.up = False

    def nvmlDeviceGetHandleByIndex(self, i):
        if i != 0:
            raise RuntimeError("Invalid Argument")
        return "h0"

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetPowerUsage(self, h):
        return self.limit_mw // 2  # draws half its limit: a row shows the limit it ran under

    def nvmlDeviceGetClockInfo(self, h, kind):
        return self.sm_mhz if kind == 1 else 2619

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        return 1980 if kind == 1 else 2619

    def nvmlSystemGetDriverVersion(self):
        return "550.54.15"

    def nvmlDeviceGetPowerManagementLimit(self, h):
        return self.limit_mw

    def nvmlDeviceGetPowerManagementLimitConstraints(self, h):
        return (100_000, 700_000)

    def nvmlDeviceSetPowerManagementLimit(self, h, mw):
        if self.fail_restore and mw == 700_000:
            raise RuntimeError("Insufficient Permissions")
        self.sets.append(mw)
        self.limit_mw = mw


class FileNvml(FakeNvml):
    """A fake whose power limit lives in a file: it outlives the process that set it, as
    a real GPU's does (starts at 700 W unless the file says otherwise)."""

    def __init__(self, path, **kw):
        super().__init__(setters=True, **kw)
        self.path = Path(path)
        if self.path.exists():
            self.limit_mw = int(self.path.read_text())
        else:
            self._store()

    def _store(self):  # atomic: the test reads it while the child writes
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(str(self.limit_mw))
        os.replace(tmp, self.path)

    def nvmlDeviceSetPowerManagementLimit(self, h, mw):
        super().nvmlDeviceSetPowerManagementLimit(h, mw)
        self._store()


def setters_called(nvml: FakeNvml) -> list[str]:
    return [c for c in nvml.calls if c.startswith("nvmlDeviceSet")]


class Step:
    """A step that records what it ran with; ``fail_at`` batch size raises, ``bad_close``
    makes close() raise."""

    def __init__(self, fail_at: int | None = None, bad_close: bool = False):
        self.ran: list[tuple[int, int, int]] = []  # (batch_size, num_workers, torch threads)
        self.fail_at, self.bad_close = fail_at, bad_close
        self.__name__ = "tiny"

    def __call__(self, batch_size: int, num_workers: int = 0) -> float:
        if batch_size == self.fail_at:
            raise RuntimeError("CUDA out of memory")
        self.ran.append((batch_size, num_workers, torch.get_num_threads()))
        return 0.25

    def close(self) -> None:
        if self.bad_close:
            raise RuntimeError("dataloader worker hung")


def backend(tmp_path, nvml=None, step=None, **kw) -> NvmlBackend:
    return NvmlBackend(
        step or Step(), nvml=nvml or FakeNvml(), sample_period_s=0.005, proc_root=tmp_path, **kw
    )


def test_sweep_writes_its_own_knobs_and_observed_clocks(tmp_path):
    nvml, step = FakeNvml(), Step()
    threads0 = torch.get_num_threads()
    with backend(tmp_path, nvml, step) as b:
        modes = b.modes([2, 4], threads=[1, 2], workers=[0, 1])
        df = profile(b, modes, n_minibatches=3, out=tmp_path / "n.csv", progress=False)
    header = (tmp_path / "n.csv").read_text().splitlines()[0].split(",")
    assert header == COLUMNS and list(df.columns) == COLUMNS
    assert not set(JETSON) & set(header)
    assert len(df) == 8 and df["device"].iloc[0] == "nvidia-h100-80gb-hbm3"
    assert df["power_w"].tolist() == pytest.approx([350.0] * 8)
    # observed: the clock the GPU ran at (1755), not its maximum (1980)
    assert (df["observed_gpu_mhz"] == 1755).all() and (df["observed_mem_mhz"] == 2619).all()
    assert df["observed_cpu_mhz"].isna().all()  # no CPU clock readable: empty, not made up
    assert sorted(set(zip(df["threads"], df["num_workers"], df["batch_size"]))) == sorted(
        (t, w, b) for t in (1, 2) for w in (0, 1) for b in (2, 4)
    )
    assert {(b, w, t) for b, w, t in step.ran} == {
        (b, w, t) for t in (1, 2) for w in (0, 1) for b in (2, 4)
    }  # each row ran with the threads, workers and batch size it says
    assert setters_called(nvml) == []
    assert not nvml.up and torch.get_num_threads() == threads0  # shut down, threads restored
    mb_path, _ = raw_log_paths(tmp_path / "n.csv")
    assert {"threads", "num_workers", "batch_size"} <= set(pd.read_csv(mb_path).columns)
    meta = json.loads(meta_path(tmp_path / "n.csv").read_text())
    assert meta["key_columns"] == ["threads", "num_workers", "batch_size"]
    assert meta["backend"]["clocks_changed"] is False
    assert meta["backend"]["power_limit_changed"] is False
    assert meta["backend"]["driver"] == "550.54.15"
    assert meta["run"]["allow_power_limit"] is False


def test_resume_keys_on_threads_workers_and_batch_size(tmp_path):
    out = tmp_path / "n.csv"
    with backend(tmp_path) as b:
        profile(b, b.modes([2], threads=[1, 2]), n_minibatches=2, out=out, progress=False)
    nvml, step = FakeNvml(), Step()
    nvml.sm_mhz = 1400  # the clock moved: an observation, not a new configuration
    with backend(tmp_path, nvml, step) as b:
        df = profile(b, b.modes([2, 4], threads=[1, 2]), n_minibatches=2, out=out, progress=False)
    assert {r[0] for r in step.ran} == {4}  # only the new batch size ran
    assert len(df) == 4 and not df.duplicated(["threads", "num_workers", "batch_size"]).any()
    assert sorted(df["observed_gpu_mhz"]) == [1400, 1400, 1755, 1755]
    with backend(tmp_path, FakeNvml(setters=True), allow_power_limit=True) as b:
        with pytest.raises(DataError, match="allow_power_limit = false"):
            profile(b, b.modes([2]), n_minibatches=2, out=out, progress=False)


def test_power_limit_refused_unless_allowed(tmp_path):
    nvml = FakeNvml()
    with backend(tmp_path, nvml) as b:
        assert b.config_columns == ("threads", "num_workers", "batch_size")
        with pytest.raises(ProfilingError, match="allow_power_limit=True.*--allow-power-limit"):
            b.modes([2], power_limits_w=[200])
        modes = pd.DataFrame({"power_limit_w": [200], "batch_size": [2]})
        with pytest.raises(ProfilingError, match="power_limit_w.*allow_power_limit=True"):
            profile(b, modes, n_minibatches=2, progress=False)
        with pytest.raises(ProfilingError, match="allow_power_limit=True"):
            b.configure({"power_limit_w": 200, "threads": 1, "batch_size": 2})
    assert setters_called(nvml) == []
    assert "nvmlDeviceGetPowerManagementLimitConstraints" not in nvml.calls


def test_power_limit_set_per_row_and_restored(tmp_path):
    nvml = FakeNvml(setters=True)
    with backend(tmp_path, nvml, allow_power_limit=True) as b:
        assert b.config_columns[0] == "power_limit_w"
        modes = b.modes([2, 4], threads=[1], power_limits_w=[150, 250])
        df = profile(b, modes, n_minibatches=2, out=tmp_path / "p.csv", progress=False)
        assert nvml.limit_mw == 250_000  # still set while the backend is open
    assert list(df.columns) == ["device", "workload", "power_limit_w", *COLUMNS[2:]]
    assert df["power_limit_w"].tolist() == [150, 150, 250, 250]
    assert df["power_w"].tolist() == pytest.approx([75, 75, 125, 125])  # measured under it
    assert nvml.sets == [150_000, 150_000, 250_000, 250_000, 700_000]  # restored at close
    assert nvml.limit_mw == 700_000 and not nvml.up
    meta = json.loads(meta_path(tmp_path / "p.csv").read_text())
    assert meta["backend"]["power_limit_changed"] is True
    assert meta["backend"]["power_limit_w"] == 700 and meta["run"]["allow_power_limit"] is True


def test_power_limit_restored_after_a_failing_step(tmp_path):
    nvml = FakeNvml(setters=True)
    with backend(tmp_path, nvml, Step(fail_at=4), allow_power_limit=True) as b:
        modes = b.modes([2, 4], power_limits_w=[150])
        with pytest.raises(ProfilingError, match="CUDA out of memory"):
            profile(b, modes, n_minibatches=2, progress=False)
        assert nvml.sets == [150_000, 150_000, 700_000]  # on_error restored it at once
    assert nvml.sets == [150_000, 150_000, 700_000]  # and close did not set it again


def test_power_limit_restored_when_the_steps_close_fails(tmp_path):
    nvml = FakeNvml(setters=True)
    b = backend(tmp_path, nvml, Step(bad_close=True), allow_power_limit=True)
    b.configure({"power_limit_w": 200, "threads": 1, "num_workers": 0, "batch_size": 2})
    with pytest.raises(RuntimeError, match="dataloader worker hung"):
        b.close()
    assert nvml.sets == [200_000, 700_000] and not nvml.up


def test_power_limit_restore_failure_says_how_to_restore(tmp_path):
    nvml = FakeNvml(setters=True, fail_restore=True)
    b = backend(tmp_path, nvml, allow_power_limit=True)
    b.configure({"power_limit_w": 200, "threads": 1, "batch_size": 2})
    with pytest.raises(ProfilingError, match=r"sudo nvidia-smi -i 0 -pl 700"):
        b.close()
    assert not nvml.up


def test_power_limit_outside_the_gpus_range_is_refused(tmp_path):
    nvml = FakeNvml(setters=True)
    with backend(tmp_path, nvml, allow_power_limit=True) as b:
        modes = b.modes([2], power_limits_w=[150, 50])
        with pytest.raises(ProfilingError, match=r"row 2: power_limit_w=50 W.*100\.\.700 W"):
            profile(b, modes, n_minibatches=2, progress=False)
        assert nvml.sets == []  # checked before the first row was set
        with pytest.raises(ProfilingError, match=r"power_limit_w=800 W.*100\.\.700 W"):
            b.configure({"power_limit_w": 800, "threads": 1, "batch_size": 2})
    assert nvml.sets == []


def test_jetson_columns_and_bad_counts_are_refused(tmp_path):
    with backend(tmp_path) as b:
        with pytest.raises(DataError, match="cores, gpu_mhz are Jetson settings.*threads"):
            profile(b, pd.DataFrame({"cores": [4], "gpu_mhz": [900]}), batch_size=2)
        with pytest.raises(DataError, match="row 2, column 'num_workers': -1"):
            profile(b, pd.DataFrame({"num_workers": [0, -1]}), batch_size=2)
        with pytest.raises(DataError, match="row 1, column 'threads': 1.5"):
            profile(b, pd.DataFrame({"threads": [1.5]}), batch_size=2)
        filled = b.complete_modes(pd.DataFrame({"batch_size": [2]}))
    assert list(filled.columns) == ["batch_size", "threads", "num_workers"]  # no Jetson ones


def test_observed_cpu_clock_from_cpuinfo(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text("cpu MHz\t\t: 2000.0\n\ncpu MHz\t\t: 3000.0\n")
    with backend(tmp_path) as b:
        df = profile(b, b.modes([2]), n_minibatches=2, progress=False)
    assert df["observed_cpu_mhz"].iloc[0] == pytest.approx(2500.0)


def test_clear_errors(tmp_path, monkeypatch):
    with pytest.raises(ProfilingError, match="NVML could not start.*nvidia-smi"):
        NvmlBackend(Step(), nvml=FakeNvml(fail_init=True))
    with pytest.raises(ProfilingError, match="no GPU 3"):
        NvmlBackend(Step(), nvml=FakeNvml(), gpu_index=3)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    with pytest.raises(ProfilingError, match=r"pip install powertrain\[nvml\]"):
        NvmlBackend(Step())
    with backend(tmp_path) as b:
        with pytest.raises(ProfilingError, match="threads=100000"):
            b.configure({"threads": 100000, "batch_size": 2})
        with pytest.raises(ProfilingError, match="cores: Jetson settings.*threads"):
            b.configure({"cores": 4, "batch_size": 2})


def test_slug():
    assert slug("NVIDIA GeForce RTX 3090") == "nvidia-geforce-rtx-3090"


def _cli(tmp_path, *extra: str) -> list[str]:
    step_file = tmp_path / "job.py"
    step_file.write_text("def step(batch_size):\n    return 1.0\n")
    return [
        "profile",
        "--backend",
        "nvml",
        "--workload",
        f"{step_file}:step",
        "--batch-size",
        "2,4",
        "--threads",
        "1",
        "--num-workers",
        "0",
        "--minibatches",
        "2",
        "--sample-period",
        "0.005",
        "--quiet",
        *extra,
    ]


def test_cli_nvml(tmp_path, monkeypatch):
    nvml = FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    out = tmp_path / "o.csv"
    assert main(_cli(tmp_path, "--out", str(out))) == 0
    df = pd.read_csv(out)
    assert list(df.columns) == COLUMNS
    assert len(df) == 2 and set(df["batch_size"]) == {2, 4} and set(df["threads"]) == {1}
    assert setters_called(nvml) == []


def test_cli_power_limits(tmp_path, monkeypatch, capsys):
    nvml = FakeNvml(setters=True)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    out = tmp_path / "o.csv"
    assert main(_cli(tmp_path, "--out", str(out), "--power-limits", "150,200")) == 1
    assert "--power-limits 150,200: changing the GPU power limit needs --allow-power-limit" in (
        capsys.readouterr().err
    )
    assert nvml.calls == [] and not out.exists()  # refused before NVML was even started
    argv = _cli(tmp_path, "--out", str(out), "--power-limits", "150", "200")
    assert main([*argv, "--allow-power-limit"]) == 0
    df = pd.read_csv(out)
    assert df["power_limit_w"].tolist() == [150, 150, 200, 200]
    assert nvml.sets[-1] == 700_000 and set(nvml.sets[:-1]) == {150_000, 200_000}
    twin = ["profile", "--device", "orin-agx", "--workload", "resnet18", "--allow-power-limit"]
    assert main(twin) == 1
    assert "only --backend nvml sets a GPU power limit" in capsys.readouterr().err
    assert not np.isnan(df["power_w"]).any()


HERE = Path(__file__).resolve().parent


def _sweep_then(tmp_path, sig: int) -> tuple[int, int]:
    """Start a power-limit sweep in a child, send ``sig`` once rows are written; return
    the child's exit status and the limit (mW) it left on the fake GPU."""
    out, limit = tmp_path / "p.csv", tmp_path / "limit_mw"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), str(HERE)])}
    child = subprocess.Popen(
        [sys.executable, str(HERE / "nvml_child.py"), str(out), str(limit)],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 90
        while time.time() < deadline:
            if out.exists() and out.read_text().count("\n") >= 3:  # header + 2 rows
                break
            if child.poll() is not None:
                pytest.fail(f"the sweep ended before the signal: {child.stderr.read()}")
            time.sleep(0.02)
        assert int(limit.read_text()) != 700_000  # mid-sweep: the sweep's limit is set
        child.send_signal(sig)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    return child.returncode, int(limit.read_text())


@pytest.mark.slow
@pytest.mark.system
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stop_signal_restores_the_power_limit(tmp_path, sig):
    rc, left = _sweep_then(tmp_path, sig)
    assert left == 700_000  # restored, whatever the signal
    assert rc != 0  # and the run still ends as stopped
    rows = pd.read_csv(tmp_path / "p.csv")
    assert len(rows) >= 2 and rows["power_w"].notna().all()  # measured rows kept


@pytest.mark.slow
@pytest.mark.system
def test_after_a_sigkill_the_next_run_restores_the_recorded_limit(tmp_path):
    rc, left = _sweep_then(tmp_path, signal.SIGKILL)
    assert rc == -signal.SIGKILL and left != 700_000  # nobody could restore it
    meta = json.loads(meta_path(tmp_path / "p.csv").read_text())
    assert meta["backend"]["power_limit_w"] == 700  # recorded before the first change
    nvml = FileNvml(tmp_path / "limit_mw")  # the GPU as the killed run left it
    with pytest.warns(RuntimeWarning, match=r"the run that started this output found 700 W"):
        with backend(tmp_path, nvml, allow_power_limit=True, handle_signals=False) as b:
            modes = b.modes([2], threads=[1], power_limits_w=[150])
            profile(b, modes, n_minibatches=3, out=tmp_path / "p.csv", progress=False)
    assert nvml.limit_mw == 700_000  # the recorded limit, not the one found


class RefusingNvml(FakeNvml):
    """A setter that refuses without changing anything (no root)."""

    def nvmlDeviceSetPowerManagementLimit(self, h, mw):
        raise RuntimeError("Insufficient Permissions")


class ClampingNvml(FakeNvml):
    """A driver that clamps a restore to 650 W."""

    def nvmlDeviceSetPowerManagementLimit(self, h, mw):
        super().nvmlDeviceSetPowerManagementLimit(h, min(mw, 650_000))


def test_a_failed_setter_is_not_reported_as_a_failed_restore(tmp_path):
    nvml = RefusingNvml(setters=True)
    b = backend(tmp_path, nvml, allow_power_limit=True, handle_signals=False)
    with pytest.raises(ProfilingError, match="power_limit_w=200: NVML refused to set it"):
        b.configure({"power_limit_w": 200, "threads": 1, "batch_size": 2})
    b.close()  # nothing changed, so nothing to restore and no second error
    assert setters_called(nvml) == ["nvmlDeviceSetPowerManagementLimit"]


def test_a_clamped_restore_is_read_back_and_reported(tmp_path):
    nvml = ClampingNvml(setters=True)
    b = backend(tmp_path, nvml, allow_power_limit=True, handle_signals=False)
    b.configure({"power_limit_w": 200, "threads": 1, "batch_size": 2})
    with pytest.raises(ProfilingError, match=r"to 700 W left it at 650 W; restore it by hand"):
        b.close()


@pytest.mark.system
def test_signal_handlers_are_put_back_at_close(tmp_path):
    before = signal.getsignal(signal.SIGTERM)
    b = backend(tmp_path, FakeNvml(setters=True), allow_power_limit=True)
    assert signal.getsignal(signal.SIGTERM) is not before
    b.close()
    assert signal.getsignal(signal.SIGTERM) is before
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        backend(tmp_path, FakeNvml()).close()  # read-only: no handlers at all
    assert signal.getsignal(signal.SIGTERM) is before
