"""Plain random sampling (decide's ``method="random"``): the floor a strategy must beat.

Every configuration it measures is drawn uniformly from those not yet measured, from
the first; it reads no model and stops only at the budget (or when nothing is left).
Its picks are, as every strategy's, the fastest configurations measured under each cap.
The whole strategy is this file and one line in ``samplers/__init__.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..candidates import cost, fastest_measured
from ..terminator import Standing
from .base import Sampler

if TYPE_CHECKING:  # pragma: no cover
    from ..study import Study


class RandomSampler(Sampler):
    """Uniform draws among the unmeasured configurations."""

    name = "random"
    stop_rule = "budget"
    uses_model = False

    def start(self, study: Study, free: np.ndarray, need: int) -> tuple[np.ndarray, str]:
        n = min(need, free.size)
        return study.rng.choice(free.size, size=n, replace=False), "random start"

    def assess(self, study: Study, est: pd.DataFrame | None) -> Standing:
        k = cost(study.m_time, study.m_power, study.factor, study.settings.objective)
        inc = [fastest_measured(study.measured, study.m_power, k, cap) for cap in study.caps]
        return Standing(np.asarray(inc, dtype=int), np.full(len(study.caps), np.nan))

    def choose(self, study: Study, standing: Standing, n: int) -> tuple[np.ndarray, list[str]]:
        free = np.flatnonzero(~study.measured)
        take = study.rng.choice(free, size=min(n, free.size), replace=False)
        return np.asarray(take, dtype=int), ["random"] * len(take)
