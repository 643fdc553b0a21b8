"""Joint batch-size and power-mode selection on the twin, against the second paper's
baselines ("Accelerated training on low-power edge devices", Tables 2-4, Algorithm 1).

Per device (Jetson Nano, TX2 NX), workload and power cap:

* Baseline 1: the largest batch size at the GPU frequency that keeps *every* workload and
  batch size under the cap (the paper's fixed safe frequencies; on the Nano the paper's
  307 / 614 / 921 MHz for 4.5 W / 7 W / no cap);
* Baseline 2: the batch size with the fewest samples to target (proxy r) at that frequency;
* Ours (Algorithm 1): every (batch, GPU frequency) pair profiled with ``pt.profile`` on
  the twin (measured, with noise), time to accuracy = measured time per sample x proxy
  samples to target, the fastest whose measured power fits;
* Fastest configuration: the same from the twin's expected values and the *target*
  samples to target (the upper bound).

Time to accuracy is time per sample x samples to reach the target accuracy. The paper's
per-workload sample counts are not published, so both r vectors come from our digits
proxy (``pt.r_vector``): the proxy's from seeds 0-2, the "target's" from seeds 3-5 of the
same training (a stand-in, labelled so). Also: the paper's efficient profiling when the
cap is known (board time saved), and the same joint choice over all Orin AGX modes x
batch sizes 4-64 from a transferred predictor.

    python benchmarks/batch_selection.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import pandas as pd

import powertrain as pt
from powertrain.metrics import time_penalty_pct

#: the paper's caps (W); None = no cap. TX2 NX: the paper gives no values and our twin
#: draws at least 5 W there, so 5.5 W and 7 W stand in (labelled in the output)
CAPS = {"nano": (4.5, 7.0, None), "tx2-nx": (5.5, 7.0, None)}
WORKLOADS = {
    "nano": ("resnet18-cifar", "mobilenetv2-cifar", "transformer-char"),
    "tx2-nx": ("resnet18-cifar",),
}
#: the paper's Baseline 1 frequencies on the Nano (§5.1)
NANO_B1_MHZ = {4.5: 307.2, 7.0: 614.4, None: 921.6}
#: the paper's speed-ups of Ours over Baseline 1 / Baseline 2 (Tables 2-4, first data set)
PAPER = {
    ("nano", "resnet18-cifar"): "B1/Ours 1.69, 1.78, 1.48; B2/Ours 1.34, 1.53, 1.39 (SVHN)",
    ("nano", "mobilenetv2-cifar"): "B1/Ours 1.47, 1.31, 1.02; B2/Ours 1.36, 1.25, 1.00 (SVHN)",
    ("nano", "transformer-char"): "B1/Ours 1.12, 1.16, 1.00; B2/Ours 1.30, 1.53, 1.46 (Austen)",
    ("tx2-nx", "resnet18-cifar"): "B1/Ours 1.71, 1.49, 1.24; B2/Ours 1.71, 1.80, 1.68 (SVHN)",
}


def grid(dev: pt.Device) -> pd.DataFrame:
    """GPU frequency x nothing else: the other knobs at the top mode (as in the paper)."""
    top = dev.maxn().iloc[0]
    return pd.DataFrame({"gpu_mhz": dev.spec.gpu_mhz}).assign(
        cores=int(top.cores), cpu_mhz=top.cpu_mhz, mem_mhz=top.mem_mhz
    )[["cores", "cpu_mhz", "gpu_mhz", "mem_mhz"]]


def tt_acc(table: pd.DataFrame, samples: dict[int, float]) -> np.ndarray:
    """Seconds to target: time per sample x samples to target."""
    b = table.batch_size.to_numpy()
    return table.time_ms.to_numpy() / 1e3 / b * np.array([samples[int(x)] for x in b])


def best_under(table: pd.DataFrame, cost: np.ndarray, cap: float | None) -> int:
    ok = np.ones(len(table), bool) if cap is None else table.power_w.to_numpy() <= cap
    if not ok.any():
        return -1
    idx = np.flatnonzero(ok)
    return int(idx[np.argmin(cost[idx])])


def safe_frequency(dev: pt.Device, workloads, batches, cap: float | None, seed: int) -> float:
    """Highest GPU frequency at which every workload and batch size fits the cap."""
    if cap is None:
        return float(max(dev.spec.gpu_mhz))
    g = grid(dev)
    worst = np.zeros(len(g))
    for wl in workloads:
        tw = pt.Twin(dev, wl, seed=seed)
        for b in batches:
            worst = np.maximum(worst, tw.expected(g, b).power_w.to_numpy())
    fits = g.gpu_mhz.to_numpy()[worst <= cap]
    return float(fits.max()) if fits.size else float(min(dev.spec.gpu_mhz))


def efficient_profile_s(lut: pd.DataFrame, cap: float | None) -> float:
    """Board time of the paper's cap-aware profiling order (§4.1): largest batch from the
    lowest frequency upwards until the cap is crossed, then each smaller batch from the
    previous one's highest feasible frequency upwards."""
    if cap is None:
        return float(lut.profile_s.sum())
    freqs = sorted(lut.gpu_mhz.unique())
    total, start = 0.0, 0
    for b in sorted(lut.batch_size.unique(), reverse=True):
        rows = lut[lut.batch_size == b].set_index("gpu_mhz")
        j = start
        while j < len(freqs):
            r = rows.loc[freqs[j]]
            total += float(r.profile_s)
            if r.power_w > cap:
                break
            start = j
            j += 1
    return total


def run_device(name: str, r_proxy, r_target, seed: int) -> list[dict]:
    dev = pt.get_device(name)
    g = grid(dev)
    out = []
    all_wl = WORKLOADS[name]
    batches = sorted(r_proxy)
    for wl in all_wl:
        tw = pt.Twin(dev, wl, seed=seed)
        sizes = [b for b in tw.workload.extra.get("batch_sizes", batches) if b in r_proxy]
        configs = pd.concat([g.assign(batch_size=b) for b in sizes], ignore_index=True)
        truth = tw.expected(configs)
        lut = pt.profile(pt.Twin(dev, wl, seed=seed), configs, progress=False)
        lut = lut.merge(configs.reset_index(), on=list(configs.columns)).sort_values("index")
        lut = lut.set_index("index")
        t_true, t_ours = tt_acc(truth, r_target), tt_acc(lut, r_proxy)
        for cap in CAPS[name]:
            f1 = (
                NANO_B1_MHZ[cap]
                if name == "nano"
                else safe_frequency(dev, all_wl, sizes, cap, seed)
            )
            at_f1 = truth.gpu_mhz.to_numpy() == f1
            b1 = int(np.flatnonzero(at_f1 & (truth.batch_size.to_numpy() == max(sizes)))[0])
            b_best = min(sizes, key=lambda b: r_proxy[b])
            b2 = int(np.flatnonzero(at_f1 & (truth.batch_size.to_numpy() == b_best))[0])
            ours = best_under(lut, t_ours, cap)
            fastest = best_under(truth, t_true, cap)
            row = dict(device=name, workload=wl, cap_w=cap if cap is not None else "N/A")
            for label, j in (("B1", b1), ("B2", b2), ("ours", ours), ("fastest", fastest)):
                row[f"{label}_s"] = float(t_true[j]) if j >= 0 else float("nan")
                row[f"{label}_config"] = (
                    f"b{int(truth.batch_size[j])}@{truth.gpu_mhz[j]:g}" if j >= 0 else "-"
                )
                row[f"{label}_power_w"] = float(truth.power_w[j]) if j >= 0 else float("nan")
            row["ours_vs_fastest_pct"] = time_penalty_pct(row["ours_s"], row["fastest_s"])
            row["B1_over_ours"] = row["B1_s"] / row["ours_s"]
            row["B2_over_ours"] = row["B2_s"] / row["ours_s"]
            binds = cap is not None and truth.power_w.max() > cap
            row["cap_binds"] = bool(binds)
            row["within_3pct"] = bool(row["ours_vs_fastest_pct"] <= 3.0)
            row["beats_baselines"] = bool(
                (not binds) or (row["ours_s"] < row["B1_s"] and row["ours_s"] < row["B2_s"])
            )
            full = float(lut.profile_s.sum())
            row["profile_all_h"] = full / 3600
            row["profile_capped_h"] = efficient_profile_s(lut, cap) / 3600
            row["paper"] = PAPER.get((name, wl), "")
            out.append(row)
    return out


def orin_joint(r_proxy, r_target, draws: int, seed: int) -> list[dict]:
    """All Orin AGX modes x batch sizes 4-64 from a predictor transferred with 50 profiled
    configurations at batch sizes 8 and 32 (25 each)."""
    dev = pt.get_device("orin-agx")
    modes = dev.power_modes()
    batches = [b for b in (4, 8, 16, 32, 64) if b in r_proxy]
    tw = pt.Twin(dev, "mobilenetv3", seed=seed)
    truth = t_true = None
    ref = pt.Predictor.from_pretrained("orin-agx/resnet18")
    rows = []
    for d in range(draws):
        picks = [dev.sample(25, seed=100 + d).assign(batch_size=b) for b in (8, 32)]
        samples = pt.profile(
            pt.Twin(dev, "mobilenetv3", seed=seed), pd.concat(picks), progress=False
        )
        run = pt.run_case(
            dev,
            "mobilenetv3",
            samples=samples,
            reference=ref,
            modes=modes,
            batch_size=batches,
            random_state=d,
        )  # fmt: skip  (the library's one workflow: transfer, predict every mode x batch)
        est = run.estimates.reset_index(drop=True)
        if truth is None:  # the same rows in the same order as the predictions
            truth = tw.expected(est[[*modes.columns, "batch_size"]])
            t_true = tt_acc(truth, r_target)
        mape_b = {
            b: float(np.mean(np.abs(est.time_ms[m] / truth.time_ms[m] - 1)) * 100)
            for b in batches
            for m in [truth.batch_size.to_numpy() == b]
        }
        for cap in (20.0, 30.0, 40.0):
            j = best_under(est, tt_acc(est, r_proxy), cap)
            k = best_under(truth, t_true, cap)
            fixed = truth.batch_size.to_numpy() == 16
            k16 = np.flatnonzero(fixed)[best_under(truth[fixed], t_true[fixed], cap)]
            rows.append(
                dict(
                    draw=d,
                    cap_w=cap,
                    ours=f"b{truth.batch_size[j]}",
                    ours_vs_fastest_pct=time_penalty_pct(t_true[j], t_true[k]),
                    ours_excess_w=float(truth.power_w[j] - cap),
                    best_b16_over_fastest=float(t_true[k16] / t_true[k]),
                    time_mape_by_batch=mape_b,
                )
            )
    return rows


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="Nano ResNet-18 only, 1 Orin draw")
    ap.add_argument("--json", help="write the figures as JSON here")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", default=".powertrain-cache", help="r vector cache folder")
    args = ap.parse_args(argv)
    t0 = time.time()
    batches = [4, 8, 16, 32, 64, 128]
    proxy = pt.r_vector(batches, seeds=(0, 1, 2), cache_dir=args.cache)
    target = pt.r_vector(batches, seeds=(3, 4, 5), cache_dir=args.cache)
    r_proxy = dict(zip(proxy.batch_size, proxy.samples))
    r_target = dict(zip(target.batch_size, target.samples))
    print("r vectors (digits CNN to 95 % validation accuracy, samples to target, median):")
    print(pd.DataFrame({"proxy (seeds 0-2)": r_proxy, "target stand-in (seeds 3-5)": r_target}))
    if args.quick:
        WORKLOADS["nano"] = ("resnet18-cifar",)
    rows = []
    for name in ("nano",) if args.quick else ("nano", "tx2-nx"):
        rows += run_device(name, r_proxy, r_target, args.seed)
    table = pd.DataFrame(rows)
    cols = [
        "device",
        "workload",
        "cap_w",
        "B1_config",
        "B2_config",
        "ours_config",
        "fastest_config",
        "B1_over_ours",
        "B2_over_ours",
        "ours_vs_fastest_pct",
    ]
    print("\nTime to accuracy (s) on the twins; B1/B2 = baselines, ratios > 1 = ours faster")
    print(table[cols].to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    print("\nChecks: within 3 % of the fastest; faster than both baselines where the cap binds")
    for r in rows:
        flag = "PASS" if r["within_3pct"] and r["beats_baselines"] else "MISS"
        why = []
        if not r["within_3pct"]:
            why.append(f"{r['ours_vs_fastest_pct']:.1f} % over the fastest")
        if not r["beats_baselines"]:
            why.append(f"B1/ours {r['B1_over_ours']:.2f}, B2/ours {r['B2_over_ours']:.2f}")
        print(
            f"  {r['device']:7s} {r['workload']:18s} cap {str(r['cap_w']):4s} {flag}"
            f" {'; '.join(why)}"
        )
    print("\nPaper (speed-ups of Ours, caps P1, P2, N/A):")
    for k, v in PAPER.items():
        print(f"  {k[0]:7s} {k[1]:18s} {v}")
    print("\nCap-aware profiling (§4.1), board hours: all pairs vs only what can fit")
    for r in rows:
        if r["cap_w"] != "N/A":
            saved = 100 * (1 - r["profile_capped_h"] / r["profile_all_h"])
            print(
                f"  {r['device']:7s} {r['workload']:18s} cap {r['cap_w']:4} "
                f"{r['profile_all_h']:.2f} h -> {r['profile_capped_h']:.2f} h ({saved:.0f} % saved)"
            )
    orin = orin_joint(r_proxy, r_target, 1 if args.quick else 3, args.seed)
    od = pd.DataFrame(orin)
    print(
        "\nOrin AGX, all 18,096 modes x batch 4-64, MobileNetV3, predictor transferred from "
        "50 configurations at batch 8 and 32"
    )
    print(
        od[
            [
                "draw",
                "cap_w",
                "ours",
                "ours_vs_fastest_pct",
                "ours_excess_w",
                "best_b16_over_fastest",
            ]
        ].to_string(index=False, float_format=lambda v: f"{v:.2f}")
    )
    print(
        "  time MAPE by batch size (draw 0):",
        {b: round(v, 1) for b, v in orin[0]["time_mape_by_batch"].items()},
    )
    print(f"\nwall time {time.time() - t0:.0f} s")
    result = {"r_proxy": r_proxy, "r_target": r_target, "jetson": rows, "orin": orin}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1, default=float)
    return result


if __name__ == "__main__":
    main()
