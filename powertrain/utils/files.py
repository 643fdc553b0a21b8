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
import stat
import uuid
from pathlib import Path
from typing import IO, Any, Iterable, Iterator

from ..errors import DataError

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


#: the longest file name most file systems take, in bytes (ext4, xfs, btrfs, tmpfs)
NAME_MAX = 255


def beside(path: str | Path, suffix: str) -> Path:
    """A hidden name beside ``path`` for a temporary file or folder, within
    :data:`NAME_MAX` whatever ``path``'s length: a name valid for ``path`` never fails
    because of the temporary one (the stem is shortened instead)."""
    path = Path(path)
    token = f".{uuid.uuid4().hex[:12]}{suffix}"
    room = NAME_MAX - 1 - len(token.encode())
    stem = path.name.encode()[:room].decode(errors="ignore")
    return path.with_name(f".{stem}{token}")


def _named(e: OSError, tmp: Path, path: Path) -> OSError:
    """``e`` naming the path the caller gave instead of the temporary file."""
    if e.filename in (str(tmp), tmp) or e.filename2 in (str(tmp), tmp):
        return OSError(e.errno, e.strerror, str(path))
    return e


def _special(path: Path) -> bool:
    """Whether ``path`` is an existing file that is not a regular file or a symlink (a
    device such as /dev/full, a named pipe): a rename would replace the node itself."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISLNK(mode))


def atomic_write(path: str | Path, data: str | bytes, fsync: bool = True) -> None:
    """Replace ``path`` with ``data`` whole or not at all: written to a hidden temporary
    file beside it (fsynced), then renamed over it. A failed write removes the temporary
    file and raises the ``OSError``; the old file, if any, is untouched."""
    mode = "w" if isinstance(data, str) else "wb"
    with atomic_open(path, mode, fsync=fsync) as f:
        f.write(data)


def replace_dir(new: str | Path, path: str | Path) -> None:
    """Put the finished folder ``new`` in place of ``path``: an existing ``path`` is moved
    aside first and deleted only once ``new`` is in place, so a reader finds the old
    folder or the new one, never a half-written one."""
    new, path = Path(new), Path(path)
    if not path.exists() and not path.is_symlink():
        os.replace(new, path)
        return
    old = beside(path, ".old")
    os.replace(path, old)
    try:
        os.replace(new, path)
    except BaseException:
        os.replace(old, path)  # the old folder back: never neither of them
        raise
    if old.is_symlink():
        old.unlink()  # a link moved aside: never delete through it
    else:
        shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w", fsync: bool = True) -> Iterator[IO[Any]]:
    """A file object for writing ``path`` whole or not at all, streamed: the rows go to a
    hidden temporary file beside it, renamed over ``path`` only when the ``with`` block
    ends without an error. An error removes the temporary file, so ``path`` is absent or
    still the previous file: never a truncated one that looks whole. The rename replaces
    a symlink at ``path`` itself; it never writes through it."""
    path = Path(path)
    kw: dict[str, Any] = {} if "b" in mode else {"newline": "", "encoding": "utf-8"}
    if _special(path):  # a device or a pipe (/dev/full, a fifo): written in place, never
        with open(path, mode, **kw) as f:  # replaced by a regular file
            yield f
        return
    tmp = beside(path, ".tmp")
    try:
        with open(tmp, mode, **kw) as f:
            yield f
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise _named(e, tmp, path) from None
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if fsync:
        fsync_dir(path)


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether ``a`` and ``b`` name one file (links and ``./`` spellings included); checked
    before anything is opened, so an output never truncates its own input."""
    a, b = Path(a), Path(b)
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return a.resolve() == b.resolve()


def refuse_same(out: str | Path, *inputs: str | Path | None, flag: str = "--out") -> None:
    """Raise a one-line error when the output ``out`` is one of the ``inputs``."""
    for src in inputs:
        if src is not None and same_file(src, out):
            raise DataError(
                f"{flag} {out}: is the input {src}; writing it would destroy the input "
                "(give another output path)"
            )


def inside(folder: str | Path, path: str | Path) -> Path:
    """``path`` (a file to write in ``folder``), refused when an existing part of it is a
    symlink that leads out of ``folder``: writes never escape the folder a user named."""
    root = Path(folder).resolve()
    target = Path(path)
    parent = target.parent.resolve()
    if parent != root and root not in parent.parents:
        raise DataError(f"{target}: leads out of the folder {folder} (a symlink); not written")
    return target


def check_output_tree(
    folder: str | Path, writes: Iterable[str | Path], inputs: Iterable[str | Path | None] = ()
) -> None:
    """The one output-path rule, checked before anything is deleted or written: each of
    ``writes`` (paths in ``folder`` that will be written or deleted, existing or not)
    stays inside ``folder`` through every symlink, and no input is one of them or lies
    inside one. Raises a one-line :class:`DataError` naming the path."""
    root = Path(folder).resolve()
    sources = [(src, Path(src).resolve()) for src in inputs if src is not None]
    for name in writes:
        target = Path(folder) / name
        resolved = target.resolve()
        if resolved != root and root not in resolved.parents:
            raise DataError(
                f"{target}: leads out of the folder {folder} (a symlink to {resolved}); "
                "nothing was written or deleted"
            )
        for src, where in sources:
            if where == resolved or resolved in where.parents:
                raise DataError(
                    f"{target}: is or holds the input {src}; replacing it would destroy the "
                    "input (nothing was written or deleted)"
                )


def put(folder: str | Path, name: str, data: str | bytes) -> Path:
    """Write the file ``name`` in ``folder`` whole or not at all (:func:`atomic_write`),
    refused where a symlinked part of ``name`` leads out of ``folder``."""
    path = inside(folder, Path(folder) / name)
    atomic_write(path, data)
    return path
