"""A board whose measurements come from a recorded table: a twin corpus, a real trace, a
user's earlier sweep.

Why: a decision strategy should be judged on real data exactly as it would run on a
board -- asking for one configuration at a time and paying board time for each -- and a
user's old sweep is a board that answers instantly. This backend answers from the table,
counts the board time each measurement would have cost, and refuses any configuration the
table has no record of, so a strategy can never peek at data it did not pay for.

Two tables are supported through the column names of the device (or the caller):
per-minibatch tables (``time_ms``, ``power_w``: the profiler's output, the twin corpora),
which also drive the ordinary sweep through ``configure``/``run_minibatch``; and
per-epoch traces (``epoch_s``, ``power_w`` over ``power_limit_w`` x ``batch_size``, the
real GPU traces), which :meth:`ReplayBackend.measure` answers directly.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ..devices.device import Device, get_device, table_device
from ..errors import DataError, ProfilingError
from ..schema import CONFIG_COLUMNS, check_columns, read_csv, shown_columns
from .base import Backend

#: repeated records of one configuration further apart than this (max/min) are refused
REPEAT_SPREAD = 1.5
#: the time columns a recorded table may carry, in the order they are looked for
TIME_COLUMNS = ("time_ms", "epoch_s")
#: board seconds charged per measured configuration when the table has no ``profile_s``
DEFAULT_SECONDS_PER_CONFIG = 60.0
_ROUND = 3


class RepeatedRecordsWarning(UserWarning):
    """A replay table recorded a configuration more than once; the records were averaged."""


def _key(values: Sequence[float]) -> tuple:
    return tuple(round(float(v), _ROUND) for v in values)


class ReplayBackend(Backend):
    """Replay ``table`` (a DataFrame or a CSV path) as a board.

    Parameters
    ----------
    table
        one row per configuration with the configuration columns and the measured
        targets (rows of the same configuration are averaged).
    device
        catalog id, spec or Device; default: the table's ``device`` column. Its
        ``config_columns`` (knobs + ``batch_size``) identify a configuration.
    config_columns
        the configuration columns when the device is not in the catalog.
    targets
        the measured columns; default ``time_ms`` (else ``epoch_s``) and ``power_w``.
    seconds_per_config
        board time charged per measured configuration; default the
        table's ``profile_s`` where it has one, else 60 s.
    """

    def __init__(
        self,
        table: pd.DataFrame | str | Path,
        device: str | Device | None = None,
        *,
        config_columns: Sequence[str] | None = None,
        targets: Sequence[str] | None = None,
        seconds_per_config: float | None = None,
        workload: str | None = None,
        sample_period_s: float = 1.0,
    ):
        source = str(table) if isinstance(table, (str, Path)) else "replay table"
        df = read_csv(table, "replay table") if isinstance(table, (str, Path)) else table.copy()
        if not isinstance(df, pd.DataFrame):
            raise DataError(
                f"ReplayBackend: table must be a DataFrame or a CSV path, got {table!r}"
            )
        self.source = source
        self.device = get_device(device) if device is not None else table_device(df, source)
        if config_columns is not None:
            self._columns = tuple(config_columns)
        elif self.device is not None:
            self._columns = tuple(self.device.config_columns)
        else:
            self._columns = tuple(CONFIG_COLUMNS)
        if targets is None:
            time_col = next((c for c in TIME_COLUMNS if c in df.columns), None)
            if time_col is None:
                raise DataError(
                    f"{source}: no time column ({' or '.join(TIME_COLUMNS)}); found "
                    f"{shown_columns(df.columns)}"
                )
            targets = (time_col, "power_w")
        self.targets = tuple(targets)
        if seconds_per_config is not None and not (
            np.isfinite(seconds_per_config) and seconds_per_config >= 0
        ):
            raise DataError(f"seconds_per_config must be >= 0 seconds, got {seconds_per_config!r}")
        cols = [*self._columns, *self.targets]
        df = check_columns(df, cols, source=source, positive=cols)
        if device is not None and self.device is not None:  # the table must be that board's
            _check_device(df, self.device, source, presets=config_columns is None)
        _check_repeats(df, list(self._columns), self.targets, source)
        extra = ["profile_s"] if "profile_s" in df.columns and seconds_per_config is None else []
        keys = df[list(self._columns)].round(_ROUND)
        grouped = df.assign(**{c: keys[c] for c in self._columns}).groupby(
            list(self._columns), sort=False
        )
        self.table = grouped[[*self.targets, *extra]].mean().reset_index()
        self._rows = {
            _key(r): i for i, r in enumerate(self.table[list(self._columns)].to_numpy(float))
        }
        self.seconds_per_config = seconds_per_config
        self.device_name = self.device.name if self.device is not None else _one(df, "device")
        self.workload_name = workload or _one(df, "workload")
        self.sample_period_s = float(sample_period_s)
        self.n_measured = 0
        self._t = 0.0
        self._current: int | None = None
        self._segments: list[tuple[float, float]] = []  # (start_s, power_w)

    def __repr__(self) -> str:
        return f"ReplayBackend({self.source!r}, {len(self.table)} configurations)"

    @property
    def config_columns(self) -> tuple[str, ...]:
        return self._columns

    @property
    def time_column(self) -> str:
        """The recorded time target (``time_ms`` or ``epoch_s``)."""
        return next(t for t in self.targets if t != "power_w")

    def configurations(self) -> pd.DataFrame:
        """Every configuration the table records (what a strategy may ask for)."""
        return self.table[list(self._columns)].copy()

    def check_modes(self, modes: pd.DataFrame, source: str = "modes") -> pd.DataFrame:
        df = check_columns(modes, self._columns, source=source, positive=self._columns)
        for i, row in enumerate(df[list(self._columns)].to_numpy(float)):
            self._row(row, f"{source}: row {i + 1}")
        return df

    def _row(self, values: Sequence[float], where: str = "") -> int:
        i = self._rows.get(_key(values))
        if i is None:
            shown = " ".join(f"{c}={float(v):g}" for c, v in zip(self._columns, values))
            ranges = ", ".join(
                f"{c} {self.table[c].min():g}..{self.table[c].max():g}" for c in self._columns
            )
            raise ProfilingError(
                f"{where + ': ' if where else ''}{self.source} has no record of {shown}; "
                f"a replayed board can only measure the {len(self.table)} recorded "
                f"configurations ({ranges})"
            )
        return i

    def _cost(self, i: int) -> float:
        if self.seconds_per_config is not None:
            return float(self.seconds_per_config)
        if "profile_s" in self.table.columns:
            return float(self.table["profile_s"].iloc[i])
        return DEFAULT_SECONDS_PER_CONFIG

    # -- the fast path: one recorded row per configuration ---------------------------
    def measure(self, configs: pd.DataFrame) -> pd.DataFrame:
        """The recorded measurements of ``configs`` (one row each, in order, flagged
        ``measured``), with the board time each cost in ``profile_s``; the board clock
        advances by it. A configuration the table lacks raises ProfilingError before
        anything is charged."""
        df = check_columns(configs, self._columns, source="measure", positive=self._columns)
        idx = [self._row(r, f"measure: row {k + 1}") for k, r in enumerate(_values(df, self))]
        out = self.table.iloc[idx][[*self._columns, *self.targets]].reset_index(drop=True)
        cost = np.array([self._cost(i) for i in idx], dtype=float)
        out["profile_s"] = cost
        out["measured"] = True  # the table's records: what a later decide(samples=) takes
        self._t += float(cost.sum())
        self.n_measured += len(idx)
        if self.device_name != "unknown":
            out.insert(0, "device", self.device_name)
        return out

    # -- the board interface: minibatches and a 1 Hz sensor ---------------------------
    def configure(self, config: Mapping[str, float]) -> None:
        missing = [c for c in self._columns if c not in config]
        if missing:
            raise ProfilingError(f"ReplayBackend.configure: configuration lacks {missing}")
        i = self._row([config[c] for c in self._columns], "configure")
        if self.time_column != "time_ms":
            raise ProfilingError(
                f"{self.source} records {self.time_column} per configuration, not minibatch "
                "times; measure it with ReplayBackend.measure (what decide does)"
            )
        self._current = i
        self._segments.append((self._t, float(self.table["power_w"].iloc[i])))
        self.n_measured += 1

    def run_minibatch(self) -> float:
        if self._current is None:
            raise ProfilingError("ReplayBackend.run_minibatch: call configure() first")
        ms = float(self.table["time_ms"].iloc[self._current])
        self._t += ms / 1e3
        return ms

    def now(self) -> float:
        return self._t

    def power_samples(self, start: float, end: float) -> np.ndarray:
        """The recorded power of the configuration set at each 1 Hz reading's time."""
        period = self.sample_period_s
        end = min(end, self._t)
        k0, k1 = math.ceil(start / period - 1e-12), math.ceil(end / period - 1e-12)
        if k1 <= k0 or not self._segments:
            return np.empty((0, 2))
        t = np.arange(max(k0, 0), k1) * period
        starts = np.array([s for s, _ in self._segments])
        seg = np.searchsorted(starts, t, side="right") - 1
        keep = seg >= 0
        watts = np.array([w for _, w in self._segments])[seg[keep]]
        return np.column_stack([t[keep], watts])

    def run_header(self) -> dict:
        return {**super().run_header(), "replay": self.source}

    def describe(self) -> dict:
        return {"backend": "ReplayBackend", "source": self.source, "rows": len(self.table)}


def _values(df: pd.DataFrame, backend: ReplayBackend) -> np.ndarray:
    return df[list(backend.config_columns)].to_numpy(float)


def _one(df: pd.DataFrame, column: str) -> str:
    if column not in df.columns:
        return "unknown"
    values = df[column].dropna().astype(str).unique()
    return str(values[0]) if len(values) == 1 else "unknown"


def _check_device(df: pd.DataFrame, device: Device, source: str, presets: bool) -> None:
    """Refuse a table recorded on another device: its ``device`` column names another, or
    (with the device's own columns) a row is no mode of it. A decision on such a table
    would pick a configuration the board does not have."""
    if "device" in df.columns:
        names = df["device"].astype(str)
        other = np.flatnonzero((names != device.name).to_numpy())
        if other.size:
            i = int(other[0])
            raise DataError(
                f"{source}: row {i + 1} was recorded on {names.iloc[i]!r}, not on "
                f"{device.name!r} (the device given); replay a table of that device"
            )
    if presets:
        device.validate(df, source=source, presets=True)


def _check_repeats(
    df: pd.DataFrame, columns: list[str], targets: Sequence[str], source: str
) -> None:
    """Repeated records of one configuration are averaged, with a warning; records more
    than :data:`REPEAT_SPREAD` times apart are refused (two different runs, not noise)."""
    keys = df[columns].round(_ROUND)
    dup = keys.duplicated(keep=False).to_numpy()
    if not dup.any():
        return
    groups = df[dup].assign(**{c: keys[c][dup] for c in columns}).groupby(columns, sort=False)
    for t in targets:
        spread = groups[t].max() / groups[t].min()
        if (spread > REPEAT_SPREAD).any():
            key = spread.idxmax()
            rows = np.flatnonzero((keys[columns] == pd.Series(key, index=columns)).all(axis=1))
            raise DataError(
                f"{source}: rows {', '.join(str(r + 1) for r in rows)} record one "
                f"configuration with {t} {float(df[t].iloc[rows].min()):g} to "
                f"{float(df[t].iloc[rows].max()):g} ({float(spread.max()):.1f}x apart); "
                "keep the right one"
            )
    n = int(keys.duplicated().sum())
    warnings.warn(
        f"{source}: {n} repeated configuration(s) averaged into one row each",
        RepeatedRecordsWarning,
        stacklevel=4,
    )
