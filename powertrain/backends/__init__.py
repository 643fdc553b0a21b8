"""Profiling backends: the boards a sweep can drive, behind one interface.

``base.Backend`` declares what the sweep uses; ``twin`` adapts the digital twin;
``jetson/`` drives a real Jetson (sysfs knobs, INA3221/jtop power sensors); ``nvml``
profiles a training step on an NVIDIA GPU over its own knobs (threads, workers, batch
size; the power limit only when allowed) with power from NVML; ``hardware`` holds what
the hardware backends share (the step, the clock, a power sampler).
:func:`get_backend` builds one by name (what ``powertrain profile --backend`` calls).
"""

from __future__ import annotations

from typing import Any

from ..errors import DataError
from ..twin import Twin
from .base import Backend
from .hardware import StepBackend
from .jetson import JetsonBackend
from .nvml import NvmlBackend
from .replay import ReplayBackend
from .twin import TwinBackend

#: the names :func:`get_backend` knows
BACKENDS = ("twin", "jetson", "nvml")


def as_backend(obj: Any) -> Backend:
    """Whatever the profiler is given, as a backend: backends pass through, a
    :class:`~powertrain.Twin` is adapted.

    Parameters
    ----------
    obj : Backend or Twin
        The board.

    Returns
    -------
    Backend
        ``obj`` itself, or a :class:`TwinBackend` around a twin.
    """
    if isinstance(obj, Backend):
        return obj
    if isinstance(obj, Twin):
        return TwinBackend(obj)
    raise TypeError(
        f"cannot profile a {type(obj).__name__}: pass a powertrain.Twin or a "
        "powertrain.backends.Backend"
    )


def get_backend(
    name: str,
    device: Any = None,
    workload: Any = None,
    *,
    seed: int = 0,
    step_options: dict | None = None,
    **options: Any,
) -> Backend:
    """The backend ``name`` (twin, jetson, nvml) for ``device`` running ``workload``.

    twin: ``device`` and ``workload`` are catalog names or specs, ``seed`` seeds it.
    jetson / nvml: ``workload`` is a step, a ready-made workload name or
    ``module:function`` (``step_options`` go to a ready-made one); ``options`` go to
    :class:`JetsonBackend` / :class:`NvmlBackend` (for nvml, ``device`` only names the
    device column).

    Parameters
    ----------
    name : str
        ``"twin"``, ``"jetson"`` or ``"nvml"``.
    device : optional
        The device (catalog id or spec); required but for nvml.
    workload : optional
        The twin's workload, or the hardware backends' training step (a step, a
        ready-made workload name or ``module:function``).
    seed : int
        The twin's seed.
    step_options : dict, optional
        Options of a ready-made step (e.g. ``image_size``).
    **options
        The backend's own settings.

    Returns
    -------
    Backend
        The board, ready to profile.
    """
    if name not in BACKENDS:
        raise DataError(f"--backend {name!r}: choose one of {', '.join(BACKENDS)}")
    if name != "nvml" and not device:
        raise DataError(f"--device is required with --backend {name} (e.g. orin-agx)")
    if name == "twin":
        return TwinBackend(Twin(device, workload, seed=seed, **options))
    from ..steps.loader import load_step

    step = load_step(workload, **(step_options or {})) if isinstance(workload, str) else workload
    if name == "jetson":
        return JetsonBackend(device, step, **options)
    return NvmlBackend(step, device_name=device, **options)


__all__ = [
    "BACKENDS",
    "Backend",
    "JetsonBackend",
    "NvmlBackend",
    "ReplayBackend",
    "StepBackend",
    "TwinBackend",
    "as_backend",
    "get_backend",
]
