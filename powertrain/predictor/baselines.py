"""What PowerTrain is measured against, behind the Predictor interface.

Why: a transfer-learning claim means nothing without the alternatives a user could
pick instead (paper §4): the same MLP trained from scratch on the same few samples, the
MLP trained on every mode (the accuracy floor, costly to profile), and a classical
regressor, to show what the neural network buys. All take and return DataFrames like
:class:`~powertrain.predictor.Predictor` (``fit(corpus)``, ``predict(modes, ...)``).
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.utils.validation import check_is_fitted

from ..metrics import mape
from . import checks
from .predictor import Predictor, resolve_columns


def nn_from_scratch(samples: pd.DataFrame, **params) -> Predictor:
    """The paper's "NN" baseline: the same MLP and hyper-parameters, no reference.
    (Its "NN All", the floor, is ``Predictor().fit`` on every mode.)"""
    params.setdefault("progress", False)
    return Predictor(**params).fit(samples)


class GradientBoostingPredictor(BaseEstimator):
    """Gradient-boosted trees per target on log inputs/targets (a classical regressor).

    The paper dismissed trees for over-fitting (§3); this keeps that claim checkable.
    """

    def __init__(
        self,
        n_estimators: int = 300,
        learning_rate: float = 0.05,
        max_depth: int = 3,
        inputs: Sequence[str] | None = None,
        targets: Sequence[str] | None = None,
        random_state: int | None = 0,
    ):
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.max_depth = max_depth
        self.inputs = inputs
        self.targets = targets
        self.random_state = random_state

    def fit(self, corpus: pd.DataFrame) -> GradientBoostingPredictor:
        """``inputs``/``targets`` are resolved as :class:`Predictor` does."""
        self.inputs_, self.targets_ = resolve_columns(self.inputs, self.targets, corpus)
        catalog = self.inputs is None
        df = checks.samples_table(
            corpus, "fit", None, self.inputs_, self.targets_, catalog_knobs=catalog
        )
        checks.check_log_inputs(df, self.inputs_, None, "this baseline needs inputs > 0")
        X = np.log(df[list(self.inputs_)].to_numpy(dtype=float))
        self.models_ = {}
        for target in self.targets_:
            m = GradientBoostingRegressor(
                n_estimators=self.n_estimators,
                learning_rate=self.learning_rate,
                max_depth=self.max_depth,
                subsample=0.8,
                random_state=self.random_state,
            )
            self.models_[target] = m.fit(X, np.log(df[target].to_numpy(dtype=float)))
        self.feature_ranges_ = checks.ranges_of(df, self.inputs_)
        return self

    def predict(
        self, modes: pd.DataFrame, batch_size: int | Iterable[int] | None = None, **_: object
    ) -> pd.DataFrame:
        check_is_fitted(self, "models_")
        frame = checks.config_table(modes, batch_size, self.inputs_)
        checks.warn_extrapolation(frame, self.feature_ranges_, "predict")
        X = np.log(frame[list(self.inputs_)].to_numpy(dtype=float))
        out = frame.copy()
        for target in self.targets_:
            out[target] = np.exp(self.models_[target].predict(X))
        return out

    def score_by_target(self, samples: pd.DataFrame) -> dict[str, float]:
        """MAPE % of each target on measured ``samples``."""
        check_is_fitted(self, "models_")
        pred = self.predict(samples[list(self.inputs_)])
        return {t: mape(samples[t].to_numpy(), pred[t].to_numpy()) for t in self.targets_}
