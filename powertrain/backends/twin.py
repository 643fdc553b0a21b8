"""The digital twin as a profiling backend: a thin adapter over :class:`powertrain.Twin`.

Why an adapter: the simulated board (physics, deviations, sensor) lives in
``powertrain/twin/`` and knows nothing of the profiler; this class maps the backend
interface onto it, so the twin and the real boards go through the same sweep.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from ..twin import Twin
from .base import Backend


class TwinBackend(Backend):
    """Profile a twin like a board: the same profiler code runs on both.

    Parameters
    ----------
    twin : Twin
        The simulated board and workload.
    """

    def __init__(self, twin: Twin):
        self.twin = twin
        self.device = twin.device
        self.device_name = twin.device_name
        self.workload_name = twin.workload_name
        self.sample_period_s = twin.sample_period_s

    def __repr__(self) -> str:
        return f"TwinBackend({self.twin!r})"

    def check_modes(self, modes: pd.DataFrame, source: str = "modes") -> pd.DataFrame:
        """The device's settings, and its vendor presets exactly as defined (the twin runs
        them, gated TPCs and clocks outside the custom-mode tables included)."""
        return self.twin.device.validate(modes, source=source, batch_size=True, presets=True)

    def configure(self, config: Mapping[str, float]) -> None:
        self.twin.configure(config)

    def run_minibatch(self) -> float:
        return self.twin.run_minibatch()

    def now(self) -> float:
        return self.twin.now()

    def power_samples(self, start: float, end: float) -> np.ndarray:
        return self.twin.power_samples(start, end)

    def reset(self) -> None:
        self.twin.reset()

    def run_header(self) -> dict:
        return {
            **super().run_header(),
            "seed": self.twin.seed,
            "num_workers": self.twin.wl.num_workers,
        }

    def describe(self) -> dict:
        return self.twin.describe()
