"""Run ``pt.Tuner`` inside a real training job on an NVIDIA GPU, hands-off.

Why: every Tuner figure so far came from the twin or from replayed traces. This runs the
Tuner as a user would -- a real torch job (the GPT-style decoder of
``collect_gpu_corpus.py`` on random tokens), real NVML power from its sampler thread,
real transfers beside the training thread -- on a shared card whose power limit and
clocks must not change. So the knobs are the job's own: CPU threads x batch size (the
grid of ``datasets/measured/h200``), and the cap is a power budget the job must keep
under while it explores. Per run it records:

* every step: batch size, threads, the step's own wall time and the time the training
  thread spent inside the tuner's hooks (the stall);
* the tuner's measurements, its decisions and summary, and the measured share of
  exploring time and energy over the cap (the package's ``over_cap_share``).

Runs: per seed, the plain Tuner and ``hard_cap=True``, both ``background=True``; then
one plain run in the training thread (``background=False``), for the stall beside it.
Each run explores, then trains ``--after`` steps at its pick; runs stop at
``--budget-s``. The reference is the card's ResNet-18 corpus (another workload), so each
run transfers across workloads. ``nvidia-smi`` before and after is the caller's to keep.

    python tools/tune_on_gpu.py --out datasets/measured/h200/tuner --budget-s 300
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

import powertrain as pt
from powertrain.backends.nvml import NvmlBackend
from powertrain.decisions.safe_set import over_cap_share
from powertrain.steps.model_step import ModelStep

sys.path.insert(0, str(Path(__file__).resolve().parent))
from collect_gpu_corpus import make_steps  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "datasets/measured/h200/instant-fixed-s0-l3/nvidia-h200_resnet18.csv"
BATCH_SIZES, THREADS = (4, 8, 12, 16, 24, 32, 48, 64), (1, 4, 16)
SMALL_BATCH_SIZES, SMALL_THREADS = (2, 3, 4), (1, 2)


def reference(csv: Path, epochs: int) -> pt.Predictor:
    """A reference over (threads, batch_size), fitted on another workload's corpus."""
    from powertrain.predictor.estimator import PowerTrainMLP

    table = pd.read_csv(csv)
    est = PowerTrainMLP(epochs=epochs)
    inputs, targets = ("threads", "batch_size"), ("time_ms", "power_w")
    return pt.Predictor(est, inputs=inputs, targets=targets, progress=False).fit(table)


def job(small: bool, device: str) -> ModelStep:
    """The GPT-style decoder's training step of the corpus (tiny with ``small``: a CPU
    test): the same model, data and seed as ``collect_gpu_corpus.py`` measured."""
    return cast(ModelStep, make_steps(small, device, ("gpt-small",))["gpt-small"].fn)


def one_run(name: str, ref: pt.Predictor, args: argparse.Namespace,
            nvml: Any, deadline: float, **tuner_kw: Any) -> dict:  # fmt: skip
    """One job with a Tuner: explore, then ``args.after`` steps at the pick."""
    import torch

    step = job(args.small, args.device)  # a fresh one: closing the board closes its step
    sizes = SMALL_BATCH_SIZES if args.small else BATCH_SIZES
    threads = SMALL_THREADS if args.small else THREADS
    cols = ["threads", "num_workers", "batch_size"]
    grid = pd.DataFrame([(t, 0, b) for t in threads for b in sizes], columns=cols)
    r = pd.DataFrame({"batch_size": sizes, "epochs": 1.0})  # cost per sample: throughput
    board = NvmlBackend(step, nvml=nvml, handle_signals=False, sample_period_s=0.01)
    tuner = pt.Tuner(
        board, ref, args.cap_w, budget=args.budget, candidates=grid, batch_size=list(sizes),
        r=r, transfer_options={"epochs": args.transfer_epochs}, log=print, **tuner_kw,
    )  # fmt: skip
    cuda = step.device.type == "cuda"
    rows: list[dict] = []
    after, t_start = 0, time.monotonic()
    with tuner:
        while after < args.after and time.monotonic() < deadline:
            h0 = time.perf_counter()
            tuner.on_step_begin()
            h1 = time.perf_counter()
            settled = tuner.settled  # this step runs at the pick (a step that settles does not)
            b = tuner.batch_size
            assert b is not None  # the grid's batch sizes: set from the first step
            step(b)
            if cuda:
                torch.cuda.synchronize()
            h2 = time.perf_counter()
            tuner.on_step_end()
            h3 = time.perf_counter()
            rows.append({"step": len(rows), "batch_size": b, "threads": torch.get_num_threads(),
                         "step_ms": (h2 - h1) * 1e3, "wait_ms": (h1 - h0 + h3 - h2) * 1e3,
                         "settled": settled})  # fmt: skip
            after += settled
    summary = tuner.summary()
    steps, measured = pd.DataFrame(rows), tuner.measurements()
    out = Path(args.out)
    steps.to_csv(out / f"{name}.steps.csv", index=False)
    measured.to_csv(out / f"{name}.measured.csv", index=False)
    t_share, e_share = over_cap_share(measured, args.cap_w)
    exploring = steps[~steps.settled] if len(steps) else steps
    return {
        "run": name, **{k: str(v) for k, v in tuner_kw.items()},
        "wall_s": time.monotonic() - t_start, "steps": len(steps),
        "finished": bool(after >= args.after),
        "stop_reason": summary.stop_reason, "config": summary.config,
        "time_ms": summary.time_ms, "power_w": summary.power_w,
        "n_measured": summary.n_measured, "decide_s": summary.decide_s,
        "over_cap_time_share": t_share, "over_cap_energy_share": e_share,
        "wait_s_exploring": float(exploring.wait_ms.sum() / 1e3) if len(steps) else None,
        "wait_ms_max": float(steps.wait_ms.max()) if len(steps) else None,
        "step_ms_median": float(np.median(steps.step_ms)) if len(steps) else None,
        "decisions": summary.decisions,
    }  # fmt: skip


def main(argv: list[str] | None = None, nvml: Any = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="folder for the per-run CSVs and runs.json")
    p.add_argument("--budget-s", type=float, default=300.0, help="wall seconds for all runs")
    p.add_argument("--cap-w", type=float, default=500.0, help="the power cap, W")
    p.add_argument("--budget", type=int, default=20, help="configurations per decision")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--after", type=int, default=200, help="steps at the pick")
    p.add_argument("--transfer-epochs", type=int, default=30)
    p.add_argument("--reference", default=str(REFERENCE), help="corpus CSV of another workload")
    p.add_argument("--reference-epochs", type=int, default=300)
    p.add_argument("--device", default="cuda")
    p.add_argument("--small", action="store_true", help="a tiny job and grid (a CPU test)")
    args = p.parse_args(argv)
    deadline = time.monotonic() + args.budget_s
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ref = reference(Path(args.reference), args.reference_epochs)
    plan = [
        (f"s{s}-{'safe' if hc else 'plain'}-bg", {"seed": s, "hard_cap": hc, "background": True})
        for s in args.seeds
        for hc in (False, True)
    ]
    plan.append((f"s{args.seeds[0]}-plain-fg", {"seed": args.seeds[0], "background": False}))
    runs = []
    for name, kw in plan:
        if time.monotonic() > deadline - 5:
            print(f"{name}: not run, the budget is spent")
            continue
        print(f"--- {name}", flush=True)
        runs.append(one_run(name, ref, args, nvml, deadline, **kw))
        given = sys.argv[1:] if argv is None else argv
        record = {"argv": given, "runs": runs}
        (out / "runs.json").write_text(json.dumps(record, indent=1, default=str))
    keep = ["run", "finished", "steps", "config", "power_w", "n_measured", "stop_reason"]
    keep += ["over_cap_time_share", "wait_s_exploring", "wait_ms_max", "step_ms_median"]
    for r in runs:
        print({k: r[k] for k in keep})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
