from __future__ import annotations

import hashlib

from powertrain.utils.hashing import sha256_file


def test_sha256_file_matches_hashlib_across_block_boundary(tmp_path):
    data = bytes(range(256)) * 5000  # > 1 MiB, so more than one block is read
    path = tmp_path / "blob.bin"
    path.write_bytes(data)
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()
    assert sha256_file(str(path)) == hashlib.sha256(data).hexdigest()
