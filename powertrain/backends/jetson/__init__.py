"""A real Jetson as a profiling backend: sysfs knobs, INA3221/jtop power sensors, the backend.

``sysfs_knobs`` reads and writes the clocks, cores and EMC through sysfs, ``power_sensors``
reads the module power, ``backend`` puts them behind :class:`~powertrain.backends.Backend`.
"""

from __future__ import annotations

from .backend import JetsonBackend

__all__ = ["JetsonBackend"]
