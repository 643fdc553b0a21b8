"""Bayesian-optimisation peers for benchmarks/decisions.py: Optuna's constrained TPE and
GP samplers deciding on the same replayed boards, caps, draws and scoring.

Why: ``pt.decide`` claims to reach a good pick in fewer measurements than a general
black-box optimiser. Each peer measures one configuration per trial on the replay board
(the knobs as ordinal integers: their position in the device's value list, so the
samplers see the order of the clocks); a configuration it asks for twice is answered
from its own record without charging the board again, and the run goes on until
``budget`` distinct configurations are measured (at most 4 x budget trials).

* per cap: minimise time with the constraint power - cap <= 0 (Optuna's
  ``Trial.set_constraint``, the constrained TPE of Watanabe & Hutter 2023 and the
  constrained log-EI of its GP sampler); no prior knowledge of the workload;
* shared budget: minimise (time, power) jointly, the cap table read off the measured
  configurations (the fastest measured under each cap), as :func:`prefix_scores` scores
  ``pt.decide``'s.

Sequential samplers make the first k trials of a budget-50 run exactly a budget-k run
(same seed), so one run scores every budget, as for ``pt.decide``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

#: the Optuna samplers benchmarked, by the name the tables print
SAMPLERS = ("optuna-tpe", "optuna-gp")


def _sampler(name: str, seed: int):
    """The sampler; a constrained run's trials carry their constraint themselves
    (``Trial.set_constraint``, which Optuna 5's samplers read in place of the
    deprecated ``constraints_func``)."""
    import optuna

    if name == "optuna-tpe":
        return optuna.samplers.TPESampler(seed=seed, multivariate=True)
    if name == "optuna-gp":
        return optuna.samplers.GPSampler(seed=seed)
    raise ValueError(f"sampler must be one of {', '.join(SAMPLERS)}, got {name!r}")


def peer_run(
    measure, knobs: list[str], values: dict, name: str, seed: int, budget: int,
    cap: float | None = None, fixed: dict | None = None,
) -> pd.DataFrame:  # fmt: skip
    """One Optuna study measuring through ``measure(configs) -> rows`` (a replay board's
    ``measure``, or the profiler on a live board; ``fixed``: columns every configuration
    carries, e.g. the batch size): per cap when ``cap`` is given
    (time, constrained to the cap), else shared (time and power). Returns the distinct
    configurations measured, in order, with ``round`` (their order)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    seen: dict[tuple, pd.Series] = {}
    order: list[pd.Series] = []

    def objective(trial):
        config = {k: values[k][trial.suggest_int(k, 0, len(values[k]) - 1)] for k in knobs}
        config.update(fixed or {})
        key = tuple(config[k] for k in knobs)
        if key not in seen:
            row = measure(pd.DataFrame([config])).iloc[0]
            seen[key] = row
            order.append(row)
        row = seen[key]
        if cap is not None:
            trial.set_constraint("over_w", float(row.power_w) - cap)
            return float(row.time_ms)
        return float(row.time_ms), float(row.power_w)

    directions = ["minimize"] if cap is not None else ["minimize", "minimize"]
    study = optuna.create_study(directions=directions, sampler=_sampler(name, seed))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # experimental-feature warnings
        for _ in range(4 * budget):
            study.optimize(objective, n_trials=1)
            if len(order) >= budget:
                break
    out = pd.DataFrame(order).reset_index(drop=True)
    return out.assign(round=np.arange(len(out)))


def grid_values(corpus: pd.DataFrame, knobs: list[str]) -> dict:
    """Each knob's sorted values as the corpus records them."""
    return {k: sorted(corpus[k].unique().tolist()) for k in knobs}
