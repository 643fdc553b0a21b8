"""The per-GPU state file: what an NVML run changed, kept outside any run's folder.

Why: a run killed with SIGKILL cannot restore the GPU. The next run, whatever its
``--out``, must know the settings the GPU had before the killed run changed them, or it
would "restore" the killed run's settings and make them permanent. So before the first
change a run writes the original power limit and which clocks it may lock to one file per
GPU (named by the GPU's UUID); it deletes the file once everything is restored. A file
found at start belongs to a run that did not finish: its values are the ones to restore.
Only a run that may change the GPU owns the file (it holds the GPU's lock meanwhile); a
read-only run reads it and leaves it for the next allowed run.
"""

from __future__ import annotations

import errno
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from ..errors import ProfilingError
from ..utils.files import atomic_write

#: the environment variable that moves the state folder (tests, shared machines)
STATE_DIR_ENV = "POWERTRAIN_STATE_DIR"


def default_state_dir() -> Path:
    """``$POWERTRAIN_STATE_DIR``, else ``~/.local/state/powertrain/nvml``."""
    env = os.environ.get(STATE_DIR_ENV)
    return Path(env) if env else Path.home() / ".local" / "state" / "powertrain" / "nvml"


@dataclass
class GpuState:
    """The settings to put back on one GPU: its original power limit (W, None = never
    changed) and whether SM / memory clocks may be locked (reset unlocks them)."""

    gpu: str
    power_limit_w: float | None = None
    sm_locked: bool = False
    mem_locked: bool = False
    pid: int = 0

    @property
    def dirty(self) -> bool:
        return self.power_limit_w is not None or self.sm_locked or self.mem_locked


class StateFile:
    """One GPU's state file and its lock.

    A run that may change the GPU :meth:`claim` s it for its whole life (a
    :class:`filelock.FileLock` the kernel drops when the process dies, so a killed run
    never blocks the next one, whatever pid the system hands out later), :meth:`save` s
    what it is about to change (atomic), and :meth:`clear` s the file once all is
    restored. A read-only run only :meth:`peek` s: it never owns, so never clears, what a
    killed run left for a later allowed run to restore.
    """

    def __init__(self, folder: str | Path, key: str):
        safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in key)
        self.folder = Path(folder)
        self.path = self.folder / f"gpu-{safe}.json"
        self._lock = FileLock(self.folder / f"gpu-{safe}.lock", timeout=0, thread_local=False)

    def _unusable(self, e: OSError) -> ProfilingError:
        return ProfilingError(
            f"GPU state folder {self.folder}: cannot use it ({e.strerror or e}); it records "
            f"what a run changes on the GPU: set {STATE_DIR_ENV} to a writable folder"
        )

    def _busy(self) -> ProfilingError:
        return ProfilingError(
            f"{self.path}: another run is changing this GPU now; wait for it to end (two "
            "runs on one GPU would restore each other's settings)"
        )

    def claim(self) -> GpuState | None:
        """Hold this GPU's lock until :meth:`release`; the state an unfinished run left."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            if not os.access(self.folder, os.W_OK | os.X_OK):
                raise PermissionError(errno.EACCES, "not writable")
            self._lock.acquire()
        except Timeout:
            raise self._busy() from None
        except OSError as e:
            raise self._unusable(e) from None
        try:
            return self._read()
        except ProfilingError:
            self.release()
            raise

    def peek(self) -> GpuState | None:
        """The state an unfinished run left, without owning it (a read-only run). A run
        holding the GPU now is refused: its rows would run under settings changing."""
        if not self.path.is_file():
            return None
        try:
            self._lock.acquire()
        except Timeout:
            raise self._busy() from None
        except OSError:  # a folder this user cannot write: read what is there
            return self._read()
        try:
            return self._read()
        finally:
            self._lock.release()

    def _read(self) -> GpuState | None:
        if not self.path.is_file():
            return None
        try:
            raw = json.loads(self.path.read_text())
            return GpuState(**raw)
        except (OSError, ValueError, TypeError) as e:
            raise ProfilingError(
                f"{self.path}: unreadable GPU state file ({type(e).__name__}); it records "
                "the settings a killed run changed: restore the GPU by hand (nvidia-smi "
                "-rgc, -rmc, -pl) and delete the file"
            ) from None

    def save(self, state: GpuState) -> None:
        """Write ``state`` atomically (only the run that claimed the GPU calls it)."""
        try:
            atomic_write(self.path, json.dumps({**asdict(state), "pid": os.getpid()}))
        except OSError as e:
            raise self._unusable(e) from None

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)

    def release(self) -> None:
        """Let the next run claim this GPU (the kernel does it too if this one dies)."""
        if self._lock.is_locked:
            self._lock.release(force=True)
