"""Computing one fleet case: samples -> transferred predictor -> Pareto front -> picks per cap.

Why: the fleet report runs the same recipe for every (device, workload, batch size), on
this machine or on a Dask worker. Keeping the recipe a pure function of a
:class:`~powertrain.fleet_spec.Case` that returns file contents (not files) lets the
caller decide where and how atomically to write them, wherever the work ran.
"""

from __future__ import annotations

import math
import shlex
import subprocess
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .errors import DataError, NoFeasibleModeError, ProfilingError
from .fleet_spec import Case, WorkloadSource
from .schema import MODE_COLUMNS

#: the column each objective minimises under a cap
OBJECTIVE_COLUMN = {"time": "epoch_s", "energy": "epoch_kj"}


@dataclass
class CaseResult:
    """Everything a case page needs: tables, not files."""

    case: Case
    reference: str
    samples: pd.DataFrame
    estimates: pd.DataFrame
    front: pd.DataFrame
    picks: pd.DataFrame
    truth: pd.DataFrame | None  # the twin's true values for every mode (None: not known)
    true_front: pd.DataFrame | None
    steps_per_epoch: int


def best_reference(device: str, workload: str, override: str | None = None) -> str:
    """The shipped reference to transfer from: the same device and workload if shipped,
    else one on the same device (ResNet-18 first, the paper's choice), else the Orin AGX
    ResNet-18 (the transfer then also crosses devices)."""
    if override:
        return override
    from .predictor.model_io import pretrained_names

    names = pretrained_names()
    for name in (f"{device}/{workload}", f"{device}/resnet18"):
        if name in names:
            return name
    same_device = sorted(n for n in names if n.split("/")[0] == device)
    return same_device[0] if same_device else "orin-agx/resnet18"


def _load_reference(name: str):
    from .predictor import Predictor

    if Path(name).is_dir():
        return Predictor.load(name)
    return Predictor.from_pretrained(name)


def _samples_from_csv(path: Path, batch_size: int) -> pd.DataFrame:
    try:
        df = pd.read_csv(path)
    except (OSError, ValueError) as e:
        raise DataError(f"cannot read samples file {path}: {e}") from None
    if "batch_size" in df.columns:
        df = df[df["batch_size"] == batch_size]
        if df.empty:
            raise DataError(f"{path}: no rows with batch_size {batch_size}")
    else:
        df = df.assign(batch_size=batch_size)
    return df.reset_index(drop=True)


def _samples_from_command(command: str, case: Case) -> pd.DataFrame:
    """Run the spec's profiling command; it writes a samples CSV to ``{out}``."""
    with tempfile.TemporaryDirectory(prefix="powertrain-report-") as tmp:
        out = Path(tmp) / "samples.csv"
        fields = {
            "device": case.device,
            "workload": case.workload,
            "batch_size": case.batch_size,
            "samples": case.samples,
            "seed": case.seed,
            "out": str(out),
        }
        try:
            argv = [part.format(**fields) for part in shlex.split(command)]
        except (KeyError, ValueError, IndexError) as e:
            raise ProfilingError(
                f"profiling command {command!r}: bad placeholder {e} "
                f"(known: {', '.join('{' + k + '}' for k in fields)})"
            ) from None
        try:
            run = subprocess.run(argv, capture_output=True, text=True, check=False)
        except OSError as e:
            raise ProfilingError(f"profiling command {argv[0]!r} cannot run: {e}") from None
        if run.returncode != 0:
            tail = (run.stderr or run.stdout).strip().splitlines()[-1:] or [""]
            raise ProfilingError(
                f"profiling command for {case.case_id} exited {run.returncode}: {tail[0]}"
            )
        if not out.exists():
            raise ProfilingError(f"profiling command for {case.case_id} wrote no {{out}} file")
        return _samples_from_csv(out, case.batch_size)


def case_samples(case: Case, source: WorkloadSource | None = None) -> pd.DataFrame:
    """The profiled samples of ``case``: from the twin, a CSV or the profiling command."""
    from .devices import get_device

    source = source or case.source
    if source.kind == "samples_csv":
        return _samples_from_csv(source.path, case.batch_size)
    if source.kind == "command":
        return _samples_from_command(source.command, case)
    from .profiling.sweep import profile
    from .twin import Twin

    dev = get_device(case.device)
    twin = Twin(dev.spec, case.workload, seed=case.seed)
    modes = dev.sample(case.samples, seed=case.seed)
    return profile(twin, modes, batch_size=case.batch_size, progress=False)


def steps_per_epoch(workload: str, batch_size: int) -> int:
    """Minibatches per epoch (1 when the workload's dataset size is not known)."""
    from .workloads import get_workload

    n = get_workload(workload).dataset_samples
    return math.ceil(n / batch_size) if n else 1


def _per_epoch(df: pd.DataFrame, steps: int) -> pd.DataFrame:
    df = df.copy()
    df["epoch_s"] = df["time_ms"] * steps / 1000.0
    df["epoch_kj"] = df["power_w"] * df["epoch_s"] / 1000.0
    return df


def run_group(cases: list[Case]) -> list[CaseResult]:
    """Compute every case in ``cases`` (same device, workload, batch size, sources): one
    profile and one transfer serve all their objectives."""
    from .devices import get_device
    from .optimise import fastest_under, pareto_front

    first = cases[0]
    dev = get_device(first.device)
    modes = dev.power_modes()
    samples = case_samples(first)
    reference = best_reference(first.device, first.workload, first.reference)
    ref = _load_reference(reference)
    ref_device = reference.split("/")[0] if "/" in reference else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # extrapolation notes; the page shows the samples
        model = ref.transfer(
            samples,
            loss="mape" if ref_device not in (None, first.device) else "mse",
            random_state=first.seed,
        )
        est = model.predict(modes, batch_size=first.batch_size)
    steps = steps_per_epoch(first.workload, first.batch_size)
    est = _per_epoch(est, steps)
    truth = true_front = None
    if first.source.kind == "twin":
        from .twin import Twin

        twin = Twin(dev.spec, first.workload, seed=first.seed)
        truth = _per_epoch(twin.expected(modes, batch_size=first.batch_size), steps)
        true_front = pareto_front(truth)
    front = pareto_front(est)
    results = []
    for case in cases:
        col = OBJECTIVE_COLUMN[case.objective]
        rows = []
        for cap in case.power_caps:
            row = {"power_cap_w": cap}
            try:
                pick = fastest_under(est, power_cap_w=cap, time=col)
            except NoFeasibleModeError:
                rows.append({**row, "feasible": False})
                continue
            row.update({"feasible": True, **{c: pick[c] for c in MODE_COLUMNS}})
            row["batch_size"] = first.batch_size
            for c in ("time_ms", "time_ms_std", "power_w", "power_w_std", "epoch_s", "epoch_kj"):
                row[c] = pick[c]
            if truth is not None:
                true = truth.loc[pick.name]
                under = truth[truth["power_w"] <= cap]
                row["true_epoch_s"] = true["epoch_s"]
                row["true_epoch_kj"] = true["epoch_kj"]
                row["true_power_w"] = true["power_w"]
                if len(under):
                    best = under[col].min()
                    row[f"penalty_{case.objective}_pct"] = 100.0 * (true[col] / best - 1.0)
            rows.append(row)
        results.append(
            CaseResult(
                case=case,
                reference=reference,
                samples=samples,
                estimates=est,
                front=front,
                picks=pd.DataFrame(rows),
                truth=truth,
                true_front=true_front,
                steps_per_epoch=steps,
            )
        )
    return results
