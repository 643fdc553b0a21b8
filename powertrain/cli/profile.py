"""``powertrain profile``: measure a training job's time and power in many configurations.

Why: the samples a transfer needs come from one command a person can run on their
board and trust: the board is restored afterwards, and rerunning with the same --out
resumes an interrupted sweep.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import DataError
from .args import (
    IntListAction,
    command,
    default_of,
    done,
    given,
    nonnegative_int,
    positive_int,
    progress_flag,
)

if TYPE_CHECKING:
    import pandas as pd

#: where the library defaults shown in the help live (read without importing them)
PROFILE = "powertrain.profiling.sweep:profile"
JETSON = "powertrain.backends.jetson.backend:JetsonBackend"
NVML = "powertrain.backends.nvml:NvmlBackend"

#: what --strategy accepts
STRATEGIES = ("random", "stratified", "active")


def caps_arg(text: str) -> list[float]:
    """``30``, ``20,30,40`` or a range ``17-50`` (1 W steps) as a list of watts."""
    try:
        if "-" in text.strip("-"):
            lo, hi = (float(x) for x in text.split("-", 1))
            if not 0 < lo <= hi:
                raise ValueError
            return [float(c) for c in range(int(round(lo)), int(round(hi)) + 1)]
        caps = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give watts as 30, 20,30,40 or a range 17-50"
        ) from None
    if not caps or any(not c > 0 for c in caps):
        raise argparse.ArgumentTypeError(f"{text!r}: caps must be positive watts")
    return caps


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "profile",
        help="profile a training job over power modes / batch sizes (twin, Jetson, NVIDIA GPU)",
        description="Run N minibatches of a training step in each configuration and write one "
        "row per configuration (time_ms, power_w, ...). Rerun with the same --out to resume.",
    )
    p.add_argument(
        "--backend",
        choices=("twin", "jetson", "nvml"),
        default="twin",
        help="twin: the simulated board; jetson: this Jetson via sysfs (root); "
        "nvml: this NVIDIA GPU, clocks locked only with --allow-clocks, power limit only "
        "with --allow-power-limit (default: twin)",
    )
    p.add_argument(
        "--device",
        help="catalog id or spec file (twin, jetson; on a Jetson 'auto' recognises the "
        "board from its device tree and nvpmodel file); for nvml an optional "
        "name for the device column (default: the GPU's name)",
    )
    p.add_argument(
        "--workload",
        required=True,
        help="twin: a catalog workload; jetson/nvml: resnet18, mobilenetv3, or "
        "module:function / file.py:function naming your step(batch_size) (required, no default)",
    )
    p.add_argument(
        "--modes",
        default=None,
        help="N random modes of the device (default 50; nvml: every combination), or a "
        "CSV file with cores,cpu_mhz,gpu_mhz,mem_mhz[,batch_size,num_workers] columns "
        "(nvml: threads,num_workers,batch_size[,power_limit_w,gpu_mhz,mem_mhz])",
    )
    p.add_argument(
        "--batch-size",
        action=IntListAction,
        default=None,
        help="batch size(s), e.g. 16,32 or 16 32; several multiply the modes (default 16)",
    )
    p.add_argument(
        "--out",
        default=None,
        help="output CSV (raw logs and a .meta.json beside it); "
        "default: print to stdout, not resumable",
    )
    p.add_argument(
        "--minibatches",
        type=int,
        default=None,
        help=f"clean minibatches per mode (default {default_of(PROFILE, 'n_minibatches')})",
    )
    p.add_argument(
        "--seed",
        type=nonnegative_int,
        default=0,
        help="random seed for the mode sample and the twin (default 0)",
    )
    p.add_argument("--progress", action="store_true", help="same as -v (kept for old scripts)")
    st = p.add_argument_group("strategy: which configurations to measure")
    st.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default="random",
        help="random: --modes N drawn at random; stratified: N spread over the device's "
        "stratify_by knobs; active: measure where the decision under --power-cap is, "
        "transferring --reference after each round, and report the fastest measured "
        "configuration under each cap (default: random)",
    )
    st.add_argument(
        "--power-cap",
        type=caps_arg,
        default=None,
        help="active: the cap(s) in W to decide for: 30, 20,30,40 or a range 17-50 "
        "(1 W steps); required with --strategy active",
    )
    st.add_argument(
        "--budget",
        type=positive_int,
        default=None,
        help="active: configurations to measure at most (default 50)",
    )
    st.add_argument(
        "--hard-cap",
        action="store_true",
        default=None,
        help="active, one cap: measure only configurations known, or predicted with high "
        "confidence, to stay under it, and leave one at once where the cap is hit "
        "(powertrain.decisions.hard_cap); the table reports the share of measuring "
        "time and energy over the cap",
    )
    st.add_argument(
        "--reference",
        default=None,
        help="active: the model to transfer, a model folder or a shipped name "
        "(default: the shipped reference of this device, ResNet-18 first)",
    )
    hw = p.add_argument_group("jetson / nvml")
    hw.add_argument(
        "--num-workers",
        action=IntListAction,
        item=nonnegative_int,
        default=None,
        help="dataloader worker count(s), e.g. 0,4 or 0 4; several multiply the modes (default 0)",
    )
    hw.add_argument(
        "--image-size",
        type=int,
        default=None,
        help="input size of the ready-made workloads (default: the workload's own)",
    )
    hw.add_argument(
        "--sample-period",
        type=float,
        default=None,
        help="power sampling period in s (default: jetson "
        f"{default_of(JETSON, 'sample_period_s')}, "
        f"nvml {default_of(NVML, 'sample_period_s')})",
    )
    j = p.add_argument_group("jetson")
    j.add_argument(
        "--sensor",
        choices=("auto", "jtop", "hwmon"),
        default=None,
        help="power source: jtop (jetson-stats service), hwmon (INA3221 files), auto "
        "(default: jtop when its service runs, else hwmon)",
    )
    j.add_argument(
        "--emc",
        choices=("auto", "bpmp", "override", "cap"),
        default=None,
        help="memory clock control (default: auto, the first one the board has)",
    )
    j.add_argument(
        "--gpu-devfreq", default=None, help="GPU devfreq folder (default: found automatically)"
    )
    j.add_argument(
        "--no-fan",
        action="store_true",
        help="leave the fan alone (default: full speed while profiling)",
    )
    j.add_argument(
        "--allow-unlisted-emc",
        action="store_true",
        help="write memory clocks taken from the catalog when the board lists no EMC rates "
        "(default: off, such a memory clock is refused)",
    )
    j.add_argument("--sysfs-root", default=None, help=argparse.SUPPRESS)  # tests and chroots
    n = p.add_argument_group("nvml")
    n.add_argument(
        "--gpu",
        type=int,
        default=None,
        help=f"NVML GPU index (default {default_of(NVML, 'gpu_index')})",
    )
    n.add_argument(
        "--threads",
        action=IntListAction,
        default=None,
        help="CPU thread counts to sweep (the threads column), e.g. 2,4,8 or 2 4 8; "
        "default: torch's current count",
    )
    n.add_argument(
        "--power-limits",
        action=IntListAction,
        default=None,
        help="GPU power limits in W to sweep (the power_limit_w column), e.g. 150,200,250 or "
        "150 200 250; needs --allow-power-limit and root (default: none, the limit is "
        "left alone)",
    )
    n.add_argument(
        "--allow-power-limit",
        action="store_true",
        help="let the nvml backend set the GPU power limit for --power-limits; the limit "
        "found at start is restored afterwards, also after an error (default: off, no "
        "NVML setting is changed)",
    )
    n.add_argument(
        "--gpu-clocks",
        action=IntListAction,
        default=None,
        help="locked SM clocks in MHz to sweep (the gpu_mhz column), among those NVML "
        "supports (nvidia-smi -q -d SUPPORTED_CLOCKS); needs --allow-clocks and root "
        "(default: none, clocks are left alone)",
    )
    n.add_argument(
        "--mem-clocks",
        action=IntListAction,
        default=None,
        help="locked memory clocks in MHz to sweep (the mem_mhz column), where the GPU "
        "supports several; needs --allow-clocks and root",
    )
    n.add_argument(
        "--allow-clocks",
        action="store_true",
        help="let the nvml backend lock clocks for --gpu-clocks / --mem-clocks; they are "
        "unlocked afterwards, also after an error or a stop signal, and after a SIGKILL "
        "by the next run that may change settings (default: off)",
    )
    n.add_argument(
        "--spec-out",
        default=None,
        help="write a device spec (JSON) built from what NVML reports: supported SM and "
        "memory clocks, power limit range (needs --allow-clocks / --allow-power-limit to "
        "read them)",
    )
    p.set_defaults(func=cmd_profile)


def _modes(args: argparse.Namespace, device) -> pd.DataFrame:
    """Modes from --modes (count or file), crossed with batch sizes and worker counts."""
    from ..schema import read_csv

    text = args.modes if args.modes is not None else "50"
    if text.isdigit():
        n = int(text)
        if not 0 < n <= device.n_modes:  # counted, not built: a space may be huge
            raise DataError(f"--modes {n}: choose 1..{device.n_modes} modes")
        modes = device.sample(n, seed=args.seed, stratified=args.strategy == "stratified")
    else:
        modes = read_csv(text, "--modes")
    return _cross(modes, args)


def _cross(
    modes: pd.DataFrame, args: argparse.Namespace, more: tuple[tuple[str, list | None], ...] = ()
) -> pd.DataFrame:
    """``modes`` crossed with the values given on the command line (batch sizes, worker
    counts, and ``more``: e.g. nvml's threads and power limits), replacing a file's."""
    import pandas as pd

    pairs = (("batch_size", args.batch_size), ("num_workers", args.num_workers), *more)
    for col, values in pairs:
        if values is None:
            continue
        if col == "batch_size" and any(v < 1 for v in values):
            raise DataError("--batch-size: batch sizes must be >= 1")
        modes = modes.drop(columns=[col], errors="ignore")
        modes = modes.merge(pd.DataFrame({col: values}), how="cross")
    if "batch_size" not in modes.columns:
        modes["batch_size"] = 16
    return modes


def _step_options(args: argparse.Namespace) -> dict:
    return {"image_size": args.image_size} if args.image_size and ":" not in args.workload else {}


def _run(backend, modes: pd.DataFrame, args: argparse.Namespace) -> pd.DataFrame:
    # the seed draws the modes (and seeds the twin); batch sizes and worker counts are
    # configuration columns, so a resumed run may add new ones to the same output
    from ..profiling.sweep import profile

    header = {"seed": args.seed}
    return profile(
        backend,
        modes,
        out=args.out,
        progress=progress_flag(args),
        header=header,
        **given(args, n_minibatches="minibatches"),
    )


def _backend_options(args: argparse.Namespace) -> dict:
    """Constructor options of the chosen backend, from the command line."""
    if args.backend == "jetson":
        return {
            "fan": not args.no_fan,
            "allow_unlisted_emc": args.allow_unlisted_emc,
            **given(
                args,
                root="sysfs_root",
                sensor="sensor",
                sample_period_s="sample_period",
                emc="emc",
                gpu_devfreq="gpu_devfreq",
            ),
        }
    if args.backend == "nvml":
        return {
            "allow_power_limit": args.allow_power_limit,
            "allow_clocks": args.allow_clocks,
            **given(args, gpu_index="gpu", sample_period_s="sample_period"),
        }
    return {}


def _nvml_modes(backend, args: argparse.Namespace) -> pd.DataFrame:
    """By default every (power limit, memory clock, SM clock, batch size, threads, workers)
    combination; a --modes file is crossed with the lists given on the command line."""
    if args.modes is not None and not args.modes.isdigit():
        from ..schema import read_csv

        more = (
            ("threads", args.threads),
            ("power_limit_w", args.power_limits),
            ("gpu_mhz", args.gpu_clocks),
            ("mem_mhz", args.mem_clocks),
        )
        return _cross(read_csv(args.modes, "--modes"), args, more)
    modes = backend.modes(
        args.batch_size or [16],
        args.threads,
        args.num_workers or [0],
        args.power_limits,
        args.gpu_clocks,
        args.mem_clocks,
    )
    if args.modes is not None:
        k = int(args.modes)
        if not 0 < k <= len(modes):
            raise DataError(f"--modes {k}: choose 1..{len(modes)} configurations")
        modes = modes.sample(k, random_state=args.seed)
    return modes


def _check_power_limit_options(args: argparse.Namespace) -> None:
    """Power limits and clocks are changed only on an explicit opt-in, and only by the
    nvml backend: refuse before a backend starts rather than ignore an option silently."""
    options = (
        ("--power-limits", args.power_limits is not None),
        ("--allow-power-limit", args.allow_power_limit),
    )
    given = [name for name, used in options if used]
    if given and args.backend != "nvml":
        raise DataError(f"{' and '.join(given)}: only --backend nvml sets a GPU power limit")
    if args.power_limits is not None and not args.allow_power_limit:
        raise DataError(
            f"--power-limits {','.join(map(str, args.power_limits))}: changing the GPU power "
            "limit needs --allow-power-limit (and root); the limit found at start is "
            "restored afterwards"
        )
    clocks = (
        ("--gpu-clocks", args.gpu_clocks is not None),
        ("--mem-clocks", args.mem_clocks is not None),
        ("--allow-clocks", args.allow_clocks),
        ("--spec-out", args.spec_out is not None),
    )
    given = [name for name, used in clocks if used]
    if given and args.backend != "nvml":
        raise DataError(f"{' and '.join(given)}: only --backend nvml locks GPU clocks")
    for name, values in (("--gpu-clocks", args.gpu_clocks), ("--mem-clocks", args.mem_clocks)):
        if values is not None and not args.allow_clocks:
            raise DataError(
                f"{name} {','.join(map(str, values))}: locking GPU clocks needs "
                "--allow-clocks (and root); clocks are unlocked afterwards"
            )


def _check_spec_out(args: argparse.Namespace) -> None:
    """--spec-out is checked before a backend starts: a folder that exists, never the
    --out or --modes file (the spec would overwrite measurements or the modes)."""
    if args.spec_out is None:
        return
    from ..utils.files import same_file

    path = Path(args.spec_out)
    if not path.parent.is_dir():
        raise DataError(f"--spec-out {path}: folder {path.parent} does not exist")
    if path.is_dir():
        raise DataError(f"--spec-out {path}: is a folder; give a file name")
    modes = args.modes if args.modes is not None and not args.modes.isdigit() else None
    for flag, other in (("--out", args.out), ("--modes", modes)):
        if other is not None and same_file(path, other):
            raise DataError(
                f"--spec-out {path}: is the {flag} file {other}; the spec would overwrite "
                "it (give another path)"
            )


def _write_spec(backend, path: str) -> None:
    """The GPU's spec as NVML reports it, for ``--device`` in later commands."""
    import json

    from ..utils.files import atomic_write, disk_reason

    try:
        atomic_write(path, json.dumps(backend.device_spec(), indent=1) + "\n")
    except OSError as e:
        raise DataError(f"--spec-out {path}: cannot write it ({disk_reason(e)})") from None


def cmd_profile(args: argparse.Namespace) -> int:
    if args.minibatches is not None and args.minibatches < 1:
        raise DataError("--minibatches must be >= 1")
    if args.sample_period is not None and not args.sample_period > 0:
        raise DataError(f"--sample-period {args.sample_period}: give a period > 0 s")
    if args.out is not None and args.modes is not None and not args.modes.isdigit():
        from ..utils.files import refuse_same

        refuse_same(args.out, args.modes)  # the store would read the modes as results
    if args.out is not None and not Path(args.out).parent.is_dir():
        raise DataError(f"--out {args.out}: folder {Path(args.out).parent} does not exist")
    _check_power_limit_options(args)
    _check_strategy_options(args)
    _check_spec_out(args)
    from ..backends import get_backend

    with get_backend(
        args.backend,
        args.device,
        args.workload,
        seed=args.seed,
        step_options=_step_options(args),
        **_backend_options(args),
    ) as backend:
        if args.spec_out is not None:
            _write_spec(backend, args.spec_out)
        if args.strategy == "active":
            return _active(backend, args)
        modes = (
            _nvml_modes(backend, args) if args.backend == "nvml" else _modes(args, backend.device)
        )
        df = _run(backend, modes, args)
    if args.out is None:
        from .tables import write_table

        write_table(df, None, args, rounded=[c for c in df.columns if c not in modes.columns])
    else:
        hours = float(df["profile_s"].sum()) / 3600 if "profile_s" in df else float("nan")
        done(f"{args.out}: {len(df)} configurations ({hours:.2f} h of profiling)")
    return 0


def _check_strategy_options(args: argparse.Namespace) -> None:
    """--power-cap, --budget, --reference and --hard-cap belong to --strategy active."""
    if args.strategy == "active":
        if args.power_cap is None:
            raise DataError("--strategy active needs --power-cap W (e.g. 30, 20,30 or 17-50)")
        if args.modes is not None and not args.modes.isdigit():
            raise DataError("--strategy active chooses its own configurations: drop --modes FILE")
        return
    named = [
        name
        for name, value in (
            ("--power-cap", args.power_cap),
            ("--budget", args.budget),
            ("--reference", args.reference),
            ("--hard-cap", args.hard_cap),
        )
        if value is not None
    ]
    if named:
        raise DataError(f"{', '.join(named)}: only --strategy active uses them")


def _reference(args: argparse.Namespace, device) -> Any:
    from ..workflow import best_reference, load_reference

    return load_reference(best_reference(device.name, args.workload, args.reference))


def _active(backend, args: argparse.Namespace) -> int:
    """Measure where the decision is, print why each configuration is measured, write the
    measurements (crash-safe with --out; rerun to resume) and the pick under each cap."""
    from ..decisions.decide import decide
    from ..schema import check_measurements, read_csv

    if backend.device is None:
        raise DataError("--strategy active needs --device (the mode space to decide over)")
    earlier = None
    if args.out is not None and Path(args.out).is_file():
        earlier = read_csv(args.out, "--out")  # an earlier run of this command: resume
        check_measurements(earlier, f"--out {args.out}")  # never a prediction taken as one
    ref = _reference(args, backend.device)

    def say(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    result = decide(
        backend,
        ref,
        args.power_cap,
        batch_size=args.batch_size,
        samples=earlier,
        seed=args.seed,
        progress=say,
        out=args.out,
        hard_cap=bool(args.hard_cap),
        **given(args, n_minibatches="minibatches", budget="budget"),
    )
    table = result.table()
    if args.out is None:
        result.measurements.to_csv(sys.stdout, index=False)
    print(
        f"{result.n_measured} configurations measured ({result.board_minutes:.1f} board "
        f"minutes), stopped: {result.stop_reason}; expected loss over the caps "
        f"{100 * result.expected_loss:.2f} %",
        file=sys.stderr,
    )
    print(table.to_string(index=False), file=sys.stderr)
    return 0
