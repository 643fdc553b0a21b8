"""A Lightning callback that tunes the board with the run's own training minibatches.

``trainer = L.Trainer(callbacks=[PowerTrainCallback(board, reference, power_cap_w=30)])``.
Messages go through Lightning's rank-zero logger, the pick's figures through the
trainer's logger (``powertrain/*`` metrics), and the board is restored at the end of
training and on an exception (Lightning's ``on_exception``).
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.utilities.rank_zero import rank_zero_info

from ..tuner import Tuner, TunerSummary
from . import decision_metrics, single_batch_size, summary_metrics


class PowerTrainCallback(pl.Callback):
    """Run a :class:`~powertrain.Tuner` around every training batch.

    ``board``, ``reference``, ``power_cap_w`` and ``tuner_options`` go to the Tuner;
    ``batch_size`` defaults to the train dataloader's.
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
        super().__init__()
        self.board, self.reference, self.power_cap_w = board, reference, power_cap_w
        self.batch_size, self.tuner_options = batch_size, tuner_options
        self.tuner: Tuner | None = None
        self.summary: TunerSummary | None = None
        self._told = 0

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        loader = trainer.train_dataloader
        found = getattr(loader, "batch_size", None)
        b = single_batch_size(self.batch_size, found, "PowerTrainCallback")
        options = {"log": rank_zero_info, **self.tuner_options}
        self.tuner = Tuner(self.board, self.reference, self.power_cap_w, batch_size=b, **options)

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if self.tuner is not None:
            self.tuner.on_step_begin()

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        if self.tuner is None:
            return
        self.tuner.on_step_end()
        new = self.tuner.decisions[self._told :]
        self._told += len(new)
        for d in new:  # one point per decision, at the step it was made
            metrics = decision_metrics(d, self.tuner.time_column)
            pl_module.log_dict(metrics, on_step=True, on_epoch=False)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.tuner is None:
            return
        self.summary = self.tuner.close()
        if trainer.logger is not None and self.summary.active:
            metrics = summary_metrics(self.summary)
            trainer.logger.log_metrics(metrics, step=trainer.global_step)

    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        if self.tuner is not None:
            self.tuner.abort()
