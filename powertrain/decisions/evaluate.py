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

from ..errors import DataError, NoFeasibleModeError
from ..metrics import excess_power, time_penalty_pct
from .optimise import columns_of, fastest_under


def cap_sweep(
    estimates: pd.DataFrame,
    truth: pd.DataFrame,
    caps: Sequence[float],
    margin_w: float = 0.0,
    k_sigma: float = 0.0,
    model: object = None,
) -> tuple[pd.DataFrame, dict]:
    """Per-cap picks from ``estimates`` scored against ``truth`` (same index, same rows).

    Returns the per-cap table (cap, picked row, its true time and power, the true
    optimum's time, penalty %) and a summary: median and Q1-Q3 penalty, A/L %, A/L+1 %,
    excess-power AUC (W per solution). Caps under which neither the model nor the truth
    has a feasible mode are skipped (and counted in ``skipped``). The time and power
    columns are the ``model``'s targets, else the table's (``time_ms`` per minibatch or
    ``epoch_s`` per epoch); the table's time columns keep their names
    (``true_time_ms``/``optimum_time_ms``, or ``true_epoch_s``/``optimum_epoch_s``).
    """
    if not estimates.index.equals(truth.index):
        raise DataError("cap_sweep: estimates and truth must have the same rows (same index)")
    watts = np.asarray(list(caps), dtype=float)
    if watts.size == 0 or not np.all(np.isfinite(watts) & (watts > 0)):
        raise DataError(f"cap_sweep: caps must be a non-empty list of positive watts, got {watts}")
    cols = columns_of(estimates, model)
    for c in (cols.time, cols.power):
        if c not in truth.columns:
            raise DataError(f"cap_sweep: truth has no column '{c}' (the estimates' target)")
    t, p = truth[cols.time].to_numpy(float), truth[cols.power].to_numpy(float)
    rows, skipped = [], 0
    for cap in watts:
        ok = p <= cap
        try:
            pick = fastest_under(
                estimates, float(cap), margin_w=margin_w, k_sigma=k_sigma, time=cols.time,
                power=cols.power,
            ).name  # fmt: skip
        except NoFeasibleModeError:
            skipped += 1
            continue
        if not ok.any():
            skipped += 1
            continue
        j = truth.index.get_loc(pick)
        best = float(t[ok].min())
        rows.append(
            {
                "cap_w": cap,
                "pick": pick,
                f"true_{cols.time}": t[j],
                "true_power_w": p[j],
                f"optimum_{cols.time}": best,
                "penalty_pct": time_penalty_pct(t[j], best),
            }
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
