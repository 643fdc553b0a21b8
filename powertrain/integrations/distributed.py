"""One decision for every process of a distributed job.

Why: under ``torch.distributed`` (DDP; Lightning or the Trainer on several processes)
each rank runs the callback; if each tuned on its own, the ranks would run different
configurations and measure each other's noise (Zeus makes all ranks agree too). Here rank
0 decides, and before every step each rank learns rank 0's configuration and applies it,
so all ranks run step *k* in the same configuration. A board that several processes
share (a Jetson: one per host) is set by the lowest of them only.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from typing import Any, Mapping

from ..backends import Backend, StepBackend, as_backend


def world() -> tuple[int, int]:
    """(rank, world size) of the running ``torch.distributed`` group; (0, 1) without one."""
    dist = _dist()
    if dist is None:
        return 0, 1
    return int(dist.get_rank()), int(dist.get_world_size())


def board_identity(backend: Backend) -> str:
    """What tells two processes' boards apart: a GPU index on one host, a hardware board
    (a Jetson) per host, a simulated board per process."""
    host = socket.gethostname()
    if not isinstance(backend, StepBackend):  # the twin, a replayed table: this process's
        return f"{host}:{os.getpid()}:{id(backend)}"
    gpu = getattr(backend, "gpu_index", None)
    return f"{host}:{type(backend).__name__}" + ("" if gpu is None else f":{gpu}")


class Agreement:
    """Rank 0's configuration handed to every rank, one broadcast per step.

    Parameters
    ----------
    board : Backend or Twin
        This process's board.
    """

    def __init__(self, board: Any):
        import torch

        dist = _dist()
        assert dist is not None, "Agreement needs an initialised torch.distributed group"
        self.rank, self.size = world()
        self.backend = as_backend(board)
        self.columns = tuple(self.backend.config_columns)
        ids: list[Any] = [None] * self.size
        dist.all_gather_object(ids, board_identity(self.backend))
        #: whether this rank sets its board: no lower rank shares it; rank 0's Tuner sets its own
        self.owns_board = self.rank > 0 and ids[self.rank] not in ids[: self.rank]
        nccl = dist.get_backend() == "nccl"
        device = torch.device("cuda", torch.cuda.current_device()) if nccl else "cpu"
        self._buf = torch.zeros(len(self.columns) + 1, dtype=torch.float64, device=device)
        self.applied: dict[str, float] | None = None
        self.changed = False

    def share(self, config: Mapping[str, Any] | None) -> dict[str, float] | None:
        """Broadcast rank 0's ``config`` (None: none yet); on the other ranks apply it when
        it changed and this rank owns its board. Returns the configuration of this step."""
        dist = _dist()
        assert dist is not None
        buf = self._buf
        if self.rank == 0:
            buf.zero_()
            if config is not None:
                buf[0] = 1.0
                for i, c in enumerate(self.columns, start=1):
                    buf[i] = float(config.get(c, float("nan")))
        dist.broadcast(buf, src=0)
        if buf[0].item() == 0.0:
            return None
        got = {c: float(v) for c, v in zip(self.columns, buf[1:].tolist())}
        if self.rank > 0 and got != self.applied:
            if self.owns_board:
                self.backend.configure(got)
                self.changed = True
            self.applied = got
        return got

    def restore(self, error: bool) -> None:
        """Put this rank's board back if it set it (``error``: as after a failure)."""
        if not self.changed:
            return
        self.changed = False
        with contextlib.suppress(Exception):
            if error:
                self.backend.on_error()
        self.backend.close()


def _dist() -> Any:
    """``torch.distributed`` when a group with more than one process runs, else None."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return None
    return dist
