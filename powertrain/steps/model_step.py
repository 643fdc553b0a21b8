"""A torch model and its data turned into a ``step(batch_size)`` the profiler can time.

Why separate from :mod:`.step`: the step wrapper must import without torch (the sweep on
a bare board); only this module and the example workloads need torch's data loader.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

from ..errors import ProfilingError
from .step import TrainingStep


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
        self.dataset: Any = data.dataset if isinstance(data, loader_cls) else data
        self.collate_fn = data.collate_fn if isinstance(data, loader_cls) else None
        self.loss_fn = loss_fn or torch.nn.CrossEntropyLoss()
        self.optimizer = optimizer or torch.optim.SGD(self.model.parameters(), lr=lr, momentum=0.9)
        self._key: tuple[int, int] | None = None
        self._iter: Iterator[Any] | None = None
        self._loader: Any = None
        self.__name__ = type(model).__name__

    def configure(self, batch_size: int, num_workers: int = 0) -> None:
        key = (int(batch_size), int(num_workers))
        if key == self._key:
            return
        self._key = key
        self._iter = None  # drop the old loader's workers before starting new ones
        kwargs: dict[str, Any] = {
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
            it = self._iter = iter(self._loader)
            return next(it)

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
    """A training step from a torch model and its data: profile your own job without
    writing the loop.

    Parameters
    ----------
    model : torch.nn.Module
        The model to train.
    data : Dataset or DataLoader
        Its training data (a DataLoader's dataset is re-batched at each batch size).
    loss_fn : callable, optional
        The loss; default cross-entropy.
    optimizer : optional
        The optimizer; default SGD with momentum 0.9.
    device : optional
        Where to train; default CUDA where torch sees a GPU.
    name : str, optional
        The step's name; default the model's class name.

    Returns
    -------
    TrainingStep
        The step.
    """
    step = ModelStep(model, data, loss_fn, optimizer, device)
    return TrainingStep(step, name=name or type(model).__name__.lower(), device=step.device)
