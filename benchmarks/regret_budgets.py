"""``tuning_regret.py --budgets``: the twin rows at several budgets, one table each, and
(``--background N``) the background-decision table (tuner against tuner-bg, paced).

What benchmarks/results/tuning_regret_hardcap.{json,txt} hold. The text is a function
of the rows alone (:func:`report`), so ``tuning_regret.py --show`` prints it again from
a saved file.
"""

from __future__ import annotations

import json
import textwrap
from types import ModuleType
from typing import Callable

import pandas as pd

#: the background table's run: one budget and cap, the workloads it keeps of
#: ``--twin-workloads``, tuner and tuner-bg, each step paced at ``--pace``
BG_BUDGET, BG_CAP, BG_WORKLOADS = 20, 30.0, ("mobilenetv3", "yolov8n")
#: the columns a budget's table shows (the JSON's summary keeps them all)
SHOWN = [
    "cases",
    "time_regret_pct_median",
    "time_regret_pct_q3",
    "stall_regret_pct_median",
    "stall_s_median",
    "stall_s_max",
    "pick_penalty_pct_median",
    "explore_min_median",
    "explore_over_cap_pct_median",
    "explore_over_cap_pct_max",
    "picks_over_cap_1w_pct",
    "measured_median",
]
ABOUT = (
    "tuner-safe: pt.Tuner(hard_cap=True), exploring only inside the cap's safe set "
    "(powertrain.decisions.hard_cap: a 99 % upper bound on the transferred model's "
    "power, expanders towards what is not yet known safe, grown by one configuration "
    "when nothing in reach is, a step back when the mean of a probe's readings is over "
    "the cap beyond their noise); tuner-bg: background=True, "
    "each step also sleeping its simulated time. The stall seconds are host time (inside "
    "the tuner's hooks) on the machine that ran this, inflated by whatever else ran "
    "there; every other figure is fixed by the seeds, except tuner-bg's (how many steps "
    "its decision overlaps). Columns as in tuning_regret.txt; stall_regret: the time "
    "regret with the stall added; explore_over_cap_pct: share of the exploring time in "
    "configurations whose true (noise-free) power exceeds the cap, median and largest run."
)


def run(args, tr: ModuleType) -> dict:
    """The rows of every budget (one strategy after another), then the background's;
    ``tr``: tuning_regret (its twin_rows, summarise and TUNING)."""
    rows: list[dict] = []
    for budget in args.budgets:
        for strategy in args.strategies:
            got = tr.twin_rows(
                args.draws, budget, args.twin_caps, args.twin_epochs, [strategy],
                args.twin_workloads, args.pace,
            )  # fmt: skip
            rows += [{**r, "budget": budget} for r in got]
    wls = [w for w in BG_WORKLOADS if w in args.twin_workloads]
    bg = []
    if args.background and wls:
        bg = tr.twin_rows(
            args.background, BG_BUDGET, [BG_CAP], args.twin_epochs,
            ["tuner", "tuner-bg"], wls, args.pace,
        )  # fmt: skip
    out = {
        "args": vars(args),
        "summary": by_budget(rows, tr.summarise).to_dict("records"),
        "background_summary": background(bg).to_dict("records") if bg else [],
        "rows": json.loads(pd.DataFrame(rows).to_json(orient="records")),
        "background_rows": json.loads(pd.DataFrame(bg).to_json(orient="records")) if bg else [],
    }
    print(report(out, tr))
    return out


def by_budget(rows: list[dict], summarise: Callable[[list[dict]], pd.DataFrame]) -> pd.DataFrame:
    """``summarise`` of each budget's rows, a budget column first."""
    df = pd.DataFrame(rows)
    parts = [
        summarise(df[df.budget == b].drop(columns="budget").to_dict("records"))
        .reset_index()
        .assign(budget=b)
        for b in df.budget.unique()
    ]
    out = pd.concat(parts, ignore_index=True)
    return out[["budget", *out.columns[:-1]]]


def background(rows: list[dict]) -> pd.DataFrame:
    """Per workload and strategy: the stall and the decision's host time beside the
    regret (medians over the draws)."""
    df = pd.DataFrame(rows)
    df["time_regret_pct"] = 100 * (df.time_s / df.oracle_s - 1)
    df["stall_regret_pct"] = 100 * ((df.time_s + df.stall_s) / df.oracle_s - 1)
    df["over_cap_pct"] = 100 * df.over_cap_s / df.explore_s.clip(lower=1e-12)
    g = df.groupby(["workload", "strategy"], sort=False)
    med = ["steps_while_deciding", "time_regret_pct", "stall_regret_pct", "over_cap_pct"]
    return (
        g.agg(
            runs=("draw", "size"),
            stall_s_max=("stall_s", "max"),
            stall_s_median=("stall_s", "median"),
            decide_s_median=("decide_s", "median"),
            **{c: (c, "median") for c in [*med, "measured"]},
        )
        .round(3)
        .reset_index()
    )


def report(out: dict, tr: ModuleType) -> str:
    """The text: what ran, a table per budget, the background table."""

    df = pd.DataFrame(out["rows"])
    n = df.draw.nunique()
    budgets = [int(b) for b in df.budget.unique()]
    caps = "/".join(f"{c:g}" for c in df.cap_w.unique())
    groups: list[tuple[list[str], str]] = []  # "a (tuning), b, c (held-out)"
    for w in df.workload.unique():
        split = "tuning" if w in tr.TUNING else "held-out"
        if groups and groups[-1][1] == split:
            groups[-1][0].append(w)
        else:
            groups.append(([w], split))
    wls = ", ".join(f"{', '.join(ws)} ({split})" for ws, split in groups)
    bg = " and the background decision (tuner against tuner-bg)" if out["background_rows"] else ""
    top = (
        f"Tuning regret by budget ({' / '.join(map(str, budgets))}) of "
        f"{', '.join(df.strategy.unique())} on the Orin AGX twin (batch 16), {n} draws "
        f"(tuner seeds 0-{n - 1}){bg}. {ABOUT}"
    )
    text = [textwrap.fill(top, 88, break_on_hyphens=False)]
    for b in budgets:
        table = tr.summarise(df[df.budget == b].drop(columns="budget").to_dict("records"))
        text += [f"\nBudget {b} ({n} draws x caps {caps} W x {wls}):\n", table[SHOWN].to_string()]
    if out["background_rows"]:
        b_df = pd.DataFrame(out["background_rows"])
        text += [
            f"\nBackground decision (budget {BG_BUDGET}, cap "
            f"{'/'.join(f'{c:g}' for c in b_df.cap_w.unique())} W, {b_df.draw.nunique()} draws, "
            "steps paced at their simulated time):\n",
            background(out["background_rows"]).set_index(["workload", "strategy"]).to_string(),
        ]
    return "\n".join(text)
