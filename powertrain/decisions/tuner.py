"""Tune inside the training job: every measurement is a real training minibatch.

Why: a profiling sweep run before training spends board time on minibatches that train
nothing, and Zeus-style optimisers that live in the loop measure every power limit. The
:class:`Tuner` runs the board-in-the-loop decision (measure, transfer, measure where the
decision is) *between* the job's own steps: it sets a configuration, times the next real
minibatches (the first after a change trains but is left out of the timing, as in the
profiler), reads the board's power over them, and settles on the fastest configuration
measured under the cap. A cap that changes (a :class:`~powertrain.CapSchedule` or any
``(elapsed_s, minibatch) -> W`` callable) is decided again from what was measured.

The loop is an incremental ("ask / tell") form of :func:`powertrain.decide`: one
configuration measured at a time, a transfer after each, and the next configuration the
one with the largest constrained expected improvement on the measured pick (closed form,
log-normal time, normal power). It stops when no unmeasured configuration is expected to
improve on the pick by more than ``tolerance`` or the budget is spent.

Timing: on a hardware board (a :class:`~powertrain.backends.StepBackend`: Jetson, NVML)
the step's wall time is measured; on a simulated board (the twin, a replayed table) the
real step still trains, but the board's minibatch stands for its time and power, so the
knobs have their simulated effect.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import math
import sys
import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd

from ..backends import Backend, StepBackend, as_backend
from ..backends.stop_signals import StopSignals, blocked
from ..errors import DataError, PowerTrainError
from ..profiling.aggregate import stable_since

if TYPE_CHECKING:  # pragma: no cover
    from ..predictor import Predictor

#: a transfer needs this many measured configurations (as Predictor.transfer)
MIN_TRANSFER = 5
#: expected relative improvement below which the pick stands (decide's tuned default)
TOLERANCE = 0.01
#: power-limit step of the default NVML candidates, W (Zeus's default step)
POWER_LIMIT_STEP_W = 25.0
_LOG = logging.getLogger(__name__)


@dataclass
class TunerSummary:
    """What the tuner did: the pick and what it cost to find."""

    #: False: the board could not be controlled and the tuner did nothing
    active: bool
    power_cap_w: float | None
    config: dict | None
    time_ms: float | None
    power_w: float | None
    #: configurations measured (all caps)
    n_measured: int
    #: training minibatches run before the first pick was applied (all trained)
    minibatches_to_pick: int
    #: board minutes of training run while exploring (all caps)
    explore_min: float
    #: seconds the decision itself took between steps (transfers, scoring)
    decide_s: float
    stop_reason: str
    #: one row per decision: cap, pick, measured configurations, reason
    decisions: list[dict] = field(default_factory=list)
    simulated: bool = False
    reason: str = ""

    def __str__(self) -> str:
        if not self.active:
            return f"powertrain tuner inactive: {self.reason}"
        if self.config is None:
            return (
                f"powertrain tuner: no pick ({self.stop_reason}); {self.n_measured} "
                f"configurations measured in {self.minibatches_to_pick} training minibatches"
            )
        shown = " ".join(f"{k}={v:g}" for k, v in self.config.items())
        return (
            f"powertrain tuner: pick {shown} under {self.power_cap_w:g} W: "
            f"{self.time_ms:.4g} ms/minibatch, {self.power_w:.1f} W; "
            f"{self.n_measured} configurations measured in {self.minibatches_to_pick} "
            f"training minibatches, {self.explore_min:.2f} board min exploring "
            f"({self.stop_reason})"
        )


@dataclass
class _Probe:
    """The configuration being measured: its minibatches since the change."""

    index: int
    t_mode: float
    log: list[tuple[float, float, float]] = field(default_factory=list)
    warm: bool = True
    settled_at: float | None = None
    stable: bool = True


class Tuner:
    """Decide the configuration with the job's own minibatches.

    Parameters
    ----------
    board : Backend or Twin
        What sets the configurations and reads power (a Jetson, NVML with
        ``allow_power_limit``, the twin, a :class:`~powertrain.backends.ReplayBackend`).
    reference : Predictor
        A fitted reference to transfer (it must predict ``power_w``).
    power_cap_w : float or callable
        The cap in W, or a schedule ``(elapsed_s, minibatch) -> W`` (a
        :class:`~powertrain.CapSchedule`); elapsed is the job's training seconds.
    budget : int
        Configurations each cap's decision may measure.
    candidates : DataFrame, optional
        The configurations to choose among (default: a replayed table's records, else
        the device's profiling grid, else NVML power limits every 25 W).
    batch_size : int or list of int, optional
        The job's batch size; several sizes let the tuner choose it too (follow
        :attr:`batch_size`, e.g. through :meth:`batches`).
    r : optional
        Batch-size efficiency (:func:`~powertrain.load_r` input): cost becomes time per
        sample x samples to target, so batch size is chosen jointly.
    minibatches : int
        Clean minibatches timed per configuration (after the discarded first one).
    start : int, optional
        Configurations measured before the first transfer (default 5).
    log : callable, optional
        Where decision messages go (default the ``powertrain.decisions.tuner`` logger).
    background : bool
        Decide (transfer, score) in a worker thread while training goes on in the
        current configuration, so the training thread does not wait for it.
    samples : DataFrame, optional
        Earlier measurements to start from (a saved profile,
        :mod:`~powertrain.decisions.saved_profile`); rows saved for the same cap count
        against its budget, so a rerun at that cap measures nothing new.
    """

    def __init__(
        self,
        board: Any,
        reference: Predictor,
        power_cap_w: float | Callable[[float, int], float],
        *,
        budget: int = 20,
        candidates: pd.DataFrame | None = None,
        batch_size: int | Sequence[int] | None = None,
        r: Any = None,
        minibatches: int = 20,
        start: int | None = None,
        tolerance: float = TOLERANCE,
        min_power_samples: int = 2,
        max_settle_s: float = 30.0,
        transfer_options: Mapping | None = None,
        seed: int = 0,
        log: Callable[[str], None] | None = None,
        handle_signals: bool = True,
        samples: pd.DataFrame | None = None,
        background: bool = False,
    ):
        _check_int("budget", budget, 1)
        _check_int("minibatches", minibatches, 1)
        self.start = MIN_TRANSFER if start is None else _check_int("start", start, MIN_TRANSFER)
        if not 0 <= tolerance < 1:
            raise DataError(f"Tuner: tolerance must be a fraction in [0, 1), got {tolerance!r}")
        if "power_w" not in reference.targets_:
            raise DataError("Tuner: the reference must predict power_w")
        self.reference = reference
        self.schedule = _schedule(power_cap_w)
        self.budget, self.minibatches = int(budget), int(minibatches)
        self.tolerance, self.min_power_samples = float(tolerance), int(min_power_samples)
        self.max_settle_s, self.seed = float(max_settle_s), int(seed)
        self.transfer_options = dict(transfer_options or {})
        self.say = log or _LOG.info
        self.handle_signals = handle_signals
        self.time_column = next(t for t in reference.targets_ if t != "power_w")
        if self.time_column != "time_ms":
            raise DataError(
                f"Tuner: the reference predicts {self.time_column}; the tuner times "
                "minibatches: give a reference that predicts time_ms"
            )
        self.inputs = tuple(reference.inputs_)
        self._r = r
        self._rng = np.random.default_rng(seed)
        self.board: Backend | None = None
        self.reason = ""
        try:
            self.board = as_backend(board)
        except TypeError as e:
            self._inert(str(e))
        self._batch_size = batch_size
        self._candidates = candidates
        self.phase = "idle" if self.board is not None else "inert"
        self.simulated = self.board is not None and not isinstance(self.board, StepBackend)
        self._signals = StopSignals()
        self._cap: float | None = None
        self._probe: _Probe | None = None
        self._apply: int | None = None
        self._current: int | None = None
        self._pick: int | None = None
        self._n_cap = 0
        self._t0: float | None = None
        self.minibatch = 0  # training minibatches run
        self.elapsed_s = 0.0  # training seconds (board clock)
        self._explore_s = 0.0
        self._first_pick_at: int | None = None
        self._decide_s = 0.0
        self._stop = "not started"
        self._decisions: list[dict] = []
        self._rows: list[dict] = []
        self._samples = samples  # earlier measurements (a saved profile) to start from
        self._last_end: float | None = None  # when the last timed step ended
        self.background = bool(background)
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future | None = None  # a decision computing off the training thread
        #: training steps run (in the configuration of the moment) while a decision computed
        self.steps_while_deciding = 0

    # ------------------------------------------------------------ the loop's face --
    @contextlib.contextmanager
    def step(self) -> Iterator[Tuner]:
        """Wrap one training step: ``with tuner.step(): train_step(batch)``. An error in
        the step restores the board before it propagates."""
        self.on_step_begin()
        try:
            yield self
        except BaseException:
            self.abort()
            raise
        self.on_step_end()

    def on_step_begin(self) -> None:
        """Before a training step: start, follow the cap, apply a new configuration."""
        if self.phase in ("inert", "closed"):
            return
        try:
            if self.phase == "idle":
                self._prepare()
            if self._pending is not None and self._pending.done():
                done, self._pending = self._pending, None
                done.result()  # a decision's error surfaces in the training thread
            cap = self.schedule(self.elapsed_s, self.minibatch)
            if self._pending is not None:
                pass  # deciding: the step runs as things are
            elif self.phase != "inert" and not math.isclose(cap, self._cap or math.nan):
                self._new_cap(float(cap))
            if self._pending is None and self.phase != "inert" and self._apply is not None:
                self._configure(self._apply)
                self._last_end = None  # a change: the iteration starts now
            if self.phase == "inert":
                return
            assert self.board is not None
            if not self.simulated:
                _sync()
            # a whole iteration, the data loader's wait included, as power is averaged
            self._t0 = self._last_end if self._last_end is not None else self.board.now()
        except BaseException:
            self.abort()
            raise

    def on_step_end(self) -> None:
        """After a training step: time it, read power, decide when a measurement ends."""
        if self.phase in ("inert", "closed") or self._t0 is None:
            return
        try:
            self._end_step()
        except BaseException:
            self.abort()
            raise

    @property
    def batch_size(self) -> int | None:
        """The batch size the current configuration wants (None before the first step
        when no single size was given)."""
        if self.phase == "idle":
            self._prepare()
        idx = self._apply if self._apply is not None else self._current
        if idx is None or "batch_size" not in getattr(self, "candidates_", ()):
            b = self._batch_size  # inert or not started: the job's (first) size
            return None if b is None else int(np.atleast_1d(b)[0])
        return int(self.candidates_["batch_size"].iloc[idx])

    def batches(self, make_loader: Callable[[int], Iterable], steps: int) -> Iterator[Any]:
        """``steps`` batches from ``make_loader(batch_size)``, a new loader whenever the
        tuner wants another batch size (it takes effect at the next minibatch); wrap each
        step in :meth:`step`. Why: a batch size is a property of the dataloader."""
        made = 0
        while made < steps:
            b = self.batch_size
            if b is None:
                raise DataError("Tuner.batches: give the Tuner the job's batch_size")
            for batch in make_loader(b):
                yield batch
                made += 1
                if made >= steps or self.batch_size != b:
                    break

    # -------------------------------------------------------------- start and end --
    def _prepare(self) -> None:
        """Before the first step: the candidates, the cap, the first configuration."""
        assert self.board is not None
        try:
            self.candidates_ = self._make_candidates()
        except DataError as e:
            self._inert(str(e))
            return
        self.phase = "running"
        if self._samples is not None:  # a saved profile: its configurations are measured
            from .saved_profile import prior_rows

            cols = self.board.config_columns
            self._rows += prior_rows(self.candidates_, self._samples, cols, self.time_column)
        if self.handle_signals:
            self._signals.install()
        atexit.register(self.close)
        self._new_cap(float(self.schedule(0.0, 0)))

    def _inert(self, why: str) -> None:
        """Do nothing from now on, with one clear warning."""
        self.reason = why
        self.phase = "inert"
        warnings.warn(
            f"powertrain.Tuner has no effect: {why}; training goes on unchanged",
            RuntimeWarning,
            stacklevel=4,
        )

    def _release(self) -> None:
        """Put the board back and stop listening for signals, quietly."""
        atexit.unregister(self.close)
        try:
            if self.board is not None:
                with contextlib.suppress(Exception), blocked():
                    self.board.on_error()
                    self.board.close()
        finally:
            self._signals.uninstall()

    def abort(self) -> None:
        """Restore the board now (an error or a stop signal ends the job)."""
        if self.phase == "closed":
            return
        if self.board is not None and self.phase not in ("idle", "inert"):
            with contextlib.suppress(Exception):
                self.board.on_error()
        if self._pick is None and self.phase == "running":
            self._stop = "interrupted"
        self.close()

    def close(self) -> TunerSummary:
        """Restore the board and return the summary (idempotent)."""
        if self.phase != "closed":
            was = self.phase
            self.phase = "closed"
            atexit.unregister(self.close)
            try:
                if self.board is not None and was not in ("idle", "inert"):
                    with blocked():
                        self.board.close()
            finally:
                self._signals.uninstall()
            if self._pool is not None:  # the board is back: let a decision finish
                self._pool.shutdown(wait=True)
                self._pending = None
            if was not in ("idle", "inert"):
                self.say(str(self.summary()))
        return self.summary()

    def __enter__(self) -> Tuner:
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        if kind is not None:
            self.abort()
        else:
            self.close()

    # ------------------------------------------------------------- candidates --
    def _make_candidates(self) -> pd.DataFrame:
        board = self.board
        assert board is not None
        cols = tuple(board.config_columns)
        unset = [c for c in self.inputs if c not in cols]
        if unset:
            raise DataError(
                f"{type(board).__name__} cannot set {', '.join(unset)} (its settings: "
                f"{', '.join(cols)}); for NVML pass allow_power_limit=True (needs root)"
            )
        cands = self._candidates
        if cands is None:
            cands = _default_candidates(board, self._sizes())
        elif self._batch_size is not None and "batch_size" in cands.columns:
            cands = cands[cands["batch_size"].isin(self._sizes() or [])]
        cands = board.complete_modes(cands.reset_index(drop=True))
        missing = [c for c in (*self.inputs, *cols) if c not in cands.columns]
        if missing:
            raise DataError(f"candidates: missing column(s) {', '.join(missing)}")
        cands = cands.drop_duplicates(subset=list(cols)).reset_index(drop=True)
        if len(cands) < 2:
            raise DataError(f"only {len(cands)} candidate configuration(s): nothing to choose")
        self._factor = _cost_factor(cands, self._r, self.time_column)
        return cands

    def _sizes(self) -> list[int] | None:
        b = self._batch_size
        if b is None:
            twin = getattr(self.board, "twin", None)
            return None if twin is None else [int(twin.workload.default_batch_size)]
        return [int(x) for x in np.atleast_1d(b)]

    # -------------------------------------------------------------- each step --
    def _configure(self, idx: int) -> None:
        assert self.board is not None
        row = self.candidates_.iloc[idx]
        config = {c: _plain(row[c]) for c in self.board.config_columns if c in row.index}
        try:
            self.board.configure(config)
        except PowerTrainError as e:
            if self._current is None:  # the very first change: the board is not ours
                self._release()
                self._inert(f"the board refused a configuration ({e})")
                return
            raise
        self._current, self._apply = idx, None
        if self._probe is not None and self._probe.index == idx:
            self._probe.t_mode = self.board.now()

    def _end_step(self) -> None:
        assert self.board is not None and self._t0 is not None
        if self.simulated:
            ms = float(self.board.run_minibatch())  # the simulated board's minibatch
        else:
            _sync()
            ms = (self.board.now() - self._t0) * 1e3
        t0, t1 = self._t0, self.board.now()
        if self.simulated:
            t0 = t1 - ms / 1e3
        self._t0, self._last_end = None, (None if self.simulated else t1)
        self.minibatch += 1
        self.elapsed_s += ms / 1e3
        if self._pending is not None:  # a decision computing: this step is not measured
            self.steps_while_deciding += 1
            return
        probe = self._probe
        if probe is None or self.phase != "running":
            return
        self._explore_s += ms / 1e3
        if probe.warm:  # the first minibatch after a change trains but is not timed
            probe.warm = False
            return
        probe.log.append((t0, t1, ms))
        row = self._measured(probe)
        if row is not None:
            self._probe = None
            self._rows.append(row)
            self.say(
                f"measured {_shown(row, self.inputs)}: {row[self.time_column]:.4g} "
                f"{self.time_column.split('_')[-1]}, {row['power_w']:.1f} W"
            )
            self._next()

    def _measured(self, probe: _Probe) -> dict | None:
        """The configuration's row once its clean minibatches hold enough readings."""
        board = self.board
        assert board is not None
        now = probe.log[-1][1]
        if probe.settled_at is None:
            seen = np.asarray(board.power_samples(probe.t_mode, now), float).reshape(-1, 2)
            probe.settled_at = stable_since(seen)
            if probe.settled_at is None and now - probe.t_mode > self.max_settle_s:
                probe.settled_at, probe.stable = now, False
            if probe.settled_at is None:
                return None
        clean = [m for m in probe.log if m[0] >= probe.settled_at]
        if len(clean) < self.minibatches:
            return None
        watts = np.asarray(board.power_samples(clean[0][0], now), float).reshape(-1, 2)
        if len(watts) < self.min_power_samples and len(clean) < 50 * self.minibatches:
            return None
        row = {c: _plain(self.candidates_[c].iloc[probe.index]) for c in self.candidates_}
        ms = np.array([m[2] for m in clean])
        row[self.time_column] = float(np.median(ms))
        row["power_w"] = float(watts[:, 1].mean()) if len(watts) else float("nan")
        row.update(n_minibatches=len(clean), stable=probe.stable, index=probe.index, cap=self._cap)
        return row

    # ------------------------------------------------------------ the decision --
    def _new_cap(self, cap: float) -> None:
        first = self._cap is None
        # saved rows measured for this cap count against its budget
        self._n_cap = sum(1 for r in self._rows if r.get("given") and math.isclose(r["cap"], cap))
        self._cap = cap
        if not first:
            self.say(f"power cap now {cap:g} W at {self.elapsed_s:.0f} s: deciding again")
            self.phase = "running"
        if self._probe is None:
            self._next()

    def _next(self) -> None:
        """Choose what to measure next, or settle on the pick; with ``background``, in a
        worker thread while training goes on in the current configuration (taken up at
        the first step after it is done; the first choice, before anything runs, not)."""
        if not self.background or self._current is None:
            return self._decide()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="powertrain-tuner")
        self._pending = self._pool.submit(self._decide)

    def _decide(self) -> None:
        t = time.perf_counter()
        try:
            idx = self._choose()
        finally:
            self._decide_s += time.perf_counter() - t
        if idx is None:
            return
        self._n_cap += 1
        self._probe = _Probe(idx, math.nan)
        self._apply = idx

    def _choose(self) -> int | None:
        done = {int(r["index"]) for r in self._rows}
        n = len(self.candidates_)
        if len(done) < min(self.start, n):
            return self._start_config(done)
        if len(done) == n:  # everything measured: no model needed
            mu_t, sd_t, mu_p, sd_p, measured = self._measured_only()
        else:
            mu_t, sd_t, mu_p, sd_p, measured = self._estimates()
        assert self._cap is not None
        cost = mu_t * self._factor
        inc, gain = improvement(cost, sd_t / mu_t, mu_p, sd_p, measured, self._cap)
        if measured.all():
            self._settle(inc, "exhausted", gain)
            return None
        if inc >= 0 and gain.max(initial=0.0) <= self.tolerance:
            self._settle(inc, "confident", gain)
            return None
        if self._n_cap >= self.budget:
            self._settle(inc, "budget", gain)
            return None
        if gain.max(initial=0.0) <= 0:
            self._settle(inc, "exhausted", gain)
            return None
        return int(np.argmax(gain))

    def _start_config(self, done: set[int]) -> int:
        """A stratified start among the configurations the (untransferred) reference
        puts near or under the cap, so exploring rarely runs far over it."""
        if not hasattr(self, "_start_order"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # extrapolation: only ranks the start
                est = self.reference.predict(self.candidates_[list(self.inputs)], return_std=False)
            assert self._cap is not None
            near = np.flatnonzero(est["power_w"].to_numpy(float) <= 1.1 * self._cap)
            pool = near if len(near) >= self.start else np.arange(len(self.candidates_))
            order = pool[np.argsort(est[self.time_column].to_numpy(float)[pool])]
            # evenly spaced over the pool's predicted times, jittered by the seed
            spots = (np.arange(self.start) + self._rng.uniform(size=self.start)) / self.start
            self._start_order = list(dict.fromkeys(order[(spots * len(order)).astype(int)]))
            rest = [int(i) for i in self._rng.permutation(pool) if i not in self._start_order]
            self._start_order += rest
        return next(int(i) for i in self._start_order if int(i) not in done)

    def _estimates(self) -> tuple[np.ndarray, ...]:
        rows = pd.DataFrame(self._rows).groupby("index").last()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # extrapolation warnings: the loop measures there
            model = self.reference.transfer(
                rows[[*self.inputs, self.time_column, "power_w"]].dropna(),
                random_state=self.seed,
                **self.transfer_options,
            )
            est = model.predict(self.candidates_[list(self.inputs)], return_std=True)
        self.model_ = model
        measured = np.zeros(len(est), bool)
        measured[rows.index.to_numpy(int)] = True
        mu_t = est[self.time_column].to_numpy(float).copy()
        mu_p = est["power_w"].to_numpy(float).copy()
        mu_t[rows.index.to_numpy(int)] = rows[self.time_column].to_numpy(float)
        mu_p[rows.index.to_numpy(int)] = rows["power_w"].to_numpy(float)
        sd_t = est[f"{self.time_column}_std"].to_numpy(float)
        sd_p = est["power_w_std"].to_numpy(float)
        return mu_t, sd_t, mu_p, sd_p, measured

    def _measured_only(self) -> tuple[np.ndarray, ...]:
        rows = pd.DataFrame(self._rows).groupby("index").last().sort_index()
        mu_t = rows[self.time_column].to_numpy(float)
        mu_p = rows["power_w"].to_numpy(float)
        zero = np.zeros(len(rows))
        return mu_t, zero, mu_p, zero, np.ones(len(rows), bool)

    def _settle(self, inc: int, why: str, gain: np.ndarray) -> None:
        """Run the pick from the next minibatch on; nothing measured fits: the lowest
        measured power, with a warning."""
        assert self._cap is not None
        reason = why
        if inc < 0:
            rows = pd.DataFrame(self._rows)
            inc = int(rows.loc[rows["power_w"].idxmin(), "index"])
            reason = f"{why}; nothing measured fits under {self._cap:g} W: lowest power run"
            warnings.warn(f"powertrain.Tuner: {reason}", RuntimeWarning, stacklevel=2)
        self._pick, self._stop = inc, reason
        self.phase = "settled"
        if self._first_pick_at is None:
            self._first_pick_at = self.minibatch
        row = next(r for r in reversed(self._rows) if int(r["index"]) == inc)
        decision = {
            "power_cap_w": self._cap,
            **{c: row[c] for c in self.candidates_.columns},
            self.time_column: row[self.time_column],
            "power_w": row["power_w"],
            "measured": self._n_cap,
            "minibatch": self.minibatch,
            "reason": reason,
            "best_gain": float(gain.max(initial=0.0)),
        }
        self._decisions.append(decision)
        self.say(
            f"decided under {self._cap:g} W: {_shown(row, self.inputs)} "
            f"({row[self.time_column]:.4g} {self.time_column.split('_')[-1]}, "
            f"{row['power_w']:.1f} W) after {len(self._rows)} configurations, "
            f"{self.minibatch} minibatches ({reason})"
        )
        if inc != self._current:
            self._apply = inc

    # ------------------------------------------------------------- results --
    @property
    def settled(self) -> bool:
        """True once the tuner runs its pick under the current cap."""
        return self.phase == "settled" or (self.phase == "closed" and self._pick is not None)

    @property
    def config(self) -> dict | None:
        """The configuration running now (None before the first step)."""
        if self._current is None:
            return None
        row = self.candidates_.iloc[self._current]
        return {c: _plain(row[c]) for c in self.candidates_.columns}

    @property
    def decisions(self) -> list[dict]:
        """One row per decision so far: cap, pick, its time and power, why it stopped."""
        return list(self._decisions)

    def measurements(self) -> pd.DataFrame:
        """Every configuration measured, in order (the tuner's own training minibatches)."""
        return pd.DataFrame(self._rows)

    def summary(self) -> TunerSummary:
        """The pick, its time and power, what finding it cost."""
        last = self._decisions[-1] if self._decisions else None
        keys = list(self.candidates_.columns) if hasattr(self, "candidates_") else []
        return TunerSummary(
            active=self.phase != "inert" and not self.reason,
            power_cap_w=None if last is None else last["power_cap_w"],
            config=None if last is None else {k: last[k] for k in keys},
            time_ms=None if last is None else float(last[self.time_column]),
            power_w=None if last is None else float(last["power_w"]),
            n_measured=sum(1 for r in self._rows if not r.get("given")),
            minibatches_to_pick=self._first_pick_at
            if self._first_pick_at is not None
            else self.minibatch,
            explore_min=self._explore_s / 60,
            decide_s=self._decide_s,
            stop_reason=self._stop,
            decisions=list(self._decisions),
            simulated=self.simulated,
            reason=self.reason,
        )


# ------------------------------------------------------------------- scoring --
def improvement(
    cost: np.ndarray,
    rel_sd: np.ndarray,
    mu_p: np.ndarray,
    sd_p: np.ndarray,
    measured: np.ndarray,
    cap: float,
) -> tuple[int, np.ndarray]:
    """The measured pick under ``cap`` (-1: none fits) and each unmeasured configuration's
    constrained expected relative improvement on it: P(power <= cap) x E[(pick -
    cost)+] / pick, cost log-normal (median ``cost``, log-spread ``rel_sd``), power normal.
    Without a pick: the chance it fits, scaled by how cheap it is predicted."""
    from scipy.stats import norm

    fits = measured & (mu_p <= cap)
    fit_p = norm.cdf((cap - mu_p) / np.clip(sd_p, 1e-9, None))
    s = np.clip(rel_sd, 1e-6, None)
    gain = np.zeros(len(cost))
    open_ = ~measured
    if not fits.any():
        gain[open_] = fit_p[open_] * cost[open_].min(initial=np.inf) / cost[open_]
        return -1, gain
    inc = int(np.flatnonzero(fits)[np.argmin(cost[fits])])
    best = cost[inc]
    d = (np.log(best) - np.log(cost[open_])) / s[open_]
    expected = best * norm.cdf(d) - cost[open_] * np.exp(s[open_] ** 2 / 2) * norm.cdf(d - s[open_])
    gain[open_] = fit_p[open_] * np.clip(expected, 0.0, None) / best
    return inc, gain


# ------------------------------------------------------------------- helpers --
def _check_int(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise DataError(f"Tuner: {name} must be an integer >= {low}, got {value!r}")
    return int(value)


def _schedule(cap: Any) -> Callable[[float, int], float]:
    if callable(cap):
        return cap
    if isinstance(cap, bool) or not isinstance(cap, (int, float, np.number)):
        raise DataError(f"Tuner: power_cap_w must be watts or a schedule, got {cap!r}")
    if not (math.isfinite(cap) and cap > 0):
        raise DataError(f"Tuner: power_cap_w must be positive watts, got {cap!r}")
    return lambda elapsed_s, minibatch: float(cap)


def _default_candidates(board: Backend, sizes: list[int] | None) -> pd.DataFrame:
    """A replayed table's records, else the device's profiling grid, else NVML power
    limits every :data:`POWER_LIMIT_STEP_W` over the GPU's range; at ``sizes``."""
    records = getattr(board, "configurations", None)
    if callable(records):
        cands = records()
        if sizes is not None:
            cands = cands[cands["batch_size"].isin(sizes)]
        return cands
    if sizes is None:
        raise DataError("Tuner: batch_size: name the job's batch size(s)")
    sizes_df = pd.DataFrame({"batch_size": sizes})
    if board.device is not None:
        return board.device.profiling_grid().merge(sizes_df, how="cross")
    span = getattr(board, "power_limit_range_w", None)
    if span is not None:
        lo, hi = span
        limits = np.unique(np.r_[np.arange(hi, lo - 1e-9, -POWER_LIMIT_STEP_W), lo])
        return pd.DataFrame({"power_limit_w": limits}).merge(sizes_df, how="cross")
    raise DataError(f"{type(board).__name__} has no table of settings: pass candidates=")


def _cost_factor(cands: pd.DataFrame, r: Any, time_column: str) -> np.ndarray:
    """Time per minibatch -> time to target: samples to target / batch size (1 without r)."""
    if r is None:
        return np.ones(len(cands))
    from ..data.batch_efficiency import load_r

    rv = load_r(r)
    col = next(c for c in ("samples", "epochs", "r") if c in rv.columns)
    per = rv.set_index(rv["batch_size"].astype(int))[col].astype(float)
    b = cands["batch_size"].astype(int)
    need = b.map(per)
    if need.isna().any():
        raise DataError(f"r has no entry for batch size(s) {sorted(set(b[need.isna()]))}")
    # samples (or epochs of a fixed dataset) to target / b: minibatches to target, up to
    # a constant the choice does not depend on
    return (need / b).to_numpy(float)


def _sync() -> None:
    """Wait for queued GPU work, so a step's wall time is its own."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.synchronize()


def _plain(v: Any) -> Any:
    if isinstance(v, np.integer):
        return int(v)
    return float(v) if isinstance(v, np.floating) else v


def _shown(row: Mapping, keys: Sequence[str]) -> str:
    return " ".join(f"{k}={float(row[k]):g}" for k in keys if k in row)
