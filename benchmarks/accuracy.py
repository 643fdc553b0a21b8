"""Transfer accuracy vs. number of profiled modes, against the baselines and the paper.

For every target corpus present in ``datasets/``: transfer the Orin AGX ResNet-18
reference with 10/20/30/50/100 random modes (10 draws each), validate on every other mode
of the corpus, and report median and Q1-Q3 MAPE for time and power beside the NN trained
from scratch on the same modes, gradient boosting, the NN trained on (90 % of) all modes
(the floor, tested on the other 10 %) and the paper's figures (FGCS 2024, §4, Fig. 6-9).
Also the reference-choice matrix of Fig. 6 (ResNet, MobileNet, YOLO x the same three).

    python benchmarks/accuracy.py            # full run (~20 min on one core)
    python benchmarks/accuracy.py --quick    # 3 targets, 3 draws, 20 and 50 modes
    python benchmarks/accuracy.py --json out.json
    python benchmarks/accuracy.py --sizes 50 --no-floors --no-matrix \
        --compare benchmarks/results/accuracy.json   # the PT@50 cells, against a saved run

Writes files only where told: ``--out DIR`` gets accuracy.csv, accuracy_targets.csv,
accuracy_matrix.csv and accuracy.png (like the paper's Fig. 7/8), ``--json PATH`` the
figures as JSON; the printed tables say which targets are met.
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
import torch

from powertrain.data.corpora import corpus_names, load_corpus
from powertrain.metrics import mape
from powertrain.predictor import ExtrapolationWarning, Predictor
from powertrain.predictor.baselines import GradientBoostingPredictor, nn_from_scratch
from powertrain.predictor.predictor import MONOTONE_CHOICES
from powertrain.schema import CONFIG_COLUMNS

REFERENCE = "orin-agx_resnet18_bs16"
TARGETS = [
    "orin-agx_mobilenetv3_bs16",
    "orin-agx_yolov8n_bs16",
    "orin-agx_bert-base_bs16",
    "orin-agx_lstm_bs16",
    "orin-agx_resnet18_bs8",
    "orin-agx_resnet18_bs32",
    "orin-agx_mobilenetv3_bs8",
    "orin-agx_mobilenetv3_bs32",
    "xavier-agx_resnet18_bs16",
    "xavier-agx_mobilenetv3_bs16",
    "orin-nano_resnet18_bs16",
    "orin-nano_mobilenetv3_bs16",
]
QUICK_TARGETS = TARGETS[:2] + ["xavier-agx_resnet18_bs16"]
MATRIX = ["orin-agx_resnet18_bs16", "orin-agx_mobilenetv3_bs16", "orin-agx_yolov8n_bs16"]
SIZES = (10, 20, 30, 50, 100)

#: The paper's PowerTrain (ResNet reference) figures: (time %, power %) medians at 50
#: modes, with where they are stated. None where the paper gives no absolute number.
PAPER_PT50 = {
    "orin-agx_mobilenetv3_bs16": (15.7, 5.2, "§4.2, Fig. 7b/8b"),
    "orin-agx_yolov8n_bs16": (11.7, 4.9, "§4.2, Fig. 7c/8c"),
    "orin-agx_bert-base_bs16": (15.6, None, "§4.3.2, Fig. 9b"),
    "orin-agx_lstm_bs16": (12.5, 6.3, "§4.3.2, Fig. 9b"),
    "orin-agx_resnet18_bs8": (10.84, 6.86, "§4.3.5, Fig. 9c"),
    "orin-agx_resnet18_bs32": (11.2, 7.28, "§4.3.5, Fig. 9c"),
    "orin-agx_mobilenetv3_bs8": (9.4, 5.7, "§4.3.5 (upper end of 7-9.4 / 5.5-5.7)"),
    "orin-agx_mobilenetv3_bs32": (9.4, 5.7, "§4.3.5 (upper end of 7-9.4 / 5.5-5.7)"),
    "xavier-agx_resnet18_bs16": (12.0, 11.0, "§4.3.3, Fig. 9d"),
    "xavier-agx_mobilenetv3_bs16": (14.0, 9.0, "§4.3.3, Fig. 9d"),
    "orin-nano_resnet18_bs16": (7.85, 5.96, "§4.3.4 (MAPE loss)"),
    "orin-nano_mobilenetv3_bs16": (8.98, 4.72, "§4.3.4 (MAPE loss)"),
}
#: Other sample counts the paper states in the text of §4.2 (time %, power %).
PAPER_OTHER = {
    ("orin-agx_mobilenetv3_bs16", "PT", 10): (26.7, None),
    ("orin-agx_mobilenetv3_bs16", "NN", 10): (52.6, None),
    ("orin-agx_mobilenetv3_bs16", "NN", 30): (35.0, None),
    ("orin-agx_mobilenetv3_bs16", "PT", 20): (None, 8.5),
    ("orin-agx_mobilenetv3_bs16", "NN", 20): (None, 12.0),
    ("orin-agx_mobilenetv3_bs16", "PT", 100): (11.9, 4.3),
    ("orin-agx_yolov8n_bs16", "PT", 10): (24.7, 6.8),
    ("orin-agx_yolov8n_bs16", "NN", 10): (None, 21.0),
    ("orin-agx_yolov8n_bs16", "PT", 100): (10.18, None),
    ("orin-agx_lstm_bs16", "NN", 50): (12.3, 9.1),
    ("orin-agx_bert-base_bs16", "NN", 50): (15.1, None),
    ("xavier-agx_resnet18_bs16", "NN", 50): (21.0, 18.0),
}
#: Fig. 6: (reference, target) -> (time %, power %); the diagonal is NN on all modes.
PAPER_FIG6 = {
    ("mobilenetv3", "mobilenetv3"): (8.12, 3.62),
    ("mobilenetv3", "resnet18"): (15.03, 7.98),
    ("mobilenetv3", "yolov8n"): (11.77, 4.98),
    ("resnet18", "mobilenetv3"): (14.53, 5.62),
    ("resnet18", "resnet18"): (9.34, 4.06),
    ("resnet18", "yolov8n"): (11.50, 4.95),
    ("yolov8n", "mobilenetv3"): (17.03, 9.71),
    ("yolov8n", "resnet18"): (19.76, 12.88),
    ("yolov8n", "yolov8n"): (9.72, 4.81),
}
FLOOR_FACTOR = 1.3
CROSS_DEVICE_LIMITS = (12.0, 9.0)


def _cross_device(name: str) -> bool:
    return not name.startswith("orin-agx_")


def _errors(model, test: pd.DataFrame) -> tuple[float, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExtrapolationWarning)
        pred = model.predict(test[list(CONFIG_COLUMNS)], return_std=False)
    return (mape(test["time_ms"], pred["time_ms"]), mape(test["power_w"], pred["power_w"]))


def _coverage(model, test: pd.DataFrame) -> tuple[float, float]:
    """Share of test modes whose truth lies within the predicted +-2 sigma (ideal ~0.95)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExtrapolationWarning)
        pred = model.predict(test[list(CONFIG_COLUMNS)])
    out = []
    for t in ("time_ms", "power_w"):
        err = np.abs(test[t].to_numpy() - pred[t].to_numpy())
        out.append(float(np.mean(err <= 2 * pred[f"{t}_std"].to_numpy())))
    return out[0], out[1]


def floor(corpus: pd.DataFrame, seed: int = 0) -> tuple[float, float]:
    """NN on all: fit on 90 % of the modes (its own 10 % inside picks the epoch), test on 10 %."""
    test = corpus.sample(frac=0.1, random_state=seed)
    model = Predictor(progress=False, random_state=seed).fit(corpus.drop(test.index))
    return _errors(model, test)


def run_target(
    ref: Predictor, name: str, corpus: pd.DataFrame, sizes, draws: int, bar
) -> list[dict]:
    rows = []
    loss = "mape" if _cross_device(name) else "mse"  # the paper's choice across devices
    for n in sizes:
        if n >= len(corpus):
            continue
        for draw in range(draws):
            samples = corpus.sample(n, random_state=draw)
            test = corpus.drop(samples.index)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ExtrapolationWarning)
                t0 = time.perf_counter()
                pt_model = ref.transfer(samples, loss=loss, random_state=draw)
                t_pt = time.perf_counter() - t0
                nn_model = nn_from_scratch(samples, random_state=draw)
            methods = {"PT": (pt_model, t_pt), "NN": (nn_model, None)}
            if loss != "mse":  # also the default loss, to show what the paper's switch buys
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ExtrapolationWarning)
                    methods["PT-mse"] = (ref.transfer(samples, random_state=draw), None)
            if n == 50:
                methods["GB"] = (GradientBoostingPredictor(random_state=draw).fit(samples), None)
            cover = _coverage(pt_model, test)
            for method, (model, secs) in methods.items():
                t_err, p_err = _errors(model, test)
                rows.append(
                    {
                        "target": name,
                        "method": method,
                        "n": n,
                        "draw": draw,
                        "time_mape": t_err,
                        "power_mape": p_err,
                        "seconds": secs,
                        "time_cover2sd": cover[0] if method == "PT" else None,
                        "power_cover2sd": cover[1] if method == "PT" else None,
                    }
                )
            bar.update(1)
    return rows


def summarise(raw: pd.DataFrame) -> pd.DataFrame:
    g = raw.groupby(["target", "method", "n"], sort=False)
    out = g.agg(
        draws=("draw", "count"),
        time_median=("time_mape", "median"),
        time_q1=("time_mape", lambda s: s.quantile(0.25)),
        time_q3=("time_mape", lambda s: s.quantile(0.75)),
        power_median=("power_mape", "median"),
        power_q1=("power_mape", lambda s: s.quantile(0.25)),
        power_q3=("power_mape", lambda s: s.quantile(0.75)),
        time_cover2sd=("time_cover2sd", "median"),
        power_cover2sd=("power_cover2sd", "median"),
    ).reset_index()
    paper_t, paper_p = [], []
    for r in out.itertuples():
        fig = PAPER_PT50.get(r.target) if (r.method == "PT" and r.n == 50) else None
        t, p = (fig[0], fig[1]) if fig else PAPER_OTHER.get((r.target, r.method, r.n), (None, None))
        paper_t.append(t)
        paper_p.append(p)
    out["paper_time"] = paper_t
    out["paper_power"] = paper_p
    return out


def target_checks(summary: pd.DataFrame, floors: dict) -> pd.DataFrame:
    """One row per (target, criterion), with the measured value and the limit."""
    rows = []

    def med(target, method, n, col):
        sel = summary[(summary.target == target) & (summary.method == method) & (summary.n == n)]
        return float(sel[col].iloc[0]) if len(sel) else None

    def check(target: str, criterion: str, value: float, limit: float) -> None:
        rows.append(dict(target=target, criterion=criterion, value=value, limit=limit))

    for target in dict.fromkeys(summary.target):
        ft, fp = floors.get(target, (None, None))  # None: the floors were not run
        for what, col, fl, paper_i in (
            ("time", "time_median", ft, 0),
            ("power", "power_median", fp, 1),
        ):
            pt50 = med(target, "PT", 50, col)
            if pt50 is None:
                continue
            if fl is not None:
                floor_limit = f"PT@50 {what} <= {FLOOR_FACTOR}x NN-on-all floor"
                check(target, floor_limit, pt50, FLOOR_FACTOR * fl)
            paper = PAPER_PT50.get(target, (None, None, ""))[paper_i]
            if paper is not None:
                check(target, f"PT@50 {what} < paper PT ({PAPER_PT50[target][2]})", pt50, paper)
            pt20, nn50 = med(target, "PT", 20, col), med(target, "NN", 50, col)
            if pt20 is not None and nn50 is not None:
                check(target, f"PT@20 {what} < NN-from-scratch@50", pt20, nn50)
            if _cross_device(target):
                lim = CROSS_DEVICE_LIMITS[paper_i]
                check(target, f"cross-device PT@50 {what} <= {lim:g} %", pt50, lim)
    df = pd.DataFrame(rows)
    if len(df):
        strict = df.criterion.str.contains("<") & ~df.criterion.str.contains("<=")
        df["meets"] = np.where(strict, df.value < df.limit, df.value <= df.limit)
        df["gap"] = df.value - df.limit
    return df


def reference_matrix(refs: dict, corpora: dict, floors: dict, draws: int, bar) -> pd.DataFrame:
    rows = []
    for rname, ref in refs.items():
        for tname, corpus in corpora.items():
            rw, tw = rname.split("_")[1], tname.split("_")[1]
            if rname == tname:
                t, p = floors[tname]
                rows.append(
                    dict(
                        reference=rw,
                        target=tw,
                        time_median=t,
                        power_median=p,
                        kind="NN-on-all",
                        paper_time=PAPER_FIG6[(rw, tw)][0],
                        paper_power=PAPER_FIG6[(rw, tw)][1],
                    )
                )
                continue
            errs = []
            for draw in range(draws):
                s = corpus.sample(50, random_state=draw)
                errs.append(_errors(ref.transfer(s, random_state=draw), corpus.drop(s.index)))
                bar.update(1)
            e = np.median(errs, axis=0)
            rows.append(
                dict(
                    reference=rw,
                    target=tw,
                    time_median=e[0],
                    power_median=e[1],
                    kind="PT@50",
                    paper_time=PAPER_FIG6[(rw, tw)][0],
                    paper_power=PAPER_FIG6[(rw, tw)][1],
                )
            )
    return pd.DataFrame(rows)


def plot(summary: pd.DataFrame, floors: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    targets = list(dict.fromkeys(summary.target))
    per_row = min(len(targets), 4)
    blocks = -(-len(targets) // per_row)  # each block: a time row and a power row
    fig, axes = plt.subplots(
        2 * blocks, per_row, figsize=(3.4 * per_row, 5.6 * blocks), squeeze=False
    )
    for idx in range(len(targets), blocks * per_row):  # empty slots of the last block
        b, j = divmod(idx, per_row)
        axes[2 * b, j].set_visible(False)
        axes[2 * b + 1, j].set_visible(False)
    for idx, target in enumerate(targets):
        b, j = divmod(idx, per_row)
        for i, (what, label) in enumerate((("time", "time MAPE %"), ("power", "power MAPE %"))):
            ax = axes[2 * b + i, j]
            for k, method in enumerate(("PT", "NN")):
                s = summary[(summary.target == target) & (summary.method == method)]
                x = np.arange(len(s)) + (k - 0.5) * 0.38
                ax.bar(
                    x,
                    s[f"{what}_median"],
                    0.38,
                    label=method,
                    yerr=[
                        s[f"{what}_median"] - s[f"{what}_q1"],
                        s[f"{what}_q3"] - s[f"{what}_median"],
                    ],
                    capsize=2,
                )
                ax.set_xticks(np.arange(len(s)), [str(n) for n in s.n])
            if target in floors:
                ax.axhline(floors[target][i], color="k", ls="--", lw=1, label="NN all (floor)")
            paper = PAPER_PT50.get(target, (None, None))[i]
            if paper is not None:
                ax.plot(
                    [list(s.n).index(50) - 0.19] if 50 in list(s.n) else [],
                    [paper] if 50 in list(s.n) else [],
                    "r*",
                    ms=10,
                    label="paper PT@50",
                )
            ax.set_title(target.replace("_bs", " bs"), fontsize=8)
            ax.set_ylabel(label if j == 0 else "")
            ax.set_xlabel("profiled modes" if i == 1 else "")
            ax.set_ylim(bottom=0)
    axes[0, 0].legend(fontsize=7)
    fig.suptitle(
        "PowerTrain transfer (ResNet-18 Orin AGX reference) vs NN from scratch; "
        "median with Q1-Q3 (cf. paper Fig. 7/8)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


#: how much worse a transfer cell may get than a saved run before it counts as a regression
REGRESSION_POINTS = 0.5


def compare(summary: pd.DataFrame, saved: dict, name: str) -> None:
    """Each PT cell's median against the same cell of a saved run (``--json``), with
    whether it got worse by more than :data:`REGRESSION_POINTS`."""
    before = pd.DataFrame(saved["summary"]).set_index(["target", "method", "n"])
    print(f"\nPT cells against {name} (median MAPE %, before -> now; worse by more than "
          f"{REGRESSION_POINTS:g} point = REGRESSED):")  # fmt: skip
    worst = -np.inf
    for r in summary[summary.method == "PT"].itertuples():
        key = (r.target, r.method, r.n)
        if key not in before.index:
            continue
        b = before.loc[key]
        cells = []
        for what in ("time", "power"):
            old, new = float(b[f"{what}_median"]), float(getattr(r, f"{what}_median"))
            worst = max(worst, new - old)
            flag = " REGRESSED" if new - old > REGRESSION_POINTS else ""
            cells.append(f"{what} {old:6.2f} -> {new:6.2f}{flag}")
        print(f"  {r.target:<28} PT@{r.n:<4} " + "   ".join(cells))
    print(f"  largest increase: {worst:+.2f} points (limit +{REGRESSION_POINTS:g})")


def _fmt(v) -> str:
    return "   -  " if v is None or (isinstance(v, float) and np.isnan(v)) else f"{v:6.2f}"


def print_tables(
    summary: pd.DataFrame, floors: dict, checks: pd.DataFrame, matrix: pd.DataFrame
) -> None:
    print("\nMAPE % on every mode not used for training: median [Q1-Q3]; floor = NN on all modes")
    print("(cover: share of test modes within the predicted +-2 sigma, time/power; ideal ~0.95)")
    head = ("target", "method", "n", "time", "paper", "power", "paper", "cover")
    print("{:<28} {:<7} {:>4}  {:>22} {:>6}  {:>22} {:>6}  {}".format(*head))
    for r in summary.itertuples():
        t = f"{r.time_median:6.2f} [{r.time_q1:5.2f}-{r.time_q3:5.2f}]"
        p = f"{r.power_median:6.2f} [{r.power_q1:5.2f}-{r.power_q3:5.2f}]"
        pt_, pp_ = _fmt(r.paper_time), _fmt(r.paper_power)
        cov = "" if pd.isna(r.time_cover2sd) else f"{r.time_cover2sd:.2f}/{r.power_cover2sd:.2f}"
        print(f"{r.target:<28} {r.method:<7} {r.n:>4}  {t:>22} {pt_}  {p:>22} {pp_}  {cov}")
    print("\nNN-on-all floor (90/10 split):" + ("" if floors else " not run"))
    for name, (t, p) in floors.items():
        print(f"  {name:<28} time {t:6.2f}   power {p:6.2f}")
    if len(matrix):
        print(
            "\nReference choice (paper Fig. 6): median MAPE time / power at 50 modes; "
            "diagonal = NN on all"
        )
        for r in matrix.itertuples():
            print(
                f"  {r.reference:>12} -> {r.target:<12} "
                f"{r.time_median:6.2f} / {r.power_median:5.2f}"
                f"   paper {r.paper_time:6.2f} / {r.paper_power:5.2f}   ({r.kind})"
            )
    if len(checks):
        print("\nTargets:")
        for r in checks.itertuples():
            print(
                f"  {'MET   ' if r.meets else 'MISSED'} {r.target:<28} {r.criterion:<58} "
                f"{r.value:6.2f} vs {r.limit:6.2f}"
            )
        print(f"  {int(checks.meets.sum())} of {len(checks)} met")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 targets, 3 draws, 20 and 50 modes")
    ap.add_argument("--draws", type=int, default=None)
    ap.add_argument(
        "--targets", nargs="*", default=None, help="corpus names (default: all present)"
    )
    ap.add_argument("--sizes", nargs="*", type=int, default=None, help="profiled-mode counts")
    ap.add_argument("--no-floors", action="store_true", help="skip the NN-on-all floors")
    ap.add_argument(
        "--monotone",
        choices=MONOTONE_CHOICES,
        default="none",
        help="the reference's monotone constraints: none (the Predictor's default), the "
        "device's power directions, or every direction it declares (what they cost)",
    )
    ap.add_argument("--no-matrix", action="store_true", help="skip the Fig. 6 reference matrix")
    ap.add_argument(
        "--compare", metavar="JSON", help="print each cell's change against a saved --json run"
    )
    ap.add_argument("--json", help="also write the figures as JSON here")
    ap.add_argument("--out", help="write CSV tables and the PNG plot into this folder")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    from tqdm.auto import tqdm

    draws = args.draws or (3 if args.quick else 10)
    sizes = tuple(args.sizes) if args.sizes else (20, 50) if args.quick else SIZES
    present = set(corpus_names())
    wanted = args.targets or (QUICK_TARGETS if args.quick else TARGETS)
    targets = [t for t in wanted if t in present]
    skipped = [t for t in wanted if t not in present]
    if skipped:
        print(f"corpora not present, skipped: {', '.join(skipped)}", file=sys.stderr)
    corpora = {name: load_corpus(name) for name in dict.fromkeys([REFERENCE, *targets])}
    t_start = time.perf_counter()

    floors_too = "" if args.no_floors else " and the NN-on-all floors"
    print(f"training the ResNet-18 reference{floors_too} ...", file=sys.stderr)
    ref = Predictor(progress=False, monotone=MONOTONE_CHOICES[args.monotone])
    ref.fit(corpora[REFERENCE])
    print(f"reference: {REFERENCE}, monotone constraints {ref.constraints_['monotone'] or 'none'}")
    floors = {}
    for name in tqdm([] if args.no_floors else targets, desc="floors", leave=False):
        floors[name] = floor(corpora[name])

    raw = []
    bar = tqdm(total=len(targets) * len(sizes) * draws, desc="transfers", leave=False)
    for name in targets:
        raw += run_target(ref, name, corpora[name], sizes, draws, bar)
    bar.close()
    raw_df = pd.DataFrame(raw)
    summary = summarise(raw_df)
    checks = target_checks(summary, floors)

    matrix = pd.DataFrame()
    if not args.no_matrix and not args.quick and all(m in present for m in MATRIX):
        refs = {REFERENCE: ref}
        mats = {m: corpora.get(m) if m in corpora else load_corpus(m) for m in MATRIX}
        for m in MATRIX[1:]:
            refs[m] = Predictor(progress=False).fit(mats[m])
        mfloors = {m: floors[m] if m in floors else floor(mats[m]) for m in MATRIX}
        bar = tqdm(total=len(MATRIX) * (len(MATRIX) - 1) * draws, desc="matrix", leave=False)
        matrix = reference_matrix(refs, mats, mfloors, draws, bar)
        bar.close()

    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        suffix = "_quick" if args.quick else ""
        summary.to_csv(out / f"accuracy{suffix}.csv", index=False, float_format="%.3f")
        checks.to_csv(out / f"accuracy_targets{suffix}.csv", index=False, float_format="%.3f")
        if len(matrix):
            matrix.to_csv(out / "accuracy_matrix.csv", index=False, float_format="%.3f")
        plot(summary, floors, out / f"accuracy{suffix}.png")
    print_tables(summary, floors, checks, matrix)
    if args.compare:
        compare(summary, json.loads(Path(args.compare).read_text()), args.compare)
    pt_secs = raw_df[(raw_df.method == "PT")].seconds
    print(
        f"\ntransfer (both heads): median {pt_secs.median():.2f} s, max {pt_secs.max():.2f} s; "
        f"total run {time.perf_counter() - t_start:.0f} s on {args.threads} thread(s)"
    )
    if args.json:
        payload = {
            "draws": draws,
            "sizes": list(sizes),
            "reference": REFERENCE,
            "floors": {k: {"time": v[0], "power": v[1]} for k, v in floors.items()},
            "summary": summary.to_dict(orient="records"),
            "targets": checks.to_dict(orient="records"),
            "matrix": matrix.to_dict(orient="records"),
        }
        Path(args.json).write_text(json.dumps(payload, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
