"""The one small base class every strategy implements, and the start most of them share.

A sampler answers three questions about a :class:`~powertrain.decisions.study.Study`:
where to start (:meth:`Sampler.start`, before any model), where the study stands under
each cap (:meth:`Sampler.assess`, read by the
:class:`~powertrain.decisions.terminator.Terminator`), and what to measure next
(:meth:`Sampler.choose`). It keeps no state of its own between calls: the study holds
the history, so the same sampler serves ``decide``, the Tuner and the cap controller.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pandas as pd

from ..candidates import power_spread
from ..terminator import Standing

if TYPE_CHECKING:  # pragma: no cover
    from ..study import Study


class Sampler(ABC):
    """A strategy for what to measure. Subclasses set ``name`` (its registry name:
    decide's ``method``), ``stop_rule`` (the terminator's rule it is judged by:
    "settled", "stable" or "budget") and ``uses_model`` (False: the study does not
    transfer the reference for it), and implement :meth:`assess` and :meth:`choose`."""

    name: str = ""
    stop_rule: str = "settled"
    uses_model: bool = True

    def start(self, study: Study, free: np.ndarray, need: int) -> tuple[np.ndarray, str]:
        """Positions into ``free`` (the unmeasured candidates) of ``need`` configurations
        to measure before the first transfer, and why.

        Where the reference was trained on the board's device, its power ranking holds,
        so the start is one random configuration from each of equal bins of the
        candidates ordered by predicted power: the cap table spans the power axis, and a
        transfer that has seen its whole length ranks the configurations near every cap.
        On another device, where the time model must be re-learnt, the start is
        stratified over the device's ``stratify_by`` knobs instead. Chosen on the tuning
        sets: on the same device the spread start was ahead on every figure, across
        devices behind on the Xavier AGX (docs/decisions.md)."""
        if trained_on(study.reference, study.device):
            power = np.zeros(0)
            if need and free.size:
                rows = study.cands[list(study.inputs)].iloc[free]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # extrapolation: it only ranks the start
                    power = study.reference.predict(rows)["power_w"].to_numpy(float)
            return power_spread(power, need, study.rng), (
                "start spread over the reference's predicted power"
            )
        keys = strata(study.device, study.cands)
        return stratified(study.cands.iloc[free], keys, need, study.rng), "stratified start"

    @abstractmethod
    def assess(self, study: Study, est: pd.DataFrame | None) -> Standing:
        """Where ``study`` stands under each of its caps (``est``: the transferred model's
        estimates of every candidate, with ``*_std`` spreads; None when ``uses_model``
        is False)."""

    def report(self, study: Study, est: pd.DataFrame) -> Standing | None:
        """The standing the picks report once the study stopped, where it differs from
        the last one the loop went by (None: the same)."""
        return None

    @abstractmethod
    def choose(self, study: Study, standing: Standing, n: int) -> tuple[np.ndarray, list[str]]:
        """At most ``n`` unmeasured candidates (positions) to measure next, with why (one
        line each); none: nothing left worth measuring (the study stops "exhausted")."""


# -------------------------------------------------------------------- the start --
def trained_on(reference: Any, device: Any) -> bool:
    """Whether the reference was trained on ``device`` (its model file says so)."""
    from ...predictor.checks import trained_devices  # the predictor imports torch

    info = getattr(reference, "info_", None) or {}
    return device is not None and device.spec.name in trained_devices(info)


def stratified(
    cands: pd.DataFrame, keys: Sequence[str], n: int, rng: np.random.Generator
) -> np.ndarray:
    """Positions of ``n`` candidates spread round-robin over the cells of ``keys``."""
    cells = list(cands.groupby(list(keys), sort=True).indices.values())
    rng.shuffle(cells)
    queues = [list(rng.permutation(c)) for c in cells]
    chosen: list[int] = []
    while len(chosen) < n and any(queues):
        for q in queues:
            if q and len(chosen) < n:
                chosen.append(int(q.pop()))
    return np.asarray(chosen, dtype=int)


def strata(device: Any, cands: pd.DataFrame) -> list[str]:
    """The knobs a start is stratified over: the device's ``stratify_by`` (else the first
    two columns), and the batch size when there are several."""
    keys = list(device.spec.stratify_by) if device is not None else []
    keys = [k for k in keys if k in cands.columns] or [
        c for c in cands.columns if c != "batch_size"
    ][:2]
    if "batch_size" in cands.columns and cands["batch_size"].nunique() > 1:
        keys.append("batch_size")
    return keys


# ---------------------------------------------------------------------- helpers --
def predicted(
    est: pd.DataFrame, time_col: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The model's time, time spread, power and power spread per candidate."""
    t, st, p, sp = (time_col, f"{time_col}_std", "power_w", "power_w_std")
    return (est[t].to_numpy(float), est[st].to_numpy(float), est[p].to_numpy(float),
            est[sp].to_numpy(float))  # fmt: skip


def describe_caps(caps: np.ndarray) -> str:
    """'30 W', or '17-50 W (34 caps)'."""
    if len(caps) == 1:
        return f"{caps[0]:g} W"
    return f"{caps.min():g}-{caps.max():g} W ({len(caps)} caps)"
