"""``powertrain apply``: the pick on the board, now or as an nvpmodel custom mode.

Why: a chosen configuration is only useful on the board. Set now, it is restored when
the command ends (or a command run under it ends) unless ``--keep``; written as an
nvpmodel ``POWER_MODEL`` block, it survives reboots, and goes into
``/etc/nvpmodel.conf`` only with ``--install`` (after a backup).
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from .args import command, nonnegative_int, positive_int


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "apply",
        help="set a configuration on this Jetson, or write it as an nvpmodel custom mode",
        description="Set a configuration (a pick) on the Jetson through sysfs, restored when "
        "the command (or the COMMAND run under it) ends unless --keep; or write it as an "
        "nvpmodel POWER_MODEL block (--nvpmodel), checked against the device's tables; "
        "--install adds that block to /etc/nvpmodel.conf after a backup. --preset prints the "
        "nvpmodel ID of a preset, found by name on this board's image.",
    )
    p.add_argument(
        "--device",
        default="auto",
        help="catalog id or spec file (default: "
        "recognise the board from its device tree and nvpmodel file)",
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--config", help="cores=6,cpu_mhz=1344,gpu_mhz=918,mem_mhz=3199")
    what.add_argument(
        "--from",
        dest="picks",
        metavar="CSV",
        help="a CSV of picks (pt.select / powertrain select output)",
    )
    what.add_argument("--preset", help="a preset by name (25W, MAXN_SUPER): print its ID")
    p.add_argument(
        "--row",
        type=positive_int,
        default=None,
        help="which row of --from (1-based; needed when it has several)",
    )
    p.add_argument(
        "--keep", action="store_true", help="leave the configuration on when the command ends"
    )
    p.add_argument(
        "--nvpmodel",
        metavar="FILE",
        help="write the POWER_MODEL block to FILE ('-': stdout) instead of setting it",
    )
    p.add_argument(
        "--install",
        action="store_true",
        help="add the block to --conf (after a backup); needs root",
    )
    p.add_argument("--conf", default="/etc/nvpmodel.conf", help="(default: /etc/nvpmodel.conf)")
    p.add_argument(
        "--mode-id",
        type=nonnegative_int,
        default=None,
        help="the block's ID (default: one above the conf's highest)",
    )
    p.add_argument("--mode-name", default="POWERTRAIN", help="the block's NAME")
    p.add_argument("--root", default="/", help=argparse.SUPPRESS)  # tests: a fake tree
    p.add_argument(
        "run",
        nargs=argparse.REMAINDER,
        help="-- COMMAND ...: run it under the configuration, then restore",
    )
    p.set_defaults(func=cmd_apply)


def _config_arg(text: str) -> dict:
    from ..errors import DataError

    out = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        try:
            out[key.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise DataError(f"--config: {part!r} is not KNOB=NUMBER")
    return out


def _pick(args: argparse.Namespace) -> dict:
    if args.config:
        return _config_arg(args.config)
    from ..errors import DataError
    from ..schema import read_csv

    df = read_csv(args.picks, "picks")
    if args.row is None and len(df) != 1:
        raise DataError(f"{args.picks} has {len(df)} rows: say which with --row")
    i = (args.row or 1) - 1
    if not 0 <= i < len(df):
        raise DataError(f"--row {args.row}: {args.picks} has {len(df)} rows")
    return df.iloc[i].to_dict()


def cmd_apply(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..backends.jetson import nvpmodel
    from ..backends.jetson.board_id import recognise

    if args.preset:
        rec = recognise(args.root, None if args.device == "auto" else args.device)
        print(f"sudo nvpmodel -m {rec.preset_id(args.preset)}  # {args.preset} on {rec.spec.name}")
        print("(a preset's name is a clock cap, not a power budget)", file=sys.stderr)
        return 0
    config = _pick(args)
    if args.nvpmodel or args.install:
        from ..devices.device import get_device

        on_board = args.device == "auto" or args.install  # the board's own tables decide
        device = (
            recognise(args.root, None if args.device == "auto" else args.device).device
            if on_board
            else get_device(args.device)
        )
        conf = Path(args.root) / args.conf.lstrip("/") if args.root != "/" else Path(args.conf)
        mode_id = args.mode_id
        if mode_id is None:
            have = nvpmodel.conf_modes(conf.read_text()) if conf.exists() else {}
            presets = device.spec.presets
            ids = [*have.values(), *(p.get("nvpmodel_id", -1) for p in presets)]
            mode_id = max(ids, default=-1) + 1
        block = nvpmodel.write_block(device, config, mode_id, args.mode_name)
        if args.nvpmodel == "-" or (not args.nvpmodel and not args.install):
            sys.stdout.write(block)
        elif args.nvpmodel:
            Path(args.nvpmodel).write_text(block)
            print(f"wrote {args.nvpmodel}", file=sys.stderr)
        if args.install:
            backup = nvpmodel.install_block(conf, block)
            print(
                f"added mode {mode_id} to {conf} (backup: {backup}); select it with "
                f"`sudo nvpmodel -m {mode_id}`",
                file=sys.stderr,
            )
        return 0
    from ..backends.jetson.apply import apply

    run = [a for a in args.run if a != "--"] if args.run else []
    with apply(args.device, config, keep=args.keep, root=args.root) as applied:
        print(f"{applied.recognition.spec.name}: set {applied.state}", file=sys.stderr)
        if args.keep:
            return 0
        if run:
            return subprocess.call(run)
        print("holding this configuration; Ctrl-C restores the previous one", file=sys.stderr)
        import threading

        threading.Event().wait()
    return 0  # pragma: no cover - the wait above ends by a signal
