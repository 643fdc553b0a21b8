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

from ..tuner import Tuner, TunerSummary
from . import decision_metrics, single_batch_size, summary_metrics

logger = logging.get_logger(__name__)


class PowerTrainCallback(TrainerCallback):
    """Run a :class:`~powertrain.Tuner` around every optimizer step.

    ``board``, ``reference``, ``power_cap_w`` and ``tuner_options`` go to the Tuner;
    ``batch_size`` defaults to ``per_device_train_batch_size``. With gradient
    accumulation a step is one optimizer step (its minibatches timed together).
    """

    def __init__(
        self,
        board: Any,
        reference: Any,
        power_cap_w: Any,
        *,
        batch_size: int | None = None,
        **tuner_options: Any,
    ):
        self.board, self.reference, self.power_cap_w = board, reference, power_cap_w
        self.batch_size, self.tuner_options = batch_size, tuner_options
        self.tuner: Tuner | None = None
        self.summary: TunerSummary | None = None
        self._told = 0

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        found = args.per_device_train_batch_size
        b = single_batch_size(self.batch_size, found, "PowerTrainCallback")
        options = {"log": logger.info, **self.tuner_options}
        self.tuner = Tuner(self.board, self.reference, self.power_cap_w, batch_size=b, **options)

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        if self.tuner is not None:
            self.tuner.on_step_begin()

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        if self.tuner is None:
            return
        self.tuner.on_step_end()
        new = self.tuner.decisions[self._told :]
        self._told += len(new)
        for d in new:  # numbers only: the reporters read log_history as floats
            metrics = decision_metrics(d, self.tuner.time_column)
            state.log_history.append({**metrics, "step": state.global_step})

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        if self.tuner is None:
            return
        self.summary = self.tuner.close()
        if self.summary.active:
            metrics = summary_metrics(self.summary)
            state.log_history.append({**metrics, "step": state.global_step})

    def __enter__(self) -> PowerTrainCallback:
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        if self.tuner is not None:
            if kind is not None:
                self.tuner.abort()
            else:
                self.tuner.close()
