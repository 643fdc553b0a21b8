"""Spend part of the profiling budget where the decisions are: on the predicted front.

Why: a cap decision only needs the predictor to be right about the few modes that could
be the fastest under some cap, yet a random sample of 50 modes puts most of its budget
in slow or power-hungry corners. Profiling some random modes first, transferring, and
then profiling the modes the model would *pick* across the caps of interest checks the
candidates themselves; retraining on them sharpens the model where it matters, and a
profiled candidate's own measurement can stand in for its prediction
(:func:`with_observed`). The total number of profiled modes is the same.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from ..errors import DataError, NoFeasibleModeError
from ..schema import check_columns, shown_columns
from .optimise import columns_of, fastest_under, pareto_front


def _keys(df: pd.DataFrame, columns: Sequence[str]) -> pd.Series:
    return df[list(columns)].round(3).astype(str).agg("/".join, axis=1)


def _knobs(table: pd.DataFrame, columns: Sequence[str] | None, what: str) -> list[str]:
    """The configuration columns: as given, else the knobs of the table's device."""
    if columns is not None:
        return list(columns)
    knobs = columns_of(table).knobs
    if not knobs:
        raise DataError(
            f"{what}: cannot tell which columns are the device's knobs (found "
            f"{shown_columns(table.columns)}); pass columns=[...]"
        )
    return list(knobs)


def refine_modes(
    estimates: pd.DataFrame,
    n: int,
    power_range: tuple[float, float],
    exclude: pd.DataFrame | None = None,
    columns: Sequence[str] | None = None,
) -> pd.DataFrame:
    """The ``n`` modes most worth profiling next, from a model's ``estimates``.

    First the predicted fastest mode under each of ``n`` caps spread evenly over
    ``power_range`` (watts), then — if those coincide — more modes of the predicted
    Pareto front inside the range, from the middle outwards.

    Parameters
    ----------
    estimates : DataFrame
        A model's predictions over the candidate modes.
    n : int
        How many modes to return (>= 1).
    power_range : (float, float)
        The lowest and highest cap of interest, in watts.
    exclude : DataFrame, optional
        Modes already profiled: skipped.
    columns : sequence of str, optional
        What makes a mode; default the device's knobs. The time column is the table's
        (``time_ms`` per minibatch or ``epoch_s``).

    Returns
    -------
    DataFrame
        At most ``n`` rows of ``estimates``.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise DataError(f"n must be a positive integer, got {n!r}")
    lo, hi = (float(v) for v in power_range)
    if not (np.isfinite(lo) and np.isfinite(hi) and 0 < lo <= hi):
        raise DataError(f"power_range must be two positive watts, low <= high; got {power_range!r}")
    columns = _knobs(estimates, columns, "refine_modes")
    cols = columns_of(estimates)
    est = check_columns(estimates, [*columns, cols.time, cols.power], source="refine_modes")
    est = est.reset_index(drop=True)  # by position: any index, duplicated labels too
    keys = _keys(est, columns)
    taken = set() if exclude is None else set(_keys(exclude, columns))
    chosen: list = []

    def take(label) -> None:
        k = keys.loc[label]
        if k not in taken and len(chosen) < n:
            taken.add(k)
            chosen.append(label)

    for cap in np.linspace(lo, hi, int(n)):
        try:
            take(fastest_under(est, float(cap)).name)
        except NoFeasibleModeError:
            continue
    if len(chosen) < n:
        front = pareto_front(est)
        power = front[cols.power]
        inside = front[(power >= lo) & (power <= hi)]
        mid = len(inside) // 2
        order = sorted(range(len(inside)), key=lambda i: abs(i - mid))
        for i in order:
            take(inside.index[i])
    return estimates.iloc[chosen]


def with_observed(
    estimates: pd.DataFrame, samples: pd.DataFrame, columns: Sequence[str] | None = None
) -> pd.DataFrame:
    """``estimates`` with the measured time and power of every profiled mode in
    ``samples`` in place of the prediction (and a zero spread: it was measured).

    Why: a pick among profiled candidates should rest on what the board showed, not on
    a model that smooths over it.

    Parameters
    ----------
    estimates : DataFrame
        A model's predictions.
    samples : DataFrame
        What the board measured.
    columns : sequence of str, optional
        What makes a configuration; default the device's knobs (plus the batch size
        when both tables have it). The targets are the table's time and power.

    Returns
    -------
    DataFrame
        A copy of ``estimates``, measured rows at their measured values with spread 0.
    """
    if columns is None:  # the batch size is part of a configuration when both tables have it
        both = "batch_size" in estimates.columns and "batch_size" in samples.columns
        columns = [*_knobs(estimates, None, "with_observed"), *(["batch_size"] if both else [])]
    found = columns_of(estimates)
    targets = [found.time, found.power]
    cols = [*columns, *targets]
    check_columns(samples, cols, source="with_observed: samples")
    out = estimates.copy()
    measured = samples.assign(_key=_keys(samples, columns)).groupby("_key")[targets].mean()
    keys = _keys(out, columns)
    hit = keys.isin(measured.index).to_numpy()
    for c in targets:
        out.loc[hit, c] = measured.loc[keys[hit], c].to_numpy()
        std = f"{c}_std"
        if std in out.columns:
            out.loc[hit, std] = 0.0
    return out
