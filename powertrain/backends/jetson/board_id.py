"""Which Jetson this is: the module from the device tree, the image from the active
nvpmodel file, the catalog spec they map to, and the board's own tables checked.

Why: the same module runs different mode spaces on different images (an Orin Nano's GPU
tops out at 624.75 MHz on a non-Super image, 1020 MHz on a Super one), and a Super image
whose boot firmware lacks its Super part lets MAXN_SUPER be set while the GPU stays
capped. The mode name is never trusted: the catalog entry comes from the device tree and
the nvpmodel file, and the clock tables from sysfs.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ...devices.device import Device
from ...devices.presets import find_preset, nvpmodel_info, preset_key
from ...devices.presets import preset_id as catalog_preset_id
from ...devices.specs import DeviceSpec, device_names, load_device_spec
from ...errors import ProfilingError
from .nvpmodel import conf_default, conf_modes
from .sysfs_knobs import BoardTables, SysfsKnobs

_TOL_MHZ = 0.5


class SuperFirmwareWarning(UserWarning):
    """A Super image whose boot firmware still caps the GPU below the Super clocks."""


@dataclass(frozen=True)
class BoardInfo:
    """What the board says about itself (every field None/empty where it is silent)."""

    model: str | None
    compatible: tuple[str, ...]
    conf: Path | None  # the active nvpmodel file, symlinks followed
    modes: dict[str, int] = field(default_factory=dict)  # NAME -> ID in that file
    default_id: int | None = None
    active_id: int | None = None  # from nvpmodel's status file

    @property
    def image(self) -> str | None:
        """``super`` when the active nvpmodel file is a Super one, ``non-super`` when it
        is another, None without one."""
        if self.conf is None:
            return None
        if self.conf.name.endswith("_super.conf") or any("SUPER" in m for m in self.modes):
            return "super"
        return "non-super"

    @property
    def active_mode(self) -> str | None:
        """The NAME of the mode nvpmodel last set (None when the status file is absent)."""
        names = {i: n for n, i in self.modes.items()}
        return names.get(self.active_id) if self.active_id is not None else None


def _text(path: Path) -> str | None:
    try:
        return path.read_bytes().decode(errors="replace")
    except OSError:
        return None


def read_board(root: str | Path = "/") -> BoardInfo:
    """Read the device tree's ``model`` and ``compatible``, ``/etc/nvpmodel.conf`` (its
    modes by name and default) and nvpmodel's status file under ``root``."""
    root = Path(root)
    dt = root / "proc/device-tree"
    model = _text(dt / "model")
    compat = _text(dt / "compatible") or ""
    conf = root / "etc/nvpmodel.conf"
    text = _text(conf)
    status = _text(root / "var/lib/nvpmodel/status") or ""
    m = re.search(r"pmode:(\d+)", status)
    return BoardInfo(
        model=model.strip("\0\n ") if model else None,
        compatible=tuple(c for c in compat.split("\0") if c.strip()),
        conf=conf.resolve() if text is not None else None,
        modes=conf_modes(text) if text else {},
        default_id=conf_default(text) if text else None,
        active_id=int(m.group(1)) if m else None,
    )


def match_spec(board: BoardInfo) -> DeviceSpec:
    """The catalog spec whose ``board.compatible`` names this module and whose
    ``nvpmodel.image`` is the image the board runs.

    Raises
    ------
    ProfilingError
        Naming the board's compatible strings and image when no catalog spec (or more
        than one) fits: pass the device yourself then.
    """
    hits: list[DeviceSpec] = []
    for name in device_names():
        spec = load_device_spec(name)
        ids = (spec.extra.get("board") or {}).get("compatible") or []
        if set(ids) & set(board.compatible):
            hits.append(spec)
    if board.image is not None:
        same = [s for s in hits if nvpmodel_info(s).get("image") == board.image]
        hits = same if same else hits
    if len(hits) == 1:
        return hits[0]
    what = (
        f"module {board.model or '?'} (compatible {', '.join(board.compatible) or 'unreadable'})"
        f", nvpmodel file {board.conf.name if board.conf else 'absent'}"
    )
    if not hits:
        raise ProfilingError(
            f"{what}: no catalog device matches; pass --device with a spec file "
            "(docs/devices.md says how to write one)"
        )
    raise ProfilingError(
        f"{what}: matches {', '.join(s.name for s in hits)}; the image cannot be told "
        "from /etc/nvpmodel.conf: pass --device"
    )


def check_board(spec: DeviceSpec, board: BoardInfo, tables: BoardTables) -> list[str]:
    """Compare the board with its catalog spec and warn on each difference that matters:
    a Super image whose GPU table stops at the non-Super cap (:class:`SuperFirmwareWarning`,
    naming the mode that cannot run as listed), and presets whose ID on this board's file
    differs from the catalog's (the board's file wins). Returns the warnings' texts."""
    said: list[str] = []
    info = nvpmodel_info(spec)
    cap = info.get("capped_gpu_mhz")
    top = max(tables.gpu_mhz) if tables.gpu_mhz else None
    if info.get("image") == "super" and cap and top is not None and top <= cap + _TOL_MHZ:
        capped = [p["name"] for p in spec.presets if float(p["gpu_mhz"]) > cap + _TOL_MHZ]
        said.append(
            f"{spec.name}: the nvpmodel file is a Super one "
            f"({board.conf.name if board.conf else '?'}) but the GPU's available "
            f"frequencies stop at {top:g} MHz: the boot firmware lacks its Super part, so "
            f"{', '.join(capped) or 'no preset'} cannot reach its GPU clock (catalog "
            f"{max(spec.gpu_mhz):g} MHz). Flash the JetPack 6.2+ QSPI firmware; until then "
            "the board's own table is used"
        )
        warnings.warn(said[-1], SuperFirmwareWarning, stacklevel=2)
    for name, board_id in board.modes.items():
        try:
            p = find_preset(spec, name)
        except Exception:  # noqa: BLE001 - a mode the catalog does not list
            continue
        if p.get("nvpmodel_id") is not None and int(p["nvpmodel_id"]) != board_id:
            said.append(
                f"{spec.name}: preset {name} is ID {board_id} in {board.conf}, "
                f"ID {p['nvpmodel_id']} in the catalog; the board's file is used"
            )
            warnings.warn(said[-1], RuntimeWarning, stacklevel=2)
    return said


def board_device(spec: DeviceSpec, tables: BoardTables) -> Device:
    """The board's own mode space: the catalog spec with the tables read from sysfs (the
    published profiling grid kept only where the tables are the catalog's)."""
    same = (
        tuple(tables.cpu_mhz) == tuple(spec.cpu_mhz)
        and tuple(tables.gpu_mhz) == tuple(spec.gpu_mhz)
        and tuple(tables.mem_mhz) == tuple(spec.mem_mhz)
    )
    return Device(
        replace(
            spec,
            cores=tables.cores,
            min_cores=min(spec.min_cores, tables.cores),
            cpu_mhz=tables.cpu_mhz,
            gpu_mhz=tables.gpu_mhz,
            mem_mhz=tables.mem_mhz,
            profiling_grid=spec.profiling_grid if same else None,
        )
    )


@dataclass(frozen=True)
class Recognition:
    """A board recognised: what it says, its catalog spec, its own tables, the warnings."""

    board: BoardInfo
    spec: DeviceSpec
    tables: BoardTables
    warnings: tuple[str, ...]

    @property
    def device(self) -> Device:
        """This board's own mode space (the spec with the tables read from sysfs)."""
        return board_device(self.spec, self.tables)

    def preset_id(self, name: str) -> int:
        """The ID of preset ``name`` on this board: its own nvpmodel file first (by
        name: a mode the catalog cannot describe, such as a newer release's 7W, is found
        there too), else the catalog's for its image."""
        for n, i in self.board.modes.items():
            if preset_key(n) == preset_key(name):
                return i
        return catalog_preset_id(self.spec, name)


def recognise(root: str | Path = "/", device: Any = None, **knobs: Any) -> Recognition:
    """Recognise the Jetson under ``root``.

    Parameters
    ----------
    root : the filesystem root (``/`` on the board; a fake tree in tests)
    device : a catalog id or spec to use instead of the device tree's answer
    **knobs : passed to :class:`~.sysfs_knobs.SysfsKnobs` (``emc``, ``gpu_devfreq``)

    Returns
    -------
    Recognition
        The board's facts, the spec, the tables read from sysfs (the catalog's tables
        are compared with them, each difference a warning) and the warnings' texts.
    """
    board = read_board(root)
    spec = load_device_spec(device) if device is not None else match_spec(board)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tables = SysfsKnobs(spec, root, **knobs).check_against_catalog()
        said = check_board(spec, board, tables)
    for w in caught:  # raised again for the caller, kept as text for the report
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    texts = [str(w.message) for w in caught if str(w.message) not in said] + said
    return Recognition(board, spec, tables, tuple(texts))
