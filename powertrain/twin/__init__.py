"""The digital twin: a simulated Jetson the profiler drives like a real board."""

from __future__ import annotations


class Twin:  # placeholder until powertrain/twin/board.py lands
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("the digital twin is being written (issue 2)")


__all__ = ["Twin"]
