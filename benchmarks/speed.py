"""How fast the predictor trains, transfers and predicts, each beside a same-run reference.

Targets (on 2 CPU cores): reference training <= 60 s, one transfer (both heads)
<= 3 s (<= 0.4 s wanted), predicting 108,576 configurations (18,096 Orin AGX modes x 6
batch sizes) <= 0.5 s, with the spread <= 1.3x the raw forward. On a Jetson the cores
are shared with the training job, so every timing runs twice: alone, and beside a
second busy process (two threads of matrix products, like a training step) -- the
spread must then stay within 2x its own alone-time. Absolute seconds drift on a shared
machine, so each figure is printed beside a reference measured in the same run, under
the same condition, on the same rows:

- training: one epoch of the same two MLPs with a bare torch loop (x epochs);
- transfer: the same number of full-batch Adam steps, bare torch;
- prediction: a raw ``nn.Sequential`` forward pass of the same two MLPs on the same rows.

    python benchmarks/speed.py [--quick] [--json PATH] [--out DIR] [--threads 2]

Writes files only where told: ``--json PATH`` (the figures), ``--out DIR`` (speed.csv).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import torch

import powertrain as pt
from powertrain.data.corpora import load_corpus
from powertrain.predictor import ExtrapolationWarning, PowerTrainMLP, Predictor
from powertrain.schema import CONFIG_COLUMNS

BATCH_SIZES = (4, 8, 16, 32, 64, 128)
#: targets, by row: seconds at most (run alone) ...
TARGETS_S = {
    "reference training": 60.0,
    "transfer (both heads)": 0.4,
    "predict 108,576": 0.5,
    "predict 108,576 (no std)": 0.5,
}
#: ... and the ratio to the row's same-run reference at most
TARGETS_RATIO = {"predict 108,576": 1.3, "predict 108,576 busy/alone": 2.0}


#: the second process: a training-like job (matrix products on two threads) that never
#: sleeps, started beside a timing and stopped after it
_BUSY = (
    "import torch; torch.set_num_threads(2); a = torch.randn(512, 512)\n"
    "while True: a = (a @ a).tanh_()"
)


@contextlib.contextmanager
def busy_neighbour(on: bool):
    """Run the block beside a busy process (``on``) or alone."""
    if not on:
        yield
        return
    proc = subprocess.Popen([sys.executable, "-c", _BUSY])
    try:
        time.sleep(2.0)  # let it import torch and start spinning
        yield
    finally:
        proc.terminate()
        proc.wait()


def _best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def _plain_mlp() -> torch.nn.Sequential:
    return torch.nn.Sequential(
        torch.nn.Linear(5, 256),
        torch.nn.ReLU(),
        torch.nn.Dropout(0.1),
        torch.nn.Linear(256, 128),
        torch.nn.ReLU(),
        torch.nn.Dropout(0.1),
        torch.nn.Linear(128, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 1),
    )


def bare_epochs(n_rows: int, epochs: int, batch: int) -> float:
    """Seconds for ``epochs`` of minibatch Adam on two plain MLPs (no checkpointing).

    Single-threaded, like the predictor's own training loop (see ``mlp.train``).
    """
    x, y = torch.randn(n_rows, 5), torch.randn(n_rows)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    for _ in range(2):
        net = _plain_mlp()
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        for _ in range(epochs):
            perm = torch.randperm(n_rows)
            for s in range(0, n_rows, batch):
                idx = perm[s : s + batch]
                opt.zero_grad()
                torch.nn.functional.mse_loss(net(x[idx]).squeeze(-1), y[idx]).backward()
                opt.step()
    secs = time.perf_counter() - t0
    torch.set_num_threads(threads)
    return secs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats, 10-epoch training")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (target: 2 cores)")
    ap.add_argument("--json", help="also write the figures as JSON here")
    ap.add_argument("--out", help="write speed.csv into this folder")
    args = ap.parse_args(argv)
    load_start = os.getloadavg()[0]  # other processes' load: these figures are wall time
    torch.set_num_threads(args.threads)
    repeats = 2 if args.quick else 5
    rows = []

    corpus = load_corpus("orin-agx_resnet18_bs16")
    epochs = 10 if args.quick else 100
    n_train = len(corpus) - int(len(corpus) * 0.1)
    t0 = time.perf_counter()
    ref = Predictor(PowerTrainMLP(epochs=epochs), progress=True).fit(corpus)
    t_fit = time.perf_counter() - t0
    t_bare = bare_epochs(n_train, 1, 32) * epochs
    scale = 100 / epochs  # --quick extrapolates to the full 100 epochs
    rows.append(
        (
            "reference training",
            t_fit * scale,
            t_bare * scale,
            f"bare torch loop, same MLPs, {n_train} rows x 100 epochs",
        )
    )

    target = load_corpus("orin-agx_mobilenetv3_bs16")
    samples = target.sample(50, random_state=0)
    modes = pt.get_device("orin-agx").power_modes()
    steps = ref.heads_["time_ms"].epochs  # a transfer runs as many epochs as the reference
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExtrapolationWarning)
        model = ref.transfer(samples)
        est = model.predict(modes, batch_size=list(BATCH_SIZES))  # warm-up
    x = torch.randn(len(est), len(CONFIG_COLUMNS))
    nets = [_plain_mlp().eval(), _plain_mlp().eval()]

    def raw_forward() -> None:
        with torch.inference_mode():
            for net in nets:
                net(x)

    alone_pred = None
    for busy in (False, True):
        tag = " + busy" if busy else ""
        with busy_neighbour(busy), warnings.catch_warnings():
            warnings.simplefilter("ignore", ExtrapolationWarning)
            t_tl = _best(lambda: ref.transfer(samples), repeats)
            t_tl_bare = _best(lambda: bare_epochs(45, steps, 45), repeats)
            t_pred = _best(lambda: model.predict(modes, batch_size=list(BATCH_SIZES)), repeats)
            t_pred_nostd = _best(
                lambda: model.predict(modes, batch_size=list(BATCH_SIZES), return_std=False),
                repeats,
            )
            t_raw = _best(raw_forward, repeats)
        rows.append(
            (
                f"transfer (both heads){tag}",
                t_tl,
                t_tl_bare,
                f"bare torch, {steps} full-batch steps x 2 (one fit per head, no k-fold)",
            )
        )
        rows.append((f"predict 108,576{tag}", t_pred, t_raw, "raw nn.Sequential forward, 2 MLPs"))
        rows.append((f"predict 108,576 (no std){tag}", t_pred_nostd, t_raw, "same"))
        if busy:
            rows.append(
                (
                    "predict 108,576 busy/alone",
                    t_pred,
                    alone_pred,
                    "the spread's own alone-time (ratio: slowdown from the busy process)",
                )
            )
        alone_pred = t_pred

    print(f"\nspeed on {args.threads} torch thread(s); best of {repeats} where repeated")
    print(
        f"load average at the start {load_start:.1f}, at the end {os.getloadavg()[0]:.1f} "
        f"(1-minute; the busy-process runs add to it) on {os.cpu_count()} CPUs"
    )
    head = ("what", "seconds", "reference", "ratio", "target", "meets?", "reference is")
    print("{:<34} {:>8} {:>10} {:>6} {:>12}  {:<6}  {}".format(*head))
    out = []
    for what, secs, refsecs, note in rows:
        limit, rlimit = TARGETS_S.get(what), TARGETS_RATIO.get(what)
        checks = [ok for ok in (limit and secs <= limit, rlimit and secs / refsecs <= rlimit)]
        checks = [c for c, lim in zip(checks, (limit, rlimit)) if lim]
        meets = None if not checks else all(checks)
        flag = "-" if meets is None else ("yes" if meets else "NO")
        lim = (
            " ".join(t for t in (limit and f"<={limit:g}s", rlimit and f"<={rlimit:g}x") if t)
            or "-"
        )
        print(
            f"{what:<34} {secs:8.3f} {refsecs:10.3f} {secs / refsecs:6.2f} {lim:>12}  "
            f"{flag:<6}  {note}"
        )
        out.append(
            dict(
                what=what,
                seconds=secs,
                reference_seconds=refsecs,
                ratio=secs / refsecs,
                target_seconds=limit,
                target_ratio=rlimit,
                meets=meets,
                reference=note,
            )
        )
    if args.quick:
        print("(--quick: training measured over 10 epochs and scaled to 100)")
    payload = {
        "threads": args.threads,
        "repeats": repeats,
        "rows": out,
        "machine": {"cpus": torch.get_num_threads(), "torch": torch.__version__},
        "load_average": {"start": load_start, "end": os.getloadavg()[0]},
    }
    if args.out:
        import csv

        folder = Path(args.out)
        folder.mkdir(parents=True, exist_ok=True)
        name = "speed_quick" if args.quick else "speed"
        with open(folder / f"{name}.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(out[0]))
            w.writeheader()
            w.writerows(out)
    if args.json:
        Path(args.json).write_text(json.dumps(payload, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
