"""Vendor presets found by name, with the nvpmodel ID the device's image gives them.

Why: nvpmodel IDs differ per module and per board-support release (on a Super image the
Orin Nano's ID 1 is 25W; on the image before it, 7W), so a preset is only ever looked up
by its name, in the spec of the image the board runs, and its ID read from there.
"""

from __future__ import annotations

from typing import Any

from ..errors import ModeError
from .specs import DeviceSpec, SpecLike, load_device_spec


def preset_key(name: str) -> str:
    """``maxn-super``, ``MAXN SUPER`` and ``MAXN_SUPER`` are one name; so are ``15w``
    and the AGX's ``MODE_15W``."""
    k = str(name).strip().upper().replace("-", "_").replace(" ", "_")
    return k[len("MODE_") :] if k.startswith("MODE_") else k


def _spec(device: Any) -> DeviceSpec:
    spec = getattr(device, "spec", device)
    return spec if isinstance(spec, DeviceSpec) else load_device_spec(spec)


def nvpmodel_info(device: SpecLike | Any) -> dict:
    """The spec's ``nvpmodel`` block: which image (``super``/``non-super``), release and
    conf file its presets and IDs are for, the preset the image boots in, and presets the
    release has whose caps are unknown (``presets_unlisted``). Empty when not given."""
    info = _spec(device).extra.get("nvpmodel")
    return dict(info) if isinstance(info, dict) else {}


def preset_names(device: SpecLike | Any) -> list[str]:
    """The device's preset names, in the spec's order."""
    return [str(p["name"]) for p in _spec(device).presets]


def find_preset(device: SpecLike | Any, name: str) -> dict:
    """The preset called ``name`` (case, ``-``/space/``_`` and a ``MODE_`` prefix aside).

    Parameters
    ----------
    device : catalog id, spec, spec file or :class:`~powertrain.devices.device.Device`
    name : the preset's name as nvpmodel lists it (``"25W"``, ``"MAXN_SUPER"``)

    Returns
    -------
    dict
        A copy of the preset: ``name``, its knob values (the clocks the board runs at
        under the caps), ``tpc_pg_mask``, ``budget_w`` and ``nvpmodel_id`` (this image's).

    Raises
    ------
    ModeError
        Naming the known presets; or, for a preset the release has but whose caps no
        primary source gives, saying so (the catalog does not guess them).
    """
    spec = _spec(device)
    want = preset_key(name)
    for p in spec.presets:
        if preset_key(p["name"]) == want:
            return dict(p)
    info = nvpmodel_info(spec)
    for p in info.get("presets_unlisted", []):
        if isinstance(p, dict) and preset_key(p.get("name", "")) == want:
            raise ModeError(
                f"{spec.name}: preset {p['name']!r} exists as nvpmodel ID "
                f"{p.get('nvpmodel_id', '?')} on {p.get('release', 'another release')}, but "
                f"{p.get('why', 'its caps are unknown')}; the catalog does not guess them: "
                f"use `sudo nvpmodel -m {p.get('nvpmodel_id', 'ID')}` on the board, or one of "
                f"{', '.join(preset_names(spec))}"
            )
    known = ", ".join(preset_names(spec)) or "none"
    image = f" on its {info['image']} image" if info.get("image") else ""
    raise ModeError(f"{spec.name} has no preset {name!r}{image}; its presets: {known}")


def preset_id(device: SpecLike | Any, name: str) -> int:
    """The nvpmodel ID of preset ``name`` on the image the device spec describes."""
    p = find_preset(device, name)
    if p.get("nvpmodel_id") is None:
        raise ModeError(f"{_spec(device).name}: preset {p['name']!r} gives no nvpmodel_id")
    return int(p["nvpmodel_id"])


#: said wherever preset names are shown: a "25W" mode does not hold the board to 25 W
CLOCK_CAPS_NOTE = (
    "preset names are nvpmodel clock caps, not power budgets (an Orin NX 16GB was "
    "measured at 16.9 W in its 25W mode and 27.6 W in 40W); a power cap here is the "
    "module's measured input power (VDD_IN where the board has it)"
)


def preset_note(device: SpecLike | Any) -> str | None:
    """``"15W, 25W, MAXN_SUPER: <CLOCK_CAPS_NOTE>"`` for a device with presets, else None."""
    try:
        names = preset_names(device)
    except Exception:  # noqa: BLE001 - an unknown device: nothing to say
        return None
    return f"{', '.join(names)}: {CLOCK_CAPS_NOTE}" if names else None
