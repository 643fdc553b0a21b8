"""powertrain: predict DNN training time and power in every power mode of an edge
accelerator from a few dozen profiled modes, and pick the fastest configuration under a
power cap (PowerTrain, FGCS 2024; batch-size joint selection after Algorithm 1 of
"Accelerated training on low-power edge devices")."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__
from .errors import (
    DataError,
    ModeError,
    ModelFileError,
    NoFeasibleModeError,
    PowerTrainError,
    ProfilingError,
    SpecError,
)

#: public name -> the module that defines it. Loaded on first use: pandas, torch and
#: scikit-learn take seconds to import, and `powertrain select --help`, `powertrain
#: devices` or the profiler on a bare board should start at once.
_LAZY = {
    "apply": "backends.jetson.apply",
    "find_preset": "devices.presets",
    "load_r": "data.batch_efficiency",
    "r_vector": "data.batch_efficiency",
    "Decision": "decisions.decide",
    "decide": "decisions.decide",
    "Device": "devices.device",
    "get_device": "devices.device",
    "report": "report",  # the callable package: pt.report(spec, out)
    "CapController": "decisions.cap_following",
    "CapSchedule": "decisions.cap_schedule",
    "follow": "decisions.cap_following",
    "fastest_under": "decisions.optimise",
    "pareto_front": "decisions.optimise",
    "Predictor": "predictor",
    "profile": "profiling.sweep",
    "refine_modes": "decisions.refine",
    "with_observed": "decisions.refine",
    "select": "decisions.selection",
    "time_to_accuracy": "decisions.selection",
    "DeviceSpec": "devices.specs",
    "WorkloadSpec": "devices.specs",
    "device_names": "devices.specs",
    "register_device": "devices.specs",
    "workload_names": "devices.specs",
    "Twin": "twin",
    "Tuner": "decisions.tuner",
    "CaseRun": "workflow",
    "run_case": "workflow",
    "get_workload": "devices.workloads",
}

if TYPE_CHECKING:  # what type checkers and documentation tools see
    from . import report
    from .backends.jetson.apply import apply
    from .data.batch_efficiency import load_r, r_vector
    from .decisions.cap_following import CapController, follow
    from .decisions.cap_schedule import CapSchedule
    from .decisions.decide import Decision, decide
    from .decisions.optimise import fastest_under, pareto_front
    from .decisions.refine import refine_modes, with_observed
    from .decisions.selection import select, time_to_accuracy
    from .decisions.tuner import Tuner
    from .devices.device import Device, get_device
    from .devices.presets import find_preset
    from .devices.specs import (
        DeviceSpec,
        WorkloadSpec,
        device_names,
        register_device,
        workload_names,
    )
    from .devices.workloads import get_workload
    from .predictor import Predictor
    from .profiling.sweep import profile
    from .twin import Twin
    from .workflow import CaseRun, run_case


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'powertrain' has no attribute {name!r}")
    import importlib

    value = importlib.import_module(f"{__name__}.{module}")
    if name != "report":  # pt.report is the (callable) package itself
        value = getattr(value, name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    # the public API only (lazy names included), so tab completion shows what to use,
    # not the module's own imports and helpers
    return sorted(__all__)


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
    "Tuner",
    "Twin",
    "WorkloadSpec",
    "__version__",
    "apply",
    "decide",
    "device_names",
    "fastest_under",
    "find_preset",
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
