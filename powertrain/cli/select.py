"""``powertrain select``: the Pareto front and the fastest configuration under a power cap.

Why: this is the cheap end of the flow (a CSV in, one row out), so it imports pandas and
numpy only, never torch or scikit-learn.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import DataError
from ..utils.files import refuse_same
from .args import command, default_of, done, given

#: selection.OBJECTIVES, spelled out so that building the parser imports nothing heavy
OBJECTIVES = ("time", "energy")
#: where the library defaults shown in the help live (read without importing them)
FASTEST_UNDER = "powertrain.decisions.optimise:fastest_under"
SELECT = "powertrain.decisions.selection:select"
#: the safety-margin options, as fastest_under / select keywords
_MARGINS = {"margin_w": "margin", "k_sigma": "k_sigma"}
#: configuration columns of other backends (NVML): numbers wherever they appear
_OTHER_KNOBS = ("power_limit_w", "threads", "num_workers")


def time_column(columns, name: str | None, power: str, source: str) -> str:
    """The time target to minimise: ``name``, else the table's ``time_ms`` or ``epoch_s``
    (optimise.TIME_COLUMNS), else the one predicted column besides ``power`` (a column
    with a ``_std`` partner, as a model's own target has)."""
    from ..decisions.optimise import TIME_COLUMNS
    from ..schema import shown_columns

    columns = list(columns)
    if name is not None:
        if name not in columns:
            have = shown_columns(columns)
            raise DataError(f"{source}: --time {name}: no such column (has {have})")
        return name
    for known in TIME_COLUMNS:
        if known in columns:
            return known
    predicted = [c for c in columns if f"{c}_std" in columns and c != power]
    if len(predicted) == 1:
        return predicted[0]
    raise DataError(
        f"{source}: no time_ms or epoch_s column and no single other predicted column; name "
        "the time "
        f"target with --time (columns: {shown_columns(columns)})"
    )


def _check_table(est, time: str, power: str, source: str) -> None:
    """Every row's configuration, time and power before anything is picked, errors naming
    the file, row and column: the knobs numbers (the device's own settings where the
    table names its device), time and power finite and positive."""
    from ..devices.device import get_device
    from ..errors import PowerTrainError
    from ..schema import CONFIG_COLUMNS, check_columns, measured_rows

    names = est["device"].dropna().astype(str).unique() if "device" in est.columns else []
    try:  # a device of the catalog or a registered spec; an NVML GPU's name is neither
        dev = get_device(names[0]) if len(names) == 1 else None
    except PowerTrainError:
        dev = None
    if dev is not None:
        dev.validate(est, source=source, batch_size="batch_size" in est.columns)
    knobs = [c for c in (*CONFIG_COLUMNS, *_OTHER_KNOBS) if c in est.columns]
    check_columns(est, [*knobs, time, power], source, positive=[time, power])
    measured_rows(est, source)  # a 'measured' flag that is not True/False


def cmd_select(args: argparse.Namespace) -> int:
    from ..decisions.optimise import pareto_front, pick_under
    from ..schema import read_csv
    from .tables import write_table

    if args.front:
        refuse_same(args.front, args.estimates, flag="--front")
        folder = Path(args.front).parent
        if not folder.is_dir():
            raise DataError(f"--front {args.front}: folder {folder} does not exist")
    est = read_csv(args.estimates)
    if args.plain:
        if args.k_sigma is not None or args.margin is not None:
            raise DataError(
                "--plain is the pick without a margin: leave out --k-sigma and --margin"
            )
        args.k_sigma, args.margin = 0.0, 0.0
    time = time_column(est.columns, args.time, args.power, args.estimates)
    _check_table(est, time, args.power, args.estimates)
    if args.front:
        front = pareto_front(est, time=time, power=args.power)
        write_table(front, args.front, args)
        done(f"wrote the Pareto front ({len(front)} of {len(est)} rows) to {args.front}")
    if args.r:
        from ..decisions.selection import select

        if args.time is not None or args.power != "power_w":
            raise DataError(
                "--r: time to accuracy uses the table's own time_ms or epoch_s and power_w "
                "columns; leave out --time and --power"
            )
        best = select(
            est,
            args.r,
            power_cap_w=args.power_cap,
            deadline_s=args.deadline,
            source=args.estimates,
            **given(args, objective="objective", **_MARGINS),
        )
    else:
        if args.objective not in (None, "time") or args.deadline is not None:
            raise DataError("--objective energy and --deadline need --r (the batch-size r vector)")
        best = pick_under(
            est, args.power_cap, margin_w=args.margin or 0.0, k_sigma=args.k_sigma, time=time,
            power=args.power, source=args.estimates,
        )  # fmt: skip
    done(f"pick under {args.power_cap:g} W: {best.attrs.get('how', 'predicted')}")
    # the configuration exactly as the device has it; predictions to a few digits
    predicted = [time, args.power, "tt_acc", "energy_acc"]
    predicted += [c for c in est.columns if c.endswith("_std") or f"{c}_std" in est.columns]
    write_table(best.to_frame().T, None, args, dtypes=est.dtypes.to_dict(), rounded=predicted)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "select",
        help="fastest configuration under a power cap (and the Pareto front) from estimates",
        description="Read an estimates CSV (from `powertrain predict`, or measured) and print "
        "the fastest configuration whose power fits the cap. The time target is time_ms, or "
        "the model's own (e.g. epoch_s for the real GPU traces), or the column --time names. "
        "Measured rows (a profiling output) count at their measured power; predicted ones "
        "keep a margin of their uncertainty below the cap.",
    )
    p.add_argument(
        "estimates",
        help="CSV with power_w and time_ms (per minibatch) or epoch_s (per epoch), e.g. from "
        "`predict`; another time column with --time",
    )
    p.add_argument("--power-cap", type=float, required=True, help="power cap in watts")
    p.add_argument(
        "--time",
        metavar="COLUMN",
        help="time column to minimise (default: time_ms, else the one predicted target "
        "besides power, e.g. epoch_s)",
    )
    p.add_argument(
        "--power", metavar="COLUMN", default="power_w", help="power column (default: power_w)"
    )
    p.add_argument(
        "--margin",
        type=float,
        default=None,
        help=f"watts kept below the cap (default {default_of(FASTEST_UNDER, 'margin_w')})",
    )
    p.add_argument(
        "--k-sigma",
        type=float,
        default=None,
        help="also keep k x power_w_std below the cap on predicted rows (default: 3 where "
        "they have power_w_std); measured rows (a profiling output: n_minibatches and "
        "n_power_samples) are judged by their measured power, as decide judges them",
    )
    p.add_argument(
        "--plain",
        action="store_true",
        help="the paper's plain pick: predicted power alone against the cap, no margin",
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
        help=f"with --r: minimise (default {default_of(SELECT, 'objective')})",
    )
    p.add_argument(
        "--deadline", type=float, help="with --r samples: only rows reaching the target in S s"
    )
    p.add_argument(
        "--full-precision",
        action="store_true",
        help="print every digit (default: 6 significant digits; integer columns as integers)",
    )
    p.set_defaults(func=cmd_select)
