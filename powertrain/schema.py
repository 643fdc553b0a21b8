"""The one table format everything exchanges (docs/design.md, "Tables"), and its checks.

Why: corpora, samples and predictions cross the package boundary as DataFrames/CSV; a
bad file must fail here with the file, row and column named, not deep inside pandas.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from .errors import DataError

MODE_COLUMNS = ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz")
CONFIG_COLUMNS = MODE_COLUMNS + ("batch_size",)
TARGET_COLUMNS = ("time_ms", "power_w")
#: configuration columns that count things: whole numbers, written as integers
INTEGER_COLUMNS = ("cores", "batch_size", "threads", "num_workers")


#: what a profiling output records about each measurement and a prediction never has:
#: the minibatches timed and the power samples read
EVIDENCE_COLUMNS = ("n_minibatches", "n_power_samples")
#: a per-row flag a table may carry instead (a decision's cap table): True = measured
MEASURED_FLAG = "measured"
_FLAGS = {"true": True, "1": True, "1.0": True, "false": False, "0": False, "0.0": False}


def measured_rows(df: pd.DataFrame, source: str | None = None) -> np.ndarray:
    """Which rows are measurements (True) rather than predictions: the one rule.

    Why: a spread column cannot tell them apart (a profiling output's ``power_w_std`` is
    the spread of its samples, a prediction's is its uncertainty), so what a measurement
    rests on does. A row is measured where the table's ``measured`` column says so, or,
    without that column, where it records minibatches and power samples
    (:data:`EVIDENCE_COLUMNS`, ``n_minibatches`` >= 1 and ``n_power_samples`` >= 1). A
    table with neither (a ``predict`` output, a hand-made table) holds predictions.
    """
    if MEASURED_FLAG in df.columns:
        text = df[MEASURED_FLAG].astype(str).str.strip().str.lower()
        known = text.isin(list(_FLAGS))
        if not known.all():
            i = int(np.flatnonzero(~known.to_numpy())[0])
            raise DataError(
                f"{_where(source)}row {i + 1}, column '{MEASURED_FLAG}': must be True or False"
            )
        return text.map(_FLAGS).to_numpy(dtype=bool)
    if not all(c in df.columns for c in EVIDENCE_COLUMNS):
        return np.zeros(len(df), dtype=bool)
    counts = df[list(EVIDENCE_COLUMNS)].apply(pd.to_numeric, errors="coerce")
    return (counts >= 1).all(axis=1).to_numpy(dtype=bool)


def check_measurements(df: pd.DataFrame, source: str | None = None) -> None:
    """Refuse a table any row of which is not a measurement (:func:`measured_rows`),
    naming the first: predictions taken as measurements would be called confirmed."""
    measured = measured_rows(df, source)
    if not measured.all():
        i = int(np.flatnonzero(~measured)[0])
        why = (
            f"column '{MEASURED_FLAG}' is False"
            if MEASURED_FLAG in df.columns
            else f"it records no {' and '.join(EVIDENCE_COLUMNS)} (a prediction?)"
        )
        raise DataError(f"{_where(source)}row {i + 1} is not a measurement: {why}")


#: what a column name looks like: anything else in a header is file content, not a name
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_. ()/%-]{0,63}")
_NUMBER = re.compile(r"[-+]?[0-9.,eE+-]{1,24}|[-+]?(inf|nan|infinity)", re.I)


def shown_columns(columns: Iterable[object]) -> str:
    """The column names of a table, for an error message: only what looks like a column
    name is echoed. Why: the "header" of a file that is not a table (a report spec's
    ``samples_csv`` naming /etc/shadow) is its first line, and an error must not print
    a file's content."""
    names = [str(c) for c in columns]
    shown = [c for c in names if _NAME.fullmatch(c)]
    other = len(names) - len(shown)
    more = f"{' and ' if shown else ''}{other} that are not column names" if other else ""
    return ", ".join(shown) + more if names else "none"


def _where(source: str | None) -> str:
    return f"{source}: " if source else ""


def check_columns(
    df: pd.DataFrame,
    columns: Iterable[str],
    source: str | None = None,
    positive: Iterable[str] = (),
    nonnegative: Iterable[str] = (),
) -> pd.DataFrame:
    """Check ``columns`` exist, are numeric and finite; ``positive`` ones must be > 0,
    ``nonnegative`` ones >= 0.

    Returns a copy with those columns cast to float (int for :data:`INTEGER_COLUMNS`). Errors
    name the source, the column and the first offending row (1-based data row, as a
    spreadsheet user would count it; the CSV line is that + 1 for the header).
    """
    if not isinstance(df, pd.DataFrame):
        raise DataError(f"{_where(source)}expected a pandas DataFrame, got {type(df).__name__}")
    columns = list(columns)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise DataError(
            f"{_where(source)}missing column(s) {', '.join(missing)}; "
            f"found {shown_columns(df.columns)}"
        )
    if len(df) == 0:
        raise DataError(f"{_where(source)}the table has no rows")
    out = df.copy()
    positive, nonnegative = set(positive), set(nonnegative)
    for col in columns:
        values = pd.to_numeric(out[col], errors="coerce")
        bad = values.isna() | ~np.isfinite(values.to_numpy(dtype=float, na_value=np.nan))
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise DataError(
                f"{_where(source)}row {i + 1}, column '{col}': {_shown(df[col].iloc[i])}"
            )
        if col in positive and (values <= 0).any():
            i = int(np.flatnonzero((values <= 0).to_numpy())[0])
            raise DataError(
                f"{_where(source)}row {i + 1}, column '{col}': "
                f"{float(values.iloc[i]):g} must be > 0"
            )
        if col in nonnegative and (values < 0).any():
            i = int(np.flatnonzero((values < 0).to_numpy())[0])
            raise DataError(
                f"{_where(source)}row {i + 1}, column '{col}': "
                f"{float(values.iloc[i]):g} must be >= 0"
            )
        if col in INTEGER_COLUMNS:
            if (values != np.round(values)).any():
                i = int(np.flatnonzero((values != np.round(values)).to_numpy())[0])
                raise DataError(
                    f"{_where(source)}row {i + 1}, column '{col}': "
                    f"{float(values.iloc[i]):g} is not an integer"
                )
            out[col] = values.astype(int)
        else:
            out[col] = values.astype(float)
    return out


def _shown(value: object) -> str:
    """What is wrong with a cell that is not a finite number, in a user's words; the
    value is echoed only when it is a short word or number (never a line of a file that
    is not a table)."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "the cell is empty (a number is needed)"
    text = str(value)
    if len(text) <= 24 and _NAME.fullmatch(text) or _NUMBER.fullmatch(text):
        return f"value {text!r} is not a finite number"
    return "the value is not a finite number"


def check_modes(
    df: pd.DataFrame, source: str | None = None, batch_size: bool = False
) -> pd.DataFrame:
    """Validate the mode columns (and ``batch_size`` when asked)."""
    cols = CONFIG_COLUMNS if batch_size else MODE_COLUMNS
    return check_columns(df, cols, source, positive=cols)


def check_samples(df: pd.DataFrame, source: str | None = None) -> pd.DataFrame:
    """Validate a Jetson corpus: config columns plus positive ``time_ms`` and ``power_w``
    (a device with other knobs: ``predictor.checks.measured_table``)."""
    cols = CONFIG_COLUMNS + TARGET_COLUMNS
    return check_columns(df, cols, source, positive=cols)


def read_csv(path: str | os.PathLike, what: str = "") -> pd.DataFrame:
    """Read a CSV (``.csv`` or ``.csv.gz``) with an error naming the file (and ``what`` it is
    for, e.g. an option name), not a pandas traceback. Columns are not checked here; a
    file without rows is refused (no command has anything to do with one)."""
    where = f"{what} {path}" if what else str(path)
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{where}: no such file")
    try:
        df = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        raise DataError(f"{where}: the file is empty (no header, no rows)") from None
    except (OSError, pd.errors.ParserError, UnicodeDecodeError) as e:
        raise DataError(f"{where}: not a readable CSV ({e})") from None
    if df.empty:
        raise DataError(f"{where}: has a header ({shown_columns(df.columns)}) but no rows")
    return df
