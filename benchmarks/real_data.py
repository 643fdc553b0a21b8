"""Does transfer learning work on real machines? The Zeus NSDI '23 traces (V100, A40).

Everything here is measured data (datasets/real/, tools/import_zeus.py); nothing comes
from the twin. Knobs are a datacenter GPU's: power limit x batch size (the catalog's
``v100``/``a40`` specs declare them). The predictor is the package's ``Predictor`` with
its defaults (log inputs and targets; transfer: fine-tune all layers + k-fold-weighted
ridge blend); its targets here are epoch time and average power.

1. Across workloads: per GPU, a reference trained on the workload with the largest grid
   (rule fixed up front, before any result: the most configurations), transferred to
   every other workload with k = 5, 10, 20 measured configurations; MAPE on the
   configurations not sampled; beside NN from scratch on the same k, gradient boosting
   on the same k, and the reference unchanged ("no transfer").
2. Across GPUs: the V100 model of a workload transferred to the A40, same k.
3. Decisions: with the real r (median epochs to target), the (batch size, power limit)
   minimising time to accuracy under each cap, from a k = 10 transfer, against the
   exhaustive optimum of the trace and Zeus's default (largest power limit, the
   workload's default batch size); and the one minimising energy to accuracy.

    python benchmarks/real_data.py [--draws 10] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
import warnings

import numpy as np
import pandas as pd
from sklearn.ensemble import GradientBoostingRegressor

from powertrain.predictor import Predictor
from powertrain.real_data import (
    KNOBS,
    TARGETS,
    load_real_corpus,
    load_real_r,
    real_corpus_names,
    real_provenance,
)

KS = (5, 10, 20)
#: power margins in predicted standard deviations: none, and the 1-sigma margin
MARGINS = (0.0, 1.0)


def _x(df: pd.DataFrame) -> np.ndarray:
    return df[list(KNOBS)].to_numpy(float)


def fit_heads(df: pd.DataFrame, seed: int) -> Predictor:
    """The package's Predictor on a GPU corpus: its inputs are the device's knobs
    (``power_limit_w``) plus ``batch_size``, read from the ``device`` column."""
    return Predictor(targets=TARGETS, random_state=seed, progress=False).fit(df)


def transfer_heads(ref: Predictor, df: pd.DataFrame, seed: int) -> Predictor:
    """The Predictor's default transfer (fine-tune all layers + k-fold-weighted blend)."""
    return ref.transfer(df, random_state=seed)


def gb_heads(df: pd.DataFrame, seed: int) -> dict:
    out = {}
    for t in TARGETS:
        m = GradientBoostingRegressor(n_estimators=200, max_depth=2, random_state=seed)
        out[t] = m.fit(np.log(_x(df)), np.log(df[t].to_numpy(float)))
    return out


def predict(model: Predictor | dict, df: pd.DataFrame) -> dict[str, np.ndarray]:
    if isinstance(model, Predictor):
        p = model.predict(df[list(KNOBS)], return_std=False)
        return {t: p[t].to_numpy() for t in TARGETS}
    return {t: np.exp(h.predict(np.log(_x(df)))) for t, h in model.items()}


def mape(y, p) -> float:
    return float(np.mean(np.abs(np.asarray(p) / np.asarray(y) - 1)) * 100)


def accuracy_rows(ref: Predictor, target: pd.DataFrame, case: str, draws: int) -> list[dict]:
    rows = []
    for k in KS:
        if k >= len(target) - 5:
            continue
        for d in range(draws):
            rng = np.random.default_rng(d)
            idx = rng.choice(len(target), k, replace=False)
            train = target.iloc[idx]
            test = target.drop(target.index[idx])
            methods = {
                "PT": transfer_heads(ref, train, d),
                "NN": fit_heads(train, d),
                "GB": gb_heads(train, d),
                "no transfer": ref,
            }
            for name, heads in methods.items():
                p = predict(heads, test)
                rows.append(
                    dict(
                        case=case,
                        k=k,
                        draw=d,
                        method=name,
                        time_mape=mape(test.epoch_s, p["epoch_s"]),
                        power_mape=mape(test.power_w, p["power_w"]),
                    )
                )
    return rows


def decisions(gpu: str, wl: str, ref: Predictor, draws: int) -> list[dict]:
    """Pick (batch size, power limit) by time (and energy) to accuracy under each cap."""
    corpus = load_real_corpus(f"{gpu}_{wl}")
    r = load_real_r(wl).set_index("batch_size").epochs
    df = corpus[corpus.batch_size.isin(r.index)].reset_index(drop=True)
    if df.batch_size.nunique() < 2:
        return []
    epochs = df.batch_size.map(r).to_numpy(float)
    tta, eta = (
        df.epoch_s.to_numpy() * epochs,
        df.epoch_s.to_numpy() * epochs * df.power_w.to_numpy(),
    )
    default_b = real_provenance(f"{gpu}_{wl}").get("default_batch_size")
    top_pl = df.power_limit_w.max()
    dflt = df.index[(df.power_limit_w == top_pl) & (df.batch_size == default_b)]
    caps = np.arange(np.ceil(df.power_w.min() / 10) * 10 + 10, df.power_w.max() + 10, 20.0)
    rows = []
    for d in range(draws):
        rng = np.random.default_rng(100 + d)
        idx = rng.choice(len(df), min(10, len(df) - 1), replace=False)
        model = transfer_heads(ref, df.iloc[idx], d)
        p = model.predict(df[list(KNOBS)], return_std=True)
        p_tta, p_eta = p.epoch_s.to_numpy() * epochs, (p.epoch_s * p.power_w).to_numpy() * epochs
        for cap, k in itertools.product(caps, MARGINS):
            ok_true = df.power_w.to_numpy() <= cap
            ok_pred = (p.power_w + k * p.power_w_std).to_numpy() <= cap
            if not ok_true.any():
                continue
            best = np.flatnonzero(ok_true)[np.argmin(tta[ok_true])]
            row = dict(gpu=gpu, workload=wl, draw=d, cap_w=float(cap), margin_sigma=k)
            if not ok_pred.any():  # the margin left nothing: no pick (never over the cap)
                rows.append({**row, "penalty_pct": np.nan, "excess_w": np.nan, "no_pick": True})
                continue
            pick = np.flatnonzero(ok_pred)[np.argmin(p_tta[ok_pred])]
            row.update(
                penalty_pct=100 * (tta[pick] / tta[best] - 1),
                excess_w=float(df.power_w[pick] - cap),
                no_pick=False,
                pick=f"b{df.batch_size[pick]}@{df.power_limit_w[pick]:g}W",
                optimum=f"b{df.batch_size[best]}@{df.power_limit_w[best]:g}W",
            )
            if len(dflt):
                j = dflt[0]
                row["default_over_optimum"] = float(tta[j] / tta[best])
                row["default_over_pick"] = float(tta[j] / tta[pick])
                row["default_fits"] = bool(df.power_w[j] <= cap)
            rows.append(row)
        e_best = int(np.argmin(eta))
        e_pick = int(np.argmin(p_eta))
        rows.append(
            dict(
                gpu=gpu,
                workload=wl,
                draw=d,
                cap_w=None,
                objective="energy",
                penalty_pct=100 * (eta[e_pick] / eta[e_best] - 1),
                pick=f"b{df.batch_size[e_pick]}@{df.power_limit_w[e_pick]:g}W",
                optimum=f"b{df.batch_size[e_best]}@{df.power_limit_w[e_best]:g}W",
                default_over_optimum=float(eta[dflt[0]] / eta[e_best]) if len(dflt) else None,
            )
        )
    return rows


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="2 draws, A40 only, two targets")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    t0 = time.time()
    draws = 2 if args.quick else args.draws
    names = real_corpus_names()
    gpus = ("a40",) if args.quick else ("a40", "v100")
    acc, dec = [], []
    refs = {}
    for gpu in gpus:
        corpora = {n.split("_", 1)[1]: load_real_corpus(n) for n in names if n.startswith(gpu)}
        source = max(corpora, key=lambda w: len(corpora[w]))  # the largest grid (fixed rule)
        refs[gpu] = (source, fit_heads(corpora[source], 0))
        targets = [w for w in corpora if w != source][: 2 if args.quick else None]
        for wl in targets:
            acc += accuracy_rows(refs[gpu][1], corpora[wl], f"{gpu}: {source} -> {wl}", draws)
            dec += decisions(gpu, wl, refs[gpu][1], draws)
    if not args.quick:
        for n in names:
            if not n.startswith("v100_"):
                continue
            wl = n.split("_", 1)[1]
            if f"a40_{wl}" in names:
                v = fit_heads(load_real_corpus(n), 0)
                acc += accuracy_rows(v, load_real_corpus(f"a40_{wl}"), f"v100 -> a40: {wl}", draws)
    a = pd.DataFrame(acc)
    summary = (
        a.groupby(["case", "k", "method"])[["time_mape", "power_mape"]].median().unstack("method")
    )
    print("Real data (Zeus NSDI '23): median MAPE % over draws on the unsampled configurations")
    print("time (epoch_s):")
    print(summary["time_mape"].round(1).to_string())
    print("\npower (average W):")
    print(summary["power_mape"].round(1).to_string())
    wins = a.pivot_table(
        index=["case", "k", "draw"], columns="method", values="time_mape"
    ).reset_index()
    verdict = wins.groupby("k").apply(
        lambda g: pd.Series(
            {
                "PT beats NN (time)": float(np.mean(g["PT"] < g["NN"]) * 100),
                "PT beats GB (time)": float(np.mean(g["PT"] < g["GB"]) * 100),
            }
        ),
        include_groups=False,
    )
    print("\nshare of (case, draw) where transfer beats from-scratch, %:")
    print(verdict.round(0).to_string())
    d = pd.DataFrame(dec)
    if not d.empty:
        tt = d[d.cap_w.notna()]
        print(
            "\nDecisions: time to accuracy under power caps from a k=10 transfer (all caps x "
            "draws); margin 0 = predicted power <= cap, 1 = predicted power + 1 sigma <= cap; "
            "over_cap_1w = measured power of the pick > cap + 1 W; no_pick = the margin "
            "left no configuration"
        )
        g = tt.groupby(["gpu", "workload", "margin_sigma"]).agg(
            penalty_median=("penalty_pct", "median"),
            penalty_q3=("penalty_pct", lambda x: x.quantile(0.75)),
            over_cap_1w_pct=("excess_w", lambda x: 100 * np.mean(x > 1)),
            no_pick_pct=("no_pick", lambda x: 100 * np.mean(x)),
        )
        fits = tt[tt.get("default_fits", False) == True]  # noqa: E712 (NaN-safe)
        g["default_over_pick_where_it_fits"] = fits.groupby(["gpu", "workload", "margin_sigma"])[
            "default_over_pick"
        ].median()
        print(g.round(2).to_string())
        overall = tt.groupby("margin_sigma").agg(
            penalty_median=("penalty_pct", "median"),
            over_cap_1w_pct=("excess_w", lambda x: 100 * np.mean(x > 1)),
            no_pick_pct=("no_pick", lambda x: 100 * np.mean(x)),
        )
        print("\nall GPUs and workloads:")
        print(overall.round(2).to_string())
        en = d[d.cap_w.isna()]
        print(
            "\nLowest energy to accuracy (no cap): penalty % of the predicted pick; "
            "default / optimum"
        )
        print(
            en.groupby(["gpu", "workload"])
            .agg(
                penalty_median=("penalty_pct", "median"),
                default_over_optimum=("default_over_optimum", "median"),
            )
            .round(2)
            .to_string()
        )
    print(f"\nwall time {time.time() - t0:.0f} s")
    out = {"accuracy": acc, "decisions": dec, "sources": {g: s for g, (s, _) in refs.items()}}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=float)
    return out


if __name__ == "__main__":
    main()
