"""A Hugging Face ``TrainerCallback`` that tunes the board with the run's own steps.

``Trainer(..., callbacks=[PowerTrainCallback(board, reference, power_cap_w=30)])``.
Messages go through the transformers logging system, each decision and the summary into
``state.log_history`` (what the Trainer's reporters read). The Trainer has no exception
hook: the board is restored at the end of training, on a stop signal and at interpreter
exit; wrap ``trainer.train()`` in ``with callback:`` to restore at once on an error.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.utils import logging

from . import TunerHooks

logger = logging.get_logger(__name__)


class PowerTrainCallback(TunerHooks, TrainerCallback):
    """Run a :class:`~powertrain.Tuner` around every optimizer step.

    ``board``, ``reference``, ``power_cap_w`` and ``tuner_options`` go to the Tuner;
    ``batch_size`` defaults to ``per_device_train_batch_size``. With gradient
    accumulation a step is one optimizer step (its minibatches timed together).
    """

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        self.start_tuner(args.per_device_train_batch_size, logger.info)

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        self.step_begin()

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        for metrics in self.step_end():  # numbers only: the reporters read them as floats
            state.log_history.append({**metrics, "step": state.global_step})

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        metrics = self.finish()
        if metrics is not None:
            state.log_history.append({**metrics, "step": state.global_step})

    def __enter__(self) -> PowerTrainCallback:
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        if kind is not None:
            self.abort()
        elif self.tuner is not None:
            self.tuner.close()
