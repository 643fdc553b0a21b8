"""``powertrain batch-r``: the batch-size efficiency vector r from proxy training."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..batch_efficiency import r_vector
from .args import IntListAction, default_of, given, job_count, positive_int


def cmd_batch_r(args: argparse.Namespace) -> int:
    from ..errors import DataError

    out = Path(args.out)
    if not out.parent.is_dir():
        raise DataError(f"--out {out}: folder {out.parent} does not exist")
    cache = Path(args.cache)
    if cache.exists() and not cache.is_dir():
        raise DataError(f"--cache {cache}: is a file; the cache is a folder (give another path)")
    seeds: dict[str, Any] = {"seeds": range(args.seeds)} if args.seeds is not None else {}
    table = r_vector(
        args.batch_sizes,
        cache_dir=args.cache,
        progress=args.progress or None,
        **seeds,
        **given(args, target_accuracy="target", n_jobs="jobs"),
    )
    table.to_csv(out, index=False)
    table.to_csv(sys.stdout, index=False, float_format="%.4g")
    print(f"wrote {out}", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
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
    p.add_argument(
        "--seeds",
        type=positive_int,
        default=None,
        help=f"seeds per batch size (default {len(default_of(r_vector, 'seeds'))})",
    )
    p.add_argument(
        "--target",
        type=float,
        default=None,
        help=f"validation accuracy (default {default_of(r_vector, 'target_accuracy')})",
    )
    p.add_argument("--cache", default=".powertrain-cache", help="cache folder (.powertrain-cache)")
    p.add_argument(
        "--jobs",
        type=job_count,
        default=None,
        help=f"parallel trainings, joblib n_jobs (default {default_of(r_vector, 'n_jobs')})",
    )
    p.add_argument("--progress", action="store_true", help="progress bar even when not a terminal")
    p.add_argument("-o", "--out", default="r.csv", help="output CSV (r.csv)")
    p.set_defaults(func=cmd_batch_r)
