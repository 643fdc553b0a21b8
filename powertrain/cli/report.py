"""``powertrain report SPEC -o OUT``: a fleet's Pareto report from a TOML spec.

Why: the batch use of the package (design card) without writing Python: every device x
workload x batch size x objective in SPEC gets a page, and the index says which
configuration each should run under each power cap.
"""

from __future__ import annotations

import argparse
import signal
import sys

from .args import command, done, say


def cmd_report(args: argparse.Namespace) -> int:
    import matplotlib

    matplotlib.use("Agg")  # the CLI, not the library, picks the backend

    from ..report import report

    def interrupted(signum, frame):  # a `kill` stops the workers too, as Ctrl-C does
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupted)

    def log(message: str) -> None:
        say(args, message)

    try:
        result = report(
            args.spec,
            args.out,
            overwrite=args.overwrite,
            scheduler=args.scheduler,
            n_jobs=args.jobs,
            log=log,
            max_cases=args.max_cases,
        )
    finally:  # the caller's handler again (main() may be called from a program)
        signal.signal(signal.SIGTERM, previous)
    n_cases = len(result.computed) + len(result.reused)
    names = sorted({p.name for p in result.files if p.parent.parent.name == "cases"})
    per_case = ", ".join(names) if names else "(all reused)"
    done(
        f"wrote {result.index}, {result.out / 'report.json'} and {len(result.computed)} case "
        f"folder(s) {result.out}/cases/CASE/ each with {per_case} "
        f"({len(result.files)} files; {len(result.reused)} of {n_cases} cases reused)"
    )
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "report",
        help="batch Pareto report for devices x workloads x batch sizes x caps (TOML spec)",
        description="Run every case of a TOML spec (see examples/fleet.toml) and write an "
        "HTML report folder: index.html with the pick per power cap, a page per case.",
    )
    p.add_argument("spec", help="the fleet spec (TOML), e.g. examples/fleet.toml")
    p.add_argument("-o", "--out", required=True, help="report folder to write")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing report folder (default: refuse; an unfinished report of "
        "the same spec is resumed)",
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run the cases on this Dask cluster, e.g. tcp://host:8786 (default: joblib here)",
    )
    p.add_argument(
        "-j", "--jobs", type=int, default=None, help="local parallel jobs (default: every core)"
    )
    p.add_argument(
        "--max-cases",
        type=int,
        default=None,
        metavar="N",
        help="run a spec of more than 500 cases (it is refused with a time estimate otherwise)",
    )
    p.set_defaults(func=cmd_report)


if __name__ == "__main__":  # pragma: no cover
    from . import main

    sys.exit(main(["report", *sys.argv[1:]]))
