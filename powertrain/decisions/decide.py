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
more.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
import pandas as pd

from ..errors import DataError, NoFeasibleModeError
from .loss import Assessment, assess
from .optimise import _number
from .posterior import LENGTH, Field, knob_space, spread_scale
from .study import (
    SETTLE_TOL,
    TOLERANCE,
    Settings,
    Study,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..backends import Backend
    from ..predictor import Predictor

#: the stopping reasons a Decision may carry
STOP_REASONS = {
    "confident": "every cap's measured pick is the fastest feasible with the asked confidence",
    "stable": "the picks stood over the last rounds and no unmeasured configuration is "
    "expected to improve on them by more than the tolerance",
    "budget": "the budget of measured configurations is spent",
    "exhausted": "no configuration left that could beat the picks",
    "settled": "the expected loss over the caps (how much slower the picks may be than "
    "the fastest that fits, weighted over the caps) is within the tolerance",
}
_Z = 3.0  # sigmas beyond which a configuration is not considered a contender
#: the most caps x candidates cells a decision holds in one table (8 bytes each): 80 MB,
#: and a Python step per cap: 34 caps x 18,096 Orin AGX modes x 16 batch sizes fit
MAX_CELLS = 10_000_000


@dataclass
class CapPick:
    """The configuration chosen under one cap and what stands behind it."""

    power_cap_w: float
    #: the configuration's columns (knobs, batch size); None: no pick
    config: dict | None
    #: True: measured on the board (its time and power are the measurements)
    measured: bool
    time: float | None
    power_w: float | None
    #: the value minimised (time, time or energy to accuracy)
    cost: float | None
    #: measured pick: chance that no unmeasured configuration is faster under the cap;
    #: unmeasured pick: chance its power is within the cap
    confidence: float
    reason: str
    #: the expected relative loss of this pick: how much slower it may be than the
    #: fastest configuration that fits (nan: not assessed)
    expected_loss: float = float("nan")


@dataclass
class Decision:
    """What :func:`decide` returns: one pick per cap, every measurement, the board time."""

    picks: list[CapPick]
    #: every configuration measured, in order, with ``round`` and ``why``
    measurements: pd.DataFrame
    #: board seconds spent on the measurements of this call
    board_s: float
    stop_reason: str
    rounds: int
    time_column: str
    #: the last transferred model and its estimates (measured rows at measured values)
    model: Any = field(repr=False, default=None)
    estimates: pd.DataFrame | None = field(repr=False, default=None)
    #: the expected relative loss of the picks, weighted over the caps, when it stopped
    #: (how much slower than the fastest configuration that fits; nan: method "contest")
    expected_loss: float = float("nan")
    method: str = "table"

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
        """One row per cap: the pick's configuration, time, power, measured, confidence."""
        rows = []
        for p in self.picks:
            rows.append(
                {
                    "power_cap_w": p.power_cap_w,
                    **(p.config or {}),
                    self.time_column: p.time,
                    "power_w": p.power_w,
                    "cost": p.cost,
                    "measured": p.measured,
                    "confidence": p.confidence,
                    "expected_loss": p.expected_loss,
                    "reason": p.reason,
                }
            )
        return pd.DataFrame(rows)

    def save_table(self, path: str | Path) -> Path:
        """Write :meth:`table` as CSV (atomically); :func:`load_table` reads it back."""
        from ..utils.files import atomic_write

        atomic_write(path, self.table().to_csv(index=False))
        return Path(path)


# -------------------------------------------------------------------- the inputs --
def check_caps(power_cap_w: float | Sequence[float]) -> np.ndarray:
    """One cap or several, as a sorted array of distinct positive watts."""
    if isinstance(power_cap_w, (str, bytes)):
        raise DataError(
            f"power_cap_w must be watts or a list of watts, got the text {power_cap_w!r}: "
            "pass a number (30) or numbers ([20, 30])"
        )
    if isinstance(power_cap_w, (int, float, np.integer, np.floating)) and not isinstance(
        power_cap_w, bool
    ):
        values = [power_cap_w]
    else:
        try:
            values = list(power_cap_w)  # type: ignore[arg-type]
        except TypeError:
            raise DataError(
                f"power_cap_w must be watts or a list of watts, got {power_cap_w!r}"
            ) from None
    if not values:
        raise DataError("power_cap_w: give at least one cap in watts")
    caps = [_number("power_cap_w", v, positive=True) for v in values]
    return np.unique(np.asarray(caps, dtype=float))


def _default_batch_size(board: Backend) -> int | None:
    twin = getattr(board, "twin", None)
    return None if twin is None else int(twin.workload.default_batch_size)


def candidate_configurations(
    board: Backend, batch_size: int | Sequence[int] | None = None
) -> pd.DataFrame:
    """The configurations a decision chooses among, by default: a replayed table's own
    records, else the device's profiling grid at ``batch_size`` (one size or several;
    default: the twin workload's own)."""
    records = getattr(board, "configurations", None)
    if callable(records):
        cands = records()
        if batch_size is not None:
            cands = cands[cands["batch_size"].isin(np.atleast_1d(batch_size).astype(int))]
        return cands.reset_index(drop=True)
    if board.device is None:
        raise DataError(f"{type(board).__name__} has no device table of modes: pass candidates=...")
    sizes: int | Sequence[int] | None = (
        batch_size if batch_size is not None else _default_batch_size(board)
    )
    if sizes is None:
        raise DataError("batch_size: name the batch size(s) to decide among")
    grid = board.device.profiling_grid()
    sizes_df = pd.DataFrame({"batch_size": np.atleast_1d(sizes).astype(int)})
    return grid.merge(sizes_df, how="cross").reset_index(drop=True)


def cost_factor(configs: pd.DataFrame, r: Any, time_column: str) -> np.ndarray:
    """Per configuration, what turns its time into time to accuracy: epochs to target
    (an r with an ``epochs`` column, for per-epoch times), or samples to target / batch
    size (``load_r``'s ``samples``, else relative ``r``; ms turned into s). 1 without r."""
    if r is None:
        return np.ones(len(configs))
    if "batch_size" not in configs.columns:
        raise DataError("an r vector needs a batch_size column in the configurations")
    b = configs["batch_size"].astype(int)
    if isinstance(r, pd.DataFrame) and "epochs" in r.columns:
        per = r.set_index(r["batch_size"].astype(int))["epochs"].astype(float)
        factor = b.map(per)
    else:
        from ..data.batch_efficiency import load_r

        rv = load_r(r)
        n = rv.set_index("batch_size")["samples" if "samples" in rv.columns else "r"]
        factor = b.map(n).astype(float) / b * (1e-3 if time_column == "time_ms" else 1.0)
    if factor.isna().any():
        missing = sorted(set(b[factor.isna()]))
        raise DataError(f"the r vector has no entry for batch size(s) {missing}")
    return factor.to_numpy(float)


def _stratified(
    cands: pd.DataFrame, keys: Sequence[str], n: int, rng: np.random.Generator
) -> np.ndarray:
    """Positions of ``n`` candidates spread round-robin over the cells of ``keys``."""
    cells = list(cands.groupby(list(keys), sort=True).indices.values())
    rng.shuffle(cells)
    queues = [list(rng.permutation(c)) for c in cells]
    chosen: list[int] = []
    while len(chosen) < n and any(queues):
        for q in queues:
            if q and len(chosen) < n:
                chosen.append(int(q.pop()))
    return np.asarray(chosen, dtype=int)


def _power_spread(power: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Positions of ``n`` candidates, one drawn from each of ``n`` equal bins of the
    candidates ordered by ``power``."""
    if n == 0 or not len(power):
        return np.zeros(0, dtype=int)
    bins = np.array_split(np.argsort(power, kind="stable"), n)
    return np.asarray([rng.choice(b) for b in bins if len(b)], dtype=int)


# ------------------------------------------------------------ chance of winning --
@dataclass
class Contest:
    """What the unmeasured configurations could still do against each cap's measured pick.

    ``probs``: caps x configurations, the chance of being the fastest (cheapest) under
    the cap (at most 1 per cap). ``incumbent``: the measured pick per cap (-1: nothing
    measured fits). ``beaten``: the chance an unmeasured configuration beats it.
    ``improvement``: per cap and configuration, its own expected relative improvement on
    the pick, E[(pick - it)+] / pick counting an over-cap draw as none (constrained
    expected improvement); without a pick, its chance of being the fastest. Each
    configuration's own improvement, not the chance that *some* unmeasured one wins: the
    draws are independent per configuration, so over thousands of them a joint quantity
    (the chance, or the expected gain, of the best of them) reads a spread that the
    model's errors, which neighbours share, do not have.
    """

    probs: np.ndarray
    incumbent: np.ndarray
    beaten: np.ndarray
    improvement: np.ndarray


def contest(
    mu_t: np.ndarray,
    sd_t: np.ndarray,
    mu_p: np.ndarray,
    sd_p: np.ndarray,
    measured: np.ndarray,
    caps: np.ndarray,
    factor: np.ndarray | None = None,
    objective: str = "time",
    draws: int = 512,
    rng: np.random.Generator | None = None,
) -> Contest:
    """Each cap's measured pick against the unmeasured configurations, from ``draws`` joint
    draws of their time (log-normal around ``mu_t``, relative spread sd/mu) and power
    (normal); ``measured`` rows count at their values (``sd`` ignored)."""
    rng = np.random.default_rng(0) if rng is None else rng
    n = len(mu_t)
    factor = np.ones(n) if factor is None else np.asarray(factor, float)
    cost = mu_t * factor * (mu_p if objective == "energy" else 1.0)
    probs = np.zeros((len(caps), n))
    improvement = np.zeros((len(caps), n))
    incumbent = np.full(len(caps), -1)
    beaten = np.zeros(len(caps))
    rel = np.where(measured, 0.0, np.clip(sd_t / mu_t, 1e-6, None))
    sdp = np.where(measured, 0.0, np.clip(sd_p, 1e-9, None))
    low_cost = mu_t * np.exp(-_Z * rel) * factor
    if objective == "energy":
        low_cost = low_cost * np.clip(mu_p - _Z * sdp, 1e-9, None)
    for c, cap in enumerate(caps):
        fits = measured & (mu_p <= cap)
        best = math.inf
        if fits.any():
            j = int(np.flatnonzero(fits)[np.argmin(cost[fits])])
            incumbent[c], best = j, float(cost[j])
            probs[c, j] = 1.0
        rivals = np.flatnonzero(~measured & (mu_p - _Z * sdp <= cap) & (low_cost < best))
        if rivals.size == 0:
            continue
        t = mu_t[rivals] * np.exp(rel[rivals] * rng.standard_normal((draws, rivals.size)))
        p = mu_p[rivals] + sdp[rivals] * rng.standard_normal((draws, rivals.size))
        k = t * factor[rivals] * (p if objective == "energy" else 1.0)
        k[p > cap] = np.inf
        win = np.argmin(k, axis=1)
        wins = k[np.arange(draws), win] < best
        counts = np.bincount(win[wins], minlength=rivals.size) / draws
        probs[c, rivals] = counts
        beaten[c] = float(counts.sum())
        if incumbent[c] >= 0:
            probs[c, incumbent[c]] = 1.0 - beaten[c]
            gain = np.clip(best - k, 0.0, None) / best  # inf costs gain nothing
            improvement[c, rivals] = gain.mean(axis=0)
        else:
            improvement[c, rivals] = counts
    return Contest(probs, incumbent, beaten, improvement)


def win_probabilities(
    mu_t: np.ndarray,
    sd_t: np.ndarray,
    mu_p: np.ndarray,
    sd_p: np.ndarray,
    measured: np.ndarray,
    caps: np.ndarray,
    factor: np.ndarray | None = None,
    objective: str = "time",
    draws: int = 512,
    rng: np.random.Generator | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each cap, each configuration's chance of being the fastest (cheapest) under it:
    (probabilities, caps x configurations; the measured incumbent per cap, -1 if none
    fits; the chance per cap that an unmeasured configuration beats it). See
    :func:`contest`."""
    c = contest(mu_t, sd_t, mu_p, sd_p, measured, caps, factor, objective, draws, rng)
    return c.probs, c.incumbent, c.beaten


# --------------------------------------------------------------------- the loop --
def _measure(
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
    from ..profiling.sweep import profile

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


def check_measured(
    rows: pd.DataFrame, inputs: Sequence[str], targets: Sequence[str], board: Any, given: bool
) -> None:
    """Every measurement a finite positive time and power, else an error naming the board
    (or the given samples), the measurement and the configuration."""
    for col in targets:
        if col not in rows.columns:
            raise DataError(f"{'samples' if given else type(board).__name__}: no '{col}' column")
        v = pd.to_numeric(rows[col], errors="coerce").to_numpy(float)
        bad = np.flatnonzero(~(np.isfinite(v) & (v > 0)))
        if bad.size:
            i = int(bad[0])
            where = "the given samples" if given else f"the board ({type(board).__name__})"
            config = _shown({c: float(rows[c].iloc[i]) for c in inputs if c in rows})
            raise DataError(
                f"{where} returned {col}={v[i]} for {config}: a measurement "
                "must be a finite positive number"
            )


def _describe_caps(caps: np.ndarray) -> str:
    if len(caps) == 1:
        return f"{caps[0]:g} W"
    return f"{caps.min():g}-{caps.max():g} W ({len(caps)} caps)"


def _shown(config: dict) -> str:
    return " ".join(f"{k}={v:g}" for k, v in config.items())


def decide(
    board: Any,
    reference: Predictor,
    power_cap_w: float | Sequence[float],
    *,
    budget: int = 50,
    candidates: pd.DataFrame | None = None,
    batch_size: int | Sequence[int] | None = None,
    r: Any = None,
    objective: str = "time",
    start: int | None = None,
    per_round: int = 2,
    confidence: float = 0.9,
    patience: int = 4,
    tolerance: float = TOLERANCE,
    acquisition: str = "improvement",
    accept_unmeasured: float | None = None,
    samples: pd.DataFrame | None = None,
    draws: int = 512,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    transfer_options: dict | None = None,
    out: str | None = None,
    n_minibatches: int = 40,
    method: str = "table",
    protocol: str = "settled",
    correlation: float | None = None,
    cap_weights: Sequence[float] | None = None,
) -> Decision:
    """Choose the fastest configuration under each power cap, measuring on ``board``.

    ``board``: a Backend (twin, Jetson, NVML, :class:`~powertrain.backends.ReplayBackend`)
    or a :class:`~powertrain.Twin`. ``reference``: a fitted Predictor to transfer.
    ``power_cap_w``: one cap or several (a range: ``range(17, 51)``). ``budget``:
    configurations this call may measure. ``candidates``: the configurations to choose
    among (default :func:`candidate_configurations`). With ``r`` (an r vector, or a table
    of ``batch_size, epochs``) the cost is time (``objective="energy"``: energy) to
    accuracy, so batch size is chosen jointly with the knobs.

    The loop: measure ``start`` configurations (default 5, the fewest a transfer takes;
    spread over the reference's predicted power where it was trained on the board's
    device, over the device's strata elsewhere), transfer, then ``per_round`` at a
    time, re-transferring after each round. Each forecast is checked against what it
    measured, and the model's spreads are scaled by those out-of-sample errors before
    the next round
    (:func:`~powertrain.decisions.posterior.spread_scale`).
    With ``method="table"`` (default) the unmeasured configurations are drawn jointly
    from an error field in which neighbours err together (:mod:`powertrain.decisions.
    posterior`; ``correlation``: its length in standardised log-knob units, 0 for
    independent draws), and a round measures, in turn, what removes the most expected
    loss summed over the caps and what is expected to improve most on the picks by
    itself (:mod:`powertrain.decisions.loss`; ``cap_weights``: how much each cap counts,
    uniform by default; a cap without a pick where something may fit counts a whole
    pick, so the low-power end is reached early). It stops "settled" when that
    expected loss, weighted over the caps, is within ``tolerance`` and every cap where
    something may fit has a pick, "confident" when every cap's pick is unbeaten with
    chance ``confidence``, or at the budget; the loss is reported
    (:attr:`Decision.expected_loss`, per cap in :meth:`Decision.table`).
    ``method="contest"`` is the earlier loop: independent draws, per-cap expected
    improvement, and the "stable" stop after ``patience`` rounds. ``acquisition``: the
    expected gain ("improvement", as above) or the chance of winning ("probability").
    ``protocol``: each configuration is measured until its mean time and power are known
    to 1 % ("settled", default) or for ``n_minibatches`` clean minibatches ("fixed", the
    paper's protocol); a replayed table answers from its records either way.

    Each cap's pick is the fastest configuration *measured* under it, with its measured
    time and power. With ``accept_unmeasured`` (a probability), an unmeasured
    configuration predicted faster than that is returned instead when its chance of
    staying within the cap is at least that; it is marked ``measured=False``. A cap under
    which nothing measured fits gets ``config=None`` and a reason. ``samples``: earlier
    measurements of this board to start from (not counted in the budget). ``progress``:
    called with one line per measured configuration saying why it is measured.
    ``out``: a CSV the profiler appends each measurement to as it finishes (a board
    other than a replayed one; pass its rows back as ``samples`` to resume).
    """
    from ..backends import as_backend  # the backends import the profiler, which imports this

    board = as_backend(board)
    caps = check_caps(power_cap_w)
    given = 0 if samples is None else len(samples)
    s = Settings(
        budget=budget, start=start, per_round=per_round, confidence=confidence,
        patience=patience, tolerance=tolerance, method=method, correlation=correlation,
        acquisition=acquisition, draws=draws, seed=seed, protocol=protocol,
        n_minibatches=n_minibatches, objective=objective,
        accept_unmeasured=accept_unmeasured, cap_weights=cap_weights,
    ).checked(given)  # fmt: skip
    study = _open(board, reference, caps, candidates, batch_size, s, progress, out)
    factor = cost_factor(study.cands, r, study.time_col)
    rng = np.random.default_rng(s.seed)
    if samples is not None:
        study.record(samples, -1, ["given"] * len(samples))
    _start(study, board, reference, s, rng, given)
    shape = _Shape(caps, factor, _cap_weights(caps, s.cap_weights),
                   knob_space(study.cands[list(study.inputs)].to_numpy(float)))  # fmt: skip
    history: list[tuple] = []
    while True:
        model, est = _transfer(study, reference, s, transfer_options)
        step = (_step_table if s.method == "table" else _step_contest)(
            study, est, shape, s, rng, history
        )
        if step.stop is not None:
            break
        study.rounds += 1
        if step.forecast is not None:
            study.expect(step.take, step.forecast)
        study.run(step.take, study.rounds, step.why)
    return _finish(study, step, shape, s, model, est)


@dataclass
class _Shape:
    """What stays fixed over the loop: the caps, each candidate's cost factor, the caps'
    weights and the candidates' standardised knobs."""

    caps: np.ndarray
    factor: np.ndarray
    weights: np.ndarray
    knobs: np.ndarray


@dataclass
class _Step:
    """One assessment: current values, per-cap picks and how sure they are, why the loop
    stops (None: go on) or what it measures next and why."""

    mu_t: np.ndarray
    mu_p: np.ndarray
    sd_p: np.ndarray
    incumbent: np.ndarray
    beaten: np.ndarray
    loss_per_cap: np.ndarray | None
    expected_loss: float
    stop: str | None
    take: np.ndarray
    why: list[str]
    #: 4 x candidates: what the loop expects each to measure, at unit spread scale
    #: (Study.ahead; None: the contest loop does not forecast)
    forecast: np.ndarray | None = None


def _open(
    board: Backend, reference: Predictor, caps: np.ndarray, candidates: pd.DataFrame | None,
    batch_size: Any, s: Settings, progress: Callable[[str], None] | None, out: str | None,
) -> Study:  # fmt: skip
    """The study: the candidates the reference can read, checked for size, and how the
    board is measured."""
    inputs, targets = tuple(reference.inputs_), tuple(reference.targets_)
    if "power_w" not in targets:
        raise DataError(f"the reference predicts {', '.join(targets)}; a decision needs power_w")
    time_col = next(t for t in targets if t != "power_w")
    cands = candidate_configurations(board, batch_size) if candidates is None else candidates
    missing = [c for c in inputs if c not in cands.columns]
    if missing:
        raise DataError(f"candidates: missing column(s) {', '.join(missing)} the model reads")
    cands = cands.drop_duplicates(subset=list(inputs)).reset_index(drop=True)
    check_size(len(caps), len(cands))
    return Study(
        cands, inputs, time_col,
        measure=lambda c: _measure(board, c, out, s.n_minibatches, s.protocol),
        check=lambda rows, given: check_measured(rows, inputs, (time_col, "power_w"), board, given),
        say=progress or (lambda line: None),
    )  # fmt: skip


def _start(
    study: Study, board: Backend, reference: Predictor, s: Settings, rng: np.random.Generator,
    given: int,
) -> None:  # fmt: skip
    """Measure the start, less the ``given`` earlier measurements.

    Where the reference was trained on this board's device, its power ranking holds, so
    the start is one random configuration from each of equal bins of the candidates
    ordered by predicted power: the cap table spans the power axis, and a transfer that
    has seen its whole length ranks the configurations near every cap. On another
    device, where the time model must be re-learnt, the start is stratified over the
    device's ``stratify_by`` knobs instead. Chosen on the tuning sets: on the same
    device the spread start was ahead on every figure, across devices behind on the
    Xavier AGX (docs/decisions.md)."""
    free = np.flatnonzero(~study.measured)
    assert s.start is not None
    need = max(0, s.start - given)
    if _trained_on(reference, board):
        power = np.zeros(0)
        if need and free.size:
            rows = study.cands[list(study.inputs)].iloc[free]
            power = reference.predict(rows)["power_w"].to_numpy(float)
        first = _power_spread(power, need, rng)
        why = "start spread over the reference's predicted power"
    else:
        first = _stratified(study.cands.iloc[free], _strata(board, study.cands), need, rng)
        why = "stratified start"
    if len(first):
        study.run(free[first], 0, [why] * len(first))


def _trained_on(reference: Predictor, board: Backend) -> bool:
    """Whether the reference was trained on the board's device (its model file says so)."""
    from ..predictor.checks import trained_devices  # the predictor imports torch

    info = getattr(reference, "info_", None) or {}
    return board.device is not None and board.device.spec.name in trained_devices(info)


def _transfer(
    study: Study, reference: Predictor, s: Settings, options: dict | None
) -> tuple[Any, pd.DataFrame]:
    """Transfer the reference to everything measured; predict every candidate."""
    targets = tuple(reference.targets_)
    done = study.history()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # extrapolation warnings: the loop measures there
        model = reference.transfer(
            done[[*study.inputs, *targets]], random_state=s.seed, **dict(options or {})
        )
        est = model.predict(study.cands[list(study.inputs)], return_std=True)
    return model, est


def _step_table(
    study: Study, est: pd.DataFrame, shape: _Shape, s: Settings, rng: np.random.Generator,
    history: list,
) -> _Step:  # fmt: skip
    """The cap table's expected loss; stop, or the rivals that remove most of it."""
    t, st, p, sp = _predicted(est, study.time_col)
    z_t, z_p = study.surprise()
    scale_t, scale_p = spread_scale(z_t), spread_scale(z_p)
    now = assess(
        (t, st * scale_t, p, sp * scale_p), study.measured, (study.m_time, study.m_power),
        shape.knobs, shape.caps, shape.factor, s.objective == "energy", s.draws, rng,
        Field(length=LENGTH if s.correlation is None else float(s.correlation)),
    )  # fmt: skip
    left = s.budget - study.n_new
    stop = _table_stop(now, s.confidence, s.tolerance, shape.weights, left <= 0)
    take, why = np.zeros(0, dtype=int), []
    if stop is None:
        portfolio = s.acquisition == "improvement"  # credit and own improvement in turn
        gain = now.loss.credit if portfolio else now.loss.wins
        own = now.loss.improvement if portfolio else None
        take = now.rivals[_batch(gain, shape.weights, min(s.per_round, left), own)]
        why = [_why_table(now, j, shape.caps, shape.weights, est.iloc[j], study.time_col,
                          own=portfolio and _own_turn(i))
               for i, j in enumerate(take)]  # fmt: skip
        stop = None if take.size else "exhausted"
    forecast = now.forecast / np.array([1.0, scale_t, 1.0, scale_p])[:, None]
    return _Step(now.mu_t, now.mu_p, now.sd_p, now.incumbent, now.loss.beaten,
                 now.loss.per_cap, now.loss.total(shape.weights), stop, take, why,
                 forecast)  # fmt: skip


def _step_contest(
    study: Study, est: pd.DataFrame, shape: _Shape, s: Settings, rng: np.random.Generator,
    history: list,
) -> _Step:  # fmt: skip
    """The earlier loop: independent draws, per-cap improvement, the stable stop."""
    tc, m = study.time_col, study.measured
    mu_t = np.where(m, study.m_time, est[tc].to_numpy(float))
    mu_p = np.where(m, study.m_power, est["power_w"].to_numpy(float))
    sd_p = est["power_w_std"].to_numpy(float)
    old = contest(mu_t, est[f"{tc}_std"].to_numpy(float), mu_p, sd_p, m, shape.caps,
                  shape.factor, s.objective, s.draws, rng)  # fmt: skip
    history.append(tuple(old.incumbent))
    stop: str | None = None
    take = np.zeros(0, dtype=int)
    if np.all((old.incumbent >= 0) & (old.beaten <= 1 - s.confidence)):
        stop = "confident"
    elif is_stable(history, old.improvement.max(axis=1), s.patience, s.tolerance):
        stop = "stable"
    elif study.n_new >= s.budget:
        stop = "budget"
    else:
        gain = old.improvement if s.acquisition == "improvement" else old.probs
        score = np.where(m, 0.0, gain.sum(axis=0))
        take = np.argsort(-score, kind="stable")[: min(s.per_round, s.budget - study.n_new)]
        take = take[score[take] > 0]
        stop = None if take.size else "exhausted"
    why = [_why(old.probs[:, j], shape.caps, est.iloc[j], tc) for j in take]
    return _Step(mu_t, mu_p, sd_p, old.incumbent, old.beaten, None, float("nan"), stop,
                 take, why)  # fmt: skip


def _finish(
    study: Study, step: _Step, shape: _Shape, s: Settings, model: Any, est: pd.DataFrame
) -> Decision:
    """The picks, the estimates at measured values, and the decision that says why it
    stopped, how sure it is and what it cost."""
    cost = step.mu_t * shape.factor * (step.mu_p if s.objective == "energy" else 1.0)
    est = est.assign(**{study.time_col: step.mu_t, "power_w": step.mu_p,
                        "measured": study.measured, "cost": cost})  # fmt: skip
    picks = [
        _pick(cap, study.cands, study.inputs, study.measured, step.mu_t, step.mu_p,
              step.sd_p, cost, step.incumbent[c], step.beaten[c], s.accept_unmeasured)
        for c, cap in enumerate(shape.caps)
    ]  # fmt: skip
    if step.loss_per_cap is not None:
        for c, p in enumerate(picks):
            p.expected_loss = float(step.loss_per_cap[c])
    assert step.stop is not None
    study.say(
        f"stopped after {study.n_new} measured configurations: {STOP_REASONS[step.stop]} "
        f"(expected loss over the caps {100 * step.expected_loss:.2f} %, "
        f"{study.board_s / 60:.1f} board minutes)"
    )
    return Decision(
        picks=picks, measurements=study.history(), board_s=study.board_s,
        stop_reason=step.stop, rounds=study.rounds, time_column=study.time_col, model=model,
        estimates=est, expected_loss=step.expected_loss, method=s.method,
    )  # fmt: skip


def is_stable(
    history: Sequence[tuple], improvement: np.ndarray, patience: int, tolerance: float
) -> bool:
    """The stable stop: every cap has a measured pick, the picks stood over the last
    ``patience`` rounds, and under every cap no unmeasured configuration is expected to
    improve on the pick by more than ``tolerance`` (``improvement``: per cap, the largest
    :attr:`Contest.improvement`; the expected-improvement stop of Bayesian optimisation).
    A pick that merely stood is not enough: it stands while the loop measures long shots
    and a likely faster configuration waits, unmeasured."""
    if len(history) <= patience or len(set(history[-patience - 1 :])) != 1:
        return False
    return bool(np.all(np.asarray(history[-1]) >= 0) and np.all(improvement <= tolerance))


def _predicted(
    est: pd.DataFrame, time_col: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The model's time, time spread, power and power spread per candidate."""
    t, st, p, sp = (time_col, f"{time_col}_std", "power_w", "power_w_std")
    return (est[t].to_numpy(float), est[st].to_numpy(float), est[p].to_numpy(float),
            est[sp].to_numpy(float))  # fmt: skip


def _cap_weights(caps: np.ndarray, weights: Sequence[float] | None) -> np.ndarray:
    """How much each cap counts in the table's loss: uniform unless the caller says."""
    if weights is None:
        return np.full(len(caps), 1.0 / len(caps))
    w = np.asarray([_number("cap_weights", v) for v in weights], float)
    if len(w) != len(caps) or not w.sum() > 0:
        raise DataError(
            f"cap_weights: give one weight >= 0 per distinct cap ({len(caps)}), not all 0; "
            f"got {len(w)}"
        )
    return w / w.sum()


def _batch(
    gain: np.ndarray, weights: np.ndarray, n: int, improvement: np.ndarray | None = None
) -> np.ndarray:
    """``n`` rivals (positions into ``gain``'s columns) to measure in one round.

    The first (and every other) is the largest weighted ``gain``, each next one with the
    caps the earlier ones cover discounted by the share of their gain already taken, so
    that one round spreads over the cap table instead of three neighbours under one cap.
    With ``improvement`` (caps x rivals, each rival's own expected improvement), the
    second (and every other) is the largest weighted improvement instead: a portfolio of
    two scores. Why: the credit a rival gets is the loss of the draws it *wins*, which
    goes to a few sure bets; its own improvement also counts the draws where a neighbour
    edges it out, which favours the uncertain. On the tuning sets, credit alone left the
    Xavier AGX cross-device case 17.6 % off at 50 measured (13.5 % with both);
    improvement alone did better there and worse on the same device; the alternation
    was better than credit alone or level on both (docs/decisions.md)."""
    total = gain.sum(axis=1)
    share = np.divide(gain, total[:, None], out=np.zeros_like(gain), where=total[:, None] > 0)
    w = weights.astype(float).copy()
    chosen: list[int] = []
    for i in range(n):
        own_turn = improvement is not None and _own_turn(i)
        score = weights @ improvement if own_turn else w @ gain
        score[chosen] = 0.0
        j = int(np.argmax(score)) if len(score) else 0
        if not len(score) or score[j] <= 0:  # a rival with credit has improvement too
            break
        chosen.append(j)
        w = w * (1.0 - share[:, j])
    return np.asarray(chosen, dtype=int)


def _own_turn(i: int) -> bool:
    """Whether a round's ``i``-th measurement goes by own improvement (the portfolio's
    turn; :func:`_batch`), not by credit."""
    return i % 2 == 1


def _table_stop(
    now: Assessment, confidence: float, tolerance: float, weights: np.ndarray, spent: bool
) -> str | None:
    """Why the loop stops now, or None: every cap's pick unbeaten with the asked
    confidence ("confident"); the expected loss over the caps within the tolerance and
    every cap under which something may fit holding a pick ("settled"); the budget."""
    picked = now.incumbent >= 0
    if np.all(picked & (now.loss.beaten <= 1 - confidence)):
        return "confident"
    if np.all(picked | (now.loss.beaten == 0)) and now.loss.total(weights) <= tolerance:
        return "settled"
    return "budget" if spent else None


def _why_table(
    now: Assessment, j: int, caps: np.ndarray, weights: np.ndarray, row: pd.Series, time_col: str,
    own: bool = False,
) -> str:  # fmt: skip
    """'expected to remove 1.2 % of the table's loss under 17-24 W' (``own``: 'expected
    to improve on the picks by 2.0 % under ...') for a measured configuration."""
    r = int(np.searchsorted(now.rivals, j))
    gain = (now.loss.improvement if own else now.loss.credit)[:, r]
    hit = np.flatnonzero(gain > 0)
    where = caps[hit] if hit.size else caps
    nopick = [c for c in hit if now.incumbent[c] < 0]
    lead = f"a first pick under {_describe_caps(caps[nopick])}; " if nopick else ""
    what = "improve on the picks by" if own else "remove"
    whose = "" if own else " of the table's loss"
    return (
        f"{lead}expected to {what} {100 * float(weights @ gain):.2f} %{whose} "
        f"under {_describe_caps(where)} (predicted {row[time_col]:.4g} "
        f"{time_col.split('_')[-1]}, {row['power_w']:.1f} W)"
    )


def _strata(board: Backend, cands: pd.DataFrame) -> list[str]:
    keys = list(board.device.spec.stratify_by) if board.device is not None else []
    keys = [k for k in keys if k in cands.columns] or [
        c for c in cands.columns if c != "batch_size"
    ][:2]
    if "batch_size" in cands.columns and cands["batch_size"].nunique() > 1:
        keys.append("batch_size")
    return keys


def _why(p: np.ndarray, caps: np.ndarray, row: pd.Series, time_col: str) -> str:
    """'candidate under 30 W, 40 % chance of being fastest' for a measured configuration."""
    hit = np.flatnonzero(p > 0)
    where = caps[hit] if hit.size else caps
    best = float(p.max())
    return (
        f"candidate under {_describe_caps(where)}, {100 * best:.0f} % chance of being fastest "
        f"(predicted {row[time_col]:.4g} {time_col.split('_')[-1]}, {row['power_w']:.1f} W)"
    )


def _pick(
    cap: float,
    cands: pd.DataFrame,
    inputs: Sequence[str],
    measured: np.ndarray,
    mu_t: np.ndarray,
    mu_p: np.ndarray,
    sd_p: np.ndarray,
    cost: np.ndarray,
    incumbent: int,
    beaten: float,
    accept_unmeasured: float | None,
) -> CapPick:
    """The confirmed pick under ``cap``, or the accepted unmeasured one, or none."""

    def config(j: int) -> dict:
        return {c: _plain(cands[c].iloc[j]) for c in inputs}

    if accept_unmeasured is not None:
        from scipy.stats import norm

        sure = norm.cdf((cap - mu_p) / np.clip(sd_p, 1e-9, None))
        bar = cost[incumbent] if incumbent >= 0 else np.inf
        ok = np.flatnonzero(~measured & (sure >= accept_unmeasured) & (cost < bar))
        if ok.size:
            j = int(ok[np.argmin(cost[ok])])
            return CapPick(
                cap,
                config(j),
                False,
                float(mu_t[j]),
                float(mu_p[j]),
                float(cost[j]),
                float(sure[j]),
                f"unmeasured: predicted faster than every measured configuration, "
                f"{100 * sure[j]:.0f} % chance of staying within {cap:g} W",
            )
    if incumbent < 0:
        return CapPick(
            cap,
            None,
            False,
            None,
            None,
            None,
            0.0,
            f"no measured configuration fits under {cap:g} W "
            f"(lowest measured power {np.nanmin(np.where(measured, mu_p, np.nan)):.1f} W)"
            if measured.any()
            else f"nothing measured under {cap:g} W",
        )
    j = int(incumbent)
    return CapPick(
        cap,
        config(j),
        True,
        float(mu_t[j]),
        float(mu_p[j]),
        float(cost[j]),
        float(1.0 - beaten),
        f"fastest measured under {cap:g} W; {100 * (1 - beaten):.0f} % chance no unmeasured "
        "configuration is faster",
    )


def _plain(v: Any) -> Any:
    return int(v) if isinstance(v, (np.integer,)) else float(v) if isinstance(v, np.floating) else v


def load_table(path: str | Path) -> pd.DataFrame:
    """A cap table written by :meth:`Decision.save_table`, checked: one row per distinct
    positive cap, with the columns every pick carries."""
    from ..schema import check_columns, read_csv

    df = read_csv(path, "cap table")
    missing = [c for c in ("measured", "reason") if c not in df.columns]
    if missing:
        raise DataError(f"{path}: not a cap table: missing column(s) {', '.join(missing)}")
    check_columns(df, ["power_cap_w"], source=str(path), positive=["power_cap_w"])
    if df["power_cap_w"].duplicated().any():
        cap = df.loc[df["power_cap_w"].duplicated(), "power_cap_w"].iloc[0]
        raise DataError(f"{path}: the cap {cap:g} W has two rows")
    return df


def require_pick(decision: Decision, power_cap_w: float | None = None) -> CapPick:
    """The pick under the cap, or NoFeasibleModeError saying why there is none."""
    p = decision.pick(power_cap_w)
    if p.config is None:
        raise NoFeasibleModeError(p.reason)
    return p
