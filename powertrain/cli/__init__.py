"""The ``powertrain`` command. Each sub-module registers one group of sub-commands.

Why: one module per idea — data (devices, modes, simulate), model (fit, transfer,
predict), profile (real hardware), demo — so a newcomer finds a command by file name.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ..errors import PowerTrainError

#: sub-modules of powertrain.cli that define ``register(subparsers)``, in help order
COMMAND_MODULES = ("data", "model", "select", "batch_r", "profile", "demo", "report", "workloads")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="powertrain",
        description="Predict DNN training time and power in every power mode of a Jetson from a "
        "few profiled ones, and pick the fastest configuration under a power cap.",
    )
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"powertrain {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"{__name__}.{name}":
                continue  # command group not written yet
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except PowerTrainError as e:
        print(f"powertrain {args.command}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"powertrain {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
