"""Safe exploration: measure only configurations known, with the chosen confidence, to
stay under the cap, and grow that set as measurements arrive.

Why: where the cap is a power supply or a battery limit, exploring may not exceed it
either; a decision that measures "promising" configurations over the cap (22-36 % of
``decide``'s measuring time on held-out twin workloads) cannot be left on. The idea is
SafeOpt's (Sui et al., ICML 2015): start from configurations known to be safe, call a
configuration safe when the model's upper confidence bound on its power is under the
cap *and* it lies near one already known safe (the model is trusted only close to what
was measured), and let every measurement extend the set. Two facts make the known set
larger than SafeOpt's: the device spec's physics (``monotone``: power never falls as a
clock, a core count or a power limit rises), so whatever sits at or below a safe
configuration in every such knob is safe too; and the vendor's presets, whose power
budget is known. If the cap is hit anyway, :meth:`SafeSet.step_back` says so at once and
the configuration (and all the physics puts at or above it) is never proposed again.

The step back judges the *mean* power in the configuration beyond the readings' own
noise, not a few raw readings: a real sensor's instantaneous readings swing ~10 %
within one configuration (our H200 runs: 515-539 W readings tripped a 3-reading rule at
configurations averaging 486-505 W, under a 500 W cap), while the twin's swing 0.6 %.
The noise is the board's, so it is read from the readings (this configuration's and
the windows measured before it, :func:`reading_noise`), not from a device constant.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.stats import norm

from ..errors import DataError

#: with nothing known of the readings' noise, a reading this far over the cap (as a
#: fraction of it) is a hit: a guard for the first configuration, not a fitted figure
CEILING = 0.25


class SafeSet:
    """The configurations that are safe to measure under ``power_cap_w``.

    Parameters
    ----------
    candidates : DataFrame
        The configurations to choose among (one row each; the knob columns and
        ``batch_size``).
    power_cap_w : float
        The cap that must hold while exploring, W.
    monotone : mapping of str to {+1, -1}
        Per knob, the direction power moves as the knob rises (the device spec's
        ``monotone["power_w"]``); knobs not named must match exactly for one
        configuration to vouch for another.
    confidence : float
        Chance with which a configuration the model calls safe stays under the cap.
    reach : float
        How far from a known-safe configuration the model is trusted, as a fraction of
        each knob's range among the candidates (L-infinity).
    """

    def __init__(
        self,
        candidates: pd.DataFrame,
        power_cap_w: float,
        *,
        monotone: Mapping[str, int] | None = None,
        confidence: float = 0.95,
        reach: float = 0.25,
    ):
        if not (isinstance(power_cap_w, (int, float)) and power_cap_w > 0):
            raise DataError(f"SafeSet: power_cap_w must be positive watts, got {power_cap_w!r}")
        if not 0.5 <= confidence < 1:
            raise DataError(f"SafeSet: confidence must be in [0.5, 1), got {confidence!r}")
        if not reach >= 0:
            raise DataError(f"SafeSet: reach must be >= 0, got {reach!r}")
        self.monotone = {k: int(v) for k, v in (monotone or {}).items() if k in candidates}
        if any(v not in (1, -1) for v in self.monotone.values()):
            raise DataError(f"SafeSet: monotone must map knobs to +1 or -1, got {monotone!r}")
        self.cap, self.confidence, self.reach = float(power_cap_w), float(confidence), reach
        self.columns = [
            c for c in candidates.columns if pd.api.types.is_numeric_dtype(candidates[c])
        ]
        self.exact = [c for c in self.columns if c not in self.monotone]
        self._x = candidates[self.columns].to_numpy(float)
        span = self._x.max(axis=0) - self._x.min(axis=0)
        self._scaled = (self._x - self._x.min(axis=0)) / np.where(span > 0, span, 1.0)
        n = len(candidates)
        #: measured at or under the cap
        self.measured_safe = np.zeros(n, bool)
        #: measured over the cap, or the cap was hit there: never proposed again
        self.unsafe = np.zeros(n, bool)
        self._vouched = np.zeros(n, bool)  # at or below something known safe
        self._power = np.full(n, np.nan)  # measured power, W
        self.hits: list[int] = []

    # ----------------------------------------------------------------- knowing --
    def seed(self, configs: pd.DataFrame | Sequence[Mapping[str, float]]) -> SafeSet:
        """Configurations known safe before anything is measured (e.g. the presets whose
        power budget is within the cap: :func:`preset_seeds`); they need not be among
        the candidates: whatever they vouch for is."""
        rows = pd.DataFrame(configs)
        missing = [c for c in self.columns if c not in rows.columns]
        if missing:
            raise DataError(f"SafeSet.seed: missing column(s) {', '.join(missing)}")
        for _, row in rows.iterrows():
            self._vouched |= self._below(row[self.columns].to_numpy(float))
        return self

    def tell(self, index: int, power_w: float) -> None:
        """A measured configuration: under the cap it is safe (with all it vouches for),
        over it, unsafe."""
        self._power[index] = power_w
        if power_w <= self.cap and index not in self.hits:
            self.measured_safe[index] = True
            self._vouched |= self._below(self._x[index])
        else:
            self.mark_unsafe(index)

    def mark_unsafe(self, index: int) -> None:
        """``index`` draws more than the cap: so does whatever the physics puts at or
        above it in every knob (never proposed again)."""
        self.unsafe |= self._below(self._x[index], side=-1)
        self.unsafe[index] = True

    def step_back(
        self, index: int, readings: Sequence[float], noise: tuple[float, int] = (0.0, 0)
    ) -> bool:
        """Whether the board must leave configuration ``index`` at once: the mean of its
        ``readings`` (W, since it was set) is over the cap by more than a one-sided
        z (of :attr:`confidence`) times its standard error. The readings' spread is pooled
        with ``noise`` (:func:`reading_noise` of the windows measured before), so a few
        readings that happen to agree are not taken as exact. With no spread known yet
        (fewer than 2 readings, nothing measured before), only a reading more than
        :data:`CEILING` over the cap counts. Then ``index`` is marked unsafe and the hit
        recorded."""
        w = np.asarray(readings, float)
        if not len(w) or not over_beyond_noise(w, self.cap, norm.ppf(self.confidence), noise):
            return False
        self.mark_unsafe(index)
        self.hits.append(int(index))
        return True

    def grow(self, mu_p: np.ndarray, measured: np.ndarray) -> int | None:
        """One configuration to grow the safe set by when nothing in reach is known safe:
        of the unmeasured ones the model puts under the cap (mean ``mu_p``) and the
        physics does not put at or above a hit, the nearest (scaled knobs, L-infinity)
        to one measured under the cap, the lowest predicted power among equals; None if
        there is none. Why: without it a safe study stops after its start ("exhausted")
        wherever the model's spread is wide (a new workload), far from the cap."""
        base = self._scaled[self.measured_safe & ~self.unsafe]
        mu = np.asarray(mu_p, float)
        pool = np.flatnonzero(~np.asarray(measured, bool) & ~self.unsafe & (mu <= self.cap))
        if not len(base) or not len(pool):
            return None
        d = np.array([np.abs(base - self._scaled[j]).max(axis=1).min() for j in pool])
        return int(pool[np.lexsort((mu[pool], np.round(d, 9)))[0]])

    def known(self) -> np.ndarray:
        """Safe without the model: measured under the cap, or vouched for by physics."""
        return (self.measured_safe | self._vouched) & ~self.unsafe

    def safe(self, mu_p: np.ndarray, sd_p: np.ndarray) -> np.ndarray:
        """Safe to measure now: known safe, or predicted under the cap with the chosen
        confidence (upper bound ``mu + z sd``) and within ``reach`` of a known-safe one."""
        known = self.known()
        z = norm.ppf(self.confidence)
        upper = np.asarray(mu_p, float) + z * np.asarray(sd_p, float)
        near = self._near(known)
        return known | ((upper <= self.cap) & near & ~self.unsafe)

    def fallback(self, cost: np.ndarray | None = None) -> int | None:
        """Where to step back to: of the configurations measured under the cap, the
        cheapest by ``cost`` (else the one drawing most: the fastest, as a rule); None
        if none."""
        idx = np.flatnonzero(self.measured_safe & ~self.unsafe)
        if not len(idx):
            return None
        if cost is None:
            return int(idx[np.argmax(self._power[idx])])
        return int(idx[np.argmin(np.asarray(cost, float)[idx])])

    # ---------------------------------------------------------------- geometry --
    def _below(self, point: np.ndarray, side: int = 1) -> np.ndarray:
        """Candidates whose power cannot exceed ``point``'s by the spec's physics (with
        ``side=-1``: cannot be below it)."""
        ok = np.ones(len(self._x), bool)
        for j, c in enumerate(self.columns):
            if c in self.monotone:
                ok &= side * self.monotone[c] * (self._x[:, j] - point[j]) <= 1e-9
            else:
                ok &= np.isclose(self._x[:, j], point[j])
        return ok

    def _near(self, known: np.ndarray) -> np.ndarray:
        """Within ``reach`` (L-infinity, scaled knobs) of a known-safe configuration."""
        if not known.any():
            return np.zeros(len(known), bool)
        near = np.zeros(len(known), bool)
        for p in self._scaled[known]:
            near |= np.abs(self._scaled - p).max(axis=1) <= self.reach + 1e-12
        return near


def over_beyond_noise(
    readings: np.ndarray, cap: float, z: float, noise: tuple[float, int] = (0.0, 0)
) -> bool:
    """Whether the mean of ``readings`` is over ``cap`` by more than ``z`` standard
    errors, their relative spread pooled with ``noise`` (sum of squared relative
    deviations, degrees of freedom); with no spread known, whether one reading is more
    than :data:`CEILING` over the cap."""
    mean = float(readings.mean())
    ss, dof = float(noise[0]), int(noise[1])
    ss += float(((readings - mean) ** 2).sum()) / mean**2
    dof += len(readings) - 1
    if dof < 2:
        return bool((readings > cap * (1 + CEILING)).any())
    se = math.sqrt(ss / dof) * mean / math.sqrt(len(readings))
    return mean - cap > z * se


def reading_noise(rows: pd.DataFrame | None) -> tuple[float, int]:
    """The power readings' spread within a configuration on this board, from measured
    ``rows`` (their ``power_w_std`` over ``n_power_samples`` readings): the sum of squared
    relative deviations and its degrees of freedom, (0, 0) if none says."""
    need = {"power_w", "power_w_std", "n_power_samples"}
    if rows is None or not len(rows) or not need <= set(rows.columns):
        return 0.0, 0
    rel = pd.to_numeric(rows["power_w_std"], errors="coerce") / rows["power_w"].astype(float)
    dof = pd.to_numeric(rows["n_power_samples"], errors="coerce") - 1
    ok = (rel.notna() & dof.notna() & (dof >= 1)).to_numpy()
    return float((rel[ok] ** 2 * dof[ok]).sum()), int(dof[ok].sum())


def preset_seeds(
    presets: pd.DataFrame, power_cap_w: float, batch_sizes: Sequence[int]
) -> pd.DataFrame:
    """The vendor's presets whose power budget (``budget_w``) is within the cap, at each
    batch size: configurations known safe before anything is measured."""
    if "budget_w" not in presets:
        return presets.iloc[:0]
    budget = presets["budget_w"].astype(float)
    fit = presets[budget.notna() & (budget <= power_cap_w)]
    sizes = pd.DataFrame({"batch_size": list(batch_sizes)})
    return fit.drop(columns=["batch_size"], errors="ignore").merge(sizes, how="cross")


def over_cap_share(rows: pd.DataFrame, power_cap_w: float) -> tuple[float, float]:
    """The measured share of exploring time and of energy spent over the cap, from
    measured rows (their timed minibatches: ``time_ms`` x ``n_minibatches``; without
    ``time_ms``, their board seconds ``profile_s``) and ``power_w``; nan without rows."""
    if not len(rows):
        return math.nan, math.nan
    if "time_ms" in rows:
        n = np.ones(len(rows))
        if "n_minibatches" in rows:
            n = pd.to_numeric(rows["n_minibatches"], errors="coerce").fillna(1).to_numpy(float)
        t = rows["time_ms"].to_numpy(float) * n
    else:
        t = rows["profile_s"].to_numpy(float)
    e = t * rows["power_w"].to_numpy(float)
    over = rows["power_w"].to_numpy(float) > power_cap_w
    return float(t[over].sum() / t.sum()), float(e[over].sum() / e.sum())


def over_cap_columns(rows: pd.DataFrame | None, power_cap_w: float) -> dict[str, float]:
    """:func:`over_cap_share` as a decision's two columns (nan: nothing measured)."""
    t, e = over_cap_share(rows, power_cap_w) if rows is not None else (math.nan, math.nan)
    return {"over_cap_time_share": t, "over_cap_energy_share": e}
