"""Adapters that put :class:`powertrain.Tuner` into training frameworks.

``powertrain.integrations.lightning``: a ``lightning.pytorch.Callback``;
``powertrain.integrations.transformers``: a ``transformers.TrainerCallback``. Each is an
optional extra (``pip install powertrain[lightning]`` / ``[transformers]``); importing
this package imports neither framework.
"""

from __future__ import annotations

from typing import Any

from ..errors import DataError


def single_batch_size(batch_size: Any, found: Any, framework: str) -> int | None:
    """The job's one batch size: given, else the framework's dataloader's.

    Why one: these frameworks build the dataloader once per run (Lightning at most once
    an epoch), so the tuner chooses the knobs at the batch size the job runs."""
    if batch_size is not None and not isinstance(batch_size, (int,)):
        raise DataError(
            f"{framework}: the callback tunes at one batch size (the dataloader's); got "
            f"{batch_size!r}; choose the batch size with powertrain.Tuner.batches"
        )
    b = batch_size if batch_size is not None else found
    return None if b is None else int(b)


def decision_metrics(decision: dict, time_column: str) -> dict[str, float]:
    """One decision as the numbers both callbacks log (``powertrain/*``)."""
    return {
        "powertrain/power_cap_w": float(decision["power_cap_w"]),
        f"powertrain/{time_column}": float(decision[time_column]),
        "powertrain/power_w": float(decision["power_w"]),
        "powertrain/measured": float(decision["measured"]),
    }


def summary_metrics(summary: Any) -> dict[str, float]:
    """A tuner's summary as the numbers both callbacks log at the end of training."""
    return {
        "powertrain/n_measured": float(summary.n_measured),
        "powertrain/minibatches_to_pick": float(summary.minibatches_to_pick),
        "powertrain/explore_min": float(summary.explore_min),
    }
