"""The per-GPU state file: what an NVML run changed, kept outside any run's folder.

Why: a run killed with SIGKILL cannot restore the GPU. The next run, whatever its
``--out``, must know the settings the GPU had before the killed run changed them, or it
would "restore" the killed run's settings and make them permanent. So before the first
change a run writes the original power limit and which clocks it may lock to one file per
GPU (named by the GPU's UUID); it deletes the file once everything is restored. A file
found at start belongs to a run that did not finish: its values are the ones to restore.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import ProfilingError

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


def _alive(pid: int) -> bool:
    if pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


class StateFile:
    """One GPU's state file: :meth:`load` what an unfinished run left, :meth:`save`
    before a change (atomic), :meth:`clear` after a full restore."""

    def __init__(self, folder: str | Path, key: str):
        safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in key)
        self.path = Path(folder) / f"gpu-{safe}.json"

    def load(self) -> GpuState | None:
        """The state an unfinished run left, or None. A run still alive that holds this
        GPU is refused: two runs changing one GPU would restore each other's settings."""
        if not self.path.exists():
            return None
        try:
            raw = json.loads(self.path.read_text())
            state = GpuState(**raw)
        except (ValueError, TypeError) as e:
            raise ProfilingError(
                f"{self.path}: unreadable GPU state file ({e}); it records the settings a "
                "killed run changed: restore the GPU by hand (nvidia-smi -rgc, -rmc, -pl) "
                "and delete the file"
            ) from None
        if _alive(state.pid):
            raise ProfilingError(
                f"{self.path}: process {state.pid} is changing GPU {state.gpu} now; wait "
                "for it to end (two runs on one GPU would restore each other's settings)"
            )
        return state

    def save(self, state: GpuState) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({**asdict(state), "pid": os.getpid()}, indent=1))
        os.replace(tmp, self.path)

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)
