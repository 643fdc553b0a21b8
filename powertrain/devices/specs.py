"""Device and workload specs: plain data a user can write, validated on load.

Why: devices and workloads are data, not code branches. The catalog ships JSON files
in ``powertrain/catalog``; a user can pass their own spec as a dict, a JSON file path or
a spec object anywhere a catalog name is accepted.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Union

from ..errors import SpecError
from ..reserved import reserved_column

_CATALOG = "powertrain.catalog"


#: the knob that is a GPU power limit in W: a spec with it gets ``power_cap`` (the
#: ``power_w_max`` guard) without declaring it; ``"power_cap": null`` opts out
POWER_LIMIT_KNOB = "power_limit_w"

#: a Jetson's knobs, in the order modes list them (the package's original schema)
JETSON_KNOBS = ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz")


@dataclass(frozen=True)
class DeviceSpec:
    """Everything the package knows about one board model.

    A device declares its knobs, the settings a configuration is made of. A Jetson gives
    ``cores`` (modes use ``min_cores``..``cores`` online) and the settable frequency
    tables ``cpu_mhz``/``gpu_mhz``/``mem_mhz``; any other device gives ``knobs``, a
    mapping of knob name to its settable values (a datacenter GPU:
    ``{"power_limit_w": [100, 125, ...]}``). ``step_down`` names the knobs a board
    cannot raise without a reset (Jetson CPU/GPU clocks); ``stratify_by`` the knobs a
    stratified sample spreads over. ``presets`` are the vendor's named modes (nvpmodel):
    each knob at the value the board runs under the mode's caps (an entry of the knob's
    table, or of ``preset_tables`` when the vendor's presets run on another table, as
    the Orin AGX GPU under JetPack 6) and, with ``tpc_pg_mask``, the GPU TPCs the mode
    power-gates (bit i set = TPC i off). ``hardware`` holds datasheet facts
    (``gpu_cuda_cores``, ``gpu_tpcs``, ``mem_bus_bits``) the twin derives constants
    from. ``twin`` holds the physical parameters the digital twin simulates the board
    with (optional; docs/twin.md lists every one). ``monotone`` is physics the
    predictor must respect: per target column, per knob, +1 (the target never falls as
    the knob rises) or -1 (never rises); ``power_cap`` names a knob that is itself a
    power limit in watts (a GPU's ``power_limit_w``: inferred when that knob exists and
    the spec does not say).

    Parameters
    ----------
    name : str
        The device's id, as samples carry it in their ``device`` column.
    cores, cpu_mhz, gpu_mhz, mem_mhz : int, tuple of float
        A Jetson's knobs: the CPU core count and the settable frequency tables (MHz).
    knobs : dict
        Any other device's knobs: name -> settable values.
    step_down, stratify_by : tuple of str
        Knobs that cannot be raised without a reset; knobs a stratified sample spreads
        over.
    description : str
        One line for people.
    min_cores : int
        The fewest online cores a mode may have.
    presets, preset_tables : tuple of dict, dict
        The vendor's named modes, and the tables they run on where those differ.
    hardware, twin, sysfs : dict
        Datasheet facts, the digital twin's physical parameters, and the board's sysfs
        paths (docs/jetson.md).
    profiling_grid : dict, optional
        The knob values of the paper's profiling grid (Orin AGX: 4,368 modes).
    monotone : dict
        Per target, per knob: +1 (never falls as the knob rises) or -1 (never rises).
    power_cap : str, optional
        The knob that is itself a power limit in watts.
    extra : dict
        Keys of the spec file the package does not read, kept.
    """

    name: str
    cores: int = 0
    cpu_mhz: tuple[float, ...] = ()
    gpu_mhz: tuple[float, ...] = ()
    mem_mhz: tuple[float, ...] = ()
    knobs: dict = field(default_factory=dict)
    step_down: tuple[str, ...] = ()
    stratify_by: tuple[str, ...] = ()
    description: str = ""
    min_cores: int = 1
    presets: tuple[dict, ...] = ()
    preset_tables: dict = field(default_factory=dict)
    hardware: dict = field(default_factory=dict)
    profiling_grid: dict | None = None
    twin: dict | None = None
    sysfs: dict = field(default_factory=dict)
    monotone: dict = field(default_factory=dict)
    power_cap: str | None = None
    extra: dict = field(default_factory=dict)

    def knob_tables(self) -> dict[str, tuple[float, ...]]:
        """Every knob and its settable values, in the order modes list them."""
        if self.knobs:
            return dict(self.knobs)
        return {
            "cores": tuple(float(c) for c in range(self.min_cores, self.cores + 1)),
            "cpu_mhz": self.cpu_mhz,
            "gpu_mhz": self.gpu_mhz,
            "mem_mhz": self.mem_mhz,
        }

    def to_dict(self) -> dict:
        """The JSON form :func:`device_spec_from_dict` reads back (a round trip)."""
        d = asdict(self)
        for k in ("cpu_mhz", "gpu_mhz", "mem_mhz", "presets", "step_down", "stratify_by"):
            d[k] = list(d[k])
        if self.knobs:
            d["knobs"] = {k: list(v) for k, v in self.knobs.items()}
            for k in (*JETSON_KNOBS, "min_cores"):
                del d[k]
        else:
            del d["knobs"]
        for k in ("preset_tables", "hardware"):
            if not d[k]:
                del d[k]
            elif k == "preset_tables":
                d[k] = {n: list(v) for n, v in d[k].items()}
        for k in ("monotone", "power_cap"):
            if not d[k]:
                del d[k]
        d.update(d.pop("extra"))  # unknown keys were kept at the top level
        return d

    def gpu_tpcs_on(self, preset: dict) -> int | None:
        """TPCs a preset leaves on (``hardware.gpu_tpcs`` minus those its
        ``tpc_pg_mask`` gates); None without a TPC count."""
        n = self.hardware.get("gpu_tpcs")
        if n is None:
            return None
        mask = int(preset.get("tpc_pg_mask", 0))
        return sum(1 for i in range(n) if not mask >> i & 1)


@dataclass(frozen=True)
class WorkloadSpec:
    """A DNN training workload as the twin and the reports see it.

    Parameters
    ----------
    name : str
        The workload's name (``"resnet18"``).
    description : str
        One line for people.
    default_batch_size : int
        The batch size profiled when none is given.
    num_workers : int
        Data-loader workers (0: loading is serial with compute, as YOLO in the paper).
    dataset_samples : int, optional
        Samples per epoch, for time per epoch.
    params : dict
        Free-form physics for the twin (FLOPs per sample, bytes moved, CPU work per
        minibatch, ...); docs/twin.md says which keys it reads.
    extra : dict
        Keys of the spec file the package does not read, kept.
    """

    name: str
    description: str = ""
    default_batch_size: int = 16
    num_workers: int = 4
    dataset_samples: int | None = None
    params: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


_JETSON_REQUIRED = ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz")


def _load_json(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise SpecError(f"cannot read spec file {path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise SpecError(f"spec file {path} is not a text (UTF-8 JSON) file") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise SpecError(
            f"spec file {path} is not valid JSON: line {e.lineno} column {e.colno}: {e.msg}"
        ) from None
    if not isinstance(data, dict):
        raise SpecError(f"spec file {path} must hold a JSON object, found {type(data).__name__}")
    return data


#: no clock this package drives runs at 100 GHz: above it a spec value is a typo or an attack
MAX_MHZ = 1e5


#: no other knob (watts, threads, workers) reaches this either
MAX_KNOB = 1e6


def _value_table(raw: Any, label: str, where: str, what: str, limit: float) -> tuple[float, ...]:
    """A non-empty list of distinct numbers in (0, ``limit``], sorted; errors name ``label``
    and the index (``what`` says what one value is, e.g. "a frequency in MHz")."""
    if not isinstance(raw, (list, tuple)) or not raw:
        raise SpecError(f"{where}: {label} must be a non-empty list of values ({what})")
    out = []
    for i, v in enumerate(raw):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= limit:
            raise SpecError(f"{where}: {label}[{i}] = {v!r} is not {what} (0 < v <= {limit:g})")
        out.append(float(v))
    if len(set(out)) != len(out):
        raise SpecError(f"{where}: {label} lists a value twice")
    return tuple(sorted(out))


def _freq_table(data: dict, key: str, where: str) -> tuple[float, ...]:
    return _value_table(data.get(key), f"'{key}'", where, "a frequency in MHz", MAX_MHZ)


def _knob_tables(data: Any, where: str) -> dict[str, tuple[float, ...]]:
    """``knobs``: knob name -> non-empty list of distinct positive finite values."""
    if not isinstance(data, dict) or not data:
        raise SpecError(f"{where}: 'knobs' must be a non-empty mapping of knob name to values")
    out = {}
    for name, raw in data.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise SpecError(f"{where}: knob name {name!r} must be an identifier")
        if reserved_column(name):
            raise SpecError(
                f"{where}: knob name {name!r} is reserved: the package writes a column of "
                "that name itself (device, workload, batch_size, time_ms, power_w, *_std, "
                "observed_*, ...); rename the knob"
            )
        mhz = name.endswith("_mhz")
        out[name] = _value_table(
            raw,
            f"knobs['{name}']",
            where,
            "a frequency in MHz" if mhz else "a number",
            MAX_MHZ if mhz else MAX_KNOB,
        )
    return out


def _knob_list(data: dict, key: str, knobs: tuple[str, ...], where: str, default) -> tuple:
    raw = data.get(key, default)
    if not isinstance(raw, (list, tuple)) or not all(k in knobs for k in raw):
        raise SpecError(f"{where}: '{key}' must list knobs of this device ({', '.join(knobs)})")
    return tuple(raw)


def device_spec_from_dict(data: dict, where: str = "device spec") -> DeviceSpec:
    """Validate a mapping and build a :class:`DeviceSpec` (``where`` names it in errors)."""
    if not isinstance(data, dict):
        raise SpecError(f"{where}: expected a mapping, found {type(data).__name__}")
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise SpecError(f"{where}: missing field 'name' (a non-empty string)")
    common: dict[str, Any] = dict(
        name=name,
        description=str(data.get("description", "")),
        presets=tuple(data.get("presets", ())),
        hardware=_hardware(data.get("hardware", {}), where),
        profiling_grid=data.get("profiling_grid"),
        twin=data.get("twin"),
        sysfs=dict(data.get("sysfs", {})),
        monotone=_monotone(data.get("monotone", {}), where),
        power_cap=data.get("power_cap"),
        extra={k: v for k, v in data.items() if k not in DeviceSpec.__dataclass_fields__},
    )
    if "knobs" in data:  # any device that is not a Jetson: its knobs are data
        clash = [k for k in _JETSON_REQUIRED if k in data]
        if clash:
            raise SpecError(
                f"{where}: give either 'knobs' or a Jetson's {', '.join(_JETSON_REQUIRED)}, "
                f"not both (found {', '.join(clash)})"
            )
        knobs = _knob_tables(data["knobs"], where)
        names = tuple(knobs)
        if "power_cap" not in data and POWER_LIMIT_KNOB in knobs:  # the guard, inferred
            common["power_cap"] = POWER_LIMIT_KNOB
        spec = DeviceSpec(
            knobs=knobs,
            step_down=_knob_list(data, "step_down", names, where, ()),
            stratify_by=_knob_list(data, "stratify_by", names, where, names),
            preset_tables=_preset_tables(data, names, where),
            **common,
        )
        _check_presets(spec, where)
        return spec
    missing = [k for k in _JETSON_REQUIRED if k not in data]
    if missing:
        raise SpecError(
            f"{where}: missing field(s) {', '.join(missing)} (or give 'knobs' for a device "
            "that is not a Jetson)"
        )
    cores = data["cores"]
    if isinstance(cores, bool) or not isinstance(cores, int) or not 1 <= cores <= 1024:
        raise SpecError(f"{where}: 'cores' must be an integer in 1..1024, found {cores!r}")
    min_cores = data.get("min_cores", 1)
    if not isinstance(min_cores, int) or not 1 <= min_cores <= cores:
        raise SpecError(f"{where}: 'min_cores' must be an integer in 1..{cores}")
    spec = DeviceSpec(
        cores=cores,
        cpu_mhz=_freq_table(data, "cpu_mhz", where),
        gpu_mhz=_freq_table(data, "gpu_mhz", where),
        mem_mhz=_freq_table(data, "mem_mhz", where),
        min_cores=min_cores,
        step_down=_knob_list(data, "step_down", JETSON_KNOBS, where, ("gpu_mhz", "cpu_mhz")),
        stratify_by=_knob_list(data, "stratify_by", JETSON_KNOBS, where, ("gpu_mhz", "mem_mhz")),
        preset_tables=_preset_tables(data, JETSON_KNOBS, where),
        **common,
    )
    _check_presets(spec, where)
    return spec


def _monotone(data: object, where: str) -> dict[str, dict[str, int]]:
    """``{"power_w": {"gpu_mhz": 1, ...}, ...}`` with every direction +1 or -1."""
    if not isinstance(data, dict):
        raise SpecError(f"{where}: 'monotone' must map target columns to {{knob: +1 or -1}}")
    out = {}
    for target, dirs in data.items():
        if not isinstance(dirs, dict):
            raise SpecError(f"{where}: monotone.{target} must map knobs to +1 or -1")
        for knob, sign in dirs.items():
            if isinstance(sign, bool) or sign not in (1, -1):
                raise SpecError(f"{where}: monotone.{target}.{knob} must be 1 or -1, got {sign!r}")
        out[str(target)] = {str(k): int(v) for k, v in dirs.items()}
    return out


#: datasheet facts a spec may give under ``hardware`` (all positive integers)
HARDWARE_KEYS = {
    "gpu_cuda_cores": "CUDA cores (FP32 lanes) of the GPU",
    "gpu_tpcs": "texture processing clusters (2 SMs each on Volta/Ampere); nvpmodel gates them",
    "mem_bus_bits": "DRAM bus width in bits",
}


def _hardware(raw: Any, where: str) -> dict:
    if not isinstance(raw, dict):
        raise SpecError(f"{where}: 'hardware' must be a mapping of {', '.join(HARDWARE_KEYS)}")
    for k, v in raw.items():
        if k not in HARDWARE_KEYS:
            raise SpecError(
                f"{where}: unknown key 'hardware.{k}'; known: {', '.join(HARDWARE_KEYS)}"
            )
        if isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= 10**6:
            raise SpecError(f"{where}: 'hardware.{k}' must be a positive integer, found {v!r}")
    return dict(raw)


def _preset_tables(data: dict, knobs: tuple[str, ...], where: str) -> dict:
    raw = data.get("preset_tables", {})
    if not isinstance(raw, dict) or not all(k in knobs for k in raw):
        raise SpecError(f"{where}: 'preset_tables' must map knobs of this device to values")
    return {
        k: _value_table(v, f"preset_tables['{k}']", where, "a setting", MAX_MHZ)
        for k, v in raw.items()
    }


def _check_presets(spec: DeviceSpec, where: str) -> None:
    """Every preset names every knob with a value of its table (or of ``preset_tables``),
    and a ``tpc_pg_mask`` only where ``hardware.gpu_tpcs`` says how many TPCs exist."""
    tables = spec.knob_tables()
    for target, dirs in spec.monotone.items():
        unknown = [k for k in dirs if k not in (*tables, "batch_size")]
        if unknown:
            raise SpecError(f"{where}: monotone.{target} names unknown knob(s) {unknown}")
    if spec.power_cap is not None and spec.power_cap not in tables:
        raise SpecError(f"{where}: power_cap {spec.power_cap!r} is not one of the knobs")
    for i, p in enumerate(spec.presets):
        if not isinstance(p, dict):
            raise SpecError(f"{where}: presets[{i}] must be a mapping")
        for k in ("name", *tables):
            if k not in p:
                raise SpecError(f"{where}: presets[{i}] is missing '{k}'")
        for k, table in tables.items():
            v = p[k]
            allowed = (*table, *spec.preset_tables.get(k, ()))
            ok = not isinstance(v, bool) and isinstance(v, (int, float))
            if not ok or min(abs(float(v) - a) for a in allowed) > 1e-3:
                extra = " or 'preset_tables'" if spec.preset_tables.get(k) else ""
                raise SpecError(
                    f"{where}: presets[{i}] ({p['name']}) '{k}' = {v!r} is not in the "
                    f"'{k}' table{extra}; give the value the board runs at under the cap "
                    "(the highest table entry at or below it), or list the table the "
                    "vendor's presets run on under 'preset_tables'"
                )
        mask = p.get("tpc_pg_mask", 0)
        if isinstance(mask, bool) or not isinstance(mask, int) or mask < 0:
            raise SpecError(f"{where}: presets[{i}] 'tpc_pg_mask' must be an integer >= 0")
        if mask and "gpu_tpcs" not in spec.hardware:
            raise SpecError(
                f"{where}: presets[{i}] gates TPCs ('tpc_pg_mask'); give 'hardware.gpu_tpcs'"
            )
        if spec.gpu_tpcs_on(p) == 0:
            raise SpecError(f"{where}: presets[{i}] 'tpc_pg_mask' gates every TPC")


def workload_spec_from_dict(data: dict, where: str = "workload spec") -> WorkloadSpec:
    """Validate a mapping and build a :class:`WorkloadSpec`."""
    if not isinstance(data, dict):
        raise SpecError(f"{where}: expected a mapping, found {type(data).__name__}")
    if not isinstance(data.get("name"), str) or not data["name"]:
        raise SpecError(f"{where}: missing field 'name' (a non-empty string)")
    bs = data.get("default_batch_size", 16)
    if isinstance(bs, bool) or not isinstance(bs, int) or bs < 1:
        raise SpecError(f"{where}: 'default_batch_size' must be a positive integer, found {bs!r}")
    nw = data.get("num_workers", 4)
    if isinstance(nw, bool) or not isinstance(nw, int) or nw < 0:
        raise SpecError(f"{where}: 'num_workers' must be an integer >= 0, found {nw!r}")
    params = data.get("params", {})
    if not isinstance(params, dict):
        raise SpecError(f"{where}: 'params' must be a mapping")
    return WorkloadSpec(
        name=data["name"],
        description=str(data.get("description", "")),
        default_batch_size=bs,
        num_workers=nw,
        dataset_samples=data.get("dataset_samples"),
        params=dict(params),
        extra={k: v for k, v in data.items() if k not in WorkloadSpec.__dataclass_fields__},
    )


def _catalog_names(kind: str) -> list[str]:
    folder = resources.files(_CATALOG) / kind
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json"))


def device_names() -> list[str]:
    """Catalog ids of the shipped devices (what :func:`get_device` accepts by name).

    Returns
    -------
    list of str
        The ids, sorted.
    """
    return _catalog_names("devices")


def workload_names() -> list[str]:
    """Catalog names of the shipped workloads (what :func:`get_workload` accepts).

    Returns
    -------
    list of str
        The names, sorted.
    """
    return _catalog_names("workloads")


SpecLike = Union[str, Path, dict, DeviceSpec, WorkloadSpec]


#: devices a user declared by spec (dict or file) this session: id -> spec. Samples carry
#: the id in their ``device`` column, so a registered id resolves like a catalog one.
_REGISTRY: dict[str, DeviceSpec] = {}


def _check_device_id(spec: DeviceSpec) -> None:
    n = spec.name
    if "/" in n or "\\" in n or n.endswith(".json") or n != n.strip():
        raise SpecError(
            f"device name {n!r} must be an id (as samples carry it in their 'device' column), "
            "not a file path; set the spec's 'name' to e.g. 'orin-nx-16gb'"
        )


def register_device(spec: str | Path | dict | DeviceSpec) -> DeviceSpec:
    """Make a user's device spec (dict, JSON file or spec) known by its ``name``.

    Why: samples and models name their device by id; once registered, that id resolves
    everywhere a catalog id does (``fit``, ``transfer``, ``predict``, ``select``, the CLI,
    reports). Registering the same spec again is a no-op (every corpus sidecar that
    declares its device registers it); registering a different spec under an id already
    registered replaces it with a :class:`RuntimeWarning` naming the id, so a session
    never mixes two devices under one name unawares. A catalog id can only be registered
    with the catalog's own spec.

    Parameters
    ----------
    spec : str, Path, dict or DeviceSpec
        A JSON spec file, a dict with the spec's fields, or a spec.

    Returns
    -------
    DeviceSpec
        The registered spec.

    Raises
    ------
    SpecError
        For a malformed spec, a name that is a path, or a catalog id with another spec.
    """
    if isinstance(spec, DeviceSpec):
        s = spec
    elif isinstance(spec, dict):
        s = device_spec_from_dict(spec)
    elif isinstance(spec, (str, Path)) and (str(spec).endswith(".json") or Path(spec).is_file()):
        path = Path(spec)
        if not path.is_file():
            raise SpecError(f"device spec file {path} does not exist")
        s = device_spec_from_dict(_load_json(path), where=str(path))
    else:
        raise SpecError(
            f"cannot register {spec!r} as a device; pass a spec dict, a JSON file or a DeviceSpec"
        )
    _check_device_id(s)
    if s.name in _catalog_names("devices"):
        if s != load_device_spec(s.name):
            raise SpecError(
                f"device name {s.name!r} is a catalog device and this spec differs from it; "
                "give your spec its own 'name'"
            )
        return s
    before = _REGISTRY.get(s.name)
    if before is not None and before != s:
        warnings.warn(
            f"device {s.name!r} was registered with another spec this session; it is "
            "replaced by this one (models and samples naming it now resolve to the new "
            "knobs): give a different device its own 'name'",
            RuntimeWarning,
            stacklevel=2,
        )
    _REGISTRY[s.name] = s
    return s


def registered_devices() -> dict[str, DeviceSpec]:
    """The user devices registered this session (id -> spec)."""
    return dict(_REGISTRY)


def unregister_device(name: str) -> None:
    """Forget a registered device (catalog devices are never registered)."""
    _REGISTRY.pop(name, None)


def _resolve(spec: Any, kind: str, builder, cls):
    if isinstance(spec, cls):
        return spec
    if isinstance(spec, dict):
        return builder(spec)
    if isinstance(spec, (str, Path)):
        s = str(spec)
        if s.endswith(".json") or Path(s).is_file():
            path = Path(s)
            if not path.is_file():
                raise SpecError(f"{kind} spec file {path} does not exist")
            return builder(_load_json(path), where=str(path))
        known = _catalog_names(kind + "s")
        if s not in known:
            if kind == "device" and s in _REGISTRY:
                return _REGISTRY[s]
            extra = sorted(_REGISTRY) if kind == "device" else []
            hint = (
                " (or pass a spec file/dict; a device spec file used once in this session, or "
                "given with --device-spec, registers its name)"
                if kind == "device"
                else " (or pass a spec file/dict)"
            )
            raise SpecError(f"unknown {kind} {s!r}; known: {', '.join(known + extra)}{hint}")
        entry = resources.files(_CATALOG) / f"{kind}s" / f"{s}.json"
        return builder(json.loads(entry.read_text()), where=f"catalog {kind} {s}")
    raise SpecError(
        f"cannot use {type(spec).__name__} as a {kind} spec; pass a name, a JSON file or a dict"
    )


def load_device_spec(spec: SpecLike) -> DeviceSpec:
    """Resolve a catalog id, registered id, JSON file, dict or DeviceSpec to a DeviceSpec.

    A spec given as a dict, file or object that is not a catalog device is registered
    under its name, so the samples profiled with it resolve by that id afterwards.
    """
    out = _resolve(spec, "device", device_spec_from_dict, DeviceSpec)
    if not isinstance(spec, str) or spec.endswith(".json") or Path(spec).is_file():
        _check_device_id(out)
        if out.name not in _catalog_names("devices"):
            _REGISTRY[out.name] = out
    return out


def load_workload_spec(spec: SpecLike) -> WorkloadSpec:
    """Resolve a catalog name, JSON file, dict or WorkloadSpec to a WorkloadSpec."""
    return _resolve(spec, "workload", workload_spec_from_dict, WorkloadSpec)
