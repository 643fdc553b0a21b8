"""The twin's physical parameters, read from the ``twin`` key of a device spec and the
``params`` of a workload spec.

Why: devices and workloads are data (docs/design.md); this module is the one place that says
which keys the twin reads, which are optional (with their defaults), which follow from
the spec's datasheet facts (:data:`DERIVED`) and what a clear error looks like when a
user-written spec lacks one. docs/twin.md has the table of every key with its unit and
how to estimate it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..devices.specs import DeviceSpec, WorkloadSpec
from ..errors import SpecError

#: device ``twin`` keys: section -> {key: default}; ``None`` marks a required key
DEVICE_KEYS: dict[str, dict[str, Any]] = {
    "gpu": {
        "gflops_per_mhz": None,  # peak FP32 GFLOP/s per MHz (CUDA cores x 2 FLOP)
        "efficiency": 1.0,  # architecture factor on a workload's compute efficiency
        "parallel_width": None,  # SM count in units of 128 cores: batch needed to fill it
        "v_min": 0.65,  # voltage at/below the knee, relative to the top frequency's
        "knee_mhz": None,  # V-f curve is flat below this frequency
        "dyn_w": None,  # switching power at top frequency, busy, activity 1
        "leak_w": 0.0,  # leakage at top voltage
        "idle_frac": 0.15,  # share of dyn_w drawn clocked but stalled/idle (clock tree)
    },
    "mem": {
        "gbps_per_mhz": None,  # peak DRAM bandwidth (GB/s) per EMC MHz
        "efficiency": 0.6,  # achievable fraction of peak bandwidth
        "v_min": 1.0,
        "knee_mhz": 0.0,
        "dyn_w": None,  # EMC + DRAM power at top frequency, fully busy
        "background": 0.3,  # fraction of dyn_w drawn by refresh/IO when idle
        "leak_w": 0.0,
    },
    "cpu": {
        "perf_per_mhz": 1.0,  # per-core throughput relative to a Cortex-A78AE
        "mem_stall": 0.1,  # fraction of CPU work time stalled on DRAM at top CPU/EMC clocks
        "v_min": 0.65,
        "knee_mhz": None,
        "dyn_w_per_core": None,  # one core, busy, at top frequency
        "idle_w_per_core": 0.0,  # an online but idle core
        "leak_w": 0.0,  # all cores online, top voltage
    },
    "static_w": {"": None},  # always-on rails (SoC, DRAM VDDQ, regulators)
    "overlap": {
        "compute_memory": 2.0,  # p-norm order joining compute and memory time (inf = max)
        "launch": 3.0,  # joining GPU time and CPU launch time (async launches)
        "pipeline": 4.0,  # joining training and data loading when num_workers > 0
    },
    "measurement": {
        "jitter": 0.02,  # log-sd of minibatch time
        "spike_prob": 0.01,  # chance a minibatch hits an OS/GC hiccup
        "spike_scale": 0.5,  # mean extra time of a hiccup, relative
        "warmup_factor": 6.0,  # first minibatch after a mode change: x this ...
        "warmup_s": 1.0,  # ... plus this (cuDNN autotuning, allocator)
        "switch_s": 1.0,  # time to apply a mode (sysfs writes, clock relock)
        "reset_s": 5.0,  # time to return to the top settings
        "settle_tau_s": 0.6,  # power approaches its new level with this time constant
        "sensor_rel": 0.006,  # relative sd of one power reading
        "sensor_resolution_w": 0.001,  # readings are whole mW
        "idle_w": None,  # power before the first configuration (default: static_w)
    },
    "deviation": {
        "smooth_time": 0.03,  # log-sd of the smooth, learnable field
        "smooth_power": 0.02,
        "smooth_waves": 8,  # number of random plane waves in the smooth field
        "smooth_wavenumber": 1.0,  # their typical frequency, cycles per unit range
        "cpu_pair_time": 0.03,  # log-sd of the (cores, CPU clock) interaction
        "cpu_pair_power": 0.01,
        "gpu_pair_time": 0.03,  # log-sd of the (GPU clock, EMC clock) interaction
        "gpu_pair_power": 0.01,
        "pair_balanced": 0.25,  # share of the interactions left in balanced modes
        "idio_time_balanced": 0.01,  # log-sd of the unlearnable part, balanced modes
        "idio_time_starved": 0.2,  # ... and fully starved ones
        "idio_power_balanced": 0.005,
        "idio_power_starved": 0.08,
        "starved_ratio": 3.0,  # GPU busy share this many times below the top mode's = starved
    },
}

#: keys that follow from the spec when the twin mapping omits them: key -> (what it is
#: derived from, how). CUDA cores do 2 FP32 FLOP (one FMA) per clock; an SM holds 128 of
#: them on Ampere (parallel width is counted in 128-core units on every architecture);
#: LPDDR moves bus_bits / 8 bytes twice per EMC clock; the V-f knee sits at about a third
#: of the top GPU clock and half the top CPU clock on the catalog Jetsons.
DERIVED: dict[str, tuple[str, Any]] = {
    "gpu.gflops_per_mhz": ("hardware.gpu_cuda_cores", lambda s: 2 * _hw(s, "gpu_cuda_cores") / 1e3),
    "gpu.parallel_width": ("hardware.gpu_cuda_cores", lambda s: _hw(s, "gpu_cuda_cores") / 128),
    "mem.gbps_per_mhz": ("hardware.mem_bus_bits", lambda s: _hw(s, "mem_bus_bits") / 8 * 2 / 1e3),
    "gpu.knee_mhz": ("gpu_mhz", lambda s: 0.35 * max(s.gpu_mhz)),
    "cpu.knee_mhz": ("cpu_mhz", lambda s: 0.5 * max(s.cpu_mhz)),
}


def _hw(spec: DeviceSpec, key: str) -> float:
    if key not in spec.hardware:
        raise KeyError(key)
    return float(spec.hardware[key])


#: keys older specs had and what took their place (a spec with them is refused with this)
RETIRED_KEYS: dict[str, dict[str, str]] = {
    "deviation": dict.fromkeys(
        ("rough_time", "rough_power"),
        "the twin's per-mode deviation no longer has one unstructured 'rough' size; it is "
        "now 'idio_time_balanced', 'idio_time_starved', 'idio_power_balanced' and "
        "'idio_power_starved' (with the cores x CPU and GPU x EMC interactions "
        "'cpu_pair_*', 'gpu_pair_*'), whose defaults apply when they are absent",
    )
}

#: workload ``params`` keys and defaults; ``None`` marks a required key
WORKLOAD_KEYS: dict[str, Any] = {
    "gflop_per_sample": None,  # training FLOPs per sample (about 3x the forward pass)
    "compute_efficiency": 0.35,  # fraction of peak FLOP/s reached at a saturating batch
    "batch_half": 0.25,  # batch (per unit of parallel_width) at half parallel efficiency
    "power_batch_half": None,  # same for switching activity (default: batch_half)
    "mem_mb_per_sample": None,  # DRAM traffic per sample (activations, fwd + bwd)
    "mem_mb_fixed": 0.0,  # DRAM traffic per minibatch (weights, gradients, optimizer)
    "launch_ms": 5.0,  # CPU time per minibatch for kernel launches, at 1 GHz (A78AE)
    "load_ms_per_sample": 0.0,  # CPU time to load and augment one sample, at 1 GHz
    "gpu_activity": 0.8,  # switching activity of the GPU's kernels when busy
    "mem_activity": 1.0,  # scales memory traffic power (row hits vs misses)
    "deviation_scale": 1.0,  # scales the device's deviation amplitudes
}


@dataclass(frozen=True)
class DeviceParams:
    """Validated device physics: flat ``section.key`` floats plus the frequency tables."""

    name: str
    values: Mapping[str, float]
    cores: int
    cpu_range: tuple[float, float]
    gpu_range: tuple[float, float]
    mem_range: tuple[float, float]

    def __getitem__(self, key: str) -> float:
        return self.values[key]


@dataclass(frozen=True)
class WorkloadParams:
    """Validated workload physics plus the loader setting that decides pipelining."""

    name: str
    values: Mapping[str, float]
    num_workers: int

    def __getitem__(self, key: str) -> float:
        return self.values[key]


def _number(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise SpecError(f"{where} must be a number, found {v!r}")
    v = float(v)
    if v != v or v < 0:
        raise SpecError(f"{where} must be a non-negative number, found {v!r}")
    return v


def device_params(spec: DeviceSpec) -> DeviceParams:
    """Read ``spec.twin``; errors name the device and the missing or bad key."""
    raw = spec.twin
    where = f"device {spec.name!r} twin parameters"
    if not isinstance(raw, dict):
        raise SpecError(
            f"device {spec.name!r} has no 'twin' parameters, so the digital twin cannot "
            "simulate it; add a 'twin' mapping to its spec (keys: powertrain/twin/params.py)"
        )
    values: dict[str, float] = {}
    for section, keys in DEVICE_KEYS.items():
        if section == "static_w":
            if "static_w" not in raw:
                raise SpecError(f"{where}: missing 'static_w'")
            values["static_w"] = _number(raw["static_w"], f"{where}: 'static_w'")
            continue
        sub = raw.get(section, {})
        if not isinstance(sub, dict):
            raise SpecError(f"{where}: '{section}' must be a mapping")
        unknown = set(sub) - set(keys)
        retired = sorted(unknown & set(RETIRED_KEYS.get(section, ())))
        if retired:
            raise SpecError(
                f"{where}: remove {', '.join(repr(k) for k in retired)} from '{section}': "
                f"{RETIRED_KEYS[section][retired[0]]}"
            )
        if unknown:
            raise SpecError(f"{where}: unknown key(s) {', '.join(sorted(unknown))} in '{section}'")
        for key, default in keys.items():
            name = f"{section}.{key}"
            if key in sub:
                values[name] = _number(sub[key], f"{where}: '{name}'")
            elif name in DERIVED:
                source, rule = DERIVED[name]
                try:
                    values[name] = float(rule(spec))
                except (KeyError, ValueError):
                    raise SpecError(
                        f"{where}: missing '{name}'; give it, or '{source}' in the spec to "
                        "derive it from (docs/twin.md)"
                    ) from None
            elif default is None and not (section == "measurement" and key == "idle_w"):
                raise SpecError(f"{where}: missing '{name}' (docs/twin.md: how to estimate it)")
            else:
                values[name] = default
    if values["measurement.idle_w"] is None:
        values["measurement.idle_w"] = values["static_w"]
    for dom in ("gpu", "cpu", "mem"):
        if not 0 < values[f"{dom}.v_min"] <= 1:
            raise SpecError(f"{where}: '{dom}.v_min' must be in (0, 1]")
    for key in ("gpu.gflops_per_mhz", "gpu.parallel_width", "mem.gbps_per_mhz", "cpu.perf_per_mhz"):
        if values[key] <= 0:
            raise SpecError(f"{where}: '{key}' must be > 0")
    return DeviceParams(
        name=spec.name,
        values=values,
        cores=spec.cores,
        cpu_range=(min(spec.cpu_mhz), max(spec.cpu_mhz)),
        gpu_range=(min(spec.gpu_mhz), max(spec.gpu_mhz)),
        mem_range=(min(spec.mem_mhz), max(spec.mem_mhz)),
    )


def workload_params(spec: WorkloadSpec, num_workers: int | None = None) -> WorkloadParams:
    """Read ``spec.params``; errors name the workload and the missing or bad key."""
    where = f"workload {spec.name!r} params"
    raw = spec.params
    unknown = set(raw) - set(WORKLOAD_KEYS)
    if unknown:
        raise SpecError(
            f"{where}: unknown key(s) {', '.join(sorted(unknown))}; "
            f"known: {', '.join(WORKLOAD_KEYS)}"
        )
    values: dict[str, float] = {}
    for key, default in WORKLOAD_KEYS.items():
        if key in raw and raw[key] is not None:
            values[key] = _number(raw[key], f"{where}: '{key}'")
        elif default is None and key != "power_batch_half":
            raise SpecError(
                f"{where}: missing '{key}' (the twin needs it to simulate this workload)"
            )
        else:
            values[key] = default
    if values["power_batch_half"] is None:
        values["power_batch_half"] = values["batch_half"]
    if values["gflop_per_sample"] <= 0 or values["compute_efficiency"] <= 0:
        raise SpecError(f"{where}: 'gflop_per_sample' and 'compute_efficiency' must be > 0")
    nw = spec.num_workers if num_workers is None else num_workers
    if isinstance(nw, bool) or not isinstance(nw, int) or nw < 0:
        raise SpecError(f"num_workers must be an integer >= 0, found {nw!r}")
    return WorkloadParams(name=spec.name, values=values, num_workers=nw)
