"""Profiling on an NVIDIA GPU through NVML.

Why: servers and workstations are shared and their clocks belong to the admin, so this
backend changes the power limit only when the user allows it (``allow_power_limit=True``)
and locks clocks only when allowed (``allow_clocks=True``); by default it calls no NVML
setter at all. Its own knobs are its configuration columns -- ``threads`` (CPU threads),
``num_workers`` (dataloader workers), ``batch_size``, ``power_limit_w`` when allowed, and
the locked SM clock ``gpu_mhz`` (and memory clock ``mem_mhz`` where the GPU has more than
one) when allowed. The clocks the GPU actually ran at are observations, written as the
extra columns ``observed_gpu_mhz``, ``observed_mem_mhz`` and ``observed_cpu_mhz``.
"""

from __future__ import annotations

import atexit
import itertools
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
from .nvml_state import GpuState, StateFile, default_state_dir
from .stop_signals import StopSignals, blocked

#: an SM clock read back more than this above the locked one means the lock did not take
CLOCK_TOLERANCE_MHZ = 15.0
#: nvml.h's NVML_FI_DEV_POWER_INSTANT: the power draw now, not averaged over a second
FI_POWER_INSTANT = 186


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


def _values(given: Iterable[float] | None, default: float | None) -> list[Any]:
    """The values given, or the one default (None: a column the backend drops)."""
    return list(given) if given is not None else [default]


class NvmlBackend(StepBackend):
    """An NVIDIA GPU running the user's training step; power from NVML.

    Every setting is read back. The limit found at start is restored, and locked clocks
    are reset, by :meth:`close` and :meth:`on_error`, also on SIGINT, SIGTERM and SIGHUP
    (``handle_signals``) and at interpreter exit. Before the first change the original
    settings go to a per-GPU state file in ``state_dir``, deleted once they are restored:
    a later run of any output finds it after a SIGKILL and restores those settings, not
    the ones it finds. Changing settings is off by default: then no NVML setter is called
    and the ``power_limit_w`` / ``gpu_mhz`` / ``mem_mhz`` columns are refused.

    Parameters
    ----------
    step : TrainingStep, callable or str
        The training step to time: a step, a ``fn(batch_size)``, or a workload name
        (:func:`~powertrain.steps.as_step`).
    gpu_index : int
        The GPU's NVML index (``nvidia-smi -L``).
    device_name : str, optional
        The measurements' ``device`` (default the GPU's name as a slug:
        ``nvidia-h100-80gb-hbm3``).
    sample_period_s : float
        Seconds between power readings.
    nvml : module, optional
        Replaces the ``pynvml`` module (tests inject a fake).
    clock : callable
        The clock steps and power readings are timed with (seconds).
    proc_root : str or Path
        Where ``/proc/cpuinfo`` and the cpufreq files are read from for the observed CPU
        clock.
    allow_power_limit : bool
        Also sweep the GPU power limit (``power_limit_w``, needs root).
    handle_signals : bool
        Restore the settings on SIGINT, SIGTERM and SIGHUP (only when they may change).
    allow_clocks : bool
        Also sweep locked SM clocks (``gpu_mhz``; ``mem_mhz`` too where the GPU lists more
        than one memory clock), among the clocks NVML reports as supported; needs root.
    state_dir : str or Path, optional
        Where the state file goes (default ``$POWERTRAIN_STATE_DIR`` or
        ``~/.local/state/powertrain/nvml``).

    Raises
    ------
    ProfilingError
        When NVML cannot start, has no GPU ``gpu_index``, or the GPU does not report the
        power limit range or clocks an ``allow_*`` option needs.
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
        allow_clocks: bool = False,
        state_dir: str | Path | None = None,
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
        self.allow_clocks = bool(allow_clocks)
        #: the limit to restore and the settable range, in W (read only when allowed): the
        #: limit found at start, or the one an unfinished earlier run recorded
        self.power_limit0_w: float | None = None
        self.power_limit_range_w: tuple[float, float] | None = None
        #: supported clocks (MHz, read only when clocks are allowed): memory clock ->
        #: the SM clocks allowed with it
        self.supported_clocks: dict[float, tuple[float, ...]] = {}
        # what may differ from the original now, so must be put back
        self._touched = {"power": False, "sm": False, "mem": False}
        self._signals = StopSignals()
        self._state_file = StateFile(state_dir or default_state_dir(), self._gpu_key())
        self._state = GpuState(gpu=f"{self.gpu_index} ({self.gpu_name})")
        try:
            self._start_changing()
            self.step: TrainingStep = as_step(step)
        except BaseException:
            self._state_file.release()
            self.nvml.nvmlShutdown()
            raise
        self.proc_root = Path(proc_root)
        self.device_name = device_name or slug(self.gpu_name)
        self.workload_name = self.step.name
        self.sample_period_s = float(sample_period_s)
        #: "instant" (NVML's instantaneous field) or "average" (nvmlDeviceGetPowerUsage,
        #: a one-second average on Ampere and newer, so a short window would read power
        #: partly drawn by the configuration before it)
        self.power_source = "instant" if self._instant_power_mw() is not None else "average"
        self.clock = clock
        self._torch = torch
        self._threads0 = torch.get_num_threads()
        self._closed = False
        self.sampler = PowerSampler(
            self._power_w, self.sample_period_s, clock, probe=self._clocks
        ).start()
        if self.changes_settings:  # a kill or a closed terminal unwinds through close()
            if handle_signals:
                self._signals.install()
            atexit.register(self.close)

    @property
    def changes_settings(self) -> bool:
        """Whether this backend may call an NVML setter at all."""
        return self.allow_power_limit or self.allow_clocks

    @property
    def mem_clock_knob(self) -> bool:
        """Memory clocks are a knob only where allowed and the GPU lists more than one."""
        return self.allow_clocks and len(self.supported_clocks) > 1

    @property
    def config_columns(self) -> tuple[str, ...]:
        """``threads, num_workers, batch_size``, led by ``power_limit_w``, ``mem_mhz`` and
        ``gpu_mhz`` when allowed (slowest-varying first)."""
        lead = (
            ("power_limit_w",) * self.allow_power_limit
            + ("mem_mhz",) * self.mem_clock_knob
            + ("gpu_mhz",) * self.allow_clocks
        )
        return (*lead, "threads", "num_workers", "batch_size")

    # -- start: what may change, and what an unfinished run left ---------------------------
    def _gpu_key(self) -> str:
        try:
            return _text(self.nvml.nvmlDeviceGetUUID(self.handle))
        except Exception:  # noqa: BLE001 - older drivers: the index names the GPU
            return f"index{self.gpu_index}"

    def _start_changing(self) -> None:
        """Read the ranges of what may change, then adopt what an unfinished run left."""
        if self.allow_power_limit:
            self._read_power_limits()
        if self.allow_clocks:
            self._read_supported_clocks()
        if not self.changes_settings:  # never owns, so never clears, what a run left
            left = self._state_file.peek()
            if left is None or not left.dirty:
                return
            warnings.warn(
                f"{self._state_file.path}: a run that did not finish changed GPU "
                f"{self.gpu_index}'s settings; rows measured now run under them (a run "
                "with --allow-power-limit or --allow-clocks restores them)",
                RuntimeWarning,
                stacklevel=3,
            )
            return
        left = self._state_file.claim()  # held until close: a live run is never adopted
        if left is not None and left.dirty:
            self._adopt_state(left)

    def _adopt_state(self, left: GpuState) -> None:
        """Take over what a killed run left: its original limit, its locked clocks."""
        now = self._current_limit_w()
        if left.power_limit_w is not None:
            self.power_limit0_w = float(left.power_limit_w)
            self._touched["power"] = True
        self._touched["sm"] = left.sm_locked
        self._touched["mem"] = left.mem_locked
        self._state = GpuState(left.gpu, left.power_limit_w, left.sm_locked, left.mem_locked)
        self._state_file.save(self._state)  # this process owns it now
        was = f"{left.power_limit_w:g} W" if left.power_limit_w is not None else "unchanged"
        warnings.warn(
            f"GPU {self.gpu_index} was left changed by a run that did not finish "
            f"({self._state_file.path}): power limit now "
            f"{'unknown' if now is None else f'{now:g} W'}, originally {was}; locked "
            f"clocks: SM {left.sm_locked}, memory {left.mem_locked}. The original settings "
            "are restored at the end",
            RuntimeWarning,
            stacklevel=4,
        )

    def _note_change(self, what: str) -> None:
        """Record ``what`` (power, sm, mem) in the state file before changing it."""
        if what == "power" and self._state.power_limit_w is None:
            self._state.power_limit_w = self.power_limit0_w
        elif what == "sm":
            self._state.sm_locked = True
        elif what == "mem":
            self._state.mem_locked = True
        else:
            return
        self._state_file.save(self._state)

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

    def _read_supported_clocks(self) -> None:
        """Memory clock -> the SM clocks NVML supports with it (the allowed values)."""
        n = self.nvml
        try:
            mems = sorted({float(m) for m in n.nvmlDeviceGetSupportedMemoryClocks(self.handle)})
            table = {
                m: tuple(
                    sorted(
                        {
                            float(g)
                            for g in n.nvmlDeviceGetSupportedGraphicsClocks(self.handle, int(m))
                        }
                    )
                )  # fmt: skip
                for m in mems
            }
        except Exception as e:
            raise ProfilingError(
                f"GPU {self.gpu_index} does not report its supported clocks ({e}); it cannot "
                "sweep gpu_mhz: profile without allow_clocks"
            ) from None
        if not table or not all(table.values()):
            raise ProfilingError(
                f"GPU {self.gpu_index} lists no supported SM clocks; it cannot sweep gpu_mhz"
            )
        self.supported_clocks = table

    def _instant_power_mw(self) -> float | None:
        """The instantaneous power field, or None where the driver or GPU lacks it."""
        try:
            (field,) = self.nvml.nvmlDeviceGetFieldValues(self.handle, [FI_POWER_INSTANT])
            mw = float(field.value.uiVal) if field.nvmlReturn == 0 else 0.0
        except Exception:
            return None
        return mw if mw > 0 else None

    def _power_w(self) -> float:
        if self.power_source == "instant":
            mw = self._instant_power_mw()
            if mw is not None:
                return mw / 1e3  # mW -> W
        return float(self.nvml.nvmlDeviceGetPowerUsage(self.handle)) / 1e3

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

    def _refused_columns(self, columns: Iterable[str], where: str) -> None:
        """Refuse the power limit unless allowed, and every Jetson column that is not one
        of this backend's knobs (silently ignoring one would mislabel the rows)."""
        columns = list(columns)
        if "power_limit_w" in columns and not self.allow_power_limit:
            raise self._refuse_power_limit(where)
        bad = [c for c in MODE_COLUMNS if c in columns and c not in self.config_columns]
        if not bad:
            return
        hint = (
            "locked clocks (gpu_mhz, and mem_mhz where the GPU has several memory clocks) "
            "need allow_clocks=True (command line: --allow-clocks, needs root)"
            if self.allow_clocks is False and set(bad) <= {"gpu_mhz", "mem_mhz"}
            else "CPU threads go in 'threads'"
        )
        raise DataError(
            f"{where}column(s) {', '.join(bad)} are Jetson settings the NVML backend does not "
            f"set here; its configuration columns are {', '.join(self.config_columns)} ({hint})"
        )

    def _check_power_limit(self, watts: float, where: str = "") -> None:
        lo, hi = self.power_limit_range_w or (float("nan"), float("nan"))
        if not (np.isfinite(watts) and lo <= watts <= hi):
            raise ProfilingError(
                f"{where}power_limit_w={watts:g} W is outside what GPU {self.gpu_index} "
                f"({self.gpu_name}) allows: {lo:g}..{hi:g} W"
            )

    def _top_mem(self) -> float:
        return max(self.supported_clocks)

    def _check_clocks(self, gpu: float, mem: float | None, where: str = "") -> None:
        """``gpu`` must be an SM clock NVML supports with ``mem`` (default: the top one)."""
        mem = self._top_mem() if mem is None else mem
        if mem not in self.supported_clocks:
            raise ProfilingError(
                f"{where}mem_mhz={mem:g} is not a memory clock GPU {self.gpu_index} supports: "
                f"{', '.join(f'{m:g}' for m in self.supported_clocks)}"
            )
        allowed = self.supported_clocks[mem]
        if gpu not in allowed:
            raise ProfilingError(
                f"{where}gpu_mhz={gpu:g} is not an SM clock GPU {self.gpu_index} supports "
                f"with memory at {mem:g} MHz: {len(allowed)} clocks {allowed[0]:g}.."
                f"{allowed[-1]:g} (nvidia-smi -q -d SUPPORTED_CLOCKS lists them)"
            )

    def modes(
        self,
        batch_sizes: Iterable[int],
        threads: Iterable[int] | None = None,
        workers: Iterable[int] = (0,),
        power_limits_w: Iterable[float] | None = None,
        gpu_clocks_mhz: Iterable[float] | None = None,
        mem_clocks_mhz: Iterable[float] | None = None,
    ) -> pd.DataFrame:
        """Every power limit x memory clock x SM clock x batch size x CPU thread count x
        worker count, in the columns of ``config_columns``. ``threads`` default: torch's
        current count; power limits need ``allow_power_limit`` (default: the limit found
        at start), clocks ``allow_clocks`` (default: the top ones). The settings that are
        slowest to change vary slowest, so each is set as few times as possible."""
        if power_limits_w is not None and not self.allow_power_limit:
            raise self._refuse_power_limit("")
        if (gpu_clocks_mhz is not None or mem_clocks_mhz is not None) and not self.allow_clocks:
            self._refused_columns(["gpu_mhz"], "")
        if mem_clocks_mhz is not None and not self.mem_clock_knob:  # never dropped silently
            raise ProfilingError(
                f"mem_clocks_mhz (--mem-clocks) {','.join(f'{m:g}' for m in mem_clocks_mhz)}: "
                f"GPU {self.gpu_index} ({self.gpu_name}) lists one memory clock "
                f"({self._top_mem():g} MHz), so it is not a knob here; drop it"
            )
        mem0 = self._top_mem() if self.allow_clocks else None
        top = max(self.supported_clocks[mem0]) if mem0 is not None else None
        grid: dict[str, list[Any]] = {
            "power_limit_w": _values(power_limits_w, self.power_limit0_w),
            "mem_mhz": _values(mem_clocks_mhz, mem0),
            "gpu_mhz": _values(gpu_clocks_mhz, top),
            "batch_size": [int(b) for b in batch_sizes],
            "threads": [int(t) for t in (threads if threads is not None else [self._threads0])],
            "num_workers": [int(w) for w in workers],
        }
        rows = [dict(zip(grid, combo)) for combo in itertools.product(*grid.values())]
        return pd.DataFrame(rows)[list(self.config_columns)]

    def complete_modes(self, modes: pd.DataFrame) -> pd.DataFrame:
        """Fill a missing ``threads`` / ``num_workers`` with the current values (and, when
        allowed, a missing ``power_limit_w`` with the limit found at start, missing clocks
        with the top ones)."""
        modes = modes.copy()
        if "threads" not in modes.columns:
            modes["threads"] = self._threads0
        if "num_workers" not in modes.columns:
            modes["num_workers"] = self.step.num_workers
        if self.allow_power_limit and "power_limit_w" not in modes.columns:
            modes["power_limit_w"] = self.power_limit0_w
        if self.mem_clock_knob and "mem_mhz" not in modes.columns:
            modes["mem_mhz"] = self._top_mem()
        if self.allow_clocks and "gpu_mhz" not in modes.columns:
            mems = modes["mem_mhz"] if "mem_mhz" in modes.columns else [self._top_mem()]
            modes["gpu_mhz"] = [max(self.supported_clocks.get(float(m), (np.nan,))) for m in mems]
        return modes

    def check_modes(self, modes: pd.DataFrame, source: str = "modes") -> pd.DataFrame:
        """Check every configuration before the first is set: whole counts in range, power
        limits and clocks allowed and among what the GPU supports, no Jetson columns that
        are not this backend's knobs (they would be silently ignored)."""
        where = f"{source}: " if source else ""
        self._refused_columns(modes.columns, where)
        cols = list(self.config_columns)  # threads, workers, batch size: whole (schema)
        positive = [c for c in cols if c != "num_workers"]  # no dataloader workers is fine
        out = check_columns(modes, cols, source, positive=positive, nonnegative=["num_workers"])
        limit = os.cpu_count() or int(out["threads"].max())
        for i, t in enumerate(out["threads"]):
            if t > limit:
                raise ProfilingError(
                    f"{where}row {i + 1}: threads={t}: this machine has {limit} CPU threads"
                )
        for i, row in enumerate(out.to_dict("records")):
            if self.allow_power_limit:
                self._check_power_limit(float(row["power_limit_w"]), f"{where}row {i + 1}: ")
            if self.allow_clocks:
                mem = float(row["mem_mhz"]) if self.mem_clock_knob else None
                self._check_clocks(float(row["gpu_mhz"]), mem, f"{where}row {i + 1}: ")
        return out

    def configure(self, config: Mapping[str, float]) -> None:
        if self._closed:
            raise ProfilingError("this NvmlBackend is closed; create a new one")
        try:
            self._refused_columns(config, "")
        except DataError as e:
            raise ProfilingError(str(e)) from None
        threads = int(config.get("threads", self._threads0))
        limit = os.cpu_count() or threads
        if not 1 <= threads <= limit:
            raise ProfilingError(f"threads={threads}: this machine has {limit} CPU threads")
        if self.allow_power_limit and "power_limit_w" in config:
            self._set_power_limit(float(config["power_limit_w"]))
        if self.allow_clocks and "gpu_mhz" in config:
            mem = config.get("mem_mhz") if self.mem_clock_knob else None
            self._set_clocks(float(config["gpu_mhz"]), None if mem is None else float(mem))
        self._torch.set_num_threads(threads)
        self.configure_step(config)

    # -- setting and restoring -------------------------------------------------------------
    def _current_limit_w(self) -> float | None:
        try:
            return float(self.nvml.nvmlDeviceGetPowerManagementLimit(self.handle)) / 1e3
        except Exception:  # noqa: BLE001 - unknown: the caller assumes the worst
            return None

    def _set_power_limit(self, watts: float) -> None:
        """Set the limit and read it back: a limit the driver did not take is an error,
        not a row measured under another limit."""
        self._check_power_limit(watts)
        self._note_change("power")
        try:
            self.nvml.nvmlDeviceSetPowerManagementLimit(self.handle, int(round(watts * 1e3)))
        except Exception as e:
            now = self._current_limit_w()  # a refused call may still have changed it
            if now is None or abs(now - (self.power_limit0_w or now)) > 0.5:
                self._touched["power"] = True
            raise ProfilingError(
                f"power_limit_w={watts:g}: NVML refused to set it ({e}); setting a power "
                "limit needs root (sudo) and a GPU that supports it"
            ) from None
        self._touched["power"] = True
        got = self._current_limit_w()
        if got is None or abs(got - watts) > 1.0:
            raise ProfilingError(
                f"power_limit_w={watts:g}: the GPU reports "
                f"{'no limit' if got is None else f'{got:g} W'} after setting it"
            )

    def _sm_clock_now(self) -> float | None:
        try:
            sm = getattr(self.nvml, "NVML_CLOCK_SM", 1)
            return float(self.nvml.nvmlDeviceGetClockInfo(self.handle, sm))
        except Exception:  # noqa: BLE001 - unknown: the caller reports it
            return None

    def _lock(self, what: str, mhz: float) -> None:
        """Lock the SM (``sm``) or memory (``mem``) clock at ``mhz`` (min = max)."""
        fn = "nvmlDeviceSetGpuLockedClocks" if what == "sm" else "nvmlDeviceSetMemoryLockedClocks"
        self._note_change(what)
        self._touched[what] = True  # a refused call may have half-applied: reset anyway
        try:
            getattr(self.nvml, fn)(self.handle, int(mhz), int(mhz))
        except Exception as e:
            col = "gpu_mhz" if what == "sm" else "mem_mhz"
            raise ProfilingError(
                f"{col}={mhz:g}: NVML refused to lock it ({e}); locking clocks needs root "
                "(sudo) and a GPU that supports it (Volta or newer; memory: Ampere or newer)"
            ) from None

    def _set_clocks(self, gpu: float, mem: float | None) -> None:
        """Lock the clocks and read the SM clock back: one above the lock means the lock
        did not take (below is fine: a power or thermal limit may hold it lower, and the
        row records it as observed_gpu_mhz)."""
        self._check_clocks(gpu, mem)
        if mem is not None:
            self._lock("mem", mem)
        self._lock("sm", gpu)
        got = self._sm_clock_now()
        if got is None or got > gpu + CLOCK_TOLERANCE_MHZ:
            raise ProfilingError(
                f"gpu_mhz={gpu:g}: the GPU reports "
                f"{'no SM clock' if got is None else f'{got:g} MHz'} after locking it"
            )

    def _restore_power_limit(self) -> None:
        """Put back the limit to restore, if it may have changed, and read it back: a
        restore the driver clamped is an error naming both limits."""
        if not self._touched["power"] or self.power_limit0_w is None:
            return
        w0, i = self.power_limit0_w, self.gpu_index
        by_hand = f"restore it by hand: sudo nvidia-smi -i {i} -pl {w0:g}"
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
        self._touched["power"] = False

    def _reset_clock(self, what: str) -> None:
        """Unlock the SM or memory clock (NVML has no getter for a lock: the reset call's
        success is the read-back)."""
        if not self._touched[what]:
            return
        fn, flag = (
            ("nvmlDeviceResetGpuLockedClocks", "-rgc")
            if what == "sm"
            else ("nvmlDeviceResetMemoryLockedClocks", "-rmc")
        )
        try:
            getattr(self.nvml, fn)(self.handle)
        except Exception as e:
            raise ProfilingError(
                f"could not unlock GPU {self.gpu_index}'s {'SM' if what == 'sm' else 'memory'} "
                f"clock ({e}); unlock it by hand: sudo nvidia-smi -i {self.gpu_index} {flag}"
            ) from None
        self._touched[what] = False

    def _restore(self) -> None:
        """Unlock the clocks and restore the power limit, each tried even if another
        fails; the state file goes once all are back. Stop signals wait meanwhile."""
        errors = []
        with blocked():
            for step in (lambda: self._reset_clock("sm"), lambda: self._reset_clock("mem")):
                try:
                    step()
                except ProfilingError as e:
                    errors.append(str(e))
            try:
                self._restore_power_limit()
            except ProfilingError as e:
                errors.append(str(e))
            if not errors and self.changes_settings and not any(self._touched.values()):
                self._state_file.clear()
                self._state = GpuState(self._state.gpu)
        if errors:
            raise ProfilingError("; ".join(errors))

    def adopt_recorded(self, recorded: Mapping) -> None:
        """Take the limit to restore from the sidecar of an earlier run of the same output.

        Why: a run killed with SIGKILL cannot restore; the next one finds the sweep's limit
        on the GPU, and restoring that would make it permanent. The recorded one wins,
        unless the per-GPU state file already named the original (it is newer)."""
        if not self.allow_power_limit or not recorded.get("power_limit_changed"):
            return
        if self._state.power_limit_w is not None:
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
            self._touched["power"] = True
        self.power_limit0_w = was

    def observed(self, start: float, end: float) -> dict:
        got = self.sampler.extras(start, end) or [self._clocks()]
        out = {}
        for col in self.observed_columns:
            vals = [g[col] for g in got if g.get(col) is not None]
            out[col] = float(np.mean(vals)) if vals else float("nan")  # never a made-up clock
        return out

    def run_header(self) -> dict:
        header = {**super().run_header(), "allow_power_limit": self.allow_power_limit}
        if self.allow_clocks:  # absent when off, so older outputs still resume
            header["allow_clocks"] = True
        if self.power_source == "instant":  # an output never mixes the two readings; absent
            header["power_source"] = "instant"  # for the average, as older outputs have it
        return header

    def describe(self) -> dict:
        n = self.nvml
        info: dict = {
            "backend": "nvml",
            "gpu": self.gpu_name,
            "gpu_index": self.gpu_index,
            "cpu_threads": os.cpu_count(),
            "torch": self._torch.__version__,
            "clocks_changed": self.allow_clocks,
            "power_limit_changed": self.allow_power_limit,
            "power_source": self.power_source,
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
        if self.allow_clocks:
            info["supported_mem_mhz"] = sorted(self.supported_clocks)
        return info

    def device_spec(self, power_step_w: float = 25.0) -> dict:
        """A device spec (JSON form) from what NVML reports: the SM clocks supported at the
        top memory clock, the memory clocks where there are several, and the power limit
        range in ``power_step_w`` steps (named the spec's ``power_cap``)."""
        knobs: dict[str, list[float]] = {}
        if self.power_limit_range_w is not None:
            lo, hi = self.power_limit_range_w
            grid = np.arange(lo, hi, power_step_w).tolist() + [hi]
            knobs["power_limit_w"] = [float(round(w, 1)) for w in grid]
        if self.supported_clocks:
            if len(self.supported_clocks) > 1:
                knobs["mem_mhz"] = sorted(self.supported_clocks)
            knobs["gpu_mhz"] = list(self.supported_clocks[self._top_mem()])
        spec: dict = {
            "name": self.device_name,
            "description": f"{self.gpu_name} (from NVML, GPU {self.gpu_index})",
            "knobs": knobs,
            "stratify_by": [k for k in ("gpu_mhz", "power_limit_w") if k in knobs],
        }
        if "power_limit_w" in knobs:
            spec["power_cap"] = "power_limit_w"
        return spec

    def on_error(self) -> None:
        """Put everything back at once: the error may end the process before close."""
        self._restore()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.sampler.stop()
            self._torch.set_num_threads(self._threads0)
            try:
                self.step.close()
            finally:  # a step whose close fails must not leave settings changed
                self._restore()
        finally:
            self._signals.uninstall()
            atexit.unregister(self.close)
            self._state_file.release()
            self.nvml.nvmlShutdown()
