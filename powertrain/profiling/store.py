"""The sweep's output on disk: one CSV that a crash, a kill or a full disk never corrupts.

Why its own module: the measurement protocol (:mod:`.sweep`) decides what to measure;
this decides how a measured row reaches the disk and how a rerun finds where the last one
stopped. Rows are appended and fsynced one configuration at a time (raw logs first, the
summary row last, the commit point); a provenance sidecar holds the run header a resumed
run must match; a lock file stops a second writer.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
from filelock import FileLock, Timeout

from .._version import __version__
from ..backends import Backend
from ..devices.specs import device_names
from ..errors import DataError, PowerTrainError, ProfilingError
from ..utils.files import atomic_write, disk_reason, fsync_dir

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


def config_key(row: Mapping, columns: Sequence[str]) -> tuple:
    return tuple(round(float(row[c]), _ROUND) for c in columns)


def keys_of(df: pd.DataFrame, columns: Sequence[str]) -> list[tuple]:
    vals = np.round(df[list(columns)].to_numpy(dtype=float), _ROUND)
    return [tuple(float(x) for x in r) for r in vals]


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


def _disk_error(path: Path, e: OSError, out: Path | None = None) -> DataError:
    """A one-line error for a failed write (full disk, file-size limit, permissions)."""
    kept = (
        f"; the rows already in {out} are kept, rerun with the same output to resume" if out else ""
    )
    return DataError(f"{path}: cannot write ({disk_reason(e)}){kept}")


def append_csv(df: pd.DataFrame, path: Path, fsync: bool = True, out: Path | None = None) -> None:
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
        fsync_dir(path)


def write_whole(path: Path, text: str) -> None:
    """Replace ``path`` atomically; a failed write is a DataError naming the file."""
    try:
        atomic_write(path, text)
    except OSError as e:
        raise _disk_error(path, e) from None


def lock_path(out: Path) -> Path:
    """The lock file beside ``out`` that one writer holds for the whole sweep."""
    out = Path(out)
    return out.with_name(out.name + ".lock")


@contextlib.contextmanager
def exclusive(out: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``out`` for a sweep: a second writer fails at once.

    Why: two runs appending to one CSV interleave rows and duplicate configurations; the
    lock (an OS lock on a sidecar file, released by the system if the process dies)
    prevents it."""
    path = lock_path(out)
    lock = FileLock(path, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise DataError(
            f"{out}: another run is writing to this output (lock {path.name} is held); "
            "wait for it to finish or choose another output file"
        ) from None
    except OSError as e:
        raise _disk_error(path, e) from None
    try:
        yield
    finally:
        # remove the lock file while still holding it, so a finished run leaves only its
        # outputs; a second writer that opened it before sees it held and stops
        with contextlib.suppress(OSError):
            path.unlink()
        lock.release()


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


def read_csv(path: Path, what: str) -> pd.DataFrame:
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


def already_done(out: Path, backend: Backend, header: Mapping | None = None) -> set[tuple]:
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
        done_df = read_csv(out, "output")
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
    done = set(keys_of(done_df, keys)) if len(done_df) else set()
    for p in (mb_path, pw_path):
        if not p.exists() or p.stat().st_size == 0:
            continue
        raw = read_csv(p, "raw log")
        if not len(raw) or any(c not in raw.columns for c in keys):
            continue
        keep = np.array([k in done for k in keys_of(raw, keys)], dtype=bool)
        if not keep.all():  # killed between the raw logs and the summary row
            write_whole(p, raw[keep].to_csv(index=False, lineterminator="\n"))
    return done


def write_meta(out: Path, backend: Backend, n_minibatches: int, header: Mapping) -> None:
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
    spec = getattr(backend.device, "spec", None)
    if spec is not None and spec.name not in device_names():  # so later commands know it
        info["device_spec"] = spec.to_dict()
    write_whole(path, json.dumps(info, indent=1, default=str) + "\n")


def register_sidecar_device(csv: Path | str) -> None:
    """Register the device spec that a profiling output's sidecar (``X.meta.json`` beside
    ``X.csv``) records for a device outside the catalog; nothing when there is none."""
    from ..devices.specs import register_device

    path = meta_path(Path(csv))
    try:
        spec = json.loads(path.read_text()).get("device_spec")
    except (OSError, ValueError, AttributeError):
        return  # no sidecar (or not ours): the CSV must name a known device itself
    if spec is not None:
        try:
            register_device(spec)
        except PowerTrainError as e:
            raise DataError(f"{path}: device_spec: {e}") from None
