"""``powertrain demo``: the whole flow on the embedded default, no hardware needed.

Profile ~50 modes of a workload on the digital twin, transfer the shipped reference
model, predict every mode, build the Pareto front, pick the fastest mode under a cap, and
check all of it against what the twin's board truly does.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .args import command, progress_flag

#: the Pareto table: the configuration exactly, the prediction and its 1-sigma spread
FRONT_COLUMNS = [
    "cores", "cpu_mhz", "gpu_mhz", "mem_mhz", "batch_size",
    "time_ms", "time_ms_std", "power_w", "power_w_std",
]  # fmt: skip


def cmd_demo(args: argparse.Namespace) -> int:
    import base64

    import numpy as np
    import pandas as pd

    from .. import get_device
    from ..errors import NoFeasibleModeError
    from ..evaluate import cap_sweep
    from ..files import put
    from ..metrics import mape
    from ..report.figures import figure_png, new_figure, plot_time_power
    from ..report.pages import case_page_html, table_html
    from ..twin import Twin
    from ..workflow import pick_per_cap, run_case

    out = Path(args.out)
    dev = get_device(args.device)
    say = print if not args.quiet else (lambda *a, **k: None)
    modes = dev.power_modes()
    lowest = Twin(dev.spec, args.workload, seed=args.seed).expected(modes, args.batch_size)
    if not (lowest["power_w"] <= args.power_cap).any():  # say so before minutes of work
        raise NoFeasibleModeError(
            f"no configuration fits under {args.power_cap:g} W: the lowest power of any "
            f"{dev.name} mode for {args.workload} is {lowest['power_w'].min():.1f} W"
        )
    out.mkdir(parents=True, exist_ok=True)

    n_refine = min(args.refine, max(args.samples - 10, 0))
    n_random = args.samples - n_refine
    lo, hi = args.sweep
    say(
        f"profiling {n_random} random modes of {args.workload} (batch {args.batch_size}) on "
        f"the {dev.name} digital twin, transferring {args.reference}"
        + (f", then profiling the {n_refine} modes it would pick under {lo:g}-{hi:g} W" if
           n_refine else "")
        + f", and predicting all {len(modes):,} modes ..."
    )  # fmt: skip
    run = run_case(
        dev,
        args.workload,
        batch_size=args.batch_size,
        reference=args.reference,
        n_samples=args.samples,
        refine=n_refine,
        refine_range=(lo, hi),
        modes=modes,
        observed=True,  # profiled modes at what the board measured
        truth=True,
        seed=args.seed,
        progress=progress_flag(args),
    )
    for note in run.notes:  # e.g. modes outside the reference's grid
        say(f"   note: {note}")
    samples, est, truth, front = run.samples, run.estimates, run.truth, run.front
    assert truth is not None
    for name, table in (("samples", samples), ("estimates", est), ("pareto_front", front)):
        put(out, f"{name}.csv", table.to_csv(index=False))
    profiled_min = samples["profile_s"].sum() / 60
    feasible_truth = truth[truth["power_w"] <= args.power_cap]
    optimum = feasible_truth.loc[feasible_truth["time_ms"].idxmin()]
    summary = {
        "device / workload": f"{dev.name} / {args.workload} (batch {args.batch_size})",
        "profiled modes": f"{len(samples)} ({n_random} random + {len(samples) - n_random} "
        f"refined; {profiled_min:.1f} min of board time)",
        "reference model": args.reference,
        "transfer time": f"{run.seconds['transfer']:.2f} s",
        f"predict {len(modes):,} modes": f"{run.seconds['predict']:.3f} s",
        "time MAPE (all modes vs twin)": f"{mape(truth['time_ms'], est['time_ms']):.1f} %",
        "power MAPE (all modes vs twin)": f"{mape(truth['power_w'], est['power_w']):.1f} %",
        "Pareto front": f"{len(front)} modes",
        "power cap": f"{args.power_cap:g} W",
        "true optimum under cap": f"{optimum['time_ms']:.1f} ms at {optimum['power_w']:.1f} W",
    }
    # the plain pick, and one that keeps a margin of k predicted standard deviations
    picks = []
    for label, k in (("chosen", 0.0), (f"chosen with {args.k_sigma:g} sigma margin", args.k_sigma)):
        pick = pick_per_cap(est, [args.power_cap], k_sigma=k, truth=truth, model=run.model).iloc[0]
        if not pick["feasible"]:
            raise NoFeasibleModeError(
                f"no configuration is predicted to fit under {args.power_cap:g} W"
                + (f" with a {k:g} sigma margin" if k else "")
            )
        picks.append(pick.rename(label))
        summary[label] = ", ".join(f"{c}={pick[c]:.10g}" for c in dev.knobs)
        summary[f"{label}: predicted"] = f"{pick['time_ms']:.1f} ms at {pick['power_w']:.1f} W"
        summary[f"{label}: true"] = (
            f"{pick['true_time_ms']:.1f} ms at {pick['true_power_w']:.1f} W "
            f"({pick['penalty_pct']:+.1f} % time vs optimum, {pick['over_cap_w']:+.1f} W vs cap)"
        )
    caps = [float(c) for c in range(int(np.ceil(lo)), int(np.floor(hi)) + 1)]
    for label, k in (("plain", 0.0), (f"{args.k_sigma:g} sigma", args.k_sigma)):
        _, sweep = cap_sweep(est, truth, caps, k_sigma=k)
        summary[f"cap sweep {lo:g}-{hi:g} W ({label})"] = (
            f"median time penalty {sweep['penalty_median_pct']:.1f} % "
            f"(Q1-Q3 {sweep['penalty_q1_pct']:.1f}-{sweep['penalty_q3_pct']:.1f}), "
            f"A/L+1 {sweep['above_limit_1w_pct']:.0f} % of {sweep['caps']} caps"
        )
    ax = plot_time_power(
        est,
        front=front,
        chosen=picks[0],
        power_cap_w=args.power_cap,
        truth=truth,
        samples=samples,
        title=f"{dev.name} / {args.workload}: predicted from {len(samples)} profiled modes",
        ax=new_figure()[1],
    )
    png = figure_png(ax)
    put(out, "time_power.png", png)
    table = pd.DataFrame(picks).rename_axis("pick").reset_index()
    shown = ["pick", "power_cap_w", *dev.knobs, "batch_size", "time_ms", "time_ms_std",
             "power_w", "power_w_std", "true_time_ms", "true_power_w", "over_cap_w",
             "penalty_pct"]  # fmt: skip
    front_table = table_html(front[[c for c in FRONT_COLUMNS if c in front.columns]])
    page = case_page_html(
        f"PowerTrain demo: {dev.name} / {args.workload}",
        summary,
        "data:image/png;base64," + base64.b64encode(png).decode(),
        "Grey: what the twin truly does; blue: predicted for every mode; green: the profiled "
        "modes; orange: the predicted Pareto front; red: the cap and the pick.",
        table[[c for c in shown if c in table.columns]],
        sections=[("The predicted Pareto front, mode by mode", front_table)],
    )
    put(out, "report.html", page)
    width = max(map(len, summary))
    for k, v in summary.items():
        say(f"   {k:<{width}}  {v}")
    put(out, "summary.csv", pd.DataFrame([summary]).to_csv(index=False))
    say(
        f"wrote {out}/report.html, time_power.png, estimates.csv, pareto_front.csv, "
        "samples.csv, summary.csv"
    )
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub, "demo", help="run the whole flow on the digital twin with the shipped reference model"
    )
    p.add_argument("--device", default="orin-agx", help="catalog device (orin-agx)")
    p.add_argument("--workload", default="mobilenetv3", help="catalog workload (mobilenetv3)")
    p.add_argument(
        "--reference", default="orin-agx/resnet18", help="shipped reference model or model dir"
    )
    p.add_argument("--samples", type=int, default=50, help="modes to profile for the transfer (50)")
    p.add_argument(
        "--refine",
        type=int,
        default=15,
        help="of those, how many go to the first model's picks across the sweep (15)",
    )
    p.add_argument(
        "--sweep",
        type=float,
        nargs=2,
        default=(17.0, 50.0),
        metavar=("LOW", "HIGH"),
        help="power caps (W, 1 W steps) to score the model's decisions over (17 50)",
    )
    p.add_argument("--batch-size", type=int, default=16, help="batch size (16)")
    p.add_argument("--power-cap", type=float, default=30.0, help="watts")
    p.add_argument(
        "--k-sigma", type=float, default=1.0, help="safety margin in predicted power std (1.0)"
    )
    p.add_argument("--seed", type=int, default=0, help="seeds the twin and the sample (0)")
    p.add_argument("-o", "--out", default="powertrain-demo", help="output folder")
    p.set_defaults(func=cmd_demo)


if __name__ == "__main__":  # pragma: no cover
    from . import main

    sys.exit(main(["demo", *sys.argv[1:]]))
