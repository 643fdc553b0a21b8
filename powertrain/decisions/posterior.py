"""Joint draws of what unmeasured configurations could measure, errors shared by neighbours.

Why: a transferred network is wrong in patches, not pixel by pixel: if it overrates one
mode it overrates the modes next to it. Drawing each configuration independently from
its own spread says that among thousands of them *some* is almost surely much faster
than predicted, so a cap table never looks settled and the measurements chase long
shots. Here the network is the prior mean and its 1-sigma spread the prior scale of a
Gaussian process over the knobs (standardised logs): an error field with a squared
exponential correlation of ``length`` standardised units, conditioned on what the
measured configurations showed (their residuals against the network). Draws come from
random Fourier features with pathwise (Matheron) conditioning: linear in the number of
candidates, so a 4,368-mode grid costs a few milliseconds per draw. ``length = 0``
gives the old independent draws.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: the correlation length in standardised log-knob units (tuned on the tuning set:
#: Orin AGX MobileNetV3 and ResNet-18, docs/decisions.md)
LENGTH = 1.0
#: random Fourier features per draw field
FEATURES = 256
#: what a measured residual may still be off by, in units of the prior spread
NOISE = 0.2


#: how much wider a decision *reports* the spread on a device its reference was not
#: trained on (its picks' expected loss and confidence; the loop keeps the measured
#: spread): a fit, not a check. The factor that made the mean expected loss of
#: pt.decide's cap table equal its mean realised penalty on the tuning devices (Orin
#: Nano, Nano, TX2 NX; Orin AGX reference, budget 50, 2 draws each: 1.41); measuring
#: with it cost every tuning device's median penalty (docs/method-notes.md)
NEW_DEVICE_SPREAD = 1.4
#: how many out-of-sample errors the model's own spread counts as (the prior of the
#: spread's scale): with fewer measured, the spread is mostly the model's
PRIOR_N = 3.0
#: the most sigmas one out-of-sample error counts for: a single odd mode (two cores at
#: 269 MHz, 5.5 sigma over its forecast power) must not widen every spread threefold
CLIP_Z = 2.0


def spread_scale(z: np.ndarray, prior_n: float = PRIOR_N) -> float:
    """How far to trust a model's stated 1-sigma spread, from its out-of-sample errors
    in units of that spread (``z``: what configurations measured against what the model
    predicted for them before they were measured): the root mean square of ``z``,
    shrunk towards 1 as if ``prior_n`` errors of exactly one sigma had been seen, each
    error counting for at most ``CLIP_Z`` sigmas.

    Why: a transfer's spread comes from its k-fold errors over every measured mode, most
    of them far from where the loop measures; on the tuning corpora the errors of the
    configurations it chose were 0.2-0.7 of that spread, so a table drawn from it never
    settles and the loop chases long shots."""
    z = np.asarray(z, float)
    z = np.clip(z[np.isfinite(z)], -CLIP_Z, CLIP_Z)
    return float(np.sqrt((prior_n + np.sum(z * z)) / (prior_n + len(z))))


@dataclass(frozen=True)
class Field:
    """Settings of the error field: correlation ``length`` (0: independent draws),
    ``features`` (random Fourier features) and the measured residuals' ``noise``."""

    length: float = LENGTH
    features: int = FEATURES
    noise: float = NOISE


def knob_space(x: np.ndarray) -> np.ndarray:
    """Configurations as standardised logs of their (positive) knob values."""
    z = np.log(np.clip(np.asarray(x, float), 1e-9, None))
    sd = z.std(axis=0)
    return (z - z.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


def _rbf(a: np.ndarray, b: np.ndarray, length: float) -> np.ndarray:
    d2 = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2 * a @ b.T
    return np.exp(-0.5 * np.clip(d2, 0, None) / length**2)


def field_draws(
    x: np.ndarray,
    known: np.ndarray,
    z_known: np.ndarray,
    draws: int,
    rng: np.random.Generator,
    field: Field = Field(),
) -> np.ndarray:
    """``len(x)`` x ``draws`` standard-normal error draws over the rows of ``x``
    (standardised knobs), correlated by ``field.length`` and conditioned on the values
    ``z_known`` at the rows ``x[known]``."""
    n = len(x)
    if field.length <= 0:
        return rng.standard_normal((n, draws))
    f = int(field.features)
    w = rng.standard_normal((x.shape[1], f)) / field.length
    b = rng.uniform(0.0, 2 * np.pi, f)
    prior = (np.sqrt(2.0 / f) * np.cos(x @ w + b)) @ rng.standard_normal((f, draws))
    if len(known) == 0:
        return prior
    xk = x[known]
    gram = _rbf(xk, xk, field.length) + field.noise**2 * np.eye(len(known))
    eps = field.noise * rng.standard_normal((len(known), draws))
    delta = np.asarray(z_known, float)[:, None] - prior[known] - eps
    return prior + _rbf(x, xk, field.length) @ np.linalg.solve(gram, delta)
