"""A Hugging Face ``TrainerCallback`` that tunes the board with the run's own steps.

``Trainer(..., callbacks=[PowerTrainCallback(board, reference, power_cap_w=30)])``.
Decisions and the summary reach the transformers logger at its default level (warning),
the rest at info; each decision's and the summary's ``powertrain/*`` numbers go through
``Trainer.log``, so every reporter of ``report_to`` (TensorBoard, W&B) and
``state.log_history`` get them once. The Trainer has no exception hook: the callback
wraps the running Trainer's epoch (and training step) so that an error or Ctrl-C in
``train()`` restores the board and removes the tuner's signal handlers at once, with or
without ``with callback:``. Under DDP rank 0 decides and every rank runs its choice.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.utils import logging

from . import TunerHooks

logger = logging.get_logger(__name__)
#: Trainer methods wrapped while training, so an error in them restores the board
GUARDED = ("_run_epoch", "training_step")


class PowerTrainCallback(TunerHooks, TrainerCallback):
    """Run a :class:`~powertrain.Tuner` around every optimizer step.

    ``board``, ``reference``, ``power_cap_w`` and ``tuner_options`` go to the Tuner. With
    gradient accumulation a step is one optimizer step (its minibatches timed together).

    Parameters
    ----------
    board : Backend or Twin
        What sets the configurations and reads power, as the Tuner's ``board`` (None:
        training runs unchanged, with one warning).
    reference : Predictor
        A fitted Predictor of ``power_w`` to transfer.
    power_cap_w : float or callable
        The cap in W (> 0), or a schedule ``(elapsed_s, minibatch) -> W``.
    batch_size : int, optional
        The one batch size the job runs (>= 1); default ``per_device_train_batch_size``.
    profile : str or Path, optional
        A CSV the measurements are saved to and the next ``train()`` starts from (the next
        run at the same cap measures nothing new).
    workload : str, optional
        The name the measurements are saved under (default the board's).
    **tuner_options
        Any other :class:`~powertrain.Tuner` argument (``budget``, ``minibatches``,
        ``method``, ...; not ``log`` or ``samples``, which the callback sets).

    Raises
    ------
    DataError
        When the callback is built, not when training starts: a batch size that is not
        one positive integer, a cap that is not positive watts or a schedule, a
        ``profile`` that is not a path, an unknown option, a ``budget`` or
        ``minibatches`` below 1, or a reference that does not predict ``power_w``.
    """

    _trainer: Any = None

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        self._trainer = _running_trainer()
        self._guard()
        self.start_tuner(args.per_device_train_batch_size, logger.warning, logger.info)

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        self.step_begin()

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        for metrics in self.step_end():  # numbers only: the reporters read them as floats
            self._log(state, metrics)

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        try:
            metrics = self.finish()
            if metrics is not None:
                self._log(state, metrics)
        finally:
            self._unguard()

    def _log(self, state: TrainerState, metrics: dict[str, float]) -> None:
        """Through ``Trainer.log`` (every ``report_to`` reporter's ``on_log``), else
        straight into the log history when the Trainer was not found."""
        if self._trainer is not None:
            self._trainer.log(dict(metrics))
        else:
            state.log_history.append({**metrics, "step": state.global_step})

    # ------------------------------------------------------- restore on an error --
    def _guard(self) -> None:
        """Wrap the running Trainer's epoch and step: an exception (Ctrl-C included)
        aborts the tuner before it leaves ``train()``."""
        trainer = self._trainer
        if trainer is None:
            return
        for name in GUARDED:
            method = getattr(trainer, name, None)
            if method is not None and name not in vars(trainer):
                setattr(trainer, name, _aborting(method, self._abort_and_unguard))

    def _unguard(self) -> None:
        trainer = self._trainer
        if trainer is not None:
            for name in GUARDED:
                vars(trainer).pop(name, None)

    def _abort_and_unguard(self) -> None:
        try:
            self.abort()
        finally:
            self._unguard()

    def __enter__(self) -> PowerTrainCallback:
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        if kind is not None:
            self._abort_and_unguard()
        else:
            self.finish()
            self._unguard()


def _aborting(method: Callable, abort: Callable[[], None]) -> Callable:
    @functools.wraps(method)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except BaseException:
            abort()
            raise

    return guarded


def _running_trainer() -> Any:
    """The ``Trainer`` whose ``train()`` called this hook (None if not found): the
    callback API hands callbacks no Trainer, and restoring on an error needs it."""
    from transformers import Trainer

    frame = sys._getframe(1)
    while frame is not None:
        owner = frame.f_locals.get("self")
        if isinstance(owner, Trainer):
            return owner
        frame = frame.f_back  # type: ignore[assignment]
    return None
