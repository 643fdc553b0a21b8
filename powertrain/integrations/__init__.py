"""Adapters that put :class:`powertrain.Tuner` into training frameworks.

``powertrain.integrations.lightning``: a ``lightning.pytorch.Callback``;
``powertrain.integrations.transformers``: a ``transformers.TrainerCallback``. Each is an
optional extra (``pip install powertrain[lightning]`` / ``[transformers]``); importing
this package imports neither framework.
"""

from __future__ import annotations

import inspect
import math
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from ..errors import DataError

#: the Tuner's messages a user must see at the framework's default level: decisions,
#: cap changes and the summary (the rest, one line per measurement, is detail)
NOTICES = ("decided under", "power cap now", "powertrain tuner")
#: Tuner arguments the callback sets itself
_SET_HERE = ("self", "board", "reference", "power_cap_w", "batch_size", "log", "samples")


class TunerHooks:
    """What both callbacks do around their framework's hooks: keep the Tuner's
    arguments (checked here, when the callback is built), start the Tuner at the job's
    one batch size from what earlier runs measured, time each step, agree with the other
    ranks, hand back the numbers of the decisions made since the last step, save each
    measurement, and close or abort.

    A callback inherits this beside its framework's callback class and calls these
    from that framework's hooks; ``tuner`` and ``summary`` are public for the user.
    ``profile``: a CSV the measurements are saved to and reused from (the next run at the
    same cap measures nothing new; :mod:`powertrain.decisions.saved_profile`);
    ``workload``: the name they are saved under (default the board's)."""

    def __init__(
        self,
        board: Any,
        reference: Any,
        power_cap_w: Any,
        *,
        batch_size: int | None = None,
        profile: str | Path | None = None,
        workload: str | None = None,
        **tuner_options: Any,
    ):
        super().__init__()
        check_options(type(self).__name__, reference, power_cap_w, batch_size, tuner_options)
        if profile is not None and not isinstance(profile, (str, Path)):
            raise DataError(f"{type(self).__name__}: profile must be a CSV path, got {profile!r}")
        self.board, self.reference, self.power_cap_w = board, reference, power_cap_w
        self.batch_size, self.tuner_options = batch_size, tuner_options
        self.profile, self.workload = profile, workload
        self.tuner: Any = None  # a powertrain.Tuner once training starts (rank 0)
        self.summary: Any = None  # its TunerSummary once training ends
        self.agreement: Any = None  # the other ranks' link under torch.distributed
        self._told = self._saved = 0
        self._kept: pd.DataFrame | None = None  # the last run's rows, for the next run
        self._notice: Callable[[str], Any] = print
        self._detail: Callable[[str], Any] = print
        self._new_rows = False

    # ------------------------------------------------------------------- start --
    def start_tuner(
        self,
        found_batch_size: Any,
        notice: Callable[[str], Any],
        detail: Callable[[str], Any] | None = None,
    ) -> None:
        """Start the Tuner at the given batch size, else the framework's; ``notice``
        gets decisions and summaries, ``detail`` the rest."""
        from ..decisions.tuner import Tuner
        from .distributed import Agreement, world

        self._told = self._saved = 0  # a reused callback logs its decision again
        self.summary, self._new_rows = None, False
        self._notice, self._detail = notice, detail or notice
        b = single_batch_size(self.batch_size, found_batch_size, type(self).__name__)
        rank, size = world()
        self.agreement = Agreement(self.board) if size > 1 else None
        if rank > 0:
            self.tuner = None  # rank 0 decides; this rank follows (see step_begin)
            return
        options = {"log": self._say, **self.tuner_options}
        self.tuner = Tuner(
            self.board,
            self.reference,
            self.power_cap_w,
            batch_size=b,
            samples=self._earlier(),
            **options,
        )

    def _say(self, message: str) -> None:
        self._new_rows = self._new_rows or message.startswith("measured")
        (self._notice if message.startswith(NOTICES) else self._detail)(message)

    def _where(self) -> tuple[str, str]:
        board = self.tuner.board if self.tuner is not None else None
        device = str(getattr(board, "device_name", "unknown"))
        return device, str(self.workload or getattr(board, "workload_name", "unknown"))

    def _earlier(self) -> pd.DataFrame | None:
        """What earlier runs measured: the saved profile, else this callback's last run."""
        if self.profile is None:
            return self._kept
        from ..backends import as_backend
        from ..decisions.saved_profile import load_profile

        try:
            board = as_backend(self.board)
        except TypeError:
            return None  # the Tuner says why it cannot run
        workload = self.workload or board.workload_name
        rows = load_profile(self.profile, board.device_name, workload)
        return rows if len(rows) else self._kept

    # ------------------------------------------------------------------- steps --
    def step_begin(self) -> None:
        if self.tuner is not None:
            self.tuner.on_step_begin()
        if self.agreement is not None:  # every rank, every step: the same configuration
            self.agreement.share(None if self.tuner is None else self.tuner.config)

    def step_end(self) -> list[dict[str, float]]:
        """End the step's timing; the numbers of each decision made since the last call."""
        if self.tuner is None:
            return []
        self.tuner.on_step_end()
        if self._new_rows:
            self._new_rows = False
            self._save()
        new = self.tuner.decisions[self._told :]
        self._told += len(new)
        rows = self.tuner.measurements() if new else None
        return [decision_metrics(d, self.tuner.time_column, rows) for d in new]

    def _save(self) -> None:
        """Append the measurements not yet saved to the profile."""
        if self.profile is None or self.tuner is None or self.tuner.board is None:
            return
        from ..decisions.saved_profile import save_rows

        rows = self.tuner.measurements()
        if "given" in rows:
            rows = rows[rows["given"] != True]  # noqa: E712 - NaN for the new rows
        device, workload = self._where()
        cols = self.tuner.board.config_columns
        save_rows(self.profile, rows.iloc[self._saved :], cols, device, workload)
        self._saved = len(rows)

    # --------------------------------------------------------------------- end --
    def finish(self) -> dict[str, float] | None:
        """Close the Tuner (the board restored); the summary's numbers if it tuned."""
        if self.agreement is not None:
            self.agreement.restore(error=False)
        if self.tuner is None:
            return None
        self.summary = self.tuner.close()
        self._keep()
        return summary_metrics(self.summary) if self.summary.active else None

    def abort(self) -> None:
        """Restore the board at once (an error in training), saying what was measured and
        the best configuration measured so far."""
        if self.agreement is not None:
            self.agreement.restore(error=True)
        if self.tuner is None or self.tuner.phase == "closed":
            return
        self.tuner.abort()
        self.summary = self.tuner.summary()
        self._keep()
        if self.summary.config is None and self.summary.active:
            self._notice(best_so_far(self.tuner.measurements()))

    def _keep(self) -> None:
        assert self.tuner is not None
        self._save()
        self._kept = self.tuner.measurements()


# ----------------------------------------------------------------------- checks --
def check_options(
    framework: str, reference: Any, power_cap_w: Any, batch_size: Any, options: dict
) -> None:
    """The callback's arguments, checked when it is built (not when training starts)."""
    from ..decisions.tuner import Tuner

    if batch_size is not None and (
        isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1
    ):
        raise DataError(
            f"{framework}: batch_size: the callback tunes at one batch size (the "
            f"dataloader's); got {batch_size!r}; choose the batch size with "
            "powertrain.Tuner.batches"
        )
    if not callable(power_cap_w):
        ok = isinstance(power_cap_w, (int, float)) and not isinstance(power_cap_w, bool)
        if not (ok and math.isfinite(power_cap_w) and power_cap_w > 0):
            raise DataError(
                f"{framework}: power_cap_w must be positive watts or a schedule, "
                f"got {power_cap_w!r}"
            )
    known = set(inspect.signature(Tuner.__init__).parameters) - set(_SET_HERE)
    unknown = sorted(set(options) - known)
    if unknown:
        raise DataError(
            f"{framework}: unknown option(s) {', '.join(unknown)}; the Tuner takes "
            f"{', '.join(sorted(known))}"
        )
    for name in ("budget", "minibatches"):
        v = options.get(name, 1)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise DataError(f"{framework}: {name} must be an integer >= 1, got {v!r}")
    if "power_w" not in getattr(reference, "targets_", ()):
        raise DataError(f"{framework}: reference must be a fitted Predictor of power_w")


def single_batch_size(batch_size: Any, found: Any, framework: str) -> int | None:
    """The job's one batch size: given, else the framework's dataloader's.

    Why one: these frameworks build the dataloader once per run (Lightning at most once
    an epoch), so the tuner chooses the knobs at the batch size the job runs."""
    b = batch_size if batch_size is not None else found
    return None if b is None else int(b)


# ---------------------------------------------------------------------- numbers --
def decision_metrics(
    decision: dict, time_column: str, rows: pd.DataFrame | None = None
) -> dict[str, float]:
    """One decision as the numbers both callbacks log (``powertrain/*``); with the
    tuner's measured ``rows``, the share of the time and energy measured for this cap
    that ran over it (the timed minibatches, by the board's readings)."""
    from ..decisions.safe_set import over_cap_share

    cap = float(decision["power_cap_w"])
    out = {
        "powertrain/power_cap_w": cap,
        f"powertrain/{time_column}": float(decision[time_column]),
        "powertrain/power_w": float(decision["power_w"]),
        "powertrain/measured": float(decision["measured"]),
    }
    if rows is not None and len(rows) and "cap" in rows:
        here = rows[np.isclose(rows["cap"].astype(float), cap)]
        if "given" in here:
            here = here[here["given"] != True]  # noqa: E712 - NaN for this run's rows
        time_share, energy_share = over_cap_share(here, cap)
        out["powertrain/over_cap_time_share"] = time_share
        out["powertrain/over_cap_energy_share"] = energy_share
    return out


def summary_metrics(summary: Any) -> dict[str, float]:
    """A tuner's summary as the numbers both callbacks log at the end of training."""
    return {
        "powertrain/n_measured": float(summary.n_measured),
        "powertrain/minibatches_to_pick": float(summary.minibatches_to_pick),
        "powertrain/explore_min": float(summary.explore_min),
    }


def best_so_far(rows: pd.DataFrame) -> str:
    """What an interrupted tuner measured, and its fastest configuration under the cap."""
    if not len(rows):
        return "powertrain tuner interrupted before it measured a configuration"
    fits = rows[rows["power_w"] <= rows["cap"]]
    head = f"powertrain tuner interrupted after measuring {len(rows)} configurations"
    if not len(fits):
        return f"{head}; none fits under {rows['cap'].iloc[-1]:g} W"
    best = fits.loc[fits["time_ms"].idxmin()]
    skip = {"time_ms", "power_w", "n_minibatches", "stable", "index", "cap", "given"}
    shown = " ".join(f"{k}={float(best[k]):g}" for k in rows.columns if k not in skip)
    return (
        f"{head}; best so far under {best['cap']:g} W: {shown} "
        f"({best['time_ms']:.4g} ms, {best['power_w']:.1f} W)"
    )
