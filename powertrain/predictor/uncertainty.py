"""Predictive uncertainty from a last-layer Laplace approximation.

Why this and not an ensemble or MC-dropout: both cost several forward passes of the
256-128-64 body per row, and predicting 108,576 configurations must stay well under
0.5 s on two cores. Treating the output layer as Bayesian linear regression on the last
hidden features costs one 65x65 quadratic form per row, is deterministic (so reloaded
models give bit-identical uncertainty too), and grows away from the profiled modes,
which is what a safety margin needs. The noise term is the model's own error on rows it
was not trained on (validation rows), so the std is on the scale of the real error.
"""

from __future__ import annotations

import numpy as np
import torch

#: prior precision of the output weights, relative to the noise (ridge strength)
PRIOR_PRECISION = 1.0


def _augment(phi: torch.Tensor) -> torch.Tensor:
    return torch.cat([phi.double(), torch.ones(len(phi), 1, dtype=torch.float64)], dim=1)


def posterior_cov(phi: torch.Tensor, noise_var: float) -> torch.Tensor:
    """Covariance of the output layer's (weights, bias) given training features ``phi``."""
    a = _augment(phi)
    precision = a.T @ a + PRIOR_PRECISION * torch.eye(a.shape[1], dtype=torch.float64)
    return (noise_var * torch.linalg.inv(precision)).contiguous()


def predictive_var(phi: torch.Tensor, cov: torch.Tensor, noise_var: float) -> np.ndarray:
    """Noise + parameter variance of the (standardised) output for each row of ``phi``."""
    return variance_from(QuadForm(cov)(phi), cov, noise_var)


class QuadForm:
    """``[phi, 1] C [phi, 1]^T`` without its constant term, per row, in float32.

    Expanded into blocks and evaluated with one ``addmm``: a float64 version with the
    bias column appended took longer than the network itself on 108k rows. Called on
    one chunk of rows at a time (:func:`~powertrain.predictor.mlp.predict_with`), while
    the network's activations are still in cache.
    """

    def __init__(self, cov: torch.Tensor):
        k = cov.shape[0] - 1
        self.c11 = cov[:k, :k].float().contiguous()  # same layout after reload = same bits
        self.c12 = 2 * cov[:k, k].float()
        self._buf = torch.empty(0, k)

    def __call__(self, phi: torch.Tensor) -> torch.Tensor:
        if self._buf.shape[0] < len(phi):
            self._buf = torch.empty(len(phi), self.c11.shape[0])
        u = torch.addmm(self.c12, phi, self.c11, out=self._buf[: len(phi)])
        return u.mul_(phi).sum(dim=1)


def variance_from(quad: torch.Tensor, cov: torch.Tensor, noise_var: float) -> np.ndarray:
    """Noise + parameter variance from :class:`QuadForm`'s per-row values."""
    k = cov.shape[0] - 1
    return (noise_var + (quad.double() + float(cov[k, k])).clamp_min(0)).numpy()


def noise_variance(residuals_val: np.ndarray, residuals_train: np.ndarray) -> float:
    """Mean squared error on held-out rows; training rows only when there are none.

    With a handful of validation rows the estimate is noisy, so it never goes below the
    training error (which a flexible net drives towards zero, hence the max).
    """
    train = float(np.mean(np.square(residuals_train))) if len(residuals_train) else 0.0
    if len(residuals_val) == 0:
        return max(train, 1e-12)
    return max(float(np.mean(np.square(residuals_val))), train, 1e-12)
