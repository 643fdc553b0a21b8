"""A prototype of ``hard_cap=True``: :class:`pt.Tuner` exploring only inside a
:class:`~powertrain.decisions.safe_set.SafeSet`, for the regret benchmark to measure.

Why here and not in the package: the decision engine is being rebuilt around one study
(ask/tell, samplers); the safe set goes in there as the study's candidate filter. This
wires it into today's Tuner through three of its private steps, to measure what it does
to the share of exploring time over the cap and to the regret before that rebuild:

* the start: the configurations measured before the first transfer are drawn from
  what is known safe without a model (presets within their budget, what the spec's
  physics says draws no more than they or than a configuration measured under the
  cap), spread over their predicted times. The untransferred reference is not trusted
  there: a first version that was (its upper bound near the known set) ran 5-18 % of
  some BERT-base runs over the cap before the first transfer;
* each next configuration: an unmeasured configuration outside the safe set gets no
  chance of fitting, so no expected improvement;
* the step back: once a probe's last 3 power readings average over the cap, the
  configuration is marked unsafe and left at the next step, and what it showed (those
  readings, its timed minibatches) joins the measurements, so the next transfer learns
  that its neighbours draw more too. (A first version that did not add it hit the cap
  6 times a median BERT-base run.)
"""

from __future__ import annotations

import warnings

import numpy as np

import powertrain as pt
from powertrain.decisions.safe_set import SafeSet, preset_seeds


class SafeTuner(pt.Tuner):
    """``pt.Tuner`` under a hard cap (prototype; see the module docstring)."""

    def __init__(self, *args, confidence: float = 0.95, reach: float = 0.25, **kw):
        super().__init__(*args, **kw)
        self.confidence, self.reach = confidence, reach
        self.hits: list[int] = []

    def _safe_set(self) -> SafeSet:
        """The safe set under the current cap, from every measurement so far."""
        board = self.board
        device = getattr(board, "device", None)
        monotone = device.spec.monotone.get("power_w", {}) if device is not None else {}
        s = SafeSet(
            self.candidates_, float(self._cap), monotone=monotone,
            confidence=self.confidence, reach=self.reach,
        )  # fmt: skip
        if device is not None:
            sizes = sorted(set(self.candidates_["batch_size"].astype(int)))
            s.seed(preset_seeds(device.presets(), float(self._cap), sizes))
        for r in self._rows:
            s.tell(int(r["index"]), float(r["power_w"]))
        s.unsafe[self.hits] = True
        return s

    def _start_config(self, done: set[int]) -> int:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = self.reference.predict(self.candidates_[list(self.inputs)], return_std=True)
        mu_p = est["power_w"].to_numpy(float)
        safe = self._safe_set().known()  # no model yet for this workload: physics only
        pool = np.array([i for i in np.flatnonzero(safe) if int(i) not in done], int)
        if not len(pool):  # nothing known safe: the lowest predicted power, the least risk
            order = np.argsort(mu_p)
            return next(int(i) for i in order if int(i) not in done)
        pool = pool[np.argsort(est[self.time_column].to_numpy(float)[pool])]
        k = len(done)  # spread the start over the pool's predicted times, fast end first
        spot = (k + self._rng.uniform()) / max(self.start, 1)
        return int(pool[min(int(spot * len(pool)), len(pool) - 1)])

    def _estimates(self) -> tuple[np.ndarray, ...]:
        mu_t, sd_t, mu_p, sd_p, measured = super()._estimates()
        safe = self._safe_set().safe(mu_p, sd_p)
        mu_p = np.where(safe | measured, mu_p, np.inf)  # outside the set: no chance to fit
        return mu_t, sd_t, mu_p, sd_p, measured

    def _end_step(self) -> None:
        probe = self._probe
        super()._end_step()
        gone = probe is None or self._probe is not probe or self._current != probe.index
        if gone or probe.warm or not probe.log:
            return
        board = self.board
        assert board is not None
        seen = np.asarray(board.power_samples(probe.t_mode, board.now()), float).reshape(-1, 2)
        if len(seen) >= 3 and seen[-3:, 1].mean() > float(self._cap):
            self.hits.append(probe.index)  # the cap was hit: leave it at the next step
            row = {c: self.candidates_[c].iloc[probe.index] for c in self.candidates_}
            row.update(
                {self.time_column: float(np.median([m[2] for m in probe.log]))},
                power_w=float(seen[-3:, 1].mean()), n_minibatches=len(probe.log),
                stable=False, index=probe.index, cap=self._cap,
            )  # fmt: skip
            self._rows.append(row)
            self._probe = None
            self._next()
