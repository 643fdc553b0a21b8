"""``hard_cap=True``: a study explores only inside a :class:`~powertrain.decisions.
safe_set.SafeSet` of its cap, so exploring stays under the cap too, not only the pick.

Why in the engine: ``decide`` and the Tuner share one study; the safe set is the
study's filter of what it may ask for. Four places:

* the start (before any transfer) is drawn from what is known safe without a model
  (presets within their budget, what the spec's physics says draws no more than they
  or than a configuration measured under the cap), spread over the reference's
  predicted times. The untransferred reference is not trusted for power there: a first
  prototype that was ran 5-18 % of some BERT-base runs over the cap before the first
  transfer. Nothing known safe: the lowest predicted power;
* each round is chosen as without a hard cap (the whole table is judged, so the study
  does not stop because the configurations worth measuring are not yet known safe);
* what it chose outside :meth:`SafeSet.safe` (the model's 99 % upper bound over the
  cap, or too far from the known set) is replaced by the safe unmeasured configuration
  nearest it: an expander, whose measurement grows the safe set that way (SafeOpt's
  expanders, Sui et al. 2015). Masking the unsafe ones instead (the first engine
  version) let the study settle inside the first safe set: 13 measured of a budget of
  40 and a pick 9 % slower than the optimum (docs/method-notes.md);
* nothing in reach known safe (every choice's bound over the cap, or too far): the
  set grows by one configuration, the unmeasured one nearest those measured under the
  cap that the model's mean puts under it (:meth:`SafeSet.grow`), instead of stopping
  "exhausted" after the start (every H200 run did, docs/method-notes.md);
* the step back (the Tuner, each step from the first timed minibatch on): once the mean
  of a probe's readings is over the cap beyond their noise (:meth:`SafeSet.step_back`;
  the noise pooled with the windows measured before, :func:`reading_noise`), the
  configuration, and what the physics puts above it, is marked unsafe and left at the
  next step, and what it showed joins the measurements, so the next transfer learns its
  neighbours draw more too. ``decide`` measures a configuration whole (the profiler),
  so there an over-cap measurement marks it unsafe after the fact.

Why 99 % and the model's own spread: at 95 % (the first version), and with the spread
scaled by the study's own errors or shrunk near measured configurations, the twin's
tuning workload still explored over the cap in some runs (up to 4.6-10.7 % of the
exploring time: the transferred power model is off by 3-4 W, 3-4 of its shrunk sds, at
the top clocks). Off by default: its regret is far above the plain Tuner's
(benchmarks/results/tuning_regret_hardcap.txt).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd

from ..errors import DataError
from .candidates import power_spread
from .safe_set import SafeSet, preset_seeds, reading_noise

#: how sure the model's upper bound must be, and how far from the known set it is trusted
CONFIDENCE, REACH = 0.99, 0.25


class HardCap:
    """The safe set of ``study``'s one cap (a Study; not imported: it imports this),
    brought up to date with its measurements on each use; :attr:`hits`: where the cap
    was hit (never asked for again)."""

    def __init__(self, study: Any, confidence: float = CONFIDENCE, reach: float = REACH):
        if len(study.caps) != 1:
            raise DataError(
                f"hard_cap=True takes one power cap, got {len(study.caps)}: the cap "
                "exploring must stay under"
            )
        self.study, self.cap = study, float(study.caps[0])
        spec = getattr(study.device, "spec", None)
        monotone = spec.monotone.get("power_w", {}) if spec is not None else {}
        self.set = SafeSet(
            study.cands, self.cap, monotone=monotone, confidence=confidence, reach=reach
        )
        self._noise: tuple[int, tuple[float, int]] = (-1, (0.0, 0))  # (log length, noise)
        presets = _presets(study.device)
        if len(presets) and "batch_size" in study.cands:
            sizes = sorted(set(study.cands["batch_size"].astype(int)))
            seeds = preset_seeds(presets, self.cap, sizes)
            if len(seeds) and all(c in seeds for c in self.set.columns):
                self.set.seed(seeds)

    @property
    def hits(self) -> list[int]:
        """Configurations where the cap was hit (never asked for again)."""
        return self.set.hits

    def safe_set(self) -> SafeSet:
        """The safe set now: presets within the cap, everything measured, the hits."""
        st = self.study
        for j in np.flatnonzero(st.measured):
            self.set.tell(int(j), float(st.m_power[j]))
        self.set.unsafe[self.hits] = True  # a hit measured under the cap stays unsafe
        return self.set

    def start_for(self, study: Any, free: np.ndarray, need: int) -> tuple[np.ndarray, str]:
        """Positions into ``free`` of ``need`` configurations to start with: known safe,
        spread over the predicted times; short of those, the lowest predicted power."""
        st = self.study
        if not need or not len(free):
            return np.zeros(0, dtype=int), "start inside the safe set"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # extrapolation: it only ranks the start
            est = st.reference.predict(st.cands[list(st.inputs)].iloc[free])
        known = np.flatnonzero(self.safe_set().known()[free])
        t = est[st.time_col].to_numpy(float)
        take = known[power_spread(t[known], min(need, len(known)), st.rng)]
        rest = [int(i) for i in np.argsort(est["power_w"].to_numpy(float)) if i not in take]
        take = np.concatenate([take, rest[: need - len(take)]]).astype(int)
        return take, "start inside the safe set (known safe, else the lowest predicted power)"

    def allowed(self, est: pd.DataFrame) -> np.ndarray:
        """Which candidates may be asked for: measured, or safe by the model's ``est``."""
        mu_p, sd_p = est["power_w"].to_numpy(float), est["power_w_std"].to_numpy(float)
        return self.safe_set().safe(mu_p, sd_p) | self.study.measured

    def keep_safe(self, take: np.ndarray, why: list[str]) -> tuple[np.ndarray, list[str]]:
        """The sampler's choices, each one outside the safe set replaced by the safe
        unmeasured configuration nearest it (standardised knobs): an expander, whose
        measurement grows the safe set towards it."""
        st = self.study
        ok = self.allowed(st.predict()[1])
        out: list[int] = []
        said: list[str] = []
        for j, w in zip(take, why):
            if ok[j]:
                out.append(int(j))
                said.append(w)
                continue
            pool = np.flatnonzero(ok & ~st.measured)
            pool = pool[~np.isin(pool, out + list(take))]
            if not len(pool):
                continue
            d = ((st.knobs[pool] - st.knobs[j]) ** 2).sum(axis=1)
            out.append(int(pool[np.argmin(d)]))
            said.append(f"the safe one nearest a configuration not yet known safe ({w})")
        return np.asarray(out, dtype=int), said

    def grow(self, est: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
        """With nothing in reach known safe: one configuration to grow the safe set by
        (:meth:`SafeSet.grow` by the model's ``est``), or none."""
        st = self.study
        j = self.safe_set().grow(est["power_w"].to_numpy(float), st.measured)
        if j is None:
            return np.zeros(0, dtype=int), []
        return np.array([j]), ["growing the safe set: the nearest to one measured under the cap"]

    def step_back(self, index: int, readings: np.ndarray) -> bool:
        """Whether the board must leave ``index`` now (the mean of its ``readings`` over
        the cap beyond their noise, pooled with this board's earlier windows); then it
        is a hit."""
        log = self.study.log
        if self._noise[0] != len(log):  # once per new measurement, not every step
            self._noise = (len(log), reading_noise(self.study.history()))
        return self.set.step_back(int(index), [float(w) for w in readings], self._noise[1])


def _presets(device: object) -> pd.DataFrame:
    """The device's presets (none where it has no table of them)."""
    try:
        presets = device.presets()  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001  (no device, or a device without presets)
        return pd.DataFrame()
    return presets if isinstance(presets, pd.DataFrame) else pd.DataFrame()
