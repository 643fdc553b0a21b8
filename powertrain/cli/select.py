"""``powertrain select``: the Pareto front and the fastest configuration under a power cap."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import DataError
from ..optimise import fastest_under, pareto_front
from ..schema import read_csv
from ..selection import OBJECTIVES, select
from .args import default_of, given

#: the safety-margin options, as fastest_under / select keywords
_MARGINS = {"margin_w": "margin", "k_sigma": "k_sigma"}


def cmd_select(args: argparse.Namespace) -> int:
    if args.front:
        folder = Path(args.front).parent
        if not folder.is_dir():
            raise DataError(f"--front {args.front}: folder {folder} does not exist")
    est = read_csv(args.estimates)
    if args.front:
        front = pareto_front(est)
        front.to_csv(args.front, index=False)
        print(
            f"wrote the Pareto front ({len(front)} of {len(est)} rows) to {args.front}",
            file=sys.stderr,
        )
    if args.r:
        best = select(
            est,
            args.r,
            power_cap_w=args.power_cap,
            deadline_s=args.deadline,
            **given(args, objective="objective", **_MARGINS),
        )
        best.to_frame().T.to_csv(sys.stdout, index=False)
        return 0
    if args.objective not in (None, "time") or args.deadline is not None:
        raise DataError("--objective energy and --deadline need --r (the batch-size r vector)")
    best = fastest_under(est, power_cap_w=args.power_cap, **given(args, **_MARGINS))
    best.to_frame().T.astype(est.dtypes.to_dict()).to_csv(sys.stdout, index=False)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "select",
        help="fastest configuration under a power cap (and the Pareto front) from estimates",
    )
    p.add_argument(
        "estimates",
        help="CSV with power_w and time_ms (per minibatch) or epoch_s (per epoch), e.g. from "
        "`predict`",
    )
    p.add_argument("--power-cap", type=float, required=True, help="watts")
    p.add_argument(
        "--margin",
        type=float,
        default=None,
        help=f"watts kept below the cap (default {default_of(fastest_under, 'margin_w')})",
    )
    p.add_argument(
        "--k-sigma",
        type=float,
        default=None,
        help="also keep k x power_w_std below the cap "
        f"(default {default_of(fastest_under, 'k_sigma')})",
    )
    p.add_argument("--front", help="also write the time-power Pareto front to this CSV")
    p.add_argument(
        "--r",
        help="r vector CSV (batch_size, r or samples; from `powertrain batch-r`): choose batch "
        "size and mode jointly by time to accuracy",
    )
    p.add_argument(
        "--objective",
        choices=OBJECTIVES,
        default=None,
        help=f"with --r: minimise (default {default_of(select, 'objective')})",
    )
    p.add_argument(
        "--deadline", type=float, help="with --r samples: only rows reaching the target in S s"
    )
    p.set_defaults(func=cmd_select)
