"""Profiling on an NVIDIA GPU through NVML, read-only.

Why: servers and workstations are shared and their clocks belong to the admin, so this
backend never changes clocks or power limits (it calls no NVML setter). Its knobs need
no clock change: batch size, CPU threads (the ``cores`` column) and dataloader workers.
The frequency columns hold the clocks the GPU and CPU were observed running at.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np
import pandas as pd

from ..errors import ProfilingError
from ..profiling.power_sensors import PowerSampler
from ..profiling.step import TrainingStep
from ..profiling.step_loader import as_step
from .step import StepBackend


def _import_pynvml() -> Any:
    try:
        import pynvml
    except ImportError:
        raise ProfilingError(
            "NVML bindings are not installed: `pip install powertrain[nvml]`"
        ) from None
    return pynvml


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def slug(name: str) -> str:
    """``"NVIDIA H100 80GB HBM3"`` -> ``"nvidia-h100-80gb-hbm3"`` (the ``device`` column)."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "nvidia-gpu"


class NvmlBackend(StepBackend):
    """An NVIDIA GPU running the user's training step; power from NVML.

    ``nvml`` replaces the ``pynvml`` module (tests inject a fake). ``proc_root`` is where
    ``/proc/cpuinfo`` and the cpufreq files are read from for the observed CPU clock.
    """

    knob_columns = ("num_workers",)
    observed_columns = ("cpu_mhz", "gpu_mhz", "mem_mhz")

    def __init__(
        self,
        step: Any,
        gpu_index: int = 0,
        device_name: str | None = None,
        sample_period_s: float = 0.1,
        nvml: Any = None,
        clock: Callable[[], float] = time.perf_counter,
        proc_root: str | Path = "/",
    ):
        import torch

        self.nvml = nvml if nvml is not None else _import_pynvml()
        try:
            self.nvml.nvmlInit()
        except Exception as e:
            raise ProfilingError(
                f"NVML could not start ({e}); is an NVIDIA driver installed and a GPU "
                "visible (nvidia-smi)?"
            ) from None
        try:
            self.handle = self.nvml.nvmlDeviceGetHandleByIndex(int(gpu_index))
            self.gpu_name = _text(self.nvml.nvmlDeviceGetName(self.handle))
        except Exception as e:
            self.nvml.nvmlShutdown()
            raise ProfilingError(f"NVML has no GPU {gpu_index} ({e}); see nvidia-smi -L") from None
        self.gpu_index = int(gpu_index)
        self.proc_root = Path(proc_root)
        self.step: TrainingStep = as_step(step)
        self.device_name = device_name or slug(self.gpu_name)
        self.workload_name = self.step.name
        self.sample_period_s = float(sample_period_s)
        self.clock = clock
        self._torch = torch
        self._threads0 = torch.get_num_threads()
        self._closed = False
        self.nominal = self._nominal()
        self.sampler = PowerSampler(
            self._power_w, self.sample_period_s, clock, probe=self._clocks
        ).start()

    # -- readings (all read-only) ---------------------------------------------------------
    def _power_w(self) -> float:
        return float(self.nvml.nvmlDeviceGetPowerUsage(self.handle)) / 1e3  # mW -> W

    def _cpu_mhz(self) -> float | None:
        info = self.proc_root / "proc/cpuinfo"
        if info.exists():
            mhz = [float(m) for m in re.findall(r"^cpu MHz\s*:\s*([\d.]+)", info.read_text(), re.M)]
            if mhz:
                return float(np.mean(mhz))
        cur = list(
            (self.proc_root / "sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_cur_freq")
        )
        vals = [float(p.read_text()) / 1e3 for p in cur if p.read_text().strip().isdigit()]
        return float(np.mean(vals)) if vals else None

    def _clocks(self) -> dict:
        n = self.nvml
        return {
            "gpu_mhz": float(n.nvmlDeviceGetClockInfo(self.handle, getattr(n, "NVML_CLOCK_SM", 1))),
            "mem_mhz": float(
                n.nvmlDeviceGetClockInfo(self.handle, getattr(n, "NVML_CLOCK_MEM", 2))
            ),
            "cpu_mhz": self._cpu_mhz(),
        }

    def _nominal(self) -> dict:
        n = self.nvml
        try:
            gpu = float(n.nvmlDeviceGetMaxClockInfo(self.handle, getattr(n, "NVML_CLOCK_SM", 1)))
            mem = float(n.nvmlDeviceGetMaxClockInfo(self.handle, getattr(n, "NVML_CLOCK_MEM", 2)))
        except Exception:  # pragma: no cover - very old GPUs
            c = self._clocks()
            gpu, mem = c["gpu_mhz"], c["mem_mhz"]
        return {"cpu_mhz": self._cpu_mhz() or 1000.0, "gpu_mhz": gpu, "mem_mhz": mem}

    # -- configurations -------------------------------------------------------------------
    def modes(
        self,
        batch_sizes: Iterable[int],
        threads: Iterable[int] | None = None,
        workers: Iterable[int] = (0,),
    ) -> pd.DataFrame:
        """Every batch size x CPU thread count x worker count (clocks: nominal)."""
        threads = list(threads) if threads is not None else [self._threads0]
        rows = [
            {"cores": int(t), "num_workers": int(w), "batch_size": int(b), **self.nominal}
            for b in batch_sizes
            for t in threads
            for w in workers
        ]
        return pd.DataFrame(rows)

    def complete_modes(self, modes: pd.DataFrame) -> pd.DataFrame:
        modes = modes.copy()
        for col, value in self.nominal.items():
            if col not in modes.columns:
                modes[col] = value
        if "cores" not in modes.columns:
            modes["cores"] = self._threads0
        if "num_workers" not in modes.columns:
            modes["num_workers"] = self.step.num_workers
        return modes

    def configure(self, config: Mapping[str, float]) -> None:
        if self._closed:
            raise ProfilingError("this NvmlBackend is closed; create a new one")
        threads = int(config["cores"])
        limit = os.cpu_count() or threads
        if not 1 <= threads <= limit:
            raise ProfilingError(f"cores={threads}: this machine has {limit} CPU threads")
        self._torch.set_num_threads(threads)
        self.step.configure(
            batch_size=config.get("batch_size"), num_workers=config.get("num_workers")
        )

    def observed(self, start: float, end: float) -> dict:
        got = self.sampler.extras(start, end) or [self._clocks()]
        out = {}
        for col in self.observed_columns:
            vals = [g[col] for g in got if g.get(col) is not None]
            out[col] = float(np.mean(vals)) if vals else self.nominal[col]
        return out

    def describe(self) -> dict:
        n = self.nvml
        info: dict = {
            "backend": "nvml",
            "gpu": self.gpu_name,
            "gpu_index": self.gpu_index,
            "cpu_threads": os.cpu_count(),
            "torch": self._torch.__version__,
            "clocks_changed": False,
        }
        for key, fn in (("driver", "nvmlSystemGetDriverVersion"),):
            try:
                info[key] = _text(getattr(n, fn)())
            except Exception:
                info[key] = None
        try:
            info["power_limit_w"] = float(n.nvmlDeviceGetPowerManagementLimit(self.handle)) / 1e3
        except Exception:
            info["power_limit_w"] = None
        return info

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.sampler.stop()
        self._torch.set_num_threads(self._threads0)
        try:
            self.step.close()
        finally:
            self.nvml.nvmlShutdown()
