"""A fake Jetson sysfs tree under a temporary folder, and a fake kernel that writes it.

Why: the Jetson backend must be tested without a Jetson. The tree has the files the
backend touches (cpu online, cpufreq tables, GPU devfreq, EMC, INA3221 rails, fan);
the fake kernel behaves like the real one where it matters: it refuses unknown
frequencies and min > max, clamps to an nvpmodel cap, and updates the rails' readings
as the mode changes.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from pathlib import Path

from powertrain.devices.device import get_device

#: AGX Orin on JetPack 6: an 11-entry GPU table that differs from the catalog's 13
ORIN_JP6_GPU_HZ = [
    306000000,
    408000000,
    510000000,
    612000000,
    714000000,
    816000000,
    918000000,
    1020000000,
    1122000000,
    1224000000,
    1300500000,
]

GPU_DIR = "sys/devices/17000000.ga10b/devfreq/17000000.ga10b"
EMC_DIR = "sys/kernel/debug/bpmp/debug/clk/emc"
EMC_TABLE_DIR = "sys/kernel/debug/bpmp/debug/emc/tables/regular"
CPU_DIR = "sys/devices/system/cpu"
FAN = "sys/devices/platform/pwm-fan/hwmon/hwmon7/pwm1"


def _w(path: Path, text) -> None:
    """Write atomically: real sysfs reads never see a half-written value, and the
    sampler thread reads the rails while the test thread changes them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(f"{text}\n")
    os.replace(tmp, path)


@dataclass
class FakeBoard:
    """A fake AGX Orin tree at ``root``; ``kernel`` is the writer the backend must use."""

    root: Path
    gpu_hz: list[int]
    cpu_khz: list[int]
    emc_hz: list[int]
    #: nvpmodel-like caps: writes above them read back clamped
    gpu_cap_hz: int | None = None
    #: path suffixes whose writes fail with EINVAL (a setting the board refuses)
    refuse: set[str] = field(default_factory=set)
    writes: list[tuple[str, str]] = field(default_factory=list)

    # -- the fake kernel ------------------------------------------------------------
    def kernel(self, path: Path, value: str) -> None:
        rel = str(Path(path).relative_to(self.root))
        self.writes.append((rel, value))
        if any(rel.endswith(s) for s in self.refuse):
            raise OSError(errno.EINVAL, "Invalid argument")
        if not Path(path).exists():
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(path))
        v = int(value)
        if rel.startswith(CPU_DIR) and rel.endswith("_freq"):
            if v not in self.cpu_khz:
                raise OSError(errno.EINVAL, "Invalid argument")
            other = Path(path).with_name(
                "scaling_max_freq" if rel.endswith("min_freq") else "scaling_min_freq"
            )
            o = int(other.read_text())
            if (rel.endswith("min_freq") and v > o) or (rel.endswith("max_freq") and v < o):
                raise OSError(errno.EINVAL, "Invalid argument")
        elif rel.startswith(GPU_DIR):
            if v not in self.gpu_hz:
                raise OSError(errno.EINVAL, "Invalid argument")
            if self.gpu_cap_hz is not None:
                v = min(v, self.gpu_cap_hz)
            other = Path(path).with_name("max_freq" if rel.endswith("min_freq") else "min_freq")
            o = int(other.read_text())
            if (rel.endswith("min_freq") and v > o) or (rel.endswith("max_freq") and v < o):
                raise OSError(errno.EINVAL, "Invalid argument")
        elif rel.endswith("/online") and value not in ("0", "1"):
            raise OSError(errno.EINVAL, "Invalid argument")
        elif rel == f"{EMC_DIR}/rate" and v not in self.emc_hz:
            raise OSError(errno.EINVAL, "Invalid argument")
        _w(Path(path), v)
        self._update_rails()

    # -- reading the state back ------------------------------------------------------
    def read(self, rel: str) -> str:
        return (self.root / rel).read_text().strip()

    def state(self) -> dict[str, str]:
        """Every writable file's content: the board state a test compares."""
        out = {}
        for p in sorted(self.root.rglob("*")):
            if p.is_file() and p.name in (
                "online",
                "scaling_min_freq",
                "scaling_max_freq",
                "min_freq",
                "max_freq",
                "rate",
                "mrq_rate_locked",
                "state",
                "pwm1",
                "emc_iso_cap",
            ):
                out[str(p.relative_to(self.root))] = p.read_text().strip()
        return out

    def _update_rails(self) -> None:
        online = 1 + sum(int(self.read(f"{CPU_DIR}/cpu{n}/online")) for n in range(1, 12))
        cpu = int(self.read(f"{CPU_DIR}/cpu0/cpufreq/scaling_max_freq")) / 1e6  # GHz
        gpu = int(self.read(f"{GPU_DIR}/max_freq")) / 1e9
        rails = {"hwmon3": {1: 2.0 + 20.0 * gpu, 2: 1.0 + 0.8 * online * cpu, 3: 4.0}}
        for hw, chans in rails.items():
            for n, watts in chans.items():
                d = self.root / "sys/bus/i2c/drivers/ina3221/1-0040/hwmon" / hw
                mv = int((d / f"in{n}_input").read_text())
                _w(d / f"curr{n}_input", int(watts * 1e6 / mv))


def make_orin(
    root: Path,
    gpu_hz: list[int] | None = None,
    emc: str = "bpmp",
    fan: bool = True,
    missing: tuple[str, ...] = (),
    emc_table: bool = True,
) -> FakeBoard:
    """An AGX Orin devkit tree in a 30 W-like state: 8 cores online, CPU <= 1728 MHz,
    GPU <= 522.75 MHz, EMC at 3199 MHz unlocked. ``gpu_hz`` replaces the GPU table (a
    board that differs from the catalog); ``emc`` is "bpmp", "cap" or "none";
    ``missing`` lists relative paths to delete (an older/newer JetPack); ``emc_table``:
    whether the board lists its EMC rates."""
    spec = get_device("orin-agx").spec
    cpu_khz = [round(f * 1000) for f in spec.cpu_mhz]
    gpu_hz = gpu_hz or [round(f * 1e6) for f in spec.gpu_mhz]
    emc_hz = [round(f * 1e6) for f in spec.mem_mhz]
    board = FakeBoard(root, gpu_hz, cpu_khz, emc_hz)
    for n in range(12):
        if n:
            _w(root / CPU_DIR / f"cpu{n}/online", 1 if n < 8 else 0)
        else:
            (root / CPU_DIR / "cpu0").mkdir(parents=True, exist_ok=True)
    for n in (0, 4, 8):
        d = root / CPU_DIR / f"cpu{n}/cpufreq"
        _w(d / "scaling_available_frequencies", " ".join(map(str, cpu_khz)) + " ")
        _w(d / "scaling_min_freq", 729600)
        _w(d / "scaling_max_freq", 1728000)
        _w(d / "scaling_cur_freq", 1728000)
        _w(d / "scaling_governor", "schedutil")
    g = root / GPU_DIR
    _w(g / "available_frequencies", " ".join(map(str, gpu_hz)))
    _w(g / "min_freq", gpu_hz[0])
    _w(
        g / "max_freq",
        max(f for f in gpu_hz if f <= 522750000) if min(gpu_hz) <= 522750000 else gpu_hz[0],
    )
    _w(g / "cur_freq", gpu_hz[0])
    _w(g / "governor", "nvhost_podgov")
    if emc == "bpmp":
        e = root / EMC_DIR
        _w(e / "rate", 3199000000)
        _w(e / "mrq_rate_locked", 0)
        _w(e / "state", 0)
        if emc_table:  # the board lists its EMC rates (one folder per rate, in kHz)
            for hz in emc_hz:
                (root / EMC_TABLE_DIR / str(hz // 1000)).mkdir(parents=True, exist_ok=True)
    elif emc == "cap":
        _w(root / "sys/kernel/nvpmodel_emc_cap/emc_iso_cap", 3199000000)
    labels = {
        "1-0040/hwmon/hwmon3": ("VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"),
        "1-0041/hwmon/hwmon4": ("NC", "VDDQ_VDD2_1V8AO", "NC"),
    }
    for sub, names in labels.items():
        d = root / "sys/bus/i2c/drivers/ina3221" / sub
        for n, name in enumerate(names, start=1):
            _w(d / f"in{n}_label", name)
            _w(d / f"in{n}_input", 5000 if n == 3 else 1000)
            _w(d / f"curr{n}_input", 500)
    if fan:
        _w(root / FAN, 80)
    _w(root / "etc/nv_tegra_release", "# R35 (release), REVISION: 4.1, fake")
    board._update_rails()
    for rel in missing:
        p = root / rel
        if p.is_dir():
            import shutil

            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    return board


def make_nano_iio(root: Path) -> Path:
    """Only the JetPack 4 iio power files of a Jetson Nano (for the sensor tests)."""
    d = root / "sys/bus/i2c/drivers/ina3221x/6-0040/iio:device0"
    for n, (name, mw) in enumerate(
        (("POM_5V_IN", 4200), ("POM_5V_GPU", 1500), ("POM_5V_CPU", 900))
    ):
        _w(d / f"rail_name_{n}", name)
        _w(d / f"in_power{n}_input", mw)
    return d
