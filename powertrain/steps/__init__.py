"""Training steps: the one minibatch a sweep times on real hardware.

A user's own step is wrapped by :class:`TrainingStep` or built from a model by
:func:`from_model`; :func:`load_step` finds one by ready-made name or ``module:function``.
``torch_workloads`` holds the ready-made steps (imported only when one is asked for, so
the profiler on a bare board starts without torch).
"""

from __future__ import annotations

from .loader import as_step, load_step
from .model_step import from_model
from .step import TrainingStep

__all__ = ["TrainingStep", "as_step", "from_model", "load_step"]
