"""The Tuner's loop: training steps feed the decision engine.

Why apart from :mod:`~powertrain.decisions.tuner` (the public face: arguments, hooks,
restore, summary): this is the driver itself, the same ask -> measure -> tell loop as
``decide``'s, one configuration at a time between the job's steps. Each step set by a
study's ask feeds the profiler's measurement window
(:class:`~powertrain.profiling.window.Window`); a finished window is one row told to the
study; when the study stops, its pick (the fastest measured under the cap) runs. With
``background``, each decision after the first runs in a one-thread worker while training
goes on in the current configuration. :class:`TunerSummary` (what the loop did) lives
here too; the Tuner re-exports it.
"""

from __future__ import annotations

import dataclasses
import sys
import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from ..backends import Backend
from ..errors import PowerTrainError
from ..profiling.window import Window
from .candidates import plain
from .safe_set import over_cap_share
from .samplers import make_sampler
from .settings import SETTLE_TOL, Settings
from .study import Ask, Study

#: sensor periods after a change whose readings the step back leaves out (the twin's
#: sensor settles with a 0.6 s time constant at 1 Hz; a real one's lag is shorter)
SENSOR_LAG = 2


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
        last = self.decisions[-1] if self.decisions else {}
        over = _share(
            last.get("over_cap_time_share", np.nan), last.get("over_cap_energy_share", np.nan)
        )
        return (
            f"powertrain tuner: pick {shown} under {self.power_cap_w:g} W: "
            f"{self.time_ms:.4g} ms/minibatch, {self.power_w:.1f} W; "
            f"{self.n_measured} configurations measured in {self.minibatches_to_pick} "
            f"training minibatches, {self.explore_min:.2f} board min exploring "
            f"({self.stop_reason}); {over}"
        )


@dataclass
class _Probe:
    """The configuration being measured, and its window once it is set."""

    index: int
    window: Window | None = None


class TunerLoop:
    """The engine fed by training steps (the base of :class:`~powertrain.decisions.
    tuner.Tuner`, which sets what these read: the board, the reference, the candidates
    and their cost factors, the settings and the window's limits)."""

    board: Backend | None
    reference: Any
    settings: Settings
    candidates_: pd.DataFrame
    inputs: tuple[str, ...]
    time_column: str
    minibatches: int
    min_power_samples: int
    max_settle_s: float
    transfer_options: dict
    simulated: bool
    background: bool
    phase: str
    say: Any
    _factor: np.ndarray

    def _init_loop(self) -> None:
        self._cap: float | None = None
        self._study: Study | None = None
        self._asked: Ask | None = None
        self._queue: list[int] = []
        self._answers: list[dict] = []
        self._probe: _Probe | None = None
        self._apply: int | None = None
        self._current: int | None = None
        self._pick: int | None = None
        self._t0: float | None = None
        self.minibatch = 0  # training minibatches run
        self.elapsed_s = 0.0  # training seconds (board clock)
        self._explore_s = 0.0
        self._first_pick_at: int | None = None
        self._decide_s = 0.0
        self._stop = "not started"
        self._decisions: list[dict] = []
        self._rows: list[dict] = []
        self._last_end: float | None = None  # when the last timed step ended
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future | None = None  # a decision computing off the training thread
        #: training steps run (in the configuration of the moment) while a decision computed
        self.steps_while_deciding = 0
        #: configurations left at once because the cap was hit there (``hard_cap``)
        self.hits: list[int] = []

    def _configure(self, idx: int) -> None:
        assert self.board is not None
        row = self.candidates_.iloc[idx]
        config = {c: plain(row[c]) for c in self.board.config_columns if c in row.index}
        try:
            self.board.configure(config)
        except PowerTrainError as e:
            if self._current is None:  # the very first change: the board is not ours
                self._release()
                self._inert(f"the board refused a configuration ({e})")
                return
            raise
        self._current, self._apply = idx, None
        self._last_end = None  # a change: the next iteration starts when it is set
        if self._probe is not None and self._probe.index == idx:
            s = self.settings
            self._probe.window = Window(
                self.board, self.board.now(), _shown(config, self.inputs), self.minibatches,
                self.min_power_samples, self.max_settle_s,
                settle_tol=SETTLE_TOL if s.protocol == "settled" else 0.0,
            )  # fmt: skip

    def _end_step(self) -> None:
        assert self.board is not None and self._t0 is not None
        if self.simulated:
            ms = float(self.board.run_minibatch())  # the simulated board's minibatch
        else:
            _sync()
            ms = (self.board.now() - self._t0) * 1e3
        t0, t1 = self._t0, self.board.now()
        self._t0, self._last_end = None, (None if self.simulated else t1)
        self.minibatch += 1
        self.elapsed_s += ms / 1e3
        if self._pending is not None:  # a decision computing: this step is not measured
            self.steps_while_deciding += 1
            return
        probe = self._probe
        if probe is None or probe.window is None or self.phase != "running":
            return
        self._explore_s += ms / 1e3
        if not probe.window.add(t0, t1, ms):
            self._step_back(probe)
            return
        row = {c: plain(self.candidates_[c].iloc[probe.index]) for c in self.candidates_}
        row.update(probe.window.row(), index=probe.index, cap=self._cap)
        self._probe = None
        self._rows.append(row)
        self.say(
            f"measured {_shown(row, self.inputs)}: {row[self.time_column]:.4g} "
            f"{self.time_column.split('_')[-1]}, {row['power_w']:.1f} W"
        )
        self._told(row)

    def _step_back(self, probe: _Probe) -> None:
        """With ``hard_cap``: the cap hit in the configuration being measured (the mean
        of its readings over it beyond their noise): leave it at the next step, telling
        what it showed. Judged from the first timed minibatch on: a hit after the
        warm-up alone would tell the study the warm-up's time as the configuration's."""
        hard = self._study.hard if self._study is not None else None
        window = probe.window
        if hard is None or window is None or len(window.log) < 2 or self.board is None:
            return
        now = self.board.now()
        seen = np.asarray(self.board.power_samples(window.t_mode, now), float).reshape(-1, 2)
        # the sensor's first readings after a change still show the last configuration
        seen = seen[seen[:, 0] >= window.t_mode + SENSOR_LAG * window.period]
        if not len(seen) or not hard.step_back(probe.index, seen[:, 1]):
            return
        self.hits.append(probe.index)
        timed = [m[2] for m in window.log[1:]]
        row = {c: plain(self.candidates_[c].iloc[probe.index]) for c in self.candidates_}
        row.update(
            {self.time_column: float(np.median(timed)), "power_w": float(seen[:, 1].mean())},
            n_minibatches=len(timed), n_power_samples=len(seen), stable=False,
            profile_s=now - window.t_mode, index=probe.index, cap=self._cap,
        )  # fmt: skip
        self._probe = None
        self._rows.append(row)
        self.say(f"cap hit at {_shown(row, self.inputs)} ({row['power_w']:.1f} W): stepping back")
        self._told(row)

    # ------------------------------------------------------------ the decision --
    def _new_cap(self, cap: float) -> None:
        """A study for ``cap`` from everything measured so far (its budget fresh); the
        configuration being measured finishes first and is told to it."""
        first = self._cap is None
        self._cap = cap
        if not first:
            self.say(f"power cap now {cap:g} W at {self.elapsed_s:.0f} s: deciding again")
            self.phase = "running"
        s = dataclasses.replace(self.settings).checked(len(self._rows))
        self._study = Study(
            self.candidates_, self.reference, np.array([cap]), s, make_sampler(s.method),
            factor=self._factor, device=self.board.device if self.board else None,
            transfer_options=self.transfer_options, say=self.say,
            source=f"the board ({type(self.board).__name__})",
        )  # fmt: skip
        if self._rows:  # given rows saved for this cap count against its budget
            rows = pd.DataFrame(self._rows)
            same = rows.get("given", False) == True  # noqa: E712 (NaN: not given)
            same &= np.isclose(rows["cap"].astype(float), cap)
            for part, resumed in ((rows[~same], False), (rows[same], True)):
                if len(part):
                    self._study.tell(part, resumed=resumed)
        self._asked, self._queue, self._answers = None, [], []
        if self._probe is None:
            self._next()

    def _told(self, row: dict) -> None:
        """A finished measurement to the study: part of its open ask, or (measured for a
        cap since changed) as given."""
        assert self._study is not None
        if self._asked is None:
            self._study.tell(pd.DataFrame([row]))
        else:
            self._answers.append(row)
            if not self._queue:
                asked, self._asked = self._asked, None
                self._study.tell(pd.DataFrame(self._answers), asked)
        self._next()

    def _next(self) -> None:
        """Choose what to measure next, or settle on the pick; with ``background``, in a
        worker thread while training goes on in the current configuration (taken up at
        the first step after it is done, :meth:`_collect`; the first choice, before
        anything runs, not)."""
        if not self.background or self._current is None:
            return self._decide()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="powertrain-tuner")
        self._pending = self._pool.submit(self._decide)

    def _collect(self) -> bool:
        """Take up a finished background decision (its error raised here, in the training
        thread); True while one is still computing."""
        if self._pending is not None and self._pending.done():
            done, self._pending = self._pending, None
            done.result()
        return self._pending is not None

    def _shutdown(self) -> None:
        """Let a background decision finish (after the board is restored)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pending = None

    def _decide(self) -> None:
        """The next configuration to measure (asking the study when its ask is done), or
        settle on the pick."""
        assert self._study is not None
        t = time.perf_counter()
        try:
            if not self._queue and self._asked is None:
                asked = self._study.ask()
                if asked is None:
                    self._settle()
                    return
                self._asked, self._queue, self._answers = asked, list(asked.positions), []
            idx = int(self._queue.pop(0))
        finally:
            self._decide_s += time.perf_counter() - t
        self._probe = _Probe(idx)
        self._apply = idx

    def _settle(self) -> None:
        """Run the pick from the next minibatch on: the fastest measured under the cap;
        nothing measured fits: the lowest measured power, with a warning."""
        study = self._study
        assert study is not None and study.standing is not None and self._cap is not None
        inc, reason = int(study.standing.incumbent[0]), str(study.stop_reason)
        rows = pd.DataFrame(self._rows)
        if inc < 0:
            inc = int(rows.loc[rows["power_w"].idxmin(), "index"])
            reason = f"{reason}; nothing measured fits under {self._cap:g} W: lowest power run"
            warnings.warn(f"powertrain.Tuner: {reason}", RuntimeWarning, stacklevel=2)
        self._pick, self._stop = inc, reason
        self.phase = "settled"
        if self._first_pick_at is None:
            self._first_pick_at = self.minibatch
        row = next(r for r in reversed(self._rows) if int(r["index"]) == inc)
        here = rows[np.isclose(rows["cap"].astype(float), self._cap)]
        if "given" in here:
            here = here[here["given"] != True]  # noqa: E712 - NaN for this run's rows
        over_t, over_e = over_cap_share(here, self._cap)
        self._decisions.append(
            {
                "power_cap_w": self._cap,
                **{c: row[c] for c in self.candidates_.columns},
                self.time_column: row[self.time_column],
                "power_w": row["power_w"],
                "measured": study.n_new,
                "minibatch": self.minibatch,
                "reason": reason,
                "expected_loss": study.reported().expected_loss,
                "over_cap_time_share": over_t,
                "over_cap_energy_share": over_e,
            }
        )
        self.say(
            f"decided under {self._cap:g} W: {_shown(row, self.inputs)} "
            f"({row[self.time_column]:.4g} {self.time_column.split('_')[-1]}, "
            f"{row['power_w']:.1f} W) after {len(self._rows)} configurations, "
            f"{self.minibatch} minibatches ({reason}); {_share(over_t, over_e)}"
        )
        if inc != self._current:
            self._apply = inc

    @property
    def study(self) -> Study | None:
        """The engine deciding the current cap (None before the first step)."""
        return self._study

    def _release(self) -> None:  # the Tuner's: the board put back
        raise NotImplementedError

    def _inert(self, why: str) -> None:  # the Tuner's: do nothing from now on
        raise NotImplementedError


def _sync() -> None:
    """Wait for queued GPU work, so a step's wall time is its own."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.synchronize()


def _share(time_share: float, energy_share: float) -> str:
    """'0.0 % of the measuring time (0.0 % of its energy) over the cap', by the readings."""
    if not np.isfinite(time_share):
        return "nothing measured for this cap"
    return (
        f"{100 * time_share:.1f} % of the measuring time ({100 * energy_share:.1f} % of its "
        "energy) over the cap, by the board's readings"
    )


def _shown(row: Mapping, keys: Sequence[str]) -> str:
    return " ".join(f"{k}={float(row[k]):g}" for k in keys if k in row)
