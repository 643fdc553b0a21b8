"""The expected loss of stopping now, per cap, and who would remove it.

Why: a cap table is worth measuring where stopping now would cost the most. Under each
cap the loss of a draw is how much slower, relatively, the measured pick is than the
fastest configuration that fits in that draw (0 when the pick stays fastest); a cap
with no measured pick loses ``no_pick`` (100 % by default) in every draw where
something fits, so the low-power end, where nothing is measured yet, is reached
early. The loss of each draw is credited to the configuration that wins it: measuring
that one is what would remove it, counted at most ``CLIP`` (3 %) per draw: a table is
judged by how many of its caps are near their optimum, so a rival that could turn one
cap's 10 % miss into none should not outweigh three that could each bring a cap from
3 % to 0 (one cap alone is not clipped: its pick's whole loss is the point). Each
rival's own expected improvement (what it gains over the pick in every draw where it
beats it, whoever else wins that draw; unclipped, so large misses still get their turn)
is kept beside the credit: the loop chooses by both (decide's ``_batch``). Summed over
the caps with the user's weights, the (unclipped) loss is the stop rule's quantity.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .candidates import fastest_measured
from .posterior import Field, field_draws

#: the loss of a cap without a measured pick, per draw in which something fits
NO_PICK = 1.0
#: with more than one cap, the most a draw's loss under a cap with a pick counts for in
#: the credit (chosen on the tuning sets, docs/decisions.md "Credit clipped at 3 %")
CLIP = 0.03


@dataclass
class TableLoss:
    """``per_cap``: expected relative loss of stopping now under each cap.
    ``credit``: caps x rivals, the share of it each rival would remove (each draw counted
    up to the clip, :data:`CLIP`).
    ``beaten``: per cap, the chance that some rival beats the measured pick (or, with
    none, that some rival fits). ``wins``: caps x rivals, each rival's chance of doing so.
    ``improvement``: caps x rivals, each rival's own expected gain over the pick, counted
    in every draw where it beats it (the expected improvement of Bayesian optimisation):
    unlike the credit it still counts a rival that a near neighbour edges out."""

    per_cap: np.ndarray
    credit: np.ndarray
    beaten: np.ndarray
    wins: np.ndarray
    improvement: np.ndarray

    def total(self, weights: np.ndarray) -> float:
        """The weighted mean loss over the caps: the stop rule's quantity."""
        return float(np.sum(weights * self.per_cap) / np.sum(weights))


def table_loss(
    cost: np.ndarray,
    power: np.ndarray,
    best: np.ndarray,
    caps: np.ndarray,
    no_pick: float = NO_PICK,
    clip: float = CLIP,
) -> TableLoss:
    """``cost``, ``power``: rivals x draws (joint draws). ``best``: per cap, the measured
    pick's cost (inf: no pick). ``clip``: with more than one cap, the most a draw's
    relative loss under a cap with a pick counts for in ``credit`` (``per_cap`` and
    ``improvement`` are unclipped)."""
    n, draws = cost.shape
    per_cap = np.zeros(len(caps))
    credit = np.zeros((len(caps), n))
    beaten = np.zeros(len(caps))
    wins = np.zeros((len(caps), n))
    improvement = np.zeros((len(caps), n))
    if n == 0:
        return TableLoss(per_cap, credit, beaten, wins, improvement)
    cols = np.arange(draws)
    limit = clip if len(caps) > 1 else np.inf
    for c, cap in enumerate(caps):
        k = np.where(power <= cap, cost, np.inf)
        win = np.argmin(k, axis=0)
        low = k[win, cols]
        fits = np.isfinite(k)
        if np.isfinite(best[c]):
            each = np.where(fits, np.clip(best[c] - k, 0.0, None) / best[c], 0.0)
            won = low < best[c]
        else:
            each = np.where(fits, no_pick, 0.0)
            won = np.isfinite(low)
        gain = each[win, cols]
        beaten[c] = float(np.mean(won))
        per_cap[c] = float(gain.mean())
        credited = np.minimum(gain, limit) if np.isfinite(best[c]) else gain
        credit[c] = np.bincount(win, weights=credited, minlength=n) / draws
        wins[c] = np.bincount(win, weights=won.astype(float), minlength=n) / draws
        improvement[c] = each.mean(axis=1)
    return TableLoss(per_cap, credit, beaten, wins, improvement)


@dataclass
class Assessment:
    """Where a cap table stands: per cap the measured pick (``incumbent``, -1: none) and
    the loss of stopping now; the rivals (candidate positions) the loss is credited to;
    the current values (measured where measured, else predicted) and power spread."""

    incumbent: np.ndarray
    loss: TableLoss
    rivals: np.ndarray
    mu_t: np.ndarray
    mu_p: np.ndarray
    sd_p: np.ndarray
    cost: np.ndarray
    #: 4 x candidates: each rival's posterior mean and sd of log time, mean and sd of
    #: power (nan for the others): what it is expected to measure
    forecast: np.ndarray


#: sigmas beyond which a configuration is no rival under a cap
Z = 3.0
#: the most rivals drawn jointly (the most promising by optimistic cost are kept)
MAX_RIVALS = 6000


def assess(
    pred: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    measured: np.ndarray,
    values: tuple[np.ndarray, np.ndarray],
    x: np.ndarray,
    caps: np.ndarray,
    factor: np.ndarray,
    energy: bool,
    draws: int,
    rng: np.random.Generator,
    field: Field,
) -> Assessment:
    """The cap table's expected loss from joint draws of the rivals' time and power.

    ``pred``: the model's time, time spread, power, power spread per candidate.
    ``values``: measured time and power (nan where unmeasured). ``x``: standardised
    knobs (:func:`~powertrain.decisions.posterior.knob_space`)."""
    pt_, st, pp, sp = pred
    mu_t = np.where(measured, values[0], pt_)
    mu_p = np.where(measured, values[1], pp)
    cost = mu_t * factor * (mu_p if energy else 1.0)
    incumbent, best = _incumbents(measured, mu_p, cost, caps)
    rel = np.clip(st / pt_, 1e-6, None)
    sdp = np.clip(sp, 1e-9, None)
    rivals = _rivals(measured, pt_ * np.exp(-Z * rel) * factor, pp - Z * sdp, best, caps)
    known = np.flatnonzero(measured)
    rows = np.concatenate([rivals, known])
    at = np.arange(len(rivals), len(rows))
    z_t = np.clip(np.log(values[0][known] / pt_[known]) / rel[known], -6, 6)
    z_p = np.clip((values[1][known] - pp[known]) / sdp[known], -6, 6)
    g_t = field_draws(x[rows], at, z_t, draws, rng, field)[: len(rivals)]
    g_p = field_draws(x[rows], at, z_p, draws, rng, field)[: len(rivals)]
    t = pt_[rivals, None] * np.exp(rel[rivals, None] * g_t)
    p = pp[rivals, None] + sdp[rivals, None] * g_p
    k = t * factor[rivals, None] * (p if energy else 1.0)
    loss = table_loss(k, p, best, caps)
    forecast = np.full((4, len(pt_)), np.nan)
    log_t = np.log(t)
    forecast[:, rivals] = [log_t.mean(1), log_t.std(1), p.mean(1), p.std(1)]
    return Assessment(
        incumbent, loss, rivals, mu_t, mu_p, np.where(measured, 0.0, sp), cost, forecast
    )


def _incumbents(
    measured: np.ndarray, mu_p: np.ndarray, cost: np.ndarray, caps: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per cap, the fastest measured configuration whose measured power is at most the cap
    (-1 and inf: none)."""
    incumbent = np.array([fastest_measured(measured, mu_p, cost, cap) for cap in caps], dtype=int)
    best = np.full(len(caps), np.inf)
    hit = incumbent >= 0
    best[hit] = cost[incumbent[hit]]
    return incumbent, best


def _rivals(
    measured: np.ndarray, low_cost: np.ndarray, low_power: np.ndarray, best: np.ndarray,
    caps: np.ndarray,
) -> np.ndarray:  # fmt: skip
    """Unmeasured candidates that could fit some cap and beat its pick there (within Z
    sigmas): the lowest cap a candidate could fit has the slowest pick it must beat."""
    first = np.searchsorted(caps, low_power, side="left")
    reach = first < len(caps)
    bar = np.where(reach, best[np.minimum(first, len(caps) - 1)], -np.inf)
    cand = np.flatnonzero(~measured & reach & (low_cost < bar))
    if cand.size > MAX_RIVALS:
        ratio = low_cost[cand] / np.where(np.isfinite(bar[cand]), bar[cand], 1e300)
        cand = np.sort(cand[np.argsort(ratio, kind="stable")[:MAX_RIVALS]])
    return cand
