"""Profile a list of configurations on a backend: the loop users run on a board.

Why: one code path for the twin and for real hardware, so corpora made on the twin are
made exactly as a user's samples would be. Each finished configuration is appended and
flushed to the output CSV (with its raw logs) before the next starts, so an interrupted
sweep resumes where it stopped.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from ..errors import DataError, ProfilingError
from ..schema import CONFIG_COLUMNS, MODE_COLUMNS
from .aggregate import stable_since, summarise
from .backend import Backend

#: aggregated columns written per configuration, in order
RESULT_COLUMNS = (
    "device", "workload", *CONFIG_COLUMNS, "time_ms", "power_w", "time_ms_std", "power_w_std",
    "n_minibatches", "n_power_samples", "stable", "profile_s",
)


def _config_key(row: Mapping) -> tuple:
    return tuple(round(float(row[c]), 3) for c in CONFIG_COLUMNS)


def profile_one(
    backend: Backend,
    config: Mapping[str, float],
    n_minibatches: int = 40,
    min_power_samples: int = 2,
    max_settle_s: float = 30.0,
    window: int = 3,
    rel_tol: float = 0.03,
) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    """Measure one configuration; return (summary row, minibatch log, power log).

    Runs a discarded warm-up minibatch, then minibatches until the power has settled
    (sliding window) and ``n_minibatches`` clean ones that start after it have run with
    at least ``min_power_samples`` sensor readings during them. If power never settles
    within ``max_settle_s``, the minibatches after that point are used and the row is
    marked ``stable = False``.
    """
    backend.configure(config)
    t_mode = backend.now()
    log: list[tuple[float, float, float]] = []  # (start_s, end_s, ms)
    warm_start = backend.now()
    warm_ms = backend.run_minibatch()
    log.append((warm_start, backend.now(), warm_ms))
    settled_at: float | None = None
    stable = True
    max_total = 50 * n_minibatches + 1000
    while True:
        t0 = backend.now()
        ms = backend.run_minibatch()
        if not np.isfinite(ms) or ms <= 0:
            raise ProfilingError(f"backend returned an invalid minibatch time {ms!r} for {dict(config)}")
        log.append((t0, backend.now(), ms))
        now = backend.now()
        if settled_at is None:
            settled_at = stable_since(backend.power_samples(t_mode, now), window, rel_tol)
            if settled_at is None and now - t_mode > max_settle_s:
                settled_at, stable = now, False
        if settled_at is not None:
            clean = [r for r in log[1:] if r[0] >= settled_at]
            if len(clean) >= n_minibatches:
                start = clean[-n_minibatches][0]
                samples = backend.power_samples(start, now)
                if len(samples) >= min_power_samples:
                    break
        if len(log) > max_total:
            # give up waiting for power samples: keep what was measured, flag it
            stable = False
            break
    clean = [r for r in log[1:] if settled_at is not None and r[0] >= settled_at][-n_minibatches:]
    if not clean:
        clean = log[1:][-n_minibatches:]
    start, end = clean[0][0], clean[-1][1]
    samples = backend.power_samples(start, end)
    row = {c: config[c] for c in CONFIG_COLUMNS if c in config}
    row.update(summarise(np.array([r[2] for r in clean]), samples[:, 1] if len(samples) else []))
    row["stable"] = stable
    row["profile_s"] = backend.now() - t_mode
    mb = pd.DataFrame(log, columns=["start_s", "end_s", "time_ms"])
    mb["clean"] = [False] + [r in clean for r in log[1:]]
    all_samples = backend.power_samples(t_mode, backend.now())
    pw = pd.DataFrame(all_samples.reshape(-1, 2), columns=["t_s", "power_w"])
    return row, mb, pw


def _append_csv(df: pd.DataFrame, path: Path) -> None:
    header = not path.exists() or path.stat().st_size == 0
    with open(path, "a", newline="") as f:
        df.to_csv(f, header=header, index=False)
        f.flush()
        os.fsync(f.fileno())


def raw_log_paths(out: Path) -> tuple[Path, Path]:
    """Where the per-minibatch and per-sample logs of ``out`` live."""
    stem = out.name[: -len(".csv")] if out.name.endswith(".csv") else out.name
    return out.with_name(stem + ".minibatches.csv"), out.with_name(stem + ".power.csv")


def _already_done(out: Path, backend: Backend) -> set[tuple]:
    if not out.exists() or out.stat().st_size == 0:
        return set()
    try:
        done = pd.read_csv(out)
    except pd.errors.ParserError as e:
        raise DataError(f"{out}: cannot resume, the file is not a readable CSV ({e})") from None
    for col, expected in (("device", backend.device_name), ("workload", backend.workload_name)):
        if col in done.columns and len(done) and set(done[col].astype(str)) != {expected}:
            raise DataError(
                f"{out}: written for {col} {sorted(set(done[col].astype(str)))}, not {expected!r}; "
                "choose another output file"
            )
    missing = [c for c in CONFIG_COLUMNS if c not in done.columns]
    if missing:
        raise DataError(f"{out}: cannot resume, missing column(s) {', '.join(missing)}")
    return {_config_key(r) for r in done.to_dict("records")}


def profile(
    backend: Backend,
    modes: pd.DataFrame,
    batch_size: int | None = None,
    n_minibatches: int = 40,
    out: str | Path | None = None,
    progress: bool = True,
    **kwargs,
) -> pd.DataFrame:
    """Profile every row of ``modes`` on ``backend`` and return one schema row per mode.

    ``batch_size`` sets the column for every row (else ``modes`` must carry one). With
    ``out``, each finished configuration is appended to that CSV (raw logs beside it) at
    once, and rows already there are skipped, so rerunning resumes an interrupted sweep.
    Extra keyword arguments go to :func:`profile_one`.
    """
    from ..schema import check_modes

    configs = modes.copy()
    if batch_size is not None:
        configs["batch_size"] = int(batch_size)
    configs = check_modes(configs, source="modes", batch_size=True)
    if hasattr(backend, "sweep_order"):
        configs = backend.sweep_order(configs)
    out_path = Path(out) if out is not None else None
    done = _already_done(out_path, backend) if out_path else set()
    rows = []
    todo = [r for r in configs.to_dict("records") if _config_key(r) not in done]
    bar = tqdm(todo, disable=not progress, desc=f"profiling {backend.workload_name} on {backend.device_name}",
               unit="mode")
    for i, config in enumerate(bar):
        if config.get("reset_before") and i > 0:
            backend.reset()
        row, mb, pw = profile_one(backend, config, n_minibatches=n_minibatches, **kwargs)
        row = {"device": backend.device_name, "workload": backend.workload_name, **row}
        rows.append(row)
        if out_path:
            key = dict(zip(CONFIG_COLUMNS, _config_key(config)))
            mb_path, pw_path = raw_log_paths(out_path)
            _append_csv(mb.assign(**key), mb_path)
            _append_csv(pw.assign(**key), pw_path)
            _append_csv(pd.DataFrame([row], columns=list(RESULT_COLUMNS)), out_path)
        bar.set_postfix({c: config[c] for c in MODE_COLUMNS}, refresh=False)
    result = pd.DataFrame(rows, columns=list(RESULT_COLUMNS))
    if out_path:
        return pd.read_csv(out_path)
    return result
