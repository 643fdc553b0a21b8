"""Input checks specific to the predictor: sample counts, batch sizes, extrapolation.

Why: a transfer on 3 rows or a prediction for a GPU clock the reference never saw gives
numbers that look fine and are not; users must hear about it where they call us.
"""

from __future__ import annotations

import warnings
from typing import Any, Iterable, Mapping, Sequence, cast

import numpy as np
import pandas as pd

from ..devices.device import check_device
from ..errors import DataError, ModelFileError
from ..reserved import reserved_column
from ..schema import CONFIG_COLUMNS, TARGET_COLUMNS, check_columns, shown_columns

#: below this many rows a transfer (or a fit) has nothing to validate on; a table also
#: needs one row per input (a Jetson's five: 5 rows; a GPU's clock and batch size: 3)
MIN_SAMPLES = 3

#: a target this many robust standard deviations (log space, median/MAD) from the rest
#: is a recording error; real Jetson times/powers across modes and batch sizes span
#: well under a factor of 1000, so only absurd values (1e300 ms, 1e-9 W) trip this
_OUTLIER_Z = 25.0
#: ...and also at least this factor away from the median, so a tight table with a
#: tiny MAD does not flag an honest 2x difference
_OUTLIER_FACTOR = 100.0

#: relative slack on training ranges before a value counts as extrapolation
_RANGE_TOL = 1e-6


class ExtrapolationWarning(UserWarning):
    """A configuration lies outside the ranges the model (or its reference) was trained on."""


class CrossDeviceWarning(UserWarning):
    """Predictions for a device the model was not trained on: a cross-device guess."""


def trained_devices(info: Mapping[str, Any]) -> list[str]:
    """The devices a model's own training (or transfer) table named; empty when it did
    not say (a table without a ``device`` column)."""
    named = (info.get("trained_on") or {}).get("device") or []
    return [str(d) for d in named if d != "..."]


def other_devices(frame: pd.DataFrame, info: Mapping[str, Any]) -> list[str]:
    """The devices a ``device`` column of ``frame`` names that the model was not trained
    on (empty when either side does not say)."""
    known = trained_devices(info)
    if not known or "device" not in frame.columns or len(known) >= 8:  # 8+: a list cut short
        return []
    return sorted(set(map(str, frame["device"].dropna().unique())) - set(known))


def warn_other_device(frame: pd.DataFrame, info: Mapping[str, Any]) -> None:
    """Say loudly that rows of another device get a cross-device guess (the knobs may
    lie inside the training ranges, so the extrapolation warning stays silent)."""
    other = other_devices(frame, info)
    if other:
        warnings.warn(
            f"predict: rows of {', '.join(other)}, but the model was trained on "
            f"{', '.join(trained_devices(info))}: a cross-device guess; transfer the model "
            "with samples of that device first",
            CrossDeviceWarning,
            stacklevel=3,
        )


def check_column_roles(
    inputs: Sequence[str], targets: Sequence[str], source: str | None = None
) -> None:
    """Refuse targets that are also inputs, repeated, or named like a column the package
    writes itself (``device``, ``*_std``, ...): a prediction would overwrite the input (or
    that column) in the same table."""
    where = f"{source}: " if source else ""
    if isinstance(targets, str) or not len(targets):
        raise DataError(
            f"{where}targets must name at least one measured column, e.g. "
            f"('time_ms', 'power_w'); got {targets!r}"
        )
    for t in targets:
        if t in inputs:
            raise DataError(
                f"{where}target {t!r} is also an input column; the targets "
                f"({', '.join(targets)}) must be measured columns, not settings"
            )
        if reserved_column(t) and t not in TARGET_COLUMNS and t != "epoch_s":
            raise DataError(
                f"{where}target {t!r} is a reserved column name (the package writes it "
                "beside every prediction); name a measured column such as time_ms or power_w"
            )
    if len(set(targets)) != len(targets):
        raise DataError(f"{where}targets {', '.join(targets)} name a column twice")
    bad = [c for c in inputs if reserved_column(c) and c != "batch_size"]
    if bad:
        raise DataError(
            f"{where}input {bad[0]!r} is a reserved column name (the package writes it "
            "itself); inputs are the device's knobs and batch_size"
        )


def measured_table(
    samples: pd.DataFrame,
    source: str | None,
    inputs: Sequence[str],
    targets: Sequence[str],
    catalog_knobs: bool = True,
) -> pd.DataFrame:
    """Checked copy of a measured table's inputs and targets (all finite, targets > 0).

    ``catalog_knobs``: the inputs are a known device's knobs plus ``batch_size``, so they
    are > 0. False when the caller named the inputs itself: they need only be >= 0 (no
    dataloader workers is a setting)."""
    return check_columns(
        samples,
        (*inputs, *targets),
        source,
        positive=(*inputs, *targets) if catalog_knobs else targets,
        nonnegative=inputs,
    )


def samples_table(
    samples: pd.DataFrame,
    what: str,
    source: str | None = None,
    inputs: Sequence[str] = CONFIG_COLUMNS,
    targets: Sequence[str] = TARGET_COLUMNS,
    catalog_knobs: bool = True,
    free: Sequence[str] | None = None,
    outliers: bool = True,
) -> pd.DataFrame:
    """Validated copy of a measured table with at least :data:`MIN_SAMPLES` rows and one
    per input (per ``free`` input where given: a family reference's spec features are
    one value per device, nothing a transfer to one device has to learn).

    With ``catalog_knobs`` a ``device`` column must name a catalog (or spec) device and
    every row must be one of its modes; without (the caller named the inputs itself) the
    column is provenance only, e.g. a GPU an NVML sweep profiled, not in the catalog.
    ``outliers=False`` skips :func:`check_outliers` (readings this package took itself)."""
    df = measured_table(samples, source, inputs, targets, catalog_knobs)
    need = max(MIN_SAMPLES, len(inputs if free is None else free))
    if len(df) < need:
        where = f"{source}: " if source else ""
        raise DataError(
            f"{where}{what} needs at least {need} profiled modes (one per input, and at "
            f"least {MIN_SAMPLES}), got {len(df)}; the paper uses 10-100 (50 by default)"
        )
    if catalog_knobs:
        df = check_device(df, source)
    df = average_duplicates(df, what, inputs, targets)
    if outliers:
        check_outliers(df, source, targets)
    return df


def check_log_inputs(df: pd.DataFrame, inputs: Sequence[str], source: str | None, fix: str):
    """A model that log-transforms its inputs needs them > 0: name the row and column,
    and say ``fix`` (before the estimator fails on ``log(0)`` without naming either)."""
    for col in inputs:
        bad = np.flatnonzero(df[col].to_numpy(dtype=float) <= 0)
        if bad.size:
            where = f"{source}: " if source else ""
            raise DataError(
                f"{where}row {bad[0] + 1}, column '{col}': {df[col].iloc[bad[0]]:g} is not > 0, "
                f"and the model log-transforms its inputs; {fix}"
            )


def average_duplicates(
    df: pd.DataFrame,
    what: str,
    inputs: Sequence[str] = CONFIG_COLUMNS,
    targets: Sequence[str] = TARGET_COLUMNS,
) -> pd.DataFrame:
    """One row per configuration: repeated measurements are averaged (with a warning),
    so a mode profiled twice is not counted as two samples."""
    keys = list(inputs)
    dup = df.duplicated(keys, keep=False)
    if not dup.any():
        return df
    n = int(df.duplicated(keys).sum())
    warnings.warn(
        f"{what}: {n} repeated configuration(s) averaged into one row each",
        DuplicateSamplesWarning,
        stacklevel=4,
    )
    agg = {c: ("mean" if c in targets else "first") for c in df.columns if c not in keys}
    return df.groupby(keys, as_index=False, sort=False).agg(agg)[list(df.columns)]


class DuplicateSamplesWarning(UserWarning):
    """Samples held the same configuration more than once; they were averaged."""


def check_outliers(
    df: pd.DataFrame, source: str | None = None, targets: Sequence[str] = TARGET_COLUMNS
) -> None:
    """Refuse a target value absurdly far from the others (log-space median/MAD).

    Why: one ``time_ms`` of 1e300 makes a transfer fit garbage without any error.
    """
    where = f"{source}: " if source else ""
    for target in targets:
        logs = np.log(df[target].to_numpy(dtype=np.float64))
        med = float(np.median(logs))
        dev = np.abs(logs - med)
        mad = 1.4826 * float(np.median(dev))
        z = dev / max(mad, 1e-12)
        bad = np.flatnonzero((z > _OUTLIER_Z) & (dev > np.log(_OUTLIER_FACTOR)))
        if bad.size:
            i = int(bad[np.argmax(dev[bad])])
            raise DataError(
                f"{where}row {i + 1}, column {target!r}: value {df[target].iloc[i]:g} is an "
                f"outlier (median of the others {np.exp(med):g}); fix or drop that row"
            )


def config_table(
    modes: pd.DataFrame,
    batch_size: int | Iterable[int] | None,
    inputs: Sequence[str] = CONFIG_COLUMNS,
    catalog_knobs: bool = True,
) -> pd.DataFrame:
    """The caller's frame with a ``batch_size`` column: given, assigned, or one copy per size.

    A sequence of batch sizes repeats every mode once per size (mode-major order), so
    ``predict(modes, batch_size=[8, 16, 32])`` covers the joint space in one call.
    """
    if not isinstance(modes, pd.DataFrame):
        raise DataError(f"expected a pandas DataFrame of modes, got {type(modes).__name__}")
    if batch_size is None:
        if "batch_size" not in modes.columns and "batch_size" in inputs:
            raise DataError(
                "modes have no 'batch_size' column; pass predict(modes, batch_size=16) "
                "or modes.assign(batch_size=16)"
            )
        out = modes
    elif np.ndim(cast(Any, batch_size)) == 0:  # a scalar: one size for every mode
        out = modes.assign(batch_size=_size(batch_size))
    else:
        sizes = [_size(b) for b in cast(Iterable[int], batch_size)]
        if not sizes:
            raise DataError("batch_size is an empty sequence")
        # one new label per row: repeated labels (0, 0, 1, 1, ...) break .loc and refine
        out = modes.loc[modes.index.repeat(len(sizes))].assign(
            batch_size=np.tile(np.asarray(sizes), len(modes))
        )
        out.index = pd.RangeIndex(len(out))
    missing = [c for c in inputs if c not in out.columns]
    if missing:  # typically modes of a device with other knobs than the model's
        raise DataError(
            f"modes: missing column(s) {', '.join(missing)}; this model reads "
            f"{', '.join(inputs)}, the modes have {shown_columns(modes.columns)}"
        )
    check_columns(
        out, inputs, source="modes", positive=inputs if catalog_knobs else (), nonnegative=inputs
    )
    return out


def _size(value: object) -> int:
    """A batch size: a whole number >= 1 (``True`` is not one, though Python says 1)."""
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
    if not ok and isinstance(value, (float, np.floating)) and float(value).is_integer():
        ok, value = True, int(value)
    if not ok or int(cast(Any, value)) < 1:
        raise DataError(
            f"batch_size must be a whole number >= 1 (or a list of them), got {value!r}"
        )
    return int(cast(Any, value))


def warn_one_batch_size(frame: pd.DataFrame, ranges: Mapping[str, list[float]]) -> None:
    """Say that a model trained at one batch size cannot tell sizes apart: asked for
    several, it would give each the same numbers."""
    trained = ranges.get("batch_size")
    if trained is None or trained[0] != trained[1] or "batch_size" not in frame.columns:
        return
    sizes = np.unique(frame["batch_size"].to_numpy(dtype=np.float64))  # a set, at C speed
    asked = sorted(set(sizes.tolist()) - {trained[0]})
    if asked:
        warnings.warn(
            f"predict: the model was trained at batch size {trained[0]:g} only, so it "
            f"cannot tell batch sizes apart: the rows at batch size "
            f"{', '.join(f'{b:g}' for b in asked[:5])} repeat batch size {trained[0]:g}'s "
            "numbers; transfer it with samples at those sizes",
            ExtrapolationWarning,
            stacklevel=3,
        )


def check_finite(out: pd.DataFrame, columns: Sequence[str]) -> None:
    """Refuse predictions that are not finite numbers: the model's weights are broken
    (scaled out of range, say), and an inf time would reach a pick as a valid row."""
    for col in columns:
        v = out[col].to_numpy(dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(v))
        if bad.size:
            i = int(bad[0])
            raise ModelFileError(
                f"predict: row {i + 1}, {col} = {v[i]:g} is not a finite number: the model's "
                "weights give no usable prediction (a corrupt or tampered model file?)"
            )


def ranges_of(df: pd.DataFrame, inputs: Sequence[str] = CONFIG_COLUMNS) -> dict[str, list[float]]:
    """Per configuration column ``[min, max]`` (JSON-friendly) of a training table."""
    return {c: [float(df[c].min()), float(df[c].max())] for c in inputs}


def union_ranges(
    a: Mapping[str, list[float]], b: Mapping[str, list[float]]
) -> dict[str, list[float]]:
    return {c: [min(a[c][0], b[c][0]), max(a[c][1], b[c][1])] for c in a}


def warn_extrapolation(
    df: pd.DataFrame, ranges: Mapping[str, list[float]], what: str, stacklevel: int = 3
) -> int:
    """Warn (once per call) naming each column whose values leave ``ranges``; return #rows."""
    outside = np.zeros(len(df), dtype=bool)
    details = []
    for col, (lo, hi) in ranges.items():
        v = df[col].to_numpy(dtype=float)
        tol = _RANGE_TOL * max(abs(lo), abs(hi), 1.0)
        low, high = v < lo - tol, v > hi + tol
        if low.any() or high.any():
            outside |= low | high
            details.append(f"{col} {np.min(v):g}..{np.max(v):g} vs trained {lo:g}..{hi:g}")
    n = int(outside.sum())
    if n:
        warnings.warn(
            f"{what}: {n} of {len(df)} rows lie outside the training ranges "
            f"({'; '.join(details)}); predictions there are extrapolations",
            ExtrapolationWarning,
            stacklevel=stacklevel,
        )
    return n
