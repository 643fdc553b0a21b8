"""Regenerate the profiling corpora in ``datasets/`` on the digital twin (a build script).

Why outside the library: making a corpus runs the twin through the profiler for hours
of simulated board time; users only load the results (``powertrain.data.corpora``). Every
corpus is produced through :func:`powertrain.profile`, the same loop users run on a
board (40 minibatches per mode, power from 1 Hz sensor samples), bit-for-bit
reproducibly for the same powertrain, numpy and pandas versions::

    python tools/make_corpora.py --all          # or: python tools/make_corpora.py NAME ...
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from powertrain._version import __version__
from powertrain.data.corpora import REGENERATE
from powertrain.devices.device import get_device
from powertrain.devices.workloads import get_workload
from powertrain.errors import DataError
from powertrain.profiling.store import raw_log_paths
from powertrain.profiling.sweep import profile
from powertrain.twin import Twin
from powertrain.utils.hashing import sha256_file

N_MINIBATCHES = 40
#: the repository's datasets/ folder (shipped as the package powertrain._datasets)
DATASETS = Path(__file__).resolve().parents[1] / "datasets"


@dataclass(frozen=True)
class CorpusSpec:
    """How one corpus is made: which twin, which modes, which batch sizes.

    ``modes``: ``"grid"`` (the device's profiling grid: 4,368 modes on Orin AGX),
    ``"all"`` (every mode), ``"random:N"`` (N distinct random modes, seeded) or
    ``"gpu-sweep"`` (every GPU frequency, other knobs at their maximum: the second
    paper's batch-size x GPU-frequency grid). ``raw_logs`` keeps the per-minibatch and
    per-sample logs (gzipped) beside the CSV.
    """

    name: str
    device: str
    workload: str
    batch_sizes: tuple[int, ...]
    modes: str = "grid"
    seed: int = 0
    raw_logs: bool = True


def _registry() -> dict[str, CorpusSpec]:
    specs: list[CorpusSpec] = []
    # raw logs for the three reference workloads at batch 16 and the smaller corpora only:
    # keeping them for every Orin grid would put datasets/ well over its size budget
    for wl in ("resnet18", "mobilenetv3", "yolov8n", "bert-base", "lstm"):
        keep = wl in ("resnet18", "mobilenetv3", "yolov8n")
        specs.append(CorpusSpec(f"orin-agx_{wl}_bs16", "orin-agx", wl, (16,), raw_logs=keep))
    for wl in ("resnet18", "mobilenetv3"):
        for bs in (8, 32):
            specs.append(CorpusSpec(f"orin-agx_{wl}_bs{bs}", "orin-agx", wl, (bs,), raw_logs=False))
        specs.append(CorpusSpec(f"xavier-agx_{wl}_bs16", "xavier-agx", wl, (16,), "random:1000"))
        specs.append(CorpusSpec(f"orin-nano_{wl}_bs16", "orin-nano", wl, (16,), "all"))
    # the older Jetsons at batch 16: with the three above, the family reference's corpora
    # (tools/train_reference.py jetson/resnet18), so it sees five GPU and memory widths
    for dev in ("nano", "tx2-nx"):
        specs.append(
            CorpusSpec(
                f"{dev}_resnet18_bs16", dev, "resnet18", (16,), "random:1500", raw_logs=False
            )
        )
    for wl in ("resnet18-cifar", "mobilenetv2-cifar", "transformer-char"):
        sizes = tuple(get_workload(wl).extra.get("batch_sizes", (4, 8, 16, 32, 64, 128)))
        specs.append(CorpusSpec(f"nano_{wl}_batchgrid", "nano", wl, sizes, "gpu-sweep"))
    return {s.name: s for s in specs}


CORPORA: dict[str, CorpusSpec] = _registry()


def modes_for(spec: CorpusSpec) -> pd.DataFrame:
    """The configurations a corpus profiles (with a ``batch_size`` column)."""
    dev = get_device(spec.device)
    kind, _, arg = spec.modes.partition(":")
    if kind == "grid":
        modes = dev.profiling_grid()
    elif kind == "all":
        modes = dev.power_modes()
    elif kind == "random":
        modes = dev.sample(int(arg), seed=spec.seed)
    elif kind == "gpu-sweep":
        top = dev.maxn().iloc[0]
        modes = pd.DataFrame({"gpu_mhz": list(dev.spec.gpu_mhz)}).assign(
            cores=int(top.cores), cpu_mhz=top.cpu_mhz, mem_mhz=top.mem_mhz
        )[["cores", "cpu_mhz", "gpu_mhz", "mem_mhz"]]
    else:
        raise ValueError(f"corpus {spec.name}: unknown mode selection {spec.modes!r}")
    return pd.concat([modes.assign(batch_size=b) for b in spec.batch_sizes], ignore_index=True)


def _gzip(src: Path, dst: Path) -> None:
    """Deterministic gzip: no file name, mtime 0, so regenerating gives the same bytes."""
    with open(src, "rb") as f, open(dst, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as gz:
            shutil.copyfileobj(f, gz)


def generate(name: str, out_dir: str | Path | None = None, progress: bool = False) -> Path:
    """Profile corpus ``name`` on the twin and write it (CSV, raw logs, provenance) into
    ``out_dir`` (default: the repository's ``datasets/`` folder). Returns the CSV path."""
    if name not in CORPORA:
        raise DataError(f"no corpus recipe named {name!r}; known: {', '.join(CORPORA)}")
    spec = CORPORA[name]
    out = Path(out_dir) if out_dir is not None else DATASETS
    out.mkdir(parents=True, exist_ok=True)
    twin = Twin(spec.device, spec.workload, seed=spec.seed)
    modes = modes_for(spec)
    with tempfile.TemporaryDirectory(prefix="powertrain-corpus-") as tmp:
        csv_tmp = Path(tmp) / f"{name}.csv"
        df = profile(
            twin, modes, n_minibatches=N_MINIBATCHES, out=csv_tmp, progress=progress, fsync=False
        )
        csv = out / f"{name}.csv"
        shutil.copyfile(csv_tmp, csv)
        raw = {}
        for kind, src in zip(("minibatches", "power"), raw_log_paths(csv_tmp)):
            dst = out / f"{name}.{kind}.csv.gz"
            if spec.raw_logs:
                _gzip(src, dst)
                raw[kind] = {"file": dst.name, "sha256": sha256_file(dst)}
            elif dst.exists():
                dst.unlink()
    info = {
        "name": name,
        "generator": "tools/make_corpora.py (digital twin through powertrain.profile)",
        "powertrain": __version__,
        "numpy": np.__version__,
        "pandas": pd.__version__,
        "device": spec.device,
        "workload": spec.workload,
        "batch_sizes": list(spec.batch_sizes),
        "modes": spec.modes,
        "seed": spec.seed,
        "n_minibatches": N_MINIBATCHES,
        "rows": int(len(df)),
        "csv": {"file": csv.name, "sha256": sha256_file(csv)},
        "raw_logs": raw or "not kept for this corpus (size); regenerate to get them",
        "board_hours": round(float(df["profile_s"].sum()) / 3600, 3),
        "twin": twin.describe(),
        "command": f"python tools/make_corpora.py {name}",
        "regenerate_all": REGENERATE,
        "notes": "Bit-for-bit reproducible for the same powertrain, numpy and pandas versions.",
    }
    (out / f"{name}.provenance.json").write_text(json.dumps(info, indent=1) + "\n")
    return csv


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python tools/make_corpora.py", description=__doc__.split("\n")[0]
    )
    ap.add_argument("names", nargs="*", help="corpora to regenerate")
    ap.add_argument("--all", action="store_true", help="regenerate every corpus")
    ap.add_argument("--out", help="folder to write to (default: the repository's datasets/)")
    ap.add_argument("--list", action="store_true", help="list the recipes and exit")
    args = ap.parse_args(argv)
    if args.list:
        for s in CORPORA.values():
            bs = list(s.batch_sizes)
            print(f"{s.name:36s} {s.device:11s} {s.workload:18s} bs={bs} modes={s.modes}")
        return 0
    names = list(CORPORA) if args.all else args.names
    if not names:
        ap.error("name at least one corpus, or pass --all")
    for n in names:
        path = generate(n, args.out, progress=sys.stderr.isatty())
        print(f"{path}  {len(pd.read_csv(path))} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
