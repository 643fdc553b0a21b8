"""One SHA-256 helper for every file the package verifies (model weights, corpora).

Why: a single implementation means one place to change the block size or algorithm, and
no two modules that disagree on how a file's digest is computed.
"""

from __future__ import annotations

import hashlib
from pathlib import Path


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB blocks so large files stay cheap."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
