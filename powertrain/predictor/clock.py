"""Time and power of a computation at every locked GPU clock, from a few measured clocks.

Why a physics-shaped model and not a network: at a locked SM clock f, a computation's
time is ``a + b / f_eff(f)`` -- a memory-bound part that the clock does not speed up and
a compute-bound part that it does, where ``f_eff`` is the clock the GPU really runs at (a
power cap holds it below the lock at the top clocks) -- and its power is
``static + c * f_eff * V(f_eff)**2``. Every computation on one GPU shares ``f_eff(f)``
and the voltage curve ``V``; only ``a``, ``b``, ``static`` and ``c`` (memory-boundedness
and activity) are its own. So the curve of one fully profiled *reference* computation
carries the GPU's shape, and a target computation is an affine map of it::

    time_target(f)  = alpha_t + beta_t * time_reference(f)
    power_target(f) = alpha_p + beta_p * power_reference(f)

two constants per target fitted by least squares on the k measured clocks. The
reference's measured curve (not a smoothed one) is used on purpose: on the Perseus A40
sweeps the per-clock deviations from a smooth curve are shared by all computations of a
GPU, so a smooth prior would throw information away (docs/gpu-clocks.md has the
figures). With the k clocks nearly equal in the reference (all under the power cap, say)
the slope is not identified and the map falls back to a pure scale (``alpha = 0``); a
non-positive slope, which no physics allows, does too, and so does a fit that would
predict a value <= 0 anywhere on the reference's clocks (an ill-conditioned fit: a
warning says so), so a prediction is never a negative time or power.
"""

from __future__ import annotations

import warnings
from typing import Sequence

import numpy as np
import pandas as pd

from ..errors import DataError
from ..schema import shown_columns

#: a reference spread (std / mean over the k clocks) below this identifies no slope
MIN_SPREAD = 1e-3


def _column(df: pd.DataFrame, col: str, where: str) -> np.ndarray:
    if col not in df.columns:
        raise DataError(f"{where}: no column {col!r} (columns: {shown_columns(df.columns)})")
    values = pd.to_numeric(df[col], errors="coerce").to_numpy(float)
    bad = np.flatnonzero(~(np.isfinite(values) & (values > 0)))
    if bad.size:
        raise DataError(f"{where}: row {bad[0] + 1}, column {col!r}: {df[col].iloc[bad[0]]!r}")
    return values


def affine_map(
    ref_at_samples: np.ndarray, y: np.ndarray, ref_range: np.ndarray | None = None
) -> tuple[float, float]:
    """``(alpha, beta)`` with ``y ~ alpha + beta * ref``; a pure scale when the slope is
    not identified or not positive, or when the map would give a value <= 0 for a
    reference value in ``ref_range`` (all the reference's values: where it predicts)."""
    scale = float(np.mean(y / ref_at_samples))
    if len(y) < 2 or np.std(ref_at_samples) < MIN_SPREAD * np.mean(ref_at_samples):
        return 0.0, scale
    beta, alpha = np.polyfit(ref_at_samples, y, 1)
    if not beta > 0:
        return 0.0, scale
    if ref_range is not None and not np.all(alpha + beta * ref_range > 0):
        warnings.warn(
            f"the fitted map ({alpha:.3g} + {beta:.3g} x reference) would predict values <= 0 "
            "at some of the reference's clocks (the measured clocks barely differ in the "
            "reference): a pure scale is used instead; measure clocks further apart",
            RuntimeWarning,
            stacklevel=3,
        )
        return 0.0, scale
    return float(alpha), float(beta)


class ClockTransfer:
    """A target computation's time and power at every clock of a profiled reference.

    Parameters
    ----------
    reference : DataFrame
        The reference computation measured at many clocks: ``clock`` and ``targets``
        columns (one row per clock).
    clock : str
        The clock column (``gpu_mhz``: the locked SM clock, MHz).
    targets : sequence of str
        The columns to predict.

    Examples
    --------
    >>> import pandas as pd
    >>> ref = pd.DataFrame({"gpu_mhz": [900.0, 1200.0, 1500.0],
    ...                     "time_ms": [150.0, 125.0, 115.0], "power_w": [180.0, 220.0, 290.0]})
    >>> got = pd.DataFrame({"gpu_mhz": [900.0, 1500.0],
    ...                     "time_ms": [300.0, 230.0], "power_w": [170.0, 270.0]})
    >>> ClockTransfer(ref).fit(got).predict(pd.DataFrame({"gpu_mhz": [1200.0]})).round(1)
       time_ms  power_w
    0    250.0    206.4
    """

    def __init__(
        self,
        reference: pd.DataFrame,
        clock: str = "gpu_mhz",
        targets: Sequence[str] = ("time_ms", "power_w"),
    ):
        self.reference = reference
        self.clock = clock
        self.targets = targets

    def _reference_at(self, clocks: np.ndarray, target: str) -> np.ndarray:
        """The reference's measured value at each clock (linear between its clocks)."""
        ref = self.reference.groupby(self.clock)[target].mean().sort_index()
        f, v = ref.index.to_numpy(float), ref.to_numpy(float)
        outside = (clocks < f[0]) | (clocks > f[-1])
        if outside.any():
            warnings.warn(
                f"clock(s) {', '.join(f'{c:g}' for c in clocks[outside][:5])} MHz are outside "
                f"the reference's {f[0]:g}..{f[-1]:g} MHz: its end value is used",
                RuntimeWarning,
                stacklevel=3,
            )
        return np.interp(clocks, f, v)

    def _targets(self) -> tuple[str, ...]:
        """The target columns: one name given as a string is one target, not letters."""
        targets = (self.targets,) if isinstance(self.targets, str) else tuple(self.targets)
        if not targets or not all(isinstance(t, str) for t in targets):
            raise DataError(
                f"targets must name the columns to predict, e.g. ('time_ms', 'power_w'); "
                f"got {self.targets!r}"
            )
        return targets

    def _check_reference(self) -> None:
        if not isinstance(self.reference, pd.DataFrame) or self.reference.empty:
            raise DataError("reference: the table has no rows; give the reference measured "
                            f"at several {self.clock} values")  # fmt: skip
        for col in (self.clock, *self._targets()):
            _column(self.reference, col, "reference")
        n = self.reference[self.clock].nunique()
        if n < 2:
            raise DataError(
                f"reference: measured at one {self.clock} only "
                f"({float(self.reference[self.clock].iloc[0]):g}); it carries no clock curve: "
                f"give it at 2 or more {self.clock} values"
            )

    def fit(self, X: pd.DataFrame, y: object = None) -> ClockTransfer:
        """Fit ``alpha``, ``beta`` per target on the measured clocks in ``X``."""
        self._check_reference()
        clocks = _column(X, self.clock, "samples")
        if len(np.unique(clocks)) < 2:
            raise DataError(f"samples: give at least 2 distinct {self.clock} values")
        self.coef_ = {}
        for t in self._targets():
            everywhere = self.reference.groupby(self.clock)[t].mean().to_numpy(float)
            ref = self._reference_at(clocks, t)
            self.coef_[t] = affine_map(ref, _column(X, t, "samples"), everywhere)
        return self

    def predict(self, X: pd.DataFrame) -> pd.DataFrame:
        """Each target at the clocks of ``X`` (a frame with the clock column)."""
        if not hasattr(self, "coef_"):
            raise DataError("this ClockTransfer is not fitted: call fit(samples) first")
        clocks = _column(X, self.clock, "X")
        out = {}
        for t in self.coef_:
            alpha, beta = self.coef_[t]
            out[t] = alpha + beta * self._reference_at(clocks, t)
        return pd.DataFrame(out, index=X.index)
