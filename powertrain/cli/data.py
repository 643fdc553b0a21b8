"""``powertrain devices``, ``modes`` and ``simulate``: the catalog and the twin from the shell."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import SpecError
from .args import command, default_of, done, given, nonnegative_int, positive_int, progress_flag

PROFILE = "powertrain.profiling.sweep:profile"


def _write(df, out: str | None, args: argparse.Namespace, rounded=()) -> None:
    """Modes are written exactly (a clock is a value the device has); ``rounded``
    columns (measurements) print to a few digits on the terminal."""
    from .tables import write_table

    if out not in (None, "-"):
        _write_folder_exists(out)
    write_table(df, out, args, rounded=rounded)
    if out not in (None, "-"):
        done(f"wrote {len(df)} rows to {out}")


def _write_folder_exists(out: str) -> Path:
    path = Path(out)
    if path.parent and not path.parent.exists():
        raise SpecError(f"--out {out}: folder {path.parent} does not exist")
    return path


def _chain(first, rest):
    yield first
    yield from rest


def _knob_summary(name: str, values: tuple[float, ...]) -> str:
    """``cores 1-12``, ``cpu 29`` (a frequency table's size), ``power_limit_w 7 (100-250)``."""
    if name == "cores":
        return f"cores {min(values):g}-{max(values):<3g}"
    if name.endswith("_mhz"):
        return f"{name.removesuffix('_mhz')} {len(values):>2}"
    return f"{name} {len(values)} ({min(values):g}-{max(values):g})"


def cmd_devices(args: argparse.Namespace) -> int:
    from ..devices.device import get_device
    from ..devices.specs import device_names

    rows = []
    for name in device_names():
        d = get_device(name)
        knobs = " ".join(_knob_summary(k, v) for k, v in d.spec.knob_tables().items())
        presets = ", ".join(p["name"] for p in d.spec.presets) or "none"
        rows.append(f"{name:<20} {d.n_modes:>7,}  {knobs}  presets: {presets}")
    from ..devices.presets import CLOCK_CAPS_NOTE

    print(f"{'device':<20} {'modes':>7}  knobs (values each)")
    print("\n".join(rows))
    print(f"({CLOCK_CAPS_NOTE})")
    return 0


def cmd_modes(args: argparse.Namespace) -> int:
    from ..devices.device import get_device

    dev = get_device(args.device)
    if args.which == "all" and not args.sweep_order:  # any size: a chunk at a time
        from ..predictor.streaming import check_rows, write_csv_chunks
        from .tables import integer_columns, print_table

        it = dev.iter_power_modes()
        first = next(it)
        check_rows(dev.n_modes, first, args.max_rows, f"every mode of {dev.name}")
        chunks = (integer_columns(df) for df in _chain(first, it))
        if args.out in (None, "-"):
            for i, df in enumerate(chunks):  # exact values, counts as integers
                print_table(df, sys.stdout, rounded=(), header=i == 0)
            return 0
        _write_folder_exists(args.out)
        n = write_csv_chunks(chunks, args.out)
        done(f"wrote {n} rows to {args.out}")
        return 0
    if args.which == "all":
        df = dev.power_modes()
    elif args.which == "grid":
        df = dev.profiling_grid()
    elif args.which == "presets":
        from ..devices.presets import CLOCK_CAPS_NOTE

        df = dev.presets()
        print(f"note: {CLOCK_CAPS_NOTE}", file=sys.stderr)
    else:  # sample
        df = dev.sample(args.n, seed=args.seed, stratified=args.stratified)
    if args.sweep_order and args.which != "presets":
        df = dev.sweep_order(df)
    _write(df, args.out, args)
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    from ..devices.device import get_device
    from ..profiling.sweep import profile
    from ..twin import Twin

    twin = Twin(args.device, args.workload, seed=args.seed)
    dev = get_device(args.device)
    modes = dev.sample(args.n, seed=args.seed, stratified=args.stratified)
    to_stdout = args.out in (None, "-")
    df = profile(
        twin,
        modes,
        batch_size=args.batch_size,
        out=None if to_stdout else args.out,
        progress=progress_flag(args),
        header={"seed": args.seed},  # batch size is a configuration column: may be extended
        **given(args, n_minibatches="minibatches"),
    )
    if to_stdout:
        _write(df, None, args, rounded=[c for c in df.columns if c not in modes.columns])
    else:
        hours = df["profile_s"].sum() / 3600
        done(f"wrote {len(df)} modes to {args.out} ({hours:.2f} h of simulated board time)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "devices",
        help="list catalog devices and their power-mode counts",
        description="List the catalog's devices: id, how many power modes each has, its "
        "knobs and its presets. A device spec file (--device-spec) adds its own.",
    )
    p.set_defaults(func=cmd_devices)

    p = command(
        sub,
        "modes",
        help="write a device's power modes (all, grid, presets or a sample) as CSV",
        description="Write a device's power modes as CSV, one row per mode (its knob "
        "columns): every mode, the paper's profiling grid, the nvpmodel presets, or a seeded "
        "random sample. The input of `predict` and of `profile`.",
    )
    p.add_argument(
        "device", help="catalog id (see `powertrain devices`) or a device spec JSON file"
    )
    p.add_argument(
        "--which",
        choices=["all", "grid", "presets", "sample"],
        default="all",
        help="every mode, the profiling grid, the nvpmodel presets or a random sample (all)",
    )
    p.add_argument("-n", type=positive_int, default=50, help="sample size for --which sample")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the random sample (0)")
    p.add_argument(
        "--stratified", action="store_true", help="spread the sample over GPU x memory cells"
    )
    p.add_argument(
        "--sweep-order", action="store_true", help="order rows for a downward-stepping sweep"
    )
    p.add_argument("-o", "--out", help="output CSV (default: stdout)")
    p.add_argument(
        "--max-rows",
        type=positive_int,
        default=None,
        help="refuse --which all beyond this many modes (default 100,000,000: ~4 GB)",
    )
    p.set_defaults(func=cmd_modes)

    p = command(
        sub,
        "simulate",
        help="profile N random modes of a workload on the digital twin",
        description="Profile N random power modes of a workload on the digital twin (a "
        "simulated board, no hardware) and write the samples CSV that `transfer` reads. "
        "Resumable: rerun with the same output to continue.",
    )
    p.add_argument("device", help="catalog id or device spec JSON file")
    p.add_argument("workload", help="catalog workload name or workload spec JSON file")
    p.add_argument("-n", type=positive_int, default=50, help="number of random modes to profile")
    p.add_argument("--batch-size", type=positive_int, default=16, help="batch size (16)")
    p.add_argument(
        "--minibatches",
        type=positive_int,
        default=None,
        help=f"clean minibatches per mode (default {default_of(PROFILE, 'n_minibatches')})",
    )
    p.add_argument(
        "--seed", type=nonnegative_int, default=0, help="seeds the twin and the mode draw"
    )
    p.add_argument(
        "--stratified", action="store_true", help="spread the sample over GPU x memory cells"
    )
    p.add_argument("-o", "--out", help="output CSV; rerunning with the same file resumes")
    p.add_argument("--progress", action="store_true", help="same as -v (kept for old scripts)")
    p.set_defaults(func=cmd_simulate)
