"""Devices and workloads as data: specs (:mod:`.specs`), the power-mode space of a device
(:mod:`.device`) and the catalog's workloads (:mod:`.workloads`).

``powertrain.devices.get_device`` and ``powertrain.devices.Device`` stay importable from
here; they load on first use, so reading a spec does not import pandas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .device import Device, get_device

__all__ = ["Device", "get_device"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import device

        return getattr(device, name)
    raise AttributeError(f"module 'powertrain.devices' has no attribute {name!r}")
