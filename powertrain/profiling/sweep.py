"""Profile a list of configurations on a backend: the loop users run on a board.

Why: one code path for the twin and for real hardware, so corpora made on the twin are
made exactly as a user's samples would be. Each finished configuration is appended and
fsynced to the output CSV (raw logs first, then the summary row) before the next
starts, so an interrupted sweep -- Ctrl-C, a crash, SIGKILL, a power cut -- resumes
where it stopped without losing or duplicating a configuration.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from .._version import __version__
from ..backends import Backend, as_backend
from ..errors import DataError, ProfilingError
from ..schema import CONFIG_COLUMNS
from ..twin import Twin
from .aggregate import stable_since, summarise_window

#: measured columns written per configuration, in order, after ``device``, ``workload``
#: and the backend's ``config_columns`` (its ``observed_columns`` follow them)
MEASURED_COLUMNS = (
    "time_ms",
    "power_w",
    "time_ms_std",
    "power_w_std",
    "n_minibatches",
    "n_power_samples",
    "stable",
    "profile_s",
)
#: the summary columns of a backend with the default configuration columns and no knobs
RESULT_COLUMNS = ("device", "workload", *CONFIG_COLUMNS, *MEASURED_COLUMNS)

_ROUND = 3  # decimals a configuration is identified by (MHz tables are given to 0.1 kHz)


def key_columns(backend: Backend) -> tuple[str, ...]:
    """The columns that identify a configuration: what the backend sets."""
    return tuple(backend.config_columns)


def output_columns(backend: Backend) -> list[str]:
    """Columns of the summary CSV for this backend, in order: identity, configuration,
    measurements, then the backend's observed extras."""
    names = [
        "device",
        "workload",
        *backend.config_columns,
        *MEASURED_COLUMNS,
        *backend.observed_columns,
    ]
    clash = sorted({c for c in names if names.count(c) > 1})
    if clash:  # one CSV column cannot hold both a setting and a measurement
        raise ProfilingError(
            f"{type(backend).__name__}: column(s) {', '.join(clash)} declared twice "
            "(configuration, measured and observed columns must not overlap)"
        )
    return names


def _config_key(row: Mapping, columns: Sequence[str]) -> tuple:
    return tuple(round(float(row[c]), _ROUND) for c in columns)


def _keys_of(df: pd.DataFrame, columns: Sequence[str]) -> list[tuple]:
    vals = np.round(df[list(columns)].to_numpy(dtype=float), _ROUND)
    return [tuple(float(x) for x in r) for r in vals]


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


def _clean_window(backend: Backend, log: list, first: int, n: int, min_samples: int) -> int | None:
    """Index into ``log`` of the start of the shortest clean window that ends at the last
    minibatch, holds at least ``n`` minibatches and ``min_samples`` power readings; None
    if the clean minibatches so far hold too few readings.

    Why: at fast modes 40 minibatches finish between two 1 Hz readings; extending the
    window (more minibatches) is the fix, averaging an empty window as 0 W is not.
    """
    last = len(log) - n  # latest start index that still leaves n minibatches
    if last < first:
        return None
    t = backend.power_samples(log[first][0], log[-1][1])
    t = np.asarray(t, dtype=float).reshape(-1, 2)[:, 0]
    if len(t) < min_samples:
        return None
    t.sort()
    starts = np.array([log[i][0] for i in range(first, last + 1)])
    counts = len(t) - np.searchsorted(t, starts, side="left")
    ok = np.flatnonzero(counts >= min_samples)
    return first + int(ok[-1]) if len(ok) else None


def profile_one(
    backend: Backend | Twin,
    config: Mapping[str, float],
    n_minibatches: int = 40,
    min_power_samples: int = 2,
    max_settle_s: float = 30.0,
    window: int = 3,
    rel_tol: float = 0.03,
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
    """
    backend = as_backend(backend)
    if int(n_minibatches) < 1:
        raise ValueError(f"n_minibatches must be >= 1, got {n_minibatches!r}")
    n = int(n_minibatches)
    period = float(backend.sample_period_s or 1.0)
    # a working sensor gives readings by then (the floor absorbs thread scheduling delays)
    patience = max((min_power_samples + 3) * period, 2.0)
    shown = _describe(config, backend.config_columns)  # names the mode in errors
    backend.configure(config)
    t_mode = backend.now()
    log: list[tuple[float, float, float]] = []  # (start_s, end_s, ms)

    def run() -> None:
        t0 = backend.now()
        ms = backend.run_minibatch()
        if ms is None or not np.isfinite(ms) or ms <= 0:
            raise ProfilingError(f"backend returned an invalid minibatch time {ms!r} for {shown}")
        log.append((t0, backend.now(), float(ms)))

    run()  # warm-up: kernel selection, allocator, caches (PowerTrain §2.5) -- discarded
    settled_at: float | None = None
    first = None  # index of the first clean minibatch
    stable = True
    n_seen = -1
    chosen: int | None = None
    # a guard only: settling is forced after max_settle_s and the window after `patience`
    max_total = 100 * n + 100_000
    while chosen is None:
        run()
        now = log[-1][1]
        if settled_at is None:
            seen = np.asarray(backend.power_samples(t_mode, now), dtype=float).reshape(-1, 2)
            if len(seen) == 0 and now - t_mode > patience:
                raise ProfilingError(
                    f"the power sensor gave no reading for {now - t_mode:.1f} s (sample period "
                    f"{period:g} s) in configuration {shown}; check that "
                    "the sensor works (jtop service running, INA3221 files readable)"
                )
            if len(seen) != n_seen:
                n_seen = len(seen)
                settled_at = stable_since(seen, window, rel_tol)
            if settled_at is None and now - t_mode > max_settle_s:
                settled_at, stable = now, False
        if settled_at is not None and first is None:
            first = next((i for i in range(1, len(log)) if log[i][0] >= settled_at), None)
        if first is not None:
            chosen = _clean_window(backend, log, first, n, min_power_samples)
            if chosen is None and len(log) - first >= n and log[-1][1] - log[first][0] >= patience:
                chosen, stable = first, False  # too few readings even over a long window
        if chosen is None and len(log) > max_total:
            chosen, stable = (first if first is not None else max(1, len(log) - n)), False
    clean = log[chosen:]
    start, end = clean[0][0], clean[-1][1]
    samples = np.asarray(backend.power_samples(start, end), dtype=float).reshape(-1, 2)
    arr = np.array(clean)
    row = {c: config[c] for c in backend.config_columns if c in config}
    row.update(summarise_window(arr[:, 0], arr[:, 1], arr[:, 2], samples))
    if row["n_power_samples"] == 0:
        warnings.warn(
            f"no power reading during the clean minibatches of {shown}; power_w is NaN (not 0)",
            RuntimeWarning,
            stacklevel=2,
        )
    row["stable"] = bool(stable)
    row["profile_s"] = backend.now() - t_mode
    seen_values = backend.observed(start, end)
    row.update({c: seen_values.get(c, np.nan) for c in backend.observed_columns})
    mb = pd.DataFrame(log, columns=["start_s", "end_s", "time_ms"])
    mb["clean"] = np.arange(len(log)) >= chosen
    all_samples = np.asarray(backend.power_samples(t_mode, backend.now()), dtype=float)
    pw = pd.DataFrame(all_samples.reshape(-1, 2), columns=["t_s", "power_w"])
    return row, mb, pw


# -- crash-safe output -------------------------------------------------------------------


def raw_log_paths(out: Path) -> tuple[Path, Path]:
    """Where the per-minibatch and per-sample logs of ``out`` live."""
    out = Path(out)
    stem = out.name[: -len(".csv")] if out.name.endswith(".csv") else out.name
    return out.with_name(stem + ".minibatches.csv"), out.with_name(stem + ".power.csv")


def meta_path(out: Path) -> Path:
    """The provenance sidecar of ``out`` (device, workload, backend, software, command)."""
    out = Path(out)
    stem = out.name[: -len(".csv")] if out.name.endswith(".csv") else out.name
    return out.with_name(stem + ".meta.json")


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path.parent, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _disk_error(path: Path, e: OSError, out: Path | None = None) -> DataError:
    """A one-line error for a failed write (full disk, file-size limit, permissions)."""
    reason = {
        errno.ENOSPC: "the disk is full",
        errno.EFBIG: "the file-size limit was reached",
        errno.EDQUOT: "the disk quota is exhausted",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
        errno.EROFS: "the file system is read-only",
        errno.EISDIR: "it is a folder",
    }.get(e.errno, e.strerror or type(e).__name__)
    kept = (
        f"; the rows already in {out} are kept, rerun with the same output to resume" if out else ""
    )
    return DataError(f"{path}: cannot write ({reason}){kept}")


def _append_csv(df: pd.DataFrame, path: Path, fsync: bool = True, out: Path | None = None) -> None:
    """Append rows with one write call, flushed (and fsynced) before returning.

    A write that fails part-way (full disk, file-size limit) is cut back to the file's
    previous length, so the rows before it stay a clean CSV; then a DataError is raised."""
    try:
        size = path.stat().st_size if path.exists() else 0
    except OSError as e:
        raise _disk_error(path, e, out) from None
    new = size == 0
    text = df.to_csv(header=new, index=False, lineterminator="\n")
    try:
        with open(path, "a", newline="") as f:
            try:
                f.write(text)
                f.flush()
                if fsync:
                    os.fsync(f.fileno())
            except OSError:
                with contextlib.suppress(OSError):
                    os.ftruncate(f.fileno(), size)
                raise
    except OSError as e:
        raise _disk_error(path, e, out) from None
    if new and fsync:
        _fsync_dir(path)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise _disk_error(path, e) from None
    _fsync_dir(path)


def lock_path(out: Path) -> Path:
    """The lock file beside ``out`` that one writer holds for the whole sweep."""
    out = Path(out)
    return out.with_name(out.name + ".lock")


@contextlib.contextmanager
def _exclusive(out: Path):
    """Hold an exclusive lock on ``out`` for a sweep: a second writer fails at once.

    Why: two runs appending to one CSV interleave rows and duplicate configurations; the
    lock (flock on a sidecar, released by the kernel if the process dies) prevents it."""
    path = lock_path(out)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise _disk_error(path, e) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DataError(
                f"{out}: another run is writing to this output (lock {path.name} is held); "
                "wait for it to finish or choose another output file"
            ) from None
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _repair_tail(path: Path) -> None:
    """Cut a torn last line (the process died inside a write) so the CSV parses again."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) == b"\n":
            return
        f.seek(0)
        cut = f.read().rfind(b"\n") + 1
        f.truncate(cut)
        f.flush()
        os.fsync(f.fileno())


def _read_csv(path: Path, what: str) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()
    except (pd.errors.ParserError, UnicodeDecodeError) as e:
        raise DataError(
            f"{path}: cannot resume, the {what} is not a readable CSV ({e}); "
            "choose another output file"
        ) from None


def _check_identity(where: Path, found: Mapping[str, Iterable], backend: Backend) -> None:
    for col, expected in (("device", backend.device_name), ("workload", backend.workload_name)):
        values = sorted({str(v) for v in found.get(col, ())})
        if values and values != [str(expected)]:
            raise DataError(
                f"{where}: this output was written for {col} {', '.join(values)}, "
                f"not {expected!r}; "
                "profile into another output file (or delete this one to start over)"
            )


def _check_header(meta: Path, stored: Mapping, header: Mapping) -> None:
    """A resumed run must be the same run: every header field equal, or an error naming it."""
    for field in sorted(set(stored) | set(header)):
        was, now = stored.get(field), header.get(field)
        if was != now:
            raise DataError(
                f"{meta}: cannot resume, this output was written with {field} = "
                f"{json.dumps(was)}, this run has {field} = {json.dumps(now)}; rerun with the "
                "same settings, or profile into another output file"
            )


def _already_done(out: Path, backend: Backend, header: Mapping | None = None) -> set[tuple]:
    """Configurations already in ``out``; also checks the run header against the stored
    one, repairs a torn last line and drops raw-log rows of a configuration whose
    summary row never made it to disk."""
    keys = key_columns(backend)
    meta = meta_path(out)
    if meta.exists():
        try:
            info = json.loads(meta.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise DataError(
                f"{meta}: unreadable provenance sidecar ({e}); delete it to resume"
            ) from None
        _check_identity(meta, {k: [info[k]] for k in ("device", "workload") if k in info}, backend)
        if header is not None and "run" in info:
            _check_header(meta, info["run"], header)
    mb_path, pw_path = raw_log_paths(out)
    for p in (out, mb_path, pw_path):
        _repair_tail(p)
    if not out.exists() or out.stat().st_size == 0:
        done_df = pd.DataFrame(columns=output_columns(backend))
    else:
        done_df = _read_csv(out, "output")
    if len(done_df.columns):
        ids = {c: done_df[c] for c in ("device", "workload") if c in done_df}
        _check_identity(out, ids, backend)
        expected = output_columns(backend)
        if list(done_df.columns) != expected:
            missing = [c for c in expected if c not in done_df.columns]
            extra = [c for c in done_df.columns if c not in expected]
            raise DataError(
                f"{out}: cannot resume, its columns differ from this backend's output "
                f"(missing: {', '.join(missing) or '-'}; unexpected: {', '.join(extra) or '-'}); "
                "profile into another output file"
            )
    done = set(_keys_of(done_df, keys)) if len(done_df) else set()
    for p in (mb_path, pw_path):
        if not p.exists() or p.stat().st_size == 0:
            continue
        raw = _read_csv(p, "raw log")
        if not len(raw) or any(c not in raw.columns for c in keys):
            continue
        keep = np.array([k in done for k in _keys_of(raw, keys)], dtype=bool)
        if not keep.all():  # killed between the raw logs and the summary row
            _atomic_write(p, raw[keep].to_csv(index=False, lineterminator="\n"))
    return done


def _write_meta(out: Path, backend: Backend, n_minibatches: int, header: Mapping) -> None:
    path = meta_path(out)
    if path.exists():
        return
    info = {
        "run": dict(header),
        "device": backend.device_name,
        "workload": backend.workload_name,
        "n_minibatches": int(n_minibatches),
        "sample_period_s": float(backend.sample_period_s),
        "key_columns": list(key_columns(backend)),
        "powertrain": __version__,
        "python": sys.version.split()[0],
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": sys.argv,
        "backend": backend.describe(),
    }
    _atomic_write(path, json.dumps(info, indent=1, default=str) + "\n")


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
    **kwargs,
) -> pd.DataFrame:
    """Profile every row of ``modes`` on ``backend`` and return one row per configuration
    (the backend's ``config_columns``, the measurements, its ``observed_columns``).

    ``batch_size`` sets the column for every row (else ``modes`` must carry one). With
    ``out``, each finished configuration is appended to that CSV (raw logs and a
    provenance sidecar beside it) and fsynced at once, and rows already there are
    skipped, so rerunning resumes an interrupted sweep; the return value is then the
    whole file. ``fsync=False`` trades crash durability for speed (simulated corpora).
    A run header (backend, device, workload, minibatches, the backend's own settings such
    as the twin's seed, ``header``'s fields) is stored in the sidecar and must match on
    resume; an exclusive lock stops a second run writing the same ``out``. ``progress``:
    a progress bar (None: only when stderr is a terminal).
    Extra keyword arguments go to :func:`profile_one`. If profiling fails, the backend's
    ``on_error`` puts the board back in its original state before the error propagates.
    """
    backend = as_backend(backend)
    configs = modes.copy()
    if batch_size is not None:
        configs["batch_size"] = int(batch_size)
    configs = backend.complete_modes(configs)
    configs = backend.check_modes(configs, source="modes")
    configs = backend.sweep_order(configs)
    keys = key_columns(backend)
    missing = [c for c in keys if c not in configs.columns]
    if missing:
        raise DataError(
            f"modes: missing column(s) {', '.join(missing)} that {type(backend).__name__} sets"
        )
    records = configs.to_dict("records")
    seen: set[tuple] = set()
    unique = []
    for r in records:  # the same configuration twice is profiled once
        k = _config_key(r, keys)
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
    with _exclusive(out_path):
        done = _already_done(out_path, backend, run)
        if meta_path(out_path).exists():  # checked readable by _already_done
            recorded = json.loads(meta_path(out_path).read_text()).get("backend")
            backend.adopt_recorded(recorded if isinstance(recorded, dict) else {})
        _write_meta(out_path, backend, n_minibatches, run)
        _sweep(
            backend, configs, unique, keys, done, out_path, n_minibatches, progress, fsync, kwargs
        )
        result = _read_csv(out_path, "output")
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
    todo = [r for r in unique if _config_key(r, keys) not in done]
    if "reset_before" in configs.columns:
        _mark_resets(todo)
    columns = output_columns(backend)
    rows: list[dict] = []
    board_s = 0.0
    bar = tqdm(
        total=len(todo),
        disable=None if progress is None else not progress,
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
                mb_path, pw_path = raw_log_paths(out_path)
                _append_csv(mb.assign(**key), mb_path, fsync, out_path)
                _append_csv(pw.assign(**key), pw_path, fsync, out_path)
                # the commit point
                _append_csv(pd.DataFrame([row], columns=columns), out_path, fsync, out_path)
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
