"""Writing files so that a crash never leaves half of one, and saying why a write failed.

Why one module: the sweep's sidecars, report pages, model files and caches all need the
same two things -- replace a file whole or not at all, and turn an ``OSError`` into a
one-line reason a user can act on (full disk, read-only folder, permissions).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import uuid
from pathlib import Path

_REASONS = {
    errno.ENOSPC: "the disk is full",
    errno.EFBIG: "the file-size limit was reached",
    errno.EDQUOT: "the disk quota is exhausted",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "the file system is read-only",
    errno.EISDIR: "it is a folder",
}
#: errors that mean "this disk or folder takes no more writes", not a bug
DISK_ERRNOS = frozenset(_REASONS) - {errno.EISDIR, errno.EFBIG}


def disk_reason(e: OSError) -> str:
    """Why a write failed, in a few words (``the disk is full``, ``permission denied``)."""
    return _REASONS.get(e.errno or 0, e.strerror or type(e).__name__)


def fsync_dir(path: str | Path) -> None:
    """Make a new or renamed entry in ``path``'s folder durable (no-op where folders
    cannot be opened)."""
    try:
        fd = os.open(Path(path).parent, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def atomic_write(path: str | Path, data: str | bytes, fsync: bool = True) -> None:
    """Replace ``path`` with ``data`` whole or not at all: written to a hidden temporary
    file beside it (fsynced), then renamed over it. A failed write removes the temporary
    file and raises the ``OSError``; the old file, if any, is untouched."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    raw = data.encode() if isinstance(data, str) else data
    try:
        with open(tmp, "wb") as f:
            f.write(raw)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if fsync:
        fsync_dir(path)


def replace_dir(new: str | Path, path: str | Path) -> None:
    """Put the finished folder ``new`` in place of ``path``: an existing ``path`` is moved
    aside first and deleted only once ``new`` is in place, so a reader finds the old
    folder or the new one, never a half-written one."""
    new, path = Path(new), Path(path)
    if not path.exists():
        os.replace(new, path)
        return
    old = path.with_name(f".{path.name}.{uuid.uuid4().hex}.old")
    os.replace(path, old)
    os.replace(new, path)
    shutil.rmtree(old, ignore_errors=True)
