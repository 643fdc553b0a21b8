"""The plumbing the hardware backends share: a user's step, the wall clock, a power sampler.

Why: the Jetson and NVML backends differ only in how they set a configuration and read
power; running the minibatch and answering time/power queries is written once here.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Mapping

import numpy as np

from ..errors import ProfilingError
from ..steps.step import TrainingStep
from .base import Backend


class StepBackend(Backend):
    """What the hardware backends share: the user's step is the minibatch, the wall clock
    is the clock, and a background sampler holds the power readings.

    Subclasses set ``self.step`` (a :class:`TrainingStep`), ``self.clock`` and
    ``self.sampler`` (a started ``PowerSampler``) and implement ``configure``.
    """

    step: TrainingStep
    clock: Callable[[], float]
    sampler: PowerSampler | None

    def configure_step(self, config: Mapping[str, float]) -> None:
        """Hand the configuration's batch size and worker count to the step."""
        batch, workers = config.get("batch_size"), config.get("num_workers")
        self.step.configure(
            batch_size=None if batch is None else int(batch),
            num_workers=None if workers is None else int(workers),
        )

    def run_minibatch(self) -> float:
        return self.step.run()

    def now(self) -> float:
        return self.clock()

    def power_samples(self, start: float, end: float) -> np.ndarray:
        if self.sampler is None:
            raise ProfilingError(f"{type(self).__name__}: the power sampler is not running")
        return self.sampler.samples(start, end)


class PowerSampler:
    """Reads a sensor every ``period_s`` in a daemon thread and keeps (time, W) pairs.

    Why a thread: minibatches run in the main thread; the sensor must keep its 1 Hz pace
    regardless. ``probe`` adds other readings taken at the same instants (NVML clocks).
    """

    def __init__(
        self,
        read_w: Callable[[], float],
        period_s: float = 1.0,
        clock: Callable[[], float] = time.perf_counter,
        probe: Callable[[], dict] | None = None,
    ):
        self.read_w, self.period_s, self.clock, self.probe = read_w, float(period_s), clock, probe
        self._t: list[float] = []
        self._w: list[float] = []
        self._extra: list[dict] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name="powertrain-power", daemon=True)

    def start(self) -> PowerSampler:
        self._thread.start()
        return self

    def _loop(self) -> None:
        next_t = self.clock()
        while not self._stop.is_set():
            try:
                w = self.read_w()
                extra = self.probe() if self.probe else None
            except Exception as e:  # surfaced by samples(), so the sweep stops with it
                self.error = e
                return
            t = self.clock()
            with self._lock:
                self._t.append(t)
                self._w.append(w)
                if extra is not None:
                    self._extra.append(extra)
            next_t += self.period_s
            self._stop.wait(max(0.0, next_t - self.clock()))

    def samples(self, start: float, end: float) -> np.ndarray:
        """Readings taken in ``[start, end)`` as an (n, 2) array of (time_s, watts)."""
        if self.error is not None:
            err = self.error
            raise (
                err
                if isinstance(err, ProfilingError)
                else ProfilingError(f"power sensor failed: {err}")
            )
        with self._lock:
            t = np.array(self._t)
            w = np.array(self._w)
        keep = (t >= start) & (t < end)
        return np.column_stack([t[keep], w[keep]]) if keep.any() else np.empty((0, 2))

    def extras(self, start: float, end: float) -> list[dict]:
        """``probe`` readings taken in ``[start, end)``."""
        with self._lock:
            return [e for t, e in zip(self._t, self._extra) if start <= t < end]

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=max(2.0, 2 * self.period_s))
