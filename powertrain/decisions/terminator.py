"""When a study stops: the stop rule, apart from the strategies that choose what to measure.

Why apart (Optuna's ``terminator/``): every strategy reports where the study stands
(:class:`Standing`: per cap the measured pick, the chance something unmeasured beats it,
what stopping now may cost), and one rule reads it. A new strategy needs no stop of its
own, and the cap controller asks the same rule whether a cap is settled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .settings import TOLERANCE

#: the stopping reasons a study (and a Decision) may carry
STOP_REASONS = {
    "confident": "every cap's measured pick is the fastest feasible with the asked confidence",
    "stable": "the picks stood over the last rounds and no unmeasured configuration is "
    "expected to improve on them by more than the tolerance",
    "budget": "the budget of measured configurations is spent",
    "exhausted": "no configuration left that could beat the picks",
    "settled": "the expected loss over the caps (how much slower the picks may be than "
    "the fastest that fits, weighted over the caps) is within the tolerance",
}
#: the rules a sampler may ask for besides "confident" and "budget": the cap table's
#: expected loss ("settled"), per-cap improvement after stable picks ("stable"), none
RULES = ("settled", "stable", "budget")


@dataclass
class Standing:
    """Where a study stands under each of its caps, as a sampler assessed it.

    ``incumbent``: the measured pick (a candidate position; -1: nothing measured fits).
    ``beaten``: the chance that an unmeasured configuration beats it (nan: not assessed).
    ``loss``: the expected relative loss of stopping now (None: not assessed), and
    ``expected_loss`` its weighted mean over the caps. ``improvement``: the largest
    expected relative improvement an unmeasured configuration offers on the pick (None:
    not assessed). ``forecast``: 4 x candidates, what each candidate is expected to
    measure (mean and sd of log time, of power; None: no forecast). ``detail``: the
    sampler's own, for choosing what to measure next."""

    incumbent: np.ndarray
    beaten: np.ndarray
    loss: np.ndarray | None = None
    expected_loss: float = float("nan")
    improvement: np.ndarray | None = None
    forecast: np.ndarray | None = field(default=None, repr=False)
    detail: Any = field(default=None, repr=False)


@dataclass
class Terminator:
    """The stop rule. In order: "confident" when every cap's measured pick is unbeaten
    with chance ``confidence``; with ``rule="settled"``, when the expected loss over the
    caps is within ``tolerance`` and every cap under which something may fit has a pick;
    with ``rule="stable"``, when the picks stood ``patience`` rounds and nothing is
    expected to improve on them by more than ``tolerance`` (:func:`is_stable`); then
    "budget" once ``budget`` configurations are measured."""

    rule: str = "settled"
    confidence: float = 0.9
    tolerance: float = TOLERANCE
    patience: int = 4
    budget: int = 50

    def __call__(
        self, standing: Standing, history: Sequence[tuple], n_measured: float
    ) -> str | None:
        """Why the study stops now (``history``: the picks of every assessment so far,
        this one last; ``n_measured``: configurations it measured), or None."""
        picked = standing.incumbent >= 0
        if np.all(picked & (standing.beaten <= 1 - self.confidence)):
            return "confident"
        if (
            self.rule == "settled"
            and np.all(picked | (standing.beaten == 0))
            and standing.expected_loss <= self.tolerance
        ):
            return "settled"
        if (
            self.rule == "stable"
            and standing.improvement is not None
            and is_stable(history, standing.improvement, self.patience, self.tolerance)
        ):
            return "stable"
        return "budget" if n_measured >= self.budget else None

    def settled(self, standing: Standing) -> bool:
        """Whether ``standing`` would stop on its own merit (the budget aside), with the
        picks taken as having stood: what the cap controller asks of a new cap."""
        stood = [tuple(standing.incumbent)] * (self.patience + 1)
        return self(standing, stood, -np.inf) is not None


def is_stable(
    history: Sequence[tuple], improvement: np.ndarray, patience: int, tolerance: float
) -> bool:
    """The stable stop: every cap has a measured pick, the picks stood over the last
    ``patience`` rounds, and under every cap no unmeasured configuration is expected to
    improve on the pick by more than ``tolerance`` (``improvement``: per cap, the largest
    expected relative improvement; the expected-improvement stop of Bayesian
    optimisation). A pick that merely stood is not enough: it stands while the loop
    measures long shots and a likely faster configuration waits, unmeasured."""
    if len(history) <= patience or len(set(history[-patience - 1 :])) != 1:
        return False
    return bool(np.all(np.asarray(history[-1]) >= 0) and np.all(improvement <= tolerance))
