"""Profiling on an NVIDIA GPU through NVML.

Why: servers and workstations are shared and their clocks belong to the admin, so this
backend never changes clocks, and changes the power limit only when the user allows it
(``allow_power_limit=True``); by default it calls no NVML setter at all. Its own knobs
are its configuration columns -- ``threads`` (CPU threads), ``num_workers`` (dataloader
workers), ``batch_size``, and ``power_limit_w`` when allowed -- not the Jetson columns:
a GPU's clocks are observations, written as the extra columns ``observed_gpu_mhz``,
``observed_mem_mhz`` and ``observed_cpu_mhz``, never part of a configuration.
"""

from __future__ import annotations

import atexit
import os
import re
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np
import pandas as pd

from ..errors import DataError, ProfilingError
from ..schema import MODE_COLUMNS, check_columns
from ..steps.loader import as_step
from ..steps.step import TrainingStep
from .hardware import PowerSampler, StepBackend
from .stop_signals import StopSignals, blocked


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

    ``allow_power_limit``: also sweep the GPU power limit (``power_limit_w``, needs root);
    the limit found at start is restored by :meth:`close` and :meth:`on_error`, also on
    SIGINT, SIGTERM and SIGHUP (``handle_signals``) and at interpreter exit, and read back.
    A sweep into an output file records that limit in its sidecar before the first change,
    so a rerun after a SIGKILL restores the recorded limit, not the one it finds. Off by
    default: then no NVML setter is called and a ``power_limit_w`` column is refused.
    ``nvml`` replaces the ``pynvml`` module (tests inject a fake). ``proc_root`` is where
    ``/proc/cpuinfo`` and the cpufreq files are read from for the observed CPU clock.
    """

    observed_columns = ("observed_gpu_mhz", "observed_mem_mhz", "observed_cpu_mhz")
    sampler: PowerSampler  # started in __init__

    def __init__(
        self,
        step: Any,
        gpu_index: int = 0,
        device_name: str | None = None,
        sample_period_s: float = 0.1,
        nvml: Any = None,
        clock: Callable[[], float] = time.perf_counter,
        proc_root: str | Path = "/",
        allow_power_limit: bool = False,
        handle_signals: bool = True,
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
        self.allow_power_limit = bool(allow_power_limit)
        #: the limit to restore and the settable range, in W (read only when allowed): the
        #: limit found at start, or the one an earlier run of the same output recorded
        self.power_limit0_w: float | None = None
        self.power_limit_range_w: tuple[float, float] | None = None
        self._limit_touched = False  # the limit may differ from power_limit0_w: restore
        self._signals = StopSignals()
        if self.allow_power_limit:
            try:
                self._read_power_limits()
            except ProfilingError:
                self.nvml.nvmlShutdown()
                raise
        self.proc_root = Path(proc_root)
        self.step: TrainingStep = as_step(step)
        self.device_name = device_name or slug(self.gpu_name)
        self.workload_name = self.step.name
        self.sample_period_s = float(sample_period_s)
        self.clock = clock
        self._torch = torch
        self._threads0 = torch.get_num_threads()
        self._closed = False
        self.sampler = PowerSampler(
            self._power_w, self.sample_period_s, clock, probe=self._clocks
        ).start()
        if self.allow_power_limit:  # a kill or a closed terminal unwinds through close()
            if handle_signals:
                self._signals.install()
            atexit.register(self.close)

    @property
    def config_columns(self) -> tuple[str, ...]:
        """``threads, num_workers, batch_size``, led by ``power_limit_w`` when allowed."""
        knobs = ("threads", "num_workers", "batch_size")
        return ("power_limit_w", *knobs) if self.allow_power_limit else knobs

    # -- readings ---------------------------------------------------------------------------
    def _read_power_limits(self) -> None:
        n = self.nvml
        try:
            lo, hi = n.nvmlDeviceGetPowerManagementLimitConstraints(self.handle)
            now = n.nvmlDeviceGetPowerManagementLimit(self.handle)
        except Exception as e:
            raise ProfilingError(
                f"GPU {self.gpu_index} does not report its power limit range ({e}); it "
                "cannot sweep power_limit_w: profile without allow_power_limit"
            ) from None
        self.power_limit_range_w = (float(lo) / 1e3, float(hi) / 1e3)  # mW -> W
        self.power_limit0_w = float(now) / 1e3

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
        """The clocks right now, keyed by their observed column (CPU: None if unreadable)."""
        n = self.nvml
        sm, mem = getattr(n, "NVML_CLOCK_SM", 1), getattr(n, "NVML_CLOCK_MEM", 2)
        return {
            "observed_gpu_mhz": float(n.nvmlDeviceGetClockInfo(self.handle, sm)),
            "observed_mem_mhz": float(n.nvmlDeviceGetClockInfo(self.handle, mem)),
            "observed_cpu_mhz": self._cpu_mhz(),
        }

    # -- configurations -------------------------------------------------------------------
    def _refuse_power_limit(self, where: str) -> ProfilingError:
        return ProfilingError(
            f"{where}power_limit_w: this NvmlBackend does not change the GPU power limit "
            "unless allowed; pass allow_power_limit=True (command line: --allow-power-limit, "
            "needs root) to sweep it, or drop the column"
        )

    def _check_power_limit(self, watts: float, where: str = "") -> None:
        lo, hi = self.power_limit_range_w or (float("nan"), float("nan"))
        if not (np.isfinite(watts) and lo <= watts <= hi):
            raise ProfilingError(
                f"{where}power_limit_w={watts:g} W is outside what GPU {self.gpu_index} "
                f"({self.gpu_name}) allows: {lo:g}..{hi:g} W"
            )

    def modes(
        self,
        batch_sizes: Iterable[int],
        threads: Iterable[int] | None = None,
        workers: Iterable[int] = (0,),
        power_limits_w: Iterable[float] | None = None,
    ) -> pd.DataFrame:
        """Every power limit x batch size x CPU thread count x worker count, in the columns
        of ``config_columns``. ``threads`` default: torch's current count; power limits
        need ``allow_power_limit`` (default: the limit found at start). The power limit
        varies slowest, so it is set as few times as possible."""
        if power_limits_w is not None and not self.allow_power_limit:
            raise self._refuse_power_limit("")
        threads = list(threads) if threads is not None else [self._threads0]
        limits = list(power_limits_w) if power_limits_w is not None else [self.power_limit0_w]
        rows = [
            {"power_limit_w": p, "threads": int(t), "num_workers": int(w), "batch_size": int(b)}
            for p in limits
            for b in batch_sizes
            for t in threads
            for w in workers
        ]
        return pd.DataFrame(rows, columns=list(self.config_columns))

    def complete_modes(self, modes: pd.DataFrame) -> pd.DataFrame:
        """Fill a missing ``threads`` / ``num_workers`` with the current values (and a
        missing ``power_limit_w``, when allowed, with the limit found at start)."""
        modes = modes.copy()
        if "threads" not in modes.columns:
            modes["threads"] = self._threads0
        if "num_workers" not in modes.columns:
            modes["num_workers"] = self.step.num_workers
        if self.allow_power_limit and "power_limit_w" not in modes.columns:
            modes["power_limit_w"] = self.power_limit0_w
        return modes

    def check_modes(self, modes: pd.DataFrame, source: str = "modes") -> pd.DataFrame:
        """Check every configuration before the first is set: whole counts in range, power
        limits allowed and within the GPU's range, no Jetson columns (they would be
        silently ignored here: a GPU's clocks are observed, not set)."""
        where = f"{source}: " if source else ""
        jetson = [c for c in MODE_COLUMNS if c in modes.columns]
        if jetson:
            raise DataError(
                f"{where}column(s) {', '.join(jetson)} are Jetson settings the NVML backend "
                f"does not set; its configuration columns are {', '.join(self.config_columns)} "
                "(CPU threads go in 'threads')"
            )
        if "power_limit_w" in modes.columns and not self.allow_power_limit:
            raise self._refuse_power_limit(where)
        cols = list(self.config_columns)  # threads, workers, batch size: whole (schema)
        positive = [c for c in cols if c != "num_workers"]  # no dataloader workers is fine
        out = check_columns(modes, cols, source, positive=positive, nonnegative=["num_workers"])
        limit = os.cpu_count() or int(out["threads"].max())
        for i, t in enumerate(out["threads"]):
            if t > limit:
                raise ProfilingError(
                    f"{where}row {i + 1}: threads={t}: this machine has {limit} CPU threads"
                )
        if self.allow_power_limit:
            for i, w in enumerate(out["power_limit_w"]):
                self._check_power_limit(float(w), f"{where}row {i + 1}: ")
        return out

    def configure(self, config: Mapping[str, float]) -> None:
        if self._closed:
            raise ProfilingError("this NvmlBackend is closed; create a new one")
        if "power_limit_w" in config and not self.allow_power_limit:
            raise self._refuse_power_limit("")
        jetson = [c for c in MODE_COLUMNS if c in config]
        if jetson:  # silently ignoring them would mislabel the row
            raise ProfilingError(
                f"{', '.join(jetson)}: Jetson settings the NVML backend does not set; give "
                f"{', '.join(self.config_columns)}"
            )
        threads = int(config.get("threads", self._threads0))
        limit = os.cpu_count() or threads
        if not 1 <= threads <= limit:
            raise ProfilingError(f"threads={threads}: this machine has {limit} CPU threads")
        if self.allow_power_limit and "power_limit_w" in config:
            self._set_power_limit(float(config["power_limit_w"]))
        self._torch.set_num_threads(threads)
        self.configure_step(config)

    def _current_limit_w(self) -> float | None:
        try:
            return float(self.nvml.nvmlDeviceGetPowerManagementLimit(self.handle)) / 1e3
        except Exception:  # noqa: BLE001 - unknown: the caller assumes the worst
            return None

    def _set_power_limit(self, watts: float) -> None:
        """Set the limit and read it back: a limit the driver did not take is an error,
        not a row measured under another limit."""
        self._check_power_limit(watts)
        try:
            self.nvml.nvmlDeviceSetPowerManagementLimit(self.handle, int(round(watts * 1e3)))
        except Exception as e:
            now = self._current_limit_w()  # a refused call may still have changed it
            if now is None or abs(now - (self.power_limit0_w or now)) > 0.5:
                self._limit_touched = True
            raise ProfilingError(
                f"power_limit_w={watts:g}: NVML refused to set it ({e}); setting a power "
                "limit needs root (sudo) and a GPU that supports it"
            ) from None
        self._limit_touched = True
        got = self._current_limit_w()
        if got is None or abs(got - watts) > 1.0:
            raise ProfilingError(
                f"power_limit_w={watts:g}: the GPU reports "
                f"{'no limit' if got is None else f'{got:g} W'} after setting it"
            )

    def _restore_power_limit(self) -> None:
        """Put back the limit to restore, if it may have changed, and read it back: a
        restore the driver clamped is an error naming both limits. Stop signals wait."""
        if not self._limit_touched or self.power_limit0_w is None:
            return
        w0, i = self.power_limit0_w, self.gpu_index
        by_hand = f"restore it by hand: sudo nvidia-smi -i {i} -pl {w0:g}"
        with blocked():
            try:
                self.nvml.nvmlDeviceSetPowerManagementLimit(self.handle, int(round(w0 * 1e3)))
            except Exception as e:
                raise ProfilingError(
                    f"could not restore GPU {i}'s power limit to {w0:g} W ({e}); {by_hand}"
                ) from None
            got = self._current_limit_w()
            if got is None or abs(got - w0) > 1.0:
                raise ProfilingError(
                    f"restoring GPU {i}'s power limit to {w0:g} W left it at "
                    f"{'an unknown limit' if got is None else f'{got:g} W'}; {by_hand}"
                )
        self._limit_touched = False

    def adopt_recorded(self, recorded: Mapping) -> None:
        """Take the limit to restore from the sidecar of an earlier run of the same output.

        Why: a run killed with SIGKILL cannot restore; the next one finds the sweep's limit
        on the GPU, and restoring that would make it permanent. The recorded one wins."""
        if not self.allow_power_limit or not recorded.get("power_limit_changed"):
            return
        was = recorded.get("power_limit_w")
        if isinstance(was, bool) or not isinstance(was, (int, float)):
            return
        was = float(was)
        if self.power_limit0_w is not None and abs(was - self.power_limit0_w) > 0.5:
            warnings.warn(
                f"GPU {self.gpu_index}'s power limit is {self.power_limit0_w:g} W, but the "
                f"run that started this output found {was:g} W (it may have been killed): "
                f"{was:g} W is restored at the end",
                RuntimeWarning,
                stacklevel=3,
            )
            self._limit_touched = True
        self.power_limit0_w = was

    def observed(self, start: float, end: float) -> dict:
        got = self.sampler.extras(start, end) or [self._clocks()]
        out = {}
        for col in self.observed_columns:
            vals = [g[col] for g in got if g.get(col) is not None]
            out[col] = float(np.mean(vals)) if vals else float("nan")  # never a made-up clock
        return out

    def run_header(self) -> dict:
        return {**super().run_header(), "allow_power_limit": self.allow_power_limit}

    def describe(self) -> dict:
        n = self.nvml
        info: dict = {
            "backend": "nvml",
            "gpu": self.gpu_name,
            "gpu_index": self.gpu_index,
            "cpu_threads": os.cpu_count(),
            "torch": self._torch.__version__,
            "clocks_changed": False,
            "power_limit_changed": self.allow_power_limit,
        }
        for key, fn in (("driver", "nvmlSystemGetDriverVersion"),):
            try:
                info[key] = _text(getattr(n, fn)())
            except Exception:
                info[key] = None
        if self.power_limit0_w is not None:  # read at start, before any change
            info["power_limit_w"] = self.power_limit0_w
            info["power_limit_range_w"] = list(self.power_limit_range_w or ())
        else:
            try:
                limit_mw = n.nvmlDeviceGetPowerManagementLimit(self.handle)
                info["power_limit_w"] = float(limit_mw) / 1e3
            except Exception:
                info["power_limit_w"] = None
        return info

    def on_error(self) -> None:
        """Put the power limit back at once: the error may end the process before close."""
        self._restore_power_limit()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.sampler.stop()
            self._torch.set_num_threads(self._threads0)
            try:
                self.step.close()
            finally:  # a step whose close fails must not leave the power limit changed
                self._restore_power_limit()
        finally:
            self._signals.uninstall()
            atexit.unregister(self.close)
            self.nvml.nvmlShutdown()
