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
    import numpy as np

    from .. import get_device
    from ..decisions.optimise import SAFE_K_SIGMA
    from ..errors import NoFeasibleModeError
    from ..twin import Twin
    from ..workflow import run_case

    out = Path(args.out)
    dev = get_device(args.device)
    args.k_sigma = SAFE_K_SIGMA if args.k_sigma is None else args.k_sigma
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
    lo, hi = args.sweep
    say(
        f"profiling {args.samples - n_refine} random modes of {args.workload} (batch "
        f"{args.batch_size}) on the {dev.name} digital twin, transferring {args.reference}"
        + (f", then profiling the {n_refine} modes it would pick under {lo:g}-{hi:g} W" if
           n_refine else "")
        + f", and predicting all {len(modes):,} modes ..."
    )  # fmt: skip
    run = run_case(
        dev, args.workload, batch_size=args.batch_size, reference=args.reference,
        n_samples=args.samples, refine=n_refine, refine_range=(lo, hi), modes=modes,
        observed=True,  # profiled modes at what the board measured
        truth=True, seed=args.seed, progress=progress_flag(args),
    )  # fmt: skip
    assert run.truth is not None
    picks = _predicted_picks(run, args)
    if args.confirm:
        say(f"confirming on the board: up to {args.confirm} more measurements near the cap ...")
        picks.insert(0, _confirmed_pick(run, dev, args))
    caps = [float(c) for c in range(int(np.ceil(lo)), int(np.floor(hi)) + 1)]
    _write_outputs(out, run, dev, args, picks, caps, say)
    return 0


#: what the demo says to do about each kind of note the transfer raised
_ADVICE = {
    "extrapolation": "the confirmed pick is measured, so it does not rest on these rows; "
    "for prediction-only picks there, profile more modes (--samples) or keep the margin",
    "repeated": "nothing to do: repeated measurements of one mode were averaged",
}


def _advice(note: str) -> str:
    """A note of the transfer with what to do about it."""
    for key, what in _ADVICE.items():
        if key in note:
            return f"{note}. What to do: {what}."
    return f"{note}. What to do: check the samples it names (samples.csv)."


def _predicted_picks(run, args: argparse.Namespace) -> list:
    """The prediction-only picks under the cap: with the margin, then the paper's plain one."""
    from ..decisions.optimise import how_picked
    from ..errors import NoFeasibleModeError
    from ..workflow import pick_per_cap

    board_min = run.samples["profile_s"].sum() / 60
    picks = []
    for k in (args.k_sigma, 0.0):
        pick = pick_per_cap(
            run.estimates, [args.power_cap], k_sigma=k, truth=run.truth, model=run.model
        ).iloc[0]
        if not pick["feasible"]:
            raise NoFeasibleModeError(
                f"no configuration is predicted to fit under {args.power_cap:g} W"
                + (f" with a {k:g} sigma margin (--k-sigma 0: the plain pick)" if k else "")
            )
        how = how_picked(k) + ("" if k else " (the paper's plain pick)")
        picks.append(pick.to_dict() | {"name": how, "how sure": "", "board_min": board_min})
        if args.k_sigma == 0:
            break
    return picks


def _confirmed_pick(run, dev, args: argparse.Namespace) -> dict:
    """``pt.decide`` on the twin, starting from the samples already measured."""
    import numpy as np

    from ..decisions.decide import decide
    from ..errors import NoFeasibleModeError
    from ..twin import Twin
    from ..workflow import load_reference

    board = Twin(dev.spec, args.workload, seed=args.seed)
    d = decide(
        board, load_reference(args.reference), args.power_cap, budget=args.confirm,
        samples=run.samples, batch_size=args.batch_size, seed=args.seed,
    )  # fmt: skip
    p = d.pick()
    if p.config is None:
        raise NoFeasibleModeError(f"nothing measured fits under {args.power_cap:g} W: {p.reason}")
    est = run.estimates
    same = (est[c].to_numpy() == v for c, v in p.config.items() if c in est.columns)
    hit = run.truth[np.logical_and.reduce(list(same))]
    true_t, true_p = (hit.iloc[0]["time_ms"], hit.iloc[0]["power_w"]) if len(hit) else (None, None)
    feasible = run.truth[run.truth["power_w"] <= args.power_cap]
    best = feasible["time_ms"].min()
    board_min = (run.samples["profile_s"].sum() + d.board_s) / 60
    return {
        **p.config, "power_cap_w": args.power_cap, "time_ms": p.time, "power_w": p.power_w,
        "true_time_ms": true_t, "true_power_w": true_p,
        "penalty_pct": (true_t / best - 1) * 100 if true_t else None,
        "over_cap_w": true_p - args.power_cap if true_p else None,
        "how sure": f"{p.confidence:.0%}", "board_min": board_min,
        "name": f"confirmed on the board ({d.n_measured} more measured, stop: {d.stop_reason})",
    }  # fmt: skip


def _values(pick: dict) -> str:
    """Whether a pick's time and power were measured (a confirmed pick) or predicted."""
    return "measured" if str(pick["name"]).startswith("confirmed") else "predicted"


def _answer(picks: list, knobs) -> str:
    """The answer first: each pick side by side with its time, power, how sure, cost."""
    import pandas as pd

    from ..report.pages import mode_text, table_html

    rows = {
        "configuration": [mode_text(p, [*knobs, "batch_size"]) for p in picks],
        "time and power are": [_values(p) for p in picks],
        "time per minibatch (ms)": [p["time_ms"] for p in picks],
        "power (W)": [p["power_w"] for p in picks],
        "how sure": [p["how sure"] or "prediction" for p in picks],
        "board minutes": [p["board_min"] for p in picks],
        "twin's true time vs optimum (%)": [p["penalty_pct"] for p in picks],
        "twin's true power vs cap (W)": [p["over_cap_w"] for p in picks],
    }
    table = pd.DataFrame(rows, index=[p["name"] for p in picks]).T.rename_axis("").reset_index()
    return table_html(table)


def _details(run, dev, args: argparse.Namespace, caps: list) -> dict:
    """The facts behind the answer: accuracy, cost, and how the model does over a sweep."""
    from ..decisions.evaluate import cap_sweep
    from ..metrics import mape

    est, truth = run.estimates, run.truth
    details = {
        "device / workload": f"{dev.name} / {args.workload} (batch {args.batch_size})",
        "profiled modes": f"{len(run.samples)} (board time "
        f"{run.samples['profile_s'].sum() / 60:.1f} min)",
        "reference model": args.reference,
        "transfer time": f"{run.seconds['transfer']:.2f} s",
        "predict time": f"{run.seconds['predict']:.3f} s for {len(est):,} modes",
        "time MAPE (all modes vs twin)": f"{mape(truth['time_ms'], est['time_ms']):.1f} %",
        "power MAPE (all modes vs twin)": f"{mape(truth['power_w'], est['power_w']):.1f} %",
        "Pareto front": f"{len(run.front)} modes",
    }
    for label, k in (("plain", 0.0), (f"{args.k_sigma:g} sigma", args.k_sigma)):
        _, sweep = cap_sweep(est, truth, caps, k_sigma=k)
        details[f"prediction-only over {caps[0]:g}-{caps[-1]:g} W ({label})"] = (
            f"median time penalty {sweep['penalty_median_pct']:.1f} % "
            f"(Q1-Q3 {sweep['penalty_q1_pct']:.1f}-{sweep['penalty_q3_pct']:.1f}), "
            f"{sweep['above_limit_1w_pct']:.0f} % of {sweep['caps']} caps more than 1 W over"
        )
    for i, note in enumerate(run.notes, 1):
        details[f"note {i}"] = _advice(note)
    return details


def _write_outputs(out: Path, run, dev, args, picks: list, caps: list, say) -> None:
    """report.html (answer, plot, details), time_power.png and the CSVs behind them."""
    import base64

    import pandas as pd

    from ..report.figures import figure_png, new_figure, plot_time_power
    from ..report.pages import facts_html, render_page, table_html
    from ..utils.files import put

    for name, table in (("samples", run.samples), ("estimates", run.estimates),
                        ("pareto_front", run.front)):  # fmt: skip
        put(out, f"{name}.csv", table.to_csv(index=False))
    details = _details(run, dev, args, caps)
    ax = plot_time_power(
        run.estimates, front=run.front, chosen=pd.Series(picks[0]), power_cap_w=args.power_cap,
        truth=run.truth, samples=run.samples, ax=new_figure()[1],
        title=f"{dev.name} / {args.workload}: predicted from {len(run.samples)} profiled modes",
    )  # fmt: skip
    png = figure_png(ax)
    put(out, "time_power.png", png)
    front = run.front[[c for c in FRONT_COLUMNS if c in run.front.columns]]
    body = (
        f"<h2>The pick under {args.power_cap:g} W</h2>{_answer(picks, dev.knobs)}"
        f'<h2>Pareto front</h2><p><img alt="Pareto front" style="max-width:100%;width:750px" '
        f'src="data:image/png;base64,{base64.b64encode(png).decode()}"></p>'
        '<p class="note">Grey: what the twin truly does; blue: predicted for every mode; '
        "green: the profiled modes; orange: the predicted Pareto front; red: the cap and the "
        f"first pick above.</p><h2>Details</h2>{facts_html(details)}"
        f"<h2>The predicted Pareto front, mode by mode</h2>{table_html(front)}"
    )
    page = render_page(f"PowerTrain demo: {dev.name} / {args.workload}", body)
    put(out, "report.html", page)
    _print_answer(picks, dev.knobs, args.power_cap, say)
    width = max(map(len, details))
    for k, v in details.items():
        say(f"   {k:<{width}}  {v}")
    put(out, "picks.csv", pd.DataFrame(picks).to_csv(index=False))
    put(out, "summary.csv", pd.DataFrame([details]).to_csv(index=False))
    say(
        f"wrote {out}/report.html, time_power.png, picks.csv, estimates.csv, "
        "pareto_front.csv, samples.csv, summary.csv"
    )


def _print_answer(picks: list, knobs, cap: float, say) -> None:
    from ..report.pages import mode_text

    say(f"the pick under {cap:g} W:")
    for p in picks:
        true = ""
        if p.get("penalty_pct") is not None:
            true = f"; on the twin {p['penalty_pct']:+.1f} % vs optimum, "
            true += f"{p['over_cap_w']:+.1f} W vs cap"
        sure = f", {p['how sure']} sure" if p["how sure"] else ""
        say(
            f" - {p['name']}: {mode_text(p, [*knobs, 'batch_size'])}: {p['time_ms']:.1f} ms at "
            f"{p['power_w']:.1f} W {_values(p)}{sure}, {p['board_min']:.1f} board min{true}"
        )


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "demo",
        help="run the whole flow on the digital twin with the shipped reference model",
        description="Profile 50 modes on the digital twin, transfer the shipped reference "
        "model, predict every mode and pick under the power cap three ways (confirmed on the "
        "board, predicted with a margin, predicted), then write an HTML report. No hardware "
        "needed; the answer is printed first.",
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
    p.add_argument("--power-cap", type=float, default=30.0, help="power cap in watts (30)")
    p.add_argument(
        "--k-sigma",
        type=float,
        default=None,
        help="margin of the prediction-only pick, in predicted power std (default: the "
        "package's safe margin, 3; 0: only the plain pick)",
    )
    p.add_argument(
        "--confirm",
        type=int,
        default=25,
        help="measurements pt.decide may add to confirm the pick on the board (25; 0: none)",
    )
    p.add_argument("--seed", type=int, default=0, help="seeds the twin and the sample (0)")
    p.add_argument("-o", "--out", default="powertrain-demo", help="output folder")
    p.set_defaults(func=cmd_demo)


if __name__ == "__main__":  # pragma: no cover
    from . import main

    sys.exit(main(["demo", *sys.argv[1:]]))
