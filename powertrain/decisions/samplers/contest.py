"""The per-cap contest (decide's ``method="contest"``, the loop before the cap table).

Each unmeasured configuration's time (log-normal) and power (normal) are drawn
independently from its prediction and 1-sigma spread, measured ones count as measured,
and under each cap a configuration's expected improvement on the measured pick (counting
an over-cap draw as none) says what to measure; it is judged by the "stable" rule. The
independent draws overstate the chance that *some* unmeasured configuration wins, so it
errs on measuring more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..candidates import fastest_measured
from ..terminator import Standing
from .base import Sampler, describe_caps

if TYPE_CHECKING:  # pragma: no cover
    from ..study import Study

_Z = 3.0  # sigmas beyond which a configuration is not considered a contender


class ContestSampler(Sampler):
    """Independent draws per configuration, per-cap expected improvement."""

    name = "contest"
    stop_rule = "stable"

    def assess(self, study: Study, est: pd.DataFrame | None) -> Standing:
        assert est is not None
        s, tc, m = study.settings, study.time_col, study.measured
        mu_t = np.where(m, study.m_time, est[tc].to_numpy(float))
        mu_p = np.where(m, study.m_power, est["power_w"].to_numpy(float))
        sd_p = est["power_w_std"].to_numpy(float)
        c = contest(mu_t, est[f"{tc}_std"].to_numpy(float), mu_p, sd_p, m, study.caps,
                    study.factor, s.objective, s.draws, study.rng)  # fmt: skip
        return Standing(c.incumbent, c.beaten, improvement=c.improvement.max(axis=1),
                        detail=(c, est))  # fmt: skip

    def choose(self, study: Study, standing: Standing, n: int) -> tuple[np.ndarray, list[str]]:
        c, est = standing.detail
        gain = c.improvement if study.settings.acquisition == "improvement" else c.probs
        score = np.where(study.measured, 0.0, gain.sum(axis=0))
        take = np.argsort(-score, kind="stable")[:n]
        take = take[score[take] > 0]
        return take, [_why(c.probs[:, j], study.caps, est.iloc[j], study.time_col) for j in take]


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
        j = fastest_measured(measured, mu_p, cost, cap)
        best = math.inf
        if j >= 0:
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


def _why(p: np.ndarray, caps: np.ndarray, row: pd.Series, time_col: str) -> str:
    """'candidate under 30 W, 40 % chance of being fastest' for a measured configuration."""
    hit = np.flatnonzero(p > 0)
    where = caps[hit] if hit.size else caps
    best = float(p.max())
    return (
        f"candidate under {describe_caps(where)}, {100 * best:.0f} % chance of being fastest "
        f"(predicted {row[time_col]:.4g} {time_col.split('_')[-1]}, {row['power_w']:.1f} W)"
    )
