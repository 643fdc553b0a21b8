"""Decisions with the board in the loop (``pt.decide``) against profile-then-trust.

Every decision runs against a :class:`~powertrain.backends.ReplayBackend`: a board that
answers from a recorded table, charges the board time each measurement cost and refuses
configurations it has no record of. ``--method`` is any registered sampler
(``powertrain/decisions/samplers/``); beside it sections 1 and 2 run the random sampler,
the floor, on the same draws (``--no-floor``: not), and sections 7 and 8 report it as a row.

1. Twin, Orin AGX, one decision per cap (``--per-cap-caps``, default 20/30/40 W):
   ``pt.decide(board, ref, cap, budget=--per-cap-budget)`` with its default settings
   over the 4,368-mode grid; the board replays the twin corpus
   (``datasets/orin-agx_{workload}_bs16.csv``, the twin's measurements); a pick is scored
   on its true time (``Twin.expected``, no measurement noise) against the fastest
   configuration whose power *as the board records it* fits the cap: the best a decision
   that keeps only what it measured under the cap can reach on a board that answers every
   draw with the same record (:func:`prefix_scores`; the penalty against the optimum by
   expected power is kept beside it). Because the loop is deterministic given
   its seed, the first k measurements of a budget-50 run are exactly what a budget-k
   run measures (same start, same rounds), so one run scores every budget k <= 50: the
   fastest measured configuration under the cap among the first k.
2. Twin, one budget of 50 shared by the whole 17-50 W sweep: one ``pt.decide`` for all
   caps.
3. Baselines (``benchmarks/optimisation.run_case``): PT@50, PT@35+15+obs (refined),
   NN@50, RND@50, ORACLE, run on the same caps, or read from a saved optimisation run
   (``--baselines-from``: its whole-sweep figures and its per-cap medians at the caps
   decided here).
4. Real traces (Zeus V100/A40, per-epoch time): time to accuracy over batch size x
   power limit, one decision per cap with a budget of 10 measured configurations, the
   reference trained on the GPU's largest trace (the rule of benchmarks/real_data.py).
5. A cap schedule on the twin (a battery budget falling 50 -> 15 W in 5 W steps, one
   every ``--schedule-step-s`` seconds, while training 100 epochs): total training time
   with ``pt.follow`` from one shared-budget decision (cached answers only, and a
   controller that re-decides an unsure cap with up to 6 measurements), with the oracle
   schedule (the true optimum under each cap, no profiling), and a lower bound for
   re-profiling at each change (the same picks plus 10 configurations of board time per
   change); per cap, how much slower than the oracle's each run's pick is.
6. Peers: Optuna's constrained TPE and GP samplers on the boards, caps and draws of
   sections 1 and 2 (benchmarks/decision_peers.py), in one table with pt.decide's rows.
7. Held out: a Jetson outside the catalog (``HELD_OUT_DEVICE``) with a workload no
   default was chosen on, on a live twin, one shared budget over its own range.
8. Cross-device cases of the tuning set (``CROSS_DEVICE``): section 7's run on catalog
   devices, for judging a change meant for transfers across devices without looking at
   section 7.

    python benchmarks/decisions.py [--draws N] [--caps ...] [--workloads ...]
        [--sections per-cap shared baselines real schedule peers held-out cross-device]
        [--json PATH] [--png PATH]
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
from powertrain.backends import ReplayBackend, TwinBackend
from powertrain.data.corpora import load_corpus
from powertrain.decisions.samplers import SAMPLERS as METHODS
from powertrain.errors import DataError

sys.path.insert(0, str(Path(__file__).resolve().parent))
import optimisation  # noqa: E402  (a sibling benchmark: its baselines and scoring)
import results_file  # noqa: E402  (summaries in --json, the records in detail/)
from decision_peers import SAMPLERS, grid_values, peer_run  # noqa: E402

WORKLOADS = ("mobilenetv3", "resnet18", "yolov8n", "bert-base", "lstm")
TUNING = {"mobilenetv3": "tuning", "resnet18": "tuning"}
CAPS = tuple(float(c) for c in range(17, 51))
BUDGETS = (10, 15, 20, 25, 30, 40, 50)
#: the per-cap target's budget: median <= 0.5 %, Q3 <= 2 % with at most this many measured
PER_CAP_TARGET = 15
KEYS = ["cores", "cpu_mhz", "gpu_mhz", "mem_mhz", "batch_size"]
#: the floor every strategy is reported beside (sections 1, 2, 6, 7, 8): the random sampler
FLOOR = "random"
#: the cap schedule of section 5: a battery budget falling 50 -> 15 W in 5 W steps
SCHEDULE_CAPS = np.arange(50.0, 15.0 - 1e-9, -5.0)
#: records the --json file keeps whole: benchmarks/real_data.py prints section 4's rows
KEEP = ("real",)
SECTIONS = (
    "per-cap",
    "shared",
    "baselines",
    "real",
    "schedule",
    "peers",
    "held-out",
    "cross-device",
)
TRUTH = (
    "penalty: true time (Twin.expected) of the pick over the fastest configuration whose "
    "power as the\nreplayed board records it fits the cap (what a measured decision can "
    "confirm; the record is the\nsame in every draw); vs expected: over the optimum by "
    "expected power; A/L+1 on expected power"
)


def _draw_ids(draws) -> range:
    """The draws (seeds) to run: ``draws`` of them from 0, or a range of them."""
    return draws if isinstance(draws, range) else range(int(draws))


def reference_for(workload: str) -> str:
    """The shipped reference each twin workload transfers from (ResNet-18 for all but
    itself, which uses MobileNetV3: as benchmarks/optimisation.py)."""
    return "orin-agx/mobilenetv3" if workload == "resnet18" else "orin-agx/resnet18"


def _truth(workload: str) -> pd.DataFrame:
    twin = pt.Twin("orin-agx", workload, seed=0)
    grid = twin.device.profiling_grid()
    return twin.expected(grid, twin.workload.default_batch_size)


def prefix_scores(
    measured: pd.DataFrame,
    truth: pd.DataFrame,
    caps: np.ndarray,
    budgets=BUDGETS,
    board: pd.DataFrame | None = None,
) -> list[dict]:
    """For each budget k and cap: the fastest of the first k measurements under the cap,
    scored on its true time (``truth``: Twin.expected) against the fastest configuration
    whose power *as the board records it* fits (``penalty_pct``; ``board``: the replayed
    table, else the truth's power). A decision keeps a configuration only if its measured
    power fits, and a replayed board answers every draw with the same record: an optimum
    whose expected power fits by less than the record's noise but whose record does not
    (LSTM at 30 W: 29.96 W expected, 30.06 W recorded) is out of every decision's reach
    on this board. ``penalty_expected_pct``: against the optimum by expected power; A/L+1
    (``excess_w``) is on the expected power."""
    m = measured[measured["round"] >= 0].reset_index(drop=True)
    t = truth.set_index(KEYS)
    rec = (
        truth
        if board is None
        else board[KEYS + ["power_w"]].merge(truth[KEYS + ["time_ms"]], on=KEYS)
    )
    rows = []
    for k in budgets:
        first = m.iloc[:k]
        for cap in caps:
            ok = truth.power_w <= cap
            fits = rec.power_w <= cap  # none: nothing measured can fit (no pick)
            if not ok.any():
                continue
            best = float(truth.time_ms[ok].min())
            reach = float(rec.time_ms[fits].min()) if fits.any() else np.nan
            under = first[first.power_w <= cap]
            row = dict(budget=k, cap_w=float(cap), n_measured=min(k, len(m)))
            if under.empty:
                rows.append({**row, "penalty_pct": np.nan, "excess_w": np.nan, "no_pick": True})
                continue
            j = under.time_ms.idxmin()
            true = t.loc[tuple(under.loc[j, KEYS])]
            rows.append(
                {
                    **row,
                    "penalty_pct": 100 * (float(true.time_ms) / reach - 1),
                    "penalty_expected_pct": 100 * (float(true.time_ms) / best - 1),
                    "excess_w": float(true.power_w) - cap,
                    "no_pick": False,
                }
            )
    return rows


def _methods(method: str, floor: bool) -> list[str]:
    """pt.decide's methods to run: ``method``, and the random floor beside it."""
    return [method, *([FLOOR] if floor and method != FLOOR else [])]


def twin_per_cap(
    workloads, caps, draws, budget=50, partial=None, method="table", floor=True
) -> pd.DataFrame:
    """Section 1: one ``pt.decide`` per (workload, cap, draw, method: ``method`` and, with
    ``floor``, the random sampler); ``partial(rows)`` is called after each decision (a
    long run keeps what it finished)."""
    rows: list[dict] = []
    scored = [k for k in BUDGETS if k <= budget]  # what a budget-k run would have measured
    for wl in workloads:
        truth = _truth(wl)
        ref = pt.Predictor.from_pretrained(reference_for(wl))
        corpus = load_corpus(f"orin-agx_{wl}_bs16")
        for d, cap, m in [(d, c, m) for d in _draw_ids(draws) for c in caps
                          for m in _methods(method, floor)]:  # fmt: skip
            board = ReplayBackend(corpus)
            t0 = time.time()
            dec = pt.decide(board, ref, float(cap), budget=budget, seed=d, method=m)
            for r in prefix_scores(dec.measurements, truth, np.array([cap]), scored, board=corpus):
                rows.append(
                    {
                        **r,
                        "workload": wl,
                        "draw": d,
                        "stop": dec.stop_reason,
                        "stopped_at": dec.n_measured,
                        "board_h": dec.board_s / 3600,
                        "method": m,
                    }
                )
            if partial is not None:
                partial(rows)
            print(
                f"  per-cap {wl} {m} draw {d} cap {cap:g} W: {dec.n_measured} measured, "
                f"{dec.stop_reason}, {time.time() - t0:.0f} s",
                flush=True,
            )
    return pd.DataFrame(rows)


def twin_shared(
    workloads, caps, draws, budget=50, also=SCHEDULE_CAPS, partial=None, method="table",
    floor=True,
) -> tuple[pd.DataFrame, dict]:  # fmt: skip
    """Section 2: one ``pt.decide`` for the whole sweep per (workload, draw); also
    returns each workload's first decision (the schedule section follows it). The
    decision also covers the caps ``also`` (the schedule's); only ``caps`` are scored."""
    every = np.union1d(caps, also)
    rows, first = [], {}
    for wl in workloads:
        truth = _truth(wl)
        ref = pt.Predictor.from_pretrained(reference_for(wl))
        corpus = load_corpus(f"orin-agx_{wl}_bs16")
        for d, m in [(d, m) for d in _draw_ids(draws) for m in _methods(method, floor)]:
            t0 = time.time()
            dec = pt.decide(ReplayBackend(corpus), ref, every, budget=budget, seed=d, method=m)
            if m == method:
                first.setdefault(wl, dec)
            for r in prefix_scores(dec.measurements, truth, caps, board=corpus):
                rows.append(
                    {
                        **r,
                        "workload": wl,
                        "draw": d,
                        "stop": dec.stop_reason,
                        "stopped_at": dec.n_measured,
                        "board_min": dec.board_minutes,
                        "expected_loss_pct": 100 * dec.expected_loss,
                        "method": m,
                    }
                )
            if partial is not None:
                partial(rows)
            print(
                f"  shared {wl} {m} draw {d}: {dec.n_measured} measured, {dec.stop_reason}, "
                f"{time.time() - t0:.0f} s",
                flush=True,
            )
    return pd.DataFrame(rows), first


def baselines(workloads, caps, draws) -> dict:
    """Section 3: the profile-then-trust strategies of benchmarks/optimisation.py, run on
    the same caps (the shape of :func:`saved_baselines`)."""
    out: dict = {"from": "this run", "draws": draws, "n_caps": len(caps)}
    for wl in workloads:
        ref = reference_for(wl)
        res = optimisation.score_workload(
            "orin-agx", wl, ref, caps, draws, ["PT@50", "PT@35+15+obs", "NN@50", "RND@50", "ORACLE"]
        )
        out[wl] = {
            name: {
                **{k: v[k] for k in ("penalty_median", "penalty_q3", "al1_pct")},
                "at_caps_median": float(np.median(v["per_cap_penalty"])),
            }
            for name, v in res.items()
        }
        print(f"  baselines {wl} done", flush=True)
    return out


def saved_baselines(path: str, caps: np.ndarray) -> dict:
    """Baselines from a saved ``benchmarks/optimisation.py --json`` run: each strategy's
    summary over its whole sweep, and the median over its draws at each of ``caps``
    (``at_caps_median``: the median of those, comparable with the caps decided here)."""
    saved = json.loads(Path(path).read_text())
    where = {float(c): i for i, c in enumerate(saved["caps"])}
    missing = [c for c in caps if float(c) not in where]
    if missing:
        raise DataError(f"{path}: has no result for cap(s) {missing}")
    out = {}
    for wl, r in saved["results"].items():
        out[wl] = {}
        for name in ("PT@50", "PT@35+15+obs", "NN@50", "RND@50", "ORACLE"):
            v = r["strategies"].get(name)
            if v is None:
                continue
            at = [v["per_cap_penalty"][where[float(c)]] for c in caps]
            out[wl][name] = {
                **{k: v[k] for k in ("penalty_median", "penalty_q3", "al1_pct")},
                "at_caps_median": float(np.median(at)),
            }
    return {"from": path, "draws": saved.get("draws"), "n_caps": len(saved["caps"]), **out}


# -------------------------------------------------------------------------- peers --
def peers(workloads, caps, shared_caps, draws, samplers=SAMPLERS, budget=50, partial=None):
    """Section 6: Optuna's constrained TPE and GP samplers on the same replayed boards,
    per cap (``caps``) and over the shared sweep (``shared_caps``), scored as sections
    1 and 2 (benchmarks/decision_peers.py)."""
    knobs = KEYS[:-1]
    rows: list[dict] = []
    for wl in workloads:
        truth = _truth(wl)
        corpus = load_corpus(f"orin-agx_{wl}_bs16")
        values = grid_values(corpus, knobs)
        for d in _draw_ids(draws):
            for name in samplers:
                t0 = time.time()
                for cap in [*caps, None]:
                    board = ReplayBackend(corpus)
                    m = peer_run(
                        board.measure, knobs, values, name, d, budget, cap, {"batch_size": 16}
                    )
                    scored = np.array([cap]) if cap is not None else shared_caps
                    for r in prefix_scores(m, truth, scored, board=corpus):
                        rows.append(
                            {
                                **r,
                                "workload": wl,
                                "draw": d,
                                "strategy": name,
                                "mode": "per-cap" if cap is not None else "shared",
                                "board_min": board.now() / 60,
                            }
                        )
                if partial is not None:
                    partial(rows)
                print(f"  peers {wl} {name} draw {d}: {time.time() - t0:.0f} s", flush=True)
    return pd.DataFrame(rows)


# ------------------------------------------------------------ held-out device --
#: kept out of every tuning decision: a Jetson outside the catalog and a workload no
#: default was chosen on (the five above never include it)
HELD_OUT_DEVICE = "orin-nx-16gb.json"
HELD_OUT_WORKLOAD = "transformer-char"
#: section 8, the cross-device cases of the tuning set (catalog devices, twin workloads
#: outside the five): they, not the held-out device, judge a change meant for a transfer
#: across devices
CROSS_DEVICE = (("orin-nano", "resnet18-cifar"), ("xavier-agx", "mobilenetv2-cifar"))


#: pt.decide's runs in section 7: name -> (method, protocol); the last, the random sampler,
#: is the floor
HELD_OUT_RUNS = {
    "table": ("table", "settled"),
    "table-fixed": ("table", "fixed"),
    "contest-fixed": ("contest", "fixed"),
    FLOOR: (FLOOR, "settled"),
}


def held_out(
    draws, budget=50, methods=HELD_OUT_RUNS, samplers=SAMPLERS, partial=None,
    device=HELD_OUT_DEVICE, workload=HELD_OUT_WORKLOAD,
):  # fmt: skip
    """Sections 7 and 8: a device and workload (by default the held-out ones) on a live
    twin board (its measurement noise), the cap table over the device's own range in
    0.5 W steps, one shared budget (``device``: a catalog name, or a spec file among the
    package's examples);
    ``pt.decide`` transfers the Orin AGX ResNet-18 reference across devices, as a new user
    would: the table method with the settled and the fixed 40-minibatch protocol, and the
    earlier contest loop with the fixed one (the decide before the table method); the
    Optuna peers measure with the fixed protocol. Scored on expected power."""
    from importlib.resources import files

    from powertrain.backends import TwinBackend

    spec = str(files("powertrain._examples") / device) if device.endswith(".json") else device
    twin = pt.Twin(pt.get_device(spec), workload, seed=0)
    bs = int(twin.workload.default_batch_size)
    grid = twin.device.profiling_grid()
    truth = twin.expected(grid, bs)
    lo, hi = np.ceil(truth.power_w.min() * 2) / 2 + 0.5, np.floor(truth.power_w.max() * 2) / 2
    caps = np.arange(lo, hi + 1e-9, 0.5)
    ref = pt.Predictor.from_pretrained("orin-agx/resnet18")
    knobs = KEYS[:-1]
    rows: list[dict] = []

    def measure(configs: pd.DataFrame) -> pd.DataFrame:
        return pt.profile(board, configs, progress=False)

    for d in _draw_ids(draws):
        for name in [*methods, *samplers]:
            t0 = time.time()
            board = TwinBackend(pt.Twin(twin.device, workload, seed=0))
            if name in methods:
                method, protocol = methods[name]
                dec = pt.decide(
                    board,
                    ref,
                    caps,
                    budget=budget,
                    seed=d,
                    method=method,
                    protocol=protocol,
                )
                m, extra = (
                    dec.measurements,
                    {
                        "stop": dec.stop_reason,
                        "stopped_at": dec.n_measured,
                        "expected_loss_pct": 100 * dec.expected_loss,
                    },
                )
                board_min = dec.board_minutes
            else:
                m = peer_run(
                    measure,
                    knobs,
                    grid_values(grid, knobs),
                    name,
                    d,
                    budget,
                    None,
                    {"batch_size": bs},
                )
                extra, board_min = {}, float(m.profile_s.sum() / 60)
            for r in prefix_scores(m, truth, caps, budgets=(10, 25, 50)):
                rows.append(
                    {
                        **r,
                        **extra,
                        "strategy": name,
                        "draw": d,
                        "board_min": board_min,
                        "workload": workload,
                        "device": twin.device.name,
                    }
                )
            if partial is not None:
                partial(rows)
            print(f"  {twin.device.name} {name} draw {d}: {time.time() - t0:.0f} s", flush=True)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------- real data --
def real_traces(draws, budget=10, partial=None, folder=None) -> pd.DataFrame:
    """Section 4: per-cap decisions on the Zeus traces (or the corpora of ``folder``)
    through the replay board (``partial(rows)`` after each workload)."""
    import real_data as rd  # the sibling benchmark: discovery and the reference rule

    from powertrain.data.real_data import load_real_r

    rows = []
    for gpu, corpora in sorted(rd.discover(folder).items()):
        source = max(sorted(corpora), key=lambda w: len(corpora[w]))
        ref = rd.fit_heads(corpora[source].df, 0, corpora[source].targets)
        for wl in sorted(corpora):
            c = corpora[wl]
            if wl == source or c.targets[0] != "epoch_s":
                continue
            try:
                r = load_real_r(wl, folder)
            except DataError:
                continue
            df = c.df[c.df.batch_size.isin(r.batch_size)].reset_index(drop=True)
            if df.batch_size.nunique() < 2:
                continue
            tta = df.epoch_s.to_numpy() * df.batch_size.map(r.set_index("batch_size").epochs)
            caps = np.arange(np.ceil(df.power_w.min() / 10) * 10 + 10, df.power_w.max() + 10, 20.0)
            inputs = list(c.inputs)
            for d in _draw_ids(draws):
                for cap in caps:
                    ok = df.power_w.to_numpy() <= cap
                    if not ok.any():
                        continue
                    board = ReplayBackend(df, seconds_per_config=60.0)
                    row = dict(gpu=gpu, workload=wl, draw=d, cap_w=float(cap))
                    try:
                        dec = pt.decide(
                            board,
                            ref,
                            float(cap),
                            budget=budget,
                            candidates=df[inputs],
                            r=r[["batch_size", "epochs"]],
                            seed=d,
                        )
                    except DataError as e:  # e.g. the transfer refusing a measured outlier
                        rows.append({**row, "error": str(e), "n_measured": board.n_measured})
                        continue
                    p = dec.pick()
                    best = float(tta[ok].min())
                    row.update(n_measured=dec.n_measured, stop=dec.stop_reason)
                    if p.config is None:
                        rows.append({**row, "penalty_pct": np.nan, "excess_w": np.nan})
                        continue
                    hit = np.logical_and.reduce([df[k] == p.config[k] for k in inputs])
                    j = int(np.flatnonzero(hit)[0])
                    row.update(
                        penalty_pct=100 * (float(tta[j]) / best - 1),
                        excess_w=float(df.power_w[j]) - cap,
                    )
                    rows.append(row)
            if partial is not None:
                partial(rows)
            print(
                f"  real {gpu} {wl}: {len(caps)} caps x {len(_draw_ids(draws))} draws", flush=True
            )
    return pd.DataFrame(rows)


# ----------------------------------------------------------------- cap schedule --
class _Oracle:
    """The true optimum under each cap (Twin.expected): no profiling, no error."""

    def __init__(self, truth: pd.DataFrame):
        self.truth = truth

    def config_for(self, cap: float):
        from powertrain.decisions.decide import CapPick

        row = pt.fastest_under(self.truth, cap)
        return CapPick(cap, {k: float(row[k]) for k in KEYS}, True, None, None, None, 1.0, "")


def schedule(
    decisions: dict, epochs=100, step_s=3600.0, reprofile_budget=10, redecide_budget=6
) -> list[dict]:
    """Section 5: total training time under a falling cap (``SCHEDULE_CAPS``, one step every
    ``step_s``) on a live twin board, following each workload's shared decision (its
    measurements replayed from the twin corpus, their recorded board time charged), and
    with the oracle schedule. Profiling runs the training job itself, so its minibatches
    count as progress (PowerTrain §3: profiling "is not wasted"); the ``lost`` variant
    counts them as lost. ``follow``: the cached answers only; ``redecide``: a controller
    that re-decides an unsure cap with up to ``redecide_budget`` measurements (replayed,
    charged and credited as the decision's). Re-profiling at each change is bounded
    below: the cached picks plus ``reprofile_budget`` configurations of board time at
    each change."""
    rows = []
    caps = SCHEDULE_CAPS
    sched = pt.CapSchedule([(i * step_s, float(c)) for i, c in enumerate(caps)])
    for wl, dec in decisions.items():
        twin = pt.Twin("orin-agx", wl, seed=0)
        b = twin.workload.default_batch_size
        n = int(np.ceil(twin.workload.dataset_samples / b)) * epochs
        truth = _truth(wl)
        oracle = pt.follow(
            TwinBackend(pt.Twin("orin-agx", wl, seed=0)), _Oracle(truth), sched, minibatches=n
        )
        ran = dec.measurements[dec.measurements["round"] >= 0]
        credited = _credited(ran)
        ctl = pt.CapController.from_decision(dec)
        kept = pt.follow(
            TwinBackend(pt.Twin("orin-agx", wl, seed=0)),
            ctl,
            sched,
            minibatches=max(1, n - credited),
        )
        lost = pt.follow(TwinBackend(pt.Twin("orin-agx", wl, seed=0)), ctl, sched, minibatches=n)
        # re-deciding: the caps it will re-decide are known only as it runs, so the
        # minibatches its measurements credit are subtracted after a first pass
        corpus = load_corpus(f"orin-agx_{wl}_bs16")
        ref = pt.Predictor.from_pretrained(reference_for(wl))

        options = dict(reference=ref, budget=redecide_budget)
        first = pt.follow(
            TwinBackend(pt.Twin("orin-agx", wl, seed=0)),
            pt.CapController.from_decision(dec, board=ReplayBackend(corpus), **options),
            sched,
            minibatches=n,
        )
        extra = first.profiling_s
        ctl2 = pt.CapController.from_decision(dec, board=ReplayBackend(corpus), **options)
        again = pt.follow(
            TwinBackend(pt.Twin("orin-agx", wl, seed=0)),
            ctl2,
            sched,
            minibatches=max(1, n - credited - _credited(ctl2.measured())),
        )
        per_config_s = float(ran.profile_s.median())
        changes = len(caps) - 1
        row = dict(
            workload=wl,
            minibatches=n,
            oracle_h=oracle.total_s / 3600,
            profiling_h=dec.board_s / 3600,
            follow_h=(dec.board_s + kept.total_s) / 3600,
            follow_lost_h=(dec.board_s + lost.total_s) / 3600,
            redecide_h=(dec.board_s + again.profiling_s + again.total_s) / 3600,
            redecide_lost_h=(dec.board_s + extra + first.total_s) / 3600,
            redecided=len(ctl2.redecided),
            redecide_measured=ctl2.n_measured,
            reprofile_lower_bound_h=(
                dec.board_s + lost.total_s + changes * reprofile_budget * per_config_s
            )
            / 3600,
            unmeasured_segments=int((~kept.segments.measured.astype(bool)).sum()),
        )
        for k in (
            "follow_h",
            "follow_lost_h",
            "redecide_h",
            "redecide_lost_h",
            "reprofile_lower_bound_h",
        ):
            row[k[:-2] + "_over_oracle_pct"] = 100 * (row[k] / row["oracle_h"] - 1)
        row.update(_schedule_picks(truth, step_s, cached=kept, redecided=again))
        rows.append(row)
        print(f"  schedule {wl}: {row}", flush=True)
    return rows


def _credited(ran: pd.DataFrame) -> int:
    """Training minibatches a set of measurements ran (profiling runs the training job)."""
    return int(np.sum(ran.profile_s * 1e3 / ran.time_ms))


def _schedule_picks(truth: pd.DataFrame, step_s: float, **runs) -> dict:
    """Per schedule cap, how much slower than the oracle's pick each run's configuration
    is (%, from its segments): what separates the picks from the switching."""
    t = truth.set_index(KEYS)
    out = {}
    for name, run in runs.items():
        # the configuration in force under each cap: the last one switched to at or before
        # it (a cap whose pick is the previous one's opens no segment); nan: not reached
        seg = run.segments
        over = []
        for i, c in enumerate(SCHEDULE_CAPS):
            began = seg[seg.power_cap_w >= c]
            if began.empty or i * step_s >= seg.end_s.max():
                over.append(np.nan)
                continue
            row = began.iloc[-1]
            best = float(pt.fastest_under(truth, c).time_ms)
            mine = float(t.loc[tuple(row[k] for k in KEYS)].time_ms)
            over.append(round(100 * (mine / best - 1), 2))
        out[f"{name}_pick_over_pct"] = over
    return out


# ------------------------------------------------------------------------ report --
def _summ(df: pd.DataFrame) -> dict:
    pen = df.penalty_pct.to_numpy(float)
    ok = np.isfinite(pen)
    exc = df.excess_w.to_numpy(float)[ok]
    return {
        "penalty_median": float(np.median(pen[ok])) if ok.any() else np.nan,
        "penalty_q3": float(np.percentile(pen[ok], 75)) if ok.any() else np.nan,
        "expected_median": float(np.nanmedian(df.penalty_expected_pct))
        if "penalty_expected_pct" in df and ok.any()
        else np.nan,
        "al1_pct": float(100 * np.mean(exc > 1.0)) if ok.any() else np.nan,
        "no_pick_pct": float(100 * np.mean(~ok)),
        "n": int(len(df)),
    }


def _split_floor(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A section's rows: (the method run, the random floor beside it)."""
    if "method" not in df or not (df.method == FLOOR).any() or (df.method == FLOOR).all():
        return df, df.iloc[:0]
    return df[df.method != FLOOR], df[df.method == FLOOR]


def _print_floor(floor: pd.DataFrame) -> None:
    if len(floor):
        print(f"{FLOOR} sampler (the floor), median / Q3 penalty % by budget:")
        print(_budget_table(floor, ["workload"]).to_string())


def _draws_run(df: pd.DataFrame) -> str:
    """The draws a section actually ran: one number, or the range over its workloads."""
    per = df.groupby("workload").draw.nunique()
    return f"{per.min()}" if per.min() == per.max() else f"{per.min()}-{per.max()}"


def check(label: str, value: float, limit: float) -> str:
    ok = bool(np.isfinite(value) and value <= limit)
    by = "" if ok else f" (by {value - limit:.2f})"
    return f"  {label:62s} {value:7.2f} <= {limit:g}  {'MET' if ok else 'MISSED' + by}"


def report(out: dict) -> None:
    lines = []
    if "per_cap" in out:
        pc, floor = _split_floor(pd.DataFrame(out["per_cap"]))
        print(
            f"\n1. Twin, one decision per cap ({pc.cap_w.nunique()} caps, {_draws_run(pc)} draws)"
        )
        print(TRUTH)
        print(
            f"{'workload':12s} {'set':8s} {'budget':>6s} {'median%':>8s} {'Q3%':>6s} "
            f"{'A/L+1%':>7s} {'nopick%':>8s} {'stopped at (median)':>20s} {'vs expected%':>12s}"
        )
        for (wl, k), g in pc.groupby(["workload", "budget"], sort=False):
            s = _summ(g)
            print(
                f"{wl:12s} {TUNING.get(wl, 'held-out'):8s} {k:6d} {s['penalty_median']:8.2f} "
                f"{s['penalty_q3']:6.2f} {s['al1_pct']:7.1f} {s['no_pick_pct']:8.1f} "
                f"{g.stopped_at.median():20.0f} {s['expected_median']:12.2f}"
            )
        top = int(pc.budget.max())
        at = pc[pc.budget == PER_CAP_TARGET]
        n = f"per-cap {PER_CAP_TARGET} measured"
        for wl, g in at.groupby("workload", sort=False):
            s = _summ(g)
            lines.append(
                check(f"{wl} {n}, median penalty %", s["penalty_median"], 0.5)
                + f"  (vs expected power: {s['expected_median']:.2f})"
            )
            lines.append(check(f"{wl} {n}, Q3 penalty %", s["penalty_q3"], 2.0))
            lines.append(check(f"{wl} {n}, A/L+1 %", s["al1_pct"], 0.0))
        s = _summ(at)
        lines.append(check(f"{n}, all workloads, median %", s["penalty_median"], 0.5))
        lines.append(check(f"{n}, all workloads, Q3 %", s["penalty_q3"], 2.0))
        stops = pc[pc.budget == top].groupby("stop").size()
        print(
            f"stop reasons (budget {top} runs): " + ", ".join(f"{k} {v}" for k, v in stops.items())
        )
        print(f"board hours per decision (median): {pc[pc.budget == top].board_h.median():.2f}")
        _print_floor(floor)
    if "shared" in out:
        sh, floor = _split_floor(pd.DataFrame(out["shared"]))
        print(
            f"\n2. Twin, one budget shared by the {sh.cap_w.min():g}-{sh.cap_w.max():g} W "
            f"sweep ({_draws_run(sh)} draws; penalty as in 1.)"
        )
        for (wl, k), g in sh.groupby(["workload", "budget"], sort=False):
            if k in (25, 50):
                s = _summ(g)
                print(
                    f"{wl:12s} {TUNING.get(wl, 'held-out'):8s} budget {k:3d}: median "
                    f"{s['penalty_median']:6.2f} % Q3 {s['penalty_q3']:6.2f} A/L+1 "
                    f"{s['al1_pct']:5.1f} % no pick {s['no_pick_pct']:5.1f} % "
                    f"(vs expected power {s['expected_median']:5.2f} %)"
                )
        _print_floor(floor)
        s = _summ(sh[sh.budget == 50])
        lines.append(
            check("shared budget 50, all workloads, median penalty %", s["penalty_median"], 1.5)
            + f"  (vs expected power: {s['expected_median']:.2f})"
        )
    if "baselines" in out:
        b = out["baselines"]
        print(
            f"\n3. Baselines (benchmarks/optimisation.py, {b['draws']} draws, {b['n_caps']} "
            f"caps, from {b['from']}): whole sweep, and the median at the caps decided above"
        )
        for wl, res in b.items():
            if not isinstance(res, dict):
                continue
            for name, v in res.items():
                print(
                    f"{wl:12s} {name:14s} median {v['penalty_median']:7.2f} % Q3 "
                    f"{v['penalty_q3']:6.2f} A/L+1 {v['al1_pct']:5.1f} %   at these caps "
                    f"{v['at_caps_median']:6.2f} %"
                )
        if "per_cap" in out:
            pc = _split_floor(pd.DataFrame(out["per_cap"]))[0]
            for wl, res in b.items():
                g = pc[(pc.workload == wl) & (pc.budget == 25)]
                if isinstance(res, dict) and len(g) and "PT@50" in res:
                    s = _summ(g)
                    lines.append(  # PT@50 is scored by expected power: so is this
                        check(
                            f"{wl} active@25 median - PT@50 at these caps (points)",
                            s["expected_median"] - res["PT@50"]["at_caps_median"],
                            0.0,
                        )
                    )
                    lines.append(
                        check(
                            f"{wl} active@25 A/L+1 - PT@50 A/L+1 (points)",
                            s["al1_pct"] - res["PT@50"]["al1_pct"],
                            0.0,
                        )
                    )
    if "real" in out and len(out["real"]):
        rl = pd.DataFrame(out["real"])
        failed = rl[rl.error.notna()] if "error" in rl else rl.iloc[:0]
        rl = rl[rl.error.isna()] if "error" in rl else rl
        print(
            f"\n4. Real traces through the replay board (budget 10 per cap, {_draws_run(rl)} "
            f"draws; data: {out.get('real_data', 'datasets/real')})"
        )
        g = rl.groupby(["gpu", "workload"]).apply(
            lambda x: pd.Series(_summ(x)), include_groups=False
        )
        print(g.round(2).to_string())
        s = _summ(rl)
        print(f"measured per cap: median {rl.n_measured.median():.0f}, max {rl.n_measured.max()}")
        for (gpu, wl), g in failed.groupby(["gpu", "workload"]):
            print(f"{gpu} {wl}: {len(g)} decisions refused, left out: {g.error.iloc[0]}")
        lines.append(check("real traces median penalty %", s["penalty_median"], 0.5))
        lines.append(check("real traces picks over cap + 1 W (%)", s["al1_pct"], 0.0))
        lines.append(check("real traces max measured per cap", float(rl.n_measured.max()), 10))
    if "schedule" in out:
        print(
            "\n5. Cap schedule 50 -> 15 W (5 W steps) on the twin, total training hours "
            "(100 epochs)"
        )
        sc = pd.DataFrame(out["schedule"])
        lists = [c for c in sc.columns if c.endswith("_pick_over_pct")]
        print(sc.drop(columns=lists).round(3).T.to_string(header=False))
        for _, r in sc.iterrows():
            for c in lists:
                shown = " ".join(f"{w:g}W {v:5.2f}" for w, v in zip(SCHEDULE_CAPS, r[c]))
                name = c[: -len("_pick_over_pct")]
                print(f"  {r['workload']} {name:9s} pick over oracle %: {shown}")
        for r in out["schedule"]:
            lines.append(
                check(
                    f"{r['workload']} follow (cached answers) over the oracle schedule %",
                    r["follow_over_oracle_pct"],
                    2.0,
                )
            )
            if "redecide_over_oracle_pct" in r:
                lines.append(
                    check(
                        f"{r['workload']} follow, re-deciding unsure caps, over the oracle %",
                        r["redecide_over_oracle_pct"],
                        2.0,
                    )
                )
    lines += report_table(out)
    print("\nTargets")
    print("\n".join(lines))


def _budget_table(df: pd.DataFrame, by: list[str], budgets=(10, 15, 25, 50)) -> pd.DataFrame:
    """Median penalty (and Q3) per group and budget, one column per budget."""
    df = df[df.budget.isin(budgets)]
    med = df.groupby([*by, "budget"]).penalty_pct.median().unstack("budget")
    q3 = df.groupby([*by, "budget"]).penalty_pct.quantile(0.75).unstack("budget")
    return med.round(2).astype(str) + " / " + q3.round(2).astype(str)


def _decide_rows(out: dict, peers: pd.DataFrame) -> pd.DataFrame:
    """pt.decide's scored rows (sections 1 and 2) at the peers' workloads and caps, in
    the peers' shape."""
    parts = []
    for key, mode in (("per_cap", "per-cap"), ("shared", "shared")):
        if key not in out:
            continue
        df = pd.DataFrame(out[key])
        p = peers[peers["mode"] == mode]
        df = df[df.workload.isin(p.workload) & df.cap_w.isin(p.cap_w) & df.draw.isin(p.draw)]
        floor = df.method == FLOOR if "method" in df else np.zeros(len(df), bool)
        name = np.where(floor, f"{FLOOR} (floor)", "pt.decide")
        parts.append(df.assign(strategy=name, mode=mode))
    return pd.concat(parts, ignore_index=True) if parts else peers.iloc[:0]


def _behind(both: pd.DataFrame, budgets=(10, 15, 25, 50)) -> tuple[int, int]:
    """How many (mode, workload, budget) cells have pt.decide's median penalty above some
    peer's, of how many compared."""
    med = (
        both[both.budget.isin(budgets)]
        .groupby(["mode", "workload", "budget", "strategy"])
        .penalty_pct.median()
        .unstack("strategy")
    )
    if "pt.decide" not in med:
        return 0, 0
    peers = med.drop(columns=["pt.decide", *[c for c in med if c == f"{FLOOR} (floor)"]])
    med = med[med["pt.decide"].notna() & peers.notna().any(axis=1)]
    worse = (med["pt.decide"].to_numpy()[:, None] > peers.loc[med.index].to_numpy()).any(axis=1)
    return int(worse.sum()), len(med)


def report_table(out: dict) -> list[str]:
    """Sections 6 and 7 (and the shared section's stop and board minutes): one table per
    setting, pt.decide beside both Optuna samplers at every budget; the targets."""
    lines: list[str] = []
    if "shared" in out:
        sh = _split_floor(pd.DataFrame(out["shared"]))[0]
        if "board_min" in sh:
            one = sh.drop_duplicates(["workload", "draw"])
            print(
                f"\nshared decisions ({one.method.iloc[0] if 'method' in one else 'table'}): "
                f"stopped at median {one.stopped_at.median():.0f} measured, "
                f"{one.board_min.median():.1f} board minutes, stop reasons "
                + ", ".join(f"{k} {v}" for k, v in one.groupby("stop").size().items())
            )
            s = _summ(sh[sh.budget == 50])
            lines.append(
                check(
                    "shared budget 50 (Orin AGX 17-50 W) median penalty %", s["penalty_median"], 1.0
                )
            )
            lines.append(check("shared budget 50 (Orin AGX) Q3 penalty %", s["penalty_q3"], 3.0))
            lines.append(
                check("shared budget 50 (Orin AGX) caps without a pick %", s["no_pick_pct"], 0.0)
            )
    if "peers" in out and len(out["peers"]):
        pe = pd.DataFrame(out["peers"])
        print(
            "\n6. pt.decide beside Optuna's samplers on the same replayed boards, caps and "
            "draws\n   (median / Q3 penalty %, by budget; pt.decide's rows from sections 1 and 2)"
        )
        both = pd.concat([pe, _decide_rows(out, pe)], ignore_index=True)
        for mode, g in both.groupby("mode"):
            print(f"{mode}:")
            print(_budget_table(g, ["workload", "strategy"]).to_string())
        behind, cells = _behind(both)
        if cells:
            what = f"pt.decide behind a peer's median (of {cells} workload x budget cells)"
            lines.append(check(what, behind, 0))
        else:
            lines.append("  pt.decide against the peers: not compared (run sections 1 and 2 too)")
    if "held_out" in out and len(out["held_out"]):
        ho = pd.DataFrame(out["held_out"])
        print(
            f"\n7. Held out: {ho.device.iloc[0]} / {ho.workload.iloc[0]} on a live twin, "
            f"{ho.cap_w.nunique()} caps {ho.cap_w.min():g}-{ho.cap_w.max():g} W, one shared "
            "budget (median / Q3 penalty % by budget; vs the optimum by expected power)"
        )
        print(_budget_table(ho, ["strategy"], budgets=(10, 25, 50)).to_string())
        one = ho.drop_duplicates(["strategy", "draw"])
        print(one.groupby("strategy").board_min.median().round(1).to_string())
        t = ho[(ho.budget == 50) & (ho.strategy == "table")]
        if len(t):
            s = _summ(t)
            lines.append(
                check("held-out shared budget 50 median penalty %", s["penalty_median"], 1.0)
            )
            lines.append(check("held-out shared budget 50 Q3 penalty %", s["penalty_q3"], 3.0))
            lines.append(check("held-out caps without a pick %", s["no_pick_pct"], 0.0))
            lines.append(check("held-out picks > 1 W over the cap %", s["al1_pct"], 0.0))
    if "cross_device" in out and len(out["cross_device"]):
        cd = pd.DataFrame(out["cross_device"])
        print(
            "\n8. Cross-device cases of the tuning set: the Orin AGX ResNet-18 reference "
            "transferred to another catalog device on a live twin, caps in 0.5 W steps over "
            "its range, one shared budget (median / Q3 penalty % by budget; no-pick % at 50)"
        )
        by = ["device", "workload", "strategy"]
        print(_budget_table(cd, by, budgets=(10, 25, 50)).to_string())
        at50 = cd[cd.budget == 50].groupby(by).no_pick.mean() * 100
        print(at50.round(1).to_string())
    return lines


def plot(out: dict, path: str) -> None:
    """Median penalty against profiled configurations: active (per cap, shared) and the
    profile-then-trust strategies at 50 samples."""
    import matplotlib.pyplot as plt

    wls = sorted({r["workload"] for r in out.get("per_cap", []) + out.get("shared", [])})
    fig, ax = plt.subplots(1, max(1, len(wls)), figsize=(4 * max(1, len(wls)), 3.4), squeeze=False)
    for j, wl in enumerate(wls):
        a = ax[0, j]
        for key, label in (("per_cap", "active, per cap"), ("shared", "active, shared")):
            if key in out:
                df = _split_floor(pd.DataFrame(out[key]))[0]
                df = df[df.workload == wl]
                if len(df):
                    med = df.groupby("budget").penalty_pct.median()
                    a.plot(med.index, med.values, marker="o", label=label)
        res = out.get("baselines", {}).get(wl, {})
        res = res if isinstance(res, dict) else {}
        for name, marker in (
            ("PT@50", "s"),
            ("RND@50", "D"),
            ("NN@50", "^"),
            ("PT@35+15+obs", "v"),
            ("ORACLE", "*"),
        ):
            if name in res:  # its median at the caps decided here
                a.scatter([50], [res[name]["at_caps_median"]], marker=marker, label=name)
        a.set_title(wl)
        a.set_xlabel("profiled configurations")
        a.set_ylabel("median time penalty %")
        a.axhline(0, color="k", lw=0.5)
    ax[0, 0].legend(fontsize=7)
    decided = sorted({r["cap_w"] for r in out.get("per_cap", [])})
    fig.suptitle(
        f"active per cap and baselines at {', '.join(f'{c:g}' for c in decided)} W; "
        "active shared over the whole sweep",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv=None) -> dict:
    """The benchmark; a bad input (a ``--data`` folder, a saved file) ends it with one
    line naming it, not a traceback."""
    try:
        return _main(argv)
    except (DataError, OSError, json.JSONDecodeError) as e:
        raise SystemExit(f"decisions.py: error: {e}") from None


def _main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=10)
    ap.add_argument(
        "--first-draw",
        type=int,
        default=0,
        help="seed of the first draw (run more draws of a saved run, then --merge them)",
    )
    ap.add_argument("--caps", nargs="*", type=float, default=list(CAPS))
    ap.add_argument("--workloads", nargs="*", default=list(WORKLOADS))
    ap.add_argument("--sections", nargs="*", default=list(SECTIONS), choices=SECTIONS)
    ap.add_argument("--schedule-workloads", nargs="*", default=["mobilenetv3", "yolov8n"])
    ap.add_argument(
        "--schedule-step-s",
        type=float,
        default=1800.0,
        help="seconds between cap steps (default 1800: 50 -> 15 W within MobileNetV3's run)",
    )
    ap.add_argument(
        "--method", default="table", choices=tuple(METHODS), help="pt.decide's method (sampler)"
    )
    ap.add_argument(
        "--no-floor",
        action="store_true",
        help=f"leave out the {FLOOR} sampler run beside --method in sections 1 and 2",
    )
    ap.add_argument(
        "--per-cap-caps",
        nargs="*",
        type=float,
        default=[20.0, 30.0, 40.0],
        help="the caps decided one at a time, by pt.decide and by the peers (the shared "
        "sweep: --caps)",
    )
    ap.add_argument(
        "--per-cap-budget",
        type=int,
        default=50,
        help="the budget of each per-cap decision (scored at every budget up to it)",
    )
    ap.add_argument("--samplers", nargs="*", default=list(SAMPLERS), choices=SAMPLERS)
    ap.add_argument(
        "--held-out-runs",
        nargs="*",
        default=list(HELD_OUT_RUNS),
        choices=list(HELD_OUT_RUNS),
        help="pt.decide's runs in sections 7 (held out) and 8 (cross-device)",
    )
    ap.add_argument("--json")
    ap.add_argument("--png")
    ap.add_argument("--show", metavar="JSON", help="print the tables of a saved --json run")
    ap.add_argument(
        "--baselines-from",
        metavar="JSON",
        help="take the baselines from a saved benchmarks/optimisation.py --json run "
        "instead of running them",
    )
    ap.add_argument(
        "--merge", nargs="*", metavar="JSON", help="merge saved partial runs into --json"
    )
    ap.add_argument(
        "--data", metavar="DIR", help="section 4's folder of real corpora (default: datasets/real)"
    )
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    if args.merge:
        out = {}
        for part in args.merge:
            saved = results_file.load(part)
            for key, value in saved.items():
                if isinstance(value, list) and key in out and key not in ("caps", "workloads"):
                    out[key] = out[key] + value
                else:
                    out.setdefault(key, value)
        if args.baselines_from:
            decided = sorted({r["cap_w"] for r in out.get("per_cap", [])})
            out["baselines"] = saved_baselines(args.baselines_from, np.array(decided))
        if args.json:
            results_file.write(args.json, out, keep=KEEP)
        args.show = args.json
    if args.show:
        out = results_file.load(args.show)
        report(out)
        if args.png:
            plot(out, args.png)
        return out
    caps = optimisation.check_caps(args.caps)
    ids = range(args.first_draw, args.first_draw + args.draws)
    out: dict = {"draws": args.draws, "caps": caps.tolist(), "workloads": args.workloads}
    t0 = time.time()

    def save() -> None:
        if args.json:
            results_file.write(args.json, out, keep=KEEP)

    if "per-cap" in args.sections:

        def partial(rows: list[dict]) -> None:
            out["per_cap"] = rows
            save()

        out["per_cap"] = twin_per_cap(
            args.workloads,
            optimisation.check_caps(args.per_cap_caps),
            ids,
            budget=args.per_cap_budget,
            partial=partial,
            method=args.method,
            floor=not args.no_floor,
        ).to_dict("records")
        save()
    shared_first: dict = {}
    if "shared" in args.sections:

        def partial_shared(rows: list[dict]) -> None:
            out["shared"] = rows
            save()

        df, shared_first = twin_shared(
            args.workloads, caps, ids, partial=partial_shared, method=args.method,
            floor=not args.no_floor,
        )  # fmt: skip
        out["shared"] = df.to_dict("records")
        save()
    if "baselines" in args.sections:
        out["baselines"] = baselines(args.workloads, caps, args.draws)
        save()
    if "real" in args.sections:

        def partial_real(rows: list[dict]) -> None:
            out["real"] = rows
            save()

        out["real_data"] = str(Path(args.data).resolve()) if args.data else "datasets/real"
        out["real"] = real_traces(ids, partial=partial_real, folder=args.data).to_dict("records")
        if not out["real"]:  # never an empty table that looks like a result
            raise DataError(
                f"--data {args.data or 'datasets/real'}: no corpus section 4 can decide on: it "
                "needs per-epoch corpora (epoch_s) with an r vector (r_{workload}.csv), as "
                "tools/import_zeus.py writes; clock sweeps (Perseus) are for "
                "benchmarks/frequency.py"
            )
        save()
    if "schedule" in args.sections:
        if not shared_first:  # the schedule follows a shared decision: make one
            _, shared_first = twin_shared(args.schedule_workloads, CAPS, 1)
        out["schedule"] = schedule(shared_first, step_s=args.schedule_step_s)
        save()
    if "peers" in args.sections:

        def partial_peers(rows: list[dict]) -> None:
            out["peers"] = rows
            save()

        out["peers"] = peers(
            args.workloads, args.per_cap_caps, caps, ids, args.samplers, partial=partial_peers
        ).to_dict("records")
        save()
    runs = {k: HELD_OUT_RUNS[k] for k in args.held_out_runs}  # sections 7 and 8
    if "held-out" in args.sections:

        def partial_held(rows: list[dict]) -> None:
            out["held_out"] = rows
            save()

        out["held_out"] = held_out(
            ids,
            methods=runs,
            samplers=args.samplers,
            partial=partial_held,
        ).to_dict("records")
        save()
    if "cross-device" in args.sections:
        rows: list[dict] = []
        for device, workload in CROSS_DEVICE:

            def partial_cross(part: list[dict], before: tuple = tuple(rows)) -> None:
                out["cross_device"] = [*before, *part]
                save()

            rows.extend(held_out(
                ids, methods=runs, samplers=args.samplers, partial=partial_cross,
                device=device, workload=workload,
            ).to_dict("records"))  # fmt: skip
        out["cross_device"] = rows
        save()
    out["wall_s"] = time.time() - t0
    save()
    report(out)
    print(f"\nwall time {out['wall_s']:.0f} s")
    if args.png:
        plot(out, args.png)
    return out


if __name__ == "__main__":
    main()
