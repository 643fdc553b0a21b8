"""``Predictor``: time and power of a training workload in every power mode.

Why: this is the object users hold. It pairs a time head and a power head (PowerTrain,
paper §3), speaks DataFrames in the package schema, and carries what it was trained on,
so it can warn about extrapolation and say where it came from when saved.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from ..errors import DataError
from ..metrics import mape
from ..schema import CONFIG_COLUMNS, TARGET_COLUMNS
from . import checks
from .estimator import PowerTrainMLP

#: the two heads, in the order they are trained and written
TARGETS = TARGET_COLUMNS


class Predictor(BaseEstimator):
    """A time head and a power head over ``cores, cpu_mhz, gpu_mhz, mem_mhz, batch_size``.

    Parameters (stored only; see :class:`PowerTrainMLP` for their meaning)
    ----------
    hidden, dropout, learning_rate, epochs, batch_size, validation_fraction: the
        reference training (paper Table 4: 256-128-64, Adam 1e-3, 100 epochs, 90:10).
    input_transform, target_transform: ``"log"`` by default -- measured on the twin
        corpora to cut the reference's time MAPE (benchmarks/results/accuracy*).
    transfer_epochs, transfer_learning_rate, transfer_layers, transfer_head_init,
        transfer_body_lr_scale, transfer_validation_fraction, transfer_dropout: how
        :meth:`transfer` retrains -- full-batch, 100 epochs, on *all* samples (no 10 %
        hold-out: with 50 modes, choosing the epoch on 5 of them lost more than it gained;
        measured on the twin corpora, e.g. BERT time 12.8 -> 11.0 %, Orin Nano power
        4.9 -> 4.6 %) and without dropout (power MAPE -0.1..-0.6 points on 4 targets).
    transfer_residual_blend: average each fine-tuned head with the frozen reference
        network plus a ridge correction, weighted by their k-fold errors (see
        :meth:`PowerTrainMLP.transfer`). Measured on the twin corpora (full
        benchmarks/accuracy.py, 10 draws): targets met 44 -> 51 of 79; median MAPE at
        50 samples e.g. BERT time 11.5 -> 9.7 %, MobileNetV3 time 9.8 -> 9.2 % and
        power 4.9 -> 4.6 %, ResNet-18 bs8 time 10.1 -> 8.7 %; at 20 samples BERT time
        16.5 -> 11.2 %. Worse on BERT power (5.5 -> 6.2 % at 50) and Xavier MobileNetV3
        (time 11.1 -> 11.6 %, power 5.1 -> 5.4 % at 50). Same transfer time (~0.85 s).
    random_state: seed of everything random; ``progress``: tqdm bars (None: reference
        training only).
    """

    def __init__(
        self,
        hidden: tuple[int, ...] = (256, 128, 64),
        dropout: float = 0.1,
        learning_rate: float = 1e-3,
        epochs: int = 100,
        batch_size: int = 32,
        validation_fraction: float = 0.1,
        input_transform: str = "log",
        target_transform: str = "log",
        transfer_epochs: int = 100,
        transfer_learning_rate: float = 1e-3,
        transfer_layers: str = "all",
        transfer_head_init: str = "reference",
        transfer_body_lr_scale: float = 1.0,
        transfer_validation_fraction: float = 0.0,
        transfer_dropout: float = 0.0,
        transfer_residual_blend: bool = True,
        random_state: int | None = 0,
        progress: bool | None = None,
    ):
        self.hidden = hidden
        self.dropout = dropout
        self.learning_rate = learning_rate
        self.epochs = epochs
        self.batch_size = batch_size
        self.validation_fraction = validation_fraction
        self.input_transform = input_transform
        self.target_transform = target_transform
        self.transfer_epochs = transfer_epochs
        self.transfer_learning_rate = transfer_learning_rate
        self.transfer_layers = transfer_layers
        self.transfer_head_init = transfer_head_init
        self.transfer_body_lr_scale = transfer_body_lr_scale
        self.transfer_validation_fraction = transfer_validation_fraction
        self.transfer_dropout = transfer_dropout
        self.transfer_residual_blend = transfer_residual_blend
        self.random_state = random_state
        self.progress = progress

    # ------------------------------------------------------------------ training
    def _head_estimator(self, target_index: int) -> PowerTrainMLP:
        seed = None if self.random_state is None else int(self.random_state) + target_index
        return PowerTrainMLP(
            hidden_layer_sizes=tuple(self.hidden),
            dropout=self.dropout,
            learning_rate=self.learning_rate,
            epochs=self.epochs,
            batch_size=self.batch_size,
            validation_fraction=self.validation_fraction,
            loss="mse",
            input_transform=self.input_transform,
            target_transform=self.target_transform,
            random_state=seed,
            verbose=self.progress is not False,
        )

    def fit(self, corpus: pd.DataFrame, source: str | None = None) -> Predictor:
        """Train both heads from scratch on a profiled corpus (a reference, or a baseline).

        ``corpus`` needs the configuration columns plus ``time_ms`` and ``power_w``; a
        ``device``/``workload`` column, when present, is recorded as provenance.
        """
        df = checks.samples_table(corpus, "fit", source)
        X = df[list(CONFIG_COLUMNS)].to_numpy(dtype=np.float64)
        t0 = time.perf_counter()
        self.heads_ = {}
        for i, target in enumerate(TARGETS):
            self.heads_[target] = self._head_estimator(i).fit(
                X, df[target].to_numpy(dtype=np.float64)
            )
        self.feature_ranges_ = checks.ranges_of(df)
        self.n_samples_ = len(df)
        self.info_ = {
            "kind": "reference",
            "trained_on": _describe(corpus, len(df)),
            "fit_seconds": round(time.perf_counter() - t0, 3),
        }
        return self

    def transfer(
        self,
        samples: pd.DataFrame,
        *,
        loss: str = "mse",
        epochs: int | None = None,
        learning_rate: float | None = None,
        layers: str | None = None,
        head_init: str | None = None,
        body_lr_scale: float | None = None,
        random_state: int | None = None,
        source: str | None = None,
    ) -> Predictor:
        """A new predictor for the workload (or device) the ``samples`` were profiled on.

        Keeps this predictor's hidden layers, replaces the output layers and retrains on
        the samples (paper §3.2), full-batch. ``loss="mape"`` is what the paper needed
        when the device changes. By default (``transfer_residual_blend``) each head is
        then averaged with this predictor's frozen network plus a ridge correction,
        weighted by their k-fold errors (see :meth:`PowerTrainMLP.transfer`). This
        predictor is left untouched. Warns
        (:class:`ExtrapolationWarning`) if the samples leave the reference's ranges.
        """
        check_is_fitted(self, "heads_")
        df = checks.samples_table(samples, "transfer", source)
        checks.warn_extrapolation(df, self.feature_ranges_, "transfer samples")
        X = df[list(CONFIG_COLUMNS)].to_numpy(dtype=np.float64)
        seed = self.random_state if random_state is None else random_state
        settings = _transfer_settings(
            layers=self.transfer_layers if layers is None else layers,
            head_init=self.transfer_head_init if head_init is None else head_init,
            epochs=self.transfer_epochs if epochs is None else epochs,
            learning_rate=(self.transfer_learning_rate if learning_rate is None else learning_rate),
        )
        t0 = time.perf_counter()
        new = Predictor(**self.get_params())
        new.heads_ = {}
        for i, target in enumerate(TARGETS):
            new.heads_[target] = self.heads_[target].transfer(
                X,
                df[target].to_numpy(dtype=np.float64),
                **settings,
                batch_size=len(df),
                loss=loss,
                random_state=None if seed is None else int(seed) + i,
                body_lr_scale=self.transfer_body_lr_scale
                if body_lr_scale is None
                else body_lr_scale,
                validation_fraction=self.transfer_validation_fraction,
                dropout=self.transfer_dropout,
                residual_blend=self.transfer_residual_blend,
            )
        new.feature_ranges_ = checks.union_ranges(self.feature_ranges_, checks.ranges_of(df))
        new.n_samples_ = len(df)
        new.info_ = {
            "kind": "transferred",
            "trained_on": _describe(samples, len(df)),
            "reference": self.info_,
            "transfer": {
                "loss": loss,
                "layers": settings["layers"],
                "head_init": settings["head_init"],
                "epochs": settings["epochs"],
                "residual_blend": bool(self.transfer_residual_blend),
            },
            "fit_seconds": round(time.perf_counter() - t0, 3),
        }
        return new

    # ------------------------------------------------------------------ prediction
    def predict(
        self,
        modes: pd.DataFrame,
        batch_size: int | Iterable[int] | None = None,
        *,
        return_std: bool = True,
    ) -> pd.DataFrame:
        """The caller's frame (every column kept) plus ``time_ms`` and ``power_w``.

        ``batch_size``: a column of ``modes``, one size for all rows, or a list of sizes
        (each mode repeated once per size). With ``return_std`` also ``time_ms_std`` and
        ``power_w_std``: a 1-sigma predictive spread (last-layer Laplace plus the
        model's held-out error) for safety margins. Existing ``time_ms``/``power_w``
        columns are overwritten. Warns on configurations outside the training ranges.
        """
        check_is_fitted(self, "heads_")
        frame = checks.config_table(modes, batch_size)
        X = frame[list(CONFIG_COLUMNS)].to_numpy(dtype=np.float64)
        checks.warn_extrapolation(frame, self.feature_ranges_, "predict")
        out = frame.copy()
        for target in TARGETS:
            if return_std:
                mean, std = self.heads_[target].predict(X, return_std=True)
                out[target] = mean
                out[f"{target}_std"] = std
            else:
                out[target] = self.heads_[target].predict(X)
        return out

    def score_by_target(self, samples: pd.DataFrame) -> dict[str, float]:
        """MAPE % of each target on measured ``samples`` (the paper's metric)."""
        from ..schema import check_samples

        df = check_samples(samples)
        pred = self.predict(df[list(CONFIG_COLUMNS)], return_std=False)
        return {t: mape(df[t].to_numpy(), pred[t].to_numpy()) for t in TARGETS}

    def score(self, samples: pd.DataFrame) -> float:
        """One float, higher is better (scikit-learn's contract): minus the mean MAPE %
        over the targets. Per-target errors: :meth:`score_by_target`."""
        return -float(np.mean(list(self.score_by_target(samples).values())))

    # ------------------------------------------------------------------ files
    def save(self, path: str | Path) -> Path:
        """Write a model directory (tensors + JSON, no pickle); see ``model_io``."""
        from .model_io import save_predictor

        return save_predictor(self, path)

    @classmethod
    def load(cls, path: str | Path) -> Predictor:
        """Read a model directory written by :meth:`save`; refuses anything suspicious."""
        from .model_io import load_predictor

        return load_predictor(path, cls)

    @classmethod
    def from_pretrained(cls, name: str) -> Predictor:
        """A shipped reference model, e.g. ``"orin-agx/resnet18"``."""
        from .model_io import load_pretrained

        return load_pretrained(name, cls)


def _describe(df: pd.DataFrame, n: int) -> dict:
    """Provenance recorded with a model: row count and the ids present in the table."""
    d: dict = {"rows": int(n)}
    for col in ("device", "workload", "batch_size"):
        if col in df.columns:
            vals = sorted({str(v) if col != "batch_size" else int(v) for v in df[col].dropna()})
            d[col] = vals if len(vals) <= 8 else vals[:8] + ["..."]
    return d


def _transfer_settings(
    *, layers: str, head_init: str, epochs: int, learning_rate: float
) -> dict[str, object]:
    """Transfer settings checked explicitly: a caller's ``epochs=0`` is an error, never
    silently the default (the old ``x or default`` did that)."""
    if isinstance(epochs, bool) or not isinstance(epochs, (int, np.integer)) or epochs < 1:
        raise DataError(f"transfer: epochs must be an integer >= 1, got {epochs!r}")
    if (
        isinstance(learning_rate, bool)
        or not isinstance(learning_rate, (int, float, np.floating, np.integer))
        or not np.isfinite(learning_rate)
        or learning_rate <= 0
    ):
        raise DataError(
            f"transfer: learning_rate must be a finite number > 0, got {learning_rate!r}"
        )
    for name, value in (("layers", layers), ("head_init", head_init)):
        if not isinstance(value, str) or not value:
            raise DataError(f"transfer: {name} must be a non-empty string, got {value!r}")
    return {
        "layers": layers,
        "head_init": head_init,
        "epochs": int(epochs),
        "learning_rate": float(learning_rate),
    }
