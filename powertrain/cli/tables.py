"""Tables as a person reads them: counts as integers, a few significant digits on screen.

Why: ``132.15420469909958``, ``cores`` as ``2.0`` and ``64.0`` batch sizes make the
command line's output look like a bug. Files keep every digit of measured and predicted
values (they are data), but counting columns are written as integers everywhere.
"""

from __future__ import annotations

import argparse
import sys
from typing import IO, Iterable

import numpy as np
import pandas as pd

from ..errors import DataError
from ..schema import INTEGER_COLUMNS
from ..utils.files import atomic_open, disk_reason

#: how floats of measured or predicted columns are printed on the terminal
FLOAT_FORMAT = "%.6g"


def _whole(values: np.ndarray) -> bool:
    return bool(len(values)) and np.isfinite(values).all() and (values == np.round(values)).all()


def integer_columns(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with every whole-valued :data:`~powertrain.schema.INTEGER_COLUMNS` column as
    int64 (a column with a fraction or a gap stays as it is)."""
    out = df
    for col in INTEGER_COLUMNS:
        if col not in df.columns:
            continue
        v = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        if _whole(v):
            if out is df:
                out = df.copy()
            out[col] = v.astype(np.int64)
    return out


def print_table(
    df: pd.DataFrame,
    stream: IO[str],
    rounded: Iterable[str] | None = None,
    full_precision: bool = False,
    header: bool = True,
) -> None:
    """``df`` as CSV on the terminal: integer columns as ints; ``rounded`` float columns
    (default: all; measurements and predictions) to 6 significant digits; every other
    float column exactly (a clock must stay the value the device has), without ``.0``
    when all its values are whole. ``full_precision``: every digit everywhere."""
    df = integer_columns(df)
    if full_precision:
        df.to_csv(stream, index=False, header=header)
        return
    rounded = set(df.columns if rounded is None else rounded)
    df = df.copy()
    for col in df.columns:
        if col in rounded or not pd.api.types.is_float_dtype(df[col]):
            continue
        v = df[col].to_numpy(dtype=float)
        # exact: an int where every value is whole, else the shortest repr (not %g)
        df[col] = v.astype(np.int64) if _whole(v) else df[col].astype(str).replace("nan", "")
    df.to_csv(stream, index=False, header=header, float_format=FLOAT_FORMAT)


def write_table(
    df: pd.DataFrame,
    out: str | None,
    args: argparse.Namespace,
    dtypes: dict | None = None,
    rounded: Iterable[str] | None = None,
) -> None:
    """``df`` as CSV to the file ``out`` (every digit, integer columns as ints) or, for
    None or ``-``, to stdout (:func:`print_table`, ``--full-precision`` honoured).
    ``dtypes``: cast to these first (a row taken out of a table becomes object dtype)."""
    if dtypes:
        df = df.astype({c: t for c, t in dtypes.items() if c in df.columns})
    df = df.infer_objects()
    if out in (None, "-"):
        full = bool(getattr(args, "full_precision", False))
        print_table(df, sys.stdout, rounded=rounded, full_precision=full)
        return
    try:
        with atomic_open(out) as f:  # whole or not at all
            integer_columns(df).to_csv(f, index=False)
    except OSError as e:
        raise DataError(f"{out}: cannot write ({disk_reason(e)})") from None
