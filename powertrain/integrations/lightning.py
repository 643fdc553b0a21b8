"""A Lightning callback that tunes the board with the run's own training minibatches.

``trainer = L.Trainer(callbacks=[PowerTrainCallback(board, reference, power_cap_w=30)])``.
Decisions and the summary go through Lightning's rank-zero logger (shown at its default
level), their figures straight to every logger of the trainer (``powertrain/*``
metrics, each decision once, at the step it was made, whatever ``log_every_n_steps``),
and the board is restored at the end of training and on an exception (Lightning's
``on_exception``). Under DDP rank 0 decides and every rank runs its configuration.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.utilities.rank_zero import rank_zero_info

from . import TunerHooks


class PowerTrainCallback(TunerHooks, pl.Callback):
    """Run a :class:`~powertrain.Tuner` around every training batch.

    ``board``, ``reference``, ``power_cap_w`` and ``tuner_options`` go to the Tuner;
    ``batch_size`` defaults to the train dataloader's; ``profile``: a CSV to save the
    measurements to and start the next ``fit`` from. A second ``fit`` with the same
    callback starts from what the first measured.
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
            _log(trainer, metrics)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        metrics = self.finish()
        if metrics is not None:
            _log(trainer, metrics)

    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        self.abort()


def _log(trainer: pl.Trainer, metrics: dict[str, float]) -> None:
    """Straight to the loggers: ``LightningModule.log`` would hold the value until the
    next logging step (lost after the epoch's last one) and repeat it until then."""
    for logger in trainer.loggers:
        logger.log_metrics(metrics, step=trainer.global_step)
