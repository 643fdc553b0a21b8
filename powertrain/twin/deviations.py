"""How a real board departs from the physics, seeded per (seed, device, workload) (docs/twin.md).

Why: a twin that follows its own equations exactly would let any predictor reach ~0 %
error; one that departs by an independent draw per mode makes the true optimum under a
cap a lottery (even an oracle would lose ~10 %), which contradicts the paper (PowerTrain
picked within 0.7 % of the optimum on the real Orin). A board's departures have shape:

* **smooth**: a low-frequency field over the configuration space (cache behaviour,
  thermal drift of leakage), a few per cent, learnable from a few dozen samples;
* **interactions**: one offset per (cores, CPU clock) pair (scheduler placement and the
  governor's reaction to load) and per (GPU clock, EMC clock) pair (contention for DRAM
  between the GPU and the CPU, clock-domain alignment); learnable, but only once each
  pair has been seen, so they need many samples;
* **idiosyncratic**: one draw per configuration that no model can learn (cuDNN kernel
  choice, allocator luck), small (about 1 %) where the machine is balanced and large
  where it is starved: a slow CPU or few cores feeding a fast GPU, or the GPU waiting on
  the lowest EMC clock. Starvation is measured by the physics itself (the GPU's busy
  share relative to the top mode's), so balanced modes, where the time-power Pareto
  front lies, carry little of it.

Every part is a pure function of the configuration values (hashed, not drawn in
sequence), so a mode gets the same deviation whatever other modes are asked with it.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Sequence

import numpy as np


def stable_seed(*parts: object) -> int:
    """A 64-bit seed from any printable parts, identical across runs and platforms
    (Python's ``hash`` is salted per process, so it cannot be used)."""
    text = "\x1f".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def hash_rows(seed: int, *columns: np.ndarray | Sequence[float]) -> np.ndarray:
    """One uint64 per row from ``seed`` and the row's values (rounded to 1e-3)."""
    n = len(np.atleast_1d(columns[0]))
    h = np.full(n, np.uint64(seed & 0xFFFFFFFFFFFFFFFF), dtype=np.uint64)
    for col in columns:
        v = np.rint(np.asarray(col, dtype=float) * 1000.0).astype(np.int64).view(np.uint64)
        h = _splitmix64(h ^ _splitmix64(v))
    return h


def normal_from_hash(h: np.ndarray) -> np.ndarray:
    """Standard normal draws from uint64 hashes (Box-Muller on two derived uniforms)."""
    h2 = _splitmix64(h ^ np.uint64(0xD1B54A32D192ED03))
    u1 = ((h >> np.uint64(11)).astype(np.float64) + 1.0) * 2.0**-53  # (0, 1]
    u2 = (h2 >> np.uint64(11)).astype(np.float64) * 2.0**-53
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)


def uniform_from_hash(h: np.ndarray) -> np.ndarray:
    """Uniform draws in [0, 1) from uint64 hashes."""
    return (h >> np.uint64(11)).astype(np.float64) * 2.0**-53


def rough(seed: int, columns: list[np.ndarray], sigma: float) -> np.ndarray:
    """Per-configuration log-deviation with sd ``sigma``, uniform on +-sigma*sqrt(3).

    Why bounded: the paper's 36x time range equals its MAXN-to-low-mode ratio (3.1 vs
    112 min), so measured extremes are not inflated by outliers; a Gaussian draw over
    4,368 modes would reach +-3.5 sd and stretch every range by ~1.5x.
    """
    if sigma == 0:
        return np.zeros(len(np.atleast_1d(columns[0])))
    u = uniform_from_hash(hash_rows(seed, *columns))
    return sigma * np.sqrt(3.0) * (2.0 * u - 1.0)


def smooth(
    seed: int, x: np.ndarray, sigma: float, waves: int = 8, wavenumber: float = 1.0
) -> np.ndarray:
    """Smooth log-deviation over normalised coordinates ``x`` (n, d) in about [0, 1]:
    a sum of ``waves`` random plane waves scaled so its sd is ``sigma``."""
    n, dim = x.shape
    if sigma == 0 or waves < 1:
        return np.zeros(n)
    rng = np.random.default_rng(seed)
    k = rng.normal(0.0, wavenumber, size=(int(waves), dim)) * 2.0 * np.pi
    phase = rng.uniform(0.0, 2.0 * np.pi, size=int(waves))
    # an explicit product-sum, not x @ k.T: BLAS may round differently with the row
    # count, and a mode must get the same value whatever it is evaluated with
    arg = (x[:, None, :] * k[None, :, :]).sum(axis=2) + phase
    field = np.cos(arg).sum(axis=1)
    return sigma * np.sqrt(2.0 / waves) * field


def pair_offsets(seed: int, sigma: float, *columns: np.ndarray) -> np.ndarray:
    """One bounded offset (sd ``sigma``) per distinct combination of ``columns``."""
    if sigma == 0:
        return np.zeros(len(np.atleast_1d(columns[0])))
    u = uniform_from_hash(hash_rows(seed, *columns))
    return sigma * np.sqrt(3.0) * (2.0 * u - 1.0)


def starvation(
    phys: dict[str, np.ndarray], busy_top: float | np.ndarray, ratio: float
) -> np.ndarray:
    """0 where the GPU is as busy as in the top mode (balanced), rising to 1 where its
    busy share has fallen ``ratio``-fold (starved by the CPU, the loader or DRAM)."""
    busy = np.maximum(phys["gpu_busy"], 1e-9)
    if ratio <= 1:
        return np.zeros_like(busy)
    return np.clip(np.log(busy_top / busy) / np.log(ratio), 0.0, 1.0)


def log_deviations(
    dev, wl, seeds: dict[str, int], cols: list[np.ndarray], x: np.ndarray, starved: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Log-deviations of time and of power for the configurations ``cols`` (cores, cpu,
    gpu, mem, batch), their normalised coordinates ``x`` and their starvation in [0, 1]."""
    d = dev
    scale = wl["deviation_scale"]
    waves, k = int(d["deviation.smooth_waves"]), d["deviation.smooth_wavenumber"]
    out = []
    for q in ("time", "power"):
        base = seeds[f"smooth_{q}"]
        dv = smooth(base, x, scale * d[f"deviation.smooth_{q}"], waves, k)
        s_cpu = stable_seed(base, "cores x cpu")
        s_gpu = stable_seed(base, "gpu x mem")
        b = cols[4]
        # interactions act through the unbalanced part of the pipeline: full size where
        # the GPU is starved, ``pair_balanced`` of it in balanced modes
        share = d["deviation.pair_balanced"] + (1.0 - d["deviation.pair_balanced"]) * starved
        cpu_sd, gpu_sd = (scale * d[f"deviation.{k}_pair_{q}"] for k in ("cpu", "gpu"))
        dv = dv + share * pair_offsets(s_cpu, cpu_sd, cols[0], cols[1], b)
        dv = dv + share * pair_offsets(s_gpu, gpu_sd, cols[2], cols[3], b)
        lo, hi = d[f"deviation.idio_{q}_balanced"], d[f"deviation.idio_{q}_starved"]
        dv = dv + rough(seeds[f"rough_{q}"], cols, 1.0) * scale * (lo + (hi - lo) * starved)
        out.append(dv)
    return out[0], out[1]


def board_starvation(dev, wl, cols: list[np.ndarray], phys: dict[str, np.ndarray]) -> np.ndarray:
    """Starvation of each configuration against the top mode at the same batch size."""
    from . import physics

    top = physics.minibatch(
        dev, wl, dev.cores, dev.cpu_range[1], dev.gpu_range[1], dev.mem_range[1], cols[4]
    )
    return starvation(phys, top["gpu_busy"], dev["deviation.starved_ratio"])


def learnable_log_deviations(
    dev, wl, seeds: dict[str, int], cols: list[np.ndarray], x: np.ndarray, starved: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The smooth and interaction parts only: what an oracle with unlimited samples knows."""
    idio = {
        f"deviation.idio_{q}_{w}": 0.0 for q in ("time", "power") for w in ("balanced", "starved")
    }
    no_idio = replace(dev, values={**dev.values, **idio})
    return log_deviations(no_idio, wl, seeds, cols, x, starved)


def oracle_expected(twin, modes, batch_size: int | None = None):
    """``twin.expected`` without the idiosyncratic part: physics plus every learnable
    deviation, i.e. the best any model could know about the board (the benchmarks' oracle)."""
    from . import physics

    df = twin._frame(modes, batch_size)
    cols = twin._arrays(df)
    ph = physics.minibatch(twin.dev, twin.wl, *cols, tpc_frac=twin._tpc_frac(df))
    starved = board_starvation(twin.dev, twin.wl, cols, ph)
    dt, dp = learnable_log_deviations(
        twin.dev, twin.wl, twin._seeds, cols, twin._coords(cols), starved
    )
    return df.assign(time_ms=ph["time_ms"] * np.exp(dt), power_w=ph["power_w"] * np.exp(dp))
