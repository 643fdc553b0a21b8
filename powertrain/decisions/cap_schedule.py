"""The power cap over training time: steps read from a file or a callback asked before
every minibatch.

Why: :func:`~powertrain.decisions.cap_following.follow` and the Tuner both ask "what is
the cap now?"; one checked schedule answers both, and a malformed step is named by its
row before training starts.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..errors import DataError
from ..schema import check_columns, read_csv
from .settings import checked_cap

__all__ = ["CapSchedule"]


class CapSchedule:
    """The power cap over training time, for :func:`follow`.

    Parameters
    ----------
    steps : sequence of (float, float), optional
        ``(t_s, power_cap_w)`` pairs: the cap from ``t_s`` seconds after the start on
        (``from_csv`` reads them from a file).
    callback : callable, optional
        ``(elapsed_s, minibatch) -> watts``, asked before every minibatch. Give either
        ``steps`` or ``callback``.
    """

    def __init__(
        self,
        steps: Sequence[tuple[float, float]] | None = None,
        callback: Callable[[float, int], float] | None = None,
    ):
        if (steps is None) == (callback is None):
            raise DataError("CapSchedule: give either steps or a callback")
        self.callback = callback
        self.steps: list[tuple[float, float]] = []
        if steps is not None:
            self.steps = _check_steps(steps)

    @classmethod
    def from_csv(cls, path: str | Path) -> CapSchedule:
        """A schedule file with columns ``t_s`` and ``power_cap_w``."""
        df = check_columns(
            read_csv(path, "cap schedule"),
            ["t_s", "power_cap_w"],
            source=str(path),
            nonnegative=["t_s"],
            positive=["power_cap_w"],
        )
        try:
            return cls(steps=list(zip(df["t_s"], df["power_cap_w"])))
        except DataError as e:  # name the file: its rows are the steps
            raise DataError(f"{path}: {str(e).replace('step', 'row')}") from None

    def __call__(self, elapsed_s: float, minibatch: int = 0) -> float:
        if self.callback is not None:
            return checked_cap(self.callback(elapsed_s, minibatch), elapsed_s)
        times = [t for t, _ in self.steps]
        return self.steps[int(np.searchsorted(times, elapsed_s, side="right")) - 1][1]

    def caps(self) -> list[float]:
        """The distinct caps of a step schedule (what to decide for ahead of time)."""
        return sorted({w for _, w in self.steps})


def _check_steps(steps: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The steps as sorted ``(t_s, W)`` pairs; a malformed step is named by its index, and
    two caps at the same instant are refused (a power limit must not be ambiguous)."""
    out: list[tuple[float, float]] = []
    for i, step in enumerate(steps):
        try:
            t, w = step
            t, w = float(t), float(w)
        except (TypeError, ValueError):
            raise DataError(
                f"CapSchedule: step {i + 1}: {step!r} must be a pair (t_s, power_cap_w) of numbers"
            ) from None
        if not (math.isfinite(t) and t >= 0 and math.isfinite(w) and w > 0):
            raise DataError(f"CapSchedule: step {i + 1}: ({t!r}, {w!r}) needs t_s >= 0, cap > 0")
        same = [j for j, (u, _) in enumerate(out) if u == t]
        if same:
            raise DataError(
                f"CapSchedule: steps {same[0] + 1} and {i + 1} both start at t_s = {t:g} "
                f"({out[same[0]][1]:g} W and {w:g} W): give one cap per instant"
            )
        out.append((t, w))
    out.sort()
    if not out or out[0][0] > 0:
        raise DataError("CapSchedule: the first step must start at t_s = 0")
    return out
