"""Is the digital twin believable? Compare it with every number the papers publish.

Prints (and with ``--json PATH`` writes) four things, all measured on the twin now:

1. the calibration table of docs/twin.md: target, twin value (``Twin.expected``: what the
   board measures on average, seed 0), ratio, within +-15 %?;
2. ResNet-18 time and power ranges (max / min) over the Orin AGX profiling grid
   (4,368 modes) against the paper's 36x and 4.3x (+-25 %), from ``expected`` and from
   a profiled corpus;
3. the Jetson Nano 5 W check of the second paper (batch 64 vs 128) and the plausibility
   of Xavier AGX and Orin Nano;
4. the accuracy floor: a strong regressor fitted on 90 % of the Orin ResNet-18 grid
   corpus (profiled through ``pt.profile``) and tested on the rest, beside the paper's
   8-10 % (time) and 3.5-5 % (power) MAPE.

5. decision checks (Orin AGX, caps 17-50 W): random sampling of 50 grid
   modes (best observed) loses 12-28 % median (paper §5.2); MAXN is faster than the
   optimum under most caps and over the cap; an oracle (physics + every learnable
   deviation) loses <= 2 % median;
6. the NN floor: the package's PowerTrainMLP on 90 % of the grid, tested on 10 %.

Rows marked ``fit`` are targets a catalog constant was solved to hit (not independent
checks); ``check`` rows are independent. Every check prints PASS or MISS and by how much.

Usage: ``python benchmarks/twin_calibration.py [--json PATH] [--seed 0] [--quick]``
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.ensemble import ExtraTreesRegressor, HistGradientBoostingRegressor
from sklearn.model_selection import train_test_split

import powertrain as pt

sys.path.insert(0, str(Path(__file__).resolve().parent))

TOL = 0.15  # calibration rows (docs/twin.md)
RANGE_TOL = 0.25  # grid ranges
P1 = "PowerTrain FGCS 2024"
P2 = "Accelerated training on low-power edge devices"
#: (case, quantity) rows that a catalog constant was solved to hit (docs/twin.md)
FIT_ROWS = {
    ("Orin AGX / ResNet-18", "epoch"),
    ("Orin AGX / ResNet-18", "power"),
    ("Orin AGX / mobilenetv3", "epoch"),
    ("Orin AGX / yolov8n", "epoch"),
    ("Orin AGX / bert-base", "epoch"),
    ("Orin AGX / bert-base", "power"),
    ("Orin AGX / lstm", "epoch"),
    ("Xavier AGX / ResNet-18", "epoch"),
    ("Xavier AGX / ResNet-18", "power"),
}


def epoch(twin: pt.Twin, row: pd.Series) -> float:
    """Seconds per epoch: minibatch time x minibatches in the workload's dataset."""
    n = twin.workload.dataset_samples
    return float(row["time_ms"]) * math.ceil(n / int(row["batch_size"])) / 1e3


def calibration_rows(seed: int) -> list[dict]:
    rows = []

    def add(name, mode, quantity, target, value, unit, source):
        ratio = value / target
        rows.append(
            dict(
                case=name,
                mode=mode,
                quantity=quantity,
                unit=unit,
                target=target,
                twin=round(value, 3),
                ratio=round(ratio, 3),
                within=bool(abs(ratio - 1) <= TOL),
                kind="fit" if (name, quantity) in FIT_ROWS else "check",
                source=source,
            )
        )

    orin = pt.get_device("orin-agx")
    maxn, grid = orin.maxn(), orin.profiling_grid()
    tw = pt.Twin(orin, "resnet18", seed=seed)
    m = tw.expected(maxn, 16).iloc[0]
    add("Orin AGX / ResNet-18", "MAXN", "epoch", 3.1, epoch(tw, m) / 60, "min", f"{P1} §1")
    add("Orin AGX / ResNet-18", "MAXN", "power", 51.1, m.power_w, "W", f"{P1} §1")
    e = tw.expected(grid, 16)
    low = e.loc[e.time_ms.idxmax()]
    mode = f"slowest grid mode ({low.cores:.0f}c/{low.cpu_mhz:g}/{low.gpu_mhz:g}/{low.mem_mhz:g})"
    add("Orin AGX / ResNet-18", mode, "epoch", 112, epoch(tw, low) / 60, "min", f"{P1} §1")
    add("Orin AGX / ResNet-18", mode, "power", 11.8, low.power_w, "W", f"{P1} §1")
    for wl, target in (("mobilenetv3", 2.3), ("yolov8n", 4.9), ("bert-base", 68.7), ("lstm", 0.4)):
        tw = pt.Twin(orin, wl, seed=seed)
        m = tw.expected(maxn, 16).iloc[0]
        add(f"Orin AGX / {wl}", "MAXN", "epoch", target, epoch(tw, m) / 60, "min", f"{P1} Table 3")
        if wl == "bert-base":
            add(f"Orin AGX / {wl}", "MAXN", "power", 57.0, m.power_w, "W", f"{P1} §1")
    xav = pt.get_device("xavier-agx")
    tw = pt.Twin(xav, "resnet18", seed=seed)
    m = tw.expected(xav.maxn(), 16).iloc[0]
    add("Xavier AGX / ResNet-18", "MAXN", "epoch", 8.47, epoch(tw, m) / 60, "min", f"{P1} §1")
    add("Xavier AGX / ResNet-18", "MAXN", "power", 36.4, m.power_w, "W", f"{P1} §1")
    tw = pt.Twin(orin, "mobilenetv3", seed=seed)
    e = tw.expected(grid, 16)
    ok = e[e.power_w <= 30.0]
    best = ok.loc[ok.time_ms.idxmin()]
    knobs = f"{best.cores:.0f}c/{best.cpu_mhz:g}/{best.gpu_mhz:g}/{best.mem_mhz:g}"
    mode = f"best grid mode <= 30 W ({knobs})"
    add("Orin AGX / MobileNetV3", mode, "epoch", 186, epoch(tw, best), "s", f"{P1} §5.2 Fig. 11")
    add("Orin AGX / MobileNetV3", mode, "power", 29.9, best.power_w, "W", f"{P1} §5.2 Fig. 11")
    return rows


def grid_ranges(expected: pd.DataFrame, corpus: pd.DataFrame) -> list[dict]:
    out = []
    for col, target in (("time_ms", 36.0), ("power_w", 4.3)):
        for src, df in (("expected", expected), ("profiled corpus", corpus)):
            r = float(df[col].max() / df[col].min())
            out.append(
                dict(
                    quantity=col,
                    source=src,
                    target=target,
                    twin=round(r, 2),
                    ratio=round(r / target, 3),
                    within=bool(abs(r / target - 1) <= RANGE_TOL),
                )
            )
    return out


def nano_check(seed: int) -> dict:
    """Second paper, Fig. 1: ResNet-18 (32x32) on Jetson Nano, other knobs at MAXN."""
    nano = pt.get_device("nano")
    tw = pt.Twin(nano, "resnet18-cifar", seed=seed)
    top = nano.maxn().iloc[0]
    modes = pd.DataFrame({"gpu_mhz": nano.spec.gpu_mhz}).assign(
        cores=int(top.cores), cpu_mhz=top.cpu_mhz, mem_mhz=top.mem_mhz
    )
    batches = tw.workload.extra.get("batch_sizes", [4, 8, 16, 32, 64, 128])
    table = pd.concat([tw.expected(modes, b) for b in batches], ignore_index=True)
    feasible = {}
    for b in (64, 128):
        t = table[(table.batch_size == b) & (table.power_w <= 5.0)]
        feasible[b] = t.loc[t.gpu_mhz.idxmax()] if len(t) else None
    speedup = None
    if feasible[64] is not None and feasible[128] is not None:
        # time for a fixed sample count ~ time per sample
        per64 = feasible[64].time_ms / 64
        per128 = feasible[128].time_ms / 128
        speedup = 1 - per64 / per128
    pw = table.pivot(index="gpu_mhz", columns="batch_size", values="power_w")
    return {
        "power_min_w": round(float(table.power_w.min()), 2),
        "power_max_w": round(float(table.power_w.max()), 2),
        "max_gpu_mhz_under_5w_b128": None
        if feasible[128] is None
        else float(feasible[128].gpu_mhz),
        "max_gpu_mhz_under_5w_b64": None if feasible[64] is None else float(feasible[64].gpu_mhz),
        "b64_faster_than_b128_pct": None if speedup is None else round(100 * speedup, 1),
        "targets": {
            "power_w": "about 4-8",
            "b128_mhz": 307.2,
            "b64_mhz": 460.8,
            "faster_pct": 31.9,
        },
        "power_table_w": {str(c): [round(v, 2) for v in pw[c]] for c in pw.columns},
        "gpu_mhz": [float(f) for f in pw.index],
        "source": f"{P2} §1, Fig. 1",
    }


def device_plausibility(seed: int) -> dict:
    out = {}
    orin = pt.get_device("orin-agx")
    ref = pt.Twin(orin, "resnet18", seed=seed).expected(orin.maxn(), 16).iloc[0]
    for name in ("xavier-agx", "orin-nano"):
        dev = pt.get_device(name)
        m = pt.Twin(dev, "resnet18", seed=seed).expected(dev.maxn(), 16).iloc[0]
        out[name] = {
            "resnet18_top_mode_time_ms": round(float(m.time_ms), 1),
            "power_w": round(float(m.power_w), 1),
            "time_vs_orin_agx": round(float(m.time_ms / ref.time_ms), 2),
            "orin_agx_power_over_this": round(float(ref.power_w / m.power_w), 2),
        }
    out["notes"] = (
        f"{P1}: Orin Nano is 6.9x less powerful (AI TOPS 275 vs 40) and draws about one "
        "third of the power (review responses); peak 15 W (Table 2). Xavier: 8.47 min, 36.4 W."
    )
    return out


def floor(corpus: pd.DataFrame, seed: int = 0) -> dict:
    """MAPE of strong regressors trained on 90 % of the corpus, tested on the other 10 %."""
    x = corpus[["cores", "cpu_mhz", "gpu_mhz", "mem_mhz"]].to_numpy(dtype=float)
    x = np.column_stack([x[:, 0], np.log(x[:, 1:])])
    out = {}
    for target in ("time_ms", "power_w"):
        y = np.log(corpus[target].to_numpy(dtype=float))
        xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.1, random_state=seed)
        models = {
            "HistGradientBoosting": HistGradientBoostingRegressor(
                max_iter=500, learning_rate=0.05, random_state=seed
            ),
            "ExtraTrees": ExtraTreesRegressor(300, min_samples_leaf=2, random_state=seed, n_jobs=1),
        }
        for name, model in models.items():
            model.fit(xtr, ytr)
            mape = 100 * np.mean(np.abs(np.exp(model.predict(xte)) / np.exp(yte) - 1))
            out[f"{target}/{name}"] = round(float(mape), 2)
        out[f"{target}/best"] = min(out[f"{target}/{n}"] for n in models)
    out["paper_floor"] = {
        "time_ms": "8.1-9.7 (ResNet 9.34)",
        "power_w": "3.6-4.8 (ResNet 4.06)",
        "source": f"{P1} Fig. 6 diagonal",
    }
    return out


def _band(v: float, lo: float, hi: float) -> str:
    if lo <= v <= hi:
        return "PASS"
    return f"MISS by {v - hi:+.2f}" if v > hi else f"MISS by {v - lo:+.2f}"


def nn_floor(corpus: pd.DataFrame, seed: int = 0, quick: bool = False) -> dict:
    """The paper's NN floor: the package's MLP on 90 % of the grid, tested on 10 %."""
    from powertrain.metrics import mape
    from powertrain.predictor import PowerTrainMLP, Predictor

    train, test = train_test_split(corpus, test_size=0.1, random_state=seed)
    est = PowerTrainMLP(epochs=150) if quick else None
    model = Predictor(est, random_state=seed, progress=False).fit(train)
    est = model.predict(test[["cores", "cpu_mhz", "gpu_mhz", "mem_mhz"]], 16)
    return {
        f"{t}/PowerTrainMLP": round(float(mape(test[t].to_numpy(), est[t].to_numpy())), 2)
        for t in ("time_ms", "power_w")
    }


def decision_checks(seed: int, draws: int) -> dict:
    """RND@50, MAXN and the oracle over the paper's cap sweep, per workload."""
    import optimisation as opt

    out = {}
    caps = np.asarray(opt.CAPS_ORIN)
    for wl in ("resnet18", "mobilenetv3", "yolov8n", "bert-base", "lstm"):
        r = opt.score_workload(
            "orin-agx",
            wl,
            "orin-agx/resnet18",
            caps,
            draws,
            ["RND@50", "MAXN", "ORACLE"],
            seed=seed,
        )
        rnd, mx, orc = r["RND@50"], r["MAXN"], r["ORACLE"]
        faster = float(np.mean(np.asarray(mx["per_cap_penalty"]) < 0) * 100)
        lines = [
            f"RND@50 median penalty {rnd['penalty_median']:6.2f}% (Q1-Q3 {rnd['penalty_q1']:.1f}-"
            f"{rnd['penalty_q3']:.1f}), target 12-28%: {_band(rnd['penalty_median'], 12, 28)}",
            f"MAXN faster than the optimum under {faster:5.1f}% of caps, over the cap under "
            f"{mx['al_pct']:5.1f}%; target both > 50%: "
            + ("PASS" if faster > 50 and mx["al_pct"] > 50 else f"MISS (faster {faster:.0f}%)"),
            f"ORACLE median penalty {orc['penalty_median']:5.2f}% (Q3 {orc['penalty_q3']:.2f}), "
            f"A/L {orc['al_pct']:.1f}%, A/L+1 {orc['al1_pct']:.1f}%; target <= 2%: "
            + _band(orc["penalty_median"], -np.inf, 2.0),
        ]
        out[wl] = {
            "lines": lines,
            "figures": {"RND@50": rnd, "MAXN": {**mx, "faster_pct": faster}, "ORACLE": orc},
        }
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the figures to this JSON file")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="fewer draws and NN epochs")
    args = ap.parse_args(argv)
    t0 = time.time()
    rows = calibration_rows(args.seed)

    orin = pt.get_device("orin-agx")
    grid = orin.profiling_grid()
    twin = pt.Twin(orin, "resnet18", seed=args.seed)
    tp = time.time()
    corpus = pt.profile(twin, grid, batch_size=16, n_minibatches=40, progress=False)
    profile_wall = time.time() - tp
    ranges = grid_ranges(twin.expected(grid, 16), corpus)
    nano = nano_check(args.seed)
    plaus = device_plausibility(args.seed)
    fl = floor(corpus, args.seed)
    fl.update(nn_floor(corpus, args.seed, quick=args.quick))
    dec = decision_checks(args.seed, draws=5 if args.quick else 20)

    print(f"Calibration (docs/twin.md table; twin = Twin.expected, seed {args.seed})")
    print(
        f"{'case':26s} {'mode':52s} {'qty':6s} {'target':>8s} {'twin':>9s} {'ratio':>6s}  "
        "+-15%?  kind"
    )
    for r in rows:
        print(
            f"{r['case']:26s} {r['mode']:52s} {r['quantity']:6s} {r['target']:8g} {r['twin']:9.3f} "
            f"{r['ratio']:6.3f}  {'PASS' if r['within'] else 'MISS'}    {r['kind']}"
        )
    print("\nOrin AGX ResNet-18 ranges over the 4,368-mode grid (max/min)")
    for r in ranges:
        print(
            f"  {r['quantity']:8s} {r['source']:16s} target {r['target']:5g}x  "
            f"twin {r['twin']:6.2f}x  "
            f"ratio {r['ratio']:.3f}  +-25%? {'PASS' if r['within'] else 'MISS'}"
        )
    print("\nJetson Nano, ResNet-18 32x32, 5 W cap (second paper Fig. 1)")
    print(
        f"  power over GPU freq x batch: {nano['power_min_w']}-{nano['power_max_w']} W "
        "(paper: about 4-8 W)"
    )
    print(
        "  highest GPU MHz under 5 W: "
        f"batch 128 -> {nano['max_gpu_mhz_under_5w_b128']} (paper 307.2), "
        f"batch 64 -> {nano['max_gpu_mhz_under_5w_b64']} (paper 460.8)"
    )
    print(
        f"  batch 64 trains a fixed sample count {nano['b64_faster_than_b128_pct']}% faster "
        "(paper 31.9%)"
    )
    print("\nOther devices, ResNet-18 at the top mode")
    for k in ("xavier-agx", "orin-nano"):
        v = plaus[k]
        print(
            f"  {k:11s} {v['resnet18_top_mode_time_ms']:7.1f} ms/minibatch, {v['power_w']:5.1f} W; "
            f"{v['time_vs_orin_agx']}x Orin AGX time, "
            f"Orin AGX draws {v['orin_agx_power_over_this']}x its power"
        )
    print(f"  ({plaus['notes']})")
    print("\nAccuracy floor: regressors on 90% of the profiled Orin ResNet-18 grid, tested on 10%")
    for tgt in ("time_ms", "power_w"):
        print(
            f"  {tgt:8s} HistGB {fl[tgt + '/HistGradientBoosting']:5.2f}%  ExtraTrees "
            f"{fl[tgt + '/ExtraTrees']:5.2f}%   paper: {fl['paper_floor'][tgt]}%"
        )
    for tgt, (lo, hi) in (("time_ms", (8.0, 10.0)), ("power_w", (3.5, 5.0))):
        v = fl[f"{tgt}/PowerTrainMLP"]
        print(f"  {tgt:8s} PowerTrainMLP {v:5.2f}%  target {lo}-{hi}%  {_band(v, lo, hi)}  (fit)")
    print("\nDecisions over the 17-50 W cap sweep (truth: Twin.expected on the grid)")
    for wl, r in dec.items():
        for line in r["lines"]:
            print(f"  {wl:12s} {line}")
    sim_h = float(corpus.profile_s.sum()) / 3600
    print(
        f"\nProfiling the grid: {profile_wall:.1f} s real, {sim_h:.1f} h on the board's clock "
        f"(paper: > 14 h); benchmark wall time {time.time() - t0:.1f} s"
    )
    result = {
        "seed": args.seed,
        "calibration": rows,
        "ranges": ranges,
        "nano_5w": nano,
        "devices": plaus,
        "floor_mape_pct": fl,
        "decisions": {wl: r["figures"] for wl, r in dec.items()},
        "profiling": {
            "modes": len(corpus),
            "real_s": round(profile_wall, 1),
            "board_hours": round(sim_h, 2),
        },
        "all_rows_within_15pct": all(r["within"] for r in rows),
        "all_ranges_within_25pct": all(r["within"] for r in ranges),
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
