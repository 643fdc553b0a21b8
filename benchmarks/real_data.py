"""Does transfer learning work on real machines? Any folder of real corpora (default: the
Zeus NSDI '23 traces, V100 and A40, in datasets/real/).

Everything here is measured data (datasets/real/, tools/import_zeus.py, or ``--data
DIR``: any folder of corpora ``powertrain.data.real_data.load_real_corpus`` reads); nothing
comes from the twin. Devices, workloads, knobs and targets are read from the data: each
table's ``device`` column names its device (whose spec declares the knobs; the Zeus
GPUs: power limit x batch size) and ``workload`` column its workload; the time target is
the table's time column (``epoch_s`` per epoch or ``time_ms`` per minibatch) and power
``power_w``. The predictor is the package's ``Predictor`` with its defaults (log inputs
and targets; transfer: fine-tune all layers + k-fold-weighted ridge blend).

1. Across workloads: per device, a reference trained on the workload with the largest
   grid (rule fixed up front, before any result: the most configurations; ties by name),
   transferred to every other workload with k = 5, 10, 20 measured configurations; MAPE
   on the configurations not sampled; beside NN from scratch on the same k, gradient
   boosting on the same k, and the reference unchanged ("no transfer").
2. Across devices: for every workload measured on two devices with the same knobs, each
   device's model of it transferred to the other, same k.
3. Decisions (where the folder has a training trace ``r_{workload}.csv`` and time is per
   epoch): with the real r (median epochs to target), the configuration minimising time
   to accuracy under each cap, from a k = 10 transfer, against the exhaustive optimum of
   the trace and the default (every knob at its largest value, the workload's default
   batch size from the provenance); and the one minimising energy to accuracy.
4. Beside those prediction-only picks, the board in the loop on the same traces and caps
   (``pt.decide`` on a replayed trace, at most 10 measured configurations per cap):
   benchmarks/decisions.py runs it; this prints its saved rows (results/decisions.json).

    python benchmarks/real_data.py [--data DIR] [--draws 10] [--quick] [--json PATH]
    python benchmarks/real_data.py --show PATH   # the tables of a saved --json run
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.ensemble import GradientBoostingRegressor

from powertrain.data.real_data import (
    corpus_targets,
    load_real_corpus,
    load_real_r,
    real_corpus_names,
    real_folder,
    real_provenance,
)
from powertrain.decisions.optimise import fastest_under
from powertrain.decisions.refine import with_observed
from powertrain.devices.device import get_device
from powertrain.errors import DataError, NoFeasibleModeError
from powertrain.metrics import excess_power, time_penalty_pct
from powertrain.predictor import Predictor
from powertrain.predictor.predictor import MONOTONE_CHOICES

sys.path.insert(0, str(Path(__file__).resolve().parent))
import results_file  # noqa: E402  (summaries in --json, the records in detail/)

KS = (5, 10, 20)
#: how a pick's power is judged against the cap: (guard, margin in predicted sigmas).
#: "none": the prediction alone (the protocol before the physics guard); "physics": the
#: measured samples count as measured and no margin goes beyond what the power limit
#: guarantees (``power_w_max``; :func:`powertrain.decisions.optimise.fastest_under`). 1.5 sigma is
#: the smallest margin of 0.5/1/1.5/2 with no V100 pick over cap + 1 W in a 4-draw
#: exploration (V100 = tuning for this choice; A40 held out, though its figures were
#: printed by the same exploration).
GUARDS = (("none", 0.0), ("physics", 0.0), ("physics", 1.0), ("physics", 1.5))


class Corpus:
    """One device x workload of a folder: its table, its inputs and targets, its file."""

    def __init__(self, df: pd.DataFrame, name: str):
        self.df = df.reset_index(drop=True)
        self.name = name
        self.device = str(df.device.iloc[0])
        self.workload = str(df.workload.iloc[0]) if "workload" in df else name
        self.inputs = get_device(self.device).config_columns
        self.targets = corpus_targets(df, name)

    def __len__(self) -> int:
        return len(self.df)


def over_cap_1w_pct(excess_w: pd.Series) -> float:
    """A/L+1 % of a group of picks (powertrain.metrics.excess_power on power minus cap;
    a margin that left no pick counts as not over the cap)."""
    excess = excess_w.astype(float).fillna(-np.inf).to_numpy()
    return excess_power(excess, np.zeros(len(excess)))["above_limit_1w_pct"]


def discover(folder) -> dict[str, dict[str, Corpus]]:
    """device -> workload -> corpus for every table in ``folder`` (a file holding several
    workloads is split by its ``workload`` column)."""
    out: dict[str, dict[str, Corpus]] = {}
    for n in real_corpus_names(folder):
        df = load_real_corpus(n, folder)
        groups = df.groupby("workload", sort=True) if "workload" in df else [(n, df)]
        for wl, part in groups:
            c = Corpus(part, n)
            out.setdefault(c.device, {})[str(wl)] = c
    return out


def _x(df: pd.DataFrame, inputs) -> np.ndarray:
    return df[list(inputs)].to_numpy(float)


def fit_heads(
    df: pd.DataFrame, seed: int, targets=("epoch_s", "power_w"), monotone=None
) -> Predictor:
    """The package's Predictor on a GPU corpus: its inputs are the device's knobs (the
    Zeus GPUs: ``power_limit_w``) plus ``batch_size``, read from the ``device`` column.
    ``monotone``: the Predictor's setting (None, its default: unconstrained)."""
    return Predictor(targets=targets, random_state=seed, progress=False, monotone=monotone).fit(df)


def transfer_heads(ref: Predictor, df: pd.DataFrame, seed: int) -> Predictor:
    """The Predictor's default transfer (fine-tune all layers + k-fold-weighted blend)."""
    return ref.transfer(df, random_state=seed)


def gb_heads(df: pd.DataFrame, seed: int, inputs, targets) -> dict:
    out = {}
    for t in targets:
        m = GradientBoostingRegressor(n_estimators=200, max_depth=2, random_state=seed)
        out[t] = m.fit(np.log(_x(df, inputs)), np.log(df[t].to_numpy(float)))
    return out


def predict(model: Predictor | dict, df: pd.DataFrame, inputs, targets) -> dict[str, np.ndarray]:
    if isinstance(model, Predictor):
        p = model.predict(df[list(inputs)], return_std=False)
        return {t: p[t].to_numpy() for t in targets}
    return {t: np.exp(h.predict(np.log(_x(df, inputs)))) for t, h in model.items()}


def mape(y, p) -> float:
    return float(np.mean(np.abs(np.asarray(p) / np.asarray(y) - 1)) * 100)


#: from-scratch results depend only on (target corpus, k, draw): computed once, reused by
#: every reference transferred to that target
_SCRATCH: dict[tuple, dict] = {}


def accuracy_rows(
    ref: Predictor, corpus: Corpus, case: str, draws: int, monotone=None
) -> list[dict]:
    """PT, NN-from-scratch (built with ``monotone``) and GB errors per k and draw."""
    rows = []
    target, (t_col, p_col) = corpus.df, corpus.targets
    for k in KS:
        if k >= len(target) - 5:
            continue
        for d in range(draws):
            rng = np.random.default_rng(d)
            idx = rng.choice(len(target), k, replace=False)
            train = target.iloc[idx]
            test = target.drop(target.index[idx])
            key = (corpus.device, corpus.workload, k, d, repr(monotone))
            if key not in _SCRATCH:
                nn = fit_heads(train, d, corpus.targets, monotone)
                gb = gb_heads(train, d, corpus.inputs, corpus.targets)
                _SCRATCH[key] = {
                    m: predict(h, test, corpus.inputs, corpus.targets)
                    for m, h in (("NN", nn), ("GB", gb))
                }
            preds = {
                "PT": predict(transfer_heads(ref, train, d), test, corpus.inputs, corpus.targets),
                **_SCRATCH[key],
                "no transfer": predict(ref, test, corpus.inputs, corpus.targets),
            }
            for name, p in preds.items():
                rows.append(
                    dict(
                        case=case,
                        k=k,
                        draw=d,
                        method=name,
                        time_mape=mape(test[t_col], p[t_col]),
                        power_mape=mape(test[p_col], p[p_col]),
                    )
                )
    return rows


def _label(df: pd.DataFrame, i: int, knobs) -> str:
    """``b32@250W`` for a power limit; other knobs by name (``b1@gpu_mhz=1410``)."""
    parts = [
        f"{df[c][i]:g}W" if c == "power_limit_w" else f"{c}={df[c][i]:g}"
        for c in knobs
        if c != "batch_size"
    ]
    return f"b{df.batch_size[i]}@" + ",".join(parts)


def decisions(corpus: Corpus, ref: Predictor, draws: int, folder) -> list[dict]:
    """Pick (batch size, knobs) by time (and energy) to accuracy under each cap; needs a
    training trace for the workload and time per epoch (else no rows)."""
    gpu, wl, inputs = corpus.device, corpus.workload, corpus.inputs
    if corpus.targets[0] != "epoch_s":
        return []
    try:
        r = load_real_r(wl, folder).set_index("batch_size").epochs
    except DataError:
        return []
    df = corpus.df[corpus.df.batch_size.isin(r.index)].reset_index(drop=True)
    if df.batch_size.nunique() < 2:
        return []
    epochs = df.batch_size.map(r).to_numpy(float)
    tta, eta = (
        df.epoch_s.to_numpy() * epochs,
        df.epoch_s.to_numpy() * epochs * df.power_w.to_numpy(),
    )
    default_b = real_provenance(corpus.name, folder).get("default_batch_size")
    knobs = [c for c in inputs if c != "batch_size"]
    top = np.logical_and.reduce([df[c] == df[c].max() for c in knobs])
    dflt = df.index[top & (df.batch_size == default_b)]
    caps = np.arange(np.ceil(df.power_w.min() / 10) * 10 + 10, df.power_w.max() + 10, 20.0)
    rows = []
    for d in range(draws):
        rng = np.random.default_rng(100 + d)
        idx = rng.choice(len(df), min(10, len(df) - 1), replace=False)
        model = transfer_heads(ref, df.iloc[idx], d)
        p = model.predict(df[list(inputs)], return_std=True)
        p_eta = (p.epoch_s * p.power_w).to_numpy() * epochs
        est = {
            "none": p.drop(columns="power_w_max", errors="ignore"),
            "physics": with_observed(p, df.iloc[idx], columns=list(inputs)),
        }
        for e in est.values():
            e["tta"] = e.epoch_s.to_numpy() * epochs
        for cap, (guard, k) in itertools.product(caps, GUARDS):
            ok_true = df.power_w.to_numpy() <= cap
            if not ok_true.any():
                continue
            best = np.flatnonzero(ok_true)[np.argmin(tta[ok_true])]
            row = dict(gpu=gpu, workload=wl, draw=d, cap_w=float(cap), guard=guard, margin_sigma=k)
            try:
                chosen = fastest_under(est[guard], float(cap), k_sigma=k, time="tta")
            except NoFeasibleModeError:  # the margin left nothing: no pick (never over the cap)
                rows.append({**row, "penalty_pct": np.nan, "excess_w": np.nan, "no_pick": True})
                continue
            pick = df.index.get_loc(chosen.name)  # est keeps df's RangeIndex
            row.update(
                penalty_pct=time_penalty_pct(tta[pick], tta[best]),
                excess_w=float(df.power_w[pick] - cap),
                no_pick=False,
                pick=_label(df, pick, inputs),
                optimum=_label(df, best, inputs),
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
                penalty_pct=time_penalty_pct(eta[e_pick], eta[e_best]),
                pick=_label(df, e_pick, inputs),
                optimum=_label(df, e_best, inputs),
                default_over_optimum=float(eta[dflt[0]] / eta[e_best]) if len(dflt) else None,
            )
        )
    return rows


def main(argv=None) -> dict:
    """The benchmark; a bad input (a ``--data`` folder, a saved file) ends it with one
    line naming it, not a traceback."""
    try:
        return _main(argv)
    except (DataError, OSError, json.JSONDecodeError) as e:
        raise SystemExit(f"real_data.py: error: {e}") from None


def _main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--data", help="a folder of real corpora (default: the package's datasets/real)"
    )
    ap.add_argument("--draws", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="2 draws, one device, two targets")
    ap.add_argument("--json")
    ap.add_argument("--show", metavar="JSON", help="print the tables of a saved --json run")
    ap.add_argument(
        "--monotone",
        choices=MONOTONE_CHOICES,
        default="none",
        help="monotone constraints of every model fitted: none (the Predictor's default), "
        "the device's power directions (a GPU: power never falls as its limit rises), or all",
    )
    args = ap.parse_args(argv)
    monotone = MONOTONE_CHOICES[args.monotone]
    warnings.filterwarnings("ignore")
    if args.show:
        out = results_file.load(args.show)
        report(out)
        return out
    t0 = time.time()
    draws = 2 if args.quick else args.draws
    folder = args.data or real_folder()
    found = discover(folder)
    if not found:
        raise DataError(f"--data {folder}: no real corpora there")
    devices = sorted(found)[:1] if args.quick else sorted(found)
    print(f"corpora in {folder}: " + "; ".join(f"{d}: {len(found[d])} workloads" for d in devices))
    acc, dec = [], []
    refs = {}
    for gpu in devices:
        corpora = found[gpu]
        # the largest grid (fixed rule; ties by name)
        source = max(sorted(corpora), key=lambda w: len(corpora[w]))
        refs[gpu] = (source, fit_heads(corpora[source].df, 0, corpora[source].targets, monotone))
        targets = [w for w in sorted(corpora) if w != source][: 2 if args.quick else None]
        for wl in targets:
            case = f"{gpu}: {source} -> {wl}"
            acc += accuracy_rows(refs[gpu][1], corpora[wl], case, draws, monotone)
            dec += decisions(corpora[wl], refs[gpu][1], draws, folder)
    if not args.quick:
        for src, dst in itertools.permutations(devices, 2):
            a, b = found[src], found[dst]
            for wl in sorted(set(a) & set(b)):
                if a[wl].inputs != b[wl].inputs or a[wl].targets != b[wl].targets:
                    continue  # other knobs or another time unit: nothing to transfer
                ref = fit_heads(a[wl].df, 0, a[wl].targets, monotone)
                acc += accuracy_rows(ref, b[wl], f"{src} -> {dst}: {wl}", draws, monotone)
    out = {
        "data": str(folder),
        "draws": draws,
        "monotone": args.monotone,
        "accuracy": acc,
        "decisions": dec,
        "sources": {g: s for g, (s, _) in refs.items()},
        "units": sorted({c.targets[0] for d in devices for c in found[d].values()}),
        "wall_s": time.time() - t0,
    }
    report(out)
    if args.json:
        results_file.write(args.json, out)
    return out


def report(out: dict) -> None:
    """The tables of one run (``main``'s result, or a saved ``--json`` file)."""
    folder, draws = out["data"], out["draws"]
    a = pd.DataFrame(out["accuracy"])
    summary = (
        a.groupby(["case", "k", "method"])[["time_mape", "power_mape"]].median().unstack("method")
    )
    print(f"Real data ({folder}): median MAPE % over {draws} draws on the unsampled configurations")
    # runs saved before the flag were made with the then-default power constraint
    print(f"monotone constraints of every fitted model: {out.get('monotone', 'power')}")
    print(f"time ({', '.join(out.get('units', ['epoch_s']))}):")
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
                "PT beats both (time)": float(
                    np.mean((g["PT"] < g["NN"]) & (g["PT"] < g["GB"])) * 100
                ),
            }
        ),
        include_groups=False,
    )
    print("\nshare of (case, draw) where transfer beats from-scratch, %:")
    print(verdict.round(0).to_string())
    pooled = a.groupby(["k", "method"]).time_mape.mean().unstack("method")
    print("\npooled time MAPE % (mean over every case and draw):")
    print(pooled.round(2).to_string())
    d = pd.DataFrame(out["decisions"])
    if not d.empty:
        tt = d[d.cap_w.notna()]
        print(
            "\nDecisions: time to accuracy under power caps from a k=10 transfer (all caps x "
            "draws); guard none = predicted power <= cap; guard physics = the 10 samples "
            "count as measured and the power limit bounds the margin (power_w_max); margin "
            "k = predicted power + k sigma <= cap; over_cap_1w = measured power of the pick "
            "> cap + 1 W; worst_excess_w = the largest measured power above the cap; "
            "no_pick = the margin left no configuration"
        )
        g = tt.groupby(["gpu", "workload", "guard", "margin_sigma"]).agg(
            penalty_median=("penalty_pct", "median"),
            penalty_q3=("penalty_pct", lambda x: x.quantile(0.75)),
            over_cap_1w_pct=("excess_w", over_cap_1w_pct),
            worst_excess_w=("excess_w", "max"),
            no_pick_pct=("no_pick", lambda x: 100 * np.mean(x)),
        )
        fits = tt[tt.get("default_fits", False) == True]  # noqa: E712 (NaN-safe)
        g["default_over_pick_where_it_fits"] = fits.groupby(
            ["gpu", "workload", "guard", "margin_sigma"]
        )["default_over_pick"].median()
        print(g.round(2).to_string())
        overall = tt.groupby(["guard", "margin_sigma"]).agg(
            penalty_median=("penalty_pct", "median"),
            picks=("excess_w", "count"),
            over_cap_1w_pct=("excess_w", over_cap_1w_pct),
            worst_excess_w=("excess_w", "max"),
            no_pick_pct=("no_pick", lambda x: 100 * np.mean(x)),
        )
        print("\nall GPUs and workloads:")
        print(overall.round(2).to_string())
        per_gpu = tt.groupby(["guard", "margin_sigma", "gpu"]).agg(
            penalty_median=("penalty_pct", "median"),
            over_cap_1w_pct=("excess_w", over_cap_1w_pct),
            worst_excess_w=("excess_w", "max"),
        )
        per_gpu["met"] = (
            (per_gpu.penalty_median <= 1.5)
            & (per_gpu.over_cap_1w_pct <= 1.0)
            & (per_gpu.worst_excess_w.fillna(-np.inf) <= 5.0)
        ).map({True: "yes", False: "no"})
        print(
            "\nper GPU (the 1.5-sigma margin was chosen on V100: tuning; A40 held out); "
            "target: median <= 1.5 %, over cap + 1 W <= 1 %, worst <= 5 W:"
        )
        print(per_gpu.round(2).to_string())
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
    board_in_the_loop(DECISIONS_JSON, out.get("data"))
    if "wall_s" in out:
        print(f"\nwall time {out['wall_s']:.0f} s")


#: where benchmarks/decisions.py saves its run (section 4: these traces, board in the loop)
DECISIONS_JSON = Path(__file__).parent / "results" / "decisions.json"


def same_data(saved: str | None, folder: str | Path | None) -> bool:
    """Whether decisions.json's section 4 ran on ``folder`` (None or the package's own
    folder: datasets/real, which a file without the key was run on)."""

    def norm(f: str | Path | None) -> Path:
        own = f is None or f == "datasets/real"
        return real_folder().resolve() if own else Path(f).resolve()

    return norm(saved) == norm(folder)


def board_in_the_loop(path: Path, folder: str | Path | None = None) -> None:
    """The active strategy on the same traces and caps (``pt.decide`` on a replayed
    trace, at most 10 measured configurations per cap): benchmarks/decisions.py runs it
    (its section 4); printed here beside the prediction-only picks, only when it ran on
    the same data."""
    if not path.exists():
        print(f"\n(no {path}: run benchmarks/decisions.py for the board-in-the-loop rows)")
        return
    saved = json.loads(path.read_text())
    ran_on = saved.get("real_data")
    if not same_data(ran_on, folder):
        print(
            f"\n(board-in-the-loop rows in {path.name} are for {ran_on or 'datasets/real'}, "
            f"not {folder}: run benchmarks/decisions.py --sections real --data {folder})"
        )
        return
    rows = pd.DataFrame(saved.get("real", []))
    if rows.empty:
        return
    if "error" in rows:  # a decision the library refused (decisions.txt lists them)
        rows = rows[rows["error"].isna()]
    both = pd.concat([rows, rows.assign(gpu="all")])  # each GPU, then all of them
    g = both.groupby("gpu", sort=False).agg(
        penalty_median=("penalty_pct", "median"),
        picks=("excess_w", "count"),
        over_cap_1w_pct=("excess_w", over_cap_1w_pct),
        worst_excess_w=("excess_w", "max"),
        measured_per_cap_median=("n_measured", "median"),
        measured_per_cap_max=("n_measured", "max"),
    )
    print(
        f"\nBoard in the loop (pt.decide on the replayed trace, <= 10 measured per cap, "
        f"{rows.draw.nunique()} draws; benchmarks/decisions.py section 4, read from {path.name}):"
    )
    print(g.round(2).to_string())


if __name__ == "__main__":
    main()
