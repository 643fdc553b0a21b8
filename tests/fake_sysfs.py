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
    #: CPUs the tree has, and the hwmon folder of its INA3221 at 0x40
    n_cpus: int = 12
    rail_dir: str = "1-0040/hwmon/hwmon3"
    #: True: channel 1 is the module input (VDD_IN, the Orin Nano/NX), the sum of the rest
    input_rail: bool = False

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
        online = 1 + sum(int(self.read(f"{CPU_DIR}/cpu{n}/online")) for n in range(1, self.n_cpus))
        cpu = int(self.read(f"{CPU_DIR}/cpu0/cpufreq/scaling_max_freq")) / 1e6  # GHz
        gpu = int(self.read(f"{GPU_DIR}/max_freq")) / 1e9
        chans = {1: 2.0 + 20.0 * gpu, 2: 1.0 + 0.8 * online * cpu, 3: 4.0}
        if self.input_rail:  # VDD_IN, VDD_CPU_GPU_CV, VDD_SOC
            chans = {1: chans[1] + chans[2] + 1.0, 2: chans[1] + chans[2] - 2.0, 3: 1.0}
        for n, watts in chans.items():
            d = self.root / "sys/bus/i2c/drivers/ina3221" / self.rail_dir
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


#: what a Super image's GPU table reads when the boot firmware lacks its Super part
CAPPED_GPU_HZ = [306000000, 408000000, 510000000, 612000000, 624750000]


def fake_conf(device: str, image: str | None = None) -> str:
    """An nvpmodel conf for ``device`` in the files' syntax: PARAM sections naming the
    clocks the blocks use, each catalog preset as a POWER_MODEL, the default mode."""
    from powertrain.backends.jetson.nvpmodel import cpu_params, write_block
    from powertrain.devices.presets import nvpmodel_info

    dev = get_device(device)
    lines = ["< PARAM TYPE=FILE NAME=CPU_ONLINE >"]
    lines += [f"CORE_{i} /sys/devices/system/cpu/cpu{i}/online" for i in range(dev.spec.cores)]
    lines += ["", "< PARAM TYPE=FILE NAME=TPC_POWER_GATING >", "TPC_PG_MASK /sys/x/tpc_pg_mask"]
    for p in [*cpu_params(dev, dev.spec.cores), "GPU", "EMC"]:
        lines += [
            "",
            f"< PARAM TYPE=CLOCK NAME={p} >",
            "MAX_FREQ /sys/x/max",
            "MIN_FREQ /sys/x/min",
        ]
    blocks = [
        write_block(dev, p, int(p["nvpmodel_id"]), str(p["name"]), pin=False)
        for p in dev.spec.presets
    ]
    info = nvpmodel_info(dev)
    default = {p["name"]: p["nvpmodel_id"] for p in dev.spec.presets}[info["default_preset"]]
    return "\n".join([*lines, "", *blocks, f"< PM_CONFIG DEFAULT={default} >", ""])


def make_p3767(root: Path, device: str, capped: bool = False, conf: bool = True) -> FakeBoard:
    """An Orin Nano / Orin NX (P3767) tree for catalog ``device``: its cores, its CPU, GPU
    and EMC tables, VDD_IN/VDD_CPU_GPU_CV/VDD_SOC rails, the device tree's model and
    compatible strings, and ``/etc/nvpmodel.conf`` linked to the image's file (written
    from the catalog presets). ``capped``: a Super image whose boot firmware still caps
    the GPU table at 624.75 MHz."""
    from powertrain.devices.presets import nvpmodel_info

    spec = get_device(device).spec
    cpu_khz = [round(f * 1000) for f in spec.cpu_mhz]
    gpu_hz = CAPPED_GPU_HZ if capped else [round(f * 1e6) for f in spec.gpu_mhz]
    emc_hz = [round(f * 1e6) for f in spec.mem_mhz]
    board = FakeBoard(
        root,
        gpu_hz,
        cpu_khz,
        emc_hz,
        n_cpus=spec.cores,
        rail_dir="1-0040/hwmon/hwmon1",
        input_rail=True,
    )
    (root / CPU_DIR / "cpu0").mkdir(parents=True, exist_ok=True)
    for n in range(1, spec.cores):
        _w(root / CPU_DIR / f"cpu{n}/online", 1)
    for n in (0, 4):
        d = root / CPU_DIR / f"cpu{n}/cpufreq"
        _w(d / "scaling_available_frequencies", " ".join(map(str, cpu_khz)) + " ")
        _w(d / "scaling_min_freq", 729600)
        _w(d / "scaling_max_freq", cpu_khz[-1])
        _w(d / "scaling_governor", "schedutil")
    g = root / GPU_DIR
    _w(g / "available_frequencies", " ".join(map(str, gpu_hz)))
    _w(g / "min_freq", gpu_hz[0])
    _w(g / "max_freq", gpu_hz[-1])
    _w(g / "governor", "nvhost_podgov")
    e = root / EMC_DIR
    _w(e / "rate", emc_hz[-1])
    _w(e / "mrq_rate_locked", 0)
    _w(e / "state", 0)
    for hz in emc_hz:
        (root / EMC_TABLE_DIR / str(hz // 1000)).mkdir(parents=True, exist_ok=True)
    d = root / "sys/bus/i2c/drivers/ina3221" / board.rail_dir
    for n, name in enumerate(("VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"), start=1):
        _w(d / f"in{n}_label", name)
        _w(d / f"in{n}_input", 5000)
        _w(d / f"curr{n}_input", 500)
    _w(root / FAN, 80)
    compatible = spec.extra["board"]["compatible"]
    dt = root / "proc/device-tree"
    dt.mkdir(parents=True, exist_ok=True)
    (dt / "model").write_bytes(f"NVIDIA {spec.extra['board']['module']}\0".encode())
    (dt / "compatible").write_bytes(
        f"nvidia,p3768-0000+{compatible[0][7:]}\0{compatible[0]}\0nvidia,tegra234\0".encode()
    )
    _w(root / "etc/nv_tegra_release", "# R36 (release), REVISION: 4.3, fake")
    if conf:
        info = nvpmodel_info(spec)
        target = root / "etc/nvpmodel" / info["conf"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(fake_conf(device))
        (root / "etc/nvpmodel.conf").symlink_to(target)
        default = {p["name"]: p["nvpmodel_id"] for p in spec.presets}[info["default_preset"]]
        _w(root / "var/lib/nvpmodel/status", f"pmode:{default:04d} fmode:fanNull")
    board._update_rails()
    return board
