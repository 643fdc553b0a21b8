"""Memory and time of ``powertrain predict`` at scale: a modes CSV and a device's whole space.

Why: ``predict`` reads, predicts and writes in chunks, so its peak memory must not grow
with the table (targets: 10^7 configurations under 2 GB; 10^6 from a CSV in <= 5 s on 2
cores). Each run is one ``powertrain predict`` process under ``/usr/bin/time``: wall
seconds, CPU seconds (user + system) and peak resident memory. The machine's load average
is printed too: on a shared machine wall time says little, CPU seconds more. Each CSV
run is paired with the same run's reference: the two heads' bare forward pass over the
same rows (single-threaded torch, after the imports), and the ratio of CPU seconds.

    python benchmarks/predict_scale.py --rows 1000000            # CSV of N orin-agx modes
    python benchmarks/predict_scale.py --space 10000000          # a Jetson spec of N modes

One run per size (no repeats): print what was measured, never more.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

BIN = Path(sys.executable).with_name("powertrain")


def _csv(rows: int, folder: Path) -> Path:
    import powertrain as pt

    modes = pt.get_device("orin-agx").power_modes()
    idx = np.random.default_rng(0).integers(0, len(modes), rows)
    path = folder / f"modes_{rows}.csv"
    modes.iloc[idx].assign(batch_size=16).to_csv(path, index=False)
    return path


def _space(n: int, folder: Path) -> Path:
    """A Jetson-like spec with about ``n`` modes (10 core counts x k^3 clock triples)."""
    k = max(2, round((n / 10) ** (1 / 3)))
    spec = {
        "name": f"jetson-{10 * k**3}",
        "cores": 10,
        "cpu_mhz": [round(float(x), 1) for x in np.linspace(268.8, 2201.6, k)],
        "gpu_mhz": [round(float(x), 2) for x in np.linspace(114.75, 1300.5, k)],
        "mem_mhz": [round(float(x), 1) for x in np.linspace(204.0, 3199.0, k)],
    }
    path = folder / "space.json"
    path.write_text(json.dumps(spec))
    return path


def _timed(argv: list[str]) -> dict:
    run = subprocess.run(
        ["/usr/bin/time", "-f", "TIME %e %U %S %M", *argv], capture_output=True, text=True
    )
    m = re.search(r"TIME ([\d.]+) ([\d.]+) ([\d.]+) (\d+)", run.stderr)
    if run.returncode != 0 or m is None:
        raise SystemExit(f"{' '.join(argv)} failed:\n{run.stderr[-2000:]}")
    wall, user, sys_s, kb = m.groups()
    return {
        "wall_s": float(wall),
        "cpu_s": float(user) + float(sys_s),
        "peak_rss_mb": int(kb) / 1024,
    }


#: the reference figure of the same run: the two heads' forward pass over the same rows,
#: in a fresh process after its imports (what predict cannot go below)
FORWARD = """
import sys, time
import numpy as np, pandas as pd, torch
import powertrain as pt
torch.set_num_threads(1)  # as predict runs it: two-thread products stall on a busy machine
model = pt.Predictor.from_pretrained(sys.argv[2])
X = pd.read_csv(sys.argv[1])[list(model.inputs_)].to_numpy(dtype=np.float64)
t, c = time.perf_counter(), time.process_time()
for head in model.heads_.values():
    for i in range(0, len(X), 100_000):
        head.predict(X[i : i + 100_000])
print(f"FORWARD {time.perf_counter() - t:.3f} {time.process_time() - c:.3f}")
"""


def _forward(path: Path, model: str) -> tuple[float, float]:
    run = subprocess.run(
        [sys.executable, "-c", FORWARD, str(path), model], capture_output=True, text=True
    )
    m = re.search(r"FORWARD ([\d.]+) ([\d.]+)", run.stdout)
    if run.returncode != 0 or m is None:
        raise SystemExit(f"the forward-pass reference failed:\n{run.stderr[-2000:]}")
    return float(m.group(1)), float(m.group(2))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="*", default=[], help="CSV sizes to predict")
    ap.add_argument("--space", type=int, nargs="*", default=[], help="mode-space sizes")
    ap.add_argument("--model", default="orin-agx/resnet18")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    print(f"machine: {os.cpu_count()} cores, load average {load:.1f} at start; 1 run per size")
    results = []
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        jobs = [("csv", n, [str(_csv(n, folder))]) for n in args.rows]
        jobs += [  # a made-up device: the model predicts it as a cross-device guess
            ("space", n, ["--device", str(_space(n, folder)), "--cross-device"]) for n in args.space
        ]
        for kind, n, source in jobs:
            out = folder / "pred.csv"
            argv = [str(BIN), "predict", *source, "-m", args.model, "-b", "16", "-o", str(out)]
            r = _timed(argv)
            if kind == "csv":  # the same rows through the bare network, same machine, now
                r["forward_s"], r["forward_cpu_s"] = _forward(Path(source[0]), args.model)
                r["cpu_ratio_to_forward"] = r["cpu_s"] / r["forward_cpu_s"]
            with open(out) as f:
                rows = sum(1 for _ in f) - 1
            r.update(kind=kind, requested=n, rows=rows)
            results.append(r)
            out.unlink()
            ref = (  # CPU seconds: what a loaded machine changes least
                f"  bare forward pass: wall {r['forward_s']:.1f} s, cpu {r['forward_cpu_s']:.1f}"
                f" s (predict's cpu = {r['cpu_ratio_to_forward']:.1f}x)"
                if "forward_s" in r
                else ""
            )
            print(
                f"{kind:<6} {rows:>11,} rows  wall {r['wall_s']:8.1f} s  cpu {r['cpu_s']:8.1f} s  "
                f"peak RSS {r['peak_rss_mb']:7.0f} MB{ref}"
            )
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"load_start": load, "runs": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
