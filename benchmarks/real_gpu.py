"""What a real GPU says about measuring one configuration: our own H200 runs.

Everything here was measured by ``tools/collect_gpu_corpus.py --hands-off`` on a lent
NVIDIA H200 (datasets/measured/h200/, each CSV with its provenance sidecar): ResNet-18
(224 x 224) and a GPT-style decoder on synthetic data, batch size x CPU threads (24
configurations per workload), at the card's own 700 W limit and clocks. The machine's
rules forbid changing a shared card's power limit or clocks, so this is no clock sweep;
it checks the measurement itself, on real NVML:

* **power source**: two runs of the same grid in another random order (seeds 0 and 1),
  with power from nvmlDeviceGetPowerUsage (``average``: a one-second average on Ampere
  and newer) and from NVML's instantaneous field (``instant``, the default since this
  run); how far a configuration's time and power differ between the two runs;
* **protocol**: the settled window (``--settle-tol 0.01``, the package's default
  ``protocol="settled"``) against the paper's fixed 40 minibatches, same source and
  seed: board seconds, and how far its time and power land from the fixed run's, beside
  the fixed protocol's own run-to-run spread;
* **the card**: the clock the GPU ran at, and each workload's throughput and energy per
  sample by batch size (the batch-size axis a PowerTrain user tunes).

Three sessions on the card: the ``average`` runs came from the first, the ``instant``
runs without a suffix from the second, which ran out of time (its ResNet-18 runs hold
16, 20 and 8 of the 24 configurations); the ``-l3`` runs from a third, one call that
measured ResNet-18's four instantaneous-power runs complete (fixed and settled, seeds 0
and 1) and the decoder's settled s1. A pair labelled ``session 3`` compares runs of that
one session; ``sessions 3/2`` compares a third-session run with a second-session one.

Figures are median / Q3 of |relative difference| over the configurations both runs
measured; a run cut short by its time budget measured fewer (``n``).

    python benchmarks/real_gpu.py [--data datasets/measured/h200] [--json PATH]
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from results_file import data_args, publish

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "datasets" / "measured" / "h200"
KEY = ["threads", "batch_size"]
WORKLOADS = ("resnet18", "gpt-small")
SOURCES = ("average", "instant")
#: (what, run a, run b): each compared within one power source
PAIRS = (
    ("repeat (fixed s0 vs fixed s1)", "fixed-s0", "fixed-s1"),
    ("settled s0 vs fixed s0", "settled-s0", "fixed-s0"),
    ("settled s0 vs fixed s1", "settled-s0", "fixed-s1"),
    ("session 3: repeat (fixed s0 vs fixed s1)", "fixed-s0-l3", "fixed-s1-l3"),
    ("session 3: settled s0 vs fixed s0", "settled-s0-l3", "fixed-s0-l3"),
    ("session 3: settled s1 vs fixed s1", "settled-s1-l3", "fixed-s1-l3"),
    ("session 3: settled s0 vs settled s1", "settled-s0-l3", "settled-s1-l3"),
    ("sessions 3/2: fixed s0 vs fixed s0", "fixed-s0-l3", "fixed-s0"),
    ("sessions 3/2: settled s1 vs fixed s1", "settled-s1-l3", "fixed-s1"),
)
#: the runs of the card table (instant power, fixed protocol), the first pair that holds
#: a workload: the third session's complete ResNet-18 runs, else the second session's
CARD_RUNS = (
    ("instant-fixed-s0-l3", "instant-fixed-s1-l3"),
    ("instant-fixed-s0", "instant-fixed-s1"),
)
WIDTH = 38  # of the "compare" column


def read(folder: Path, workload: str) -> pd.DataFrame | None:
    csv = next(iter(sorted(folder.glob(f"*_{workload}.csv"))), None)
    return None if csv is None else pd.read_csv(csv).set_index(KEY).sort_index()


def spread(a: pd.DataFrame, b: pd.DataFrame) -> dict:
    """|a / b - 1| in % of time and power over the configurations both measured."""
    both = a.index.intersection(b.index)
    row: dict = {"n": int(len(both))}
    for col, name in (("time_ms", "time"), ("power_w", "power")):
        d = (a.loc[both, col] / b.loc[both, col] - 1).abs() * 100
        row[f"{name}_median_pct"] = round(float(d.median()), 2)
        row[f"{name}_q3_pct"] = round(float(d.quantile(0.75)), 2)
    row["board_s_a"] = round(float(a.loc[both, "profile_s"].sum()), 1)
    row["board_s_b"] = round(float(b.loc[both, "profile_s"].sum()), 1)
    return row


def compare(data: Path) -> list[dict]:
    """Every pair of :data:`PAIRS` that ``data`` holds, per power source and workload."""
    rows = []
    for source in SOURCES:
        for wl in WORKLOADS:
            runs = {p.name: read(p, wl) for p in data.glob(f"{source}-*") if p.is_dir()}
            for what, a, b in PAIRS:
                ra, rb = runs.get(f"{source}-{a}"), runs.get(f"{source}-{b}")
                if ra is not None and rb is not None:
                    rows.append({"source": source, "workload": wl, "compare": what,
                                 **spread(ra, rb)})  # fmt: skip
    return rows


def card(data: Path) -> tuple[list[dict], list[dict]]:
    """Per workload and batch size (instant power, fixed protocol, both seeds pooled, the
    CPU thread count with the shortest time; the runs of :data:`CARD_RUNS`): time, power,
    throughput, energy per sample; and per workload the runs read, the SM clocks observed
    and the share of rows whose power settled."""
    rows, clocks = [], []
    for wl in WORKLOADS:
        for names in CARD_RUNS:
            runs = [r for n in names if (r := read(data / n, wl)) is not None]
            if runs:
                break
        df = pd.concat(runs).reset_index()
        best = df.groupby(["batch_size", "threads"])[["time_ms", "power_w"]].mean()
        for bs, g in best.groupby(level="batch_size"):
            (_, threads), r = next(iter(g.sort_values("time_ms").iterrows()))
            rows.append({
                "workload": wl, "batch_size": int(bs), "threads": int(threads),
                "time_ms": round(float(r.time_ms), 1), "power_w": round(float(r.power_w), 1),
                "samples_per_s": round(1e3 * bs / float(r.time_ms), 0),
                "mj_per_sample": round(float(r.power_w * r.time_ms) / bs, 1),
            })  # fmt: skip
        sm = df["observed_gpu_mhz"]
        clocks.append({"workload": wl, "runs": " + ".join(names), "rows": len(df),
                       "sm_mhz_min": float(sm.min()),
                       "sm_mhz_max": float(sm.max()),
                       "stable_share": round(float(df["stable"].mean()), 2)})  # fmt: skip
    return rows, clocks


def show(result: dict) -> str:
    out = [f"# real GPU measurement ({result['gpu']}, {result['data']}); |difference| %"]
    out.append(
        f"{'source':<8} {'workload':<10} {'compare':<{WIDTH}} {'n':>3} {'time med/Q3':>13} "
        f"{'power med/Q3':>14} {'board s':>13}"
    )
    for r in result["compare"]:
        out.append(
            f"{r['source']:<8} {r['workload']:<10} {r['compare']:<{WIDTH}} {r['n']:>3} "
            f"{r['time_median_pct']:>6.2f}/{r['time_q3_pct']:<6.2f} "
            f"{r['power_median_pct']:>6.2f}/{r['power_q3_pct']:<7.2f} "
            f"{r['board_s_a']:>6.1f}/{r['board_s_b']:<6.1f}"
        )
    out.append("")
    out.append("# the card (instant power, fixed protocol, fastest thread count per batch size)")
    out.append(f"{'workload':<10} {'batch':>5} {'thr':>3} {'ms':>7} {'W':>6} {'samples/s':>9} "
               f"{'mJ/sample':>9}")  # fmt: skip
    for r in result["card"]:
        out.append(
            f"{r['workload']:<10} {r['batch_size']:>5} {r['threads']:>3} {r['time_ms']:>7.1f} "
            f"{r['power_w']:>6.1f} {r['samples_per_s']:>9.0f} {r['mj_per_sample']:>9.1f}"
        )
    for c in result["clocks"]:
        lo, hi = c["sm_mhz_min"], c["sm_mhz_max"]
        out.append(f"{c['workload']}: SM clock observed {lo:g}-{hi:g} MHz over {c['rows']} "
                   f"rows ({c['runs']}); {c['stable_share']:.0%} with settled power")  # fmt: skip
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args, shown = data_args(__doc__, DATA, argv)
    side = next(iter(sorted(args.data.glob("*/*.provenance.json"))), None)
    if side is None:
        raise SystemExit(f"{args.data}: no corpus with a provenance sidecar")
    gpu = json.loads(side.read_text())["gpu"]
    rows, clocks = card(args.data)
    result = {"gpu": gpu, "data": str(shown), "compare": compare(args.data), "card": rows,
              "clocks": clocks}  # fmt: skip
    publish(result, show(result), args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
