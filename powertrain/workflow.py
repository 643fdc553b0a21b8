"""One case end to end: profile -> transfer -> predict -> decide.

Why: the demo, the fleet report and the benchmarks all ask the same question of one
device, workload and batch size — profile a few dozen modes, transfer a reference model
to them, predict every mode, and pick the fastest configuration under each power cap.
Written once here, a change to the recipe (a refinement step, a transfer setting)
reaches all of them, and their figures stay comparable.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from .decisions.optimise import columns_of, fastest_under, pareto_front
from .devices.device import Device, get_device
from .errors import DataError, NoFeasibleModeError
from .metrics import time_penalty_pct


@dataclass
class CaseRun:
    """What :func:`run_case` did and found, as tables.

    Parameters
    ----------
    device : Device
        The device.
    workload : str
        The workload's name.
    batch_size : int or list of int
        One, or several predicted jointly (given samples).
    reference : str
        The reference transferred from.
    samples : DataFrame
        Every profiled mode (random, then refined).
    model : Predictor
        The transferred model.
    estimates : DataFrame
        Every mode of ``modes``, predicted.
    front : DataFrame
        The predicted Pareto front.
    picks : DataFrame
        One row per power cap (see :func:`pick_per_cap`).
    truth : DataFrame, optional
        The twin's expected values, same rows.
    notes : list of str
        Warnings raised by the transfer.
    seconds : dict
        Wall time of each step.
    """

    device: Device
    workload: str
    batch_size: int | list[int]  # one, or several predicted jointly (given samples)
    reference: str
    samples: pd.DataFrame  # every profiled mode (random, then refined)
    model: Any  # the transferred Predictor
    estimates: pd.DataFrame  # every mode of ``modes``, predicted
    front: pd.DataFrame  # the predicted Pareto front
    picks: pd.DataFrame  # one row per power cap (see :func:`pick_per_cap`)
    truth: pd.DataFrame | None = None  # the twin's expected values, same rows (or None)
    notes: list[str] = field(default_factory=list)  # warnings raised by the transfer
    seconds: dict[str, float] = field(default_factory=dict)  # wall time of each step

    @property
    def time(self) -> str:
        """The time column the model predicts (``time_ms`` or ``epoch_s``)."""
        return columns_of(self.estimates, self.model).time


def best_reference(device: str, workload: str, override: str | None = None) -> str:
    """The shipped reference to transfer from: the same device and workload if shipped,
    else one on the same device (ResNet-18 first, the paper's choice), else the Jetson
    family reference where it covers the device (its knobs, and a spec with the family's
    hardware figures), else the Orin AGX ResNet-18 (the transfer then also crosses
    devices). Why the family: on the tuning Orin Nano, with the Orin Nano left out of it,
    ``pt.decide``'s cap table was closer than from the Orin AGX reference (median / Q3 /
    mean penalty 2.33 / 9.57 / 9.73 % against 2.94 / 15.62 / 12.70 %, budget 50, 4 draws;
    docs/method-notes.md)."""
    if override:
        return override
    from .predictor.model_io import pretrained_names
    from .predictor.spec_features import FAMILY_REFERENCE, family_covers

    names = pretrained_names()
    for name in (f"{device}/{workload}", f"{device}/resnet18"):
        if name in names:
            return name
    same_device = sorted(n for n in names if n.split("/")[0] == device)
    if same_device:
        return same_device[0]
    if FAMILY_REFERENCE in names and family_covers(device):
        return FAMILY_REFERENCE
    return "orin-agx/resnet18"


def load_reference(reference: Any) -> Any:
    """A Predictor from a shipped model name, a model folder, or a Predictor as is."""
    from .predictor import Predictor

    if isinstance(reference, Predictor):
        return reference
    if Path(str(reference)).is_dir():
        return Predictor.load(reference)
    return Predictor.from_pretrained(str(reference))


def pick_per_cap(
    estimates: pd.DataFrame,
    power_caps: Sequence[float],
    cost: str | None = None,
    k_sigma: float = 0.0,
    truth: pd.DataFrame | None = None,
    model: Any = None,
    also: Sequence[str] = (),
) -> pd.DataFrame:
    """The pick under each cap: the row of ``estimates`` minimising ``cost`` (default: the
    time column) whose power + ``k_sigma`` spreads fits the cap.

    One row per cap: ``power_cap_w``, ``feasible``, the configuration, the predicted
    time and power with their spreads, ``cost`` and the ``also`` columns; with ``truth``
    (same index) also ``true_<column>`` for each of those it has, the pick's penalty against the
    true optimum under the cap (``penalty_pct``, :func:`~powertrain.metrics.time_penalty_pct`)
    and ``over_cap_w`` (true power minus the cap).
    """
    cols = columns_of(estimates, model)
    cost = cost or cols.time
    shown = [cols.time, f"{cols.time}_std", cols.power, f"{cols.power}_std"]
    shown = list(dict.fromkeys([*shown, cost, *also]))
    rows = []
    for cap in power_caps:
        row: dict[str, Any] = {"power_cap_w": float(cap)}
        try:
            pick = fastest_under(
                estimates, float(cap), k_sigma=k_sigma, time=cost, power=cols.power
            )
        except NoFeasibleModeError:
            rows.append({**row, "feasible": False})
            continue
        row["feasible"] = True
        row.update({c: pick[c] for c in cols.config if c in pick.index})
        row.update({c: pick[c] for c in shown if c in pick.index})
        if truth is not None:
            true = truth.loc[pick.name]  # type: ignore[call-overload]  # a row label
            for c in shown:
                if c in truth.columns and not c.endswith("_std"):
                    row[f"true_{c}"] = true[c]
            under = truth[truth[cols.power] <= cap]
            if len(under) and cost in truth.columns:
                row["penalty_pct"] = time_penalty_pct(true[cost], under[cost].min())
            row["over_cap_w"] = float(true[cols.power]) - float(cap)
        rows.append(row)
    return pd.DataFrame(rows)


def profile_on_twin(
    device: Device, workload: str, modes: pd.DataFrame, batch_size: int, seed: int = 0,
    progress: bool | None = False,
) -> pd.DataFrame:  # fmt: skip
    """Profile ``modes`` on the device's digital twin (no hardware needed)."""
    from .profiling.sweep import profile
    from .twin import Twin

    twin = Twin(device.spec, workload, seed=seed)
    return profile(twin, modes[list(device.knobs)], batch_size=batch_size, progress=progress)


def run_case(
    device: str | Device,
    workload: str,
    *,
    batch_size: int | Sequence[int] | None = None,
    reference: Any = None,
    samples: pd.DataFrame | None = None,
    n_samples: int = 50,
    refine: int = 0,
    refine_range: tuple[float, float] | None = None,
    modes: pd.DataFrame | None = None,
    power_caps: Sequence[float] = (),
    k_sigma: float = 0.0,
    observed: bool = False,
    truth: bool = False,
    seed: int = 0,
    random_state: int | None = None,
    transfer_params: dict | None = None,
    progress: bool | None = False,
) -> CaseRun:
    """Profile, transfer, predict and decide for one device, workload and batch size.

    - **profile**: ``samples`` as given (a CSV, a board, a benchmark's draw), else
      ``n_samples - refine`` random modes profiled on the digital twin (``seed``);
    - **transfer** the ``reference`` (a shipped name, a model folder or a Predictor;
      default :func:`best_reference`) to them, with ``random_state`` and
      ``transfer_params`` passed on;
    - **refine** (``refine`` > 0): profile on the twin the modes that first model would
      pick across ``refine_range`` watts (:func:`~powertrain.decisions.refine.refine_modes`), then
      transfer again on all samples;
    - **predict** every mode of ``modes`` (default: all the device's power modes) at
      ``batch_size`` (default: the workload's; a list predicts every mode at each, for
      a joint choice, when ``samples`` are given); with ``observed`` the profiled modes keep
      their measured values (:func:`~powertrain.decisions.refine.with_observed`);
    - **decide**: the predicted Pareto front and the pick under each of ``power_caps``
      (:func:`pick_per_cap`, with a ``k_sigma`` power margin); with ``truth`` the twin's
      expected values score each pick.

    Time and power columns are the model's targets, so a per-epoch GPU model works the
    same way as a per-minibatch Jetson one (the twin steps need a twin of the device).

    Parameters
    ----------
    device : str or Device
        The device (catalog id, spec file or device).
    workload : str
        The workload (catalog name or spec file).
    batch_size : int or sequence of int, optional
        The batch size(s) to predict; default the workload's.
    reference : str, Path or Predictor, optional
        The model to transfer from; default :func:`best_reference`.
    samples : DataFrame, optional
        Measured samples; default ``n_samples - refine`` random modes on the twin.
    n_samples, refine : int
        Modes profiled on the twin in all, and how many of them refined.
    refine_range : (float, float), optional
        The watts the refined modes are chosen across.
    modes : DataFrame, optional
        The modes to predict; default every power mode of the device.
    power_caps : sequence of float
        The caps to pick under.
    k_sigma : float
        The power margin of each pick, in predicted standard deviations.
    observed : bool
        Profiled modes keep their measured values.
    truth : bool
        Score each pick with the twin's expected values.
    seed, random_state : int
        The twin's seed; the transfer's.
    transfer_params : dict, optional
        Passed on to :meth:`Predictor.transfer`.
    progress : bool, optional
        Progress bars.

    Returns
    -------
    CaseRun
        Samples, model, estimates, front and picks, as tables.
    """
    from .decisions.refine import refine_modes, with_observed
    from .devices.workloads import get_workload

    dev = get_device(device)
    if batch_size is None:
        batch_size = int(get_workload(workload).default_batch_size)
    several = not isinstance(batch_size, (int, np.integer))
    sizes = [int(b) for b in np.atleast_1d(np.asarray(batch_size))]
    one = sizes[0]  # the batch size profiling runs at (one: several need samples given)
    if several and (samples is None or refine or truth):
        raise DataError(
            "several batch sizes need samples=..., no refine and no truth (those profile "
            "or simulate at one batch size)"
        )
    if modes is None:
        modes = dev.power_modes()
    if refine and refine_range is None:
        raise DataError("refine > 0 needs refine_range=(low, high) watts")
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    if samples is None:
        n_random = int(n_samples) - int(refine)
        if n_random < 1:
            raise DataError(f"n_samples ({n_samples}) must exceed refine ({refine})")
        picked = dev.sample(n_random, seed=seed)
        samples = profile_on_twin(dev, workload, picked, one, seed, progress)
    if reference is None:
        reference = best_reference(dev.name, workload)
    ref = load_reference(reference)
    seconds["profile"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    kw = dict(transfer_params or {})
    if random_state is not None:
        kw["random_state"] = random_state
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = ref.transfer(samples, **kw)
        if refine:
            first = model.predict(modes, batch_size=batch_size)
            assert refine_range is not None  # checked above
            extra = refine_modes(first, int(refine), refine_range, exclude=samples)
            more = profile_on_twin(dev, workload, extra, one, seed)
            samples = pd.concat([samples, more], ignore_index=True)
            model = ref.transfer(samples, **kw)
        seconds["transfer"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        est = model.predict(modes, batch_size=batch_size)
        seconds["predict"] = time.perf_counter() - t0
    notes = list(dict.fromkeys(str(w.message) for w in caught))
    if observed:
        est = with_observed(est, samples)
    expected = None
    if truth:
        from .twin import Twin

        expected = Twin(dev.spec, workload, seed=seed).expected(modes, batch_size=one)
    front = pareto_front(est, time=columns_of(est, model).time)
    picks = pick_per_cap(est, power_caps, k_sigma=k_sigma, truth=expected, model=model)
    name = reference if isinstance(reference, str) else type(reference).__name__
    return CaseRun(
        device=dev,
        workload=workload,
        batch_size=sizes if several else one,
        reference=str(name),
        samples=samples,
        model=model,
        estimates=est,
        front=front,
        picks=picks,
        truth=expected,
        notes=notes,
        seconds=seconds,
    )


__all__ = ["CaseRun", "best_reference", "load_reference", "pick_per_cap", "run_case"]
