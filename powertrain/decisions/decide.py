"""Decide with the board in the loop: profile where the decision is, and confirm the pick
by measuring it.

Why: a random sample of 50 modes spends most of its board time far from the one or few
configurations a user will run, and a model's pick is a prediction -- a few percent
slow, or over the cap. Given the cap(s), a small stratified start and a transfer say
which configurations could still be the fastest under each cap; measuring those, and
re-transferring, moves board time to where the decision is. The answer is the fastest
configuration *measured* under the cap, so what is returned has been seen on the board.

The chance that a configuration is the fastest feasible one comes from the model's
spread: each unmeasured configuration's time (log-normal) and power (normal) are drawn
from its prediction and 1-sigma spread, measured ones are taken as measured, and the
share of draws in which it is the fastest under the cap is its probability. The default
(``method="table"``) draws them jointly, neighbours erring together
(:mod:`~powertrain.decisions.posterior`), with the spread scaled by how far the loop's
own forecasts were off; the earlier loop (``"contest"``) draws each one independently,
which overstates the chance that *some* unmeasured one wins, so it errs on measuring
more; ``"random"`` is the floor (uniform draws).

The loop: measure ``start`` configurations (spread over the reference's predicted power on
its own device, else the strata), transfer, then ``per_round`` a round. "table" measures
what removes the most expected loss summed over the caps and what is expected to improve
most on the picks by itself; it stops "settled" when the weighted expected loss is within
``tolerance`` and every cap where something may fit has a pick
(:attr:`Decision.expected_loss`, per cap in :meth:`Decision.table`). "contest" uses per-cap
expected improvement and stops "stable" after ``patience`` rounds. Each stops "confident"
when every cap's pick is unbeaten with chance ``confidence``, or at the budget. A cap where
nothing measured fits gets ``config=None``; ``hard_cap`` is off: its regret is higher.

``decide`` is a thin driver of the engine (:mod:`~powertrain.decisions.study`): it asks
the study what to measure, measures it on the board, tells the study, and returns the
study's picks. The strategies are :mod:`~powertrain.decisions.samplers`, the stop rule
:mod:`~powertrain.decisions.terminator`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
import pandas as pd

from ..backends import Backend
from ..errors import DataError, NoFeasibleModeError
from ..profiling.sweep import profile
from .candidates import CapPick, candidate_configurations, candidates_for, cost_factor
from .safe_set import over_cap_columns
from .samplers import make_sampler
from .samplers.contest import contest  # noqa: F401  (importable from here, as before)
from .settings import (
    SETTLE_TOL,
    TOLERANCE,
    Settings,
    cap_weights,
    check_board,
    check_budget,
    check_caps,
    check_reference,
    check_samples,
)
from .study import Study
from .terminator import STOP_REASONS, is_stable  # noqa: F401

if TYPE_CHECKING:  # pragma: no cover
    from ..predictor import Predictor

#: the most caps x candidates cells a decision holds in one table (8 bytes each): 80 MB,
#: and a Python step per cap: 34 caps x 18,096 Orin AGX modes x 16 batch sizes fit
MAX_CELLS = 10_000_000

__all__ = [
    "STOP_REASONS", "TOLERANCE", "CapPick", "Decision", "candidate_configurations",
    "check_caps", "cost_factor", "decide", "load_table", "require_pick",
]  # fmt: skip


@dataclass
class Decision:
    """What :func:`decide` returns: one pick per cap, every measurement, the board time.

    Parameters
    ----------
    picks : list of CapPick
        One per cap, lowest cap first (``config=None`` and a reason where nothing fits).
    measurements : DataFrame
        Every configuration measured, in order, with ``round`` (0: the start; -1: given
        ``samples``) and ``why``.
    board_s : float
        Board seconds spent on the measurements of this call.
    stop_reason : str
        Why the loop stopped: a key of ``STOP_REASONS`` ("settled", "confident",
        "stable", "budget" or "exhausted").
    rounds : int
        Rounds measured after the start.
    time_column : str
        The reference's time column (``time_ms`` per minibatch or ``epoch_s``).
    model : Predictor, optional
        The last transferred model (None: every candidate measured before a transfer).
    estimates : DataFrame, optional
        Its estimates of every candidate, measured rows at measured values.
    expected_loss : float
        The expected relative loss of the picks, weighted over the caps, when it stopped:
        how much slower than the fastest configuration that fits (nan: "contest").
    method : str
        The strategy that made it.
    study : Study, optional
        The study that made it (the cap controller asks it whether a new cap is settled).
    device, workload : str, optional
        The board's device and workload (None: unknown), written with the table.
    """

    picks: list[CapPick]
    measurements: pd.DataFrame
    board_s: float
    stop_reason: str
    rounds: int
    time_column: str
    model: Any = field(repr=False, default=None)
    estimates: pd.DataFrame | None = field(repr=False, default=None)
    expected_loss: float = float("nan")
    method: str = "table"
    study: Any = field(repr=False, default=None)
    device: str | None = None
    workload: str | None = None

    @property
    def board_minutes(self) -> float:
        """Board minutes the measurements of this call took."""
        return self.board_s / 60.0

    @property
    def n_measured(self) -> int:
        """Configurations measured by this call (given samples excluded)."""
        return int((self.measurements["round"] >= 0).sum()) if len(self.measurements) else 0

    def pick(self, power_cap_w: float | None = None) -> CapPick:
        """The pick under ``power_cap_w`` (the only cap when there is one)."""
        if power_cap_w is None:
            if len(self.picks) != 1:
                raise DataError(
                    f"this decision has {len(self.picks)} caps; name one: "
                    f"{', '.join(f'{p.power_cap_w:g}' for p in self.picks)}"
                )
            return self.picks[0]
        for p in self.picks:
            if math.isclose(p.power_cap_w, float(power_cap_w)):
                return p
        raise DataError(f"no decision for a {power_cap_w:g} W cap in this result")

    def table(self) -> pd.DataFrame:
        """One row per cap: the pick, measured, confidence, this call's share of measuring
        time and energy over the cap (readings), and the device and workload, where known."""
        made = {k: v for k, v in (("device", self.device), ("workload", self.workload)) if v}
        new = self.measurements[self.measurements["round"] >= 0] if self.n_measured else None
        rows = []
        for p in self.picks:
            rows.append(
                {
                    **made,
                    "power_cap_w": p.power_cap_w,
                    **(p.config or {}),
                    self.time_column: p.time,
                    "power_w": p.power_w,
                    "cost": p.cost,
                    "measured": p.measured,
                    "confidence": p.confidence,
                    "expected_loss": p.expected_loss,
                    "reason": p.reason,
                    **over_cap_columns(new, p.power_cap_w),
                }
            )
        return pd.DataFrame(rows)

    def save_table(self, path: str | Path) -> Path:
        """Write :meth:`table` as CSV (atomically); :func:`load_table` reads it back."""
        from ..utils.files import atomic_write

        atomic_write(path, self.table().to_csv(index=False))
        return Path(path)


# --------------------------------------------------------------------- the loop --
def decide(
    board: Any, reference: Predictor, power_cap_w: float | Sequence[float], *, budget: int = 50,
    candidates: pd.DataFrame | None = None, batch_size: int | Sequence[int] | None = None,
    r: Any = None, objective: str = "time", start: int | None = None, per_round: int = 2,
    confidence: float = 0.9, patience: int = 4, tolerance: float = TOLERANCE, draws: int = 512,
    acquisition: str = "improvement", accept_unmeasured: float | None = None, seed: int = 0,
    samples: pd.DataFrame | None = None, progress: Callable[[str], None] | None = None,
    transfer_options: dict | None = None, out: str | None = None, n_minibatches: int = 40,
    method: str = "table", protocol: str = "settled", correlation: float | None = None,
    cap_weights: Sequence[float] | None = None, hard_cap: bool = False) -> Decision:  # fmt: skip
    """Choose the fastest configuration under each power cap, measuring on ``board``.

    Parameters
    ----------
    board : Backend or Twin
        What measures: a Jetson, NVML, the twin, a :class:`~powertrain.backends.ReplayBackend`.
    reference : Predictor
        A fitted Predictor of ``power_w`` and one time column, transferred to the board.
    power_cap_w : float or sequence of float
        One cap in W or several (a range: ``range(17, 51)``), each finite and > 0.
    budget : int
        Configurations this call may measure (``samples`` not counted).
    candidates, samples : DataFrame, optional
        ``candidates``: the configurations to choose among (default
        :func:`candidate_configurations`); ``samples``: earlier measurements to start from.
    batch_size : int or sequence of int, optional
        The batch size(s) to choose among.
    r : dict, DataFrame, str or Path, optional
        An r vector (or a ``batch_size, epochs`` table): cost becomes time to accuracy.
    objective : str
        "time", or "energy": the time cost x power (with ``r``: :func:`cost_factor`).
    start : int, optional
        Configurations measured before the first transfer (default 5, at most ``budget``).
    per_round : int
        Configurations measured in each round after it (re-transferring after each).
    confidence : float
        Stop ("confident") once every cap's pick is unbeaten with this chance.
    patience : int
        "contest": stop ("stable") once the picks stood this many rounds.
    tolerance : float
        Stop ("settled") once the expected relative loss is within this, in [0, 1).
    acquisition : str
        What a round measures for: the expected gain, or ("probability") the chance to win.
    accept_unmeasured : float, optional
        Pick an unmeasured one predicted faster if its chance of fitting is at least this.
    draws : int
        Draws of the unmeasured configurations' times and powers a round.
    seed : int
        The random seed (draws and transfers).
    progress : callable, optional
        Told why each configuration is measured.
    transfer_options : dict, optional
        Keyword arguments of each :meth:`Predictor.transfer`.
    out : str, optional
        A CSV each measurement is appended to (pass it back as ``samples`` to resume).
    n_minibatches : int
        Clean minibatches each measurement times ("settled": the longest window).
    method : str
        The strategy: "table", "contest" or "random" (the loop: the module's docstring).
    protocol : str
        Measure until mean time and power are known to 1 % ("settled") or "fixed".
    correlation : float, optional
        "table": the field's length in standardised log-knob units (0: independent).
    cap_weights : sequence of float, optional
        Each cap's weight in the expected loss, as the caps are given (default uniform).
    hard_cap : bool
        Explore only inside the one cap's safe set (:mod:`~powertrain.decisions.hard_cap`).

    Returns
    -------
    Decision
        Per cap the fastest configuration measured under it, every measurement, board time.
    """
    s = Settings(budget=budget, start=start, per_round=per_round, confidence=confidence,
        draws=draws, patience=patience, tolerance=tolerance, method=method, seed=seed,
        correlation=correlation, acquisition=acquisition, protocol=protocol, objective=objective,
        n_minibatches=n_minibatches, accept_unmeasured=accept_unmeasured, hard_cap=hard_cap,
        cap_weights=cap_weights)  # fmt: skip
    return drive(*open_study(board, reference, power_cap_w, s, candidates, batch_size, r,
                             samples, progress, transfer_options), s, out)  # fmt: skip


def drive(board: Backend, study: Study, s: Settings, out: str | None = None) -> Decision:
    """Measure on ``board`` what ``study`` asks for, and tell it, until it stops: its
    decision."""
    while (asked := study.ask()) is not None:
        study.tell(measure(board, asked.configs, out, s.n_minibatches, s.protocol), asked)
    return result(study, board)


def open_study(
    board: Any, reference: Any, power_cap_w: Any, s: Settings, candidates: Any,
    batch_size: Any, r: Any, samples: pd.DataFrame | None,
    progress: Callable[[str], None] | None, transfer_options: dict | None, who: str = "",
) -> tuple[Backend, Study]:  # fmt: skip
    """Every input checked (:mod:`~powertrain.decisions.settings`), then the study over
    the candidates (checked for size), with ``samples`` told as given: what ``decide``
    and the Tuner both start from."""
    board = check_board(board)
    caps = check_caps(power_cap_w)
    samples = check_samples(samples)
    s.checked(0 if samples is None else len(samples))
    sampler = make_sampler(s.method)
    inputs, time_col = check_reference(reference, who)
    weights = cap_weights(power_cap_w, caps, s.cap_weights)
    cands = candidates_for(board, inputs, candidates, batch_size)
    check_size(len(caps), len(cands))
    check_budget(s.budget, 0 if samples is None else len(samples), inputs, board.config_columns)
    study = Study(
        cands, reference, caps, s, sampler, factor=cost_factor(cands, r, time_col),
        weights=weights, device=board.device, transfer_options=transfer_options,
        say=progress, source=f"the board ({type(board).__name__})",
    )  # fmt: skip
    if samples is not None:
        study.tell(samples)
    return board, study


def result(study: Study, board: Any = None) -> Decision:
    """The decision a study makes: its picks, the estimates at measured values, why it
    stopped, how sure it is and what it cost (on ``board``: its device and workload)."""
    model, _ = study.predict()
    loss = study.reported().expected_loss if study.standing is not None else float("nan")
    stop = study.stop_reason
    assert stop is not None
    study.say(
        f"stopped after {study.n_new} measured configurations: {STOP_REASONS[stop]} "
        f"(expected loss over the caps {100 * loss:.2f} %, "
        f"{study.board_s / 60:.1f} board minutes)"
    )
    return Decision(
        picks=study.picks(), measurements=study.history(), board_s=study.board_s,
        stop_reason=stop, rounds=study.rounds, time_column=study.time_col, model=model,
        estimates=study.estimates(), expected_loss=loss, method=study.settings.method,
        study=study, device=_name(board, "device_name"), workload=_name(board, "workload_name"),
    )  # fmt: skip


def _name(board: Any, attr: str) -> str | None:
    value = getattr(board, attr, None)
    return None if value in (None, "", "unknown") else str(value)


def measure(
    board: Backend,
    configs: pd.DataFrame,
    out: str | None = None,
    n_minibatches: int = 40,
    protocol: str = "settled",
) -> pd.DataFrame:
    """Measure ``configs`` on the board: a replayed table answers from its records, any
    other board runs the profiler on them (appending each to ``out`` as it finishes),
    for as long as time and power take to settle (``protocol="settled"``) or for
    ``n_minibatches`` clean ones ("fixed", the paper's protocol)."""
    direct = getattr(board, "measure", None)
    if callable(direct):
        return direct(configs)
    tol = SETTLE_TOL if protocol == "settled" else 0.0
    got = profile(
        board, configs, progress=False, out=out, n_minibatches=n_minibatches, settle_tol=tol
    )
    if out is None:
        return got
    cols = list(board.config_columns)  # the file holds every run: keep this round's rows
    return got.merge(configs[cols].round(3), on=cols, how="inner")


def check_size(n_caps: int, n_candidates: int) -> None:
    """Refuse a decision whose caps x candidates tables would not fit in memory, before
    any of them is allocated, naming the size and the way round."""
    if n_candidates == 0:
        raise DataError("candidates: no configurations to choose among (the table is empty)")
    cells = n_caps * n_candidates
    if cells > MAX_CELLS:
        raise DataError(
            f"power_cap_w (--power-cap): {n_caps:,} caps x {n_candidates:,} candidates = "
            f"{cells:,} cells "
            f"(about {cells * 8 / 1e9:.1f} GB a table; at most {MAX_CELLS:,}): decide for "
            "fewer caps (17-50 W in 1 W steps is 34) or fewer candidates"
        )


def load_table(path: str | Path) -> pd.DataFrame:
    """A cap table written by :meth:`Decision.save_table`, checked: one row per positive cap,
    the columns every pick carries, no pick over its cap (an edit would run a board over it)."""
    from ..schema import check_columns, read_csv

    df = read_csv(path, "cap table")
    missing = [c for c in ("measured", "reason") if c not in df.columns]
    if missing:
        raise DataError(f"{path}: not a cap table: missing column(s) {', '.join(missing)}")
    check_columns(df, ["power_cap_w"], source=str(path), positive=["power_cap_w"])
    if df["power_cap_w"].duplicated().any():
        cap = df.loc[df["power_cap_w"].duplicated(), "power_cap_w"].iloc[0]
        raise DataError(f"{path}: the cap {cap:g} W has two rows")
    if "power_w" in df.columns:
        power = pd.to_numeric(df["power_w"], errors="coerce").to_numpy(float)
        for i in np.flatnonzero(np.isnan(power) & df["power_w"].notna().to_numpy())[:1]:
            raise DataError(f"{path}: row {i + 1}, column 'power_w': not a number of watts")
        for i in np.flatnonzero(power > df["power_cap_w"].to_numpy(float))[:1]:
            raise DataError(
                f"{path}: row {i + 1}: the pick draws {power[i]:g} W, over its "
                f"{df['power_cap_w'].iloc[i]:g} W cap; a cap table's picks fit their caps"
            )
    return df


def require_pick(decision: Decision, power_cap_w: float | None = None) -> CapPick:
    """The pick under the cap, or NoFeasibleModeError saying why there is none."""
    p = decision.pick(power_cap_w)
    if p.config is None:
        raise NoFeasibleModeError(p.reason)
    return p
