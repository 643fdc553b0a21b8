"""Convert the Perseus SOSP '24 A40 frequency sweeps into datasets/real/perseus/.

Why a build script: the converted corpora are shipped; this records exactly how they were
made from the unmodified Apache-2.0 profiles (../shared/data/perseus_sosp24/ or
--source), so anyone can redo it. The library never imports this module.

Per model (GPT-3 175B, BLOOM): ``datasets/real/perseus/a40-locked-clock_{model}.csv``
with columns device, workload, gpu_mhz, batch_size, time_ms, power_w, energy_j. One row
per pipeline stage x pass x locked SM clock; each (stage, pass) is one computation, its
workload id ``{model}-stage{s}-{pass}``. ``time_ms`` is one microbatch's time (ms),
``energy_j`` its energy (J) and ``power_w = energy_j / time`` its average power (W).
The trace does not record the microbatch size, so ``batch_size`` is 1 (one microbatch;
every row the same). The provenance sidecar declares the device (``device_spec``: an
A40 whose one knob is the locked SM clock, the 60 clocks of the sweep), so the rows'
``device`` id resolves without a catalog entry.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import pandas as pd

from powertrain.hashing import sha256_file as sha256

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = ROOT.parent / "shared" / "data" / "perseus_sosp24"
OUT = ROOT / "datasets" / "real" / "perseus"
DEVICE = "a40-locked-clock"
COLUMNS = ("stage", "instruction", "frequency", "time", "energy")
#: source file -> model id
FILES = {"gpt3-175b+a40_bf16.csv": "gpt3-175b", "bloom+a40_bf16.csv": "bloom"}
SOURCE = (
    "Perseus SOSP '24 profiles (ml-energy/zeus, branch kronos, commit "
    "38cb3f90c30d9041d4b141cfe5c922dba55baa45, sosp24_data/emulation/stage_profile/); "
    'J.-W. Chung et al., "Perseus: Reducing Energy Bloat in Large Model Training", SOSP 2024'
)


class TraceError(ValueError):
    pass


def read_profile(path: Path) -> pd.DataFrame:
    try:
        df = pd.read_csv(path)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise TraceError(f"{path}: not a readable CSV ({e})") from None
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise TraceError(f"{path}: missing column(s) {', '.join(missing)}")
    for c in ("stage", "frequency", "time", "energy"):
        v = pd.to_numeric(df[c], errors="coerce")
        bad = v.isna() | (v <= 0) if c != "stage" else v.isna() | (v < 0)
        if bad.any():
            i = int(bad.to_numpy().nonzero()[0][0])
            raise TraceError(
                f"{path}: row {i + 1}, column '{c}': {df[c].iloc[i]!r} is not a "
                + ("stage index" if c == "stage" else "positive number")
            )
    dup = df.duplicated(["stage", "instruction", "frequency"])
    if dup.any():
        i = int(dup.to_numpy().nonzero()[0][0])
        raise TraceError(f"{path}: row {i + 1} repeats a (stage, instruction, frequency)")
    return df


def device_spec(clocks: list[float]) -> dict:
    return {
        "name": DEVICE,
        "description": "NVIDIA A40 (84 SMs, 10752 CUDA cores, 300 W) with its SM clock "
        "locked (nvidia-smi -lgc) to one of the 60 clocks of the Perseus sweep",
        "knobs": {"gpu_mhz": clocks},
        "step_down": [],
        "stratify_by": ["gpu_mhz"],
    }


def convert(source: Path, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for fname, model in FILES.items():
        path = source / fname
        df = read_profile(path)
        corpus = pd.DataFrame(
            {
                "device": DEVICE,
                "workload": [
                    f"{model}-stage{int(s)}-{i}" for s, i in zip(df.stage, df.instruction)
                ],
                "gpu_mhz": df.frequency.astype(float),
                "batch_size": 1,
                "time_ms": df.time * 1e3,
                "power_w": df.energy / df.time,
                "energy_j": df.energy,
            }
        ).sort_values(["workload", "gpu_mhz"], kind="mergesort")
        clocks = sorted(float(f) for f in corpus.gpu_mhz.unique())
        csv = out / f"{DEVICE}_{model}.csv"
        corpus.to_csv(csv, index=False, float_format="%.10g")
        prov = {
            "source": SOURCE,
            "licence": "Apache-2.0 (LICENSE in this folder)",
            "original_file": fname,
            "original_sha256": sha256(path),
            "conversion": "python tools/import_perseus.py; time_ms = time x 1000, power_w = "
            "energy / time, energy_j = energy, gpu_mhz = frequency; workload = "
            "{model}-stage{stage}-{instruction}",
            "time_column": "time_ms is one microbatch of one pipeline stage (forward or "
            "backward), ms",
            "batch_size": "1 = one microbatch (the trace does not record its size)",
            "workloads": sorted(corpus.workload.unique()),
            "device_spec": device_spec(clocks),
            "csv_sha256": sha256(csv),
        }
        (out / f"{DEVICE}_{model}.provenance.json").write_text(json.dumps(prov, indent=1) + "\n")
        written.append(csv)
    shutil.copyfile(source / "LICENSE", out / "LICENSE")
    (out / "README.md").write_text(
        "# Real measurements: GPU clock sweeps (Perseus SOSP '24)\n\nConverted by "
        "`python tools/import_perseus.py` from the unmodified Apache-2.0 profiles of "
        'J.-W. Chung et al., "Perseus: Reducing Energy Bloat in Large Model Training" '
        "(SOSP 2024). `a40-locked-clock_{model}.csv` (GPT-3 175B, BLOOM): per pipeline "
        "stage x pass (a workload `{model}-stage{s}-{pass}`) and locked SM clock (60 "
        "clocks, 855-1740 MHz) on an A40, the time (ms), energy (J) and average power "
        "(energy / time, W) of one microbatch. Each corpus has a provenance sidecar that "
        "also declares the device; LICENSE is the profiles' licence.\n"
    )
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default=str(DEFAULT_SOURCE), help="folder of the profiles")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    try:
        files = convert(Path(args.source), Path(args.out))
    except TraceError as e:
        print(f"import_perseus: error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {len(files)} corpora to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
