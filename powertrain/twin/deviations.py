"""The two seeded departures of a real board from the physics (DESIGN.md).

Why: a twin that follows its own equations exactly would let any predictor reach ~0 %
error, and every accuracy figure measured on it would be meaningless. Real boards
deviate in two ways, and the twin has both, seeded per (seed, device, workload):

* **smooth**: a low-frequency multiplicative field over the normalised configuration
  space (unmodelled effects such as cache behaviour or thermal drift of leakage), a few
  per cent, that a model can learn given enough samples;
* **rough**: an independent multiplicative draw per configuration (kernel selection by
  cuDNN's autotuner, clock-domain alignment, allocator luck), that no model can learn.

Both are pure functions of the configuration values (hashed, not drawn in sequence),
so a mode gets the same deviation whatever other modes are asked about with it.
"""

from __future__ import annotations

import hashlib

import numpy as np

_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


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


def hash_rows(seed: int, *columns: np.ndarray) -> np.ndarray:
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
