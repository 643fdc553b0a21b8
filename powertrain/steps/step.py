"""Timing a user's own training step, so people profile their job, not only our examples.

Why: the ~50 samples a transfer needs must come from the real training step. A step is
a callable ``step(batch_size)`` (returning the loss, or None), or a model + dataset /
DataLoader turned into one. Times come from CUDA events with synchronisation on a GPU
(PowerTrain §2.4), ``perf_counter`` otherwise. A step that raises or returns a NaN loss
stops the sweep with a ProfilingError (and the backend restores the board).
"""

from __future__ import annotations

import inspect
import math
import time
from typing import Any, Callable

from ..errors import ProfilingError


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

    Parameters
    ----------
    fn : callable
        ``fn(batch_size)`` (or ``fn(batch_size, num_workers)``) runs one minibatch.
    name : str, optional
        The step's name in outputs; default the function's.
    device : optional
        Where the step runs (``"cuda"``, a torch.device); None: CUDA where torch sees
        a GPU.
    batch_size, num_workers : int
        The configuration until ``configure`` sets another.
    check_loss : bool
        Refuse a loss that is not a finite number (a diverged or broken step).
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
        self.name: str = name or str(getattr(fn, "__name__", "step"))
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
