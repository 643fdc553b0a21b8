"""What a decision knows and how it is told to work: its settings, grouped, and its study.

Why: a decision with the board in the loop carries about twenty settings and a growing
history. Grouping the settings (:class:`Settings`, checked once) and keeping the history
in one object (:class:`Study`: the candidates, what each measurement showed, the board
time, the log a later call resumes from) lets ``decide`` read as its steps: start,
transfer, assess, choose the next measurements, stop, and pick. Optuna's layout is the
model: a study holds the history, a sampler says what to measure next, a terminator when
to stop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from ..errors import DataError
from .optimise import _number

#: what a decision minimises among the configurations under a cap
OBJECTIVES = ("time", "energy")
#: what a round of the loop measures (decide's ``acquisition``)
ACQUISITIONS = ("improvement", "probability")
#: how a decision models what it has not measured (decide's ``method``): "table", joint
#: draws with neighbours' errors shared and the cap table's expected loss; "contest",
#: independent draws per configuration and per-cap improvement (the earlier loop)
METHODS = ("table", "contest")
#: how long each configuration is measured (decide's ``protocol``): until its mean time
#: and power are known to SETTLE_TOL relative standard error, or ``n_minibatches``
PROTOCOLS = ("settled", "fixed")
SETTLE_TOL = 0.01
#: the fewest measured configurations a transfer accepts (Predictor.transfer)
MIN_TRANSFER = 5
#: the stop's bound on the expected relative loss (table) or a challenger's expected
#: improvement (contest). Chosen on the tuning corpora only (Orin AGX MobileNetV3 and
#: ResNet-18, 34 caps 17-50 W, budget 50, 8 draws each, the spread scaled by the
#: network's own out-of-sample errors): at 1 % the table stopped at a median of 40
#: measured with a 1.65 % median penalty, at 0.5 % at 47 with 1.15 %
TOLERANCE = 0.005


@dataclass
class Settings:
    """decide's settings, grouped: the budget, the stop, the model of what is unmeasured,
    the measurement protocol and the choice (see :func:`~powertrain.decisions.decide.
    decide` for each)."""

    # the budget: how many configurations, how many first, how many a round
    budget: int = 50
    start: int | None = None
    per_round: int = 2
    # the stop
    confidence: float = 0.9
    patience: int = 4
    tolerance: float = TOLERANCE
    # the model of what is unmeasured, and what a round measures
    method: str = "table"
    correlation: float | None = None
    acquisition: str = "improvement"
    draws: int = 512
    seed: int = 0
    # the measurement protocol
    protocol: str = "settled"
    n_minibatches: int = 40
    # the choice
    objective: str = "time"
    accept_unmeasured: float | None = None
    cap_weights: Sequence[float] | None = None

    def checked(self, given: int) -> Settings:
        """These settings with each one checked (an error names it) and ``start`` set
        (default ``MIN_TRANSFER``, the fewest a transfer takes: on the tuning corpora a
        start of 10 spent five measurements far from any cap's pick; ``given``: earlier
        measurements)."""
        _choice("objective", self.objective, OBJECTIVES)
        _choice("method", self.method, METHODS)
        _choice("protocol", self.protocol, PROTOCOLS)
        _choice("acquisition", self.acquisition, ACQUISITIONS)
        _integer("budget", self.budget, 1, "a positive number of configurations")
        _integer("per_round", self.per_round, 1, "a positive integer")
        _integer("patience", self.patience, 0, "an integer >= 0 (rounds)")
        _integer("draws", self.draws, 1, "a positive integer")
        _integer("seed", self.seed, 0, "an integer >= 0")
        _probability("confidence", self.confidence)
        if self.accept_unmeasured is not None:
            _probability("accept_unmeasured", self.accept_unmeasured)
        if not 0 <= self.tolerance < 1:
            raise DataError(f"tolerance must be a fraction in [0, 1), got {self.tolerance!r}")
        if self.correlation is not None:
            _number("correlation", self.correlation)
        start = MIN_TRANSFER if self.start is None else self.start
        if start + given < MIN_TRANSFER:
            raise DataError(
                f"start={start}: a transfer needs at least {MIN_TRANSFER} measured configurations"
            )
        self.start = min(int(start), int(self.budget))
        return self


def _choice(name: str, value: Any, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise DataError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")


def _probability(name: str, value: Any) -> None:
    if not 0 < value < 1:
        raise DataError(f"{name} must be a probability in (0, 1), got {value!r}")


def _integer(name: str, value: Any, minimum: int, what: str) -> int:
    """An integer argument at least ``minimum``, else an error naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise DataError(f"{name} must be {what}, got {value!r}")
    return int(value)


class Study:
    """The history of one decision: the candidates, which are measured and what they
    showed, every measurement in order (``log``: ``round`` -1 for given samples, 0 for
    the start), and the board seconds this call spent. ``measure(configs)`` runs the
    board; ``say(line)`` is told of every configuration measured and why."""

    def __init__(
        self,
        cands: pd.DataFrame,
        inputs: Sequence[str],
        time_col: str,
        measure: Callable[[pd.DataFrame], pd.DataFrame],
        check: Callable[[pd.DataFrame, bool], None],
        say: Callable[[str], None],
    ):
        self.cands = cands
        self.inputs = tuple(inputs)
        self.time_col = time_col
        self._measure, self._check, self.say = measure, check, say
        keys = [tuple(np.round(row, 3)) for row in cands[list(inputs)].to_numpy(float)]
        self.position = {k: i for i, k in enumerate(keys)}
        self.measured = np.zeros(len(cands), dtype=bool)
        self.m_time = np.full(len(cands), np.nan)
        self.m_power = np.full(len(cands), np.nan)
        #: what the loop expected a configuration to measure when it chose it: the
        #: posterior mean and sd of log time, of power, the sds at unit spread scale
        #: (nan: not chosen by a forecast)
        self.ahead = np.full((4, len(cands)), np.nan)
        self.log: list[pd.DataFrame] = []
        self.board_s = 0.0
        self.n_new = 0
        self.rounds = 0

    def record(self, rows: pd.DataFrame, rnd: int, why: list[str]) -> None:
        """Take measured ``rows`` (round ``rnd``; -1: given samples) into the history."""
        rows = rows.reset_index(drop=True).assign(round=rnd, why=why)
        self._check(rows, rnd < 0)
        for _, row in rows.iterrows():
            j = self.position.get(tuple(np.round(row[list(self.inputs)].to_numpy(float), 3)))
            if j is not None:
                self.measured[j] = True
                self.m_time[j] = float(row[self.time_col])
                self.m_power[j] = float(row["power_w"])
        if rnd >= 0 and "profile_s" in rows.columns:
            self.board_s += float(rows["profile_s"].sum())
        self.log.append(rows)

    def run(self, idx: np.ndarray, rnd: int, why: list[str]) -> None:
        """Measure the candidates at positions ``idx`` on the board, saying why."""
        configs = self.cands.iloc[idx].reset_index(drop=True)
        for i in range(len(configs)):
            shown = " ".join(f"{k}={v:g}" for k, v in configs.iloc[i].to_dict().items())
            self.say(f"round {rnd}: measuring {shown}: {why[i]}")
        self.record(self._measure(configs), rnd, why)
        self.n_new += len(idx)

    def expect(self, idx: np.ndarray, forecast: np.ndarray) -> None:
        """Keep what the loop expected the candidates at ``idx`` to measure (``forecast``:
        4 x candidates, see ``ahead``): out-of-sample errors that say how far to trust
        the spread."""
        self.ahead[:, idx] = forecast[:, idx]

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
        return pd.concat(self.log, ignore_index=True)
