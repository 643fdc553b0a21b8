"""A smooth analytic stand-in for a profiling corpus, for tests and offline demos.

Why: unit tests must not depend on the digital twin (another module, slower), yet need
data with the right shape -- time ~ 1/frequency, power ~ f*V^2, a batch-size effect,
workload-specific mixes -- so transfer has something real to learn.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from powertrain.schema import MODE_COLUMNS

#: per-workload mixes of (gpu, memory, cpu) work and power scale; any floats work
WORKLOADS = {
    "a": (1.0, 0.35, 0.25, 1.0),
    "b": (0.55, 0.5, 0.45, 0.8),
    "c": (0.8, 0.2, 0.9, 0.9),
}


def synthetic_corpus(
    modes: pd.DataFrame,
    workload: str | tuple = "a",
    batch_size: int = 16,
    noise: float = 0.03,
    seed: int = 0,
) -> pd.DataFrame:
    """``modes`` plus ``batch_size``, ``time_ms`` and ``power_w`` from a closed form + noise."""
    g, m, c, p = WORKLOADS[workload] if isinstance(workload, str) else workload
    df = modes[list(MODE_COLUMNS)].reset_index(drop=True).copy()
    df["batch_size"] = batch_size
    rng = np.random.default_rng(seed)
    cores = df["cores"].to_numpy(float)
    cpu, gpu, mem = (df[k].to_numpy(float) / 1000 for k in ("cpu_mhz", "gpu_mhz", "mem_mhz"))
    b = batch_size / 16
    t_gpu = 60 * g * b**0.85 / gpu
    t_mem = 25 * m * b / mem
    t_cpu = 30 * c / (cpu * np.minimum(cores, 4) ** 0.8)
    time_ms = np.maximum(t_gpu + t_mem, t_cpu) + 0.2 * np.minimum(t_gpu + t_mem, t_cpu)
    util = (t_gpu + t_mem) / time_ms
    volt = 0.6 + 0.4 * np.maximum(gpu - 0.6, 0)
    power_w = 4 + p * (14 * gpu * volt**2 * util + 3 * mem + 0.9 * cores * cpu * (t_cpu / time_ms))
    df["time_ms"] = time_ms * (1 + noise * rng.standard_normal(len(df)))
    df["power_w"] = power_w * (1 + noise / 2 * rng.standard_normal(len(df)))
    return df
