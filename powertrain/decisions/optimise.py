"""Choosing configurations from predicted (or measured) time and power.

Why: the predictor's output is only useful through these two questions — which
configurations are worth considering at all (the time–power Pareto front), and which one
trains fastest under a power cap. The selection never returns a configuration whose
predicted power (plus the requested safety margin) exceeds the cap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..errors import DataError, NoFeasibleModeError
from ..schema import check_columns, measured_rows

#: the time columns a table may carry: per minibatch (Jetson profiling) or per epoch (GPUs)
TIME_COLUMNS = ("time_ms", "epoch_s")
#: the power column every table carries
POWER_COLUMN = "power_w"
#: the margin, in predicted standard deviations of power, that a prediction-only pick gets
#: by default where a user meets it (``pt.select``, ``powertrain select``, the demo, fleet
#: reports), on top of the power guard (``power_w_max``). Chosen by
#: benchmarks/select_margin.py on real traces: the smallest margin with the fewest V100
#: picks (the tuning split) more than 1 W over their cap; A40 is held out (docs: Results).
SAFE_K_SIGMA = 3.0


@dataclass(frozen=True)
class TableColumns:
    """Which columns of a table are the configuration, its time and its power."""

    knobs: tuple[str, ...]  # the device's settings
    config: tuple[str, ...]  # the knobs, plus batch_size where the table has it
    time: str
    power: str


def columns_of(table: pd.DataFrame, model: Any = None, device: Any = None) -> TableColumns:
    """The configuration, time and power columns of ``table``.

    Why: a per-minibatch Jetson table (``time_ms``, four knobs) and a per-epoch GPU table
    (``epoch_s``, ``power_limit_w``) go through the same decisions; the names come from
    the ``model`` (its inputs and targets) when given, else from the ``device`` (an
    argument, the table's ``device`` column, or the catalog device whose knobs the table
    has), and the time column is whichever of :data:`TIME_COLUMNS` the table holds.
    """
    from ..devices.device import get_device, table_device

    if model is not None and hasattr(model, "targets_"):
        time, power = model.targets_[0], model.targets_[-1]
        config = tuple(model.inputs_)
        knobs = tuple(c for c in config if c != "batch_size")
        return TableColumns(knobs, config, time, power)
    cols = set(table.columns)
    dev = get_device(device) if device is not None else table_device(table)
    if dev is None:
        dev = _catalog_device_for(cols)
    knobs = tuple(dev.knobs) if dev is not None else ()
    config = knobs + (("batch_size",) if "batch_size" in cols else ())
    return TableColumns(knobs, config, time_column(table), POWER_COLUMN)


def time_column(table: pd.DataFrame) -> str:
    """The table's time column: the first of :data:`TIME_COLUMNS` it has (``time_ms``
    when it has none, so the missing-column error names the usual one)."""
    have = getattr(table, "columns", ())
    return next((c for c in TIME_COLUMNS if c in have), TIME_COLUMNS[0])


def _catalog_device_for(columns: set) -> Any:
    """The catalog device whose knobs the table has (the one with most knobs wins)."""
    from ..devices.device import get_device
    from ..devices.specs import device_names

    best = None
    for name in device_names():
        dev = get_device(name)
        if set(dev.knobs) <= columns and (best is None or len(dev.knobs) > len(best.knobs)):
            best = dev
    return best


def pareto_front(
    est: pd.DataFrame, time: str | None = None, power: str = POWER_COLUMN
) -> pd.DataFrame:
    """Rows not dominated in (power, time): no other row is at least as good in both and
    better in one.

    Parameters
    ----------
    est : DataFrame
        Estimates or measurements, one row per configuration.
    time : str, optional
        The time column; default the table's own (``time_ms`` or ``epoch_s``).
    power : str
        The power column (``power_w``).

    Returns
    -------
    DataFrame
        The rows of the front, sorted by power ascending (time then falls along it).
    """
    time = time or time_column(est)
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
    time: str | None = None,
    power: str = POWER_COLUMN,
    source: str = "fastest_under",
) -> pd.Series:
    """The fastest row whose predicted power + ``margin_w`` + ``k_sigma`` x ``power_w_std``
    stays within ``power_cap_w``.

    Where the table has a ``power_w_max`` column (the most a power-limit knob lets each
    row draw), the guarded power never exceeds it: the hardware guarantees what the
    model can only estimate. Rows measured on the board (spread 0,
    :func:`~powertrain.decisions.refine.with_observed`) are judged by their measurement.

    Parameters
    ----------
    est : DataFrame
        Estimates (from :meth:`Predictor.predict`) or measurements.
    power_cap_w : float
        The power cap in watts (> 0).
    margin_w : float
        A fixed safety margin in watts kept below the cap.
    k_sigma : float
        A margin of this many predicted standard deviations of power (needs a
        ``power_w_std`` column); 0 is the paper's plain pick.
    time : str, optional
        The cost column to minimise (e.g. time to accuracy); default the table's time
        column (``time_ms`` per minibatch or ``epoch_s``).
    power : str
        The power column.
    source : str, optional
        Names the table in errors (a file name).

    Returns
    -------
    Series
        The chosen row.

    Raises
    ------
    NoFeasibleModeError
        When nothing fits, naming the lowest reachable power.
    """
    power_cap_w = _number("power_cap_w", power_cap_w, positive=True)
    margin_w = _number("margin_w", margin_w)
    k_sigma = _number("k_sigma", k_sigma)
    time = time or time_column(est)
    spread = f"{power}_std"
    cols = [time, power] + ([spread] if k_sigma > 0 else [])
    if k_sigma > 0 and spread not in est.columns:
        raise DataError(f"k_sigma > 0 needs a '{spread}' column (predict with a Predictor)")
    df = check_columns(est, cols, source=source, positive=[time, power])
    guard = df[power] + margin_w
    if k_sigma > 0:
        std = df[spread]
        if (std < 0).any():
            i = int(np.flatnonzero((std < 0).to_numpy())[0])
            raise DataError(
                f"{source}: row {i + 1}, column '{spread}': {float(std.iloc[i]):g} is "
                "negative; a spread must be >= 0"
            )
        guard = guard + k_sigma * std
    bound = f"{power}_max"
    if bound in df.columns:  # the hardware's own limit: no margin needed beyond it
        guard = guard.clip(upper=df[bound] + margin_w)
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


def safe_k_sigma(
    est: pd.DataFrame, k_sigma: float | None, power: str = POWER_COLUMN, source: str | None = None
) -> float:
    """``k_sigma`` as given; None: :data:`SAFE_K_SIGMA` where ``est`` carries a predicted
    spread (``power_w_std`` on a row that is not a measurement, by
    :func:`~powertrain.schema.measured_rows`), else 0 (a measurement has no prediction
    error to keep below the cap)."""
    if k_sigma is not None:
        return _number("k_sigma", k_sigma)
    predicted = f"{power}_std" in est.columns and not measured_rows(est, source).all()
    return SAFE_K_SIGMA if predicted else 0.0


def how_picked(k_sigma: float, margin_w: float = 0.0, measured: bool = False) -> str:
    """How a pick was made, in the words every surface prints: ``measured`` (judged by
    its measurement, as ``decide`` judges one), else predicted, with any margin."""
    parts = [f"{k_sigma:g} sigma"] if k_sigma > 0 and not measured else []
    parts += [f"{margin_w:g} W"] if margin_w > 0 else []
    what = "measured" if measured else "predicted"
    return f"{what} with a margin ({' + '.join(parts)})" if parts else what


def pick_under(
    est: pd.DataFrame,
    power_cap_w: float,
    margin_w: float = 0.0,
    k_sigma: float | None = None,
    time: str | None = None,
    power: str = POWER_COLUMN,
    source: str = "fastest_under",
) -> pd.Series:
    """:func:`fastest_under` with the one measured/predicted rule: a measured row
    (:func:`~powertrain.schema.measured_rows`) is judged by its measured power alone, as
    ``decide`` judges its picks (its sample spread is no prediction error); a predicted
    row keeps ``k_sigma`` (default :func:`safe_k_sigma`) of its spread below the cap.
    The pick is ``est``'s own row; ``attrs["how"]`` says how it was judged."""
    measured = measured_rows(est, source)
    k = safe_k_sigma(est, k_sigma, power, source)
    spread = f"{power}_std"
    judged = est.assign(_row=np.arange(len(est)))
    if k > 0 and spread in est.columns and measured.any():
        judged[spread] = pd.to_numeric(judged[spread], errors="coerce").where(~measured, 0.0)
    best = fastest_under(
        judged, power_cap_w, margin_w=margin_w, k_sigma=k, time=time, power=power, source=source
    )
    row = int(best["_row"])
    pick = est.iloc[row].copy()
    pick.attrs["how"] = how_picked(k, margin_w, measured=bool(measured[row]))
    return pick


def _number(name: str, value: object, positive: bool = False) -> float:
    """A finite real number (>= 0, or > 0 when ``positive``), else an error naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise DataError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    v = float(value)
    if not np.isfinite(v) or v < 0 or (positive and v == 0):
        need = "> 0" if positive else ">= 0"
        raise DataError(f"{name} must be a finite number {need}, got {value!r}")
    return v
