"""The profiler: the measurement protocol, one sweep loop over pluggable backends.

``sweep`` runs the configurations and measures each (warm-up, stable window, power
samples), ``aggregate`` holds the measurement rules, ``store`` the crash-safe output
(append and fsync per configuration, resume, run header, lock). The boards it drives live
in :mod:`powertrain.backends`, the training steps it times in :mod:`powertrain.steps`.
"""

from __future__ import annotations

from .sweep import profile, profile_one

__all__ = ["profile", "profile_one"]
