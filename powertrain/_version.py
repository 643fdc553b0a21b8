"""The package version, read once from the installed metadata.

Why here and not in ``powertrain/__init__``: modules that record the version in their
output (the sweep's provenance, the twin, model files, corpora) would otherwise import
the package root back, which makes import cycles.
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path


def _read_version() -> str:
    try:
        return metadata.version("powertrain")
    except metadata.PackageNotFoundError:  # a source tree on sys.path, not installed
        pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
        try:
            text = pyproject.read_text()
        except OSError:
            return "0+unknown"
        m = re.search(r'^version\s*=\s*"([^"]+)"', text, re.MULTILINE)
        return m.group(1) if m else "0+unknown"


__version__: str = _read_version()
