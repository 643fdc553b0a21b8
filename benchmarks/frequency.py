"""The GPU clock as the knob, on real data: the Perseus SOSP '24 A40 sweeps.

Everything here is measured (datasets/real/perseus/, tools/import_perseus.py): an A40 at
60 locked SM clocks (855-1740 MHz), time and energy of one microbatch for each pipeline
stage x pass of GPT-3 175B and BLOOM (32 computations; power = energy / time). A
Jetson user tunes clocks; this is the one public real corpus where the clock is the knob.
All of it is held-out data: nothing in the package was tuned on it.

Rules fixed before any result:

* reference: ``gpt3-175b-stage0-forward`` (the first computation of the first model the
  data's README lists), the package's ``Predictor`` with its defaults fitted on all 60
  clocks; targets: the other 31 computations (15 of GPT-3, 16 of BLOOM);
* k measured clocks per target (k = 3, 5, 10): the top clock (1740 MHz, where training
  runs unless told otherwise, so always measured) plus one clock drawn at random from
  each of k - 1 equal bins of the other 59; ``--draws`` seeded draws;
* methods: PT = the reference transferred with the Predictor's default transfer; NN =
  the same Predictor fitted on the k clocks alone; naive = the reference's measured
  curve scaled by a log-linear fit on the k clocks (log(target / reference) = a + b log f,
  least squares); MAPE of time and power on the 60 - k clocks not measured;
* Perseus's question: for a slowdown bound s (5 %, 10 %), the clock with the least
  predicted energy (time x power) whose predicted time is within (1 + s) x the measured
  time at the top clock, against the measured optimum (least measured energy within the
  measured bound): its measured energy over the optimum's, and whether its measured time
  breaks the bound. ``PT+verifyM``: the same prediction, then M more clocks measured
  (the predicted best not yet measured, in turn) and the least measured energy within
  the bound taken, so the pick never breaks it (k + M measurements in all).

    python benchmarks/frequency.py [--draws 3] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
import pandas as pd

from powertrain.predictor import Predictor
from powertrain.real_data import load_real_corpus, real_corpus_names, real_folder

REFERENCE = "gpt3-175b-stage0-forward"
KS = (3, 5, 10)
BOUNDS = (0.05, 0.10)
#: extra measurements after the prediction (PT+verify: predict, then measure candidates)
VERIFY = (1, 3, 5)
TARGETS = ("time_ms", "power_w")
INPUTS = ("gpu_mhz", "batch_size")
#: the targets of the issue: MAPE at k = 5 and k = 3, energy within 1 % of the optimum
GOALS = {5: 1.5, 3: 3.0}
ENERGY_GOAL_PCT = 1.0


def load() -> dict[str, pd.DataFrame]:
    """computation -> its 60-clock table, sorted by clock."""
    folder = real_folder() / "perseus"
    out = {}
    for name in real_corpus_names(folder):
        df = load_real_corpus(name, folder)
        for wl, part in df.groupby("workload", sort=True):
            out[str(wl)] = part.sort_values("gpu_mhz").reset_index(drop=True)
    return out


def draw_clocks(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Row positions: the top clock (last row) plus one from each of k - 1 equal bins."""
    bins = np.array_split(np.arange(n - 1), k - 1)
    return np.sort(np.append([rng.choice(b) for b in bins], n - 1))


def naive(ref: pd.DataFrame, train: pd.DataFrame, test: pd.DataFrame) -> dict[str, np.ndarray]:
    """The reference's measured curve x exp(a + b log f), fitted on the k clocks."""
    r = ref.set_index("gpu_mhz")
    out = {}
    for t in TARGETS:
        x = np.log(train.gpu_mhz.to_numpy())
        ratio = np.log(train[t].to_numpy() / r.loc[train.gpu_mhz, t].to_numpy())
        b, a = np.polyfit(x, ratio, 1)
        out[t] = r.loc[test.gpu_mhz, t].to_numpy() * np.exp(a + b * np.log(test.gpu_mhz))
    return out


def predicted(model: Predictor, df: pd.DataFrame) -> dict[str, np.ndarray]:
    p = model.predict(df[list(INPUTS)], return_std=False)
    return {t: p[t].to_numpy() for t in TARGETS}


def mape(y, p) -> float:
    return float(np.mean(np.abs(np.asarray(p) / np.asarray(y) - 1)) * 100)


def pick_clock(time_ms: np.ndarray, power_w: np.ndarray, t_top: float, bound: float) -> int:
    """Least energy among the clocks whose time is within (1 + bound) x ``t_top``."""
    energy = time_ms * power_w
    ok = np.flatnonzero(time_ms <= (1 + bound) * t_top)
    return int(ok[np.argmin(energy[ok])]) if ok.size else len(time_ms) - 1


def verified(
    df: pd.DataFrame, tm: np.ndarray, pw: np.ndarray, idx: np.ndarray, t_top: float, bound: float
) -> dict[str, int]:
    """Predict, then measure: up to max(VERIFY) more clocks, the predicted least-energy
    ones within the bound not yet measured, each measured in turn; the pick after m of
    them is the least measured energy among the measured clocks within the bound (the
    top clock always is), so it never breaks the bound."""
    t_true, p_true = df.time_ms.to_numpy(), df.power_w.to_numpy()
    tm, pw = tm.copy(), pw.copy()
    measured = np.zeros(len(df), dtype=bool)
    measured[idx] = True
    out = {}
    for m in range(1, max(VERIFY) + 1):
        ok = np.flatnonzero((tm <= (1 + bound) * t_top) & ~measured)
        if ok.size:
            j = ok[np.argmin((tm * pw)[ok])]
            measured[j] = True
            tm[j], pw[j] = t_true[j], p_true[j]
        if m in VERIFY:
            fine = np.flatnonzero(measured & (t_true <= (1 + bound) * t_top))
            out[f"PT+verify{m}"] = int(fine[np.argmin((t_true * p_true)[fine])])
    return out


def target_order(names) -> list[str]:
    """The targets, the two models alternating (so a partial run covers both)."""
    g = sorted(n for n in names if n.startswith("gpt3") and n != REFERENCE)
    b = sorted(n for n in names if n.startswith("bloom"))
    out = [x for pair in zip(g, b) for x in pair]
    return out + b[len(g) :] + g[len(b) :]


def run(draws: int, ks=KS, targets: list[str] | None = None, partial=None) -> tuple[list, list]:
    """Every target's rows; ``partial(acc, dec)`` is called after each target."""
    data = load()
    ref_df = data[REFERENCE]
    ref = Predictor(progress=False, random_state=0).fit(ref_df)
    acc, dec = [], []
    for wl in targets or target_order(data):
        df = data[wl]
        t_top = float(df.time_ms.iloc[-1])
        energy = (df.time_ms * df.power_w).to_numpy()
        for k in ks:
            for d in range(draws):
                idx = draw_clocks(len(df), k, np.random.default_rng(1000 * k + d))
                train, test = df.iloc[idx], df.drop(df.index[idx])
                models = {
                    "PT": ref.transfer(train, random_state=d),
                    "NN": Predictor(progress=False, random_state=d).fit(train),
                }
                preds = {m: predicted(h, test) for m, h in models.items()}
                preds["naive"] = naive(ref_df, train, test)
                for m, p in preds.items():
                    acc.append(
                        dict(
                            workload=wl,
                            model=wl.split("-stage")[0],
                            k=k,
                            draw=d,
                            method=m,
                            time_mape=mape(test.time_ms, p["time_ms"]),
                            power_mape=mape(test.power_w, p["power_w"]),
                        )
                    )
                full = {m: predicted(h, df) for m, h in models.items()}
                full["naive"] = naive(ref_df, train, df)
                for m, p in full.items():
                    # measured where measured: the k clocks are known exactly
                    tm, pw = p["time_ms"].copy(), p["power_w"].copy()
                    tm[idx], pw[idx] = df.time_ms.to_numpy()[idx], df.power_w.to_numpy()[idx]
                    for s in BOUNDS:
                        best = pick_clock(df.time_ms.to_numpy(), df.power_w.to_numpy(), t_top, s)
                        picks = {m: pick_clock(tm, pw, t_top, s)}
                        if m == "PT":
                            picks.update(verified(df, tm, pw, idx, t_top, s))
                        for name, j in picks.items():
                            dec.append(
                                dict(
                                    workload=wl,
                                    model=wl.split("-stage")[0],
                                    k=k,
                                    draw=d,
                                    method=name,
                                    bound_pct=100 * s,
                                    pick_mhz=float(df.gpu_mhz[j]),
                                    optimum_mhz=float(df.gpu_mhz[best]),
                                    energy_over_optimum_pct=100 * (energy[j] / energy[best] - 1),
                                    slowdown_pct=100 * (df.time_ms[j] / t_top - 1),
                                    over_bound=bool(df.time_ms[j] > (1 + s) * t_top),
                                    saving_vs_top_pct=100 * (1 - energy[j] / energy[-1]),
                                    optimum_saving_pct=100 * (1 - energy[best] / energy[-1]),
                                )
                            )
    return acc, dec


def print_tables(acc: list, dec: list, draws: int) -> list[dict]:
    a, d = pd.DataFrame(acc), pd.DataFrame(dec)
    n_targets = a.workload.nunique()
    print(
        f"GPU clock on real data (Perseus SOSP '24, A40, 60 SM clocks; all held out): reference "
        f"{REFERENCE}, {n_targets} target computations x {draws} draws per k"
    )
    print("\nMAPE % on the clocks not measured (mean over computations and draws):")
    table = a.groupby(["model", "k", "method"])[["time_mape", "power_mape"]].mean().unstack()
    print(table.round(2).to_string())
    print("\nworst computation (mean over draws), %:")
    worst = (
        a.groupby(["model", "k", "method", "workload"])[["time_mape", "power_mape"]]
        .mean()
        .groupby(["model", "k", "method"])
        .max()
        .unstack()
    )
    print(worst.round(2).to_string())
    mean = a.groupby(["model", "k", "method"])[["time_mape", "power_mape"]].mean()
    print("\ntargets (PT, mean MAPE per model): k=5 <= 1.5 %, k=3 <= 3 %, below naive")
    verdicts = []
    for (model, k), g in mean.groupby(level=["model", "k"]):
        if k not in GOALS:
            continue
        pt_row, nv = g.xs("PT", level="method").iloc[0], g.xs("naive", level="method").iloc[0]
        for t in ("time_mape", "power_mape"):
            ok_goal = pt_row[t] <= GOALS[k]
            ok_naive = pt_row[t] < nv[t]
            verdicts.append(
                dict(
                    model=model,
                    k=k,
                    target=t.split("_")[0],
                    pt=round(pt_row[t], 2),
                    goal=GOALS[k],
                    naive=round(nv[t], 2),
                    meets_goal=ok_goal,
                    beats_naive=ok_naive,
                )
            )
    print(pd.DataFrame(verdicts).to_string(index=False))
    print(
        "\nLeast-energy clock within a slowdown bound (vs the measured optimum; the k "
        "measured clocks are used as measured):"
    )
    g = d.groupby(["bound_pct", "k", "method"]).agg(
        energy_over_opt_mean=("energy_over_optimum_pct", "mean"),
        energy_over_opt_max=("energy_over_optimum_pct", "max"),
        within_1pct=("energy_over_optimum_pct", lambda x: 100 * np.mean(x <= ENERGY_GOAL_PCT)),
        over_bound_pct=("over_bound", lambda x: 100 * np.mean(x)),
        max_slowdown=("slowdown_pct", "max"),
        saving_vs_top=("saving_vs_top_pct", "mean"),
    )
    print(g.round(2).to_string())
    opt = d.drop_duplicates(["workload", "bound_pct"]).groupby("bound_pct")
    print(
        "measured optimum's energy saving vs the top clock, mean %: "
        + ", ".join(f"{b:g} % bound: {v:.2f}" for b, v in opt.optimum_saving_pct.mean().items())
    )
    return verdicts


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=3)
    ap.add_argument("--ks", type=int, nargs="+", default=list(KS), help="samples per target")
    ap.add_argument("--quick", action="store_true", help="2 draws, 4 targets, k = 3 and 5")
    ap.add_argument("--json", help="rows and verdicts (written after every target too)")
    ap.add_argument("--show", metavar="JSON", help="print the tables of a saved --json run")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    t0 = time.time()
    draws = 2 if args.quick else args.draws
    ks = (3, 5) if args.quick else tuple(args.ks)
    quick_targets = [
        "gpt3-175b-stage3-backward",
        "gpt3-175b-stage7-forward",
        "bloom-stage0-forward",
        "bloom-stage5-backward",
    ]
    if args.show:
        with open(args.show) as f:
            saved = json.load(f)
        print_tables(saved["accuracy"], saved["decisions"], saved["draws"])
        return saved

    def dump(acc, dec, done=False):
        if args.json:
            out = {"reference": REFERENCE, "draws": draws, "ks": list(ks), "complete": done}
            with open(args.json, "w") as f:
                json.dump({**out, "accuracy": acc, "decisions": dec}, f, indent=1, default=float)

    acc, dec = run(draws, ks, quick_targets if args.quick else None, partial=dump)
    verdicts = print_tables(acc, dec, draws)
    print(f"\nwall time {time.time() - t0:.0f} s")
    dump(acc, dec, done=True)
    return {"accuracy": acc, "decisions": dec, "verdicts": verdicts}


if __name__ == "__main__":
    main()
