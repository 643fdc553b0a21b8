"""The fleet report's spec: a TOML file listing devices x workloads x batch sizes x caps.

Why: a fleet report is many cases that differ only in a few names and numbers; a small
declarative file says them once, and every mistake in it (a typo'd key, an unknown
device, a cap of zero) is caught before any case runs, with the key and the line named.
"""

from __future__ import annotations

import itertools
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SpecError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

#: what each objective minimises among the configurations under a cap
OBJECTIVES = {"time": "time per epoch", "energy": "energy per epoch"}

_TOP_KEYS = {
    "title",
    "devices",
    "workloads",
    "batch_sizes",
    "power_caps",
    "objectives",
    "samples",
    "seed",
    "reference",
    "device_specs",
    "strategy",
    "margin_sigma",
    "plain",
}
#: how a case profiled on the twin chooses what to measure (``powertrain profile --strategy``);
#: the default, ``active``, decides with the board in the loop so the picks are confirmed
STRATEGIES = ("random", "stratified", "active")
DEFAULT_STRATEGY = "active"
_WORKLOAD_KEYS = {"source", "samples_csv", "command", "timeout_s"}
_SOURCES = ("twin", "samples_csv", "command")
#: how long a profiling ``command`` may run per case unless its ``timeout_s`` says otherwise
COMMAND_TIMEOUT_S = 7200.0


@dataclass(frozen=True)
class WorkloadSource:
    """Where one workload's profiled samples come from: the twin, a CSV or a command."""

    kind: str  # "twin" | "samples_csv" | "command"
    path: Path | None = None
    command: str | None = None
    timeout_s: float = COMMAND_TIMEOUT_S


@dataclass(frozen=True)
class Case:
    """One cell of the fleet: a device, a workload, a batch size and an objective."""

    device: str
    workload: str
    batch_size: int
    objective: str
    source: WorkloadSource
    power_caps: tuple[float, ...]
    samples: int
    seed: int
    reference: str | None
    spec: str | None = None  # the spec file, named in the case's errors
    device_spec: dict | None = None  # a device outside the catalog: registered where it runs
    strategy: str = DEFAULT_STRATEGY
    #: of a prediction-only pick, in predicted sigmas; None: optimise.SAFE_K_SIGMA; 0: plain
    margin_sigma: float | None = None

    @property
    def case_id(self) -> str:
        """A folder name unique within the report (and readable)."""
        return f"{self.device}_{self.workload}_bs{self.batch_size}_{self.objective}"


@dataclass(frozen=True)
class FleetSpec:
    """A parsed, validated spec; ``cases()`` expands it into devices x workloads x batch
    sizes x objectives. :func:`load_spec` and :func:`parse_spec` build one.

    Parameters
    ----------
    path : Path, optional
        The spec file.
    title : str
        The report's title.
    devices : tuple of str
        Device ids.
    workloads : dict
        Workload name -> where its samples come from (the twin, a CSV, a command).
    batch_sizes : tuple of int
        Batch sizes.
    power_caps : tuple of float
        Caps in watts.
    objectives : tuple of str
        ``"time"`` (fastest epoch) and/or ``"energy"`` (least energy per epoch).
    samples, seed : int
        Modes profiled per case; the seed.
    reference : str, optional
        The model to transfer from; default the best shipped one.
    text : str
        The spec's TOML, kept for the report.
    device_specs : dict
        Device id -> spec of a device outside the catalog.
    strategy : str
        How the twin cases choose their samples (``"active"``: decide on the board).
    margin_sigma : float, optional
        The margin of predicted picks; None: the package's default.
    """

    path: Path | None
    title: str
    devices: tuple[str, ...]
    workloads: dict[str, WorkloadSource]
    batch_sizes: tuple[int, ...]
    power_caps: tuple[float, ...]
    objectives: tuple[str, ...]
    samples: int = 50
    seed: int = 0
    reference: str | None = None
    text: str = field(default="", repr=False)
    device_specs: dict = field(default_factory=dict)  # id -> spec dict (``device_specs``)
    strategy: str = DEFAULT_STRATEGY
    margin_sigma: float | None = None  # None: optimise.SAFE_K_SIGMA

    def cases(self) -> list[Case]:
        return [
            Case(d, w, b, o, self.workloads[w], self.power_caps, self.samples, self.seed,
                 self.reference, str(self.path) if self.path else None,
                 self.device_specs.get(d), self.strategy, self.margin_sigma)
            for d, w, b, o in itertools.product(
                self.devices, self.workloads, self.batch_sizes, self.objectives
            )
        ]  # fmt: skip

    @property
    def n_cases(self) -> int:
        """How many cases :meth:`cases` expands to (without building them)."""
        n = len(self.devices) * len(self.workloads)
        return n * len(self.batch_sizes) * len(self.objectives)


def _line_of(text: str, key: str, table: str | None = None) -> int | None:
    """1-based line where ``key`` is assigned inside ``[table]`` (top level when None);
    failing that, the line of the ``[table]`` header itself."""
    pattern = re.compile(rf"^\s*(\"{re.escape(key)}\"|{re.escape(key)})\s*=")
    current, header_line = None, None
    for i, line in enumerate(text.splitlines(), start=1):
        header = re.match(r"^\s*\[+([^\]]+)\]+\s*(#.*)?$", line)
        if header:
            current = header.group(1).replace('"', "").replace(" ", "")
            if current == table:
                header_line = i
            continue
        if current == table and pattern.match(line):
            return i
    return header_line


class _Where:
    """Builds error messages that name the spec file, the key and its line."""

    def __init__(self, source: str, text: str):
        self.source, self.text = source, text

    def error(self, key: str, message: str, table: str | None = None) -> SpecError:
        line = _line_of(self.text, key, table)
        at = f", line {line}" if line else ""
        name = f"{table}.{key}" if table else key
        return SpecError(f"{self.source}{at}: '{name}' {message}")


def _names(where: _Where, data: dict, key: str, known: list[str]) -> tuple[str, ...]:
    value = data.get(key)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise where.error(key, "must be a non-empty list of names")
    for v in value:
        if v not in known:
            raise where.error(key, f"names unknown {key[:-1]} {v!r} (known: {', '.join(known)})")
    return tuple(dict.fromkeys(value))


def _positive_numbers(where: _Where, data: dict, key: str, integer: bool) -> tuple:
    value = data.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value]
    kind = "integers" if integer else "numbers"
    if not isinstance(value, list) or not value:
        raise where.error(key, f"must be a non-empty list of positive {kind}")
    for v in value:
        ok_type = isinstance(v, int) if integer else isinstance(v, (int, float))
        if isinstance(v, bool) or not ok_type:
            raise where.error(key, f"must hold positive {kind}, got {v!r}")
        if not v > 0 or v != v or v == float("inf"):
            raise where.error(key, f"must hold positive {kind}, got {v!r}")
    return tuple(dict.fromkeys(int(v) if integer else float(v) for v in value))


def _workload_source(where: _Where, name: str, entry: Any, base: Path) -> WorkloadSource:
    table = f"workloads.{name}"
    if not isinstance(entry, dict):
        raise where.error(name, "must be a table, e.g. [workloads.NAME] source = 'twin'")
    for key in entry:
        if key not in _WORKLOAD_KEYS:
            raise where.error(
                key, f"is not a known key (known: {', '.join(sorted(_WORKLOAD_KEYS))})", table
            )
    given = [k for k in ("samples_csv", "command") if k in entry]
    timeout = entry.get("timeout_s", COMMAND_TIMEOUT_S)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not 0 < timeout < float("inf")
    ):
        raise where.error(
            "timeout_s", f"must be a positive number of seconds, got {timeout!r}", table
        )
    if "timeout_s" in entry and "command" not in entry:
        raise where.error("timeout_s", "only applies to a profiling command", table)
    source = entry.get("source", given[0] if given else "twin")
    if source not in _SOURCES:
        raise where.error("source", f"must be one of {', '.join(_SOURCES)}, got {source!r}", table)
    if source == "twin":
        if given:
            raise where.error(given[0], "is given but source is 'twin'", table)
        return WorkloadSource("twin")
    value = entry.get(source)
    if not isinstance(value, str) or not value.strip():
        raise where.error(source, "must be a non-empty string", table)
    if source == "command":
        return WorkloadSource("command", command=value, timeout_s=float(timeout))
    path = Path(value).expanduser()
    path = path if path.is_absolute() else base / path
    try:
        with open(path, "rb") as f:
            f.read(1)
    except OSError as e:
        raise where.error(
            "samples_csv", f"cannot be read: {path}: {e.strerror or e}", table
        ) from None
    return WorkloadSource("samples_csv", path=path)


def _check_samples_fit(where: _Where, devices: tuple[str, ...], samples: int) -> None:
    """Each case profiles ``samples`` distinct modes: no device may have fewer."""
    from ..devices.device import get_device

    for name in devices:
        n = get_device(name).n_modes
        if samples > n:
            raise where.error(
                "samples", f"= {samples} is more than the {n:,} power modes of {name}"
            )


def _device_specs(where: _Where, data: dict, base: Path) -> dict[str, dict]:
    """``device_specs``: JSON spec files (relative to the report spec) of devices outside
    the catalog; each registers its id, which ``devices`` then names."""
    from ..devices.specs import register_device

    raw = data.get("device_specs", [])
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
        raise where.error("device_specs", "must be a list of device spec JSON files")
    out = {}
    for v in raw:
        path = Path(v).expanduser()
        path = path if path.is_absolute() else base / path
        try:
            spec = register_device(path)
        except SpecError as e:
            raise where.error("device_specs", f"names a bad spec: {e}") from None
        out[spec.name] = spec.to_dict()
    return out


def parse_spec(text: str, source: str = "<spec>", base: Path | None = None) -> FleetSpec:
    """Validate a spec's TOML ``text``; every error names ``source``, the key and its line.

    Parameters
    ----------
    text : str
        The spec's TOML.
    source : str
        What to call it in errors (its file name).
    base : Path, optional
        The folder relative paths in the spec (``samples_csv``, ``reference``) are read
        from; default the current one.

    Returns
    -------
    FleetSpec
        The validated spec.
    """
    from ..devices.specs import device_names, workload_names

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{source}: not valid TOML: {e}") from None
    where = _Where(source, text)
    for key in data:
        if key not in _TOP_KEYS:
            raise where.error(key, f"is not a known key (known: {', '.join(sorted(_TOP_KEYS))})")
    for key in ("devices", "workloads", "batch_sizes", "power_caps"):
        if key not in data:
            raise SpecError(f"{source}: missing required key '{key}'")
    base = base if base is not None else Path.cwd()
    user_devices = _device_specs(where, data, base)
    devices = _names(where, data, "devices", device_names() + sorted(user_devices))
    workloads_raw = data["workloads"]
    if isinstance(workloads_raw, list):  # a list of names: every one on the twin
        workloads_raw = {w: {"source": "twin"} for w in workloads_raw if isinstance(w, str)}
    if not isinstance(workloads_raw, dict) or not workloads_raw:
        raise where.error("workloads", "must be a list of names or [workloads.NAME] tables")
    known_w = workload_names()
    workloads = {}
    for name, entry in workloads_raw.items():
        if name not in known_w:
            line = _line_of(text, "workloads") or _line_of(text, "", f"workloads.{name}")
            at = f", line {line}" if line else ""
            raise SpecError(
                f"{source}{at}: 'workloads' names unknown workload {name!r} "
                f"(known: {', '.join(known_w)})"
            )
        workloads[name] = _workload_source(where, name, entry, base)
    objectives = data.get("objectives", ["time"])
    objectives = _names(where, {"objectives": objectives}, "objectives", list(OBJECTIVES))
    samples = data.get("samples", 50)
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 5:
        raise where.error("samples", f"must be an integer >= 5, got {samples!r}")
    seed = data.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise where.error("seed", f"must be an integer >= 0, got {seed!r}")
    _check_samples_fit(where, devices, samples)
    reference = data.get("reference")
    if reference is not None and not isinstance(reference, str):
        raise where.error("reference", f"must be a model name or folder, got {reference!r}")
    if reference is not None:  # a folder beside the spec, as samples_csv; else a shipped name
        folder = Path(reference).expanduser()
        folder = folder if folder.is_absolute() else base / folder
        if folder.is_dir():
            reference = str(folder)
    plain = data.get("plain", False)
    if not isinstance(plain, bool):
        raise where.error("plain", f"must be true or false, got {plain!r}")
    # plain = true: the paper's plain picks (random samples, no margin), one key away
    strategy = data.get("strategy", "random" if plain else DEFAULT_STRATEGY)
    if strategy not in STRATEGIES:
        raise where.error("strategy", f"must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    margin = data.get("margin_sigma", 0.0 if plain else None)
    if margin is not None and (
        isinstance(margin, bool) or not isinstance(margin, (int, float)) or not margin >= 0
    ):
        raise where.error("margin_sigma", f"must be a number >= 0, got {margin!r}")
    title = data.get("title", "PowerTrain fleet report")
    if not isinstance(title, str):
        raise where.error("title", f"must be a string, got {title!r}")
    return FleetSpec(
        path=None,
        title=title,
        devices=devices,
        workloads=workloads,
        batch_sizes=_positive_numbers(where, data, "batch_sizes", integer=True),
        power_caps=tuple(sorted(_positive_numbers(where, data, "power_caps", integer=False))),
        objectives=objectives,
        samples=samples,
        seed=seed,
        reference=reference,
        text=text,
        device_specs=user_devices,
        strategy=strategy,
        margin_sigma=None if margin is None else float(margin),
    )


def load_spec(spec: str | Path | FleetSpec) -> FleetSpec:
    """Read and check a fleet report's TOML spec file.

    Parameters
    ----------
    spec : str, Path or FleetSpec
        The spec file (a parsed spec is returned as is).

    Returns
    -------
    FleetSpec
        The validated spec.

    Raises
    ------
    SpecError
        For an unreadable file or a bad key, naming the file, the key and its line.
    """
    if isinstance(spec, FleetSpec):
        return spec
    path = Path(spec)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise SpecError(f"cannot read report spec {path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise SpecError(f"report spec {path} is not a text (UTF-8 TOML) file") from None
    parsed = parse_spec(text, source=str(path), base=path.resolve().parent)
    return FleetSpec(**{**parsed.__dict__, "path": path})
