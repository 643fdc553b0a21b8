"""``hard_cap=True`` on a replayed H200: the Tuner fed the card's own recorded readings.

Why: the H200 runs of ``tools/tune_on_gpu.py`` (datasets/measured/h200/tuner-l*) showed
the hard cap's two faults on a real sensor -- a step back tripped by noisy instantaneous
readings at configurations whose mean is under the cap, and a study that stopped after
its 5 start configurations -- but a GPU is lent rarely. This replays, per configuration,
what the corpus runs of the same GPT decoder recorded (minibatch times and instantaneous
power every 50 ms, datasets/measured/h200/instant-*), so a change to the hard cap can be
judged on the card's own noise without the card. Setting as on the card: CPU threads x
batch size (24), 500 W cap, budget 20, cost per sample, the reference fitted on the
card's ResNet-18 corpus (another workload). Per corpus run and seed it prints what was
measured, why it stopped, the step backs (and how many at configurations whose replayed
readings average under the cap), the share of exploring time over the cap by the
readings, and the pick's time per sample against the best under the cap by the corpus
(all its instantaneous runs pooled). No results file: a check, printed.

    python benchmarks/hardcap_replay.py [--seeds 0 1] [--budget 20]
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import powertrain as pt
from powertrain.backends import ReplayBackend
from powertrain.decisions.safe_set import over_cap_share

H200 = Path(__file__).resolve().parents[1] / "datasets" / "measured" / "h200"
GPT = ["threads", "batch_size"]
RUNS = ("instant-fixed-s0", "instant-fixed-s1", "instant-settled-s0", "instant-settled-s1-l3")
SIZES = (4, 8, 12, 16, 24, 32, 48, 64)
CAP_W = 500.0


class ReadingsReplay(ReplayBackend):
    """One H200 run of the GPT decoder replayed with what it recorded per configuration:
    its minibatch times in order and its instantaneous power readings (every 50 ms, at
    their times since the configuration was set), both repeated when a configuration
    runs longer than it was recorded."""

    def __init__(self, run: str):
        stem = H200 / run / "nvidia-h200_gpt-small"
        super().__init__(
            pd.read_csv(f"{stem}.csv").drop(columns=["device", "num_workers"]), config_columns=GPT,
            seconds_per_config=1.0, sample_period_s=0.05,
        )  # fmt: skip
        self.mb = pd.read_csv(f"{stem}.minibatches.csv.gz")
        self.pw = pd.read_csv(f"{stem}.power.csv.gz")
        self.traces: list[tuple[float, np.ndarray]] = []  # (set at, [t since, W])
        self._ms: list[float] = []

    def configure(self, config) -> None:
        super().configure(config)
        t, b = config["threads"], config["batch_size"]
        m = self.mb[(self.mb.threads == t) & (self.mb.batch_size == b)].sort_values("start_s")
        w = self.pw[(self.pw.threads == t) & (self.pw.batch_size == b)]
        t0 = m.start_s.iloc[0]
        w = w[w.t_s >= t0].sort_values("t_s")
        self._ms, self._k = m.time_ms.tolist(), 0
        self.traces.append((self._t, np.column_stack([w.t_s - t0, w.power_w])))

    def run_minibatch(self) -> float:
        ms = float(self._ms[self._k % len(self._ms)])
        self._k += 1
        self._t += ms / 1e3
        return ms

    def power_samples(self, start: float, end: float) -> np.ndarray:
        end = min(end, self._t)
        out = []
        for i, (at, trace) in enumerate(self.traces):
            until = self.traces[i + 1][0] if i + 1 < len(self.traces) else end
            span = trace[-1, 0] + self.sample_period_s
            for rep in range(int((until - at) / span) + 1):
                t = at + rep * span + trace[:, 0]
                keep = (t >= max(start, at)) & (t < min(end, until))
                out.append(np.column_stack([t[keep], trace[keep, 1]]))
        return np.concatenate(out) if out else np.empty((0, 2))


def reference(epochs: int = 300) -> pt.Predictor:
    """tools/tune_on_gpu.py's reference: the card's ResNet-18 corpus (another workload),
    over threads x batch size."""
    from powertrain.predictor.estimator import PowerTrainMLP

    table = pd.read_csv(H200 / "instant-fixed-s0-l3" / "nvidia-h200_resnet18.csv")
    return pt.Predictor(
        PowerTrainMLP(epochs=epochs), inputs=("threads", "batch_size"),
        targets=("time_ms", "power_w"), progress=False,
    ).fit(table)  # fmt: skip


def tune(board: ReadingsReplay, ref: pt.Predictor, budget: int, seed: int, epochs: int = 30):
    """A hard-cap Tuner trained on ``board`` until it settles (a tiny stand-in step: the
    replay gives the times); the finished tuner."""
    grid = pd.DataFrame([(t, b) for t in (1, 4, 16) for b in SIZES], columns=GPT)
    tuner = pt.Tuner(
        board, ref, CAP_W, budget=budget, candidates=grid, batch_size=list(SIZES),
        r=pd.DataFrame({"batch_size": SIZES, "epochs": 1.0}), hard_cap=True,
        transfer_options={"epochs": epochs}, log=lambda s: None, seed=seed,
    )  # fmt: skip
    with warnings.catch_warnings(), tuner:
        warnings.simplefilter("ignore")
        for _ in range(50_000):
            with tuner.step():
                pass
            if tuner.settled:
                break
    return tuner


def judge() -> pd.DataFrame:
    """Time per sample and power per configuration, every instantaneous corpus run of
    the decoder pooled (benchmarks/tuner_real_gpu.py's judge)."""
    df = pd.concat(pd.read_csv(f) for f in sorted(H200.glob("instant-*/*_gpt-small.csv")))
    df["ms_per_sample"] = df.time_ms / df.batch_size
    return df.groupby(GPT)[["ms_per_sample", "power_w"]].mean()


def main(argv: list[str] | None = None) -> pd.DataFrame:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--budget", type=int, default=20)
    args = ap.parse_args(argv)
    ref, table = reference(), judge()
    best = table[table.power_w <= CAP_W].ms_per_sample.min()
    out = []
    for run in RUNS:
        for seed in args.seeds:
            board = ReadingsReplay(run)
            tuner = tune(board, ref, args.budget, seed)
            s, rows = tuner.summary(), tuner.measurements()
            mean = board.table.set_index(GPT).power_w
            hits = [tuple(tuner.candidates_.iloc[i][GPT]) for i in tuner.hits]
            pick = (s.config["threads"], s.config["batch_size"]) if s.config else None
            out.append({
                "run": run, "seed": seed, "measured": s.n_measured, "stop": s.stop_reason,
                "step_backs": len(hits), "under_cap": sum(mean[k] <= CAP_W for k in hits),
                "over_cap_pct": 100 * over_cap_share(rows, CAP_W)[0],
                "pick": f"t{pick[0]} b{pick[1]}" if pick else None,
                "penalty_pct": 100 * (table.ms_per_sample[pick] / best - 1) if pick else np.nan,
            })  # fmt: skip
    df = pd.DataFrame(out)
    with pd.option_context("display.width", 200, "display.precision", 1):
        print(df.to_string(index=False))
    print(
        f"median: measured {df.measured.median():g}, penalty {df.penalty_pct.median():.1f} %, "
        f"over the cap {df.over_cap_pct.median():.1f} % (largest {df.over_cap_pct.max():.1f} %)"
    )
    return df


if __name__ == "__main__":
    main()
