"""Profile a list of configurations on a backend: the loop users run on a board.

Why: one code path for the twin and for real hardware, so corpora made on the twin are
made exactly as a user's samples would be. Each finished configuration is appended and
fsynced to the output CSV (raw logs first, then the summary row) before the next
starts, so an interrupted sweep -- Ctrl-C, a crash, SIGKILL, a power cut -- resumes
where it stopped without losing or duplicating a configuration.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np
import pandas as pd

from ..backends import Backend, as_backend
from ..errors import DataError, ProfilingError
from ..twin import Twin
from ..utils.progress import progress_bar
from . import store
from .window import Window


def _describe(config: Mapping, columns: Iterable[str]) -> str:
    short = {
        "cores": "c",
        "cpu_mhz": "cpu",
        "gpu_mhz": "gpu",
        "mem_mhz": "mem",
        "batch_size": "b",
        "num_workers": "w",
    }
    return " ".join(f"{short.get(c, c)}={float(config[c]):g}" for c in columns if c in config)


# -- measuring one configuration ---------------------------------------------------------


def profile_one(
    backend: Backend | Twin,
    config: Mapping[str, float],
    n_minibatches: int = 40,
    min_power_samples: int = 2,
    max_settle_s: float = 30.0,
    window: int = 3,
    rel_tol: float = 0.03,
    settle_tol: float = 0.0,
) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    """Measure one configuration; return (summary row, minibatch log, power log).

    Runs a discarded warm-up minibatch, then minibatches until the power has settled
    (sliding window of ``window`` readings within ``rel_tol``) and at least
    ``n_minibatches`` clean ones after it hold ``min_power_samples`` sensor readings;
    when the last ``n_minibatches`` are too quick for that, the window grows backwards
    over more clean minibatches. If power never settles within ``max_settle_s``, the
    minibatches after that point are used and the row is marked ``stable = False``. A
    sensor that stays silent for several sample periods raises ProfilingError; a window
    that still holds no reading gets NaN power, never 0 W.

    ``settle_tol`` > 0 ends the window earlier, once the mean time and power of the
    clean minibatches are known to that relative standard error (at least
    :data:`~powertrain.profiling.window.MIN_SETTLED` minibatches and two power
    readings): a configuration is measured
    only as long as it takes (``n_minibatches`` stays the longest window).

    Parameters
    ----------
    backend : Backend or Twin
        The board.
    config : mapping
        The configuration: each of the backend's ``config_columns`` and its value.
    n_minibatches : int
        Clean minibatches measured (the longest window with ``settle_tol``).
    min_power_samples : int
        Power readings the window must hold.
    max_settle_s : float
        The longest wait for power to settle after the mode change, in seconds.
    window, rel_tol : int, float
        Power has settled when ``window`` readings agree within ``rel_tol``.
    settle_tol : float
        The relative standard error at which the window may end early (0: never).

    Returns
    -------
    tuple of (dict, DataFrame, DataFrame)
        The summary row, the per-minibatch log and the power log.
    """
    backend = as_backend(backend)
    if int(n_minibatches) < 1:
        raise ValueError(f"n_minibatches must be >= 1, got {n_minibatches!r}")
    shown = _describe(config, backend.config_columns)  # names the mode in errors
    backend.configure(config)
    t_mode = backend.now()
    w = Window(backend, t_mode, shown, int(n_minibatches), min_power_samples, max_settle_s,
               window, rel_tol, settle_tol)  # fmt: skip

    def run() -> bool:
        t0 = backend.now()
        ms = backend.run_minibatch()
        if ms is None or not np.isfinite(ms) or ms <= 0:
            raise ProfilingError(f"backend returned an invalid minibatch time {ms!r} for {shown}")
        return w.add(t0, backend.now(), float(ms))

    run()  # warm-up: kernel selection, allocator, caches (PowerTrain §2.5) -- discarded
    while not run():
        pass
    row = {c: config[c] for c in backend.config_columns if c in config}
    row.update(w.row())
    if row["n_power_samples"] == 0:
        warnings.warn(
            f"no power reading during the clean minibatches of {shown}; power_w is NaN (not 0)",
            RuntimeWarning,
            stacklevel=2,
        )
    row["profile_s"] = backend.now() - t_mode
    log, chosen = w.log, w.chosen
    assert chosen is not None
    start, end = log[chosen][0], log[-1][1]
    seen_values = backend.observed(start, end)
    row.update({c: seen_values.get(c, np.nan) for c in backend.observed_columns})
    mb = pd.DataFrame(log, columns=["start_s", "end_s", "time_ms"])
    mb["clean"] = np.arange(len(log)) >= chosen
    all_samples = np.asarray(backend.power_samples(t_mode, backend.now()), dtype=float)
    pw = pd.DataFrame(all_samples.reshape(-1, 2), columns=["t_s", "power_w"])
    return row, mb, pw


# -- the sweep ---------------------------------------------------------------------------


def _mark_resets(records: list[dict]) -> None:
    """Recompute ``reset_before`` over the rows still to run: a resumed sweep skips rows,
    so a chain's first row may be gone while the next one would step a frequency up."""
    prev = None
    for r in records:
        r["reset_before"] = prev is not None and (
            r["cpu_mhz"] > prev["cpu_mhz"] + 1e-9 or r["gpu_mhz"] > prev["gpu_mhz"] + 1e-9
        )
        prev = r


def profile(
    backend: Backend | Twin,
    modes: pd.DataFrame,
    batch_size: int | None = None,
    n_minibatches: int = 40,
    out: str | Path | None = None,
    progress: bool | None = None,
    fsync: bool = True,
    header: Mapping | None = None,
    **kwargs: float,
) -> pd.DataFrame:
    """Profile every row of ``modes`` on ``backend``: set the mode, train, measure.

    With ``out``, each finished configuration is appended to that CSV (raw logs and a
    provenance sidecar beside it) and fsynced at once, and rows already there are
    skipped, so rerunning resumes an interrupted sweep. A run header (backend, device,
    workload, minibatches, the backend's own settings such as the twin's seed,
    ``header``'s fields) is stored in the sidecar and must match on resume; an exclusive
    lock stops a second run writing the same ``out``. If profiling fails, the backend's
    ``on_error`` puts the board back in its original state before the error propagates.

    Parameters
    ----------
    backend : Backend or Twin
        The board: a :class:`Twin`, a Jetson, an NVIDIA GPU (NVML) or a replay.
    modes : DataFrame
        One row per configuration to measure (the device's knob columns).
    batch_size : int, optional
        The batch size of every row; else ``modes`` carries a ``batch_size`` column.
    n_minibatches : int
        Clean minibatches measured per configuration (the paper's 40).
    out : str or Path, optional
        A CSV to append to as the sweep goes (resumable).
    progress : bool, optional
        A progress bar (None: only when stderr is a terminal).
    fsync : bool
        False trades crash durability for speed (simulated corpora).
    header : mapping, optional
        Fields added to the run header.
    **kwargs
        Passed to :func:`profile_one` (e.g. ``settle_tol``).

    Returns
    -------
    DataFrame
        One row per configuration: the backend's ``config_columns``, the measurements
        (``time_ms``, ``power_w`` and their spreads) and its ``observed_columns``; with
        ``out``, the whole file.
    """
    backend = as_backend(backend)
    configs = modes.copy()
    if batch_size is not None:
        configs["batch_size"] = int(batch_size)
    configs = backend.complete_modes(configs)
    configs = backend.check_modes(configs, source="modes")
    configs = backend.sweep_order(configs)
    keys = store.key_columns(backend)
    missing = [c for c in keys if c not in configs.columns]
    if missing:
        raise DataError(
            f"modes: missing column(s) {', '.join(missing)} that {type(backend).__name__} sets"
        )
    records = configs.to_dict("records")
    seen: set[tuple] = set()
    unique = []
    for r in records:  # the same configuration twice is profiled once
        k = store.config_key(r, keys)
        if k not in seen:
            seen.add(k)
            unique.append(r)
    out_path = Path(out) if out is not None else None
    if out_path is None:
        return _sweep(
            backend, configs, unique, keys, set(), None, n_minibatches, progress, fsync, kwargs
        )
    if not out_path.parent.is_dir():
        raise DataError(f"{out_path}: folder {out_path.parent} does not exist")
    if out_path.is_dir():
        raise DataError(f"{out_path}: is a folder; give a CSV file name")
    run = {
        **backend.run_header(),
        "n_minibatches": int(n_minibatches),
        **{k: kwargs[k] for k in sorted(kwargs)},
        **dict(header or {}),
    }
    run = json.loads(json.dumps(run, default=str))  # as stored, so resume compares like
    with store.exclusive(out_path):
        done = store.already_done(out_path, backend, run)
        meta = store.meta_path(out_path)
        if meta.exists():  # checked readable by already_done
            recorded = json.loads(meta.read_text()).get("backend")
            backend.adopt_recorded(recorded if isinstance(recorded, dict) else {})
        store.write_meta(out_path, backend, n_minibatches, run)
        _sweep(
            backend, configs, unique, keys, done, out_path, n_minibatches, progress, fsync, kwargs
        )
        result = store.read_csv(out_path, "output")
    return result.drop_duplicates(subset=list(keys), keep="first").reset_index(drop=True)


def _sweep(
    backend: Backend,
    configs: pd.DataFrame,
    unique: list[dict],
    keys: tuple[str, ...],
    done: set[tuple],
    out_path: Path | None,
    n_minibatches: int,
    progress: bool | None,
    fsync: bool,
    kwargs: dict,
) -> pd.DataFrame:
    """Profile the configurations of ``unique`` not in ``done``, appending to ``out_path``."""
    todo = [r for r in unique if store.config_key(r, keys) not in done]
    if "reset_before" in configs.columns:
        _mark_resets(todo)
    columns = store.output_columns(backend)
    rows: list[dict] = []
    board_s = 0.0
    bar = progress_bar(
        total=len(todo),
        show=progress,
        unit="mode",
        dynamic_ncols=True,
        desc=f"{backend.workload_name} on {backend.device_name}",
        bar_format="{desc}: {n}/{total} [{elapsed}<{remaining}]{postfix}",
    )
    try:
        for i, config in enumerate(todo):
            status = f"{_describe(config, keys)} | board {board_s / 3600:.2f} h"
            bar.set_postfix_str(status, refresh=True)
            if config.get("reset_before") and i > 0:
                backend.reset()
            row, mb, pw = profile_one(backend, config, n_minibatches=n_minibatches, **kwargs)
            row = {"device": backend.device_name, "workload": backend.workload_name, **row}
            rows.append(row)
            board_s += float(row.get("profile_s", 0.0))
            if out_path is not None:
                key = {c: config[c] for c in keys}
                mb_path, pw_path = store.raw_log_paths(out_path)
                store.append_csv(mb.assign(**key), mb_path, fsync, out_path)
                store.append_csv(pw.assign(**key), pw_path, fsync, out_path)
                # the commit point
                store.append_csv(pd.DataFrame([row], columns=columns), out_path, fsync, out_path)
            bar.update(1)
    except BaseException:
        try:
            backend.on_error()
        except Exception as restore_error:  # keep the original error, report both
            warnings.warn(
                f"restoring the board after a failure failed too: {restore_error}",
                RuntimeWarning,
                stacklevel=2,
            )
        raise
    finally:
        bar.close()
    return pd.DataFrame(rows, columns=columns)
