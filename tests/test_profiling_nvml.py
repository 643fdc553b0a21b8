"""The NVML backend with an injected fake pynvml: read-only, observed clocks, knobs."""

from __future__ import annotations

import sys
import types

import pandas as pd
import pytest
import torch

from powertrain.backends.nvml import NvmlBackend, slug
from powertrain.cli import main
from powertrain.errors import ProfilingError
from powertrain.profiling.sweep import profile


class FakeNvml(types.ModuleType):
    """Just the NVML calls a read-only profiler needs; any setter would be recorded."""

    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2

    def __init__(self, fail_init: bool = False):
        super().__init__("pynvml")
        self.calls: list[str] = []
        self.fail_init = fail_init
        self.up = False

    def __getattribute__(self, name):
        if name.startswith("nvml"):
            object.__getattribute__(self, "calls").append(name)
            if name.startswith("nvmlDeviceSet") or "Reset" in name:
                raise AssertionError(f"the NVML backend must never call {name}")
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
        return 123_456  # mW

    def nvmlDeviceGetClockInfo(self, h, kind):
        return 1755 if kind == 1 else 2619

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        return 1980 if kind == 1 else 2619

    def nvmlSystemGetDriverVersion(self):
        return "550.54.15"

    def nvmlDeviceGetPowerManagementLimit(self, h):
        return 700_000


def tiny_step(batch_size: int, num_workers: int = 0) -> float:
    torch.ones(batch_size, 8).sum()
    return 0.25


def test_profile_reads_power_and_clocks_never_sets_them(tmp_path):
    nvml = FakeNvml()
    threads0 = torch.get_num_threads()
    with NvmlBackend(tiny_step, nvml=nvml, sample_period_s=0.005, proc_root=tmp_path) as b:
        modes = b.modes([2, 4], threads=[1, 2], workers=[0, 1])
        df = profile(b, modes, n_minibatches=3, out=tmp_path / "n.csv", progress=False)
    assert len(df) == 8 and df["device"].iloc[0] == "nvidia-h100-80gb-hbm3"
    assert df["power_w"].tolist() == pytest.approx([123.456] * 8)
    assert (df["gpu_mhz"] == 1755).all() and (df["mem_mhz"] == 2619).all()  # observed, not max
    assert sorted(set(df["cores"])) == [1, 2] and sorted(set(df["num_workers"])) == [0, 1]
    assert not any(c.startswith("nvmlDeviceSet") for c in nvml.calls)
    assert not nvml.up and torch.get_num_threads() == threads0  # shut down, threads restored
    meta = (tmp_path / "n.meta.json").read_text()
    assert '"clocks_changed": false' in meta and "550.54.15" in meta


def test_observed_cpu_clock_from_cpuinfo(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text("cpu MHz\t\t: 2000.0\n\ncpu MHz\t\t: 3000.0\n")
    with NvmlBackend(tiny_step, nvml=FakeNvml(), sample_period_s=0.005, proc_root=tmp_path) as b:
        df = profile(b, b.modes([2]), n_minibatches=2, progress=False)
    assert df["cpu_mhz"].iloc[0] == pytest.approx(2500.0)


def test_clear_errors(tmp_path, monkeypatch):
    with pytest.raises(ProfilingError, match="NVML could not start.*nvidia-smi"):
        NvmlBackend(tiny_step, nvml=FakeNvml(fail_init=True))
    with pytest.raises(ProfilingError, match="no GPU 3"):
        NvmlBackend(tiny_step, nvml=FakeNvml(), gpu_index=3)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    with pytest.raises(ProfilingError, match=r"pip install powertrain\[nvml\]"):
        NvmlBackend(tiny_step)
    with NvmlBackend(tiny_step, nvml=FakeNvml(), sample_period_s=0.005) as b:
        with pytest.raises(ProfilingError, match="cores=100000"):
            b.configure({"cores": 100000, "batch_size": 2})


def test_slug():
    assert slug("NVIDIA GeForce RTX 3090") == "nvidia-geforce-rtx-3090"


def test_cli_nvml(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml())
    step_file = tmp_path / "job.py"
    step_file.write_text("def step(batch_size):\n    return 1.0\n")
    out = tmp_path / "o.csv"
    argv = [
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
        "--out",
        str(out),
        "--quiet",
    ]
    assert main(argv) == 0
    df = pd.read_csv(out)
    assert len(df) == 2 and set(df["batch_size"]) == {2, 4}
