"""The PowerTrain paper's optimisation study (§5, Figs. 12-13) on the digital twin.

For every power cap of a sweep (Orin AGX: 17-50 W in 1 W steps) each strategy picks a
mode of the device's profiling grid (4,368 modes, the paper's ground truth: it optimises
over its profiled grid); the pick is scored against the true optimum under the cap, with
the twin's expected values (``Twin.expected``) as the truth:

* time penalty %: true time of the pick over the optimum's, minus 1 (counted whether or
  not the pick overshoots the cap); median and Q1-Q3 over caps x draws;
* A/L %: picks whose true power exceeds the cap; A/L+1 %: by more than 1 W;
* excess-power AUC: mean over caps of max(0, true power - cap), W per solution.

Strategies: PT@50 (transfer of the shipped reference from 50 profiled modes), PT@50+ks
(the same with a k-sigma power margin), NN@50 (same MLP from scratch), RND@50 (best
observed among the 50), MAXN, PRESET (the best nvpmodel preset whose budget fits), and
ORACLE (physics + every learnable deviation of the twin, picking by its own power),
and ACT@25 / ACT@50 (``pt.decide`` with the board in the loop: one decision over the
sweep measuring 25 / 50 configurations on a board that replays the twin corpus; the pick
per cap is the fastest measured configuration under it).

Usage: ``python benchmarks/optimisation.py [--draws 10] [--quick] [--json PATH] [--png PATH]``
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

import powertrain as pt
from powertrain.errors import DataError, NoFeasibleModeError
from powertrain.metrics import excess_power, time_penalty_pct
from powertrain.twin import deviations

CAPS_ORIN = tuple(float(c) for c in range(17, 51))
WORKLOADS = ("mobilenetv3", "yolov8n", "bert-base", "lstm", "resnet18")
STRATEGIES = (
    "PT@50",
    "PT@50+0.5s",
    "PT@50+1s",
    "PT@50+2s",
    "PT@50+rr",
    "PT@50+obs",
    "PT@35+15",
    "PT@35+15+obs",
    "NN@50",
    "RND@50",
    "ACT@25",
    "ACT@50",
    "MAXN",
    "PRESET",
    "ORACLE",
)
#: the board in the loop (powertrain.decide): one decision over the whole sweep, on a board
#: replaying the twin corpus, with N measured configurations (PT@N's board time); the
#: pick per cap is the fastest *measured* configuration under it
ACTIVE = {
    "ACT@25": "pt.decide over the sweep, 25 measured configurations (start 10), "
    "the fastest measured under each cap",
    "ACT@50": "the same with 50 (one run: the loop measures the same first 25)",
}
#: experimental selection rules, not in the library yet
EXPERIMENTAL = {
    "PT@50+rr": "among modes predicted within 2 % of the fastest feasible, the lowest "
    "power + 1 sigma (re-rank near-ties by uncertainty)",
    "PT@50+obs": "the 50 profiled modes use their measured time and power, the rest PT's "
    "predictions",
}
#: the library's refinement (powertrain.decisions.refine): the same 50-mode budget, 35 random modes,
#: then the 15 modes the first transfer would pick across the sweep, then one transfer on all
REFINED = {
    "PT@35+15": "pt.refine_modes: 35 random + 15 predicted picks across the sweep, re-transfer",
    "PT@35+15+obs": "the same, profiled modes at their measured values (pt.with_observed)",
}
#: the paper's figures (PowerTrain FGCS 2024, §5.2, Figs. 12-13): median time penalty %
PAPER = {
    "PT@50": "median 0.7 (MobileNet), 0 (YOLO), 1 overall; A/L+1 26.5 overall, <20 for 6/7 DNNs",
    "NN@50": "median 5 (MobileNet), 4 (YOLO)",
    "RND@50": "12-28, never over the cap",
    "MAXN": "negative (faster than the optimum), almost always over the cap",
}


# ------------------------------------------------------------------------- metrics --
def check_caps(caps: Sequence[float]) -> np.ndarray:
    """The cap sweep as an array; empty sweeps and non-positive caps are errors."""
    arr = np.asarray(list(caps), dtype=float)
    if arr.size == 0:
        raise DataError("the power-cap sweep is empty: give at least one cap in watts")
    bad = arr[~(np.isfinite(arr) & (arr > 0))]
    if bad.size:
        raise DataError(f"power caps must be positive watts, found {bad[0]!r}")
    return arr


def check_strategies(names: Sequence[str]) -> list[str]:
    unknown = [n for n in names if n not in STRATEGIES]
    if unknown:
        raise DataError(f"unknown strategy {unknown[0]!r}; known: {', '.join(STRATEGIES)}")
    return list(names)


def optimum_times(truth: pd.DataFrame, caps: np.ndarray) -> np.ndarray:
    """Fastest true time under each cap (nan where nothing fits)."""
    p, t = truth.power_w.to_numpy(), truth.time_ms.to_numpy()
    return np.array([t[p <= c].min() if (p <= c).any() else np.nan for c in caps])


def score_picks(
    pick_time: np.ndarray, pick_power: np.ndarray, best_time: np.ndarray, caps: np.ndarray
) -> dict[str, np.ndarray]:
    """Per-cap penalty %, the picks' true power and excess power (W) of picks given by
    their TRUE time/power."""
    power = np.asarray(pick_power, dtype=float)
    return {
        "penalty_pct": time_penalty_pct(pick_time, best_time),
        "power_w": power,
        "cap_w": np.asarray(caps, dtype=float),
        "excess_w": power - caps,
    }


def summarise(
    penalty_pct: np.ndarray, true_power_w: np.ndarray, caps: np.ndarray
) -> dict[str, float]:
    """Median and Q1-Q3 of penalty, A/L %, A/L+1 % and normalised excess-power AUC
    (:func:`powertrain.metrics.excess_power`)."""
    pen = np.asarray(penalty_pct, dtype=float)
    ok = np.isfinite(pen)
    q1, med, q3 = np.percentile(pen[ok], [25, 50, 75])
    over = excess_power(np.asarray(true_power_w, float)[ok], np.asarray(caps, float)[ok])
    return {
        "penalty_median": float(med),
        "penalty_q1": float(q1),
        "penalty_q3": float(q3),
        "al_pct": over["above_limit_pct"],
        "al1_pct": over["above_limit_1w_pct"],
        "auc_w": over["excess_auc_w"],
        "n": int(ok.sum()),
    }


def pick_under(est: pd.DataFrame, caps: np.ndarray, k_sigma: float = 0.0) -> np.ndarray:
    """Row positions of ``pt.fastest_under`` per cap; where nothing is predicted to fit,
    the row with the lowest guarded power (the least bad choice a user could make)."""
    out = []
    pos = pd.Series(np.arange(len(est)), index=est.index)
    for c in caps:
        try:
            out.append(int(pos[pt.fastest_under(est, float(c), k_sigma=k_sigma).name]))
        except NoFeasibleModeError:
            guard = est.power_w + k_sigma * est.get("power_w_std", 0.0)
            out.append(int(np.argmin(guard.to_numpy())))
    return np.asarray(out)


def pick_rerank(est: pd.DataFrame, caps: np.ndarray, tie: float = 0.02) -> np.ndarray:
    """Among modes predicted feasible and within ``tie`` of the fastest of them, the one
    with the lowest power + 1 sigma: near-ties are decided by what is safest."""
    base = pick_under(est, caps)
    t, p = est.time_ms.to_numpy(), est.power_w.to_numpy()
    guard = p + est.get("power_w_std", pd.Series(0.0, index=est.index)).to_numpy()
    out = []
    for c, j in zip(caps, base):
        near = np.flatnonzero((p <= c) & (t <= t[j] * (1 + tie)))
        out.append(int(near[np.argmin(guard[near])]) if near.size else int(j))
    return np.asarray(out)


# ---------------------------------------------------------------------- strategies --
def check_reference(reference: str, device: str) -> None:
    """A reference transfers within its own device only (the corpus is ``device``'s)."""
    ref_dev = reference.split("/")[0]
    if ref_dev != device:
        raise DataError(
            f"reference {reference!r} is for device {ref_dev!r}, but the corpus is from "
            f"{device!r}: transfer needs a reference of the same device"
        )


def score_workload(
    device: str,
    workload: str,
    reference: str,
    caps: np.ndarray,
    draws: int,
    strategies: Sequence[str],
    n_samples: int = 50,
    seed: int = 0,
    epochs: int | None = None,
) -> dict[str, dict]:
    """Every strategy's per-cap scores over ``draws`` sample draws for one workload."""
    dev = pt.get_device(device)
    check_reference(reference, dev.name)
    twin = pt.Twin(dev, workload, seed=seed)
    grid = dev.profiling_grid().reset_index(drop=True)
    b = twin.workload.default_batch_size
    truth = twin.expected(grid, b)
    best = optimum_times(truth, caps)
    tt, tp = truth.time_ms.to_numpy(), truth.power_w.to_numpy()
    scores: dict[str, list] = {s: [] for s in strategies}

    def add(name: str, rows: np.ndarray) -> None:
        scores[name].append(score_picks(tt[rows], tp[rows], best, caps))

    if "MAXN" in strategies:
        m = twin.expected(dev.maxn(), b).iloc[0]
        scores["MAXN"].append(
            score_picks(np.full(len(caps), m.time_ms), np.full(len(caps), m.power_w), best, caps)
        )
    if "PRESET" in strategies:
        pre = dev.presets()
        pe = twin.expected(pre.drop(columns=["name", "budget_w"]), b)  # with gpu_tpcs
        budgets = pre["budget_w"].to_numpy(dtype=float)
        times, powers = [], []
        for c in caps:
            fits = np.flatnonzero(np.nan_to_num(budgets, nan=np.inf) <= c)
            j = (
                fits[np.argmin(pe.time_ms.to_numpy()[fits])]
                if fits.size
                else int(np.nanargmin(budgets))
            )
            times.append(pe.time_ms.iloc[j])
            powers.append(pe.power_w.iloc[j])
        scores["PRESET"].append(score_picks(np.array(times), np.array(powers), best, caps))
    if "ORACLE" in strategies:
        add("ORACLE", pick_under(deviations.oracle_expected(twin, grid, b), caps))
    needs_samples = {s for s in strategies if s.startswith(("PT", "NN", "RND"))}
    if needs_samples:
        from powertrain.predictor.baselines import nn_from_scratch

        ref = pt.Predictor.from_pretrained(reference) if "PT" in "".join(needs_samples) else None
        for d in range(draws):
            rng = np.random.default_rng(1000 * seed + d)
            drawn = rng.choice(len(grid), size=n_samples, replace=False)
            samples = pt.profile(
                pt.Twin(dev, workload, seed=seed), grid.iloc[drawn], batch_size=b, progress=False
            )
            # the profiler may visit modes in its own order: map rows back to the grid
            keys = list(grid.columns)
            where = (
                samples[keys].reset_index(drop=True).merge(grid.reset_index(), how="left", on=keys)
            )
            idx = where["index"].to_numpy()  # grid position of each sample row, in order
            if len(idx) != len(samples) or where["index"].isna().any():
                raise DataError("profiled samples do not map one-to-one onto the grid")
            if "RND@50" in strategies:
                obs = samples.reset_index(drop=True)
                rows = pick_under(obs[["time_ms", "power_w"]], caps)
                add("RND@50", idx[rows])
            kw = {} if epochs is None else {"epochs": epochs}
            # transfer -> predict through the library's one workflow (powertrain.run_case)
            case = dict(batch_size=b, reference=ref, modes=grid, random_state=d, seed=seed,
                        transfer_params=kw)  # fmt: skip
            if ref is not None:
                est = pt.run_case(dev, workload, samples=samples, **case).estimates
                for name, k in (
                    ("PT@50", 0.0),
                    ("PT@50+0.5s", 0.5),
                    ("PT@50+1s", 1.0),
                    ("PT@50+2s", 2.0),
                ):
                    if name in strategies:
                        add(name, pick_under(est, caps, k_sigma=k))
                if "PT@50+rr" in strategies:
                    add("PT@50+rr", pick_rerank(est, caps))
                if "PT@50+obs" in strategies:
                    seen = est.copy()
                    pos = seen.columns.get_indexer(["time_ms", "power_w"])
                    seen.iloc[idx, pos] = samples[["time_ms", "power_w"]].to_numpy()
                    if "power_w_std" in seen.columns:
                        seen.iloc[idx, seen.columns.get_loc("power_w_std")] = 0.0
                    add("PT@50+obs", pick_under(seen, caps))
            if ref is not None and any(n in strategies for n in REFINED):
                # the first 35 of the random draw (the profiler reorders modes high to low)
                first = samples.reset_index(drop=True)[np.isin(idx, drawn[:35])]
                run = pt.run_case(
                    dev, workload, samples=first, refine=15,
                    refine_range=(caps.min(), caps.max()), **case,
                )  # fmt: skip
                both, est2 = run.samples, run.estimates
                if "PT@35+15" in strategies:
                    add("PT@35+15", pick_under(est2, caps))
                if "PT@35+15+obs" in strategies:
                    add("PT@35+15+obs", pick_under(pt.with_observed(est2, both), caps))
            if "NN@50" in strategies:
                est = nn_from_scratch(samples, random_state=d, **kw).predict(grid, b)
                add("NN@50", pick_under(est, caps))
    active = sorted((s for s in strategies if s in ACTIVE), key=lambda s: int(s.split("@")[1]))
    if active:
        for d in range(draws):
            for name, rows in active_picks(dev, workload, reference, grid, b, caps, d, active):
                add(name, rows)
    out = {}
    for s, lst in scores.items():
        pen = np.concatenate([x["penalty_pct"] for x in lst])
        power = np.concatenate([x["power_w"] for x in lst])
        cap = np.concatenate([x["cap_w"] for x in lst])
        out[s] = {
            **summarise(pen, power, cap),
            "per_cap_penalty": np.nanmedian(
                np.vstack([x["penalty_pct"] for x in lst]), axis=0
            ).tolist(),
            "per_cap_excess": np.median(np.vstack([x["excess_w"] for x in lst]), axis=0).tolist(),
        }
    return out


def active_picks(dev, workload, reference, grid, batch_size, caps, draw, names):
    """Grid rows picked per cap by ``names`` (``ACT@N``) from one ``pt.decide`` over the
    sweep with the largest N as budget: ACT@k scores the first k measurements (the loop is
    deterministic given its seed, so a budget-k run measures exactly those). Where nothing
    measured fits a cap the lowest-power measured configuration stands in (scored as
    over the cap), as ``pick_under`` does."""
    from powertrain.backends import ReplayBackend
    from powertrain.data.corpora import load_corpus

    corpus = load_corpus(f"{dev.name}_{workload}_bs{batch_size}")
    budget = max(int(n.split("@")[1]) for n in names)
    ref = pt.Predictor.from_pretrained(reference)
    dec = pt.decide(ReplayBackend(corpus), ref, caps, budget=budget, start=10, seed=draw)
    ran = dec.measurements[dec.measurements["round"] >= 0].reset_index(drop=True)
    keys = list(grid.columns)
    where = ran[keys].round(3).merge(grid.round(3).reset_index(), how="left", on=keys)
    if where["index"].isna().any():
        raise DataError("a measured configuration is not in the profiling grid")
    pos = where["index"].to_numpy(int)
    for name in names:
        first = ran.iloc[: int(name.split("@")[1])]
        power, time_ = first.power_w.to_numpy(), first.time_ms.to_numpy()
        rows = []
        for c in caps:
            fits = np.flatnonzero(power <= c)
            j = fits[np.argmin(time_[fits])] if fits.size else int(np.argmin(power))
            rows.append(pos[j])
        yield name, np.asarray(rows)


# ---------------------------------------------------------------------------- main --
def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="2 draws, 2 workloads, 5 W cap steps")
    ap.add_argument("--workloads", nargs="*", default=list(WORKLOADS))
    ap.add_argument("--strategies", nargs="*", default=list(STRATEGIES))
    ap.add_argument("--caps", nargs="*", type=float, default=list(CAPS_ORIN))
    ap.add_argument("--reference", default="orin-agx/resnet18")
    ap.add_argument("--device", default="orin-agx")
    ap.add_argument("--json")
    ap.add_argument("--png")
    ap.add_argument("--show", metavar="JSON", help="print the tables of a saved --json run")
    args = ap.parse_args(argv)
    if args.show:
        with open(args.show) as f:
            saved = json.load(f)
        print_results(saved["results"])
        return saved
    caps = check_caps(args.caps)
    strategies = check_strategies(args.strategies)
    draws, workloads = args.draws, args.workloads
    if args.quick:
        draws, workloads, caps = 2, workloads[:2], caps[::5]
    if draws < 1:
        raise DataError(f"--draws must be >= 1, got {draws}")
    t0 = time.time()
    results = {}
    for wl in workloads:
        ref = (
            "orin-agx/mobilenetv3"
            if (wl == "resnet18" and args.device == "orin-agx")
            else args.reference
        )
        if wl == "resnet18":
            try:
                pt.Predictor.from_pretrained(ref)
            except Exception:
                ref = args.reference
        results[wl] = {
            "reference": ref,
            "strategies": score_workload(args.device, wl, ref, caps, draws, strategies),
        }
    print(
        f"Optimisation on the twin ({args.device}, caps {caps.min():g}-{caps.max():g} W, "
        f"{len(caps)} caps, {draws} draws; truth = Twin.expected over the 4,368-mode grid)"
    )
    print_results(results)
    print(f"\nwall time {time.time() - t0:.0f} s")
    out = {
        "device": args.device,
        "caps": caps.tolist(),
        "draws": draws,
        "results": results,
        "paper": PAPER,
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    if args.png:
        plot(out, args.png)
    return out


#: which workloads defaults were chosen on; the rest are held out
TUNING = {"mobilenetv3": "tuning", "resnet18": "tuning"}


def print_results(results: dict) -> None:
    """The table, the decision targets with PASS/MISS, and the paper."""
    print(
        f"{'workload':12s} {'set':8s} {'strategy':13s} {'median%':>8s} {'Q1%':>6s} {'Q3%':>6s} "
        f"{'A/L%':>6s} {'A/L+1%':>7s} {'AUC W':>6s}"
    )
    for wl, r in results.items():
        for s, v in r["strategies"].items():
            print(
                f"{wl:12s} {TUNING.get(wl, 'held-out'):8s} {s:13s} {v['penalty_median']:8.2f} "
                f"{v['penalty_q1']:6.2f} {v['penalty_q3']:6.2f} "
                f"{v['al_pct']:6.1f} {v['al1_pct']:7.1f} {v['auc_w']:6.2f}"
            )
    print("\nExperimental rules: " + "; ".join(f"{k}: {v}" for k, v in EXPERIMENTAL.items()))
    print("Refinement (library): " + "; ".join(f"{k}: {v}" for k, v in REFINED.items()))
    print("Board in the loop: " + "; ".join(f"{k}: {v}" for k, v in ACTIVE.items()))
    print(
        "Tuning disclosure: the twin's interaction size was set after looking at PT@50 on all "
        "workloads (docs/twin.md), and the 35/15 refinement split after looking at MobileNetV3 "
        "and YOLOv8n; the transfer's one-standard-error choice rule was chosen on MobileNetV3 and "
        "ResNet-18, with YOLOv8n, BERT and LSTM looked at (PT@50 and MAPE of each variant tried) "
        "to diagnose YOLOv8n's penalty and to check that the rule holds; 'held-out' means no "
        "predictor default was chosen on it."
    )
    print("\nTargets")

    def check(label: str, value: float, limit: float) -> None:
        ok = value <= limit
        by = "" if ok else f" (by {value - limit:.2f})"
        print(f"  {label:58s} {value:7.2f} <= {limit:g}  {'PASS' if ok else 'MISS' + by}")

    for wl in ("mobilenetv3", "yolov8n"):
        if wl in results:
            st = results[wl]["strategies"]
            for s in ("PT@50", "PT@35+15+obs"):
                if s in st:
                    check(f"{wl} {s} median penalty %", st[s]["penalty_median"], 1.0)
    for wl, r in results.items():
        st = r["strategies"]
        if "PT@50" in st:
            check(f"{wl} PT@50 median penalty % (issue 17)", st["PT@50"]["penalty_median"], 2.0)
        if "PT@50" in st and "NN@50" in st:
            check(
                f"{wl} PT@50 median - NN@50 median (points)",
                st["PT@50"]["penalty_median"] - st["NN@50"]["penalty_median"],
                0.0,
            )
            if st["NN@50"]["al1_pct"] > 50:  # a "fast" median made of picks over the cap
                print(
                    f"  {'':58s} (NN@50 A/L+1 {st['NN@50']['al1_pct']:.0f} %: its median "
                    "counts picks over the cap)"
                )
        if "PT@50+1s" in st:
            check(f"{wl} PT@50+1s A/L+1 %", st["PT@50+1s"]["al1_pct"], 5.0)
            check(f"{wl} PT@50+1s median penalty %", st["PT@50+1s"]["penalty_median"], 3.0)
    al1 = [
        r["strategies"]["PT@50"]["al1_pct"] for r in results.values() if "PT@50" in r["strategies"]
    ]
    if al1:
        print(f"  PT@50 A/L+1 over all workloads: {np.mean(al1):.1f} % (paper 26.5 %)")
    print("\nPaper (PowerTrain FGCS 2024 §5.2):")
    for k, v in PAPER.items():
        print(f"  {k:8s} {v}")


def plot(out: dict, path: str) -> None:
    """Median penalty and excess power vs cap per strategy, one column per workload."""
    import matplotlib.pyplot as plt

    wls = list(out["results"])
    fig, ax = plt.subplots(2, len(wls), figsize=(4 * len(wls), 6), squeeze=False)
    for j, wl in enumerate(wls):
        for s, v in out["results"][wl]["strategies"].items():
            ax[0, j].plot(out["caps"], v["per_cap_penalty"], label=s)
            ax[1, j].plot(out["caps"], v["per_cap_excess"], label=s)
        ax[0, j].set_title(wl)
        ax[0, j].set_ylabel("time penalty %")
        ax[1, j].set_ylabel("true power - cap (W)")
        ax[1, j].set_xlabel("power cap (W)")
        ax[1, j].axhline(0, color="k", lw=0.5)
    ax[0, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plot_board_time(out, str(Path(path).with_name(Path(path).stem + "_board.png")))


def profiled_configurations(strategy: str) -> int:
    """Configurations a strategy measures on the board: the N of ``X@N`` (``PT@35+15``:
    35 + 15); none for MAXN, PRESET and ORACLE."""
    if "@" not in strategy:
        return 0
    return sum(int(n) for n in strategy.split("@")[1].split("+") if n.isdigit())


def plot_board_time(out: dict, path: str) -> None:
    """Decision quality against board time: each strategy's median time penalty and A/L+1
    over the sweep at the configurations it profiled, one panel per workload."""
    import matplotlib.pyplot as plt

    wls = list(out["results"])
    fig, ax = plt.subplots(1, len(wls), figsize=(4 * len(wls), 3.6), squeeze=False)
    for j, wl in enumerate(wls):
        a = ax[0, j]
        for s, v in out["results"][wl]["strategies"].items():
            if s in ("MAXN", "PRESET"):
                continue
            n = profiled_configurations(s)
            a.scatter([n], [v["penalty_median"]], marker="o" if s in ACTIVE else "s")
            a.annotate(f"{s} ({v['al1_pct']:.0f}%)", (n, v["penalty_median"]), fontsize=6)
        a.set_title(wl)
        a.set_xlabel("profiled configurations (whole sweep)")
        a.set_ylabel("median time penalty %")
        a.axhline(0, color="k", lw=0.5)
    fig.suptitle("median penalty vs board time; in brackets: A/L+1 %", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
