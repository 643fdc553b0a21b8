"""The measurement window of one configuration, fed one minibatch at a time.

Why one window: the profiler's sweep runs minibatches back to back, the Tuner runs the
job's own training steps between its decisions; both must measure a configuration the
same way (warm-up discarded, power settled, a clean window of ``n_minibatches`` with
enough power readings, or -- the settled protocol -- only as long as the mean time and
power take to be known to ``settle_tol``), or a decision made by one and checked by the
other would compare two protocols. :func:`~powertrain.profiling.sweep.profile_one` and
:class:`~powertrain.decisions.tuner.Tuner` both feed a :class:`Window`.
"""

from __future__ import annotations

import numpy as np

from ..backends import Backend
from ..errors import ProfilingError
from .aggregate import stable_since, summarise_window

#: the fewest clean minibatches a settled window holds (``settle_tol``)
MIN_SETTLED = 8


def clean_window(backend: Backend, log: list, first: int, n: int, min_samples: int) -> int | None:
    """Index into ``log`` of the start of the shortest clean window that ends at the last
    minibatch, holds at least ``n`` minibatches and ``min_samples`` power readings; None
    if the clean minibatches so far hold too few readings.

    Why: at fast modes 40 minibatches finish between two 1 Hz readings; extending the
    window (more minibatches) is the fix, averaging an empty window as 0 W is not.
    """
    last = len(log) - n  # latest start index that still leaves n minibatches
    if last < first:
        return None
    t = backend.power_samples(log[first][0], log[-1][1])
    t = np.asarray(t, dtype=float).reshape(-1, 2)[:, 0]
    if len(t) < min_samples:
        return None
    t.sort()
    starts = np.array([log[i][0] for i in range(first, last + 1)])
    counts = len(t) - np.searchsorted(t, starts, side="left")
    ok = np.flatnonzero(counts >= min_samples)
    return first + int(ok[-1]) if len(ok) else None


def settled_window(
    backend: Backend, log: list, first: int, min_samples: int, tol: float
) -> int | None:
    """``first`` when the clean minibatches since it pin the mean time and power to a
    relative standard error of ``tol``, else None (keep running)."""
    k = len(log) - first
    if k < MIN_SETTLED:
        return None
    ms = np.array([m for _, _, m in log[first:]], dtype=float)
    pw = np.asarray(backend.power_samples(log[first][0], log[-1][1]), dtype=float)
    pw = pw.reshape(-1, 2)[:, 1]
    if len(pw) < max(min_samples, 2):
        return None
    se_t = ms.std(ddof=1) / np.sqrt(k) / ms.mean()
    se_p = pw.std(ddof=1) / np.sqrt(len(pw)) / pw.mean()
    return first if se_t <= tol and se_p <= tol else None


class Window:
    """One configuration's measurement since it was set (at ``t_mode`` on the board's
    clock): :meth:`add` each minibatch as ``(start_s, end_s, ms)``, the first one being
    the discarded warm-up, until it returns True; :meth:`row` is then the summary.

    The rules are :func:`~powertrain.profiling.sweep.profile_one`'s (see there): power
    settled (``window`` readings within ``rel_tol``, else forced after ``max_settle_s``),
    then ``n_minibatches`` clean ones holding ``min_power_samples`` readings, or fewer
    once the means are known to ``settle_tol`` (> 0). ``shown`` names the configuration
    in errors."""

    def __init__(
        self,
        backend: Backend,
        t_mode: float,
        shown: str = "",
        n_minibatches: int = 40,
        min_power_samples: int = 2,
        max_settle_s: float = 30.0,
        window: int = 3,
        rel_tol: float = 0.03,
        settle_tol: float = 0.0,
    ):
        if int(n_minibatches) < 1:
            raise ValueError(f"n_minibatches must be >= 1, got {n_minibatches!r}")
        self.backend, self.t_mode, self.shown = backend, float(t_mode), shown
        self.n, self.min_samples = int(n_minibatches), int(min_power_samples)
        self.max_settle_s, self.window, self.rel_tol = float(max_settle_s), window, rel_tol
        self.settle_tol = float(settle_tol)
        period = float(backend.sample_period_s or 1.0)
        self.period = period
        # a working sensor gives readings by then (the floor absorbs scheduling delays)
        self.patience = max((self.min_samples + 3) * period, 2.0)
        self.log: list[tuple[float, float, float]] = []  # (start_s, end_s, ms)
        self.settled_at: float | None = None
        self.first: int | None = None  # index of the first clean minibatch
        self.stable = True
        self.chosen: int | None = None
        self._n_seen = -1
        # a guard only: settling is forced after max_settle_s and the window after patience
        self._max_total = 100 * self.n + 100_000

    @property
    def done(self) -> bool:
        return self.chosen is not None

    def add(self, start_s: float, end_s: float, ms: float) -> bool:
        """One more minibatch (the first: the warm-up); True once the window is chosen."""
        self.log.append((float(start_s), float(end_s), float(ms)))
        if len(self.log) == 1 or self.chosen is not None:
            return self.chosen is not None
        backend, log, now = self.backend, self.log, float(end_s)
        if self.settled_at is None:
            seen = np.asarray(backend.power_samples(self.t_mode, now), dtype=float).reshape(-1, 2)
            if len(seen) == 0 and now - self.t_mode > self.patience:
                raise ProfilingError(
                    f"the power sensor gave no reading for {now - self.t_mode:.1f} s (sample "
                    f"period {self.period:g} s) in configuration {self.shown}; check that "
                    "the sensor works (jtop service running, INA3221 files readable)"
                )
            if len(seen) != self._n_seen:
                self._n_seen = len(seen)
                self.settled_at = stable_since(seen, self.window, self.rel_tol)
            if self.settled_at is None and now - self.t_mode > self.max_settle_s:
                self.settled_at, self.stable = now, False
        if self.settled_at is not None and self.first is None:
            at = self.settled_at
            self.first = next((i for i in range(1, len(log)) if log[i][0] >= at), None)
        first = self.first
        if first is not None and self.settle_tol > 0:
            self.chosen = settled_window(backend, log, first, self.min_samples, self.settle_tol)
        if first is not None and self.chosen is None:
            self.chosen = clean_window(backend, log, first, self.n, self.min_samples)
            if (
                self.chosen is None
                and len(log) - first >= self.n
                and log[-1][1] - log[first][0] >= self.patience
            ):
                self.chosen, self.stable = first, False  # too few readings, even over long
        if self.chosen is None and len(log) > self._max_total:
            self.chosen = first if first is not None else max(1, len(log) - self.n)
            self.stable = False
        return self.chosen is not None

    def row(self) -> dict:
        """The summary of the clean window (:func:`~powertrain.profiling.aggregate.
        summarise_window`) with ``stable`` and ``profile_s`` (board seconds since the
        configuration was set)."""
        assert self.chosen is not None, "the window is not chosen yet"
        clean = self.log[self.chosen :]
        start, end = clean[0][0], clean[-1][1]
        samples = np.asarray(self.backend.power_samples(start, end), dtype=float).reshape(-1, 2)
        arr = np.array(clean)
        row = summarise_window(arr[:, 0], arr[:, 1], arr[:, 2], samples)
        row["stable"] = bool(self.stable)
        row["profile_s"] = end - self.t_mode
        return row
