"""The profiling corpora shipped in ``datasets/``: list, locate, load.

Why: the predictor's reference models and every benchmark learn from these tables.
Each carries a provenance sidecar ``{name}.provenance.json`` saying how it was made;
they are regenerated bit-for-bit by the build script ``python tools/make_corpora.py
--all`` (outside the library: nothing here runs the twin).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pandas as pd

from ..errors import DataError
from ..schema import check_samples, read_csv

_PACKAGE = "powertrain._datasets"
REGENERATE = "python tools/make_corpora.py --all"


def _folder() -> Path:
    return Path(str(resources.files(_PACKAGE)))


def corpus_names() -> list[str]:
    """Names (file stems) of the corpora present in the installed ``datasets/``."""
    return sorted(p.name[: -len(".csv")] for p in _folder().glob("*.csv"))


def corpus_path(name: str) -> Path:
    """Path of a shipped corpus CSV; a clear error lists the known names."""
    path = _folder() / f"{name}.csv"
    if not path.is_file():
        known = ", ".join(corpus_names()) or "none (run: " + REGENERATE + ")"
        raise DataError(f"no corpus named {name!r}; available: {known}")
    return path


def load_corpus(name: str) -> pd.DataFrame:
    """A shipped corpus as a DataFrame, validated against the data schema."""
    path = corpus_path(name)
    return check_samples(read_csv(path, "corpus"), source=str(path))


def provenance(name: str) -> dict:
    """The provenance sidecar of a shipped corpus."""
    path = corpus_path(name).with_name(f"{name}.provenance.json")
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise DataError(f"{path}: unreadable provenance sidecar ({e})") from None
