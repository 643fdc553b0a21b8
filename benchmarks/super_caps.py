"""Held-out rows: the Orin Nano Super twin, from 50 profiled modes to a cap table.

The Orin Nano 8GB on its Super image (``orin-nano-super``: GPU to 1020 MHz, memory to
3199 MHz) is new to the catalog; its twin constants follow from its spec by the datasheet
rules of docs/twin.md, and nothing in the package (no predictor default, margin or twin
constant) was chosen on it. For each workload and draw: profile 50 random modes on the
twin (measured, with its noise), transfer the Orin AGX ResNet-18 reference with them
(the paper's cross-device loss), then

- accuracy: MAPE of time and power over every other mode of the space (the truth is the
  twin's expectation);
- decisions: under each cap, the fastest mode predicted to fit (plain, and with the
  package's safe margin of predicted sigmas), the fastest preset whose *name* fits the
  cap (a user who reads "15W" as a budget) and MAXN_SUPER, each scored by its true time
  against the true optimum (penalty %) and its true power against the cap.

    python benchmarks/super_caps.py --quick                      # 1 workload, 1 draw
    python benchmarks/super_caps.py --json benchmarks/results/orin_nano_super.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import powertrain as pt
from powertrain.decisions.optimise import SAFE_K_SIGMA
from powertrain.errors import NoFeasibleModeError
from powertrain.metrics import mape
from powertrain.predictor import ExtrapolationWarning

DEVICE = "orin-nano-super"
REFERENCE = "orin-agx/resnet18"
WORKLOADS = ("resnet18", "mobilenetv3")
KNOBS = ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz")


def truth_of(twin: pt.Twin, batch: int) -> pd.DataFrame:
    """Every mode with the twin's expected time and power (what a pick really does)."""
    modes = twin.device.power_modes()
    return modes.join(twin.expected(modes, batch)[["time_ms", "power_w"]])


def caps_for(truth: pd.DataFrame, step_w: float = 0.5) -> np.ndarray:
    """Caps every ``step_w`` W from just above the lowest true power to the highest."""
    lo, hi = float(truth.power_w.min()), float(truth.power_w.max())
    return np.arange(np.ceil(lo / step_w) * step_w + step_w, hi + step_w, step_w)


def _pick(est: pd.DataFrame, cap: float, k_sigma: float) -> int | None:
    try:
        return int(pt.fastest_under(est, cap, k_sigma=k_sigma).name)
    except NoFeasibleModeError:
        return None


def _preset_by_name(truth_presets: pd.DataFrame, cap: float) -> int:
    """The fastest preset whose name's wattage is at or below the cap (else the lowest
    named one): what reading "15W" as a power budget picks."""
    budgets = truth_presets.budget_w.to_numpy(dtype=float)
    fits = np.flatnonzero(np.nan_to_num(budgets, nan=np.inf) <= cap)
    if not fits.size:
        return int(np.nanargmin(budgets))
    return int(fits[np.argmin(truth_presets.time_ms.to_numpy()[fits])])


def decisions(
    truth: pd.DataFrame, est: pd.DataFrame, presets: pd.DataFrame, caps: np.ndarray, n: int
) -> tuple[list[dict], list[dict]]:
    """Per cap and strategy: the pick's true penalty % and power (records), and the
    plain PT@n cap table (cap, the pick's knobs, predicted and true power)."""
    rows, table = [], []
    tt, tp = truth.time_ms.to_numpy(), truth.power_w.to_numpy()
    maxn = presets.set_index("name").loc["MAXN_SUPER"]
    for cap in caps:
        fit = tp <= cap
        best = tt[fit].min() if fit.any() else np.nan
        picks: dict[str, tuple[float, float]] = {}
        for name, k in ((f"PT@{n}", 0.0), (f"PT@{n}+{SAFE_K_SIGMA:g}s", SAFE_K_SIGMA)):
            i = _pick(est, float(cap), k)
            if i is not None:
                picks[name] = (tt[i], tp[i])
            if k == 0.0:
                table.append(_table_row(cap, i, est, truth, best))
        j = _preset_by_name(presets, float(cap))
        picks["PRESET by name"] = (presets.time_ms.iloc[j], presets.power_w.iloc[j])
        picks["MAXN_SUPER"] = (float(maxn.time_ms), float(maxn.power_w))
        for name, (t, p) in picks.items():
            rows.append(
                {
                    "strategy": name,
                    "cap_w": float(cap),
                    "penalty_pct": 100 * (t / best - 1) if best == best else np.nan,
                    "over_cap_w": p - cap,
                }
            )
    return rows, table


def _table_row(cap, i, est, truth, best) -> dict:
    if i is None:
        return {"cap_w": float(cap), "pick": "none predicted to fit"}
    r = truth.loc[i]
    return {
        "cap_w": float(cap),
        "pick": " / ".join(f"{r[k]:g}" for k in KNOBS),
        "predicted_w": round(float(est.power_w.loc[i]), 2),
        "true_w": round(float(r.power_w), 2),
        "penalty_pct": round(100 * (r.time_ms / best - 1), 1) if best == best else None,
    }


def run_one(workload: str, draw: int, n: int, ref: pt.Predictor) -> tuple[dict, list, list]:
    """One workload and draw: accuracy figures, decision records and the cap table."""
    twin = pt.Twin(DEVICE, workload, seed=draw)
    batch = twin.workload.default_batch_size
    truth = truth_of(twin, batch)
    drawn = pt.get_device(DEVICE).sample(n, seed=draw)
    samples = pt.profile(twin, drawn, batch, progress=False)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExtrapolationWarning)
        model = ref.transfer(samples, loss="mape", random_state=draw)
        est = model.predict(truth[list(KNOBS)], batch_size=batch)
    secs = time.perf_counter() - t0
    est.index = truth.index
    held = ~truth[list(KNOBS)].apply(tuple, axis=1).isin(drawn[list(KNOBS)].apply(tuple, axis=1))
    acc = {
        "workload": workload,
        "draw": draw,
        "n_profiled": n,
        "n_held_out": int(held.sum()),
        "time_mape": mape(truth.time_ms[held], est.time_ms[held]),
        "power_mape": mape(truth.power_w[held], est.power_w[held]),
        "transfer_s": round(secs, 1),
    }
    dev = pt.get_device(DEVICE)
    pre = dev.presets()
    presets = pre.join(
        twin.expected(pre.drop(columns=["name", "budget_w"]), batch)[["time_ms", "power_w"]]
    )
    rows, table = decisions(truth, est, presets, caps_for(truth), n)
    for r in rows:
        r.update(workload=workload, draw=draw)
    return acc, rows, table


def summarise(rows: pd.DataFrame) -> list[dict]:
    """Per workload and strategy: median and Q1-Q3 penalty, share over cap + 1 W."""
    out = []
    for (w, s), g in rows.groupby(["workload", "strategy"], sort=False):
        pen = g.penalty_pct.dropna()
        out.append(
            {
                "workload": w,
                "strategy": s,
                "penalty_median": float(pen.median()),
                "penalty_q1": float(pen.quantile(0.25)),
                "penalty_q3": float(pen.quantile(0.75)),
                "over_cap_1w_pct": float(100 * (g.over_cap_w > 1.0).mean()),
                "n_picks": int(len(g)),
            }
        )
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 workload, 1 draw")
    ap.add_argument("--draws", type=int, default=3)
    ap.add_argument("--n", type=int, default=50, help="profiled modes per draw (50)")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    workloads, draws = (WORKLOADS[:1], 1) if args.quick else (WORKLOADS, args.draws)
    ref = pt.Predictor.from_pretrained(REFERENCE)
    acc, rows, cap_table = [], [], []
    for w in workloads:
        for d in range(draws):
            a, r, table = run_one(w, d, args.n, ref)
            acc.append(a)
            rows += r
            if not cap_table:
                cap_table = [dict(t, workload=w, draw=d) for t in table]
            print(f"{w} draw {d}: time {a['time_mape']:.1f} %, power {a['power_mape']:.1f} %",
                  file=sys.stderr)  # fmt: skip
    out = {
        "device": DEVICE,
        "reference": REFERENCE,
        "held_out": "every row: no constant of the package or its twin was chosen on this device",
        "draws": draws,
        "profiled_modes": args.n,
        "modes": pt.get_device(DEVICE).n_modes,
        "accuracy": acc,
        "decisions": summarise(pd.DataFrame(rows)),
        "cap_table": cap_table,
    }
    print(pd.DataFrame(acc).to_string(index=False))
    print(pd.DataFrame(out["decisions"]).round(2).to_string(index=False))
    print(pd.DataFrame(cap_table).to_string(index=False))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    main()
