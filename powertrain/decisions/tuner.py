"""Tune inside the training job: every measurement is a real training minibatch.

Why: a profiling sweep run before training spends board time on minibatches that train
nothing, and Zeus-style optimisers that live in the loop measure every power limit. The
:class:`Tuner` runs the board-in-the-loop decision *between* the job's own steps: it
sets a configuration, feeds the next real minibatches to the profiler's measurement
window (:class:`~powertrain.profiling.window.Window`: the first after a change trains
but is not timed, power settles, then a clean window), and settles on the fastest
configuration measured under the cap. A cap that changes (a
:class:`~powertrain.CapSchedule` or any ``(elapsed_s, minibatch) -> W`` callable) is
decided again from everything measured, with a fresh budget.

The decision is ``decide``'s own engine (:class:`~powertrain.decisions.study.Study`:
the same candidates, start, sampler, stop rule, tolerance and cost rule), fed by
training steps instead of a sweep: given the same board, seed, budget, cap and r, the
Tuner measures the configurations ``decide`` measures, in the same order, and picks
what it picks.

Timing: on a hardware board (a :class:`~powertrain.backends.StepBackend`: Jetson, NVML)
the step's wall time is measured; on a simulated board (the twin, a replayed table) the
real step still trains, but the board's minibatch stands for its time and power, so the
knobs have their simulated effect.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import logging
import math
import warnings
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd

from ..backends import Backend, StepBackend
from ..backends.stop_signals import StopSignals, blocked
from ..errors import DataError
from .candidates import candidates_for, cost_factor, plain
from .samplers import make_sampler
from .saved_profile import prior_rows
from .settings import (
    TOLERANCE,
    Settings,
    cap_schedule,
    check_board,
    check_budget,
    check_reference,
    check_samples,
    integer,
)
from .tuner_loop import TunerLoop, TunerSummary, _sync

if TYPE_CHECKING:  # pragma: no cover
    from ..predictor import Predictor

_LOG = logging.getLogger(__name__)


class Tuner(TunerLoop):
    """Decide the configuration with the job's own minibatches. Every argument is checked
    when the Tuner is built, before training: a wrong one raises DataError.

    Parameters
    ----------
    board : Backend or Twin
        What sets the configurations and reads power (a Jetson, NVML with
        ``allow_power_limit``, the twin, a :class:`~powertrain.backends.ReplayBackend`).
        None: the tuner does nothing (with one warning) and training runs unchanged.
    reference : Predictor
        A fitted reference to transfer (it must predict ``time_ms`` and ``power_w``).
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
        Batch-size efficiency (an r vector, or a table of ``batch_size, epochs``): cost
        becomes time to accuracy (:func:`~powertrain.decisions.candidates.cost_factor`),
        so batch size is chosen jointly.
    minibatches : int
        The longest clean window per configuration (after the discarded first one);
        ``protocol="fixed"``: exactly this many.
    start : int, optional
        Configurations measured before the first transfer, as :func:`~powertrain.decide`'s.
    tolerance : float
        The stop's bound on the expected loss, as ``decide``'s.
    seed : int
        Seeds the draws, as ``decide``'s.
    method : str
        The strategy (a sampler's name), as ``decide``'s.
    protocol : str
        The measurement protocol (``"settled"`` or ``"fixed"``), as ``decide``'s.
    log : callable, optional
        Where decision messages go (default the ``powertrain.decisions.tuner`` logger).
    samples : DataFrame, optional
        Earlier measurements to start from (a saved profile,
        :mod:`~powertrain.decisions.saved_profile`), given to the study as ``decide``'s
        ``samples`` are; rows saved for the same cap count against its budget, so a
        rerun at that cap measures nothing new.
    background : bool
        Decide (transfer, score) in a worker thread while training goes on in the
        current configuration, so the training thread does not wait for it.
    hard_cap : bool
        Explore only inside the cap's safe set (:mod:`~powertrain.decisions.hard_cap`):
        known-safe start, a 99 % upper bound near the known set, expanders towards the
        rest, a step back when the cap is hit. Off by default: its regret is far above
        the plain Tuner's (tuning_regret_hardcap). Each decision row and the summary
        carry the share of measuring time and energy over the cap, by the readings.
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
        method: str = "table",
        protocol: str = "settled",
        samples: pd.DataFrame | None = None,
        background: bool = False,
        hard_cap: bool = False,
    ):
        self.say = log or _LOG.info
        self.settings = Settings(
            budget=budget, start=start, tolerance=tolerance, seed=seed, method=method,
            protocol=protocol, n_minibatches=minibatches, hard_cap=hard_cap,
        )  # fmt: skip
        dataclasses.replace(self.settings).checked(0)
        make_sampler(method)
        self.inputs, self.time_column = check_reference(reference, "Tuner: ")
        if self.time_column != "time_ms":
            raise DataError(
                f"Tuner: the reference predicts {self.time_column}; the tuner times "
                "minibatches: give a reference that predicts time_ms"
            )
        self.min_power_samples = integer("min_power_samples", min_power_samples, 1, ">= 1")
        if not (isinstance(max_settle_s, (int, float)) and max_settle_s > 0):
            raise DataError(f"Tuner: max_settle_s must be seconds > 0, got {max_settle_s!r}")
        self.reference, self.schedule = reference, cap_schedule(power_cap_w)
        self.budget, self.minibatches = int(budget), int(minibatches)
        self.tolerance, self.max_settle_s = float(tolerance), float(max_settle_s)
        self.seed, self.handle_signals = int(seed), handle_signals
        self.transfer_options = dict(transfer_options or {})
        self._batch_size = batch_size
        self._samples, self.background = check_samples(samples), bool(background)
        self.board: Backend | None = None
        self.reason, self.phase = "", "idle"
        if board is None:
            self._inert(f"cannot profile a {type(board).__name__}: no board to tune")
        else:
            self.board = check_board(board)
            self._make_candidates(candidates, r)
        self.simulated = self.board is not None and not isinstance(self.board, StepBackend)
        self._signals = StopSignals()
        self._init_loop()

    def _make_candidates(self, candidates: pd.DataFrame | None, r: Any) -> None:
        """The candidates and their cost factors, checked now (a board that cannot set
        the reference's inputs leaves the tuner inert, with one warning)."""
        board = self.board
        assert board is not None
        cols = tuple(board.config_columns)
        spec = getattr(getattr(board, "device", None), "spec", None)
        given = set(getattr(spec, "hardware", None) or ())  # the device's, not settings
        unset = [c for c in self.inputs if c not in cols and c not in given]
        if unset:
            self._inert(
                f"{type(board).__name__} cannot set {', '.join(unset)} (its settings: "
                f"{', '.join(cols)}); for NVML pass allow_power_limit=True (needs root)"
            )
            return
        self.candidates_ = candidates_for(board, self.inputs, candidates, self._batch_size)
        missing = [c for c in cols if c not in self.candidates_.columns]
        if missing:
            raise DataError(f"candidates: missing column(s) {', '.join(missing)}")
        n_given = 0 if self._samples is None else len(self._samples)
        check_budget(self.settings.budget, n_given, self.inputs, cols)
        self._factor = cost_factor(self.candidates_, r, self.time_column)

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
            cap = self.schedule(self.elapsed_s, self.minibatch)
            if self._collect():
                pass  # deciding in the background: the step runs as things are
            elif self.phase != "inert" and not math.isclose(cap, self._cap or math.nan):
                self._new_cap(float(cap))
            if self._pending is None and self.phase != "inert" and self._apply is not None:
                self._configure(self._apply)
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
        """The current configuration's batch size (None before the first step of several)."""
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
        step in :meth:`step`. Why: a batch size is a property of the dataloader. A loader
        that gives no batch at all is an error (it would loop for ever)."""
        integer("Tuner.batches: steps", steps, 0, "an integer >= 0")
        made = 0
        while made < steps:
            b = self.batch_size
            if b is None:
                raise DataError("Tuner.batches: give the Tuner the job's batch_size")
            before = made
            for batch in make_loader(b):
                yield batch
                made += 1
                if made >= steps or self.batch_size != b:
                    break
            if made == before:
                raise DataError(
                    f"Tuner.batches: make_loader({b}) gave no batches; a loader must give "
                    "at least one"
                )

    # -------------------------------------------------------------- start and end --
    def _prepare(self) -> None:
        """Before the first step: listen for stop signals, decide the first cap."""
        self.phase = "running"
        if self._samples is not None:  # a saved profile: its configurations are measured
            cols, tc = self.board.config_columns, self.time_column  # type: ignore[union-attr]
            self._rows += prior_rows(self.candidates_, self._samples, cols, tc)
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
                with blocked():
                    with contextlib.suppress(Exception):
                        self.board.on_error()
                    with contextlib.suppress(Exception):  # close restores even then
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
            was, self.phase = self.phase, "closed"
            atexit.unregister(self.close)
            try:
                if self.board is not None and was not in ("idle", "inert"):
                    with blocked():
                        self.board.close()
            finally:
                self._signals.uninstall()
            self._shutdown()  # the board is back: let a decision finish
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

    # ------------------------------------------------------------- results --
    @property
    def settled(self) -> bool:
        """True once its pick runs under the current cap (applied by a step, not just decided)."""
        if self.phase == "closed":
            return self._pick is not None
        return self.phase == "settled" and self._pending is None and self._apply is None

    @property
    def config(self) -> dict | None:
        """The configuration running now (None before the first step)."""
        if self._current is None:
            return None
        row = self.candidates_.iloc[self._current]
        return {c: plain(row[c]) for c in self.candidates_.columns}

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
