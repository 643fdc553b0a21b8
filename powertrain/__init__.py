"""powertrain: predict DNN training time and power in every power mode of an edge
accelerator from a few dozen profiled modes, and pick the fastest configuration under a
power cap (PowerTrain, FGCS 2024; batch-size joint selection after Algorithm 1 of
"Accelerated training on low-power edge devices")."""

from __future__ import annotations

from typing import Any

from . import report
from ._version import __version__
from .batch_efficiency import load_r, r_vector
from .decide import Decision, decide
from .devices import Device, get_device
from .errors import (
    DataError,
    ModeError,
    ModelFileError,
    NoFeasibleModeError,
    PowerTrainError,
    ProfilingError,
    SpecError,
)
from .follow import CapController, CapSchedule, follow
from .optimise import fastest_under, pareto_front
from .profiling.sweep import profile
from .refine import refine_modes, with_observed
from .selection import select, time_to_accuracy
from .specs import DeviceSpec, WorkloadSpec, device_names, register_device, workload_names
from .twin import Twin
from .workflow import CaseRun, run_case
from .workloads import get_workload


def __getattr__(name: str) -> Any:
    # torch and scikit-learn take seconds to import; load them when a Predictor is asked
    # for, so `powertrain devices` and the profiler on a bare board start at once
    if name == "Predictor":
        from .predictor import Predictor

        return Predictor
    raise AttributeError(f"module 'powertrain' has no attribute {name!r}")


def __dir__() -> list[str]:
    # the lazy names too, so tab completion and dir(pt) list the whole API
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "CapController",
    "CapSchedule",
    "DataError",
    "Decision",
    "Device",
    "DeviceSpec",
    "ModeError",
    "ModelFileError",
    "NoFeasibleModeError",
    "Predictor",
    "PowerTrainError",
    "ProfilingError",
    "SpecError",
    "Twin",
    "WorkloadSpec",
    "__version__",
    "decide",
    "device_names",
    "fastest_under",
    "follow",
    "get_device",
    "get_workload",
    "pareto_front",
    "load_r",
    "profile",
    "r_vector",
    "refine_modes",
    "register_device",
    "report",
    "run_case",
    "CaseRun",
    "select",
    "time_to_accuracy",
    "with_observed",
    "workload_names",
]
