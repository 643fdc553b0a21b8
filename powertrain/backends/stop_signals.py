"""Stop signals that unwind a sweep, so hardware settings are restored on the way out.

Why: a sweep changed something on the board (a GPU power limit, Jetson clocks); Ctrl-C,
``kill`` (SIGTERM) or a closed terminal (SIGHUP) must end it through the same ``finally``
blocks as an error, never by the default action that leaves the setting behind. While
settings are being restored the signals are blocked, so a second one cannot cut the
restore short; they are delivered afterwards.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Iterator

#: the signals that stop a sweep: Ctrl-C, kill, a closed terminal
STOP_SIGNALS = tuple(
    s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None
)


class StopSignals:
    """While installed, a stop signal raises in the main thread: ``KeyboardInterrupt`` for
    SIGINT, ``SystemExit(128 + signal)`` for the others, once (a second signal while
    unwinding is ignored, so restoring goes on)."""

    def __init__(self) -> None:
        self._old: dict[int, Any] = {}
        self.stopping = False

    def install(self) -> StopSignals:
        if threading.current_thread() is not threading.main_thread():
            return self  # signal handlers can only be set from the main thread

        def stop(signum: int, frame: Any) -> None:
            if self.stopping:
                return
            self.stopping = True
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            raise SystemExit(128 + signum)

        for sig in STOP_SIGNALS:
            self._old[sig] = signal.signal(sig, stop)
        return self

    def uninstall(self) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old = {}


@contextlib.contextmanager
def blocked() -> Iterator[None]:
    """Hold the stop signals back for the duration (delivered when it ends)."""
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - not on POSIX
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
