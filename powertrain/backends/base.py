"""The one small interface every profiling backend implements (twin, jetson, nvml).

Why: the sweep logic (warm-up, power stabilisation, aggregation, crash-safe output) is
written once against this interface; hardware specifics stay inside each backend, as in
Zeus's device abstraction.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Mapping

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..devices import Device


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
    #: ``num_workers``); they are written to the output and identify a configuration
    knob_columns: tuple[str, ...] = ()
    #: schema configuration columns this backend cannot set but reports as observed
    #: (NVML: the clocks); they are left out of a configuration's identity on resume
    observed_columns: tuple[str, ...] = ()
    #: the power-mode space configurations are checked against (None: no check, e.g.
    #: NVML, whose clocks are observed rather than set)
    device: Device | None = None

    @abstractmethod
    def configure(self, config: Mapping[str, float]) -> None:
        """Apply one configuration: keys from the schema (cores, cpu_mhz, gpu_mhz, mem_mhz,
        batch_size) plus any backend-specific knobs. Raise ProfilingError if refused."""

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
        """Fill configuration columns the caller may leave out (NVML: nominal clocks).

        Why: a backend that cannot set a knob still needs the schema's columns present."""
        return modes

    def sweep_order(self, modes: pd.DataFrame) -> pd.DataFrame:
        """The order to profile ``modes`` in. Default: as given. Boards that cannot step a
        frequency back up without a reboot sort high to low (see Device.sweep_order)."""
        return modes

    def observed(self, start: float, end: float) -> dict:
        """Column values measured during ``[start, end)`` that override the requested ones
        in the summary row (NVML: the clocks the GPU actually ran at). Default: none."""
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

    def on_error(self) -> None:  # noqa: B027 - optional, no-op by default
        """Called by the sweep when profiling fails; hardware backends put the board back
        in its original state here, so a failure never leaves it in a half-set mode."""

    def reset(self) -> None:  # noqa: B027 - optional, no-op by default
        """Return to the top settings so frequencies can step down again (see sweep_order)."""

    def close(self) -> None:  # noqa: B027 - optional, no-op by default
        """Restore the board to the state it was in before profiling."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
