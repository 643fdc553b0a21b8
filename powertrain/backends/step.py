"""The plumbing the hardware backends share: a user's step, the wall clock, a power sampler.

Why: the Jetson and NVML backends differ only in how they set a configuration and read
power; running the minibatch and answering time/power queries is written once here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from .base import Backend

if TYPE_CHECKING:  # pragma: no cover
    from ..profiling.step import TrainingStep


class StepBackend(Backend):
    """What the hardware backends share: the user's step is the minibatch, the wall clock
    is the clock, and a background sampler holds the power readings.

    Subclasses set ``self.step`` (a :class:`TrainingStep`), ``self.clock`` and
    ``self.sampler`` (a started ``PowerSampler``) and implement ``configure``.
    """

    step: TrainingStep
    clock: Callable[[], float]
    sampler: Any

    def run_minibatch(self) -> float:
        return self.step.run()

    def now(self) -> float:
        return self.clock()

    def power_samples(self, start: float, end: float):
        return self.sampler.samples(start, end)
