"""``powertrain follow``: train under a power cap that changes, switching configuration
between minibatches.

Why: a battery or a shared supply moves the cap during a run; one decision over the
schedule's caps, measured on the board, answers every change at once.
"""

from __future__ import annotations

import argparse
import sys

from .args import command, nonnegative_int, positive_int


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "follow",
        help="train under a changing power cap (a schedule file), switching configuration "
        "between minibatches",
        description="Decide once over the schedule's caps with the board in the loop "
        "(pt.decide), then run the training job, applying the configuration for each new cap "
        "between two minibatches (pt.follow). Prints one line per stretch.",
    )
    p.add_argument("--schedule", required=True, help="CSV with columns t_s, power_cap_w")
    p.add_argument("--device", required=True, help="catalog id or spec file")
    p.add_argument("--workload", required=True, help="catalog workload (twin) or training step")
    p.add_argument(
        "--backend", choices=("twin", "jetson", "nvml"), default="twin", help="(default: twin)"
    )
    p.add_argument(
        "--minibatches", type=positive_int, required=True, help="training length in minibatches"
    )
    p.add_argument(
        "--budget", type=positive_int, default=50, help="configurations to measure (default 50)"
    )
    p.add_argument("--reference", default=None, help="model to transfer (default: shipped)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="random seed (default 0)")
    p.set_defaults(func=cmd_follow)


def cmd_follow(args: argparse.Namespace) -> int:
    from ..backends import get_backend
    from ..decisions.cap_following import CapController, CapSchedule, follow
    from ..decisions.decide import decide
    from ..workflow import best_reference, load_reference

    schedule = CapSchedule.from_csv(args.schedule)
    say = (lambda line: None) if args.quiet else (lambda line: print(line, file=sys.stderr))
    with get_backend(args.backend, args.device, args.workload, seed=args.seed) as board:
        device = board.device.name if board.device is not None else board.device_name
        ref = load_reference(best_reference(device, args.workload, args.reference))
        result = decide(
            board, ref, schedule.caps(), budget=args.budget, seed=args.seed, progress=say
        )
        ctl = CapController.from_decision(result)
        run = follow(
            board,
            ctl,
            schedule,
            minibatches=args.minibatches,
            on_switch=lambda t, cap, cfg: say(f"{t:8.0f} s: cap {cap:g} W -> {cfg}"),
        )
    run.segments.to_csv(sys.stdout, index=False)
    print(
        f"{run.minibatches} minibatches in {run.total_s / 3600:.2f} h of training after "
        f"{result.board_s / 3600:.2f} h of profiling ({result.n_measured} configurations)",
        file=sys.stderr,
    )
    return 0
