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
from powertrain.backends.nvml_state import STATE_DIR_ENV
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
#: the fake GPU's power limit at start: not its maximum (700 W), so restoring the
#: maximum instead of the limit found at start fails the tests
START_MW = 450_000


#: the fake GPU's SM clocks supported with each memory clock (MHz)
SM_CLOCKS = {2619: (1980, 1755, 1410, 1200, 990, 705), 1593: (1410, 1200, 990, 705)}
IDLE_SM_MHZ = 1755  # what the SM clock reads when not locked


class FakeNvml(types.ModuleType):
    """The NVML calls the backend needs. Every ``nvml*`` call is recorded; a setter raises
    unless ``setters`` (so a read-only run that calls one fails loudly). Locked clocks
    show in the clocks read; ``mem_clocks`` lists the supported memory clocks (one, as
    an H100's, by default); ``ignore_lock``: a driver that accepts a lock and ignores it."""

    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2

    def __init__(
        self, fail_init=False, setters=False, fail_restore=False, mem_clocks=(2619,),
        ignore_lock=False, fail_reset=False,
    ):  # fmt: skip
        super().__init__("pynvml")
        self.calls: list[str] = []
        self.sets: list[int] = []  # power limits set, in mW, in order
        self.fail_init, self.setters, self.fail_restore = fail_init, setters, fail_restore
        self.mem_clocks, self.ignore_lock, self.fail_reset = mem_clocks, ignore_lock, fail_reset
        self.up = False
        self.limit_mw = START_MW
        self.sm_mhz = IDLE_SM_MHZ
        self.sm_lock: int | None = None  # the locked SM clock, None = free
        self.mem_lock: int | None = None
        self.locks: list[tuple[str, int]] = []  # ("sm" | "mem", MHz) in order

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

    def nvmlDeviceGetUUID(self, h):
        return "GPU-1234abcd-0000"

    def nvmlDeviceGetPowerUsage(self, h):
        return self.limit_mw // 2  # draws half its limit: a row shows the limit it ran under

    def nvmlDeviceGetClockInfo(self, h, kind):
        if kind == 1:
            return self.sm_lock if self.sm_lock and not self.ignore_lock else self.sm_mhz
        return self.mem_lock or max(self.mem_clocks)

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        return 1980 if kind == 1 else 2619

    def nvmlSystemGetDriverVersion(self):
        return "550.54.15"

    def nvmlDeviceGetPowerManagementLimit(self, h):
        return self.limit_mw

    def nvmlDeviceGetPowerManagementLimitConstraints(self, h):
        return (100_000, 700_000)

    def nvmlDeviceSetPowerManagementLimit(self, h, mw):
        assert h == "h0", "a setter must be given the GPU's handle"
        if self.fail_restore and mw == START_MW:
            raise RuntimeError("Insufficient Permissions")
        self.sets.append(mw)
        self.limit_mw = mw

    def nvmlDeviceGetSupportedMemoryClocks(self, h):
        return list(self.mem_clocks)

    def nvmlDeviceGetSupportedGraphicsClocks(self, h, mem):
        return list(SM_CLOCKS[mem])

    def nvmlDeviceSetGpuLockedClocks(self, h, lo, hi):
        assert h == "h0", "a setter must be given the GPU's handle"
        assert lo == hi
        self.locks.append(("sm", lo))
        self.sm_lock = lo
        self._store()

    def nvmlDeviceResetGpuLockedClocks(self, h):
        assert h == "h0", "a setter must be given the GPU's handle"
        if self.fail_reset:
            raise RuntimeError("Insufficient Permissions")
        self.sm_lock = None
        self._store()

    def nvmlDeviceSetMemoryLockedClocks(self, h, lo, hi):
        assert h == "h0", "a setter must be given the GPU's handle"
        if len(self.mem_clocks) < 2:
            raise RuntimeError("Not Supported")
        self.locks.append(("mem", lo))
        self.mem_lock = lo
        self._store()

    def nvmlDeviceResetMemoryLockedClocks(self, h):
        assert h == "h0", "a setter must be given the GPU's handle"
        self.mem_lock = None
        self._store()

    def _store(self):
        pass


class FileNvml(FakeNvml):
    """A fake whose power limit and clock locks live in a JSON file: they outlive the
    process that set them, as a real GPU's do (the file wins over the defaults)."""

    def __init__(self, path, **kw):
        super().__init__(setters=True, **kw)
        self.path = Path(path)
        if self.path.exists():
            saved = json.loads(self.path.read_text())
            self.limit_mw, self.sm_lock = saved["limit_mw"], saved["sm_lock"]
        else:
            self._store()

    def _store(self):  # atomic: the test reads it while the child writes
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"limit_mw": self.limit_mw, "sm_lock": self.sm_lock}))
        os.replace(tmp, self.path)

    def nvmlDeviceSetPowerManagementLimit(self, h, mw):
        super().nvmlDeviceSetPowerManagementLimit(h, mw)
        self._store()


def gpu_file(path: Path) -> tuple[int, int | None]:
    """(power limit in mW, locked SM clock or None) of a FileNvml's GPU."""
    saved = json.loads(Path(path).read_text())
    return saved["limit_mw"], saved["sm_lock"]


@pytest.fixture(autouse=True)
def _state_dir(tmp_path, monkeypatch):
    """Every test (and its child processes) keeps its per-GPU state files to itself."""
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))


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


def killed(b: NvmlBackend) -> None:
    """What SIGKILL does to a backend in this process: its sampler stops and the kernel
    drops its lock on the GPU; nothing is restored and the state file stays."""
    b.sampler.stop()
    b._state_file.release()


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
    assert df["power_w"].tolist() == pytest.approx([225.0] * 8)
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


class InstantPower(FakeNvml):
    """A GPU whose power usage is a one-second average still showing the last
    configuration (450 W), while its instantaneous field (id 186) shows the draw now."""

    def nvmlDeviceGetPowerUsage(self, h):
        return 450_000

    def nvmlDeviceGetFieldValues(self, h, ids):
        assert list(ids) == [186]
        value = types.SimpleNamespace(uiVal=180_000)
        return [types.SimpleNamespace(fieldId=186, nvmlReturn=0, value=value)]


def test_power_is_read_from_the_instantaneous_field_where_the_gpu_has_one(tmp_path):
    with backend(tmp_path, InstantPower()) as b:
        df = profile(b, b.modes([2]), n_minibatches=3, progress=False)
        assert b.describe()["power_source"] == "instant"
    assert df["power_w"].tolist() == pytest.approx([180.0])  # not the 450 W average
    with backend(tmp_path, FakeNvml()) as b:  # no field values: the averaged usage
        assert b.describe()["power_source"] == "average"


def test_a_resumed_output_never_mixes_averaged_and_instantaneous_power(tmp_path):
    out = tmp_path / "n.csv"
    with backend(tmp_path) as b:  # a GPU without the instantaneous field: the average
        profile(b, b.modes([2]), n_minibatches=2, out=out, progress=False)
    assert "power_source" not in json.loads(meta_path(out).read_text())["run"]
    with backend(tmp_path, InstantPower()) as b:
        with pytest.raises(DataError, match='power_source = "instant"'):
            profile(b, b.modes([2, 4]), n_minibatches=2, out=out, progress=False)
    assert len(pd.read_csv(out)) == 1  # what was measured is kept
    inst = tmp_path / "i.csv"
    with backend(tmp_path, InstantPower()) as b:
        profile(b, b.modes([2]), n_minibatches=2, out=inst, progress=False)
    with backend(tmp_path, InstantPower()) as b:  # the same reading: resumes
        df = profile(b, b.modes([2, 4]), n_minibatches=2, out=inst, progress=False)
    assert df["power_w"].tolist() == pytest.approx([180.0, 180.0])


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
    assert nvml.sets == [150_000, 150_000, 250_000, 250_000, START_MW]  # restored at close
    assert nvml.limit_mw == START_MW and not nvml.up
    meta = json.loads(meta_path(tmp_path / "p.csv").read_text())
    assert meta["backend"]["power_limit_changed"] is True
    assert meta["backend"]["power_limit_w"] == 450 and meta["run"]["allow_power_limit"] is True


def test_power_limit_restored_after_a_failing_step(tmp_path):
    nvml = FakeNvml(setters=True)
    with backend(tmp_path, nvml, Step(fail_at=4), allow_power_limit=True) as b:
        modes = b.modes([2, 4], power_limits_w=[150])
        with pytest.raises(ProfilingError, match="CUDA out of memory"):
            profile(b, modes, n_minibatches=2, progress=False)
        assert nvml.sets == [150_000, 150_000, START_MW]  # on_error restored it at once
    assert nvml.sets == [150_000, 150_000, START_MW]  # and close did not set it again


def test_power_limit_restored_when_the_steps_close_fails(tmp_path):
    nvml = FakeNvml(setters=True)
    b = backend(tmp_path, nvml, Step(bad_close=True), allow_power_limit=True)
    b.configure({"power_limit_w": 200, "threads": 1, "num_workers": 0, "batch_size": 2})
    with pytest.raises(RuntimeError, match="dataloader worker hung"):
        b.close()
    assert nvml.sets == [200_000, START_MW] and not nvml.up


def test_power_limit_restore_failure_says_how_to_restore(tmp_path):
    nvml = FakeNvml(setters=True, fail_restore=True)
    b = backend(tmp_path, nvml, allow_power_limit=True)
    b.configure({"power_limit_w": 200, "threads": 1, "batch_size": 2})
    with pytest.raises(ProfilingError, match=r"sudo nvidia-smi -i 0 -pl 450"):
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
        with pytest.raises(ProfilingError, match="cores are Jetson settings.*threads"):
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
    assert nvml.sets[-1] == START_MW and set(nvml.sets[:-1]) == {150_000, 200_000}
    twin = ["profile", "--device", "orin-agx", "--workload", "resnet18", "--allow-power-limit"]
    assert main(twin) == 1
    assert "only --backend nvml sets a GPU power limit" in capsys.readouterr().err
    assert not np.isnan(df["power_w"]).any()


HERE = Path(__file__).resolve().parent


def _sweep_then(tmp_path, sig: int) -> tuple[int, tuple[int, int | None]]:
    """Start a power-limit x locked-clock sweep in a child, send ``sig`` once rows are
    written; return the child's exit status and (limit in mW, locked SM clock) it left on
    the fake GPU."""
    out, gpu = tmp_path / "p.csv", tmp_path / "gpu.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), str(HERE)])}
    child = subprocess.Popen(
        [sys.executable, str(HERE / "nvml_child.py"), str(out), str(gpu)],
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
        limit, sm = gpu_file(gpu)
        assert limit != START_MW and sm is not None  # mid-sweep: the sweep's settings
        child.send_signal(sig)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    return child.returncode, gpu_file(gpu)


@pytest.mark.slow
@pytest.mark.system
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stop_signal_restores_the_power_limit_and_clocks(tmp_path, sig):
    rc, left = _sweep_then(tmp_path, sig)
    assert left == (START_MW, None)  # limit restored, clocks unlocked, whatever the signal
    assert rc != 0  # and the run still ends as stopped
    rows = pd.read_csv(tmp_path / "p.csv")
    assert len(rows) >= 2 and rows["power_w"].notna().all()  # measured rows kept
    assert set(rows["gpu_mhz"]) <= {1410, 990}
    assert not list((tmp_path / "state").glob("gpu-*.json"))  # all restored: no state left


@pytest.mark.slow
@pytest.mark.system
def test_after_a_sigkill_a_run_of_another_output_restores_the_original(tmp_path):
    rc, left = _sweep_then(tmp_path, signal.SIGKILL)
    assert rc == -signal.SIGKILL and left[0] != START_MW and left[1] is not None
    meta = json.loads(meta_path(tmp_path / "p.csv").read_text())
    assert meta["backend"]["power_limit_w"] == 450  # recorded before the first change
    state = list((tmp_path / "state").glob("gpu-*.json"))
    assert len(state) == 1 and json.loads(state[0].read_text())["power_limit_w"] == 450
    nvml = FileNvml(tmp_path / "gpu.json")  # the GPU as the killed run left it
    assert nvml.limit_mw == left[0]
    with pytest.warns(RuntimeWarning, match=r"did not finish.*originally 450 W.*SM True"):
        b = backend(tmp_path, nvml, allow_power_limit=True, handle_signals=False)
    with b:  # another output, no sidecar: the state file alone names the original
        modes = b.modes([2], threads=[1], power_limits_w=[200])
        profile(b, modes, n_minibatches=2, out=tmp_path / "other.csv", progress=False)
    assert gpu_file(tmp_path / "gpu.json") == (START_MW, None)  # not 200 W, nor the 700 W max
    assert not state[0].exists()


def test_a_rerun_of_the_same_output_after_a_kill_restores_the_state_files_limit(tmp_path):
    """The state file and the sidecar agree; the state file's value is taken, once."""
    nvml = FakeNvml(setters=True)
    b = backend(tmp_path, nvml, allow_power_limit=True, handle_signals=False)
    profile(b, b.modes([2], power_limits_w=[150]), n_minibatches=2, out=tmp_path / "p.csv",
            progress=False)  # fmt: skip
    killed(b)  # close never runs, the GPU stays at 150 W
    again = FakeNvml(setters=True)
    again.limit_mw = 150_000
    with pytest.warns(RuntimeWarning, match="did not finish"):
        b2 = backend(tmp_path, again, allow_power_limit=True, handle_signals=False)
    with b2:
        profile(b2, b2.modes([2, 4], power_limits_w=[150]), n_minibatches=2,
                out=tmp_path / "p.csv", progress=False)  # fmt: skip
    assert again.limit_mw == START_MW and again.sets[-1] == START_MW


class RefusingNvml(FakeNvml):
    """A setter that refuses without changing anything (no root)."""

    def nvmlDeviceSetPowerManagementLimit(self, h, mw):
        raise RuntimeError("Insufficient Permissions")


class ClampingNvml(FakeNvml):
    """A driver that clamps a restore to 400 W."""

    def nvmlDeviceSetPowerManagementLimit(self, h, mw):
        super().nvmlDeviceSetPowerManagementLimit(h, min(mw, 400_000))


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
    with pytest.raises(ProfilingError, match=r"to 450 W left it at 400 W; restore it by hand"):
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


# -- locked clocks ----------------------------------------------------------------------
def test_clocks_refused_unless_allowed(tmp_path):
    nvml = FakeNvml()
    with backend(tmp_path, nvml) as b:
        with pytest.raises(DataError, match="gpu_mhz are Jetson settings.*--allow-clocks"):
            b.modes([2], gpu_clocks_mhz=[990])
        with pytest.raises(DataError, match="gpu_mhz.*allow_clocks=True"):
            profile(b, pd.DataFrame({"gpu_mhz": [990], "batch_size": [2]}), n_minibatches=2)
    assert setters_called(nvml) == [] and "nvmlDeviceGetSupportedMemoryClocks" not in nvml.calls


def test_clocks_locked_per_row_read_back_and_unlocked(tmp_path):
    nvml = FakeNvml(setters=True)
    with backend(tmp_path, nvml, allow_clocks=True) as b:
        assert b.config_columns[:2] == ("gpu_mhz", "threads")  # one memory clock: no knob
        modes = b.modes([2, 4], threads=[1], gpu_clocks_mhz=[1410, 990])
        df = profile(b, modes, n_minibatches=2, out=tmp_path / "c.csv", progress=False)
        assert nvml.sm_lock == 990  # still locked while the backend is open
        assert len(list((tmp_path / "state").glob("gpu-*.json"))) == 1
    assert df["gpu_mhz"].tolist() == [1410, 1410, 990, 990]
    assert df["observed_gpu_mhz"].tolist() == [1410, 1410, 990, 990]  # ran at the lock
    assert nvml.locks == [("sm", 1410)] * 2 + [("sm", 990)] * 2
    assert nvml.sm_lock is None and nvml.sets == []  # unlocked; power limit untouched
    assert not list((tmp_path / "state").glob("gpu-*.json"))  # restored: state file gone
    meta = json.loads(meta_path(tmp_path / "c.csv").read_text())
    assert meta["backend"]["clocks_changed"] is True and meta["run"]["allow_clocks"] is True


def test_unsupported_clock_refused_before_anything_is_set(tmp_path):
    nvml = FakeNvml(setters=True)
    with backend(tmp_path, nvml, allow_clocks=True) as b:
        modes = b.modes([2], gpu_clocks_mhz=[1410, 1000])
        with pytest.raises(
            ProfilingError, match=r"row 2: gpu_mhz=1000 is not.*6 clocks 705\.\.1980"
        ):
            profile(b, modes, n_minibatches=2, progress=False)
    assert nvml.locks == [] and "nvmlDeviceResetGpuLockedClocks" not in nvml.calls


def test_a_lock_that_does_not_take_is_an_error_and_still_reset(tmp_path):
    nvml = FakeNvml(setters=True, ignore_lock=True)  # reads 1755 whatever the lock
    b = backend(tmp_path, nvml, allow_clocks=True, handle_signals=False)
    with pytest.raises(ProfilingError, match="gpu_mhz=990: the GPU reports 1755 MHz"):
        b.configure({"gpu_mhz": 990, "threads": 1, "batch_size": 2})
    b.close()
    assert nvml.sm_lock is None and nvml.calls.count("nvmlDeviceResetGpuLockedClocks") == 1
    b2 = backend(tmp_path, FakeNvml(setters=True, ignore_lock=True), allow_clocks=True)
    b2.configure({"gpu_mhz": 1980, "threads": 1, "batch_size": 2})  # below the lock: fine
    b2.close()


def test_memory_clocks_are_a_knob_where_the_gpu_has_several(tmp_path):
    nvml = FakeNvml(setters=True, mem_clocks=(2619, 1593))
    with backend(tmp_path, nvml, allow_clocks=True, allow_power_limit=True) as b:
        assert b.config_columns[:3] == ("power_limit_w", "mem_mhz", "gpu_mhz")
        bad = b.modes([2], mem_clocks_mhz=[1593], gpu_clocks_mhz=[1980])
        with pytest.raises(ProfilingError, match=r"gpu_mhz=1980.*with memory at 1593 MHz"):
            profile(b, bad, n_minibatches=2, progress=False)
        modes = b.modes([2], mem_clocks_mhz=[2619, 1593], gpu_clocks_mhz=[990],
                        power_limits_w=[300])  # fmt: skip
        df = profile(b, modes, n_minibatches=2, progress=False)
        filled = b.complete_modes(pd.DataFrame({"mem_mhz": [1593], "batch_size": [2]}))
    assert filled["gpu_mhz"].tolist() == [1410]  # the top SM clock with that memory clock
    assert df["mem_mhz"].tolist() == [2619, 1593] and df["observed_mem_mhz"].tolist() == [
        2619,
        1593,
    ]
    assert nvml.locks == [("mem", 2619), ("sm", 990), ("mem", 1593), ("sm", 990)]
    assert nvml.mem_lock is None and nvml.sm_lock is None and nvml.limit_mw == START_MW
    with backend(tmp_path, FakeNvml(setters=True), allow_clocks=True) as b:
        with pytest.raises(DataError, match="mem_mhz are Jetson settings"):
            b.check_modes(pd.DataFrame({"mem_mhz": [2619], "gpu_mhz": [990]}))


def test_a_failed_unlock_says_how_and_the_power_limit_is_still_restored(tmp_path):
    nvml = FakeNvml(setters=True, fail_reset=True)
    b = backend(tmp_path, nvml, allow_clocks=True, allow_power_limit=True)
    b.configure({"power_limit_w": 200, "gpu_mhz": 990, "threads": 1, "batch_size": 2})
    with pytest.raises(ProfilingError, match=r"unlock it by hand: sudo nvidia-smi -i 0 -rgc"):
        b.close()
    assert nvml.limit_mw == START_MW and not nvml.up
    state = list((tmp_path / "state").glob("gpu-*.json"))
    assert len(state) == 1 and json.loads(state[0].read_text())["sm_locked"] is True  # kept


@pytest.mark.system
def test_a_live_run_on_the_same_gpu_is_refused(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "gpu-GPU-1234abcd-0000.json").write_text(
        json.dumps({"gpu": "0", "power_limit_w": 300.0, "pid": 1})
    )
    holds = (  # a live run holds the GPU's lock
        "import sys, time, filelock; l = filelock.FileLock(sys.argv[1]); l.acquire(); "
        "print('held', flush=True); time.sleep(30)"
    )
    sleeper = subprocess.Popen(
        [sys.executable, "-c", holds, str(state / "gpu-GPU-1234abcd-0000.lock")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert sleeper.stdout is not None and sleeper.stdout.readline().strip() == "held"
        with pytest.raises(ProfilingError, match="another run is changing this GPU now"):
            backend(tmp_path, FakeNvml(setters=True), allow_power_limit=True)
        with pytest.raises(ProfilingError, match="another run is changing this GPU now"):
            backend(tmp_path, FakeNvml())  # a read-only run would measure under it too
    finally:
        sleeper.kill()
        sleeper.wait()
    with pytest.warns(RuntimeWarning, match="did not finish.*originally 300 W"):
        b = backend(tmp_path, FakeNvml(setters=True), allow_clocks=True)  # dead: adopted
    b.close()  # restores the limit even though this run only locks clocks
    assert not (state / "gpu-GPU-1234abcd-0000.json").exists()


def test_device_spec_from_what_nvml_reports(tmp_path):
    from powertrain.devices.specs import device_spec_from_dict

    with backend(tmp_path, FakeNvml(setters=True), allow_clocks=True, allow_power_limit=True) as b:
        spec = b.device_spec()
    assert spec["knobs"]["gpu_mhz"] == sorted(SM_CLOCKS[2619])
    assert spec["knobs"]["power_limit_w"][0] == 100 and spec["knobs"]["power_limit_w"][-1] == 700
    assert spec["power_cap"] == "power_limit_w" and "mem_mhz" not in spec["knobs"]
    parsed = device_spec_from_dict(spec)
    assert parsed.power_cap == "power_limit_w" and parsed.name == "nvidia-h100-80gb-hbm3"


def test_cli_clocks_and_spec(tmp_path, monkeypatch, capsys):
    nvml = FakeNvml(setters=True)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    out, spec = tmp_path / "o.csv", tmp_path / "gpu.json"
    assert main(_cli(tmp_path, "--out", str(out), "--gpu-clocks", "1410,990")) == 1
    assert "--gpu-clocks 1410,990: locking GPU clocks needs --allow-clocks" in (
        capsys.readouterr().err
    )
    assert nvml.calls == [] and not out.exists()  # refused before NVML was even started
    argv = _cli(tmp_path, "--out", str(out), "--gpu-clocks", "1410,990", "--allow-clocks")
    assert main([*argv, "--spec-out", str(spec)]) == 0
    df = pd.read_csv(out)
    assert sorted(set(df["gpu_mhz"])) == [990, 1410] and len(df) == 4
    assert nvml.sm_lock is None
    assert json.loads(spec.read_text())["knobs"]["gpu_mhz"] == sorted(SM_CLOCKS[2619])
    twin = ["profile", "--device", "orin-agx", "--workload", "resnet18", "--allow-clocks"]
    assert main(twin) == 1
    assert "only --backend nvml locks GPU clocks" in capsys.readouterr().err


def test_an_unsupported_memory_clock_is_refused(tmp_path):
    nvml = FakeNvml(setters=True, mem_clocks=(2619, 1593))
    with backend(tmp_path, nvml, allow_clocks=True) as b:
        modes = b.modes([2], mem_clocks_mhz=[2000], gpu_clocks_mhz=[990])
        with pytest.raises(ProfilingError, match=r"mem_mhz=2000 is not a memory clock.*2619"):
            profile(b, modes, n_minibatches=2, progress=False)
    assert nvml.locks == []


# -- the per-GPU state file: only a run that may change the GPU owns it ------------------
def _kill_mid_sweep(tmp_path) -> Path:
    """A run killed at 150 W with the SM clock locked at 990 MHz; its state file."""
    b = backend(tmp_path, FakeNvml(setters=True), allow_power_limit=True, allow_clocks=True,
                handle_signals=False)  # fmt: skip
    b.configure({"power_limit_w": 150, "gpu_mhz": 990, "threads": 1, "batch_size": 2})
    killed(b)
    (state,) = (tmp_path / "state").glob("gpu-*.json")
    return state


def test_a_read_only_run_keeps_what_a_killed_run_left_to_restore(tmp_path):
    state = _kill_mid_sweep(tmp_path)
    left = FakeNvml()  # the GPU as the killed run left it; read-only: no setter allowed
    left.limit_mw, left.sm_lock = 150_000, 990
    with pytest.warns(RuntimeWarning, match="did not finish"):
        b = backend(tmp_path, left)
    profile(b, b.modes([2], threads=[1]), n_minibatches=2, progress=False)
    b.close()
    assert state.exists()  # still there for the next allowed run
    gpu = FakeNvml(setters=True)
    gpu.limit_mw, gpu.sm_lock = 150_000, 990
    with pytest.warns(RuntimeWarning, match=r"originally 450 W.*SM True"):
        b2 = backend(tmp_path, gpu, allow_power_limit=True, handle_signals=False)
    b2.close()
    assert (gpu.limit_mw, gpu.sm_lock) == (START_MW, None) and not state.exists()


def test_a_recycled_pid_in_the_state_file_does_not_block(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "gpu-GPU-1234abcd-0000.json").write_text(
        json.dumps({"gpu": "0", "power_limit_w": 300.0, "pid": os.getppid()})  # alive
    )
    with pytest.warns(RuntimeWarning, match="did not finish.*originally 300 W"):
        b = backend(tmp_path, FakeNvml(setters=True), allow_power_limit=True,
                    handle_signals=False)  # fmt: skip
    b.close()
    assert not (state / "gpu-GPU-1234abcd-0000.json").exists()


def test_the_state_file_wins_over_the_outputs_sidecar(tmp_path):
    """After a kill the per-GPU state file names the original limit; an older sidecar of
    the same output that recorded another limit must not replace it."""
    _kill_mid_sweep(tmp_path)
    gpu = FakeNvml(setters=True)
    gpu.limit_mw = 150_000
    with pytest.warns(RuntimeWarning, match="did not finish"):
        b = backend(tmp_path, gpu, allow_power_limit=True, handle_signals=False)
    b.adopt_recorded({"power_limit_changed": True, "power_limit_w": 300.0})
    b.close()
    assert gpu.limit_mw == START_MW


@pytest.mark.parametrize("where", ["file", "proc", "read-only"])
def test_a_state_folder_that_cannot_be_used_is_one_line(tmp_path, monkeypatch, where):
    folder = {"file": tmp_path / "f", "proc": Path("/proc/powertrain"),
              "read-only": tmp_path / "ro" / "state"}[where]  # fmt: skip
    if where == "file":
        folder.write_text("x")
    if where == "read-only":
        if os.geteuid() == 0:
            pytest.skip("root writes to read-only folders")
        folder.parent.mkdir()
        folder.parent.chmod(0o500)
    monkeypatch.setenv(STATE_DIR_ENV, str(folder))
    nvml = FakeNvml(setters=True)
    with pytest.raises(ProfilingError, match=rf"GPU state folder {folder}: cannot use it.*"
                       f"{STATE_DIR_ENV}") as e:  # fmt: skip
        backend(tmp_path, nvml, allow_power_limit=True, handle_signals=False)
    assert "\n" not in str(e.value) and setters_called(nvml) == [] and not nvml.up
    backend(tmp_path, FakeNvml()).close()  # a read-only run does not need the folder


@pytest.mark.parametrize("which", ["out", "modes", "symlink"])
def test_spec_out_never_overwrites_the_output_or_the_modes(tmp_path, monkeypatch, capsys, which):
    nvml = FakeNvml(setters=True)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    out, modes = tmp_path / "m.csv", tmp_path / "modes.csv"
    out.write_text("measured\n")
    modes.write_text("batch_size\n2\n")
    spec = {"out": out, "modes": modes, "symlink": tmp_path / "link.json"}[which]
    if which == "symlink":
        spec.symlink_to(out)
    argv = _cli(tmp_path, "--out", str(out), "--modes", str(modes), "--allow-clocks")
    assert main([*argv, "--spec-out", str(spec)]) == 1
    err = capsys.readouterr().err
    flag = "--modes" if which == "modes" else "--out"
    assert f"--spec-out {spec}: is the {flag} file" in err
    assert out.read_text() == "measured\n" and modes.read_text() == "batch_size\n2\n"
    assert nvml.calls == []  # refused before NVML was started


def test_spec_out_that_cannot_be_written_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(setters=True))
    (tmp_path / "d").mkdir()
    argv = _cli(tmp_path, "--out", str(tmp_path / "o.csv"), "--allow-clocks")
    assert main([*argv, "--spec-out", str(tmp_path / "d")]) == 1
    assert f"--spec-out {tmp_path / 'd'}: is a folder" in capsys.readouterr().err
    monkeypatch.setattr(NvmlBackend, "device_spec", lambda self: {"knobs": {}})
    import powertrain.utils.files as files

    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files, "atomic_write", full)
    assert main([*argv, "--spec-out", str(tmp_path / "s.json")]) == 1
    assert "--spec-out" in (err := capsys.readouterr().err) and "the disk is full" in err
    assert "Traceback" not in err


def test_memory_clocks_on_a_gpu_with_one_are_refused_not_dropped(tmp_path, monkeypatch, capsys):
    with backend(tmp_path, FakeNvml(setters=True), allow_clocks=True) as b:
        with pytest.raises(ProfilingError, match=r"--mem-clocks\) 1593: .*one memory clock"):
            b.modes([2], mem_clocks_mhz=[1593], gpu_clocks_mhz=[990])
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(setters=True))
    out = tmp_path / "o.csv"
    argv = _cli(tmp_path, "--out", str(out), "--allow-clocks", "--mem-clocks", "1593")
    assert main(argv) == 1 and not out.exists()
    assert "one memory clock (2619 MHz)" in capsys.readouterr().err


# -- the limit to restore from an output's sidecar (a rerun of the same output) ----------
def _sidecar_run(tmp_path, recorded: dict, limit_mw: int = 150_000, **kw):
    """A run that finds the GPU at ``limit_mw`` and the sidecar ``recorded``; the GPU's
    (limit in mW, setters called) after close, and the warnings."""
    gpu = FakeNvml(setters=kw.get("allow_power_limit", True))
    gpu.limit_mw = limit_mw
    b = backend(tmp_path, gpu, handle_signals=False, **{"allow_power_limit": True, **kw})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        b.adopt_recorded(recorded)
    b.close()
    return gpu.limit_mw, setters_called(gpu), [str(w.message) for w in caught]


def test_a_sidecar_names_the_limit_to_restore_when_no_state_file_does(tmp_path):
    limit, sets, said = _sidecar_run(
        tmp_path, {"power_limit_changed": True, "power_limit_w": 450.0}
    )
    assert limit == START_MW and sets == ["nvmlDeviceSetPowerManagementLimit"]
    assert len(said) == 1 and "is 150 W, but the run that started this output found 450" in said[0]


@pytest.mark.parametrize(
    "recorded",
    [
        {"power_limit_changed": False, "power_limit_w": 450.0},  # that run changed nothing
        {"power_limit_w": 450.0},
        {"power_limit_changed": True, "power_limit_w": True},  # not a number
        {"power_limit_changed": True, "power_limit_w": "450"},
        {"power_limit_changed": True},
        {"power_limit_changed": True, "power_limit_w": 150.5},  # within 0.5 W: the same
    ],
)
def test_a_sidecar_that_names_no_other_limit_changes_nothing(tmp_path, recorded):
    limit, sets, said = _sidecar_run(tmp_path, recorded)
    assert limit == 150_000 and sets == [] and said == []


def test_a_read_only_run_takes_no_limit_from_a_sidecar(tmp_path):
    recorded = {"power_limit_changed": True, "power_limit_w": 450.0}
    limit, sets, said = _sidecar_run(tmp_path, recorded, allow_power_limit=False)
    assert limit == 150_000 and sets == [] and said == []  # FakeNvml() refuses any setter


def test_an_adopted_state_keeps_its_gpu_and_unlocks_the_memory_clock(tmp_path):
    gpu = FakeNvml(setters=True, mem_clocks=(2619, 1593))
    b = backend(tmp_path, gpu, allow_clocks=True, handle_signals=False)
    b.configure({"mem_mhz": 1593, "gpu_mhz": 990, "threads": 1, "batch_size": 2})
    killed(b)
    (state,) = (tmp_path / "state").glob("gpu-*.json")
    left = FakeNvml(setters=True, mem_clocks=(2619, 1593))
    left.mem_lock, left.sm_lock = 1593, 990
    with pytest.warns(RuntimeWarning, match=r"power limit now 450 W, originally unchanged.*"
                      r"SM True, memory True"):  # fmt: skip
        b2 = backend(tmp_path, left, allow_power_limit=True, handle_signals=False)
    saved = json.loads(state.read_text())  # whole: a second kill still restores all
    assert saved["gpu"] == "0 (NVIDIA H100 80GB HBM3)" and saved["power_limit_w"] is None
    assert saved["sm_locked"] is True and saved["mem_locked"] is True
    b2.close()
    assert (left.mem_lock, left.sm_lock) == (None, None) and left.sets == []


class HalfNvml(FakeNvml):
    """A driver that raises on a new power limit, yet applies it."""

    def nvmlDeviceSetPowerManagementLimit(self, h, mw):
        super().nvmlDeviceSetPowerManagementLimit(h, mw)
        if mw != START_MW:
            raise RuntimeError("Unknown Error")


@pytest.mark.parametrize("watts", [200, 451])
def test_a_refused_limit_that_was_applied_anyway_is_restored(tmp_path, watts):
    nvml = HalfNvml(setters=True)
    b = backend(tmp_path, nvml, allow_power_limit=True, handle_signals=False)
    with pytest.raises(ProfilingError, match=f"power_limit_w={watts}: NVML refused to set it"):
        b.configure({"power_limit_w": watts, "threads": 1, "batch_size": 2})
    b.close()
    assert nvml.limit_mw == START_MW and nvml.sets[-1] == START_MW


def test_a_memory_and_sm_clock_pair_is_checked_together_when_set(tmp_path):
    nvml = FakeNvml(setters=True, mem_clocks=(2619, 1593))
    with backend(tmp_path, nvml, allow_clocks=True, handle_signals=False) as b:
        with pytest.raises(ProfilingError, match=r"gpu_mhz=1980.*with memory at 1593 MHz"):
            b.configure({"mem_mhz": 1593, "gpu_mhz": 1980, "threads": 1, "batch_size": 2})
    assert nvml.locks == []


def test_the_power_limit_range_is_inclusive_and_nothing_outside_it_is_set(tmp_path):
    nvml = FakeNvml(setters=True)
    with backend(tmp_path, nvml, allow_power_limit=True, handle_signals=False) as b:
        for watts in (100, 700):  # the GPU's own ends are settable
            b.configure({"power_limit_w": watts, "threads": 1, "batch_size": 2})
        for watts in (99.5, 700.5, float("nan"), float("inf")):
            with pytest.raises(
                ProfilingError, match=r"is outside what GPU 0 .* allows: 100\.\.700 W"
            ):
                b.configure({"power_limit_w": watts, "threads": 1, "batch_size": 2})
    assert nvml.sets == [100_000, 700_000, START_MW]


def test_an_unreadable_state_file_says_how_to_restore_by_hand(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "gpu-GPU-1234abcd-0000.json").write_text("{not json")
    nvml = FakeNvml(setters=True)
    with pytest.raises(ProfilingError) as e:
        backend(tmp_path, nvml, allow_power_limit=True, handle_signals=False)
    assert str(e.value) == (
        f"{state / 'gpu-GPU-1234abcd-0000.json'}: unreadable GPU state file (JSONDecodeError); "
        "it records the settings a killed run changed: restore the GPU by hand (nvidia-smi "
        "-rgc, -rmc, -pl) and delete the file"
    )
    assert setters_called(nvml) == [] and not nvml.up


def test_a_state_file_that_cannot_be_saved_stops_before_the_change(tmp_path, monkeypatch):
    import powertrain.backends.nvml_state as nvml_state

    def full(path, data, fsync=True):
        raise OSError(28, "No space left on device", str(path))

    nvml = FakeNvml(setters=True)
    b = backend(tmp_path, nvml, allow_power_limit=True, handle_signals=False)
    monkeypatch.setattr(nvml_state, "atomic_write", full)
    with pytest.raises(ProfilingError, match=r"cannot use it \(No space left on device\)"):
        b.configure({"power_limit_w": 200, "threads": 1, "batch_size": 2})
    assert nvml.sets == []  # nothing changed that the state file does not know of
    b.close()


def test_the_state_folder_is_made_with_its_parents(tmp_path, monkeypatch):
    folder = tmp_path / "home" / ".local" / "state" / "powertrain" / "nvml"  # the default's shape
    monkeypatch.setenv(STATE_DIR_ENV, str(folder))
    b = backend(tmp_path, FakeNvml(setters=True), allow_power_limit=True, handle_signals=False)
    b.configure({"power_limit_w": 200, "threads": 1, "batch_size": 2})
    assert len(list(folder.glob("gpu-*.json"))) == 1
    b.close()
    assert not list(folder.glob("gpu-*.json"))


def test_a_state_file_name_never_leaves_its_folder():
    from powertrain.backends.nvml_state import StateFile

    f = StateFile("/tmp/state", "../GPU 1/x")
    assert f.path == Path("/tmp/state/gpu----GPU-1-x.json")


class OffByNvml(FakeNvml):
    """A driver that restores the limit ``off_mw`` below what was asked; ``blind``: the
    limit cannot be read back once restored."""

    def __init__(self, off_mw: int, blind: bool = False, **kw):
        super().__init__(setters=True, **kw)
        self.off_mw, self.blind, self.restored = off_mw, blind, False

    def nvmlDeviceSetPowerManagementLimit(self, h, mw):
        self.restored = mw == START_MW
        super().nvmlDeviceSetPowerManagementLimit(h, mw - self.off_mw * self.restored)

    def nvmlDeviceGetPowerManagementLimit(self, h):
        if self.blind and self.restored:
            raise RuntimeError("Unknown Error")
        return super().nvmlDeviceGetPowerManagementLimit(h)


@pytest.mark.parametrize(
    ("off_mw", "blind", "says"),
    [
        (0, False, None),
        (1000, False, None),
        (1500, False, "left it at 448.5 W"),
        (0, True, "left it at an unknown limit"),
    ],  # fmt: skip
)
def test_a_restore_is_read_back_within_1_w(tmp_path, off_mw, blind, says):
    b = backend(tmp_path, OffByNvml(off_mw, blind), allow_power_limit=True, handle_signals=False)
    b.configure({"power_limit_w": 200, "threads": 1, "batch_size": 2})
    if says is None:
        b.close()  # 1 W off is within what the driver rounds to
        return
    with pytest.raises(ProfilingError, match=f"to 450 W {says}; restore it by hand"):
        b.close()


class StuckMemNvml(FakeNvml):
    def nvmlDeviceResetMemoryLockedClocks(self, h):
        raise RuntimeError("Insufficient Permissions")


def test_a_failed_memory_unlock_names_the_memory_clock_and_its_flag(tmp_path):
    nvml = StuckMemNvml(setters=True, mem_clocks=(2619, 1593))
    b = backend(tmp_path, nvml, allow_clocks=True, handle_signals=False)
    b.configure({"mem_mhz": 1593, "gpu_mhz": 990, "threads": 1, "batch_size": 2})
    with pytest.raises(ProfilingError) as e:
        b.close()
    assert str(e.value) == (
        "could not unlock GPU 0's memory clock (Insufficient Permissions); unlock it by hand: "
        "sudo nvidia-smi -i 0 -rmc"
    )
    assert nvml.sm_lock is None  # the SM clock was still unlocked


def test_a_claimed_gpu_is_refused_at_once_not_waited_for(tmp_path):
    """Two claims of one GPU's state (two runs): the second is refused at once; it never
    waits for the first run to end (a sweep takes hours)."""
    import threading

    from powertrain.backends.nvml_state import StateFile

    first, second = StateFile(tmp_path / "s", "GPU-1"), StateFile(tmp_path / "s", "GPU-1")
    first.claim()
    got: list = []

    def claim_again() -> None:
        try:
            second.claim()
            got.append("claimed")
        except ProfilingError as e:
            got.append(str(e))

    t = threading.Thread(target=claim_again, daemon=True)
    t.start()
    t.join(10)
    first.release()
    t.join(10)
    assert len(got) == 1 and "another run is changing this GPU now" in got[0]
    second.claim()  # released: the next run claims it
    second.release()
