"""From raw minibatch times and power samples to one schema row per configuration.

Why: the paper's cleaning rules (discard the warm-up minibatch, wait for power to settle
after a mode change, keep only clean minibatches, replicate power samples to the
minibatch count) live here, once, for every backend.
"""

from __future__ import annotations

import numpy as np


def stable_since(samples: np.ndarray, window: int = 3, rel_tol: float = 0.03) -> float | None:
    """Time of the first sample of the first window of ``window`` consecutive power
    readings whose spread (max - min) is within ``rel_tol`` of their mean; None if none.

    The boards' power takes 2-3 s to settle after a mode change (PowerTrain §2.5).
    """
    samples = np.asarray(samples, dtype=float).reshape(-1, 2)
    if len(samples) < window:
        return None
    w = samples[:, 1]
    for i in range(len(w) - window + 1):
        seg = w[i : i + window]
        m = seg.mean()
        if m > 0 and (seg.max() - seg.min()) <= rel_tol * m:
            return float(samples[i, 0])
    return None


def summarise(times_ms: np.ndarray, power_w: np.ndarray) -> dict:
    """Median time, mean power and their spreads for the clean part of one configuration.

    A configuration whose clean window holds no power sample gets NaN power and
    ``n_power_samples`` = 0, never a zero average.
    """
    times_ms = np.asarray(times_ms, dtype=float)
    power_w = np.asarray(power_w, dtype=float)
    return {
        "time_ms": float(np.median(times_ms)),
        "time_ms_std": float(times_ms.std(ddof=1)) if len(times_ms) > 1 else 0.0,
        "power_w": float(power_w.mean()) if len(power_w) else float("nan"),
        "power_w_std": float(power_w.std(ddof=1)) if len(power_w) > 1 else 0.0,
        "n_minibatches": int(len(times_ms)),
        "n_power_samples": int(len(power_w)),
    }


def power_per_minibatch(starts: np.ndarray, ends: np.ndarray, samples: np.ndarray) -> np.ndarray:
    """One power value per minibatch: the mean of the samples taken during it, else the
    sample nearest in time (sample-and-hold of a 1 Hz sensor).

    Why: the paper pairs every clean minibatch with a power reading, replicating the
    slower sensor's samples to the minibatch count, so power is weighted like time.
    Returns NaN for every minibatch when ``samples`` is empty.
    """
    starts = np.asarray(starts, dtype=float)
    ends = np.asarray(ends, dtype=float)
    samples = np.asarray(samples, dtype=float).reshape(-1, 2)
    if not len(samples):
        return np.full(len(starts), np.nan)
    t, w = samples[:, 0], samples[:, 1]
    out = np.empty(len(starts))
    for i, (s, e) in enumerate(zip(starts, ends)):
        inside = (t >= s) & (t < e)
        if inside.any():
            out[i] = w[inside].mean()
        else:
            out[i] = w[np.abs(t - 0.5 * (s + e)).argmin()]
    return out


def summarise_window(
    starts: np.ndarray, ends: np.ndarray, times_ms: np.ndarray, samples: np.ndarray
) -> dict:
    """Like :func:`summarise`, with power replicated to equal counts over the minibatches.

    ``samples`` must already be restricted to the clean window. ``power_w_std`` is the
    spread of the sensor's own readings; ``n_power_samples`` counts distinct readings.
    """
    samples = np.asarray(samples, dtype=float).reshape(-1, 2)
    row = summarise(times_ms, samples[:, 1])
    if len(samples):
        row["power_w"] = float(power_per_minibatch(starts, ends, samples).mean())
    return row
