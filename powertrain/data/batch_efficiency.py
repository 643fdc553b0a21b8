"""The batch-size efficiency vector r: how many samples each batch size needs to reach a
target accuracy, relative to the least efficient one ("Accelerated training on low-power
edge devices", eq. 3).

Why: time per sample falls with the batch size, but large batches often need more
samples to reach the same accuracy. r is a property of the model and data, not of the
device, so it is estimated once on a proxy data set (here scikit-learn's digits with a
small CNN, which needs no download and runs on a CPU in about a minute) and joined with
the predicted time per minibatch in :func:`powertrain.select`.

Honest counting: every batch size sees the same shuffled stream of samples; accuracy is
evaluated every ``eval_every`` samples on a fixed validation split (evaluation time is not
training time and is not counted); the count is the samples consumed when the target is
first reached. Learning rates follow the square-root rule lr_b = lr_ref * sqrt(b / b_ref).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import warnings
from pathlib import Path
from typing import Callable, Mapping, Sequence, Union

import numpy as np
import pandas as pd

from .._version import __version__
from ..errors import DataError, PowerTrainError
from ..utils.files import atomic_write

#: a training function: (batch_size, seed, target_accuracy) -> samples to target
TrainFn = Callable[[int, int, float], int]


class TargetNotReachedError(PowerTrainError):
    """The proxy training never reached the target accuracy within its sample budget."""


def sqrt_lr(batch_size: int, lr_ref: float, batch_ref: int) -> float:
    """Square-root learning-rate scaling: lr_b = lr_ref * sqrt(b / b_ref)."""
    return float(lr_ref) * math.sqrt(batch_size / batch_ref)


def check_batch_sizes(batch_sizes: Sequence[object], what: str = "batch sizes") -> list[int]:
    """Positive integers, no duplicates, in the order given; else an error naming the value."""
    out = []
    for b in batch_sizes:
        if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or b < 1:
            if isinstance(b, float) and b.is_integer() and b >= 1:
                b = int(b)
            else:
                raise DataError(f"{what} must be positive integers, got {b!r}")
        out.append(int(b))
    if not out:
        raise DataError(f"{what}: give at least one")
    if len(set(out)) != len(out):
        raise DataError(f"{what}: duplicated value in {out}")
    return out


def normalise(samples: Mapping[int, float]) -> dict[int, float]:
    """eq. 3: r_b = N(b) / max_b N(b), so the least efficient batch size has r = 1."""
    top = max(samples.values())
    if not top > 0:
        raise DataError("samples to target must be positive")
    return {int(b): float(n) / top for b, n in samples.items()}


# ----------------------------------------------------------------- proxy training --
def digits_samples_to_target(
    batch_size: int,
    seed: int,
    target_accuracy: float,
    lr_ref: float = 0.05,
    batch_ref: int = 32,
    max_samples: int = 200_000,
    eval_every: int = 256,
) -> int:
    """Samples a small CNN needs on scikit-learn's digits to reach ``target_accuracy``
    on a fixed 25 % validation split, trained with SGD (momentum 0.9) at the sqrt-scaled
    learning rate. Raises :class:`TargetNotReachedError` with the best accuracy seen."""
    import torch
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    torch.set_num_threads(1)
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    xtr, xva, ytr, yva = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)
    xtr_t, ytr_t = torch.from_numpy(xtr), torch.from_numpy(ytr)
    xva_t, yva_t = torch.from_numpy(xva), torch.from_numpy(yva)
    gen = torch.Generator().manual_seed(int(seed))
    torch.manual_seed(int(seed))
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(32 * 4 * 4, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 10),
    )
    lr = sqrt_lr(batch_size, lr_ref, batch_ref)
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    seen, next_eval, best = 0, eval_every, 0.0
    while seen < max_samples:
        order = torch.randperm(len(xtr_t), generator=gen)
        for i in range(0, len(order) - batch_size + 1, batch_size):
            idx = order[i : i + batch_size]
            net.train()
            opt.zero_grad()
            loss = loss_fn(net(xtr_t[idx]), ytr_t[idx])
            if not torch.isfinite(loss):
                raise TargetNotReachedError(
                    f"batch {batch_size}: the loss diverged at lr {lr:.3g} after {seen} samples"
                )
            loss.backward()
            opt.step()
            seen += batch_size
            if seen >= next_eval:
                next_eval += eval_every
                net.eval()
                with torch.no_grad():
                    acc = float((net(xva_t).argmax(1) == yva_t).float().mean())
                best = max(best, acc)
                if acc >= target_accuracy:
                    return seen
            if seen >= max_samples:
                break
    raise TargetNotReachedError(
        f"batch {batch_size}, seed {seed}: the target accuracy {target_accuracy:.3f} was not "
        f"reached in {max_samples:,} samples (best {best:.3f}); lower the target"
    )


# ------------------------------------------------------------------------ r vector --
def _cache_key(meta: dict) -> str:
    return hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest()[:16]


def _check_runs(table: pd.DataFrame, meta: dict) -> None:
    """A cache holds one positive whole count per batch size x seed it was made for: an
    edited one (a negative count, a run missing) is not trusted."""
    samples = pd.to_numeric(table["samples"], errors="coerce").to_numpy(dtype=float)
    bad = ~(np.isfinite(samples) & (samples > 0) & (samples == np.round(samples)))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"run {i + 1}: samples = {table['samples'].iloc[i]!r} is not a count > 0")
    want = {(int(b), int(s)) for b in meta["batch_sizes"] for s in meta["seeds"]}
    try:
        have = [(int(b), int(s)) for b, s in zip(table["batch_size"], table["seed"])]
    except (TypeError, ValueError):
        raise ValueError("batch_size and seed must be integers") from None
    if set(have) != want or len(have) != len(want):
        raise ValueError("its runs are not one per batch size x seed of these settings")


def _read_cache(path: Path, meta: dict) -> pd.DataFrame | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        if data.get("meta") != meta:
            raise ValueError("made for other settings or another version")
        table = pd.DataFrame(data["runs"])
        if not {"batch_size", "seed", "samples"} <= set(table.columns):
            raise ValueError("missing columns")
        _check_runs(table, meta)
        return table
    except (ValueError, KeyError, TypeError) as e:
        warnings.warn(f"{path}: cache unusable ({e}); recomputing", stacklevel=3)
        return None


def r_vector(
    batch_sizes: Sequence[int],
    seeds: Sequence[int] = (0, 1, 2),
    target_accuracy: float = 0.95,
    train_fn: TrainFn | None = None,
    cache_dir: str | os.PathLike | None = None,
    n_jobs: int = 1,
    progress: bool | None = None,
    name: str = "digits-cnn",
) -> pd.DataFrame:
    """Samples to target per batch size (median over ``seeds``) and r (eq. 3): how
    much more data a batch size needs to reach the same accuracy, by proxy training.

    Parameters
    ----------
    batch_sizes : sequence of int
        The batch sizes to compare.
    seeds : sequence of int
        One proxy training per seed and batch size; the median counts.
    target_accuracy : float
        The accuracy each training runs to.
    train_fn : callable, optional
        ``train_fn(batch_size, seed, target) -> samples`` in place of the built-in
        digits CNN (give ``name`` to key its cache).
    cache_dir : str or PathLike, optional
        Results stored as JSON keyed by every setting and the package version; a cache
        that is corrupt or from other settings is recomputed, with a warning.
    n_jobs : int
        Batch sizes x seeds run in parallel (joblib).
    progress : bool, optional
        A progress bar (default: on a terminal or in a notebook).
    name : str
        The proxy's name in the cache key.

    Returns
    -------
    DataFrame
        Columns batch_size, samples (median), samples_min, samples_max, r.
    """
    from joblib import Parallel, delayed

    sizes = check_batch_sizes(batch_sizes)
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise DataError("seeds: give at least one")
    if not 0 < float(target_accuracy) <= 1:
        raise DataError(f"target_accuracy must be in (0, 1], got {target_accuracy!r}")
    fn = train_fn or digits_samples_to_target
    meta = {
        "name": name if train_fn is not None else "digits-cnn",
        "batch_sizes": sizes,
        "seeds": seeds,
        "target_accuracy": float(target_accuracy),
        "powertrain": __version__,
    }
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0:
        raise DataError(f"n_jobs must be an integer >= 1 or < 0 (-1: every core), got {n_jobs!r}")
    cache = None
    if cache_dir is not None:
        if Path(cache_dir).exists() and not Path(cache_dir).is_dir():
            raise DataError(f"cache_dir {cache_dir}: is a file; the cache is a folder")
        cache = Path(cache_dir) / f"r_{_cache_key(meta)}.json"
    runs = _read_cache(cache, meta) if cache is not None else None
    if runs is None:
        jobs = [(b, s) for b in sizes for s in seeds]
        from ..utils.progress import progress_bar

        jobs_iter = progress_bar(jobs, show=progress, desc="proxy training (batch x seed)")
        counts = Parallel(n_jobs=n_jobs)(
            delayed(fn)(b, s, float(target_accuracy)) for b, s in jobs_iter
        )
        runs = pd.DataFrame(
            [{"batch_size": b, "seed": s, "samples": int(n)} for (b, s), n in zip(jobs, counts)]
        )
        if cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(
                cache, json.dumps({"meta": meta, "runs": runs.to_dict("records")}, indent=1)
            )
    g = runs.groupby("batch_size")["samples"]
    out = pd.DataFrame(
        {
            "samples": g.median(),
            "samples_min": g.min(),
            "samples_max": g.max(),
        }
    ).reindex(sizes)
    out["r"] = pd.Series(normalise(out["samples"].to_dict()))
    return out.rename_axis("batch_size").reset_index()


#: what :func:`load_r` reads: a CSV path, a {batch size: r} mapping or a table
RSource = Union[str, os.PathLike, Mapping[int, float], pd.DataFrame]


def load_r(source: RSource) -> pd.DataFrame:
    """A user's r, checked and normalised by eq. 3, from whichever form it comes in.

    Parameters
    ----------
    source : dict, DataFrame, str or Path
        A dict ``{batch_size: r or samples}``, or a table (a DataFrame or a CSV) with
        columns ``batch_size`` and ``r`` (or ``samples`` to the target, or ``epochs`` to
        it, as a training trace of a per-epoch GPU corpus gives).

    Returns
    -------
    DataFrame
        Columns batch_size and r (and samples or epochs where given).

    Raises
    ------
    DataError
        For a missing column, a bad batch size or a value that is not a positive number,
        naming the file, row and column.
    """
    where = "r"
    if isinstance(source, Mapping):
        df = pd.DataFrame({"batch_size": list(source), "r": list(source.values())})
    elif isinstance(source, pd.DataFrame):
        df = source.copy()
    else:
        from ..schema import read_csv

        where = str(source)
        df = read_csv(source, what="r vector")
    if "batch_size" not in df.columns or not ({"r", "samples", "epochs"} & set(df.columns)):
        raise DataError(f"{where}: needs columns batch_size and r (or samples, or epochs)")
    sizes = check_batch_sizes(df["batch_size"].tolist(), f"{where}: batch_size")
    col = next(c for c in ("samples", "r", "epochs") if c in df.columns)
    vals = pd.to_numeric(df[col], errors="coerce").to_numpy(float)
    bad = ~(np.isfinite(vals) & (vals > 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataError(f"{where}: row {i + 1}, column '{col}': {df[col].iloc[i]!r} must be > 0")
    out = pd.DataFrame({"batch_size": sizes})
    if col in ("samples", "epochs"):
        out[col] = vals
    out["r"] = [normalise(dict(zip(sizes, vals)))[b] for b in sizes]
    return out
