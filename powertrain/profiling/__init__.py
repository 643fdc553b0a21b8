"""The profiler: one sweep loop (crash-safe, resumable) over pluggable backends.

Backends: the digital twin (``powertrain.Twin``), a real Jetson (:class:`JetsonBackend`,
sysfs + jtop/INA3221) and NVIDIA GPUs (:class:`NvmlBackend`, read-only NVML). A user's
own training step is wrapped by :class:`TrainingStep` / :func:`from_model`.
"""

from __future__ import annotations

from .backend import Backend
from .jetson import JetsonBackend
from .nvml import NvmlBackend
from .step import TrainingStep, from_model, load_step
from .sweep import profile, profile_one

__all__ = [
    "Backend",
    "JetsonBackend",
    "NvmlBackend",
    "TrainingStep",
    "from_model",
    "load_step",
    "profile",
    "profile_one",
]
