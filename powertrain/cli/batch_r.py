"""``powertrain batch-r``: the batch-size efficiency vector r from proxy training."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import DataError
from .args import (
    IntListAction,
    command,
    default_of,
    done,
    given,
    job_count,
    nonnegative_int,
    positive_int,
    progress_flag,
    say,
)

R_VECTOR = "powertrain.data.batch_efficiency:r_vector"


def cmd_batch_r(args: argparse.Namespace) -> int:
    from ..data.batch_efficiency import r_vector
    from .tables import write_table

    out = Path(args.out)
    if not out.parent.is_dir():
        raise DataError(f"--out {out}: folder {out.parent} does not exist")
    cache = Path(args.cache)
    if cache.exists() and not cache.is_dir():
        raise DataError(f"--cache {cache}: is a file; the cache is a folder (give another path)")
    if args.n_seeds is not None and args.seeds is not None:
        raise DataError("give --seeds (a list, e.g. 0,1,2) or --n-seeds (a count), not both")
    if args.seeds is not None and len(args.seeds) == 1:
        say(
            args,
            f"note: --seeds {args.seeds[0]} is the one seed {args.seeds[0]} (as Python's "
            f"seeds=); for {args.seeds[0]} seeds use --n-seeds {args.seeds[0]}",
        )
    if args.n_seeds is not None:
        args.seeds = list(range(args.n_seeds))
    table = r_vector(
        args.batch_sizes,
        cache_dir=args.cache,
        progress=progress_flag(args),
        **given(args, seeds="seeds", target_accuracy="target", n_jobs="jobs"),
    )
    write_table(table, str(out), args)
    write_table(table, None, args)
    done(f"wrote {out}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "batch-r",
        help="samples to a target accuracy per batch size (the r vector) from proxy training",
        description="Train a small CNN on scikit-learn's digits with each batch size (sqrt "
        "learning-rate scaling) until the target validation accuracy; r_b = samples(b) / max.",
    )
    p.add_argument(
        "--batch-sizes",
        action=IntListAction,
        default=[8, 16, 32, 64, 128],
        help="batch sizes, e.g. 8,16,32 or 8 16 32 (default 8,16,32,64,128)",
    )
    seeds = ",".join(map(str, default_of(R_VECTOR, "seeds")))
    p.add_argument(
        "--seeds",
        action=IntListAction,
        item=nonnegative_int,
        default=None,
        help=f"seeds per batch size, e.g. 0,1,2 or 0 1 2, as Python's seeds= (default {seeds})",
    )
    p.add_argument(
        "--n-seeds", type=positive_int, default=None, help="seeds 0..N-1 instead of a list"
    )
    p.add_argument(
        "--target",
        type=float,
        default=None,
        help=f"validation accuracy (default {default_of(R_VECTOR, 'target_accuracy')})",
    )
    p.add_argument("--cache", default=".powertrain-cache", help="cache folder (.powertrain-cache)")
    p.add_argument(
        "--jobs",
        type=job_count,
        default=None,
        help=f"parallel trainings, joblib n_jobs (default {default_of(R_VECTOR, 'n_jobs')})",
    )
    p.add_argument("--progress", action="store_true", help="same as -v (kept for old scripts)")
    p.add_argument("-o", "--out", default="r.csv", help="output CSV (r.csv)")
    p.set_defaults(func=cmd_batch_r)
