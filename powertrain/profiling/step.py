"""Timing a user's own training step, so people profile their job, not only our examples.

Why: the ~50 samples a transfer needs must come from the real training step. A step is
a callable ``step(batch_size)`` (returning the loss, or None), or a model + dataset /
DataLoader turned into one. Times come from CUDA events with synchronisation on a GPU
(PowerTrain §2.4), ``perf_counter`` otherwise. A step that raises or returns a NaN loss
stops the sweep with a ProfilingError (and the backend restores the board).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import math
import sys
import time
from pathlib import Path
from typing import Any, Callable

from ..errors import ProfilingError
from .backend import Backend


def _loss_value(out: Any) -> float | None:
    if out is None or isinstance(out, bool):
        return None
    if isinstance(out, (int, float)):
        return float(out)
    if hasattr(out, "detach") and hasattr(out, "numel"):
        return float(out.detach().float().mean()) if out.numel() else None
    if isinstance(out, dict) and "loss" in out:
        return _loss_value(out["loss"])
    if isinstance(out, (tuple, list)) and out:
        return _loss_value(out[0])
    return None


def _accepts(fn: Callable, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


class TrainingStep:
    """A training step the profiler times: ``configure`` it, then ``run`` one minibatch.

    ``fn(batch_size)`` runs one minibatch; if it accepts ``num_workers`` it gets the
    current dataloader worker count too. ``device`` (``"cuda"``, a torch.device, ...)
    selects CUDA-event timing; None picks CUDA when torch sees a GPU.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        name: str | None = None,
        device: Any = None,
        batch_size: int = 16,
        num_workers: int = 0,
        check_loss: bool = True,
    ):
        if not callable(fn):
            raise ProfilingError(f"the training step must be callable, got {type(fn).__name__}")
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "step")
        self.batch_size = int(batch_size)
        self.num_workers = int(num_workers)
        self.check_loss = check_loss
        self._takes_workers = _accepts(fn, "num_workers")
        self._cuda = self._use_cuda(device)
        self.last_loss: float | None = None

    @staticmethod
    def _use_cuda(device: Any) -> bool:
        try:
            import torch
        except ImportError:  # pragma: no cover - torch is a dependency
            return False
        if device is None:
            return bool(torch.cuda.is_available())
        return str(device).startswith("cuda") and torch.cuda.is_available()

    def configure(self, batch_size: int | None = None, num_workers: int | None = None) -> None:
        """Take the configuration's batch size and worker count for the next minibatches."""
        if batch_size is not None:
            self.batch_size = int(batch_size)
        if num_workers is not None:
            self.num_workers = int(num_workers)
        hook = getattr(self.fn, "configure", None)  # objects with their own set-up
        if callable(hook):
            hook(batch_size=self.batch_size, num_workers=self.num_workers)

    def _call(self) -> Any:
        if self._takes_workers:
            return self.fn(self.batch_size, num_workers=self.num_workers)
        return self.fn(self.batch_size)

    def run(self) -> float:
        """Run one minibatch and return its time in ms (CUDA events on a GPU)."""
        try:
            if self._cuda:
                import torch

                torch.cuda.synchronize()
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                out = self._call()
                end.record()
                end.synchronize()
                ms = float(start.elapsed_time(end))
            else:
                t0 = time.perf_counter()
                out = self._call()
                ms = (time.perf_counter() - t0) * 1e3
        except ProfilingError:
            raise
        except Exception as e:
            raise ProfilingError(
                f"the training step {self.name!r} raised {type(e).__name__}: {e} "
                f"(batch size {self.batch_size}, {self.num_workers} workers); fix the step "
                "(try it once outside the profiler), then rerun with the same --out to resume"
            ) from e
        loss = _loss_value(out)
        self.last_loss = loss
        if self.check_loss and loss is not None and not math.isfinite(loss):
            raise ProfilingError(
                f"the training step {self.name!r} returned a {loss} loss at batch size "
                f"{self.batch_size}; the measurement would be of a diverged run: lower the "
                "learning rate, check the data, then rerun with the same --out to resume"
            )
        return ms

    def close(self) -> None:
        hook = getattr(self.fn, "close", None)
        if callable(hook):
            hook()


class ModelStep:
    """``step(batch_size)`` for a model and a dataset or DataLoader: forward, loss,
    backward, optimiser step. A new DataLoader is built when the batch size or the worker
    count changes (both are profiling knobs); batches cycle through the data."""

    def __init__(
        self,
        model: Any,
        data: Any,
        loss_fn: Callable | None = None,
        optimizer: Any = None,
        device: Any = None,
        lr: float = 0.01,
    ):
        import torch

        self.torch = torch
        self.device = (
            torch.device(device)
            if device is not None
            else (torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu"))
        )
        self.model = model.to(self.device).train()
        loader_cls = torch.utils.data.DataLoader
        self.dataset = data.dataset if isinstance(data, loader_cls) else data
        self.collate_fn = data.collate_fn if isinstance(data, loader_cls) else None
        self.loss_fn = loss_fn or torch.nn.CrossEntropyLoss()
        self.optimizer = optimizer or torch.optim.SGD(self.model.parameters(), lr=lr, momentum=0.9)
        self._key: tuple[int, int] | None = None
        self._iter = None
        self._loader = None
        self.__name__ = type(model).__name__

    def configure(self, batch_size: int, num_workers: int = 0) -> None:
        key = (int(batch_size), int(num_workers))
        if key == self._key:
            return
        self._key = key
        self._iter = None  # drop the old loader's workers before starting new ones
        kwargs = {
            "num_workers": key[1],
            "persistent_workers": key[1] > 0,
            "pin_memory": self.device.type == "cuda",
        }
        if self.collate_fn is not None:
            kwargs["collate_fn"] = self.collate_fn
        self._loader = self.torch.utils.data.DataLoader(
            self.dataset, batch_size=key[0], shuffle=True, drop_last=True, **kwargs
        )
        if len(self._loader) == 0:
            raise ProfilingError(
                f"the dataset has {len(self.dataset)} samples, fewer than one batch of {key[0]}"
            )

    def _next(self) -> Any:
        if self._iter is None:
            self._iter = iter(self._loader)
        try:
            return next(self._iter)
        except StopIteration:
            self._iter = iter(self._loader)
            return next(self._iter)

    def __call__(self, batch_size: int, num_workers: int = 0) -> Any:
        self.configure(batch_size, num_workers)
        x, y = self._next()
        x = x.to(self.device, non_blocking=True)
        y = y.to(self.device, non_blocking=True)
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return loss.detach()

    def close(self) -> None:
        self._iter = None
        self._loader = None


def from_model(
    model: Any,
    data: Any,
    loss_fn: Callable | None = None,
    optimizer: Any = None,
    device: Any = None,
    name: str | None = None,
) -> TrainingStep:
    """A :class:`TrainingStep` for a torch model trained on ``data`` (Dataset or DataLoader)."""
    step = ModelStep(model, data, loss_fn, optimizer, device)
    return TrainingStep(step, name=name or type(model).__name__.lower(), device=step.device)


def as_step(obj: Any, name: str | None = None) -> TrainingStep:
    """A :class:`TrainingStep` from a step, a callable, or a catalog/import name."""
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
    takes no arguments)."""
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
