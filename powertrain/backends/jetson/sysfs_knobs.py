"""A Jetson's power-mode knobs in sysfs: online cores, CPU/GPU frequency ranges, EMC.

Why: jetson-stats cannot pin single frequencies; sysfs can (root). This module is the
only place that knows file names and units (cpufreq kHz, devfreq and EMC Hz). Every
path hangs off ``root`` so tests drive it against a fake tree, and every write is read
back, so a refused setting is an error, not a silently wrong measurement.
"""

from __future__ import annotations

import glob
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

from ...devices.specs import DeviceSpec
from ...errors import ProfilingError

#: GPU device-tree names jetson-stats recognises (Maxwell..Ampere integrated GPUs)
_GPU_NAMES = ("gpu", "gm20b", "gp10b", "gv11b", "ga10b")
_REL_TOL = 0.005  # read-back tolerance: drivers round requests to their own table


class BoardTableWarning(UserWarning):
    """The board's frequency table differs from the catalog; the board's is used."""


Writer = Callable[[Path, str], None]


def write_sysfs(path: Path, value: str) -> None:
    """Write one value the way ``echo value > path`` does."""
    with open(path, "w") as f:
        f.write(value)


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError as e:
        raise ProfilingError(f"cannot read {path}: {e.strerror or e}") from None


def _numbers(text: str) -> list[int]:
    return [int(x) for x in text.split() if x.strip().lstrip("-").isdigit()]


def _catalog_paths(entries: Iterable[str]) -> list[str]:
    """Absolute directory paths named in the catalog's free-text sysfs notes."""
    out = []
    for entry in entries:
        if not isinstance(entry, str):
            continue
        for m in re.finditer(r"(/sys/[^\s{<,;()]+)", entry):
            p = m.group(1).rstrip("/")
            if p not in out:
                out.append(p)
    return out


def _under(root: Path, absolute: str) -> Path:
    if ".." in Path(absolute).parts:
        raise ProfilingError(
            f"sysfs path {absolute!r} contains '..': refused (a spec's paths must name "
            "files under /sys directly)"
        )
    return root / absolute.lstrip("/")


def confined(write: Writer, roots: Sequence[str | Path]) -> Writer:
    """``write`` that refuses any path whose real location (symlinks resolved) is not
    under one of ``roots`` -- a spec or a symlink can never make the backend write
    outside sysfs/debugfs."""
    real_roots = [os.path.realpath(r) for r in roots]

    def guarded(path: Path, value: str) -> None:
        real = os.path.realpath(path)
        if not any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in real_roots):
            raise ProfilingError(
                f"refusing to write {path} (resolves to {real}): not under " + ", ".join(real_roots)
            )
        write(path, value)

    return guarded


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= _REL_TOL * max(abs(a), abs(b), 1e-9)


@dataclass(frozen=True)
class BoardTables:
    """What the board itself offers (MHz), read from sysfs."""

    cores: int
    cpu_mhz: tuple[float, ...]
    gpu_mhz: tuple[float, ...]
    mem_mhz: tuple[float, ...]
    mem_from_board: bool


class _Range:
    """A min/max pair of frequency files (cpufreq policy or devfreq device)."""

    def __init__(self, name: str, folder: Path, lo: str, hi: str, table: str, unit_hz: float):
        self.name, self.folder, self.unit_hz = name, folder, unit_hz
        self.lo, self.hi, self.table = folder / lo, folder / hi, folder / table
        for f in (self.lo, self.hi, self.table):
            if not f.exists():
                raise ProfilingError(
                    f"{name}: {f} is missing; this JetPack version keeps the {name} frequency "
                    "files elsewhere (check the path, or file an issue with `ls` of the folder)"
                )

    def available_mhz(self) -> tuple[float, ...]:
        return tuple(sorted({v * self.unit_hz / 1e6 for v in _numbers(_read(self.table))}))

    def read(self) -> tuple[int, int]:
        return int(_read(self.lo)), int(_read(self.hi))

    def set(self, lo: int, hi: int, write: Writer) -> None:
        """Set [lo, hi] in an order the kernel accepts (never min > max in between)."""
        cur_lo, _ = self.read()
        # max first is valid while the new max stays >= the current min; else min first
        order = [(self.hi, hi), (self.lo, lo)] if hi >= cur_lo else [(self.lo, lo), (self.hi, hi)]
        for path, value in order:
            _write(write, path, str(int(value)), self.name)


def _write(write: Writer, path: Path, value: str, what: str) -> None:
    try:
        write(path, value)
    except FileNotFoundError:
        raise ProfilingError(
            f"{what}: {path} does not exist on this board (another JetPack version?); "
            "check the path and report it"
        ) from None
    except PermissionError:
        raise ProfilingError(
            f"{what}: permission denied writing {path}; run as root (sudo)"
        ) from None
    except OSError as e:
        raise ProfilingError(
            f"{what}: the board refused {value} in {path} ({e.strerror or e}); "
            "pick a value from the board's table or check nvpmodel's limits"
        ) from None


class _Emc:
    """Memory (EMC) clock: locked through bpmp debugfs, overridden (Nano), or capped."""

    def __init__(self, root: Path, spec: DeviceSpec, method: str = "auto"):
        emc = spec.sysfs.get("emc_sysfs", {}) if isinstance(spec.sysfs, dict) else {}
        named = _catalog_paths(emc.values()) if isinstance(emc, dict) else []
        bpmp = [_under(root, p) for p in named if p.endswith("/clk/emc")]
        bpmp.append(_under(root, "/sys/kernel/debug/bpmp/debug/clk/emc"))
        override = [_under(root, "/sys/kernel/debug/clk/override.emc")]
        caps = [_under(root, p) for p in named if "nvpmodel_" in p and "cap" in p]
        caps += [
            _under(root, "/sys/kernel/nvpmodel_emc_cap/emc_iso_cap"),
            _under(root, "/sys/kernel/nvpmodel_clk_cap/emc"),
        ]
        self.method = None
        self.files: dict[str, Path] = {}
        tried: list[str] = []
        if method in ("auto", "bpmp"):
            for d in bpmp:
                tried.append(str(d))
                if (d / "rate").exists() and (d / "mrq_rate_locked").exists():
                    self.method = "bpmp"
                    self.files = {"rate": d / "rate", "lock": d / "mrq_rate_locked"}
                    if (d / "state").exists():
                        self.files["state"] = d / "state"
                    break
        if self.method is None and method in ("auto", "override"):
            for d in override:
                tried.append(str(d))
                if (d / "clk_rate").exists() and (d / "clk_state").exists():
                    self.method = "override"
                    self.files = {"rate": d / "clk_rate", "state": d / "clk_state"}
                    break
        if self.method is None and method in ("auto", "cap"):
            for f in caps:
                tried.append(str(f))
                if f.exists():
                    self.method = "cap"
                    self.files = {"rate": f}
                    break
        self.tried = tried
        self.table_dir = _under(root, "/sys/kernel/debug/bpmp/debug/emc/tables/regular")

    def require(self) -> None:
        if self.method is None:
            raise ProfilingError(
                "no memory (EMC) clock control found; tried " + ", ".join(self.tried) + ". Mount "
                "debugfs (sudo mount -t debugfs none /sys/kernel/debug) or profile with one "
                "mem_mhz only"
            )

    def available_mhz(self) -> tuple[float, ...] | None:
        if self.table_dir.is_dir():  # Xavier: one folder per rate, named in kHz
            rates = [int(p.name) for p in self.table_dir.iterdir() if p.name.isdigit()]
            if rates:
                return tuple(sorted(r / 1e3 for r in rates))
        return None

    def read_hz(self) -> int | None:
        return int(_read(self.files["rate"])) if self.method else None

    def snapshot(self) -> dict[str, str]:
        return {k: _read(p) for k, p in self.files.items()}

    def set_hz(self, hz: int, write: Writer) -> None:
        self.require()
        if self.method == "bpmp":
            _write(write, self.files["lock"], "1", "EMC")
            _write(write, self.files["rate"], str(hz), "EMC")
            if "state" in self.files:
                _write(write, self.files["state"], "1", "EMC")
        elif self.method == "override":
            _write(write, self.files["rate"], str(hz), "EMC")
            _write(write, self.files["state"], "1", "EMC")
        else:
            _write(write, self.files["rate"], str(hz), "EMC")

    def restore(self, snap: dict[str, str], write: Writer) -> None:
        order = ["rate", "state", "lock"]  # unlock last, once the old rate is back
        for k in order:
            if k in snap and k in self.files:
                _write(write, self.files[k], snap[k], "EMC")


class SysfsKnobs:
    """Set and restore one Jetson's power mode through sysfs files under ``root``.

    ``write`` replaces the file writer (tests use it to emulate a kernel that refuses or
    clamps values). Frequencies are checked against the board's own tables.
    """

    def __init__(
        self,
        spec: DeviceSpec,
        root: str | Path = "/",
        write: Writer | None = None,
        emc: str = "auto",
        gpu_devfreq: str | Path | None = None,
        allow_unlisted_emc: bool = False,
        write_roots: Sequence[str | Path] | None = None,
    ):
        self.spec = spec
        self.root = Path(root)
        #: where writes may land (default: sysfs, which holds debugfs, under ``root``)
        self.write_roots = tuple(write_roots) if write_roots else (self.root / "sys",)
        self.write = confined(write or write_sysfs, self.write_roots)
        self.allow_unlisted_emc = bool(allow_unlisted_emc)
        cpu_dir = self.root / "sys/devices/system/cpu"
        if not cpu_dir.is_dir():
            raise ProfilingError(f"{cpu_dir} is missing: this does not look like a Jetson's sysfs")
        cpus = sorted(
            int(m.group(1)) for p in cpu_dir.iterdir() if (m := re.fullmatch(r"cpu(\d+)", p.name))
        )
        self.cpus = cpus
        # cpu0 usually has no online file: it cannot be taken offline
        self.online_files = {
            n: cpu_dir / f"cpu{n}" / "online"
            for n in cpus
            if (cpu_dir / f"cpu{n}" / "online").exists()
        }
        self.cpu_ranges = [
            _Range(
                f"CPU cluster {first}",
                folder,
                "scaling_min_freq",
                "scaling_max_freq",
                "scaling_available_frequencies",
                1e3,
            )
            for first, folder in self._cpufreq_folders(cpu_dir)
        ]
        if not self.cpu_ranges:
            raise ProfilingError(
                f"no cpufreq folder under {cpu_dir}; is cpufreq enabled on this kernel?"
            )
        self.gpu = _Range(
            "GPU",
            self._gpu_folder(gpu_devfreq),
            "min_freq",
            "max_freq",
            "available_frequencies",
            1.0,
        )
        self.emc = _Emc(self.root, spec, emc)

    # -- discovery ------------------------------------------------------------------
    def _cpufreq_folders(self, cpu_dir: Path) -> list[tuple[int, Path]]:
        clusters = self.spec.extra.get("cpu_clusters") or []
        firsts = [min(c["cpus"]) for c in clusters if isinstance(c, dict) and c.get("cpus")]
        if not firsts:
            firsts = [0]
            for pol in sorted(cpu_dir.glob("cpufreq/policy*")):
                n = int(pol.name[len("policy") :]) if pol.name[len("policy") :].isdigit() else None
                if n is not None and n not in firsts:
                    firsts.append(n)
        out = []
        for n in sorted(set(firsts)):
            for folder in (cpu_dir / f"cpu{n}" / "cpufreq", cpu_dir / "cpufreq" / f"policy{n}"):
                if (folder / "scaling_available_frequencies").exists():
                    out.append((n, folder))
                    break
            else:
                if n in self.cpus:
                    raise ProfilingError(
                        f"CPU cluster {n}: {cpu_dir}/cpu{n}/cpufreq/scaling_available_frequencies "
                        "is missing; is the CPU online and cpufreq enabled?"
                    )
        return out

    def _gpu_folder(self, given: str | Path | None) -> Path:
        if given is not None:  # a path on the board, or one already under root
            p = Path(given)
            if ".." in p.parts:
                raise ProfilingError(f"--gpu-devfreq {given}: a path with '..' is refused")
            return p if p.exists() else _under(self.root, str(p))
        gpu = (
            self.spec.sysfs.get("gpu_devfreq_sysfs", {})
            if isinstance(self.spec.sysfs, dict)
            else {}
        )
        candidates = [
            _under(self.root, p)
            for p in _catalog_paths(gpu.values() if isinstance(gpu, dict) else [])
            if "devfreq" in p
        ]
        cls = self.root / "sys/class/devfreq"
        if cls.is_dir():
            for d in sorted(cls.iterdir()):
                name_file = d / "device" / "of_node" / "name"
                name = (
                    name_file.read_text().strip().lower() if name_file.exists() else d.name.lower()
                )
                if any(g in name for g in _GPU_NAMES):
                    candidates.append(d)
        for c in candidates:
            if (c / "available_frequencies").exists() and (c / "min_freq").exists():
                return c
        raise ProfilingError(
            "no GPU devfreq folder found (tried "
            + ", ".join(str(c) for c in candidates or [cls])
            + "); this JetPack version keeps it elsewhere: find it with `ls /sys/class/devfreq/` "
            "and pass it as gpu_devfreq (--gpu-devfreq)"
        )

    # -- tables ---------------------------------------------------------------------
    def tables(self) -> BoardTables:
        """The board's own tables (MHz); EMC falls back to the catalog where the board
        does not list its rates."""
        cpu = sorted(set().union(*(r.available_mhz() for r in self.cpu_ranges)))
        mem = self.emc.available_mhz()
        return BoardTables(
            cores=len(self.cpus),
            cpu_mhz=tuple(cpu),
            gpu_mhz=self.gpu.available_mhz(),
            mem_mhz=mem if mem else tuple(self.spec.mem_mhz),
            mem_from_board=bool(mem),
        )

    def check_against_catalog(self) -> BoardTables:
        """Compare the board's tables with the catalog, warn on each difference, and
        return the board's (the board is the truth: JetPack versions differ)."""
        t = self.tables()
        s = self.spec
        for what, board, cat in (
            ("CPU", t.cpu_mhz, s.cpu_mhz),
            ("GPU", t.gpu_mhz, s.gpu_mhz),
            ("memory", t.mem_mhz, s.mem_mhz),
        ):
            extra = [f for f in board if not any(_close(f, c) for c in cat)]
            lacks = [c for c in cat if not any(_close(f, c) for f in board)]
            if extra or lacks:
                warnings.warn(
                    f"{s.name}: the board's {what} frequency table differs from the catalog "
                    f"(board only: {', '.join(f'{x:g}' for x in extra) or '-'}; catalog only: "
                    f"{', '.join(f'{x:g}' for x in lacks) or '-'} MHz); using the board's table",
                    BoardTableWarning,
                    stacklevel=2,
                )
        if t.cores != s.cores:
            warnings.warn(
                f"{s.name}: the board has {t.cores} CPUs, the catalog {s.cores}; "
                "using the board's count",
                BoardTableWarning,
                stacklevel=2,
            )
        return t

    # -- state ----------------------------------------------------------------------
    def snapshot(self) -> dict:
        """Everything this class may write, as read now."""
        return {
            "online": {n: _read(p) for n, p in self.online_files.items()},
            "cpu": [r.read() for r in self.cpu_ranges],
            "gpu": self.gpu.read(),
            "emc": self.emc.snapshot(),
        }

    def state(self) -> dict:
        """The current mode in schema units (for checks and the provenance sidecar)."""
        online = sum(
            1 for n in self.cpus if n not in self.online_files or _read(self.online_files[n]) == "1"
        )
        lo, hi = self.cpu_ranges[0].read()
        glo, ghi = self.gpu.read()
        emc = self.emc.read_hz()
        return {
            "cores": online,
            "cpu_mhz": hi / 1e3,
            "gpu_mhz": ghi / 1e6,
            "mem_mhz": emc / 1e6 if emc is not None else float("nan"),
        }

    def _set_online(self, online: dict[int, str]) -> None:
        # bring CPUs up before taking others down, so at least one stays online
        for n in sorted(online, key=lambda n: (online[n] != "1", -n)):
            if n in self.online_files and _read(self.online_files[n]) != online[n]:
                _write(self.write, self.online_files[n], online[n], f"CPU {n} online")

    def restore(self, snap: dict) -> None:
        """Put the board back as ``snap`` found it; collect every failure, then raise."""
        errors = []
        steps = [
            lambda: self._set_online({n: "1" for n in self.online_files}),
            *[
                (lambda r=r, v=v: r.set(v[0], v[1], self.write))
                for r, v in zip(self.cpu_ranges, snap["cpu"])
            ],
            lambda: self.gpu.set(snap["gpu"][0], snap["gpu"][1], self.write),
            lambda: self.emc.restore(snap["emc"], self.write),
            lambda: self._set_online(snap["online"]),
        ]
        for step in steps:
            try:
                step()
            except ProfilingError as e:
                errors.append(str(e))
        if errors:
            raise ProfilingError(
                "could not restore the board's original mode (reboot it to be safe): "
                + "; ".join(errors)
            )

    def apply(
        self,
        cores: int,
        cpu_mhz: float,
        gpu_mhz: float,
        mem_mhz: float,
        tables: BoardTables | None = None,
    ) -> None:
        """Set one power mode and read it back; ProfilingError names a refused setting."""
        t = tables or self.tables()
        cpu_khz = self._pick(cpu_mhz, t.cpu_mhz, "CPU") * 1e3
        gpu_hz = self._pick(gpu_mhz, t.gpu_mhz, "GPU") * 1e6
        mem_hz = self._pick(mem_mhz, t.mem_mhz, "memory") * 1e6
        cores = int(cores)
        if not 1 <= cores <= len(self.cpus):
            raise ProfilingError(f"cores={cores}: this board has CPUs 0..{len(self.cpus) - 1}")
        # every CPU online first, so each cluster's cpufreq policy exists and takes the limits
        self._set_online({n: "1" for n in self.online_files})
        for r in self.cpu_ranges:
            r.set(round(cpu_khz), round(cpu_khz), self.write)
        self.gpu.set(round(gpu_hz), round(gpu_hz), self.write)
        current_emc = self.emc.read_hz()
        if self.emc.method is None and len(t.mem_mhz) > 1:
            self.emc.require()
        if self.emc.method is not None and (current_emc is None or not _close(current_emc, mem_hz)):
            if not t.mem_from_board and not self.allow_unlisted_emc:
                raise ProfilingError(
                    f"memory {mem_hz / 1e6:g} MHz comes from the catalog; this board does not "
                    "list its EMC rates, so the value is unchecked: pass --allow-unlisted-emc "
                    "(allow_unlisted_emc=True) to write it anyway, or leave mem_mhz at "
                    f"{current_emc / 1e6 if current_emc else 0:g} MHz"
                )
            self.emc.set_hz(round(mem_hz), self.write)
        self._set_online({n: ("1" if n < cores else "0") for n in self.online_files})
        self._verify(cores, cpu_khz, gpu_hz, mem_hz)

    @staticmethod
    def _pick(mhz: float, table: Sequence[float], what: str) -> float:
        for f in table:
            if _close(f, mhz):
                return f
        raise ProfilingError(
            f"{what} {mhz:g} MHz is not in this board's table "
            f"({', '.join(f'{x:g}' for x in table)}); "
            "draw modes from the board's table (JetsonBackend.device.power_modes())"
        )

    def _verify(self, cores: int, cpu_khz: float, gpu_hz: float, mem_hz: float) -> None:
        refused = []
        for r in self.cpu_ranges:
            lo, hi = r.read()
            if not (_close(lo, cpu_khz) and _close(hi, cpu_khz)):
                refused.append(
                    f"{r.name} {cpu_khz / 1e3:g} MHz (reads min {lo / 1e3:g}, max {hi / 1e3:g})"
                )
        lo, hi = self.gpu.read()
        if not (_close(lo, gpu_hz) and _close(hi, gpu_hz)):
            refused.append(f"GPU {gpu_hz / 1e6:g} MHz (reads min {lo / 1e6:g}, max {hi / 1e6:g})")
        emc = self.emc.read_hz()
        if emc is not None and not _close(emc, mem_hz):
            refused.append(f"memory {mem_hz / 1e6:g} MHz (reads {emc / 1e6:g})")
        online = sum(
            1 for n in self.cpus if n not in self.online_files or _read(self.online_files[n]) == "1"
        )
        if online != cores:
            refused.append(f"{cores} online cores ({online} online)")
        if refused:
            raise ProfilingError(
                "the board refused: " + "; ".join(refused) + ". An nvpmodel power budget probably "
                "caps it: switch to the unrestricted mode first (sudo nvpmodel -m 0, MAXN) or "
                "leave those frequencies out of the sweep"
            )


def glob_under(root: Path, pattern: str) -> list[Path]:
    """``glob`` below ``root`` for an absolute sysfs pattern (hwmon indices differ per boot)."""
    return [Path(p) for p in sorted(glob.glob(os.path.join(str(root), pattern.lstrip("/"))))]
