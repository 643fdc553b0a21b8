"""The ``powertrain`` command. Each sub-module registers one group of sub-commands.

Why: one module per idea — data (devices, modes, simulate), model (fit, transfer,
predict), profile (real hardware), demo — so a newcomer finds a command by file name.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback

from .._version import __version__
from ..devices.specs import register_device
from ..errors import PowerTrainError
from .args import Parser

#: sub-modules of powertrain.cli that define ``register(subparsers)``, in help order
COMMAND_MODULES = (
    "data",
    "model",
    "select",
    "batch_r",
    "profile",
    "follow",
    "apply",
    "demo",
    "report",
    "workloads",
    "examples",
)


#: the one line a command that needs torch prints where it is missing (no traceback)
NO_TORCH = (
    "PyTorch is not installed. On a CPU: pip install torch --index-url "
    "https://download.pytorch.org/whl/cpu; on a Jetson: NVIDIA's wheel for your JetPack"
)

DEVICE_SPEC_HELP = (
    "a device spec JSON file (repeatable): its device id then resolves wherever a catalog id "
    "does (samples' device column, --device, models)"
)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="powertrain",
        description="Predict DNN training time and power in every power mode of a Jetson from a "
        "few profiled ones, and pick the fastest configuration under a power cap.",
    )
    parser.add_argument("--version", action="version", version=f"powertrain {__version__}")
    parser.add_argument(
        "--device-spec",
        action="append",
        default=[],
        metavar="FILE",
        dest="device_specs_global",
        help=DEVICE_SPEC_HELP,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"{__name__}.{name}":
                continue  # command group not written yet
            raise
        module.register(sub)
    for command in sub.choices.values():  # also accepted after the sub-command
        command.add_argument(
            "--device-spec", action="append", default=[], metavar="FILE", help=DEVICE_SPEC_HELP
        )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        for spec in [*args.device_specs_global, *getattr(args, "device_spec", [])]:
            register_device(spec)
        return int(args.func(args) or 0)
    except PowerTrainError as e:
        if getattr(args, "verbose", False):
            traceback.print_exc()
        print(f"powertrain {args.command}: error: {e}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] != "torch":
            raise
        if getattr(args, "verbose", False):
            traceback.print_exc()
        print(f"powertrain {args.command}: error: {NO_TORCH}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # e.g. `powertrain modes orin-agx | head`: the reader is done
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(f"powertrain {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
