"""The profiler: one sweep loop (crash-safe, resumable) over pluggable backends.

The measurement logic lives here (``sweep``, ``aggregate``, ``power_sensors``,
``sysfs_knobs``, the example ``torch_workloads``); the boards it drives live in
:mod:`powertrain.backends` (the twin, :class:`JetsonBackend`, :class:`NvmlBackend`,
re-exported here). A user's own training step is wrapped by :class:`TrainingStep` /
:func:`from_model`.
"""

from __future__ import annotations

from ..backends import Backend, JetsonBackend, NvmlBackend, get_backend
from .model_step import from_model
from .step import TrainingStep
from .step_loader import load_step
from .sweep import profile, profile_one

__all__ = [
    "Backend",
    "JetsonBackend",
    "NvmlBackend",
    "TrainingStep",
    "from_model",
    "get_backend",
    "load_step",
    "profile",
    "profile_one",
]
