"""Follow a power cap that changes during training: a draining battery, a shared supply.

Why: a cap that moves every few minutes cannot wait for a new profiling sweep. What a
decision learned -- its measurements and the transferred model's estimates -- already
answers every cap: :class:`CapController` returns the configuration for a new cap at
once (the fastest *measured* one under it, else the fastest predicted one whose power
plus ``k_sigma`` spreads fits), and :func:`follow` applies it through the backend
between two minibatches, so training carries on without a restart.

A decision shared by many caps measures little under the lowest ones, and a slow pick
there is paid for the rest of the run. Given a board and the reference, the controller
re-decides a new cap when its cached answer is unsure (nothing measured fits, or an
unmeasured configuration is expected to beat the measured pick by more than the
tolerance): a few measurements, started from everything measured so far. Their
minibatches are training minibatches, so on a live board the run loses little.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
import pandas as pd

from ..errors import DataError, NoFeasibleModeError
from ..schema import check_columns
from .candidates import CapPick, fastest_measured
from .cap_schedule import CapSchedule
from .settings import TOLERANCE, checked_cap

if TYPE_CHECKING:  # pragma: no cover
    from .decide import Decision

__all__ = ["CapController", "CapSchedule", "FollowResult", "checked_cap", "follow"]


class CapController:
    """Answers a new cap at once from a decision's measurements and estimates.

    ``estimates``: one row per candidate configuration with its ``config_columns``, the
    ``cost`` minimised, ``power_w``, ``power_w_std`` and ``measured`` (what
    :class:`~powertrain.decisions.decide.Decision` carries). The fastest measured configuration
    under the cap wins; without one, the fastest unmeasured one whose predicted power +
    ``k_sigma`` x spread fits (marked unmeasured).

    Parameters
    ----------
    estimates : DataFrame
        One row per candidate: ``config_columns``, ``cost``, ``power_w``,
        ``power_w_std`` and ``measured``.
    config_columns : sequence of str
        The columns that make a configuration.
    k_sigma : float
        The margin, in predicted standard deviations of power, of an unmeasured pick.
    board, reference, measurements : optional
        What re-deciding an unsure cap needs (with ``budget`` > 0): the board, the
        reference model and what was measured so far.
    budget : int
        Measurements a re-decision may spend per new cap (0: answer from the estimates).
    tolerance : float, optional
        The expected loss under which a cap's answer counts as sure.
    decide_options : dict, optional
        Further arguments of :func:`~powertrain.decisions.decide.decide` for re-decisions.
    """

    def __init__(
        self,
        estimates: pd.DataFrame,
        config_columns: Sequence[str],
        k_sigma: float = 1.0,
        *,
        board: Any = None,
        reference: Any = None,
        measurements: pd.DataFrame | None = None,
        budget: int = 0,
        tolerance: float | None = None,
        decide_options: dict | None = None,
        study: Any = None,
    ):
        need = [*config_columns, "cost", "power_w", "measured"]
        self.estimates = check_columns(
            estimates.assign(measured=estimates["measured"].astype(float))
            if "measured" in estimates
            else estimates,
            need,
            source="CapController",
        )
        self.config_columns = tuple(config_columns)
        self.k_sigma = float(k_sigma)
        if budget and (board is None or reference is None or measurements is None):
            raise DataError("CapController: re-deciding needs a board, reference and measurements")
        if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget < 0:
            raise DataError(f"CapController: budget must be >= 0 configurations, got {budget!r}")
        self.board = board
        self.reference = reference
        self.measurements = measurements
        self.budget = int(budget)
        #: the study that made the decision: it judges a new cap (None: the cached spreads)
        self.study = study
        self.tolerance = TOLERANCE if tolerance is None else float(tolerance)
        self.decide_options = dict(decide_options or {})
        #: configurations measured and board seconds spent by re-decisions
        self.n_measured = 0
        self.board_s = 0.0
        #: the caps re-decided, in order, with how many configurations each measured
        self.redecided: list[tuple[float, int]] = []
        self._measured: list[pd.DataFrame] = []

    @classmethod
    def from_decision(
        cls,
        decision: Decision,
        k_sigma: float = 1.0,
        *,
        board: Any = None,
        reference: Any = None,
        budget: int = 0,
        tolerance: float | None = None,
        **decide_options: Any,
    ) -> CapController:
        """The controller for what ``decision`` learned. With ``board``, ``reference`` and a
        ``budget`` (configurations per re-decision), an unsure cap is re-decided on the
        board (``decide_options``: passed to :func:`~powertrain.decisions.decide.decide`, e.g.
        ``r``, ``objective``, ``transfer_options``)."""
        if decision.estimates is None:
            raise DataError("this decision carries no estimates to control from")
        return cls(
            decision.estimates,
            decision.model.inputs_,
            k_sigma=k_sigma,
            board=board,
            reference=reference,
            measurements=decision.measurements,
            budget=budget,
            tolerance=tolerance,
            decide_options=decide_options,
            study=decision.study,
        )

    def unsure(self, power_cap_w: float) -> bool:
        """Whether the cached answer for ``power_cap_w`` could be bettered by measuring:
        nothing measured fits, or the study that made the decision would not stop at this
        cap alone (its sampler's assessment, its stop rule, the controller's tolerance).
        A controller built from bare estimates judges by their cached spreads (each
        unmeasured configuration's expected improvement on the measured pick)."""
        if self.study is not None:
            return not self.study.settled_at(float(power_cap_w), self.tolerance)
        from .samplers.contest import contest

        e = self.estimates
        measured = e["measured"].to_numpy(float) > 0
        cost = e["cost"].to_numpy(float)
        spread = [c for c in e.columns if c.endswith("_std") and c != "power_w_std"]
        if not spread or "power_w_std" not in e:
            return not (measured & (e["power_w"].to_numpy(float) <= power_cap_w)).any()
        time_col = spread[0][: -len("_std")]
        rel = e[spread[0]].to_numpy(float) / np.clip(e[time_col].to_numpy(float), 1e-12, None)
        c = contest(
            cost,
            rel * cost,
            e["power_w"].to_numpy(float),
            e["power_w_std"].to_numpy(float),
            measured,
            np.array([float(power_cap_w)]),
        )
        return bool(c.incumbent[0] < 0 or c.improvement[0].max() > self.tolerance)

    def redecide(self, power_cap_w: float) -> int:
        """Measure up to ``budget`` configurations for ``power_cap_w`` on the board, starting
        from every measurement so far, and answer from the new estimates from then on.
        Returns how many configurations it measured."""
        from .decide import decide

        options = {"tolerance": self.tolerance, **self.decide_options}
        d = decide(
            self.board,
            self.reference,
            float(power_cap_w),
            budget=self.budget,
            candidates=self.estimates[list(self.config_columns)],
            samples=self.measurements,
            start=0,
            **options,
        )
        assert d.estimates is not None
        self.estimates = d.estimates.assign(measured=d.estimates["measured"].astype(float))
        self.measurements = d.measurements  # earlier rows now carry round -1, "given"
        self.study = d.study
        self._measured.append(d.measurements[d.measurements["round"] >= 0])
        self.n_measured += d.n_measured
        self.board_s += d.board_s
        self.redecided.append((float(power_cap_w), d.n_measured))
        return d.n_measured

    def measured(self) -> pd.DataFrame:
        """Every configuration the re-decisions measured, in order (empty: none)."""
        if not self._measured:
            return pd.DataFrame(
                columns=list(self.measurements.columns) if self.measurements is not None else []
            )
        return pd.concat(self._measured, ignore_index=True)

    def config_for(self, power_cap_w: float) -> CapPick:
        """The configuration to run under ``power_cap_w`` (config None: nothing fits);
        re-decided on the board first when the controller has a budget and the cached
        answer is unsure (once per cap)."""
        done = any(math.isclose(c, power_cap_w) for c, _ in self.redecided)
        if self.budget and not done and self.unsure(power_cap_w):
            self.redecide(power_cap_w)

        e = self.estimates
        cost = e["cost"].to_numpy(float)
        power = e["power_w"].to_numpy(float)
        measured = e["measured"].to_numpy(float) > 0
        std = e["power_w_std"].to_numpy(float) if "power_w_std" in e else np.zeros(len(e))

        def config(j: int) -> dict:
            return {c: float(e[c].iloc[j]) for c in self.config_columns}

        j = fastest_measured(measured, power, cost, power_cap_w)
        if j >= 0:
            return CapPick(
                power_cap_w, config(j), True, None, power[j], cost[j], 1.0, "fastest measured"
            )
        guard = np.where(measured, power, power + self.k_sigma * std)
        fits = np.flatnonzero(guard <= power_cap_w)
        if fits.size:
            j = int(fits[np.argmin(cost[fits])])
            return CapPick(
                power_cap_w,
                config(j),
                False,
                None,
                power[j],
                cost[j],
                float("nan"),
                f"nothing measured fits; predicted {power[j]:.1f} W + {self.k_sigma:g} sigma",
            )
        return CapPick(
            power_cap_w,
            None,
            False,
            None,
            None,
            None,
            0.0,
            f"no configuration fits under {power_cap_w:g} W (lowest {guard.min():.1f} W)",
        )


@dataclass
class FollowResult:
    """What :func:`follow` did: one row per stretch run in one configuration."""

    segments: pd.DataFrame
    #: training seconds: the board's clock summed over the minibatches run
    total_s: float
    minibatches: int
    samples: int
    #: board seconds and configurations the controller measured while following
    profiling_s: float = 0.0
    profiled: int = 0


def follow(
    board: Any,
    controller: Any,
    schedule: CapSchedule | Callable[[float, int], float],
    *,
    minibatches: int | None = None,
    samples: int | None = None,
    on_switch: Callable[[float, float, dict], None] | None = None,
) -> FollowResult:
    """Train on ``board`` until ``minibatches`` (or ``samples``) are done, switching the
    configuration between minibatches whenever the schedule's cap changes.

    ``controller``: anything with ``config_for(cap) -> CapPick`` (a
    :class:`CapController`; a benchmark's oracle or re-profiler).

    Parameters
    ----------
    board : backend or Twin
        The board that trains.
    controller : object
        Answers ``config_for(cap) -> CapPick``.
    schedule : CapSchedule or callable
        The cap over time (a callable: ``(elapsed_s, minibatch) -> watts``).
    minibatches, samples : int
        The training length: give one.
    on_switch : callable, optional
        ``on_switch(elapsed_s, cap, config)``, told of every switch.

    Returns
    -------
    FollowResult
        One row per stretch run in one configuration (``segments``), the training
        seconds, and what the controller measured while following.

    Raises
    ------
    NoFeasibleModeError
        When nothing fits a cap, naming the time and the cap.
    """
    from ..backends import as_backend

    board = as_backend(board)
    if (minibatches is None) == (samples is None):
        raise DataError("follow: give the training length as minibatches or samples")
    goal = int(minibatches if minibatches is not None else samples)  # type: ignore[arg-type]
    if goal < 1:
        raise DataError(f"follow: the training length must be >= 1, got {goal}")
    per_sample = samples is not None
    # training time is the board's clock summed over minibatches: a switch's cost shows
    # in the slow first minibatch after it, and a clock that jumps between
    # configurations (the twin's, for reproducibility) does not count as training
    elapsed = 0.0
    done = n = 0
    cap = None
    current: dict | None = None
    segments: list[dict] = []
    start_s = float(getattr(controller, "board_s", 0.0))
    start_n = int(getattr(controller, "n_measured", 0))
    while done < goal:
        new_cap = checked_cap(schedule(elapsed, n), elapsed)
        if new_cap != cap:
            cap = new_cap
            current = _switch(board, controller, cap, elapsed, current, segments, on_switch)
        t0 = board.now()
        board.run_minibatch()
        elapsed += board.now() - t0
        segments[-1]["minibatches"] += 1
        n += 1
        done += int(current.get("batch_size", 1)) if per_sample and current else 1
    segments[-1]["end_s"] = elapsed
    return FollowResult(
        pd.DataFrame(segments),
        elapsed,
        n,
        _samples(segments),
        float(getattr(controller, "board_s", 0.0)) - start_s,
        int(getattr(controller, "n_measured", 0)) - start_n,
    )


def _switch(
    board: Any,
    controller: Any,
    cap: float,
    elapsed: float,
    current: dict | None,
    segments: list[dict],
    on_switch: Callable[[float, float, dict], None] | None,
) -> dict:
    """Ask the controller for ``cap``'s pick and apply it; a new segment starts where the
    configuration changes (or where the controller measured on this board meanwhile)."""
    before = getattr(controller, "n_measured", 0)
    pick = controller.config_for(cap)
    if pick.config is None:
        raise NoFeasibleModeError(f"at {elapsed:.0f} s the cap is {cap:g} W: {pick.reason}")
    if (
        current is not None
        and pick.config == current
        and getattr(controller, "n_measured", 0) == before
    ):
        return current
    if segments:
        segments[-1]["end_s"] = elapsed
    current = dict(pick.config)
    board.configure(current)
    segments.append(
        {"start_s": elapsed, "power_cap_w": cap, **current, "measured": pick.measured,
         "minibatches": 0}
    )  # fmt: skip
    if on_switch is not None:
        on_switch(elapsed, cap, current)
    return current


def _samples(segments: list[dict]) -> int:
    return int(sum(s["minibatches"] * int(s.get("batch_size", 1)) for s in segments))
