"""Convert the Zeus NSDI '23 traces into datasets/real/ (the package's first real data).

Why a build script: the converted corpora are shipped; this records exactly how they were
made from the unmodified Apache-2.0 traces (../shared/data/zeus_nsdi23/ or --source), so
anyone can redo it. The library never imports this module.

Every GPU with a ``summary_power_{gpu}.csv`` in the source folder (``--gpu`` keeps some
only; the release has V100 and A40). Per GPU x workload:
``datasets/real/{gpu}_{workload}.csv`` with columns device, workload,
batch_size, power_limit_w, epoch_s (one epoch's training time, s — the trace gives epoch
time, not minibatch time, so the column says so) and power_w (average power over the
epoch, W), plus a provenance sidecar; for a GPU the catalog does not know, the sidecar
declares its device (``device_spec``: the power limit is the knob and the guard, its
values the trace's limits). Per workload: ``r_{workload}.csv`` with the median
epochs to the target metric per batch size over the seeds of the training trace.

Target metric (rule fixed before looking at any result): per workload the highest target
in the trace that at least half the runs of every batch size reach.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from powertrain.utils.hashing import sha256_file as sha256

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = ROOT.parent / "shared" / "data" / "zeus_nsdi23"
OUT = ROOT / "datasets" / "real"
CATALOG = ROOT / "powertrain" / "catalog" / "devices"
POWER_COLUMNS = (
    "dataset",
    "network",
    "batch_size",
    "optimizer",
    "power_limit",
    "time_per_epoch",
    "average_power",
)
TRAIN_COLUMNS = (
    "dataset",
    "network",
    "batch_size",
    "optimizer",
    "learning_rate",
    "run",
    "target_metric",
    "target_epoch",
)
#: Zeus's default batch size per workload (Zeus NSDI '23, Table 3: "default b")
DEFAULT_BATCH = {
    "shufflenetv2-cifar100": 1024,
    "resnet50-imagenet": 256,
    "deepspeech2-librispeech": 192,
    "ncf-movielens-1m": 1024,
    "bert-sentiment140": 128,
    "bert-squad": 32,
}


class TraceError(ValueError):
    pass


def workload_name(dataset: str, network: str) -> str:
    net = "bert" if network.startswith("bert") else network
    return f"{net}-{dataset}"


#: columns that measure something: finite and > 0 (the others: finite)
POSITIVE = ("batch_size", "power_limit", "time_per_epoch", "average_power", "learning_rate")


def read_trace(path: Path, columns) -> pd.DataFrame:
    try:
        df = pd.read_csv(path, encoding="utf-8")
    except UnicodeDecodeError as e:
        raise TraceError(f"{path}: not UTF-8 text (byte {e.start}); not a Zeus trace") from None
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        why = e.strerror if isinstance(e, OSError) else type(e).__name__
        raise TraceError(f"{path}: not a readable CSV ({why})") from None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise TraceError(f"{path}: missing column(s) {', '.join(missing)}")
    for c in columns:
        if c in ("dataset", "network", "optimizer"):
            continue
        v = pd.to_numeric(df[c], errors="coerce")
        ok = np.isfinite(v.to_numpy(float, na_value=np.nan))
        if c in POSITIVE:
            ok &= (v > 0).to_numpy()
        if c == "target_epoch":  # 'nan' = this run never reached that target
            ok |= df[c].isna().to_numpy()
            ok &= ~(v < 0).to_numpy()
        if not ok.all():
            i = int((~ok).nonzero()[0][0])
            need = "a finite positive number" if c in POSITIVE else "a finite number"
            raise TraceError(f"{path}: row {i + 1}, column '{c}': not {need}")
    return df


def r_table(
    train: pd.DataFrame, dataset: str, network: str, source: Path
) -> tuple[pd.DataFrame, float]:
    t = train[(train.dataset == dataset) & (train.network == network)]
    if t.empty:
        raise TraceError(f"{source}: workload {dataset}/{network} has no training trace")
    lower_better = dataset == "librispeech"  # word error rate
    targets = sorted(t.target_metric.unique(), reverse=not lower_better)
    sizes = sorted(t.batch_size.unique())
    for target in targets:
        reach = t[(t.target_metric == target) & t.target_epoch.notna()]
        runs = t.groupby("batch_size").run.nunique()
        got = reach.groupby("batch_size").run.nunique().reindex(sizes, fill_value=0)
        if (got >= runs.reindex(sizes) / 2).all():
            epochs = reach.groupby("batch_size").target_epoch.median()
            return (
                pd.DataFrame(
                    {
                        "batch_size": sizes,
                        "epochs": epochs.reindex(sizes).to_numpy(),
                        "runs": got.to_numpy(),
                        "target_metric": target,
                    }
                ),
                float(target),
            )
    raise TraceError(f"{source}: no target of {dataset}/{network} is reached by every batch size")


def gpus_in(source: Path, only: list[str] | None = None) -> list[str]:
    """The GPUs with a power trace in ``source`` (V100 before A40 as before, then by
    name); ``only`` keeps those."""
    if not source.is_dir():
        raise TraceError(f"{source}: no such folder of Zeus traces")
    found = [
        p.name[len("summary_power_") : -len(".csv")] for p in source.glob("summary_power_*.csv")
    ]
    order = {"v100": 0, "a40": 1}
    found = sorted(found, key=lambda g: (order.get(g, 2), g))
    if only is not None:
        missing = [g for g in only if g not in found]
        if missing:
            raise TraceError(
                f"{source}: no summary_power_{missing[0]}.csv (GPUs found: {', '.join(found)})"
            )
        found = [g for g in found if g in only]
    if not found:
        raise TraceError(f"{source}: no summary_power_{{gpu}}.csv")
    return found


def device_spec(gpu: str, limits: list[float]) -> dict | None:
    """A spec for a GPU the catalog lacks (None for one it has): the power limit is the
    knob, so it is the power guard too."""
    if (CATALOG / f"{gpu}.json").exists():
        return None
    return {
        "name": gpu,
        "description": f"NVIDIA {gpu.upper()} as measured in the Zeus NSDI '23 traces: the "
        "power limit is the knob (nvidia-smi -pl / NVML)",
        "knobs": {"power_limit_w": limits},
        "monotone": {"power_w": {"power_limit_w": 1}},
        "power_cap": "power_limit_w",
    }


def convert(source: Path, out: Path, gpus: list[str] | None = None) -> list[Path]:
    """Every trace read and checked, and the licence found, before anything is written."""
    found = gpus_in(source, gpus)
    if not (source / "LICENSE").is_file():
        raise TraceError(f"{source}: no LICENSE file (the traces' licence ships with them)")
    train_path = source / "summary_train.csv"
    train = read_trace(train_path, TRAIN_COLUMNS)
    traces = {g: read_trace(source / f"summary_power_{g}.csv", POWER_COLUMNS) for g in found}
    for (dataset, network), _ in train.groupby(["dataset", "network"]):
        r_table(train, dataset, network, train_path)  # a workload without a target: now
    try:
        out.mkdir(parents=True, exist_ok=True)
        return _write(source, out, train, traces)
    except OSError as e:
        raise TraceError(
            f"--out {out}: cannot write it ({e.strerror or type(e).__name__})"
        ) from None


def _write(source: Path, out: Path, train: pd.DataFrame, traces: dict) -> list[Path]:
    train_path = source / "summary_train.csv"
    written = []
    for gpu, power in traces.items():
        path = source / f"summary_power_{gpu}.csv"
        for (dataset, network), df in power.groupby(["dataset", "network"]):
            wl = workload_name(dataset, network)
            opts = set(train[(train.dataset == dataset) & (train.network == network)].optimizer)
            if not opts:
                raise TraceError(
                    f"{train_path}: workload {dataset}/{network} has no training trace"
                )
            df = df[df.optimizer.isin(opts)]  # the optimizer the accuracy trace used
            corpus = pd.DataFrame(
                {
                    "device": gpu,
                    "workload": wl,
                    "batch_size": df.batch_size.astype(int),
                    "power_limit_w": df.power_limit.astype(float),
                    "epoch_s": df.time_per_epoch,
                    "power_w": df.average_power,
                }
            ).sort_values(["batch_size", "power_limit_w"])
            corpus = corpus.groupby(
                ["device", "workload", "batch_size", "power_limit_w"], as_index=False
            ).mean()
            csv = out / f"{gpu}_{wl}.csv"
            corpus.to_csv(csv, index=False, float_format="%.6g")
            prov = {
                "source": "Zeus NSDI '23 traces (ml-energy/zeus, examples/research_reproducibility/"
                "zeus_nsdi23/trace/, commit 75a8b93)",
                "licence": "Apache-2.0 (LICENSE in this folder)",
                "original_file": path.name,
                "original_sha256": sha256(path),
                "rows": {"dataset": dataset, "network": network, "optimizer": sorted(opts)},
                "conversion": "python tools/import_zeus.py; epoch_s = time_per_epoch, power_w = "
                "average_power, power_limit_w = power_limit; duplicates averaged",
                "time_column": "epoch_s is seconds per training epoch (not per minibatch)",
                "default_batch_size": DEFAULT_BATCH.get(wl),
                "csv_sha256": sha256(csv),
            }
            spec = device_spec(gpu, sorted(float(w) for w in power.power_limit.unique()))
            if spec is not None:
                prov["device_spec"] = spec
            (out / f"{gpu}_{wl}.provenance.json").write_text(json.dumps(prov, indent=1) + "\n")
            written.append(csv)
    for (dataset, network), _ in train.groupby(["dataset", "network"]):
        wl = workload_name(dataset, network)
        table, target = r_table(train, dataset, network, train_path)
        table.to_csv(out / f"r_{wl}.csv", index=False)
        written.append(out / f"r_{wl}.csv")
    shutil.copyfile(source / "LICENSE", out / "LICENSE")
    (out / "README.md").write_text(
        "# Real measurements (Zeus NSDI '23)\n\nConverted by `python tools/import_zeus.py` from "
        'the unmodified Apache-2.0 traces of J. You, J.-W. Chung and M. Chowdhury, "Zeus: '
        'Understanding and Optimizing GPU Energy Consumption of DNN Training" (NSDI 2023). '
        "`{gpu}_{workload}.csv`: epoch time and average power per (batch size, power limit); "
        "`r_{workload}.csv`: median epochs to the target metric per batch size. Each corpus "
        "has a provenance sidecar; LICENSE is the traces' licence. `perseus/` holds the "
        "Perseus SOSP '24 A40 clock sweeps (its own README, `python tools/import_perseus.py`).\n"
    )
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default=str(DEFAULT_SOURCE), help="folder of the Zeus traces")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--gpu", nargs="+", help="GPUs to import (default: every one found)")
    args = ap.parse_args(argv)
    try:
        files = convert(Path(args.source), Path(args.out), args.gpu)
    except TraceError as e:
        print(f"import_zeus: error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {len(files)} files to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
