"""A decision's settings and the one check of its inputs, shared by every driver.

Why one check: ``decide``, the :class:`~powertrain.decisions.tuner.Tuner` and the
training callbacks take the same board, reference, caps, candidates, r and seed. Checked
in one place they fail the same way, at once, naming the argument: a Tuner must not go
quiet with a warning, or fail mid-training, on an input that ``decide`` refuses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import DataError
from .optimise import _number

#: what a decision minimises among the configurations under a cap
OBJECTIVES = ("time", "energy")
#: what a round of the loop measures (decide's ``acquisition``)
ACQUISITIONS = ("improvement", "probability")
#: how long each configuration is measured (decide's ``protocol``): until its mean time
#: and power are known to SETTLE_TOL relative standard error, or ``n_minibatches``
PROTOCOLS = ("settled", "fixed")
SETTLE_TOL = 0.01
#: the fewest measured configurations a transfer accepts (Predictor.transfer)
MIN_TRANSFER = 5
#: the stop's bound on the expected relative loss (table) or a challenger's expected
#: improvement (contest), for every driver (decide, the Tuner, the cap controller).
#: Chosen on the tuning corpora only (Orin AGX MobileNetV3 and ResNet-18, 34 caps
#: 17-50 W, budget 50, 8 draws each, the spread scaled by the network's own
#: out-of-sample errors): at 1 % the table stopped at a median of 40 measured with a
#: 1.65 % median penalty, at 0.5 % at 47 with 1.15 %
TOLERANCE = 0.005


@dataclass
class Settings:
    """A decision's settings, grouped: the budget, the stop, the model of what is
    unmeasured, the measurement protocol and the choice (see
    :func:`~powertrain.decisions.decide.decide` for each)."""

    # the budget: how many configurations, how many first, how many a round
    budget: int = 50
    start: int | None = None
    per_round: int = 2
    # the stop
    confidence: float = 0.9
    patience: int = 4
    tolerance: float = TOLERANCE
    # the strategy (a sampler's name), its model of what is unmeasured, what a round measures
    method: str = "table"
    correlation: float | None = None
    acquisition: str = "improvement"
    draws: int = 512
    seed: int = 0
    # the measurement protocol
    protocol: str = "settled"
    n_minibatches: int = 40
    # the choice
    objective: str = "time"
    accept_unmeasured: float | None = None
    cap_weights: Sequence[float] | None = None
    # exploring under the cap too (:mod:`~powertrain.decisions.hard_cap`)
    hard_cap: bool = False

    def checked(self, given: int) -> Settings:
        """These settings with each one checked (an error names it) and ``start`` set
        (default ``MIN_TRANSFER``, the fewest a transfer takes: on the tuning corpora a
        start of 10 spent five measurements far from any cap's pick; ``given``: earlier
        measurements)."""
        _choice("objective", self.objective, OBJECTIVES)
        _choice("protocol", self.protocol, PROTOCOLS)
        _choice("acquisition", self.acquisition, ACQUISITIONS)
        integer("budget", self.budget, 1, "an integer >= 1 (a number of configurations)")
        integer("per_round", self.per_round, 1, "a positive integer")
        integer("patience", self.patience, 0, "an integer >= 0 (rounds)")
        integer("draws", self.draws, 1, "a positive integer")
        integer("seed", self.seed, 0, "an integer >= 0")
        integer("n_minibatches", self.n_minibatches, 1, "an integer >= 1")
        _probability("confidence", self.confidence)
        if not isinstance(self.hard_cap, bool):
            raise DataError(f"hard_cap must be True or False, got {self.hard_cap!r}")
        if self.accept_unmeasured is not None:
            _probability("accept_unmeasured", self.accept_unmeasured)
        tol = self.tolerance
        real = isinstance(tol, (int, float, np.integer, np.floating)) and not isinstance(tol, bool)
        if not (real and 0 <= tol < 1):
            raise DataError(f"tolerance must be a fraction in [0, 1), got {tol!r}")
        if self.correlation is not None:
            _number("correlation", self.correlation)
        start = MIN_TRANSFER if self.start is None else self.start
        least = max(0, MIN_TRANSFER - int(given))
        if isinstance(start, bool) or not isinstance(start, (int, np.integer)) or start < least:
            raise DataError(
                f"start must be an integer >= {least} (a transfer needs at least "
                f"{MIN_TRANSFER} measured configurations), got {start!r}"
            )
        # measured before the first transfer, the given ones included: at most all there is
        self.start = min(int(start), int(self.budget) + int(given))
        return self


def _choice(name: str, value: Any, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise DataError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")


def _probability(name: str, value: Any) -> None:
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if not (ok and 0 < value < 1):
        raise DataError(f"{name} must be a probability in (0, 1), got {value!r}")


def integer(name: str, value: Any, minimum: int, what: str) -> int:
    """An integer argument at least ``minimum``, else an error naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise DataError(f"{name} must be {what}, got {value!r}")
    return int(value)


# ------------------------------------------------------------------------ the caps --
def cap_values(power_cap_w: float | Sequence[float]) -> list[float]:
    """One cap or several, as given (each a finite positive number of watts)."""
    if isinstance(power_cap_w, (str, bytes)):
        raise DataError(
            f"power_cap_w must be watts or a list of watts, got the text {power_cap_w!r}: "
            "pass a number (30) or numbers ([20, 30])"
        )
    if isinstance(power_cap_w, (int, float, np.integer, np.floating)) and not isinstance(
        power_cap_w, bool
    ):
        values = [power_cap_w]
    else:
        try:
            values = list(power_cap_w)  # type: ignore[arg-type]
        except TypeError:
            raise DataError(
                f"power_cap_w must be watts or a list of watts, got {power_cap_w!r}"
            ) from None
    if not values:
        raise DataError("power_cap_w: give at least one cap in watts")
    return [_number("power_cap_w", v, positive=True) for v in values]


def check_caps(power_cap_w: float | Sequence[float]) -> np.ndarray:
    """One cap or several, as a sorted array of distinct positive watts."""
    return np.unique(np.asarray(cap_values(power_cap_w), dtype=float))


def cap_weights(
    power_cap_w: float | Sequence[float], caps: np.ndarray, weights: Sequence[float] | None
) -> np.ndarray:
    """How much each of the sorted ``caps`` counts in a table's loss: uniform unless the
    caller says. ``weights`` go with the caps *as given* (``power_cap_w``), one each,
    and follow them into sorted order: ``[40, 20]`` with ``[1, 0]`` weighs 40 W."""
    if weights is None:
        return np.full(len(caps), 1.0 / len(caps))
    given = cap_values(power_cap_w)
    try:
        w = np.asarray([_number("cap_weights", v) for v in weights], float)
    except TypeError:
        raise DataError(f"cap_weights: give a list of numbers, got {weights!r}") from None
    if len(w) != len(given) or not w.sum() > 0:
        raise DataError(
            f"cap_weights: give one weight >= 0 per cap ({len(given)}), not all 0; got {len(w)}"
        )
    out = np.zeros(len(caps))
    for cap, weight in zip(given, w):
        c = int(np.searchsorted(caps, cap))
        if out[c] and out[c] != weight:
            raise DataError(f"cap_weights: the cap {cap:g} W is given twice with two weights")
        out[c] = weight
    return out / out.sum()


def checked_cap(cap: Any, elapsed_s: float) -> float:
    """A schedule's answer as watts: a finite positive number, else an error naming the
    time and the value (a plain callable schedule is checked too)."""
    ok = isinstance(cap, (int, float, np.number)) and not isinstance(cap, bool)
    if not (ok and math.isfinite(cap) and cap > 0):
        raise DataError(
            f"the cap schedule returned {cap!r} at {elapsed_s:.0f} s: a cap must be positive watts"
        )
    return float(cap)


def cap_schedule(power_cap_w: Any) -> Callable[[float, int], float]:
    """A cap in watts, or a schedule ``(elapsed_s, minibatch) -> W`` whose answers are
    checked each time (its first, at 0 s, at once: a bad schedule fails before training)."""
    if callable(power_cap_w):
        checked_cap(power_cap_w(0.0, 0), 0.0)

        def checked(elapsed_s: float, minibatch: int) -> float:
            return checked_cap(power_cap_w(elapsed_s, minibatch), elapsed_s)

        return checked
    if isinstance(power_cap_w, bool) or not isinstance(power_cap_w, (int, float, np.number)):
        raise DataError(f"power_cap_w must be watts or a schedule, got {power_cap_w!r}")
    if not (math.isfinite(power_cap_w) and power_cap_w > 0):
        raise DataError(f"power_cap_w must be positive watts, got {power_cap_w!r}")
    cap = float(power_cap_w)
    return lambda elapsed_s, minibatch: cap


# ------------------------------------------------------------ board and reference --
def check_board(board: Any) -> Any:
    """``board`` as a Backend (a :class:`~powertrain.Twin` is adapted), else an error
    naming what was given."""
    from ..backends import as_backend

    try:
        return as_backend(board)
    except TypeError as e:
        raise DataError(f"board: {e}") from None


def check_budget(budget: int, given: int, inputs: Sequence[str], columns: Sequence[str]) -> None:
    """A budget too small for the first transfer (one measured row per knob the reference
    reads, and at least :data:`~powertrain.predictor.checks.MIN_SAMPLES`, ``given``
    rows counted) is refused before anything is measured, not after."""
    from ..predictor.checks import MIN_SAMPLES

    need = max(MIN_SAMPLES, sum(1 for c in inputs if c in set(columns)))
    if budget + given < need:
        raise DataError(
            f"budget must be >= {need - given} (a transfer needs at least {need} measured "
            f"configurations, {given} given), got {budget}"
        )


def check_samples(samples: Any) -> Any:
    """Earlier measurements to start from (``samples``): None, or a table every row of
    which is a measurement (:func:`~powertrain.schema.check_measurements`), else an error:
    a ``predict`` output taken as measurements would be picked as measured."""
    if samples is None:
        return None
    import pandas as pd

    from ..schema import check_measurements

    if not isinstance(samples, pd.DataFrame):
        raise DataError(
            f"samples must be a DataFrame of measurements, got {type(samples).__name__}"
        )
    check_measurements(samples, "samples")
    return samples


def check_reference(reference: Any, who: str = "") -> tuple[tuple[str, ...], str]:
    """A fitted reference that predicts ``power_w`` and one time column: (its inputs,
    its time column), else an error naming what is wrong."""
    inputs = getattr(reference, "inputs_", None)
    targets = getattr(reference, "targets_", None)
    if inputs is None or targets is None or not callable(getattr(reference, "transfer", None)):
        raise DataError(
            f"{who}reference must be a fitted powertrain.Predictor (Predictor.fit or "
            f"Predictor.from_pretrained), got {type(reference).__name__}"
        )
    if "power_w" not in targets:
        raise DataError(
            f"{who}the reference predicts {', '.join(targets)}; a decision needs power_w"
        )
    return tuple(inputs), next(t for t in targets if t != "power_w")
