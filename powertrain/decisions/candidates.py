"""What every decision chooses among, what each choice costs, and the pick under a cap.

Why one module: ``decide``, the :class:`~powertrain.decisions.tuner.Tuner` and the cap
controller once each built their own candidates, turned time per minibatch into time to
accuracy by their own rule and found "the fastest measured under the cap" in their own
way, and they drifted apart (the same r gave two picks). Here is the one copy of each:
:func:`candidates_for`, :func:`cost_factor` (the cost rule, per sample),
:func:`fastest_measured` and :func:`make_pick`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..errors import DataError
from ..schema import check_columns

#: power-limit step of the default candidates on a GPU board, W (Zeus's default step)
POWER_LIMIT_STEP_W = 25.0


# ------------------------------------------------------------------- candidates --
def _default_batch_size(board: Any) -> int | None:
    twin = getattr(board, "twin", None)
    return None if twin is None else int(twin.workload.default_batch_size)


def candidate_configurations(
    board: Any, batch_size: int | Sequence[int] | None = None
) -> pd.DataFrame:
    """The configurations a decision chooses among, by default: a replayed table's own
    records, else the device's profiling grid at ``batch_size`` (one size or several;
    default: the twin workload's own), else a GPU's power limits every
    :data:`POWER_LIMIT_STEP_W` over its range."""
    records = getattr(board, "configurations", None)
    if callable(records):
        cands = records()
        if batch_size is not None:
            cands = cands[cands["batch_size"].isin(np.atleast_1d(batch_size).astype(int))]
        return cands.reset_index(drop=True)
    span = getattr(board, "power_limit_range_w", None)
    if board.device is None and span is None:
        raise DataError(f"{type(board).__name__} has no device table of modes: pass candidates=...")
    sizes: int | Sequence[int] | None = (
        batch_size if batch_size is not None else _default_batch_size(board)
    )
    if sizes is None:
        raise DataError("batch_size: name the batch size(s) to decide among")
    sizes_df = pd.DataFrame({"batch_size": np.atleast_1d(sizes).astype(int)})
    if board.device is not None:
        grid = board.device.profiling_grid()
    else:
        lo, hi = span  # type: ignore[misc]  # not None: checked above
        limits = np.unique(np.r_[np.arange(hi, lo - 1e-9, -POWER_LIMIT_STEP_W), lo])
        grid = pd.DataFrame({"power_limit_w": limits})
    return grid.merge(sizes_df, how="cross").reset_index(drop=True)


def candidates_for(
    board: Any,
    inputs: Sequence[str],
    candidates: pd.DataFrame | None = None,
    batch_size: int | Sequence[int] | None = None,
) -> pd.DataFrame:
    """The candidates of a decision, checked before anything is measured: given (at
    ``batch_size`` when both are given) or :func:`candidate_configurations`, completed
    by the board (NVML: its threads and workers), with every column the model reads,
    finite positive values the board accepts, one row per configuration."""
    if candidates is None:
        cands = candidate_configurations(board, batch_size)
    elif not isinstance(candidates, pd.DataFrame):
        raise DataError(
            f"candidates must be a table (DataFrame) of configurations, got "
            f"{type(candidates).__name__}"
        )
    else:
        cands = candidates
        if batch_size is not None and "batch_size" in cands.columns:
            sizes = np.atleast_1d(batch_size).astype(int)
            cands = cands[cands["batch_size"].isin(sizes)]
    cands = with_spec(board.complete_modes(cands.reset_index(drop=True)), inputs, board.device)
    missing = [c for c in inputs if c not in cands.columns]
    if missing:
        raise DataError(
            f"candidates: missing column(s) {', '.join(missing)} the model reads (neither "
            "a knob of the board nor a figure under its device spec's 'hardware')"
        )
    if not len(cands):
        raise DataError("candidates: no configurations to choose among (the table is empty)")
    zero_ok = [c for c in inputs if c == "num_workers"]
    positive = [c for c in inputs if c not in zero_ok]
    check_columns(cands, list(inputs), source="candidates", positive=positive,
                  nonnegative=zero_ok)  # fmt: skip
    if set(board.config_columns) <= set(cands.columns):
        board.check_modes(cands, source="candidates")
    return cands.drop_duplicates(subset=list(inputs)).reset_index(drop=True)


def with_spec(frame: pd.DataFrame, inputs: Sequence[str], device: Any) -> pd.DataFrame:
    """``frame`` with the ``inputs`` it lacks that ``device``'s spec gives under
    ``hardware`` (a family reference's spec features, ``gpu_cuda_cores``...), the same
    in every row. Why here: the board sets knobs and measures; the spec figures are the
    device's, never a choice, so every driver's candidates and measurements get them
    from the one device the decision runs on."""
    hardware = getattr(getattr(device, "spec", None), "hardware", None) or {}
    fill = {c: float(hardware[c]) for c in inputs if c not in frame.columns and c in hardware}
    return frame.assign(**fill) if fill else frame


# ------------------------------------------------------------------ the cost rule --
def cost_factor(configs: pd.DataFrame, r: Any, time_column: str) -> np.ndarray:
    """Per configuration, what turns its measured time into time to accuracy (1 without
    r): the time per sample (a minibatch's time / batch size, or an epoch's / the
    dataset) times the samples to the target.

    ``r``: a table with ``epochs`` to the target per batch size, or anything
    :func:`~powertrain.load_r` reads (``samples`` to the target, or a relative ``r``).
    Per minibatch (``time_ms``): samples x ms / b / 1000 = seconds; with epochs, epochs /
    b x ms / 1000 (seconds per sample of the dataset: time to accuracy over the dataset's
    size, the same for every choice). Per epoch (``epoch_s``): epochs x s; with samples
    or r, proportional to them. Why per sample: a larger batch needs fewer minibatches an
    epoch, so 10 epochs at 100 ms (b=16) take longer than 11 epochs at 300 ms (b=64)."""
    if r is None:
        return np.ones(len(configs))
    if "batch_size" not in configs.columns:
        raise DataError("an r vector needs a batch_size column in the configurations")
    b = configs["batch_size"].astype(int)
    if isinstance(r, pd.DataFrame) and "epochs" in r.columns:
        if "batch_size" not in r.columns:
            raise DataError("r: a table of epochs needs a batch_size column")
        per = r.set_index(r["batch_size"].astype(int))["epochs"]
        need = b.map(pd.to_numeric(per, errors="coerce").astype(float))
        bad = need[need.notna() & ~(need > 0)]
        if len(bad):
            raise DataError(f"r: epochs must be > 0, got {bad.iloc[0]!r}")
    else:
        from ..data.batch_efficiency import load_r

        rv = load_r(r)
        need = b.map(rv.set_index("batch_size")["samples" if "samples" in rv.columns else "r"])
    if need.isna().any():
        missing = sorted(set(b[need.isna()]))
        raise DataError(f"the r vector has no entry for batch size(s) {missing}")
    per_minibatch = time_column == "time_ms"
    factor = need.astype(float) / b * 1e-3 if per_minibatch else need.astype(float)
    return factor.to_numpy(float)


def cost(
    time: np.ndarray, power: np.ndarray, factor: np.ndarray, objective: str = "time"
) -> np.ndarray:
    """What a decision minimises: time to accuracy (``factor``: :func:`cost_factor`), or
    its energy (x power)."""
    return time * factor * (power if objective == "energy" else 1.0)


# --------------------------------------------------------------------- the pick --
def fastest_measured(measured: np.ndarray, power: np.ndarray, cost: np.ndarray, cap: float) -> int:
    """The cheapest configuration measured at ``cap`` or under it (-1: none): what every
    decision keeps, since only a measured power is known to fit."""
    fits = np.flatnonzero(measured & (power <= cap))
    return int(fits[np.argmin(cost[fits])]) if fits.size else -1


@dataclass
class CapPick:
    """The configuration chosen under one cap and what stands behind it."""

    power_cap_w: float
    #: the configuration's columns (knobs, batch size); None: no pick
    config: dict | None
    #: True: measured on the board (its time and power are the measurements)
    measured: bool
    time: float | None
    power_w: float | None
    #: the value minimised (time, time or energy to accuracy)
    cost: float | None
    #: measured pick: chance that no unmeasured configuration is faster under the cap;
    #: unmeasured pick: chance its power is within the cap
    confidence: float
    reason: str
    #: the expected relative loss of this pick: how much slower it may be than the
    #: fastest configuration that fits (nan: not assessed)
    expected_loss: float = float("nan")


def make_pick(
    cap: float,
    cands: pd.DataFrame,
    inputs: Sequence[str],
    measured: np.ndarray,
    mu_t: np.ndarray,
    mu_p: np.ndarray,
    sd_p: np.ndarray,
    cost: np.ndarray,
    incumbent: int,
    beaten: float,
    accept_unmeasured: float | None,
) -> CapPick:
    """The confirmed pick under ``cap`` (``incumbent``: :func:`fastest_measured`; ``beaten``:
    the chance an unmeasured one is faster), or the accepted unmeasured one, or none."""

    def config(j: int) -> dict:
        return {c: plain(cands[c].iloc[j]) for c in inputs}

    if accept_unmeasured is not None:
        from scipy.stats import norm

        sure = norm.cdf((cap - mu_p) / np.clip(sd_p, 1e-9, None))
        bar = cost[incumbent] if incumbent >= 0 else np.inf
        ok = np.flatnonzero(~measured & (sure >= accept_unmeasured) & (cost < bar))
        if ok.size:
            j = int(ok[np.argmin(cost[ok])])
            return CapPick(
                cap, config(j), False, float(mu_t[j]), float(mu_p[j]), float(cost[j]),
                float(sure[j]),
                f"unmeasured: predicted faster than every measured configuration, "
                f"{100 * sure[j]:.0f} % chance of staying within {cap:g} W",
            )  # fmt: skip
    if incumbent < 0:
        lowest = np.nanmin(np.where(measured, mu_p, np.nan)) if measured.any() else np.nan
        why = (
            f"no measured configuration fits under {cap:g} W (lowest measured power {lowest:.1f} W)"
            if measured.any()
            else f"nothing measured under {cap:g} W"
        )
        return CapPick(cap, None, False, None, None, None, 0.0, why)
    j = int(incumbent)
    sure = f"; {100 * (1 - beaten):.0f} % chance no unmeasured configuration is faster"
    return CapPick(
        cap, config(j), True, float(mu_t[j]), float(mu_p[j]), float(cost[j]),
        float(1.0 - beaten),
        f"fastest measured under {cap:g} W" + (sure if np.isfinite(beaten) else ""),
    )  # fmt: skip


def plain(v: Any) -> Any:
    """A numpy scalar as a plain int or float (other values as they are)."""
    if isinstance(v, np.integer):
        return int(v)
    return float(v) if isinstance(v, np.floating) else v


def power_spread(power: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Positions of ``n`` candidates, one drawn from each of ``n`` equal bins of the
    candidates ordered by ``power``."""
    if n == 0 or not len(power):
        return np.zeros(0, dtype=int)
    bins = np.array_split(np.argsort(power, kind="stable"), n)
    return np.asarray([rng.choice(b) for b in bins if len(b)], dtype=int)
