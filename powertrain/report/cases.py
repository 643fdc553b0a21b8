"""Computing one fleet case: samples -> transferred predictor -> Pareto front -> picks per cap.

Why: the fleet report runs the same recipe for every (device, workload, batch size), on
this machine or on a Dask worker. The recipe is :func:`powertrain.workflow.run_case`;
this module adds what a fleet needs around it: samples from a CSV or a command (checked
against the case's device), time and energy per epoch, and one pick table per
objective. It returns file contents (not files) so the caller decides where and how
atomically to write them, wherever the work ran.
"""

from __future__ import annotations

import math
import shlex
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..decisions.optimise import columns_of
from ..errors import DataError, PowerTrainError, ProfilingError
from ..workflow import best_reference, pick_per_cap, run_case
from .spec import Case, WorkloadSource

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
    max_power_w: float  # the highest power any mode is predicted to draw
    config: tuple[str, ...] = ()  # the configuration columns (the device's knobs)


def _where(case: Case, path: Path | str | None = None) -> str:
    """``case ID (spec FILE)`` or ``case ID, samples FILE``: the prefix of every case error."""
    at = f", samples {path}" if path else (f" (spec {case.spec})" if case.spec else "")
    return f"case {case.case_id}{at}"


def _samples_from_csv(path: Path, case: Case, shown: str | None = None) -> pd.DataFrame:
    """A samples CSV, checked against the case: its batch size and its device's modes."""
    from ..devices.device import get_device

    where = _where(case, shown or path)
    try:
        df = pd.read_csv(path)
    except (OSError, ValueError) as e:
        raise DataError(f"{where}: cannot read samples: {e}") from None
    if "device" in df.columns:
        found = sorted(df["device"].dropna().astype(str).unique())
        if found != [case.device]:
            raise DataError(
                f"{where}: column 'device' holds {', '.join(found) or 'nothing'}, not the "
                f"case's device {case.device!r}"
            )
    if "workload" in df.columns:  # samples of another job would transfer the wrong workload
        found = sorted(df["workload"].dropna().astype(str).unique())
        if found != [case.workload]:
            raise DataError(
                f"{where}: column 'workload' holds {', '.join(found) or 'nothing'}, not the "
                f"case's workload {case.workload!r}"
            )
    if "batch_size" in df.columns:
        df = df[df["batch_size"] == case.batch_size]
        if df.empty:
            raise DataError(f"{where}: no rows with batch_size {case.batch_size}")
    else:
        df = df.assign(batch_size=case.batch_size)
    df = df.reset_index(drop=True)
    try:  # every knob value must be one of this device's settings
        get_device(case.device).validate(df, source=where, batch_size=True)
    except PowerTrainError as e:
        raise DataError(str(e)) from None
    return df


def _samples_from_command(source: WorkloadSource, case: Case) -> pd.DataFrame:
    """Run the spec's profiling command; it writes a samples CSV to ``{out}``."""
    command, timeout = source.command or "", source.timeout_s
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
        where = _where(case)
        try:
            argv = [part.format(**fields) for part in shlex.split(command)]
        except (KeyError, ValueError, IndexError) as e:
            raise ProfilingError(
                f"{where}: profiling command {command!r}: bad placeholder {e} "
                f"(known: {', '.join('{' + k + '}' for k in fields)})"
            ) from None
        try:
            run = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ProfilingError(
                f"{where}: profiling command {argv[0]!r} did not finish within {timeout:g} s "
                "(the workload's timeout_s)"
            ) from None
        except OSError as e:
            raise ProfilingError(
                f"{where}: profiling command {argv[0]!r} cannot run: {e}"
            ) from None
        if run.returncode != 0:
            tail = (run.stderr or run.stdout).strip().splitlines()[-1:] or [""]
            raise ProfilingError(f"{where}: profiling command exited {run.returncode}: {tail[0]}")
        if not out.exists():
            raise ProfilingError(f"{where}: profiling command wrote no {{out}} file")
        return _samples_from_csv(out, case, shown=f"written by {argv[0]!r}")


def case_samples(case: Case, source: WorkloadSource | None = None) -> pd.DataFrame | None:
    """The profiled samples of ``case`` from a CSV or the profiling command (None: the
    twin, which :func:`~powertrain.workflow.run_case` profiles itself)."""
    source = source or case.source
    if source.kind == "samples_csv":
        assert source.path is not None
        return _samples_from_csv(source.path, case)
    if source.kind == "command":
        return _samples_from_command(source, case)
    return None


def steps_per_epoch(workload: str, batch_size: int) -> int:
    """Minibatches per epoch (1 when the workload's dataset size is not known)."""
    from ..devices.workloads import get_workload

    n = get_workload(workload).dataset_samples
    return math.ceil(n / batch_size) if n else 1


def per_epoch(df: pd.DataFrame, steps: int) -> pd.DataFrame:
    """``df`` with ``epoch_s`` (from per-minibatch ``time_ms`` when it has no per-epoch
    time of its own) and ``epoch_kj`` (energy per epoch)."""
    df = df.copy()
    if "epoch_s" not in df.columns:
        df["epoch_s"] = df["time_ms"] * steps / 1000.0
    df["epoch_kj"] = df["power_w"] * df["epoch_s"] / 1000.0
    return df


def run_group(cases: list[Case]) -> list[CaseResult]:
    """Compute every case in ``cases`` (same device, workload, batch size, sources): one
    profile and one transfer serve all their objectives. Errors name the case."""
    try:
        return _run_group(cases)
    except PowerTrainError as e:
        where = _where(cases[0])
        if str(e).startswith(f"case {cases[0].case_id}"):
            raise
        raise type(e)(f"{where}: {e}") from None


def _run_group(cases: list[Case]) -> list[CaseResult]:
    from ..decisions.optimise import pareto_front
    from ..decisions.refine import with_observed

    first = cases[0]
    if first.device_spec is not None:  # a worker process knows only what the case carries
        from ..devices.specs import register_device

        register_device(first.device_spec)
    samples = case_samples(first)
    reference = best_reference(first.device, first.workload, first.reference)
    if samples is None and first.strategy != "random":
        samples = strategy_samples(first, reference)
    run = run_case(
        first.device,
        first.workload,
        batch_size=first.batch_size,
        reference=reference,
        samples=samples,
        n_samples=first.samples,
        truth=first.source.kind == "twin",
        seed=first.seed,
        random_state=first.seed,  # the loss follows the estimator: MAPE across devices
    )
    cols = columns_of(run.estimates, run.model)
    steps = steps_per_epoch(first.workload, first.batch_size)
    # the power guard: profiled configurations count as what the board measured
    est = per_epoch(with_observed(run.estimates, run.samples), steps)
    truth = true_front = None
    if run.truth is not None:
        truth = per_epoch(run.truth, steps)
        true_front = pareto_front(truth, time="epoch_s")
    front = pareto_front(est, time="epoch_s")
    decided = first.source.kind == "twin" and first.strategy == "active"  # board in the loop
    results = []
    for case in cases:
        picks = case_picks(case, est, truth, run.model, run.samples if decided else None)
        results.append(
            CaseResult(
                case=case,
                reference=reference,
                samples=run.samples,
                estimates=est,
                front=front,
                picks=picks,
                truth=truth,
                true_front=true_front,
                steps_per_epoch=steps,
                max_power_w=float(est[cols.power].max()),
                config=cols.config,
            )
        )
    return results


def case_picks(
    case: Case,
    est: pd.DataFrame,
    truth: pd.DataFrame | None,
    model: object,
    samples: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The pick under each cap, with ``how`` it was made: ``confirmed`` (with ``samples``
    chosen by a decision on the board: the best configuration whose measured power plus
    one standard deviation of its power readings fits the cap), else predicted with the
    case's margin (``margin_sigma`` predicted sigmas of power; 0: the plain pick)."""
    from ..decisions.optimise import SAFE_K_SIGMA, how_picked

    col = OBJECTIVE_COLUMN[case.objective]
    k = SAFE_K_SIGMA if case.margin_sigma is None else case.margin_sigma
    kw: dict = dict(cost=col, truth=truth, model=model, also=("epoch_s", "epoch_kj"))
    picks = pick_per_cap(est, case.power_caps, k_sigma=k, **kw)
    picks["how"] = how_picked(k)
    if samples is None or "power_w_std" not in samples.columns:
        return picks
    config = [c for c in columns_of(est, model).config if c in samples.columns]
    spread = samples[[*config, "power_w_std"]].groupby(config, as_index=False).max()
    measured = est[(est["time_ms_std"] == 0) & (est["power_w_std"] == 0)]
    measured = measured.drop(columns="power_w_std").reset_index()
    measured = measured.merge(spread, on=config).set_index("index").rename_axis(None)
    if measured.empty:
        return picks
    confirmed = pick_per_cap(measured, case.power_caps, k_sigma=1.0, **kw)
    confirmed["how"] = "confirmed"
    use = confirmed["feasible"].to_numpy()
    return pd.concat([confirmed[use], picks[~use]]).sort_values("power_cap_w", kind="stable")


def strategy_samples(case: Case, reference: str) -> pd.DataFrame:
    """The twin samples of a case whose spec names a ``strategy``: ``stratified`` spreads
    ``samples`` modes over the device's stratify_by knobs; ``active`` lets
    :func:`~powertrain.decisions.decide.decide` measure (at most ``samples``) where the decisions
    under the case's caps are, so the picks stand on measured configurations."""
    from ..decisions.decide import decide
    from ..devices.device import get_device
    from ..twin import Twin
    from ..workflow import load_reference, profile_on_twin

    dev = get_device(case.device)
    if case.strategy == "stratified":
        modes = dev.sample(case.samples, seed=case.seed, stratified=True)
        return profile_on_twin(dev, case.workload, modes, case.batch_size, case.seed)
    twin = Twin(dev.spec, case.workload, seed=case.seed)
    result = decide(
        twin,
        load_reference(reference),
        case.power_caps,
        budget=case.samples,
        batch_size=case.batch_size,
        seed=case.seed,
    )
    return result.measurements.drop(columns=["round", "why"])
