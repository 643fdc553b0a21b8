"""The one small interface every profiling backend implements (twin, jetson, nvml).

Why: the sweep logic (warm-up, power stabilisation, aggregation, crash-safe output) is
written once against this interface; hardware specifics stay inside each backend, as in
Zeus's device abstraction.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Mapping

import numpy as np

from ..schema import CONFIG_COLUMNS, check_modes

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..devices.device import Device


class Backend(ABC):
    """A board (real or simulated) that can be put in a configuration and run minibatches.

    Times are on the backend's own clock (``now``, seconds): wall time on hardware,
    simulated time on the twin, so profiling-cost figures mean the same on both.
    """

    #: catalog id of the device being profiled (written to the ``device`` column)
    device_name: str = "unknown"
    #: name of the workload being profiled (written to the ``workload`` column)
    workload_name: str = "unknown"
    #: sensor sampling period in seconds (1 s on Jetsons through jtop / hwmon polling)
    sample_period_s: float = 1.0
    #: extra configuration columns this backend sets besides the schema's (e.g.
    #: ``num_workers``); the default ``config_columns`` appends them to the schema's
    knob_columns: tuple[str, ...] = ()
    #: extra measured columns (NVML: the clocks the GPU ran at), written after the
    #: results; never part of a configuration's identity, so a resume ignores them
    observed_columns: tuple[str, ...] = ()
    #: the power-mode space configurations are checked against (None: no check, e.g.
    #: NVML, which has no mode table)
    device: Device | None = None

    @property
    def config_columns(self) -> tuple[str, ...]:
        """The columns that identify and set one configuration, in output order.

        Why a property of the backend: what a configuration *is* depends on what the board
        can set (a Jetson: cores and clocks; an NVIDIA GPU: threads, workers, maybe a power
        limit), and the sweep keys its output and resume on exactly these columns. Default:
        the device's knobs and ``batch_size`` (the schema's ``CONFIG_COLUMNS`` without a
        device), followed by ``knob_columns``.
        """
        base = CONFIG_COLUMNS if self.device is None else self.device.config_columns
        return (*base, *(c for c in self.knob_columns if c not in base))

    def check_modes(self, modes: pd.DataFrame, source: str = "modes") -> pd.DataFrame:
        """Validate ``modes`` before anything is set: every configuration column present,
        numeric, in range. Returns the checked copy; errors name ``source``, row, column.

        Default: the device's table of knob values when the backend has one (errors by
        row of the caller's table), else the schema's checks of ``CONFIG_COLUMNS``."""
        if self.device is not None:
            return self.device.validate(modes, source=source, batch_size=True)
        return check_modes(modes, source=source, batch_size=True)

    @abstractmethod
    def configure(self, config: Mapping[str, float]) -> None:
        """Apply one configuration: the keys of ``config_columns`` (other keys are
        ignored). Raise ProfilingError if refused."""

    @abstractmethod
    def run_minibatch(self) -> float:
        """Run one training minibatch in the current configuration; return its time in ms."""

    @abstractmethod
    def now(self) -> float:
        """Current time on the backend's clock, in seconds."""

    @abstractmethod
    def power_samples(self, start: float, end: float) -> np.ndarray:
        """Power sensor readings (W) taken in ``[start, end)`` as an (n, 2) array of
        (time_s, watts). May be empty when the window is shorter than a sample period."""

    def complete_modes(self, modes: pd.DataFrame) -> pd.DataFrame:
        """Fill configuration columns the caller may leave out (NVML: the current thread and
        worker counts). Default: none; a missing column is an error in ``check_modes``."""
        return modes

    def sweep_order(self, modes: pd.DataFrame) -> pd.DataFrame:
        """The order to profile ``modes`` in. Default: as given. Boards that cannot step a
        frequency back up without a reboot sort high to low (see Device.sweep_order)."""
        return modes

    def observed(self, start: float, end: float) -> dict:
        """Values of ``observed_columns`` measured during ``[start, end)``, written beside
        the results (NVML: the clocks the GPU actually ran at). Default: none."""
        return {}

    def run_header(self) -> dict:
        """The settings that make two runs the same run, stored with the output and
        checked on resume (subclasses add theirs, e.g. the twin's seed)."""
        return {
            "backend": type(self).__name__,
            "device": self.device_name,
            "workload": self.workload_name,
            "sample_period_s": float(self.sample_period_s),
        }

    def describe(self) -> dict:
        """Facts about the board and software for the output's provenance sidecar."""
        return {"backend": type(self).__name__}

    def adopt_recorded(self, recorded: Mapping) -> None:  # noqa: B027 - optional
        """Called by the sweep with the ``describe()`` an earlier run of the same output
        recorded, before anything is set: a backend that restores a setting takes the value
        to restore from there (that run may have been killed before it could restore)."""

    def on_error(self) -> None:  # noqa: B027 - optional, no-op by default
        """Called by the sweep when profiling fails; hardware backends put the board back
        in its original state here, so a failure never leaves it in a half-set mode."""

    def reset(self) -> None:  # noqa: B027 - optional, no-op by default
        """Return to the top settings so frequencies can step down again (see sweep_order)."""

    def close(self) -> None:  # noqa: B027 - optional, no-op by default
        """Restore the board to the state it was in before profiling."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
