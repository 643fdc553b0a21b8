"""Choosing configurations from predicted (or measured) time and power.

Why: the predictor's output is only useful through these two questions — which
configurations are worth considering at all (the time–power Pareto front), and which one
trains fastest under a power cap. The selection never returns a configuration whose
predicted power (plus the requested safety margin) exceeds the cap.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .errors import DataError, NoFeasibleModeError
from .schema import check_columns


def pareto_front(est: pd.DataFrame, time: str = "time_ms", power: str = "power_w") -> pd.DataFrame:
    """Rows not dominated in (power, time): no other row is at least as good in both and
    better in one. Sorted by power ascending (time then falls along the front)."""
    df = check_columns(est, [time, power], source="pareto_front", positive=[time, power])
    order = np.lexsort((df[time].to_numpy(), df[power].to_numpy()))
    t = df[time].to_numpy()[order]
    best_so_far = np.minimum.accumulate(t)
    keep = np.ones(len(t), dtype=bool)
    keep[1:] = t[1:] < best_so_far[:-1]
    return est.iloc[order[keep]]


def fastest_under(
    est: pd.DataFrame,
    power_cap_w: float,
    margin_w: float = 0.0,
    k_sigma: float = 0.0,
    time: str = "time_ms",
    power: str = "power_w",
) -> pd.Series:
    """The fastest row whose predicted power + ``margin_w`` + ``k_sigma`` x ``power_w_std``
    stays within ``power_cap_w``.

    ``time`` may name any cost column to minimise (e.g. a time-to-accuracy column). With
    ``k_sigma`` > 0 the predictor's uncertainty buys a safety margin. Raises
    :class:`NoFeasibleModeError` naming the lowest reachable power when nothing fits.
    """
    power_cap_w = _number("power_cap_w", power_cap_w, positive=True)
    margin_w = _number("margin_w", margin_w)
    k_sigma = _number("k_sigma", k_sigma)
    cols = [time, power] + (["power_w_std"] if k_sigma > 0 else [])
    if k_sigma > 0 and "power_w_std" not in est.columns:
        raise DataError("k_sigma > 0 needs a 'power_w_std' column (predict with a Predictor)")
    df = check_columns(est, cols, source="fastest_under", positive=[time, power])
    guard = df[power] + margin_w
    if k_sigma > 0:
        std = df["power_w_std"]
        if (std < 0).any():
            i = int(np.flatnonzero((std < 0).to_numpy())[0])
            raise DataError(
                f"fastest_under: row {i + 1}, column 'power_w_std': {std.iloc[i]!r} is "
                "negative; a spread must be >= 0"
            )
        guard = guard + k_sigma * std
    feasible = guard <= power_cap_w
    if not feasible.any():
        raise NoFeasibleModeError(
            f"no configuration fits under {power_cap_w:g} W: the lowest guarded power is "
            f"{guard.min():.2f} W (predicted {df[power].min():.2f} W, margin {margin_w:g} W, "
            f"k_sigma {k_sigma:g})"
        )
    candidates = np.flatnonzero(feasible.to_numpy())
    best = candidates[np.argmin(df[time].to_numpy()[candidates])]
    # belt and braces: whatever happened above, never hand back a row over the cap
    if not float(guard.iloc[best]) <= power_cap_w:
        raise AssertionError(f"fastest_under picked row {best + 1} above the {power_cap_w} W cap")
    return est.iloc[best]


def _number(name: str, value: object, positive: bool = False) -> float:
    """A finite real number (>= 0, or > 0 when ``positive``), else an error naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise DataError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    v = float(value)
    if not np.isfinite(v) or v < 0 or (positive and v == 0):
        need = "> 0" if positive else ">= 0"
        raise DataError(f"{name} must be a finite number {need}, got {value!r}")
    return v
