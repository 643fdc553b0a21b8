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

    ``board``, ``reference``, ``power_cap_w`` and ``tuner_options`` go to the Tuner. A
    second ``fit`` with the same callback starts from what the first measured.

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
        The one batch size the job runs (>= 1); default the train dataloader's.
    profile : str or Path, optional
        A CSV the measurements are saved to and the next ``fit`` starts from (the next
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
