"""Profiling on a real Jetson: power modes through sysfs, power from jtop or INA3221.

Why: the user's ~50 samples must be measured on their own board, and the board must
never be left in an odd mode. The backend snapshots the configuration it will touch
(online cores, CPU/GPU ranges, EMC, fan) before writing anything, and restores it on
close, on any profiling error, on Ctrl-C, SIGTERM/SIGHUP and at interpreter exit.
"""

from __future__ import annotations

import atexit
import os
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping

import pandas as pd

from ...devices.device import Device, get_device
from ...errors import ProfilingError
from ...steps.loader import as_step
from ...steps.step import TrainingStep
from ..hardware import PowerSampler, StepBackend
from ..stop_signals import StopSignals, blocked
from .board_id import board_device, check_board, match_spec, read_board
from .power_sensors import open_sensor, rail_column
from .sysfs_knobs import SysfsKnobs, Writer, confined, glob_under, write_sysfs

ROOT_HELP = (
    "profiling a Jetson sets clocks through sysfs, which needs root: run "
    "`sudo -E $(which powertrain) profile ...` (or `sudo -E python your_script.py`)"
)

#: fan PWM files (JetPack 5+: hwmon pwm1, JetPack 4: target_pwm); 255 = full speed
_FAN_GLOBS = (
    "/sys/devices/platform/pwm-fan/hwmon/hwmon*/pwm1",
    "/sys/devices/pwm-fan/hwmon/hwmon*/pwm1",
    "/sys/devices/pwm-fan/target_pwm",
)


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


class _Fan:
    """Fan at full speed while profiling: thermal throttling would bend the measurements."""

    def __init__(self, root: Path, write: Writer):
        self.write = write
        self.files: list[Path] = []
        for pattern in _FAN_GLOBS:
            for p in glob_under(root, pattern):
                if p.resolve() not in {f.resolve() for f in self.files}:
                    self.files.append(p)
        if not self.files:
            warnings.warn(
                "no fan PWM file found; if the board has a fan, set it to full speed "
                "yourself (sudo jetson_clocks --fan) so it does not throttle",
                RuntimeWarning,
                stacklevel=3,
            )
        self.saved = {p: p.read_text().strip() for p in self.files}
        enables = [p.with_name(p.name + "_enable") for p in self.files]
        self.saved.update({e: e.read_text().strip() for e in enables if e.exists()})

    def full(self) -> None:
        for p in self.files:
            enable = p.with_name(p.name + "_enable")
            if enable.exists():
                self.write(enable, "1")  # manual control
            self.write(p, "255")

    def restore(self) -> None:
        """Write every saved value back, even after a failure; then raise them all."""
        errors = []
        for p, v in self.saved.items():
            if not p.name.endswith("_enable"):
                try:
                    self.write(p, v)
                except Exception as e:  # noqa: BLE001 - collect, keep restoring
                    errors.append(f"{p}: {e}")
        for p, v in self.saved.items():
            if p.name.endswith("_enable"):
                try:
                    self.write(p, v)
                except Exception as e:  # noqa: BLE001
                    errors.append(f"{p}: {e}")
        if errors:
            raise ProfilingError("fan: " + "; ".join(errors))


class JetsonBackend(StepBackend):
    """A Jetson running the user's training step.

    Use it as a context manager (or call :meth:`close`) so the board is restored.
    ``self.device`` is the board's own power-mode space (its tables may differ from the
    catalog's); draw modes from it.

    Parameters
    ----------
    device : str, Path, dict, DeviceSpec or Device
        Catalog id or spec of this board (as :func:`~powertrain.get_device` takes it),
        or ``"auto"`` (recognised from the device tree and the active nvpmodel file).
    step : TrainingStep, callable or str
        A TrainingStep, a callable ``step(batch_size)``, or a workload name (see
        :func:`~powertrain.steps.loader.load_step`).
    root : str or Path
        The board's file system root (for tests and chroots).
    sensor : str
        The power source: ``"jtop"`` (the jetson-stats service), ``"hwmon"`` (the
        INA3221 files), or ``"auto"``: jtop when its service answers, else hwmon.
    sample_period_s : float
        Seconds between power readings.
    fan : bool
        Run the fan at full speed while profiling (restored at the end), so the board
        does not throttle.
    emc : str
        The memory clock control: ``"bpmp"``, ``"override"`` (Nano), ``"cap"``, or
        ``"auto"``: the first one the board has.
    gpu_devfreq : str or Path, optional
        The GPU's devfreq folder, on the board or under ``root`` (default: found
        automatically).
    write, jtop_factory : callable, optional
        Replace the sysfs writer and the jtop client (for tests).
    clock : callable
        The clock steps and power readings are timed with (seconds).
    handle_signals : bool
        Restore the board on SIGINT, SIGTERM and SIGHUP.
    check_root : bool
        Refuse to start unless run as root (off only for tests and chroots).
    allow_unlisted_emc : bool
        Write a memory clock the board does not list (one from the catalog, unchecked).
    write_roots : sequence of str or Path, optional
        Where writes may land (default ``root``'s ``sys``, which holds debugfs).

    Raises
    ------
    ProfilingError
        Not root (``check_root``), a board ``"auto"`` cannot tell, a sysfs without a knob
        it needs, or a power sensor that cannot be read.
    SpecError
        An unknown device id or a malformed spec.
    """

    knob_columns = ("num_workers",)
    device: Device  # this board's own mode space, set in __init__

    def __init__(
        self,
        device: Any,
        step: Any,
        root: str | Path = "/",
        sensor: str = "auto",
        sample_period_s: float = 1.0,
        fan: bool = True,
        emc: str = "auto",
        gpu_devfreq: str | Path | None = None,
        write: Writer | None = None,
        jtop_factory: Callable | None = None,
        clock: Callable[[], float] = time.perf_counter,
        handle_signals: bool = True,
        check_root: bool = True,
        allow_unlisted_emc: bool = False,
        write_roots: Any = None,
    ):
        if check_root and not _is_root():
            raise ProfilingError(ROOT_HELP)
        self.root = Path(root)
        board = read_board(self.root)
        catalog = Device(match_spec(board)) if device == "auto" else get_device(device)
        self.clock = clock
        self.sample_period_s = float(sample_period_s)
        self.step: TrainingStep = as_step(step)
        self.device_name = catalog.name
        self.workload_name = self.step.name
        self.knobs = SysfsKnobs(
            catalog.spec,
            self.root,
            write or write_sysfs,
            emc=emc,
            gpu_devfreq=gpu_devfreq,
            allow_unlisted_emc=allow_unlisted_emc,
            write_roots=write_roots,
        )
        # every write (the fan's too) is confined to the sysfs/debugfs roots
        self.write = confined(write or write_sysfs, self.knobs.write_roots)
        self.tables = self.knobs.check_against_catalog()
        check_board(catalog.spec, board, self.tables)  # a capped Super firmware, named
        self.device = board_device(catalog.spec, self.tables)
        self.sensor = open_sensor(
            catalog.spec, self.root, sensor, self.sample_period_s, jtop_factory
        )
        #: power_w is the module total (VDD_IN where the board has it); the component
        #: rails the spec lists are written beside it
        self.observed_columns = tuple(rail_column(n) for n in self.sensor.components)
        self._closed = False
        self._signals = StopSignals()
        self.original = self.knobs.snapshot()  # before the first write
        self.original_mode = self.knobs.state()
        self._fan = _Fan(self.root, self.write) if fan else None
        self.sampler = None
        try:
            # handlers first: a signal at any later point restores the board
            if handle_signals:
                self._signals.install()
            atexit.register(self.close)
            if self._fan:
                self._fan.full()
            probe = self._rails if self.sensor.components else None
            self.sampler = PowerSampler(
                self.sensor.read_w, self.sample_period_s, clock, probe=probe
            ).start()
        except BaseException:
            self._closed = True
            try:
                self._restore_board()
            finally:
                self.sensor.close()
                self._signals.uninstall()
                atexit.unregister(self.close)
            raise

    # -- safety ---------------------------------------------------------------------
    def _restore_board(self) -> None:
        """Every restoring step runs, whatever failed before it, with the stop signals
        blocked (delivered once the board is back), so a second Ctrl-C or SIGTERM cannot
        leave it half restored."""
        with blocked():
            errors = self._restore_steps()
        if errors:
            raise ProfilingError("; ".join(errors))
        if self.knobs.snapshot() != self.original:
            raise ProfilingError(
                "the board did not return to its original mode; reboot it to be safe"
            )

    def _restore_steps(self) -> list[str]:
        errors = []
        try:
            self.knobs.restore(self.original)
        except Exception as e:  # noqa: BLE001 - the fan must still be restored
            errors.append(str(e))
        if self._fan:
            try:
                self._fan.restore()
            except Exception as e:  # noqa: BLE001
                errors.append(str(e))
        return errors

    def on_error(self) -> None:
        """A failed sweep leaves the board as it was before profiling."""
        if not self._closed:
            self._restore_board()

    def close(self) -> None:
        """Stop sampling and restore the board (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.sampler is not None:
                self.sampler.stop()
            self.sensor.close()
            self.step.close()
        finally:
            try:
                self._restore_board()
            finally:
                self._signals.uninstall()
                atexit.unregister(self.close)

    # -- Backend ----------------------------------------------------------------------
    def _rails(self) -> dict:
        return {rail_column(n): w for n, w in self.sensor.read_components().items()}

    def observed(self, start: float, end: float) -> dict:
        """The component rails' mean power over the measurement (NaN where not read)."""
        got = self.sampler.extras(start, end) if self.sampler is not None else []
        out = {}
        for col in self.observed_columns:
            vals = [g[col] for g in got if g.get(col) == g.get(col) and col in g]
            out[col] = sum(vals) / len(vals) if vals else float("nan")
        return out

    def complete_modes(self, modes: pd.DataFrame) -> pd.DataFrame:
        if "num_workers" not in modes.columns:
            modes = modes.assign(num_workers=self.step.num_workers)
        return modes

    def sweep_order(self, modes: pd.DataFrame) -> pd.DataFrame:
        """High to low (the boards do not step frequencies up without a reboot)."""
        return self.device.sweep_order(modes)

    def configure(self, config: Mapping[str, float]) -> None:
        if self._closed:
            raise ProfilingError("this JetsonBackend is closed; create a new one")
        self.knobs.apply(
            int(config["cores"]),
            config["cpu_mhz"],
            config["gpu_mhz"],
            config["mem_mhz"],
            self.tables,
        )
        self.configure_step(config)

    def reset(self) -> None:
        t = self.tables
        try:
            self.knobs.apply(t.cores, max(t.cpu_mhz), max(t.gpu_mhz), max(t.mem_mhz), t)
        except ProfilingError as e:
            raise ProfilingError(
                f"{e}. The board cannot step frequencies back up without a reboot: reboot, then "
                "rerun the same command with the same --out; the sweep resumes where it stopped"
            ) from None

    def describe(self) -> dict:
        release = self.root / "etc/nv_tegra_release"
        return {
            "backend": "jetson",
            "sensor": self.sensor.name,
            "rails": getattr(self.sensor, "rails", None),
            "power_w_is": "the module total: "
            + " + ".join(getattr(self.sensor, "rails", None) or ["jtop's total"])
            + " (a power cap is about this)",
            "component_rails": list(self.sensor.components),
            "emc_control": self.knobs.emc.method,
            "gpu_devfreq": str(self.knobs.gpu.folder),
            "original_mode": self.original_mode,
            "board_tables": {
                "cores": self.tables.cores,
                "cpu_mhz": list(self.tables.cpu_mhz),
                "gpu_mhz": list(self.tables.gpu_mhz),
                "mem_mhz": list(self.tables.mem_mhz),
            },
            "l4t": release.read_text().splitlines()[0] if release.exists() else None,
        }
