"""The papers' figures of merit (PowerTrain §4–5), computed one way everywhere.

Why: benchmarks, the demo and the notebooks must report the same MAPE and optimisation
metrics the papers do, or the comparisons beside the papers' numbers mean nothing.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def mape(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """Mean absolute percentage error of ``y_pred`` against ``y_true``, in percent
    (argument order as scikit-learn's ``mean_absolute_percentage_error``)."""
    a = np.asarray(y_true, dtype=float)
    p = np.asarray(y_pred, dtype=float)
    if p.shape != a.shape:
        raise ValueError(f"mape: shapes differ {p.shape} vs {a.shape}")
    return float(np.mean(np.abs(p - a) / np.abs(a)) * 100.0)


def time_penalty_pct(
    chosen_true_time: ArrayLike, optimal_true_time: ArrayLike
) -> float | np.ndarray:
    """How much slower (in %) the chosen configuration truly is than the true optimum
    (any cost: time, energy, time to accuracy). Scalars give a float, arrays an array."""
    pct = (np.asarray(chosen_true_time, dtype=float) / optimal_true_time - 1.0) * 100.0
    return float(pct) if np.ndim(pct) == 0 else pct


def excess_power(true_power: ArrayLike, caps: ArrayLike) -> dict[str, float]:
    """Over a sweep of caps: A/L % (true power above the cap), A/L+1 % (above by > 1 W) and
    the excess-power AUC normalised per solution (W per solution), as in PowerTrain §5."""
    p = np.asarray(true_power, dtype=float)
    c = np.asarray(caps, dtype=float)
    excess = np.clip(p - c, 0.0, None)
    return {
        "above_limit_pct": float(np.mean(p > c) * 100.0),
        "above_limit_1w_pct": float(np.mean(p > c + 1.0) * 100.0),
        "excess_auc_w": float(excess.mean()),
    }
