"""The decision engine: a study holds the history, a sampler says what to measure next, a
terminator when to stop (Optuna's ``study/``, ``samplers/``, ``terminator/``).

Why one engine: ``decide`` (a sweep on a board), the Tuner (the job's own training
steps) and the cap controller (a new cap at run time) once each had their own loop,
start, acquisition, stop rule and constants, and they drifted apart. Each is now a thin
driver around a :class:`Study`::

    study = Study(candidates, reference, caps, settings, sampler, factor=...)
    while (asked := study.ask()) is not None:      # the start, then round by round
        study.tell(measure(asked.configs), asked)  # the board, or training steps
    study.picks()                                  # the fastest measured under each cap

Given the same candidates, caps, settings and measurements, every driver measures the
same configurations in the same order and returns the same picks.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from ..errors import DataError
from .candidates import CapPick, cost, fastest_measured, make_pick, with_spec
from .hard_cap import HardCap
from .posterior import knob_space
from .settings import MIN_TRANSFER, Settings
from .terminator import Standing, Terminator


@dataclass
class Ask:
    """What a study asks to be measured next: candidate ``positions``, their ``configs``
    (rows of the candidates, in the order to measure them), ``why`` (one line each) and
    the ``round`` (0: the start)."""

    positions: np.ndarray
    configs: pd.DataFrame
    why: list[str]
    round: int


class Study:
    """The history of one decision over ``caps`` among ``cands``: which candidates are
    measured and what they showed, every measurement in order (:meth:`history`: ``round``
    -1 for given samples, 0 for the start), the board seconds spent, the model
    transferred from ``reference`` to what was measured, and why it stopped.

    ``sampler``: the strategy (:mod:`~powertrain.decisions.samplers`). ``factor``: each
    candidate's cost factor (:func:`~powertrain.decisions.candidates.cost_factor`).
    ``weights``: each cap's weight (default uniform). ``device``: the board's device (the
    start reads it). ``say(line)`` is told of every configuration asked for and why;
    ``source`` names where measurements come from in errors."""

    def __init__(
        self,
        cands: pd.DataFrame,
        reference: Any,
        caps: np.ndarray,
        settings: Settings,
        sampler: Any,  # a samplers.base.Sampler (not imported: samplers import this)
        *,
        factor: np.ndarray | None = None,
        weights: np.ndarray | None = None,
        device: Any = None,
        transfer_options: dict | None = None,
        say: Callable[[str], None] | None = None,
        source: str = "the board",
    ):
        self.cands = cands
        self.reference = reference
        self.inputs = tuple(reference.inputs_)
        self.targets = tuple(reference.targets_)
        self.time_col = next(t for t in self.targets if t != "power_w")
        self.caps = np.asarray(caps, float)
        self.settings, self.sampler = settings, sampler
        self.factor = np.ones(len(cands)) if factor is None else np.asarray(factor, float)
        self.weights = np.full(len(self.caps), 1.0 / len(self.caps)) if weights is None else weights
        self.device, self.source = device, source
        self.transfer_options = dict(transfer_options or {})
        self.say = say or (lambda line: None)
        self.knobs = knob_space(cands[list(self.inputs)].to_numpy(float))
        self.rng = np.random.default_rng(settings.seed)
        s = settings
        self.terminator = Terminator(
            sampler.stop_rule, s.confidence, s.tolerance, s.patience, s.budget
        )
        keys = [tuple(np.round(row, 3)) for row in cands[list(self.inputs)].to_numpy(float)]
        self.position = {k: i for i, k in enumerate(keys)}
        self.measured = np.zeros(len(cands), dtype=bool)
        self.m_time = np.full(len(cands), np.nan)
        self.m_power = np.full(len(cands), np.nan)
        #: what the study expected a configuration to measure when it chose it: the
        #: posterior mean and sd of log time, of power, the sds at unit spread scale
        #: (nan: not chosen by a forecast)
        self.ahead = np.full((4, len(cands)), np.nan)
        self.log: list[pd.DataFrame] = []
        self.board_s = 0.0
        self.n_new = self.n_given = self.rounds = 0
        #: given measurements that count against the budget (a decision resumed)
        self.n_resumed = 0
        #: the picks (incumbents per cap) of every assessment, in order
        self.picks_seen: list[tuple] = []
        self.standing: Standing | None = None
        self.stop_reason: str | None = None
        self._started = False
        self._asked: Ask | None = None
        self._fit: tuple[int, Any, pd.DataFrame] | None = None
        self._report: tuple[int, Standing] | None = None
        #: with ``settings.hard_cap``: the safe set every ask keeps to
        self.hard = HardCap(self) if settings.hard_cap else None

    # ---------------------------------------------------------------- ask and tell --
    def ask(self) -> Ask | None:
        """The configurations to measure next, or None once the study stopped
        (:attr:`stop_reason`). Each ask must be answered by :meth:`tell` first."""
        if self._asked is not None:
            raise DataError("Study.ask: tell the measurements of the last ask first")
        if not self._started:
            self._started = True
            s = self.settings
            assert s.start is not None
            free = np.flatnonzero(~self.measured)
            need = max(0, s.start - self.n_given)
            pick_start = self.sampler.start if self.hard is None else self.hard.start_for
            first, why = pick_start(self, free, need)
            if len(first):
                return self._ask(free[np.asarray(first, dtype=int)], [why] * len(first), 0)
        if self.stop_reason is not None:
            return None
        if self.measured.all():  # nothing left to measure: no model needed
            self.standing = self._measured_only()
            self.stop_reason = "exhausted"
            return None
        est = self.predict()[1] if self.sampler.uses_model else None
        standing = self.sampler.assess(self, est)  # hard_cap: the whole table, see keep_safe
        self.standing = standing
        self.picks_seen.append(tuple(standing.incumbent))
        spent = self.n_new + self.n_resumed
        stop = self.terminator(standing, self.picks_seen, spent)
        take, why = np.zeros(0, dtype=int), []
        if stop is None:
            n = min(self.settings.per_round, self.settings.budget - spent)
            take, why = self.sampler.choose(self, standing, n)
            if self.hard is not None and est is not None and len(take):
                take, why = self.hard.keep_safe(np.asarray(take, dtype=int), why)
                if not len(take):  # nothing in reach known safe: grow the set by one
                    take, why = self.hard.grow(est)
            stop = None if len(take) else "exhausted"
        if stop is not None:
            self.stop_reason = stop
            return None
        self.rounds += 1
        if standing.forecast is not None:
            self.ahead[:, take] = standing.forecast[:, take]
        return self._ask(np.asarray(take, dtype=int), list(why), self.rounds)

    def _ask(self, idx: np.ndarray, why: list[str], rnd: int) -> Ask:
        configs = self.cands.iloc[idx].reset_index(drop=True)
        for i in range(len(configs)):
            shown = " ".join(f"{k}={v:g}" for k, v in configs.iloc[i].to_dict().items())
            self.say(f"round {rnd}: measuring {shown}: {why[i]}")
        self._asked = Ask(idx, configs, why, rnd)
        return self._asked

    def tell(self, rows: pd.DataFrame, asked: Ask | None = None, *, resumed: bool = False) -> None:
        """Take measured ``rows`` into the history: the answer to ``asked`` (counted in
        the budget, their board seconds in :attr:`board_s`), or, without it, earlier
        measurements given to start from (round -1); ``resumed``: given rows measured for
        this same decision before (a saved profile at the same cap), counted in the
        budget too, so a rerun does not measure them again."""
        if asked is None:
            self._record(rows, -1, ["given"] * len(rows))
            self.n_given += len(rows)
            self.n_resumed += len(rows) if resumed else 0
            return
        if asked is not self._asked:
            raise DataError("Study.tell: these rows answer no open ask of this study")
        if len(rows) != len(asked.why):
            raise DataError(
                f"{self.source} returned {len(rows)} measurement(s) for "
                f"{len(asked.why)} configuration(s)"
            )
        self._asked = None
        self._record(rows, asked.round, asked.why)
        self.n_new += len(asked.positions)

    def _record(self, rows: pd.DataFrame, rnd: int, why: list[str]) -> None:
        rows = with_spec(rows.reset_index(drop=True), self.inputs, self.device)
        rows = rows.assign(round=rnd, why=why)
        check_measured(rows, self.inputs, (self.time_col, "power_w"), self.source, rnd < 0)
        for _, row in rows.iterrows():
            j = self.position.get(tuple(np.round(row[list(self.inputs)].to_numpy(float), 3)))
            if j is not None:
                self.measured[j] = True
                self.m_time[j] = float(row[self.time_col])
                self.m_power[j] = float(row["power_w"])
        if rnd >= 0 and "profile_s" in rows.columns:
            self.board_s += float(rows["profile_s"].sum())
        self.log.append(rows)

    # ---------------------------------------------------------------- the model --
    def predict(self) -> tuple[Any, pd.DataFrame]:
        """The reference transferred to everything measured, and its estimates of every
        candidate (with spreads): once per state of the history. With every candidate
        measured and too few for a transfer, the measurements themselves (no model)."""
        n = sum(len(rows) for rows in self.log)
        if self._fit is not None and self._fit[0] == n:
            return self._fit[1], self._fit[2]
        done = self.history()
        if len(done) < MIN_TRANSFER and self.measured.all():
            model, est = None, self._measured_table()
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # extrapolation warnings: the loop measures
                model = self.reference.transfer(
                    done[[*self.inputs, *self.targets]], random_state=self.settings.seed,
                    own_measurements=True, **self.transfer_options,
                )  # fmt: skip
                est = model.predict(self.cands[list(self.inputs)], return_std=True)
        self._fit = (n, model, est)
        return model, est

    def _measured_table(self) -> pd.DataFrame:
        tc = self.time_col
        return self.cands[list(self.inputs)].assign(
            **{tc: self.m_time, f"{tc}_std": 0.0, "power_w": self.m_power, "power_w_std": 0.0}
        )

    def _measured_only(self) -> Standing:
        """The standing when everything is measured: nothing can beat the picks."""
        k = cost(self.m_time, self.m_power, self.factor, self.settings.objective)
        inc = [fastest_measured(self.measured, self.m_power, k, c) for c in self.caps]
        zero = np.zeros(len(self.caps))
        return Standing(np.asarray(inc, dtype=int), zero, zero, 0.0)

    def surprise(self) -> tuple[np.ndarray, np.ndarray]:
        """What each forecast configuration measured against its forecast, in units of
        its forecast's sd: (log time, power)."""
        a_t, s_t, a_p, s_p = self.ahead
        ok = self.measured & np.isfinite(a_t)
        z_t = (np.log(self.m_time[ok]) - a_t[ok]) / np.clip(s_t[ok], 1e-9, None)
        z_p = (self.m_power[ok] - a_p[ok]) / np.clip(s_p[ok], 1e-9, None)
        return z_t, z_p

    def history(self) -> pd.DataFrame:
        """Every measurement so far, in order."""
        return pd.concat(self.log, ignore_index=True) if self.log else pd.DataFrame()

    # ------------------------------------------------------------------ the picks --
    def estimates(self) -> pd.DataFrame:
        """Every candidate at its current values (measured where measured, else the
        model's), with ``measured`` and the ``cost`` minimised."""
        _, est = self.predict()
        tc, m = self.time_col, self.measured
        mu_t = np.where(m, self.m_time, est[tc].to_numpy(float))
        mu_p = np.where(m, self.m_power, est["power_w"].to_numpy(float))
        k = cost(mu_t, mu_p, self.factor, self.settings.objective)
        return est.assign(**{tc: mu_t, "power_w": mu_p, "measured": m, "cost": k})

    def reported(self) -> Standing:
        """Where the study stands as its picks report it: the sampler's report of this
        state where it has one (a transfer across devices reports a wider spread than
        it measures by), else the last standing the loop went by."""
        n = sum(len(rows) for rows in self.log)
        if self._report is not None and self._report[0] == n:
            return self._report[1]
        standing = self.standing if self.standing is not None else self._measured_only()
        if self.sampler.uses_model and not self.measured.all() and self.standing is not None:
            standing = self.sampler.report(self, self.predict()[1]) or standing
        self._report = (n, standing)
        return standing

    def picks(self) -> list[CapPick]:
        """Per cap, the fastest configuration measured under it (or the accepted
        unmeasured one, with ``accept_unmeasured``), with how sure the study is."""
        est = self.estimates()
        standing = self.reported()
        m = self.measured
        sd_p = np.where(m, 0.0, est["power_w_std"].to_numpy(float))
        out = []
        for c, cap in enumerate(self.caps):
            p = make_pick(
                float(cap), self.cands, self.inputs, m, est[self.time_col].to_numpy(float),
                est["power_w"].to_numpy(float), sd_p, est["cost"].to_numpy(float),
                int(standing.incumbent[c]), float(standing.beaten[c]),
                self.settings.accept_unmeasured,
            )  # fmt: skip
            if standing.loss is not None:
                p.expected_loss = float(standing.loss[c])
            out.append(p)
        return out

    def settled_at(self, cap: float, tolerance: float | None = None) -> bool:
        """Whether this study's own rule would stop at ``cap`` alone (its model as it
        ended, the budget aside): something measured fits and nothing unmeasured is
        likely enough to beat it by more than ``tolerance`` (default the study's)."""
        k = cost(self.m_time, self.m_power, self.factor, self.settings.objective)
        if fastest_measured(self.measured, self.m_power, k, cap) < 0:
            return False
        kept = (self.caps, self.weights, self.rng)
        self.caps, self.weights = np.array([float(cap)]), np.ones(1)
        self.rng = np.random.default_rng(self.settings.seed)
        try:
            est = self.predict()[1] if self.sampler.uses_model else None
            standing = self.sampler.assess(self, est)
        finally:
            self.caps, self.weights, self.rng = kept
        rule = self.terminator
        if tolerance is not None:
            rule = dataclasses.replace(rule, tolerance=float(tolerance))
        return rule.settled(standing)


def check_measured(
    rows: pd.DataFrame, inputs: Sequence[str], targets: Sequence[str], source: str, given: bool
) -> None:
    """Every measurement a finite positive time and power, else an error naming the board
    (or the given samples), the measurement and the configuration."""
    for col in targets:
        if col not in rows.columns:
            raise DataError(f"{'samples' if given else source}: no '{col}' column")
        v = pd.to_numeric(rows[col], errors="coerce").to_numpy(float)
        bad = np.flatnonzero(~(np.isfinite(v) & (v > 0)))
        if bad.size:
            i = int(bad[0])
            where = "the given samples" if given else source
            config = " ".join(
                f"{c}={float(rows[c].iloc[i]):g}" for c in inputs if c in rows.columns
            )
            raise DataError(
                f"{where} returned {col}={v[i]} for {config}: a measurement "
                "must be a finite positive number"
            )
