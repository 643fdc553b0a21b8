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

from . import TunerHooks


class PowerTrainCallback(TunerHooks, pl.Callback):
    """Run a :class:`~powertrain.Tuner` around every training batch.

    ``board``, ``reference``, ``power_cap_w`` and ``tuner_options`` go to the Tuner;
    ``batch_size`` defaults to the train dataloader's.
    """

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        found = getattr(trainer.train_dataloader, "batch_size", None)
        self.start_tuner(found, rank_zero_info)

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self.step_begin()

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        for metrics in self.step_end():  # one point per decision, at the step it was made
            pl_module.log_dict(metrics, on_step=True, on_epoch=False)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        metrics = self.finish()
        if trainer.logger is not None and metrics is not None:
            trainer.logger.log_metrics(metrics, step=trainer.global_step)

    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        self.abort()
