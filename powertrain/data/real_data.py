"""Real measurements: the corpora shipped in datasets/real/ and any a user brings.

Why: every other figure of this package is measured on its own twin. The shipped real
corpora are the Zeus NSDI '23 traces (V100, A40: epoch time and average power over batch
size x power limit, plus per workload the median epochs to a target metric, a real r
vector; ``tools/import_zeus.py``) and the Perseus SOSP '24 frequency sweeps (A40 at 60
locked SM clocks, time and power of one microbatch per pipeline computation, in
``datasets/real/perseus/``; ``tools/import_perseus.py``). A user's own GPU corpus is
read the same way: any CSV whose ``device`` column names a device (catalog, registered,
or declared by its provenance sidecar's ``device_spec``), with a time column
(``time_ms`` per minibatch or ``epoch_s`` per epoch) and ``power_w``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ..decisions.optimise import (
    TIME_COLUMNS,
)  # time columns a corpus may carry: per minibatch or epoch
from ..devices.device import check_device, table_device
from ..devices.specs import register_device
from ..errors import DataError, PowerTrainError
from ..schema import check_columns, read_csv
from ..utils.hashing import sha256_file
from .corpora import _folder

#: the targets of the shipped Zeus corpora (per epoch)
TARGETS = ("epoch_s", "power_w")
SIDECAR = ".provenance.json"


def real_folder() -> Path:
    """The package's own folder of real corpora (``datasets/real``)."""
    return _folder() / "real"


def _dir(folder: str | Path | None) -> Path:
    d = real_folder() if folder is None else Path(folder)
    if not d.is_dir():
        raise DataError(f"no folder of real corpora at {d}")
    return d


def real_corpus_names(folder: str | Path | None = None) -> list[str]:
    """File stems of the corpora in ``folder`` (default the package's, where names are
    ``{gpu}_{workload}``, e.g. ``v100_resnet50-imagenet``); ``r_*`` traces excluded."""
    return sorted(p.stem for p in _dir(folder).glob("*.csv") if not p.name.startswith("r_"))


def _inside(folder: Path, name: str, suffix: str, what: str) -> Path:
    """``folder/name+suffix``, refusing a name that would leave ``folder``."""
    if not isinstance(name, str) or not name:
        raise DataError(f"a {what} name must be a non-empty string, got {name!r}")
    path = folder / f"{name}{suffix}"
    if Path(name).name != name or not path.resolve().is_relative_to(folder.resolve()):
        raise DataError(
            f"{what} name {name!r} must be a file stem inside {folder} (no folders or '..'); "
            "to read a file elsewhere pass its path as a pathlib.Path or a '.csv' path"
        )
    return path


def corpus_file(name: str | Path, folder: str | Path | None = None) -> Path:
    """Where a corpus lives: a ``Path`` or a string ending in ``.csv`` is a file; any
    other string is a name inside ``folder`` (default the package's)."""
    if isinstance(name, Path) or (isinstance(name, str) and name.endswith(".csv")):
        path = Path(name)
        if not path.is_file():
            raise DataError(f"no real corpus file at {path}")
        return path
    d = _dir(folder)
    path = _inside(d, name, ".csv", "real corpus")
    if not path.is_file():
        known = ", ".join(real_corpus_names(d)) or "none"
        raise DataError(f"no real corpus named {name!r} in {d}; known: {known}")
    return path


def _sidecar(path: Path) -> dict | None:
    side = path.with_name(path.stem + SIDECAR)
    if not side.is_file():
        return None
    try:
        meta = json.loads(side.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(f"{side}: unreadable provenance sidecar ({e})") from None
    if not isinstance(meta, dict):
        raise DataError(f"{side}: a provenance sidecar must hold a JSON object")
    return meta


def time_column(df: pd.DataFrame, source: str | None = None) -> str:
    """The corpus's time target: ``time_ms`` (per minibatch) or ``epoch_s`` (per epoch)."""
    found = [c for c in TIME_COLUMNS if c in df.columns]
    if len(found) != 1:
        where = f"{source}: " if source else ""
        raise DataError(
            f"{where}a real corpus needs exactly one time column of {', '.join(TIME_COLUMNS)} "
            f"(ms per minibatch or s per epoch), found {found or 'none'}"
        )
    return found[0]


def corpus_targets(df: pd.DataFrame, source: str | None = None) -> tuple[str, str]:
    """``(time column, "power_w")``: the targets a predictor for this corpus learns, e.g.
    ``Predictor(targets=corpus_targets(df))``."""
    return time_column(df, source), "power_w"


def load_real_corpus(name: str | Path, folder: str | Path | None = None) -> pd.DataFrame:
    """A real corpus: ``device``, ``workload``, the device's knobs, ``batch_size``, a time
    column and ``power_w``.

    ``name`` is a corpus name in ``folder`` (default the package's ``datasets/real``) or
    a CSV path. Its provenance sidecar ``{stem}.provenance.json``, when present, is
    honoured: its ``csv_sha256`` must match the file, and a ``device_spec`` in it
    registers that device so the rows' ``device`` id resolves. Every row must be one of
    the device's configurations.
    """
    path = corpus_file(name, folder)
    meta = _sidecar(path)
    if meta is not None:
        digest = meta.get("csv_sha256")
        if not isinstance(digest, str):  # a sidecar must vouch for these very rows
            side = path.with_name(path.stem + SIDECAR)
            raise DataError(
                f"{side}: no csv_sha256 (the sha256 of {path.name}); a provenance sidecar "
                "must name the file it describes: add it, or remove the sidecar"
            )
        if sha256_file(path) != digest:
            raise DataError(f"{path}: contents differ from its provenance (sha256); re-import it")
        if meta.get("device_spec") is not None:
            try:
                register_device(meta["device_spec"])
            except PowerTrainError as e:
                side = path.with_name(path.stem + SIDECAR)
                raise DataError(f"{side}: device_spec: {e}") from None
    df = read_csv(path)
    src = str(path)
    if "device" not in df.columns:
        raise DataError(
            f"{src}: a real corpus needs a 'device' column naming its device (a catalog id, "
            "a registered spec, or a device_spec in its provenance sidecar)"
        )
    dev = table_device(df, src)
    assert dev is not None
    targets = corpus_targets(df, src)
    cols = [*dev.config_columns, *targets]
    df = check_columns(df, cols, source=src, positive=cols)
    return check_device(df, source=src)


def real_provenance(name: str | Path, folder: str | Path | None = None) -> dict:
    """The provenance sidecar of a corpus (empty if it has none)."""
    return _sidecar(corpus_file(name, folder)) or {}


def load_real_r(workload: str, folder: str | Path | None = None) -> pd.DataFrame:
    """Median epochs to the target metric per batch size (batch_size, epochs, runs,
    target_metric) from a training trace ``r_{workload}.csv`` in ``folder``."""
    d = _dir(folder)
    path = _inside(d, f"r_{workload}", ".csv", "training trace")
    if not path.is_file():
        known = sorted(p.stem[2:] for p in d.glob("r_*.csv"))
        raise DataError(
            f"no training trace for workload {workload!r} in {d}; known: "
            f"{', '.join(known) or 'none'}"
        )
    return check_columns(
        read_csv(path),
        ["batch_size", "epochs"],
        source=str(path),
        positive=["batch_size", "epochs"],
    )
