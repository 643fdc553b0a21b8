"""Adapters that put :class:`powertrain.Tuner` into training frameworks.

``powertrain.integrations.lightning``: a ``lightning.pytorch.Callback``;
``powertrain.integrations.transformers``: a ``transformers.TrainerCallback``. Each is an
optional extra (``pip install powertrain[lightning]`` / ``[transformers]``); importing
this package imports neither framework.
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import DataError


class TunerHooks:
    """What both callbacks do around their framework's hooks: keep the Tuner's
    arguments, start the Tuner at the job's one batch size, time each step, hand back
    the numbers of the decisions made since the last step, and close or abort.

    A callback inherits this beside its framework's callback class and calls these
    from that framework's hooks; ``tuner`` and ``summary`` are public for the user."""

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
        self.tuner: Any = None  # a powertrain.Tuner once training starts
        self.summary: Any = None  # its TunerSummary once training ends
        self._told = 0

    def start_tuner(self, found_batch_size: Any, log: Callable[[str], Any]) -> None:
        """Start the Tuner at the given batch size, else the framework's."""
        from ..decisions.tuner import Tuner

        b = single_batch_size(self.batch_size, found_batch_size, "PowerTrainCallback")
        options = {"log": log, **self.tuner_options}
        self.tuner = Tuner(self.board, self.reference, self.power_cap_w, batch_size=b, **options)

    def step_begin(self) -> None:
        if self.tuner is not None:
            self.tuner.on_step_begin()

    def step_end(self) -> list[dict[str, float]]:
        """End the step's timing; the numbers of each decision made since the last call."""
        if self.tuner is None:
            return []
        self.tuner.on_step_end()
        new = self.tuner.decisions[self._told :]
        self._told += len(new)
        return [decision_metrics(d, self.tuner.time_column) for d in new]

    def finish(self) -> dict[str, float] | None:
        """Close the Tuner (the board restored); the summary's numbers if it tuned."""
        if self.tuner is None:
            return None
        self.summary = self.tuner.close()
        return summary_metrics(self.summary) if self.summary.active else None

    def abort(self) -> None:
        """Restore the board at once (an error in training)."""
        if self.tuner is not None:
            self.tuner.abort()


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
