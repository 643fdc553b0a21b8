"""Time and power of one training minibatch from first principles (vectorised).

Why: the twin must behave like a board for reasons a Jetson user recognises, not like a
lookup table (docs/twin.md):

* GPU compute time ~ FLOPs / (f_gpu x parallel efficiency), efficiency b/(b + b_half)
  rising with the batch; memory time ~ bytes / f_mem; the two joined by a p-norm (a
  roofline whose corner is rounded because kernels differ in intensity);
* the CPU launches kernels asynchronously (~ 1/f_cpu), so launch time overlaps GPU time;
  a fraction of all CPU work stalls on DRAM and scales with 1/f_mem instead;
* data loading costs CPU time per sample (~ batch / f_cpu) spread over the DataLoader
  workers that fit on the online cores; with num_workers > 0 it is pipelined with
  training, with num_workers = 0 the main process does both in series (YOLO in
  PowerTrain §2.3, footnote 6);
* power = static + sum over rails of C V(f)^2 f x utilisation + leakage(V), with a V-f
  curve per domain that is flat below a knee and rises linearly above it.

All inputs are numpy arrays (broadcast together); every function here is pure.
"""

from __future__ import annotations

import numpy as np

from .params import DeviceParams, WorkloadParams


def pnorm(a: np.ndarray, b: np.ndarray, p: float) -> np.ndarray:
    """Soft maximum of two non-negative times: (a^p + b^p)^(1/p); p = inf is max(a, b).

    Why: overlapped stages never take less than the slower one nor more than the sum.
    """
    if not np.isfinite(p):
        return np.maximum(a, b)
    m = np.maximum(np.maximum(a, b), 1e-300)
    return m * ((a / m) ** p + (b / m) ** p) ** (1.0 / p)


def voltage(f: np.ndarray, v_min: float, knee: float, f_max: float) -> np.ndarray:
    """Relative supply voltage: ``v_min`` up to the knee, rising linearly to 1 at ``f_max``."""
    if f_max <= knee:
        return np.full_like(f, v_min, dtype=float)
    rise = np.clip((f - knee) / (f_max - knee), 0.0, None)
    return v_min + (1.0 - v_min) * rise


def minibatch(
    dev: DeviceParams,
    wl: WorkloadParams,
    cores: np.ndarray,
    cpu_mhz: np.ndarray,
    gpu_mhz: np.ndarray,
    mem_mhz: np.ndarray,
    batch: np.ndarray,
    *,
    tpc_frac: np.ndarray | float = 1.0,
) -> dict[str, np.ndarray]:
    """Time (ms) and mean power (W) of one minibatch, plus the components behind them.

    ``tpc_frac``: the share of the GPU's TPCs powered (an nvpmodel preset's
    ``TPC_PG_MASK``; 1 in every custom mode): the GPU's FLOP/s, the batch that fills it,
    its switching power and its leakage all scale with it; memory and CPU do not.
    """
    cores, cpu, gpu, mem, b, tpc = np.broadcast_arrays(
        *(np.asarray(x, dtype=float) for x in (cores, cpu_mhz, gpu_mhz, mem_mhz, batch, tpc_frac))
    )
    d, w = dev, wl
    workers = float(w.num_workers)

    # --- time -------------------------------------------------------------------------
    b_half = w["batch_half"] * d["gpu.parallel_width"] * tpc
    eff = b / (b + b_half)
    peak_gflops = (
        d["gpu.gflops_per_mhz"] * gpu * d["gpu.efficiency"] * w["compute_efficiency"] * tpc
    )
    t_compute = 1e3 * w["gflop_per_sample"] * b / (peak_gflops * eff)
    bandwidth = d["mem.gbps_per_mhz"] * mem * d["mem.efficiency"]  # GB/s
    traffic_mb = w["mem_mb_fixed"] + w["mem_mb_per_sample"] * b
    t_memory = traffic_mb / bandwidth  # MB / (GB/s) = ms
    t_gpu = pnorm(t_compute, t_memory, d["overlap.compute_memory"])

    # CPU work is given in ms at 1 GHz; part of it stalls on DRAM and scales with f_mem
    stall = d["cpu.mem_stall"]
    top_speed = dev.cpu_range[1] * d["cpu.perf_per_mhz"] / 1e3
    ms_per_work = (1.0 - stall) / (cpu * d["cpu.perf_per_mhz"] / 1e3) + stall / top_speed * (
        dev.mem_range[1] / mem
    )
    # the main process shares the online cores with the loader workers
    main_share = np.minimum(1.0, cores / (1.0 + workers))
    t_launch = w["launch_ms"] * ms_per_work / main_share
    t_train = pnorm(t_gpu, t_launch, d["overlap.launch"])
    load_work = w["load_ms_per_sample"] * b * ms_per_work  # ms on one core
    if workers > 0:
        parallel = np.minimum(workers, np.maximum(cores - 1.0, 0.5))
        t_load = load_work / parallel
        t_mb = pnorm(t_train, t_load, d["overlap.pipeline"])
    else:
        t_load = load_work
        t_mb = t_train + t_load

    # --- power ------------------------------------------------------------------------
    # Each dynamic term is (energy switched per minibatch) / (minibatch time) or a
    # clocked floor that depends on its own clock only. The energy per minibatch depends
    # only on the work and its own rail's voltage, never on the other clocks, so with
    # time monotone every term, and the sum, is monotone in every knob (no wrong-way
    # steps). A GPU stalled on DRAM or starved by the CPU switches only its clock tree
    # (``gpu.idle_frac`` of its dynamic power), not its ALUs.
    v_gpu = voltage(gpu, d["gpu.v_min"], d["gpu.knee_mhz"], dev.gpu_range[1])
    v_cpu = voltage(cpu, d["cpu.v_min"], d["cpu.knee_mhz"], dev.cpu_range[1])
    v_mem = voltage(mem, d["mem.v_min"], d["mem.knee_mhz"], dev.mem_range[1])

    gpu_busy = t_compute / t_mb  # ALUs switching (the rest of the time: stalled or idle)
    p_half = w["power_batch_half"] * d["gpu.parallel_width"] * tpc
    activity = w["gpu_activity"] * b / (b + p_half)
    idle = d["gpu.idle_frac"]
    f_gpu = gpu / dev.gpu_range[1]
    p_gpu = d["gpu.dyn_w"] * v_gpu**2 * f_gpu * (idle + (1.0 - idle) * activity * gpu_busy)
    p_gpu = p_gpu * tpc  # a gated TPC neither switches nor leaks
    p_gpu_leak = d["gpu.leak_w"] * v_gpu**2 * tpc

    # DRAM: refresh/IO background grows with the EMC clock; traffic energy per minibatch
    # is fixed by the bytes moved, so its power is that energy over the minibatch time
    mem_busy = t_memory / t_mb * w["mem_activity"]
    bg = d["mem.background"]
    p_mem = d["mem.dyn_w"] * v_mem**2 * (mem / dev.mem_range[1]) * (bg + (1 - bg) * mem_busy)
    p_mem_leak = d["mem.leak_w"] * v_mem**2

    # main process: launching, then spinning in cudaDeviceSynchronize -> always busy;
    # loader workers switch only for the non-stalled part of their work (a core waiting
    # on DRAM is clock-gated down to its idle power)
    f_cpu = cpu / dev.cpu_range[1]
    cpu_dyn = d["cpu.dyn_w_per_core"] * v_cpu**2
    p_main = cpu_dyn * f_cpu * main_share
    if workers > 0:
        # core-ms of non-stalled work at the top clock, per ms of minibatch
        load_busy = w["load_ms_per_sample"] * b * (1.0 - stall) / top_speed / t_mb
        p_load = cpu_dyn * load_busy
    else:
        p_load = np.zeros_like(p_main)  # the main process loads: already counted
    p_cpu = p_main + p_load + d["cpu.idle_w_per_core"] * cores
    p_cpu_leak = d["cpu.leak_w"] * v_cpu**2 * cores / dev.cores

    power = d["static_w"] + p_gpu + p_gpu_leak + p_mem + p_mem_leak + p_cpu + p_cpu_leak
    return {
        "time_ms": t_mb,
        "power_w": power,
        "t_compute_ms": t_compute,
        "t_memory_ms": t_memory,
        "t_gpu_ms": t_gpu,
        "t_launch_ms": t_launch,
        "t_load_ms": t_load,
        "gpu_busy": gpu_busy,
        "p_gpu_w": p_gpu + p_gpu_leak,
        "p_mem_w": p_mem + p_mem_leak,
        "p_cpu_w": p_cpu + p_cpu_leak,
    }
