"""The real measurements shipped in datasets/real/ (Zeus NSDI '23, V100 and A40).

Why: every other figure of this package is measured on its own twin. These corpora are
real GPUs: epoch time and average power over (batch size, power limit), and per workload
the median epochs to a target metric per batch size (a real r vector). Their knobs are a
datacenter GPU's (``power_limit_w``, declared by the catalog's ``v100``/``a40`` specs)
and their time is per epoch, so a predictor for them is
``Predictor(targets=("epoch_s", "power_w"))``; ``tools/import_zeus.py`` made them.
"""

from __future__ import annotations

import json

import pandas as pd

from .corpora import _folder
from .devices import check_device
from .errors import DataError
from .hashing import sha256_file
from .schema import check_columns, read_csv

#: the knobs and targets of a real corpus
KNOBS = ("power_limit_w", "batch_size")
TARGETS = ("epoch_s", "power_w")


def _dir():
    return _folder() / "real"


def real_corpus_names() -> list[str]:
    """``{gpu}_{workload}`` names, e.g. ``v100_resnet50-imagenet``."""
    return sorted(p.stem for p in _dir().glob("*.csv") if not p.name.startswith("r_"))


def load_real_corpus(name: str) -> pd.DataFrame:
    """One GPU x workload: device, workload, batch_size, power_limit_w, epoch_s, power_w.
    The file's SHA-256 must match its provenance sidecar, and every power limit must be
    one the device's spec declares."""
    path = _dir() / f"{name}.csv"
    if not path.is_file():
        raise DataError(f"no real corpus named {name!r}; known: {', '.join(real_corpus_names())}")
    meta = json.loads(path.with_suffix(".provenance.json").read_text())
    if sha256_file(path) != meta.get("csv_sha256"):
        raise DataError(f"{path}: contents differ from its provenance (sha256); re-import it")
    df = check_columns(
        read_csv(path), [*KNOBS, *TARGETS], source=str(path), positive=[*KNOBS, *TARGETS]
    )
    return check_device(df, source=str(path))


def real_provenance(name: str) -> dict:
    return json.loads((_dir() / f"{name}.provenance.json").read_text())


def load_real_r(workload: str) -> pd.DataFrame:
    """Median epochs to the target metric per batch size (batch_size, epochs, runs,
    target_metric) from the Zeus training trace."""
    path = _dir() / f"r_{workload}.csv"
    if not path.is_file():
        known = sorted(p.stem[2:] for p in _dir().glob("r_*.csv"))
        raise DataError(f"no training trace for workload {workload!r}; known: {', '.join(known)}")
    return check_columns(
        read_csv(path),
        ["batch_size", "epochs"],
        source=str(path),
        positive=["batch_size", "epochs"],
    )
