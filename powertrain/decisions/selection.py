"""The joint choice of batch size and power mode: fastest (or least energy) to accuracy
under a power cap ("Accelerated training on low-power edge devices", eq. 1-2).

Why: a power mode picked for one batch size is not the fastest way to a trained model.
Time to accuracy is time per sample x samples to target: TT_acc(b, mode) =
time_ms(b, mode) / b x N(b), where N(b) comes from the r vector (its ``samples``
column when given, else r itself, which only ranks and cannot meet a deadline). A
per-epoch table (a GPU corpus: ``epoch_s``) takes epochs to target instead:
TT_acc = epoch_s x epochs(b), from an r with an ``epochs`` column (else r, to rank).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..data.batch_efficiency import RSource, load_r
from ..errors import DataError, NoFeasibleModeError
from ..schema import check_columns, shown_columns
from .optimise import _number, columns_of, pick_under

OBJECTIVES = ("time", "energy")


def time_to_accuracy(estimates: pd.DataFrame, r: RSource, time: str | None = None) -> pd.DataFrame:
    """``estimates`` plus ``tt_acc`` (seconds when r is absolute, else relative units)
    and ``energy_acc`` (J, or relative), for every row; r must cover each batch size.

    Parameters
    ----------
    estimates : DataFrame
        Predictions or measurements with ``batch_size``, a time and a power column.
    r : dict, DataFrame, str or Path
        Batch-size efficiency, as :func:`~powertrain.load_r` reads it: a relative ``r``
        (ranks only), ``samples`` to the target, or ``epochs`` to it.
    time : str, optional
        The table's time column: ``time_ms`` per minibatch (absolute with an r of
        ``samples``) or ``epoch_s`` per epoch (absolute with an r of ``epochs``); default
        the one the table holds.

    Returns
    -------
    DataFrame
        ``estimates`` with the columns ``tt_acc`` and ``energy_acc`` added.

    Raises
    ------
    DataError
        Without a ``batch_size`` or time column, for a batch size r lacks, or for an r in
        ``epochs`` with per-minibatch times.
    """
    if "batch_size" not in estimates.columns:
        raise DataError("estimates need a batch_size column to join with the r vector")
    cols = columns_of(estimates)
    time = time or cols.time
    if time not in estimates.columns:
        raise DataError(f"estimates have no time column '{time}' (found "
                        f"{shown_columns(estimates.columns)})")  # fmt: skip
    rv = load_r(r)
    have = set(rv.batch_size)
    sizes = set(estimates["batch_size"].astype(int))
    missing = sorted(sizes - have)
    if missing:
        raise DataError(
            f"the r vector has no entry for batch size(s) {missing} of the estimates "
            f"(r covers {sorted(have)})"
        )
    b = estimates["batch_size"].astype(int)
    t = estimates[time].astype(float)
    per_epoch = time == "epoch_s"
    if per_epoch:  # epochs to target when known, else r (proportional to it)
        n = rv.set_index("batch_size")["epochs" if "epochs" in rv.columns else "r"]
        tt = t * b.map(n).astype(float).to_numpy()
    else:
        if "epochs" in rv.columns:
            raise DataError(
                f"an r in epochs needs per-epoch times (epoch_s); these estimates have "
                f"{time!r} per minibatch: give r as samples (or r) to target"
            )
        n = rv.set_index("batch_size")["samples" if "samples" in rv.columns else "r"]
        tt = t / 1e3 / b * b.map(n).astype(float).to_numpy()
    out = estimates.assign(tt_acc=tt.to_numpy())
    return out.assign(energy_acc=out["tt_acc"] * out[cols.power].astype(float))


def _absolute(rv: pd.DataFrame, time: str) -> bool:
    """Whether r gives time to accuracy in seconds for this time column."""
    return ("epochs" if time == "epoch_s" else "samples") in rv.columns


def select(
    estimates: pd.DataFrame,
    r: RSource,
    power_cap_w: float,
    objective: str = "time",
    deadline_s: float | None = None,
    margin_w: float = 0.0,
    k_sigma: float | None = None,
    source: str = "select",
) -> pd.Series:
    """The (batch size, power mode) row minimising time (or energy) to accuracy whose
    predicted power + margin + k_sigma x power_w_std stays within ``power_cap_w``.

    A measured row (:func:`~powertrain.schema.measured_rows`: a profiling output) is
    judged by its measured power, as ``decide`` judges one. Ties are broken by lower
    power, then smaller batch size, then the row order, so the same input always gives
    the same pick.

    Parameters
    ----------
    estimates : DataFrame
        Predictions (:meth:`Predictor.predict`; ``power_w_std`` for a margin in sigmas)
        or measurements, with ``batch_size``, a time and a power column.
    r : dict, DataFrame, str or Path
        Batch-size efficiency (:func:`time_to_accuracy`), covering every batch size.
    power_cap_w : float
        The power cap in watts (> 0).
    objective : str
        ``"time"`` (default) or ``"energy"`` to accuracy.
    deadline_s : float, optional
        The seconds to reach the target by (needs absolute ``samples`` in r, or ``epochs``
        for a per-epoch table); with "energy": the cheapest way to finish by then.
    margin_w : float
        A fixed safety margin in watts kept below the cap.
    k_sigma : float, optional
        Predicted standard deviations of power kept below the cap on predicted rows;
        None (default): :data:`~powertrain.decisions.optimise.SAFE_K_SIGMA` where the
        table has ``power_w_std``, else 0; ``k_sigma=0`` is the paper's plain pick.
    source : str
        Names the table in errors (a file name).

    Returns
    -------
    Series
        The chosen row, with ``tt_acc`` and ``energy_acc``; ``attrs["how"]``: how it was
        judged ("measured", "predicted with a margin (3 sigma)" or "predicted").

    Raises
    ------
    NoFeasibleModeError
        Nothing fits (naming the lowest reachable power) or reaches the target in time.
    DataError
        An unknown ``objective``, a deadline without absolute r, a malformed table or r.
    """
    if objective not in OBJECTIVES:
        raise DataError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    cols = columns_of(estimates)
    if cols.time in estimates.columns:  # rows named as given, before they are reordered
        check_columns(estimates, [cols.time, cols.power], source, positive=[cols.power])
    est = time_to_accuracy(estimates, r)
    if deadline_s is not None:
        deadline_s = _number("deadline_s", deadline_s, positive=True)
        if not _absolute(load_r(r), cols.time):
            need = "epochs" if cols.time == "epoch_s" else "samples"
            raise DataError(
                f"deadline_s needs absolute {need} to target (an r with a '{need}' column)"
            )
        est = est[est["tt_acc"] <= deadline_s]
        if est.empty:
            raise NoFeasibleModeError(
                f"no configuration reaches the target within {deadline_s:g} s"
            )
    cost = "tt_acc" if objective == "time" else "energy_acc"
    # deterministic ties: cost, then power, then batch size, then the original order
    keys = (est["batch_size"].to_numpy(), est[cols.power].to_numpy(), est[cost].to_numpy())
    order = np.lexsort((np.arange(len(est)), *keys))
    return pick_under(
        est.iloc[order], power_cap_w, margin_w=margin_w, k_sigma=k_sigma, time=cost,
        power=cols.power, source=source,
    )  # fmt: skip
