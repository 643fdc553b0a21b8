"""``powertrain demo``: the whole flow on the embedded default, no hardware needed.

Profile ~50 modes of a workload on the digital twin, transfer the shipped reference
model, predict every mode, build the Pareto front, pick the fastest mode under a cap, and
check all of it against what the twin's board truly does.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

#: the Pareto table: the configuration exactly, the prediction and its 1-sigma spread
FRONT_COLUMNS = [
    "cores", "cpu_mhz", "gpu_mhz", "mem_mhz", "batch_size",
    "time_ms", "time_ms_std", "power_w", "power_w_std",
]  # fmt: skip


def cmd_demo(args: argparse.Namespace) -> int:
    import numpy as np
    import pandas as pd

    from .. import (
        Predictor,
        Twin,
        fastest_under,
        get_device,
        pareto_front,
        profile,
        refine_modes,
        with_observed,
    )
    from ..evaluate import cap_sweep
    from ..figures import figure_png, new_figure, plot_time_power, write_html
    from ..metrics import mape, time_penalty_pct

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dev = get_device(args.device)
    twin = Twin(dev.spec, args.workload, seed=args.seed)
    say = print if not args.quiet else (lambda *a, **k: None)

    n_refine = min(args.refine, max(args.samples - 10, 0))
    n_random = args.samples - n_refine
    say(
        f"1. profiling {n_random} random modes of {args.workload} (batch {args.batch_size}) "
        f"on the {dev.name} digital twin ..."
    )
    modes = dev.power_modes()
    picked = dev.sample(n_random, seed=args.seed)
    samples = profile(
        twin, picked, batch_size=args.batch_size, progress=None if not args.quiet else False
    )

    say(f"2. transferring the reference model {args.reference} ...")
    t0 = time.perf_counter()
    ref = Predictor.from_pretrained(args.reference)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = ref.transfer(samples)
        if n_refine:
            # spend the rest of the budget on the modes this model would pick
            first = model.predict(modes, batch_size=args.batch_size)
            lo, hi = args.sweep
            extra = refine_modes(first, n_refine, (lo, hi), exclude=samples)
            say(f"   profiling the {len(extra)} modes it would pick under {lo:g}-{hi:g} W ...")
            more = profile(
                twin, extra[list(modes.columns)], batch_size=args.batch_size, progress=False
            )
            samples = pd.concat([samples, more], ignore_index=True)
            model = ref.transfer(samples)
    for w in {str(w.message) for w in caught}:  # e.g. modes outside the reference's grid
        say(f"   note: {w}")
    t_transfer = time.perf_counter() - t0
    samples.to_csv(out / "samples.csv", index=False)
    profiled_min = samples["profile_s"].sum() / 60
    say(
        f"   {len(samples)} modes measured ({n_random} random + {len(samples) - n_random} "
        f"refined); that would take {profiled_min:.1f} min on the board"
    )

    say(f"3. predicting all {len(modes):,} modes ...")
    t0 = time.perf_counter()
    est = model.predict(modes, batch_size=args.batch_size)
    t_predict = time.perf_counter() - t0
    est = with_observed(est, samples)  # profiled modes at what the board measured
    est.to_csv(out / "estimates.csv", index=False)
    truth = twin.expected(modes, batch_size=args.batch_size)
    err_t = mape(truth["time_ms"], est["time_ms"])
    err_p = mape(truth["power_w"], est["power_w"])

    front = pareto_front(est)
    front.to_csv(out / "pareto_front.csv", index=False)
    mode_cols = ["cores", "cpu_mhz", "gpu_mhz", "mem_mhz"]
    feasible_truth = truth[truth["power_w"] <= args.power_cap]
    optimum = feasible_truth.loc[feasible_truth["time_ms"].idxmin()]
    summary = {
        "device / workload": f"{dev.name} / {args.workload} (batch {args.batch_size})",
        "profiled modes": f"{len(samples)} ({profiled_min:.1f} min of board time)",
        "reference model": args.reference,
        "transfer time": f"{t_transfer:.2f} s",
        f"predict {len(modes):,} modes": f"{t_predict:.3f} s",
        "time MAPE (all modes vs twin)": f"{err_t:.1f} %",
        "power MAPE (all modes vs twin)": f"{err_p:.1f} %",
        "Pareto front": f"{len(front)} modes",
        "power cap": f"{args.power_cap:g} W",
        "true optimum under cap": f"{optimum['time_ms']:.1f} ms at {optimum['power_w']:.1f} W",
    }
    # the plain pick, and one that keeps a margin of k predicted standard deviations
    for label, k in (("chosen", 0.0), (f"chosen with {args.k_sigma:g} sigma margin", args.k_sigma)):
        pick = fastest_under(est, power_cap_w=args.power_cap, k_sigma=k)
        true = truth.loc[pick.name]  # est and truth keep the index of `modes`
        penalty = time_penalty_pct(true["time_ms"], optimum["time_ms"])
        summary[label] = ", ".join(f"{c}={pick[c]:.10g}" for c in mode_cols)
        summary[f"{label}: predicted"] = f"{pick['time_ms']:.1f} ms at {pick['power_w']:.1f} W"
        summary[f"{label}: true"] = (
            f"{true['time_ms']:.1f} ms at {true['power_w']:.1f} W "
            f"({penalty:+.1f} % time vs optimum, {true['power_w'] - args.power_cap:+.1f} W vs cap)"
        )
        if k == 0.0:
            best = pick
    lo, hi = args.sweep
    caps = [float(c) for c in range(int(np.ceil(lo)), int(np.floor(hi)) + 1)]
    for label, k in (("plain", 0.0), (f"{args.k_sigma:g} sigma", args.k_sigma)):
        _, sweep = cap_sweep(est, truth, caps, k_sigma=k)
        summary[f"cap sweep {lo:g}-{hi:g} W ({label})"] = (
            f"median time penalty {sweep['penalty_median_pct']:.1f} % "
            f"(Q1-Q3 {sweep['penalty_q1_pct']:.1f}-{sweep['penalty_q3_pct']:.1f}), "
            f"A/L+1 {sweep['above_limit_1w_pct']:.0f} % of {sweep['caps']} caps"
        )
    ax = plot_time_power(
        ax=new_figure()[1],
        est=est,
        front=front,
        chosen=best,
        power_cap_w=args.power_cap,
        truth=truth,
        title=f"{dev.name} / {args.workload}: predicted from {len(samples)} profiled modes",
    )
    png = figure_png(ax)
    (out / "time_power.png").write_bytes(png)
    write_html(
        out / "report.html",
        f"PowerTrain demo: {dev.name} / {args.workload}",
        summary,
        png,
        front[[c for c in FRONT_COLUMNS if c in front.columns]],
    )
    width = max(map(len, summary))
    for k, v in summary.items():
        say(f"   {k:<{width}}  {v}")
    pd.DataFrame([summary]).to_csv(out / "summary.csv", index=False)
    say(
        f"wrote {out}/report.html, time_power.png, estimates.csv, pareto_front.csv, "
        "samples.csv, summary.csv"
    )
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo", help="run the whole flow on the digital twin with the shipped reference model"
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
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    p.set_defaults(func=cmd_demo)


if __name__ == "__main__":  # pragma: no cover
    from . import main

    sys.exit(main(["demo", *sys.argv[1:]]))
