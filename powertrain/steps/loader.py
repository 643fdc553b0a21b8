"""Finding the training step a sweep times: an object, a ready-made workload, or an import path.

Why separate from :mod:`.step`: loading by name reaches the example workloads, which
themselves build on :class:`~.step.TrainingStep`; keeping the lookup here avoids a cycle.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any, Callable

from ..errors import ProfilingError
from .step import TrainingStep


def as_step(obj: Any, name: str | None = None) -> TrainingStep:
    """Whatever names a training step, as one the profiler can time.

    Parameters
    ----------
    obj : TrainingStep, callable or str
        A step (returned as is), a ``fn(batch_size)``, or a name :func:`load_step` reads.
    name : str, optional
        The step's name for a callable.

    Returns
    -------
    TrainingStep
        The step.
    """
    if isinstance(obj, TrainingStep):
        return obj
    if isinstance(obj, str):
        return load_step(obj)
    return TrainingStep(obj, name=name)


def _import_attr(text: str) -> Any:
    module_name, _, attr = text.rpartition(":")
    if module_name.endswith(".py") or "/" in module_name:
        path = Path(module_name)
        if not path.is_file():
            raise ProfilingError(f"--workload {text}: no file {path}")
        spec = importlib.util.spec_from_file_location(f"powertrain_user_{path.stem}", path)
        if spec is None or spec.loader is None:
            raise ProfilingError(f"--workload {text}: {path} cannot be imported as Python")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataloader workers may need to find it again
        try:
            spec.loader.exec_module(module)
        except Exception as e:
            raise ProfilingError(
                f"--workload {text}: importing {path} raised {type(e).__name__}: {e}"
            ) from e
    else:
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            raise ProfilingError(
                f"--workload {text}: cannot import {module_name} ({e}); is it on "
                "PYTHONPATH (run from its folder)?"
            ) from None
    if not hasattr(module, attr):
        raise ProfilingError(f"--workload {text}: {module_name} has no attribute {attr!r}")
    return getattr(module, attr)


def load_step(text: str, **options: Any) -> TrainingStep:
    """A step from a name: a ready-made workload (``resnet18``, ``mobilenetv3``; options
    such as ``image_size`` go to it), or ``module:function`` / ``file.py:function`` naming
    the user's ``step(batch_size)`` (a function returning a step is called first when it
    takes no arguments).

    Parameters
    ----------
    text : str
        ``"resnet18"``, ``"mobilenetv3"``, ``"module:function"`` or
        ``"file.py:function"``.
    **options
        Options of a ready-made workload (e.g. ``image_size``).

    Returns
    -------
    TrainingStep
        The step.

    Raises
    ------
    ProfilingError
        For an unknown workload or a name that does not import, saying which.
    """
    if ":" not in text:
        from .torch_workloads import WORKLOADS, make_step

        if text not in WORKLOADS:
            raise ProfilingError(
                f"--workload {text!r}: not a ready-made workload ({', '.join(sorted(WORKLOADS))}) "
                "and not module:function"
            )
        return make_step(text, **options)
    obj = _import_attr(text)
    if isinstance(obj, TrainingStep):
        return obj
    if callable(obj) and not _accepts_positional(obj):
        obj = obj()  # a factory
    return as_step(obj, name=text.rpartition(":")[2])


def _accepts_positional(fn: Callable) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return True
    return any(
        p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params
    )
