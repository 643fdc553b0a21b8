"""A picked configuration as an nvpmodel custom mode: a ``POWER_MODEL`` block, read back.

Why: NVIDIA's own workflow ends in an nvpmodel custom mode, which survives reboots and
which ``sudo nvpmodel -m ID`` selects. The block is written from the configuration,
parsed back and checked against the device's tables before anyone installs it; the
board's ``/etc/nvpmodel.conf`` is only changed by :func:`install_block`, which a caller
must ask for, and which keeps a backup.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path
from typing import Any, Mapping

from ...devices.device import Device, get_device
from ...errors import ModeError, ProfilingError

_HEADER = re.compile(r"<\s*POWER_MODEL\s+ID=(\d+)\s+NAME=([^\s>]+)\s*>")
_PARAM = re.compile(r"<\s*PARAM\s+TYPE=(\w+)\s+NAME=(\w+)\s*>")
_DEFAULT = re.compile(r"<\s*PM_CONFIG\s+DEFAULT=(\d+)\s*>")
#: the knobs a block sets, in the order a configuration lists them
KNOBS = ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz")


def as_config(config: Any) -> dict[str, float]:
    """A mapping, a pandas Series or a one-row DataFrame as ``{knob: value}``."""
    if hasattr(config, "to_dict") and hasattr(config, "columns"):
        if len(config) != 1:
            raise ModeError(f"a configuration is one row; got {len(config)} rows")
        config = config.iloc[0]
    if hasattr(config, "to_dict"):
        config = config.to_dict()
    if not isinstance(config, Mapping):
        raise ModeError(f"a configuration must be a mapping of knob to value, not {config!r}")
    missing = [k for k in KNOBS if k not in config]
    if missing:
        raise ModeError(f"configuration lacks {', '.join(missing)} (needs {', '.join(KNOBS)})")
    out = {k: float(config[k]) for k in KNOBS}
    if config.get("gpu_tpcs") is not None and config.get("gpu_tpcs") == config.get("gpu_tpcs"):
        out["gpu_tpcs"] = float(config["gpu_tpcs"])
    return out


def tpc_mask(device: Device, tpcs_on: int | None = None) -> int | None:
    """The ``TPC_PG_MASK`` that leaves ``tpcs_on`` TPCs on (default all), as NVIDIA's
    files write it: every bit from ``tpcs_on`` to 7 set (4 of 4 on = 240). None when the
    spec gives no TPC count."""
    n = device.spec.hardware.get("gpu_tpcs")
    if n is None:
        return None
    k = n if tpcs_on is None else int(tpcs_on)
    if not 1 <= k <= n:
        raise ModeError(f"gpu_tpcs={k}: {device.name} has 1..{n} TPCs")
    return 0xFF & ~((1 << k) - 1)


def cpu_params(device: Device, cores: int) -> list[str]:
    """The conf's CPU clock PARAM names covering the first ``cores`` CPUs: one per core
    where the spec's ``nvpmodel.cpu_clock_params`` says ``per_core`` (the P3767 files),
    else one per cluster of ``cpu_clusters`` (named as the conf names them)."""
    info = device.spec.extra.get("nvpmodel") or {}
    if info.get("cpu_clock_params") == "per_core":
        return [f"CPU_A78_{i}" for i in range(cores)]
    clusters = device.spec.extra.get("cpu_clusters") or []
    names = [c["name"] for c in clusters if min(c.get("cpus", [cores])) < cores]
    if not names:
        raise ModeError(
            f"{device.name}: the spec names no CPU clock PARAMs ('cpu_clusters' or "
            "'nvpmodel.cpu_clock_params'); an nvpmodel block cannot be written for it"
        )
    return names


def write_block(
    device: Any, config: Any, mode_id: int, name: str = "POWERTRAIN", pin: bool = True
) -> str:
    """The ``POWER_MODEL`` block that runs ``config`` on ``device``.

    Parameters
    ----------
    device : catalog id, spec or Device (a Jetson: cores, CPU/GPU/memory tables)
    config : mapping, Series or one-row DataFrame with ``cores, cpu_mhz, gpu_mhz,
        mem_mhz`` (and ``gpu_tpcs``, optional: all TPCs on by default)
    mode_id : the ID ``sudo nvpmodel -m`` selects it by (unused in the board's conf)
    name : the mode's NAME (letters, digits, ``_``)
    pin : MIN_FREQ = MAX_FREQ for CPU and GPU, so the board runs the clocks profiled;
        else the minimums are left at the floors NVIDIA's files use (CPU 729.6 MHz, GPU 0)

    Returns
    -------
    str
        The block, checked: :func:`read_block` gives ``config`` back.
    """
    dev = get_device(device)
    cfg = as_config(config)
    if not re.fullmatch(r"[A-Za-z0-9_]+", name):
        raise ModeError(f"mode name {name!r}: use letters, digits and '_' only")
    if isinstance(mode_id, bool) or not isinstance(mode_id, int) or mode_id < 0:
        raise ModeError(f"mode ID {mode_id!r} must be an integer >= 0")
    import pandas as pd

    row = dev.validate(pd.DataFrame([{k: cfg[k] for k in KNOBS}]), source="configuration")
    cores, cpu, gpu, mem = (row[k].iloc[0] for k in KNOBS)
    lines = [
        f"# powertrain custom mode for {dev.name}: {int(cores)} cores, CPU {cpu:g} MHz, "
        f"GPU {gpu:g} MHz, memory {mem:g} MHz",
        f"< POWER_MODEL ID={mode_id} NAME={name} >",
    ]
    lines += [f"CPU_ONLINE CORE_{i} {int(i < cores)}" for i in range(dev.spec.cores)]
    mask = tpc_mask(dev, int(cfg["gpu_tpcs"]) if "gpu_tpcs" in cfg else None)
    if mask is not None:
        lines.append(f"TPC_POWER_GATING TPC_PG_MASK {mask}")
    cpu_khz = round(cpu * 1e3)
    for p in cpu_params(dev, int(cores)):
        lines += [f"{p} MIN_FREQ {cpu_khz if pin else min(729600, cpu_khz)}"]
        lines.append(f"{p} MAX_FREQ {cpu_khz}")
    lines += [f"GPU MIN_FREQ {round(gpu * 1e6) if pin else 0}", f"GPU MAX_FREQ {round(gpu * 1e6)}"]
    lines.append(f"EMC MAX_FREQ {round(mem * 1e6)}")
    block = "\n".join(lines) + "\n"
    back = read_block(dev, block)
    if any(abs(back[k] - cfg[k]) > 1e-3 for k in KNOBS):  # a self-check, never expected
        raise ModeError(f"the block reads back as {back}, not {cfg}")
    return block


def parse_modes(text: str) -> list[dict]:
    """Every ``POWER_MODEL`` section of a conf (or block) text: ``id``, ``name`` and
    ``settings`` mapping ``(PARAM, ARG)`` to the value as written."""
    modes: list[dict] = []
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("<"):
            m = _HEADER.fullmatch(line)
            modes.append(
                {"id": int(m.group(1)), "name": m.group(2), "settings": {}, "line": n}
            ) if m else modes.append({"id": None})
            continue
        if modes and modes[-1].get("id") is not None:
            parts = line.split()
            if len(parts) != 3:
                raise ModeError(f"line {n}: {raw.strip()!r} is not 'PARAM ARG VALUE'")
            modes[-1]["settings"][(parts[0], parts[1])] = parts[2]
    return [m for m in modes if m.get("id") is not None]


def _int(mode: dict, key: tuple[str, str]) -> int:
    v = mode["settings"].get(key)
    try:
        return int(v)
    except (TypeError, ValueError):
        raise ModeError(
            f"mode {mode['name']} (line {mode['line']}): {' '.join(key)} is "
            f"{'missing' if v is None else repr(v)}; a whole number is needed"
        ) from None


def read_block(device: Any, text: str, name: str | None = None) -> dict[str, float]:
    """The configuration a ``POWER_MODEL`` block runs, checked against ``device``'s
    tables (the first block, or the one called ``name``): ``cores, cpu_mhz, gpu_mhz,
    mem_mhz``, ``gpu_tpcs`` where the block gates TPCs, ``cpu_min_mhz``/``gpu_min_mhz``.
    A clock the device does not have, CPUs that disagree, min above max, an uncapped
    (-1) clock or a mask that gates every TPC is a :class:`ModeError` naming it."""
    dev = get_device(device)
    modes = [m for m in parse_modes(text) if name is None or m["name"] == name]
    if not modes:
        raise ModeError(f"no POWER_MODEL block{f' called {name}' if name else ''} found")
    m = modes[0]
    s = m["settings"]
    online = sorted(int(a[5:]) for (p, a), v in s.items() if p == "CPU_ONLINE" and v == "1")
    if online != list(range(len(online))) or not online:
        raise ModeError(f"mode {m['name']}: CPUs online {online}; need 0..n-1 in a row")
    cpu = {
        p: (_int(m, (p, "MIN_FREQ")), _int(m, (p, "MAX_FREQ")))
        for p, a in s
        if p.startswith("CPU_") and p != "CPU_ONLINE" and a == "MAX_FREQ"
    }
    if len({hi for _, hi in cpu.values()}) != 1:
        raise ModeError(f"mode {m['name']}: the CPU MAX_FREQs differ or are missing: {cpu}")
    lo_cpu, hi_cpu = next(iter(cpu.values()))
    lo_gpu, hi_gpu = _int(m, ("GPU", "MIN_FREQ")), _int(m, ("GPU", "MAX_FREQ"))
    emc = _int(m, ("EMC", "MAX_FREQ"))
    for what, lo, hi in (("CPU", lo_cpu, hi_cpu), ("GPU", lo_gpu, hi_gpu), ("EMC", 0, emc)):
        if hi <= 0:
            raise ModeError(f"mode {m['name']}: {what} MAX_FREQ {hi} is uncapped (-1/0)")
        if lo > hi:
            raise ModeError(f"mode {m['name']}: {what} MIN_FREQ {lo} is above MAX_FREQ {hi}")
    out = {
        "cores": float(len(online)),
        "cpu_mhz": hi_cpu / 1e3,
        "gpu_mhz": hi_gpu / 1e6,
        "mem_mhz": emc / 1e6,
    }
    import pandas as pd

    dev.validate(pd.DataFrame([out]), source=f"nvpmodel mode {m['name']}")
    if ("TPC_POWER_GATING", "TPC_PG_MASK") in s:
        mask = _int(m, ("TPC_POWER_GATING", "TPC_PG_MASK"))
        n = dev.spec.hardware.get("gpu_tpcs")
        on = sum(1 for i in range(n or 0) if not mask >> i & 1)
        if not on:
            raise ModeError(f"mode {m['name']}: TPC_PG_MASK {mask} gates every TPC")
        out["gpu_tpcs"] = float(on)
    out["cpu_min_mhz"], out["gpu_min_mhz"] = lo_cpu / 1e3, lo_gpu / 1e6
    return out


def install_block(conf: str | Path, block: str) -> Path:
    """Add ``block`` to an nvpmodel conf file, after a backup; returns the backup's path.

    The conf must define every PARAM the block uses, and hold no mode of the block's ID
    or NAME. A symlinked ``/etc/nvpmodel.conf`` is followed: the file it names is
    changed (and backed up), the link kept. The block goes before ``PM_CONFIG``; the
    default mode is not changed.
    """
    path = Path(conf)
    real = path.resolve()
    try:
        text = real.read_text()
    except OSError as e:
        raise ProfilingError(f"cannot read {path}: {e.strerror or e}") from None
    new = parse_modes(block)
    if len(new) != 1:
        raise ModeError(f"the block must hold one POWER_MODEL, found {len(new)}")
    have = parse_modes(text)
    clash = [m for m in have if m["id"] == new[0]["id"] or m["name"] == new[0]["name"]]
    if clash:
        raise ModeError(
            f"{path} already has mode ID={clash[0]['id']} NAME={clash[0]['name']}; "
            "give the block another ID and name"
        )
    defined = {m.group(2) for m in _PARAM.finditer(text)}
    unknown = sorted({p for p, _ in new[0]["settings"]} - defined)
    if unknown:
        raise ModeError(f"{path} defines no PARAM {', '.join(unknown)} that the block uses")
    backup = real.with_name(f"{real.name}.powertrain-{time.strftime('%Y%m%d-%H%M%S')}.bak")
    shutil.copy2(real, backup)
    at = _DEFAULT.search(text)
    cut = text.rfind("\n", 0, at.start()) + 1 if at else len(text)
    tmp = real.with_name(real.name + ".powertrain-tmp")
    tmp.write_text(text[:cut] + block + "\n" + text[cut:])
    shutil.copymode(real, tmp)
    tmp.replace(real)
    return backup


def conf_modes(text: str) -> dict[str, int]:
    """``{NAME: ID}`` of a conf's modes: presets resolved by name on the board itself."""
    return {m["name"]: m["id"] for m in parse_modes(text)}


def conf_default(text: str) -> int | None:
    """The ID ``PM_CONFIG DEFAULT`` names (the mode the board boots in), or None."""
    m = _DEFAULT.search(text)
    return int(m.group(1)) if m else None
