"""How good are a model's decisions, where the truth is known (the twin, a full corpus)?

Why: MAPE over all modes says little about the one thing users buy — the pick under a
cap. This scores the picks of ``fastest_under`` over a sweep of caps the way PowerTrain
§5 does: time penalty against the true optimum under each cap (whether or not the pick
overshoots), and how often and by how much the pick's true power exceeds the cap.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from .errors import DataError, NoFeasibleModeError
from .metrics import excess_power
from .optimise import fastest_under


def cap_sweep(
    estimates: pd.DataFrame,
    truth: pd.DataFrame,
    caps: Sequence[float],
    margin_w: float = 0.0,
    k_sigma: float = 0.0,
) -> tuple[pd.DataFrame, dict]:
    """Per-cap picks from ``estimates`` scored against ``truth`` (same index, same rows).

    Returns the per-cap table (cap, picked row, its true time and power, the true
    optimum's time, penalty %) and a summary: median and Q1-Q3 penalty, A/L %, A/L+1 %,
    excess-power AUC (W per solution). Caps under which neither the model nor the truth
    has a feasible mode are skipped (and counted in ``skipped``).
    """
    if not estimates.index.equals(truth.index):
        raise DataError("cap_sweep: estimates and truth must have the same rows (same index)")
    caps = np.asarray(list(caps), dtype=float)
    if caps.size == 0 or not np.all(np.isfinite(caps) & (caps > 0)):
        raise DataError(f"cap_sweep: caps must be a non-empty list of positive watts, got {caps}")
    t, p = truth["time_ms"].to_numpy(float), truth["power_w"].to_numpy(float)
    rows, skipped = [], 0
    for cap in caps:
        ok = p <= cap
        try:
            pick = fastest_under(estimates, float(cap), margin_w=margin_w, k_sigma=k_sigma).name
        except NoFeasibleModeError:
            skipped += 1
            continue
        if not ok.any():
            skipped += 1
            continue
        j = truth.index.get_loc(pick)
        best = float(t[ok].min())
        rows.append(
            dict(
                cap_w=cap,
                pick=pick,
                true_time_ms=t[j],
                true_power_w=p[j],
                optimum_time_ms=best,
                penalty_pct=100.0 * (t[j] / best - 1.0),
            )
        )
    table = pd.DataFrame(rows)
    if table.empty:
        raise DataError("cap_sweep: no cap of the sweep has a feasible mode")
    q1, med, q3 = np.percentile(table.penalty_pct, [25, 50, 75])
    summary = {
        "penalty_median_pct": float(med),
        "penalty_q1_pct": float(q1),
        "penalty_q3_pct": float(q3),
        **excess_power(table.true_power_w, table.cap_w),
        "caps": int(len(table)),
        "skipped": skipped,
    }
    return table, summary
