"""A tuner's measurements kept on disk, so the next run, ``fit`` or ``decide`` reuses them.

Why: a job that trains every night on the same board under the same cap should not
explore every night (Zeus keeps its profile too). The file is the profiling store's
summary CSV (``device``, ``workload``, the board's configuration columns, the measured
columns; :mod:`powertrain.profiling.store`) with one column more, ``power_cap_w``: the
cap the configuration was measured for, so a rerun at that cap counts the saved rows
against its budget. ``pd.read_csv(path)`` is a valid ``samples=`` for :func:`pt.decide`.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from .._version import __version__
from ..errors import DataError
from ..profiling.store import MEASURED_COLUMNS, append_csv, keys_of, meta_path, write_whole
from .candidates import plain

#: the column beside the store's: the cap a configuration was measured for
CAP_COLUMN = "power_cap_w"


def profile_columns(config_columns: Sequence[str]) -> list[str]:
    """The saved profile's columns, in order: the store's, then the cap."""
    return ["device", "workload", *config_columns, *MEASURED_COLUMNS, CAP_COLUMN]


def load_profile(path: str | Path, device: str, workload: str) -> pd.DataFrame:
    """The rows saved at ``path`` (none if it does not exist yet).

    Raises
    ------
    DataError
        The file is unreadable or was written for another device or workload."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame()
    try:
        rows = pd.read_csv(path)
    except (pd.errors.ParserError, UnicodeDecodeError, OSError) as e:
        raise DataError(f"profile {path}: not a readable CSV ({e})") from None
    for col, want in (("device", device), ("workload", workload)):
        found = sorted({str(v) for v in rows.get(col, pd.Series(dtype=str))})
        if found and found != [str(want)]:
            raise DataError(
                f"profile {path}: saved for {col} {', '.join(found)}, not {want!r}; "
                "give another profile= file (or workload=)"
            )
    return rows


def save_rows(
    path: str | Path, rows: pd.DataFrame, config_columns: Sequence[str], device: str, workload: str
) -> None:
    """Append a tuner's measured rows to the profile at ``path`` (each flushed to disk)."""
    path = Path(path)
    if not len(rows):
        return
    cols = profile_columns(config_columns)
    out = rows.rename(columns={"cap": CAP_COLUMN}).assign(device=device, workload=workload)
    out = out.reindex(columns=cols)
    if not meta_path(path).exists():
        info = {
            "device": device,
            "workload": workload,
            "key_columns": list(config_columns),
            "source": "powertrain.Tuner (measured with the job's own training minibatches)",
            "powertrain": __version__,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        write_whole(meta_path(path), json.dumps(info, indent=1) + "\n")
    append_csv(out, path)


def prior_rows(
    candidates: pd.DataFrame, samples: pd.DataFrame, columns: Sequence[str], time_column: str
) -> list[dict[str, Any]]:
    """``samples`` as a tuner's measured rows: each matched to its candidate by the
    configuration ``columns``; rows of configurations not among the candidates (another
    batch size, another table) are left out. The last row of a configuration wins."""
    if samples is None or not len(samples):
        return []
    missing = [c for c in (*columns, time_column, "power_w") if c not in samples.columns]
    if missing:
        raise DataError(f"samples: missing column(s) {', '.join(missing)}")
    where = {k: i for i, k in enumerate(keys_of(candidates, columns))}
    found: dict[int, dict[str, Any]] = {}
    caps = samples.get(CAP_COLUMN, samples.get("cap"))
    for j, key in enumerate(keys_of(samples, columns)):
        i = where.get(key)
        if i is None:
            continue
        src = samples.iloc[j]
        row = {c: plain(candidates[c].iloc[i]) for c in candidates.columns}
        cap = math.nan if caps is None else float(caps.iloc[j])
        n = src.get("n_minibatches", math.nan)
        row.update(
            {time_column: float(src[time_column]), "power_w": float(src["power_w"])},
            n_minibatches=n,
            n_power_samples=src.get("n_power_samples", math.nan),
            stable=src.get("stable", True),
            index=i,
            cap=cap,
            given=True,
        )
        found[i] = row
    return list(found.values())
