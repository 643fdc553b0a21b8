"""Regret of tuning inside the training job (``pt.Tuner``) against Zeus's strategy and
against profiling offline first.

The regret of a strategy is the training time (and energy) it spends beyond the oracle:
the job run from its first minibatch in the fastest configuration under the cap (by time
to accuracy when batch size is chosen). Strategies, all under the same cap:

* **tuner**: ``pt.Tuner`` in the loop; every measurement is a training minibatch of the
  job (progress counts), the first after each change untimed; then the pick.
* **zeus**: Zeus's ``GlobalPowerLimitOptimizer`` scheme: every setting of the list in
  turn, 10 warm-up + 40 profiled *training* minibatches each, then the fastest whose
  measured power fits. On the GPU traces the list is every recorded power limit at the
  job's batch size; on the Jetson twin, which has no power-limit knob, the nvpmodel
  presets (MAXN, 15/30/50 W) stand in for it.
* **offline**: ``pt.decide`` with the profiler first (warm-up, power settling, 40
  minibatches a configuration, none of which train), then the whole job at the pick.
* **tuner-safe**: the tuner exploring only inside the safe set of a hard cap
  (``pt.Tuner(hard_cap=True)``, :mod:`powertrain.decisions.hard_cap` on
  :class:`~powertrain.decisions.safe_set.SafeSet`; benchmarks/safe_tuner.py).

* **tuner-bg**: the tuner with ``background=True`` (the decision in a worker thread);
  each step also takes its simulated time in host time (``--pace``), so the decision
  overlaps the steps it would overlap on the board.

The stall: the host seconds the training thread spends inside the tuner's hooks
(for the plain tuner, mostly its transfers and scoring; offline, the host time of
``decide``, whose board time is simulated), measured on the host that runs the
benchmark. The job waits for
it, so ``stall_regret`` adds it to the job's time (and, at the pick's power, to its
energy); the other regret columns leave it out, as before.

Boards. GPU traces (Zeus NSDI '23, V100 and A40, datasets/real/): a
:class:`~powertrain.backends.ReplayBackend` over time per minibatch, taken as
``epoch_s * batch_size / N`` with N the training set's size (:data:`DATASET_SIZES`);
the job trains to the target metric, ``epochs(b) * N`` samples (the traces' own r);
the reference is trained on the GPU's largest other trace (benchmarks/real_data.py's
rule). Two settings: **knobs** (power limit at the trace's default batch size: what the
Lightning and transformers callbacks can do) and **+batch** (power limit x batch size
through r: the plain loop's ``Tuner.batches``, a new dataloader per batch size). Replayed
measurements are exact (no noise). Twin (Orin AGX, batch 16, the shipped ResNet-18
reference): a fresh twin per run, its measurements noisy; the job is ``--twin-epochs``
epochs of the paper's dataset; the oracle and every pick are scored on
``Twin.expected`` (no noise). MobileNetV3 is one of the two workloads ``decide``'s
tolerance was tuned on; YOLOv8n and BERT-base are held out. Nothing in the tuner was
tuned on these runs. Transfers use 30 epochs and 2 folds everywhere (speed).

    python benchmarks/tuning_regret.py [--draws N] [--budget 20] [--json PATH]
    python benchmarks/tuning_regret.py --sections twin --budgets 10 20 40 --background 3 ...
        (a table per budget and the tuner-bg one: benchmarks/regret_budgets.py)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pandas as pd

import powertrain as pt
from powertrain.backends import Backend, ReplayBackend, TwinBackend
from powertrain.data.real_data import (
    load_real_corpus,
    load_real_r,
    real_corpus_names,
    real_provenance,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import regret_budgets  # noqa: E402  (siblings: --budgets' tables, the hard-cap prototype)
from safe_tuner import SafeTuner  # noqa: E402

#: training-set sizes (samples) of the traces' datasets, from the datasets' own pages:
#: ImageNet-1k train, CIFAR-100 train, SQuAD v1.1 train, Sentiment140, LibriSpeech
#: 960 h train utterances, MovieLens-1M ratings
DATASET_SIZES = {
    "imagenet": 1_281_167,
    "cifar100": 50_000,
    "squad": 87_599,
    "sentiment140": 1_600_000,
    "librispeech": 281_241,
    "movielens-1m": 1_000_209,
}
#: twin jobs: samples per epoch of the paper's datasets (FGCS 2024 Table 2)
TWIN_JOBS = {"mobilenetv3": 23_000, "yolov8n": 25_000, "bert-base": 88_000}
QUICK = {"transfer_epochs": 30, "transfer_cv_folds": 2}
#: workloads decide's tolerance was tuned on (benchmarks/decisions.py's TUNING)
TUNING = ("mobilenetv3", "resnet18")
ZEUS_WARMUP, ZEUS_PROFILE = 10, 40


@dataclass
class Job:
    """What a configuration trains per minibatch and what it truly costs."""

    #: samples to target per batch size (the job length)
    samples: Callable[[int], float]
    #: true (time_ms, power_w) of a configuration dict
    truth: Callable[[dict], tuple[float, float]]

    def tta(self, config: dict) -> tuple[float, float]:
        """Time (s) and energy (J) of the whole job in ``config``."""
        ms, w = self.truth(config)
        b = int(config["batch_size"])
        t = ms / 1e3 * self.samples(b) / b
        return t, t * w


@dataclass
class Run:
    time_s: float = 0.0
    energy_j: float = 0.0
    progress: float = 0.0  # fraction of the job trained
    minibatches: int = 0
    cap_w: float = float("inf")
    over_cap_s: float = 0.0  # board time in configurations whose power exceeds the cap


def pick_s(job: Job, pick: dict) -> float:
    """The whole job's time in the pick (its penalty against the oracle's)."""
    return job.tta(pick)[0]


def finish(run: Run, job: Job, pick: dict) -> tuple[float, float]:
    t, e = job.tta(pick)
    left = max(0.0, 1.0 - run.progress)
    return run.time_s + left * t, run.energy_j + left * e


def step_progress(run: Run, job: Job, config: dict, ms: float) -> None:
    _, w = job.truth(config)
    b = int(config["batch_size"])
    run.time_s += ms / 1e3
    run.energy_j += ms / 1e3 * w
    run.over_cap_s += ms / 1e3 if w > run.cap_w else 0.0
    run.progress += b / job.samples(b)
    run.minibatches += 1


def run_tuner(
    board: Backend,
    ref,
    cap: float,
    job: Job,
    budget: int,
    seed: int,
    safe: bool = False,
    pace: float = 0.0,
    **kw,
) -> dict:
    """The tuner in the job. ``pace``: each step also takes its simulated time x pace
    in host time (a sleep), so a decision in the background overlaps as many steps as
    it would on the board (at pace 1); the stall is the host time the training thread
    spends inside the tuner's hooks."""
    make = SafeTuner if safe else pt.Tuner
    tuner = make(
        board, ref, cap, budget=budget, seed=seed, transfer_options=QUICK, log=lambda s: None, **kw
    )
    run, wait = Run(cap_w=cap), 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        while not tuner.settled and run.progress < 1:
            t0 = time.perf_counter()
            tuner.on_step_begin()
            config = tuner.config
            before = tuner.elapsed_s
            tuner.on_step_end()
            wait += time.perf_counter() - t0
            ms = (tuner.elapsed_s - before) * 1e3
            step_progress(run, job, config, ms)
            if pace:
                time.sleep(ms / 1e3 * pace)
    s = tuner.close()
    # a short job may end before the tuner settles: it ran what it measured
    pick = s.config if s.config is not None else tuner.config
    res = in_job(run, job, pick, s.n_measured)
    extra = dict(
        settled=s.config is not None,
        stall_s=wait,
        decide_s=s.decide_s,
        cap_hits=len(getattr(tuner, "hits", [])),
        steps_while_deciding=tuner.steps_while_deciding,
    )
    return {**res, **extra}


def in_job(run: Run, job: Job, pick: dict, measured: int) -> dict:
    """A strategy that explored inside the job: the rest of the job at ``pick``, and the
    figures every strategy reports."""
    t, e = finish(run, job, pick)
    return dict(
        time_s=t,
        energy_j=e,
        explore_s=run.time_s,
        over_cap_s=run.over_cap_s,
        to_pick=run.minibatches,
        measured=measured,
        pick=pick,
        pick_s=pick_s(job, pick),
        pick_w=job.truth(pick)[1],
    )


def run_zeus(board: Backend, settings: pd.DataFrame, cap: float, job: Job) -> dict:
    run = Run(cap_w=cap)
    seen = []
    for config in settings.to_dict("records"):
        board.configure(config)
        marks = []
        for i in range(ZEUS_WARMUP + ZEUS_PROFILE):
            t0 = board.now()
            ms = board.run_minibatch()
            step_progress(run, job, config, ms)
            if i >= ZEUS_WARMUP:
                marks.append((t0, board.now(), ms))
        watts = np.asarray(board.power_samples(marks[0][0], marks[-1][1])).reshape(-1, 2)
        seen.append((np.mean([m[2] for m in marks]), watts[:, 1].mean(), config))
    fits = [s for s in seen if s[1] <= cap] or [min(seen, key=lambda s: s[1])]
    pick = min(fits, key=lambda s: s[0] * job.samples(int(s[2]["batch_size"])) / s[2]["batch_size"])
    return {**in_job(run, job, pick[2], len(seen)), "stall_s": 0.0}


def run_offline(board: Backend, ref, cap: float, job: Job, budget: int, seed: int, **kw) -> dict:
    host = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = pt.decide(board, ref, cap, budget=budget, seed=seed, transfer_options=QUICK, **kw)
    host = time.perf_counter() - host
    m = d.measurements[d.measurements["round"] >= 0]
    lost_e = float((m["profile_s"] * m["power_w"]).sum())
    p = d.pick()
    pick = p.config if p.config is not None else m.loc[m.power_w.idxmin()].to_dict()
    pick = {k: pick[k] for k in board.config_columns if k in pick}
    t, e = finish(Run(), job, pick)
    return dict(
        time_s=d.board_s + t,
        energy_j=lost_e + e,
        explore_s=d.board_s,
        over_cap_s=float(m.loc[m.power_w > cap, "profile_s"].sum()),
        to_pick=0,
        measured=d.n_measured,
        pick=pick,
        pick_s=pick_s(job, pick),
        pick_w=job.truth(pick)[1],
        stall_s=host,  # the boards here are simulated: the host's time is all compute
    )


# ----------------------------------------------------------------- GPU traces --
#: NVML's power sampling period (NvmlBackend's default), s
GPU_SAMPLE_S = 0.1


def per_minibatch(df: pd.DataFrame, n: int, minibatches: int = 40) -> pd.DataFrame:
    """The trace as a board: time per minibatch, and what the profiler would spend per
    configuration (3 sensor periods settling + a warm-up + ``minibatches``)."""
    out = df.assign(time_ms=df.epoch_s * 1e3 * df.batch_size / n).drop(columns="epoch_s")
    return out.assign(profile_s=3 * GPU_SAMPLE_S + (1 + minibatches) * out.time_ms / 1e3)


def replay(table: pd.DataFrame) -> ReplayBackend:
    return ReplayBackend(table, sample_period_s=GPU_SAMPLE_S)


def gpu_cases(names: list[str]) -> Iterator[tuple[str, str, str, str]]:
    """(trace, gpu, workload, reference trace): the GPU's largest other trace."""
    by_gpu: dict[str, list[str]] = {}
    for name in real_corpus_names():
        by_gpu.setdefault(name.split("_")[0], []).append(name)
    for name in names:
        gpu, wl = name.split("_", 1)
        others = sorted(
            (x for x in by_gpu[gpu] if x != name), key=lambda x: -len(load_real_corpus(x))
        )
        yield name, gpu, wl, others[0]


def fit_reference(name: str):
    df = load_real_corpus(name)
    dataset = name.split("_", 1)[1].split("-", 1)[1]
    table = per_minibatch(df, DATASET_SIZES[dataset])
    return pt.Predictor(
        inputs=("power_limit_w", "batch_size"),
        targets=("time_ms", "power_w"),
        progress=False,
        random_state=0,
    ).fit(table[["power_limit_w", "batch_size", "time_ms", "power_w"]])


def gpu_rows(draws: int, budget: int, caps_per_trace: int) -> list[dict]:
    rows = []
    refs: dict[str, pt.Predictor] = {}
    for name, gpu, wl, ref_name in gpu_cases(real_corpus_names()):
        dataset = wl.split("-", 1)[1]
        n = DATASET_SIZES[dataset]
        try:
            r = load_real_r(wl)
        except pt.DataError:
            continue
        df = load_real_corpus(name)
        df = df[df.batch_size.isin(r.batch_size)].reset_index(drop=True)
        table = per_minibatch(df, n)
        epochs = r.set_index(r.batch_size.astype(int)).epochs.astype(float)
        truth = table.set_index(["power_limit_w", "batch_size"])[["time_ms", "power_w"]]

        def true(c, truth=truth):
            row = truth.loc[(float(c["power_limit_w"]), int(c["batch_size"]))]
            return float(row.time_ms), float(row.power_w)

        job = Job(lambda b, epochs=epochs, n=n: float(epochs[b]) * n, true)
        need = pd.DataFrame({"batch_size": epochs.index, "samples": epochs.to_numpy() * n})
        b0 = int(real_provenance(name).get("default_batch_size") or table.batch_size.median())
        if b0 not in set(table.batch_size):
            continue
        if ref_name not in refs:
            refs[ref_name] = fit_reference(ref_name)
        ref = refs[ref_name]
        lo, hi = table.power_w.min(), table.power_w.max()
        caps = np.round(np.linspace(lo + 0.25 * (hi - lo), hi - 0.1 * (hi - lo), caps_per_trace))
        for cap in caps:
            for setting, sizes in (("knobs", [b0]), ("+batch", sorted(table.batch_size.unique()))):
                sub = table[table.batch_size.isin(sizes)].reset_index(drop=True)
                ok = sub[sub.power_w <= cap]
                if ok.empty:
                    continue
                best = min(ok.to_dict("records"), key=lambda c: job.tta(c)[0])
                t_star, e_star = job.tta(best)
                base = dict(
                    source="gpu-trace",
                    gpu=gpu,
                    workload=wl,
                    cap_w=float(cap),
                    setting=setting,
                    oracle_s=t_star,
                    oracle_j=e_star,
                )
                # samples to target per batch size: what turns time per minibatch into
                # time to accuracy, for the tuner and decide alike
                r_arg = need if setting == "+batch" else None
                for d in range(draws):
                    res = run_tuner(
                        replay(sub), ref, cap, job, budget, d, batch_size=sizes, r=r_arg
                    )
                    rows.append({**base, "strategy": "tuner", "draw": d, **res})
                    res = run_offline(
                        replay(sub),
                        ref,
                        cap,
                        job,
                        budget,
                        d,
                        candidates=sub[["power_limit_w", "batch_size"]],
                        r=r_arg,
                    )
                    rows.append({**base, "strategy": "offline", "draw": d, **res})
                if setting == "knobs":  # Zeus tunes the limit at the job's batch size
                    limits = sub.sort_values("power_limit_w", ascending=False)
                    res = run_zeus(replay(sub), limits[["power_limit_w", "batch_size"]], cap, job)
                    rows.append({**base, "strategy": "zeus", "draw": 0, **res})
        print(f"  {name}: done", file=sys.stderr, flush=True)
    return rows


# ----------------------------------------------------------------------- twin --
def twin_rows(
    draws: int,
    budget: int,
    caps: list[float],
    epochs: int,
    strategies: list[str],
    wls: list[str],
    pace: float = 1.0,
) -> list[dict]:
    ref = pt.Predictor.from_pretrained("orin-agx/resnet18")
    rows = []
    for wl in wls:
        n = TWIN_JOBS[wl]
        twin = pt.Twin("orin-agx", wl, seed=0)
        grid = twin.device.profiling_grid()
        truth_t = twin.expected(grid, batch_size=16).assign(batch_size=16)
        cols = list(twin.device.config_columns)
        index = {tuple(np.round(r, 3)): i for i, r in enumerate(truth_t[cols].to_numpy(float))}
        presets = twin.device.presets()
        truth_p = twin.expected(presets.drop(columns=["name", "budget_w"]), batch_size=16)
        by_preset = {
            tuple(np.round(r, 3)): (t, w)
            for r, t, w in zip(
                truth_p.assign(batch_size=16)[cols].to_numpy(float),
                truth_p.time_ms,
                truth_p.power_w,
            )
        }

        def true(c, truth=truth_t, index=index, by_preset=by_preset, cols=cols):
            k = tuple(np.round([float(c[x]) for x in cols], 3))
            if k in by_preset:
                return by_preset[k]
            row = truth.iloc[index[k]]
            return float(row.time_ms), float(row.power_w)

        job = Job(lambda b, n=n: float(epochs * n), true)
        for cap in caps:
            ok = truth_t[truth_t.power_w <= cap]
            best = ok.loc[ok.time_ms.idxmin()].to_dict()
            t_star, e_star = job.tta(best)
            base = dict(
                source="twin",
                gpu="orin-agx",
                workload=wl,
                cap_w=float(cap),
                setting="knobs",
                oracle_s=t_star,
                oracle_j=e_star,
            )
            for d in range(draws):
                for strategy in ("tuner", "tuner-safe", "tuner-bg", "offline"):
                    if strategy not in strategies:
                        continue
                    board = TwinBackend(pt.Twin("orin-agx", wl, seed=0))  # draws: tuner seeds
                    if strategy == "offline":
                        res = run_offline(board, ref, cap, job, budget, d, batch_size=16)
                    else:
                        safe, bg = strategy == "tuner-safe", strategy == "tuner-bg"
                        res = run_tuner(
                            board, ref, cap, job, budget, d, safe, pace if bg else 0.0,
                            batch_size=16, background=bg,
                        )  # fmt: skip
                    rows.append({**base, "strategy": strategy, "draw": d, **res})
            if "zeus" in strategies:
                board = TwinBackend(pt.Twin("orin-agx", wl, seed=0))
                settings = presets.drop(columns=["name", "budget_w"]).assign(batch_size=16)[cols]
                res = run_zeus(board, settings, cap, job)
                rows.append({**base, "strategy": "zeus", "draw": 0, **res})
        print(f"  twin {wl}: done", file=sys.stderr, flush=True)
    return rows


# --------------------------------------------------------------------- report --
def summarise(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    df["time_regret_pct"] = 100 * (df.time_s / df.oracle_s - 1)
    df["energy_regret_pct"] = 100 * (df.energy_j / df.oracle_j - 1)
    stall = df.stall_s.fillna(0.0) if "stall_s" in df else 0.0  # runs saved before it
    df["stall_regret_pct"] = 100 * ((df.time_s + stall) / df.oracle_s - 1)
    df["stall_s"] = stall
    df["explore_min"] = df.explore_s / 60
    df["pick_penalty_pct"] = 100 * (df.pick_s / df.oracle_s - 1)
    df["over_cap_pct"] = 100 * df.over_cap_s / df.explore_s.clip(lower=1e-12)
    df["pick_over_cap_1w"] = df.pick_w > df.cap_w + 1
    # lost to exploration until the pick: the run beyond what the pick itself needs
    # for the whole job (offline: the profiling, which trains nothing)
    df["explore_loss_min"] = (df.time_s - df.pick_s) / 60
    df["explore_loss_kj"] = (df.energy_j - df.pick_s * df.pick_w) / 1e3
    # the twin's MobileNetV3 is one of decide's tolerance-tuning workloads
    df["split"] = np.where(df.workload.isin(TUNING), "tuning", "held-out")
    g = df.groupby(["source", "split", "setting", "strategy"], sort=False)
    return g.agg(
        cases=("time_regret_pct", "size"),
        time_regret_pct_median=("time_regret_pct", "median"),
        time_regret_pct_q3=("time_regret_pct", lambda x: x.quantile(0.75)),
        stall_regret_pct_median=("stall_regret_pct", "median"),
        stall_s_median=("stall_s", "median"),
        stall_s_max=("stall_s", "max"),
        energy_regret_pct_median=("energy_regret_pct", "median"),
        pick_penalty_pct_median=("pick_penalty_pct", "median"),
        explore_min_median=("explore_min", "median"),
        explore_loss_min_median=("explore_loss_min", "median"),
        explore_loss_kj_median=("explore_loss_kj", "median"),
        explore_over_cap_pct_median=("over_cap_pct", "median"),
        explore_over_cap_pct_max=("over_cap_pct", "max"),
        picks_over_cap_1w_pct=("pick_over_cap_1w", lambda x: 100 * x.mean()),
        minibatches_to_pick_median=("to_pick", "median"),
        measured_median=("measured", "median"),
    ).round(3)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=2)
    ap.add_argument("--budget", type=int, default=20)
    ap.add_argument("--budgets", type=int, nargs="+", help="twin only: a table per budget")
    ap.add_argument("--background", type=int, default=0, metavar="DRAWS", help="tuner-bg table")
    ap.add_argument("--caps-per-trace", type=int, default=2)
    ap.add_argument("--twin-caps", type=float, nargs="*", default=[20.0, 30.0, 40.0])
    ap.add_argument("--twin-epochs", type=int, default=10)
    ap.add_argument("--sections", nargs="*", default=["gpu", "twin"])
    ap.add_argument(
        "--strategies", nargs="*", default=["tuner", "offline", "zeus"],
        choices=["tuner", "tuner-safe", "tuner-bg", "offline", "zeus"], help="twin section only",
    )  # fmt: skip
    ap.add_argument("--pace", type=float, default=1.0, help="tuner-bg: host s per board s")
    ap.add_argument("--twin-workloads", nargs="*", default=list(TWIN_JOBS), choices=list(TWIN_JOBS))
    ap.add_argument("--json")
    ap.add_argument("--show", metavar="JSON", help="print the table of a saved --json run")
    args = ap.parse_args(argv)
    if args.show:
        saved = json.loads(open(args.show).read())
        if "budget" in saved["rows"][0]:  # a --budgets run
            print(regret_budgets.report(saved, sys.modules[__name__]))
            return saved
        with pd.option_context("display.width", 400):
            print(summarise(saved["rows"]).to_string())
        return saved
    if args.budgets:
        if "gpu" in args.sections:
            ap.error("--budgets runs the twin section only: add --sections twin")
        out = regret_budgets.run(args, sys.modules[__name__])
        if args.json:
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1)
        return out
    t0 = time.time()
    rows: list[dict] = []
    if "gpu" in args.sections:
        rows += gpu_rows(args.draws, args.budget, args.caps_per_trace)
    if "twin" in args.sections:
        rows += twin_rows(
            args.draws, args.budget, args.twin_caps, args.twin_epochs, args.strategies,
            args.twin_workloads, args.pace,
        )  # fmt: skip
    table = summarise(rows)
    print(f"\nTuning regret (budget {args.budget}, {args.draws} draws; {time.time() - t0:.0f} s):")
    with pd.option_context("display.width", 250):
        print(table.to_string())
    out = {
        "args": vars(args),
        "summary": table.reset_index().to_dict("records"),
        "rows": json.loads(pd.DataFrame(rows).to_json(orient="records")),
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return out


if __name__ == "__main__":
    main()
