"""``powertrain workloads``: the catalog's workloads, so a newcomer knows what to name.

Why: every command takes a workload name; listing them (with their default batch size
and dataset) saves guessing from JSON file names.
"""

from __future__ import annotations

import argparse

from .args import command


def cmd_workloads(args: argparse.Namespace) -> int:
    from ..devices.specs import workload_names
    from ..devices.workloads import get_workload

    print(f"{'workload':<18} {'batch':>5} {'dataset':>8}  description")
    for name in workload_names():
        w = get_workload(name)
        n = f"{w.dataset_samples:,}" if w.dataset_samples else "-"
        print(f"{name:<18} {w.default_batch_size:>5} {n:>8}  {w.description}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "workloads",
        help="list catalog workloads (name, batch size, dataset)",
        description="List the catalog's workloads: name, default batch size and dataset, "
        "the names `simulate`, `profile` and `demo` accept.",
    )
    p.set_defaults(func=cmd_workloads)
