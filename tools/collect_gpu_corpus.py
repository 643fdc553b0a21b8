"""Collect a real corpus on an NVIDIA GPU: power limit x locked SM clock x batch size.

Why one script: GPU time is scarce (about 15 minutes a session, start-up included), so
the whole collection is one command sized to a time budget, tested beforehand against
the fake NVML of the test suite. Two training workloads run in real torch on synthetic
data: a CNN (ResNet-18, 224 x 224 images) and a transformer (a GPT-style decoder on
random tokens). The grid -- power limits, SM clocks and batch sizes -- comes from what
NVML reports, so the same script suits any GPU. Configurations run in a seeded random
order, each chunk sorted by (limit, clock) so few settings change, until the budget is
spent: a run cut short is still a uniform sample of the grid. Every row is
``n_minibatches`` minibatches with NVML power; the power limit and clocks are restored
at the end (and after a kill, by the next run: see NvmlBackend).

``--hands-off`` changes no setting of the card (for a shared machine whose clocks and
power limit belong to someone else): it sweeps batch size x CPU threads at the card's own
power limit and clocks, and records the clocks the GPU chose. ``--settle-tol`` measures
each configuration only until its mean time and power are known to that relative
standard error (the package's ``protocol="settled"``); the default is the paper's fixed
window of ``--minibatches``. ``--workloads`` sweeps only the workloads named; the budget
is shared evenly among them (each its share, plus what the ones before it left).

Output in ``--out``: per workload ``{device}_{workload}.csv`` (the package's corpus
format, with a ``.provenance.json`` sidecar: GPU, driver, CUDA and torch versions,
date, the device spec NVML reported) and the profiler's own logs beside them. Needs
root (power limits and clocks) and ``pip install powertrain[nvml]``::

    sudo python tools/collect_gpu_corpus.py --out datasets/real/h100 --budget-s 480
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from powertrain.backends.nvml import NvmlBackend
from powertrain.profiling.sweep import profile
from powertrain.steps.model_step import ModelStep
from powertrain.steps.step import TrainingStep
from powertrain.steps.torch_workloads import SyntheticImages, resnet18
from powertrain.utils.hashing import sha256_file

#: per workload: batch sizes (the CNN's images, the transformer's sequences)
BATCH_SIZES = {"resnet18": (32, 64, 128, 256), "gpt-small": (8, 16, 32, 64)}
SMALL_BATCH_SIZES = (2, 3)  # --small: a CPU test
SMALL_THREADS = (1, 2)  # --small --hands-off
#: --hands-off: per workload, the batch sizes swept with the CPU thread counts
HANDS_OFF_BATCH_SIZES = {
    "resnet18": (16, 32, 64, 96, 128, 192, 256, 384),
    "gpt-small": (4, 8, 12, 16, 24, 32, 48, 64),
}
HANDS_OFF_THREADS = (1, 4, 16)
N_LIMITS, N_CLOCKS = 5, 8  # 2 workloads x 5 x 8 x 4 batch sizes = 320 configurations
#: the lowest SM clock swept, as a share of the top one (below, training crawls)
MIN_CLOCK_SHARE = 0.4
CHUNK = 16  # configurations between two looks at the clock
HANDS_OFF_CHUNK = 4  # nothing to set between configurations, so look more often


class Tokens:
    """Random token sequences (a small seeded pool): inputs and next-token targets."""

    def __init__(self, n: int, seq: int, vocab: int, seed: int = 0, pool: int = 64):
        import torch

        g = torch.Generator().manual_seed(seed)
        self.n, self.data = n, torch.randint(0, vocab, (pool, seq + 1), generator=g)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[Any, Any]:
        row = self.data[i % len(self.data)]
        return row[:-1], row[1:]


def gpt_small(vocab: int, d_model: int, layers: int, seq: int) -> Any:
    """A GPT-style decoder: embeddings, causal self-attention blocks, a vocabulary head."""
    import torch
    from torch import nn

    class Decoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok = nn.Embedding(vocab, d_model)
            self.pos = nn.Parameter(torch.zeros(1, seq, d_model))
            block = nn.TransformerEncoderLayer(
                d_model, max(1, d_model // 64), 4 * d_model, batch_first=True, norm_first=True
            )
            self.blocks = nn.TransformerEncoder(block, layers)
            self.head = nn.Linear(d_model, vocab)
            self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq))

        def forward(self, x: Any) -> Any:
            h = self.tok(x) + self.pos[:, : x.shape[1]]
            return self.head(self.blocks(h, mask=self.mask, is_causal=True))

    return Decoder()


def make_steps(
    small: bool, device: Any, workloads: tuple[str, ...] = tuple(BATCH_SIZES)
) -> dict[str, TrainingStep]:
    """The ``workloads`` named, in that order; no other model is built (``small``: tiny
    versions for a CPU test)."""
    import torch

    torch.manual_seed(0)
    size, width = (16, 4) if small else (224, 64)
    vocab, d_model, layers, seq = (32, 16, 1, 8) if small else (8192, 512, 6, 256)
    ce = torch.nn.CrossEntropyLoss()

    def lm_loss(logits: Any, y: Any) -> Any:
        return ce(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    def cnn() -> ModelStep:
        return ModelStep(resnet18(1000, width), SyntheticImages(4096, size, 1000), device=device)

    def lm() -> ModelStep:
        return ModelStep(gpt_small(vocab, d_model, layers, seq), Tokens(4096, seq, vocab),
                         loss_fn=lm_loss, device=device)  # fmt: skip

    build = {"resnet18": cnn, "gpt-small": lm}
    steps = {}
    for name in workloads:
        model = build[name]()
        steps[name] = TrainingStep(model, name=name, device=model.device)
    return steps


def spread(values: list[float], n: int) -> list[float]:
    """``n`` values of a sorted table, evenly spread, both ends included."""
    idx = np.unique(np.round(np.linspace(0, len(values) - 1, n)).astype(int))
    return [float(values[i]) for i in idx]


def grid(
    backend: NvmlBackend,
    batch_sizes: tuple[int, ...],
    n_limits: int = N_LIMITS,
    n_clocks: int = N_CLOCKS,
) -> pd.DataFrame:
    """Power limits from the spec's 25 W grid and SM clocks from NVML's supported table
    (at least MIN_CLOCK_SHARE of the top clock), crossed with the batch sizes."""
    spec = backend.device_spec()
    limits = spread(spec["knobs"]["power_limit_w"], n_limits)
    clocks = spec["knobs"]["gpu_mhz"]
    clocks = spread([c for c in clocks if c >= MIN_CLOCK_SHARE * max(clocks)], n_clocks)
    return backend.modes(
        batch_sizes, threads=[backend._threads0], power_limits_w=limits,
        gpu_clocks_mhz=clocks,
    )  # fmt: skip


def provenance(backend: NvmlBackend, csv: Path, workload: str, args: argparse.Namespace) -> dict:
    import torch

    info = backend.describe()
    return {
        "source": "measured by this project: python tools/collect_gpu_corpus.py "
        + " ".join(sys.argv[1:]),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpu": info["gpu"],
        "driver": info.get("driver"),
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "workload": workload,
        "n_minibatches": args.minibatches,
        "settle_tol": args.settle_tol,
        "settings": (
            "hands-off: the card's own power limit and clocks, no NVML setter called"
            if args.hands_off
            else "power limit and locked SM clock as each row names"
        ),
        "power_limit_w": info.get("power_limit_w"),
        "time_column": "time_ms is one training minibatch (forward, loss, backward, SGD step)",
        "power": (
            "NVML's instantaneous power field (NVML_FI_DEV_POWER_INSTANT)"
            if info["power_source"] == "instant"
            else "NVML nvmlDeviceGetPowerUsage (a one-second average on Ampere and newer)"
        )
        + f", sampled every {args.sample_period} s and averaged over the measured minibatches",
        "device_spec": backend.device_spec(),
        "csv_sha256": sha256_file(csv),
    }


def collect(workload: str, step: TrainingStep, args: argparse.Namespace, nvml: Any) -> Path | None:
    """One workload's sweep, chunk by chunk until the deadline; returns its CSV (None:
    the budget was spent before its first configuration)."""
    sweep = not args.hands_off
    b = NvmlBackend(
        step, gpu_index=args.gpu, nvml=nvml, allow_power_limit=sweep, allow_clocks=sweep,
        sample_period_s=args.sample_period,
    )  # fmt: skip
    with b:
        table = BATCH_SIZES if sweep else HANDS_OFF_BATCH_SIZES
        sizes = SMALL_BATCH_SIZES if args.small else table[workload]
        if sweep:
            modes = grid(b, sizes, args.n_limits, args.n_clocks)
        else:
            modes = b.modes(sizes, threads=SMALL_THREADS if args.small else HANDS_OFF_THREADS)
        modes = modes.sample(frac=1.0, random_state=args.seed)
        csv = Path(args.out) / f"{b.device_name}_{workload}.csv"
        # the slowest settings first (power limit, clock; threads when hands-off), so each
        # is set as few times as possible
        order = list(b.config_columns[:2])
        size = CHUNK if sweep else HANDS_OFF_CHUNK
        for start in range(0, len(modes), size):
            if time.monotonic() > args.deadline:
                print(f"{workload}: budget spent after {start} of {len(modes)} configurations")
                break
            chunk = modes.iloc[start : start + size].sort_values(order, kind="mergesort")
            profile(b, chunk, n_minibatches=args.minibatches, out=csv, progress=False,
                    max_settle_s=args.max_settle_s, settle_tol=args.settle_tol)  # fmt: skip
        if not csv.exists():
            return None
        side = csv.with_name(csv.stem + ".provenance.json")
        side.write_text(json.dumps(provenance(b, csv, workload, args), indent=1) + "\n")
    return csv


def main(argv: list[str] | None = None, nvml: Any = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for the corpus (created)")
    ap.add_argument("--budget-s", type=float, default=480.0, help="stop starting chunks after")
    ap.add_argument("--minibatches", type=int, default=40)
    ap.add_argument("--max-settle-s", type=float, default=3.0)
    ap.add_argument("--sample-period", type=float, default=0.05)
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-limits", type=int, default=N_LIMITS, help="power limits swept")
    ap.add_argument("--n-clocks", type=int, default=N_CLOCKS, help="SM clocks swept")
    ap.add_argument(
        "--settle-tol",
        type=float,
        default=0.0,
        help="end a window at this relative standard error (0: fixed window)",
    )
    ap.add_argument(
        "--hands-off",
        action="store_true",
        help="change no setting: batch size x CPU threads at the card's own limit",
    )
    ap.add_argument(
        "--workloads",
        nargs="+",
        choices=list(BATCH_SIZES),
        default=list(BATCH_SIZES),
        help="which workloads to sweep (default: both); the budget is shared among them",
    )
    ap.add_argument("--small", action="store_true", help="tiny models (tests on a CPU)")
    ap.add_argument("--device", default=None, help="torch device (default: cuda if present)")
    args = ap.parse_args(argv)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    wanted = tuple(w for w in BATCH_SIZES if w in args.workloads)  # in the table's order
    steps = make_steps(args.small, args.device, wanted)
    t0, written = time.monotonic(), []
    for i, (name, step) in enumerate(steps.items()):  # each its share, plus what is left
        args.deadline = t0 + args.budget_s * (i + 1) / len(steps)
        csv = collect(name, step, args, nvml)
        if csv is not None:
            written.append(csv)
    for csv in written:
        print(f"{csv}: {len(pd.read_csv(csv))} configurations")
    print(
        "next: python benchmarks/real_data.py --data OUT; python benchmarks/decisions.py "
        "--sections real --data OUT; python benchmarks/frequency.py --data OUT"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
