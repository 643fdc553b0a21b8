"""Convert Perseus SOSP '24 frequency sweeps of any GPU into datasets/real/perseus/.

Why a build script: the converted corpora are shipped; this records exactly how they were
made from the unmodified Apache-2.0 profiles (../shared/data/perseus_sosp24/ or
--source), so anyone can redo it. The library never imports this module.

Every profile ``{model}+{gpu}_{dtype}.csv`` in the source folder (``--gpu`` keeps some
GPUs only) becomes ``{gpu}-locked-clock_{model}.csv`` with columns device, workload,
gpu_mhz, batch_size, time_ms, power_w, energy_j. One row per pipeline stage x pass x
locked SM clock; each (stage, pass) is one computation, its workload id
``{model}-stage{s}-{pass}``. ``time_ms`` is one microbatch's time (ms), ``energy_j`` its
energy (J) and ``power_w = energy_j / time`` its average power (W). The trace does not
record the microbatch size, so ``batch_size`` is 1 (one microbatch; every row the same).
The provenance sidecar declares the device (``device_spec``: the GPU whose one knob is
the locked SM clock, the clocks of its sweep), so the rows' ``device`` id resolves
without a catalog entry. The shipped release has A40 sweeps of GPT-3 175B and BLOOM.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from powertrain.utils.hashing import sha256_file as sha256

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = ROOT.parent / "shared" / "data" / "perseus_sosp24"
OUT = ROOT / "datasets" / "real" / "perseus"
COLUMNS = ("stage", "instruction", "frequency", "time", "energy")
#: a profile's file name: {model}+{gpu}_{dtype}.csv
PROFILE = re.compile(r"^(?P<model>[^+/]+)\+(?P<gpu>[a-z0-9_-]+)_(?P<dtype>[a-z0-9]+)\.csv$")
#: datasheet facts for the description of GPUs we know (others: their name only)
GPU_FACTS = {"a40": "NVIDIA A40 (84 SMs, 10752 CUDA cores, 300 W)"}
#: display names of the models in the README (others: their id)
MODEL_NAMES = {"gpt3-175b": "GPT-3 175B", "bloom": "BLOOM"}
SOURCE = (
    "Perseus SOSP '24 profiles (ml-energy/zeus, branch kronos, commit "
    "38cb3f90c30d9041d4b141cfe5c922dba55baa45, sosp24_data/emulation/stage_profile/); "
    'J.-W. Chung et al., "Perseus: Reducing Energy Bloat in Large Model Training", SOSP 2024'
)


class TraceError(ValueError):
    pass


def read_profile(path: Path) -> pd.DataFrame:
    try:
        df = pd.read_csv(path, encoding="utf-8")
    except UnicodeDecodeError as e:
        raise TraceError(
            f"{path}: not UTF-8 text (byte {e.start}); not a Perseus profile"
        ) from None
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        why = e.strerror if isinstance(e, OSError) else type(e).__name__
        raise TraceError(f"{path}: not a readable CSV ({why})") from None
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise TraceError(f"{path}: missing column(s) {', '.join(missing)}")
    for c in ("stage", "frequency", "time", "energy"):
        v = pd.to_numeric(df[c], errors="coerce")
        ok = np.isfinite(v.to_numpy(float, na_value=np.nan))
        # a stage is a whole index >= 0 (0.5 would be written as stage 0, a second one)
        ok &= ((v >= 0) & (v == v.round()) if c == "stage" else v > 0).to_numpy()
        if not ok.all():
            i = int((~ok).nonzero()[0][0])
            raise TraceError(
                f"{path}: row {i + 1}, column '{c}': not a "
                + ("whole stage index >= 0" if c == "stage" else "finite positive number")
            )
    dup = df.duplicated(["stage", "instruction", "frequency"])
    if dup.any():
        i = int(dup.to_numpy().nonzero()[0][0])
        raise TraceError(f"{path}: row {i + 1} repeats a (stage, instruction, frequency)")
    return df


def device_id(gpu: str) -> str:
    """``a100_sxm`` -> ``a100-sxm-locked-clock`` (a device id has no underscore: it
    separates the device from the workload in a corpus name)."""
    return f"{gpu.replace('_', '-')}-locked-clock"


def device_spec(gpu: str, clocks: list[float]) -> dict:
    facts = GPU_FACTS.get(gpu, f"NVIDIA {gpu.upper().replace('_', ' ')}")
    return {
        "name": device_id(gpu),
        "description": f"{facts} with its SM clock locked (nvidia-smi -lgc) to one of the "
        f"{len(clocks)} clocks of the Perseus sweep",
        "knobs": {"gpu_mhz": clocks},
        "step_down": [],
        "stratify_by": ["gpu_mhz"],
    }


def profiles(source: Path, gpus: list[str] | None = None) -> list[tuple[Path, str, str]]:
    """(path, model, gpu) of every profile in ``source``, GPT-3 before BLOOM as before,
    then by name; ``gpus`` keeps those GPUs only."""
    if not source.is_dir():
        raise TraceError(f"{source}: no such folder of Perseus profiles")
    found = []
    for path in sorted(source.glob("*.csv"), key=lambda p: (not p.name.startswith("gpt3"), p.name)):
        m = PROFILE.match(path.name)
        if m and (gpus is None or m["gpu"] in gpus or m["gpu"].replace("_", "-") in gpus):
            found.append((path, m["model"], m["gpu"]))
    if not found:
        want = f" of GPU(s) {', '.join(gpus)}" if gpus else ""
        raise TraceError(f"{source}: no profile{want} named {{model}}+{{gpu}}_{{dtype}}.csv")
    return found


def convert_one(path: Path, model: str, gpu: str, out: Path) -> tuple[Path, list[float]]:
    df = read_profile(path)
    device = device_id(gpu)
    corpus = pd.DataFrame(
        {
            "device": device,
            "workload": [f"{model}-stage{int(s)}-{i}" for s, i in zip(df.stage, df.instruction)],
            "gpu_mhz": df.frequency.astype(float),
            "batch_size": 1,
            "time_ms": df.time * 1e3,
            "power_w": df.energy / df.time,
            "energy_j": df.energy,
        }
    ).sort_values(["workload", "gpu_mhz"], kind="mergesort")
    clocks = sorted(float(f) for f in corpus.gpu_mhz.unique())
    csv = out / f"{device}_{model}.csv"
    corpus.to_csv(csv, index=False, float_format="%.10g")
    prov = {
        "source": SOURCE,
        "licence": "Apache-2.0 (LICENSE in this folder)",
        "original_file": path.name,
        "original_sha256": sha256(path),
        "conversion": "python tools/import_perseus.py; time_ms = time x 1000, power_w = "
        "energy / time, energy_j = energy, gpu_mhz = frequency; workload = "
        "{model}-stage{stage}-{instruction}",
        "time_column": "time_ms is one microbatch of one pipeline stage (forward or backward), ms",
        "batch_size": "1 = one microbatch (the trace does not record its size)",
        "workloads": sorted(corpus.workload.unique()),
        "device_spec": device_spec(gpu, clocks),
        "csv_sha256": sha256(csv),
    }
    (out / f"{device}_{model}.provenance.json").write_text(json.dumps(prov, indent=1) + "\n")
    return csv, clocks


def readme(done: list[tuple[str, str, list[float]]]) -> str:
    """The folder's README: per GPU, its models and clock range."""
    parts = []
    for gpu in dict.fromkeys(g for _, g, _ in done):
        models = [MODEL_NAMES.get(m, m) for m, g, _ in done if g == gpu]
        clocks = sorted({c for _, g, cs in done if g == gpu for c in cs})
        parts.append(
            f"`{device_id(gpu)}_{{model}}.csv` ({', '.join(models)}): per pipeline "
            "stage x pass (a workload `{model}-stage{s}-{pass}`) and locked SM clock "
            f"({len(clocks)} clocks, {clocks[0]:g}-{clocks[-1]:g} MHz) on an "
            f"{gpu.upper() if gpu in GPU_FACTS else 'NVIDIA ' + gpu.upper().replace('_', ' ')}, "
            "the time (ms), "
            "energy (J) and average power (energy / time, W) of one microbatch."
        )
    return (
        "# Real measurements: GPU clock sweeps (Perseus SOSP '24)\n\nConverted by "
        "`python tools/import_perseus.py` from the unmodified Apache-2.0 profiles of "
        'J.-W. Chung et al., "Perseus: Reducing Energy Bloat in Large Model Training" '
        f"(SOSP 2024). {' '.join(parts)} Each corpus has a provenance sidecar that "
        "also declares the device; LICENSE is the profiles' licence.\n"
    )


def convert(source: Path, out: Path, gpus: list[str] | None = None) -> list[Path]:
    """Every profile read and checked, and the licence found, before anything is
    written; then the corpora, LICENSE and README into ``out``."""
    found = profiles(source, gpus)
    if not (source / "LICENSE").is_file():
        raise TraceError(f"{source}: no LICENSE file (the profiles' licence ships with them)")
    for path, _, _ in found:
        read_profile(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
        written, done = [], []
        for path, model, gpu in found:
            csv, clocks = convert_one(path, model, gpu, out)
            written.append(csv)
            done.append((model, gpu, clocks))
        shutil.copyfile(source / "LICENSE", out / "LICENSE")
        (out / "README.md").write_text(readme(done))
    except OSError as e:
        raise TraceError(
            f"--out {out}: cannot write it ({e.strerror or type(e).__name__})"
        ) from None
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default=str(DEFAULT_SOURCE), help="folder of the profiles")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--gpu", nargs="+", help="GPUs to import (default: every one found)")
    args = ap.parse_args(argv)
    try:
        files = convert(Path(args.source), Path(args.out), args.gpu)
    except TraceError as e:
        print(f"import_perseus: error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {len(files)} corpora to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
