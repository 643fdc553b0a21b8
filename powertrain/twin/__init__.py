"""The digital twin: a simulated Jetson the profiler drives like a real board.

``physics`` holds the time and power model, ``deviations`` the two seeded departures
from it, ``params`` the keys read from device/workload specs, ``board`` the ``Twin``.
"""

from __future__ import annotations

from .board import Twin

__all__ = ["Twin"]
