"""One target (time or power) as a scikit-learn regressor that can also transfer.

Why: the paper picked its network by ``GridSearchCV``; users should be able to do the
same (and put it in a ``Pipeline``). So the per-target model follows sklearn's rules --
the constructor only stores parameters, ``fit`` returns ``self``, learned state ends in
``_`` -- and :class:`~powertrain.predictor.Predictor` is two of these plus DataFrames.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from . import mlp, uncertainty

_TRANSFORMS = ("none", "log")
_LOSSES = ("mse", "mape")
_LAYERS = ("all", "head")
_HEAD_INIT = ("reference", "fresh")


def _check_choice(name: str, value: Any, choices: tuple) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")


class PowerTrainMLP(RegressorMixin, BaseEstimator):
    """MLP regressor with PowerTrain's defaults (paper Table 4) and ``transfer``.

    Parameters
    ----------
    hidden_layer_sizes: widths of the hidden layers (paper: 256, 128, 64).
    dropout: dropout rate after the first two hidden layers (the paper gives no rate).
    learning_rate: Adam step size (paper: 1e-3).
    epochs: passes over the training rows (paper: 100).
    batch_size: minibatch rows; the whole set when it has fewer rows.
    validation_fraction: share of rows held out to pick the best epoch (paper: 90:10).
    loss: ``"mse"`` on standardised targets (paper) or ``"mape"`` on original units
        (what the paper needed for cross-device transfer).
    input_transform / target_transform: ``"log"`` fits relative structure (time ~ 1/f);
        ``"none"`` is the paper's plain standardisation.
    random_state: seed for initialisation, dropout, shuffling and the validation split.
    verbose: show a progress bar while training.
    """

    def __init__(
        self,
        hidden_layer_sizes: tuple[int, ...] = (256, 128, 64),
        dropout: float = 0.1,
        learning_rate: float = 1e-3,
        epochs: int = 100,
        batch_size: int = 32,
        validation_fraction: float = 0.1,
        loss: str = "mse",
        input_transform: str = "none",
        target_transform: str = "none",
        random_state: int | None = 0,
        verbose: bool = False,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.dropout = dropout
        self.learning_rate = learning_rate
        self.epochs = epochs
        self.batch_size = batch_size
        self.validation_fraction = validation_fraction
        self.loss = loss
        self.input_transform = input_transform
        self.target_transform = target_transform
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ transforms
    def _check_params(self) -> None:
        _check_choice("loss", self.loss, _LOSSES)
        _check_choice("input_transform", self.input_transform, _TRANSFORMS)
        _check_choice("target_transform", self.target_transform, _TRANSFORMS)
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must be in [0, 1); got {self.dropout!r}")
        if not 0 <= self.validation_fraction < 1:
            raise ValueError(
                f"validation_fraction must be in [0, 1); got {self.validation_fraction!r}"
            )
        if int(self.epochs) < 1 or int(self.batch_size) < 1:
            raise ValueError("epochs and batch_size must be >= 1")

    def _tx(self, X: np.ndarray) -> np.ndarray:
        if self.input_transform == "log":
            if np.any(X <= 0):
                raise ValueError("input_transform='log' needs positive inputs")
            return np.log(X)
        return X

    def _ty(self, y: np.ndarray) -> np.ndarray:
        if self.target_transform == "log":
            if np.any(y <= 0):
                raise ValueError("target_transform='log' needs positive targets")
            return np.log(y)
        return y

    def _scale_x(self, X: np.ndarray) -> np.ndarray:
        return ((self._tx(X) - self.x_mean_) / self.x_scale_).astype(np.float32)

    def _z(self, y: np.ndarray) -> np.ndarray:
        return ((self._ty(y) - self.y_mean_) / self.y_scale_).astype(np.float32)

    def _loss_fn(self, loss: str):
        if loss == "mse":
            return torch.nn.functional.mse_loss
        mean, scale, log = float(self.y_mean_), float(self.y_scale_), self.target_transform == "log"

        def mape(pred: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
            t_pred, t_true = pred * scale + mean, z * scale + mean
            if log:  # |exp(a) - exp(b)| / exp(b) = |expm1(a - b)|
                return torch.expm1(t_pred - t_true).abs().mean()
            return ((t_pred - t_true).abs() / t_true.abs().clamp_min(1e-12)).mean()

        return mape

    def _split(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        n_val = int(np.floor(n * self.validation_fraction))
        if n - n_val < 1:
            n_val = 0
        perm = rng.permutation(n)
        return np.sort(perm[n_val:]), np.sort(perm[:n_val])

    # ------------------------------------------------------------------ fit / transfer
    def fit(self, X, y) -> PowerTrainMLP:
        """Train from scratch: standardise inputs/targets, train, keep the best epoch."""
        self._check_params()
        X, y = validate_data(self, X, y, y_numeric=True, dtype=np.float64)
        Xt, yt = self._tx(X), self._ty(y)
        self.x_mean_ = Xt.mean(axis=0)
        std = Xt.std(axis=0)
        self.constant_features_ = std <= 1e-12 * np.maximum(1.0, np.abs(self.x_mean_))
        self.x_scale_ = np.where(self.constant_features_, 1.0, std)
        self.y_mean_ = float(yt.mean())
        self.y_scale_ = float(yt.std()) or 1.0
        gen = torch.Generator().manual_seed(_seed(self.random_state))
        self.net_ = mlp.MLP(X.shape[1], tuple(self.hidden_layer_sizes), float(self.dropout))
        mlp.init_mlp(self.net_, gen)
        # an input that never varied taught the net nothing: start it neutral, so that a
        # later transfer to other values (e.g. another batch size) is not a random shift
        with torch.no_grad():
            self.net_.linears()[0].weight[:, torch.as_tensor(self.constant_features_)] = 0.0
        self._train(
            X,
            y,
            self.loss,
            int(self.epochs),
            float(self.learning_rate),
            int(self.batch_size),
            gen,
            params=None,
            desc="fit",
        )
        return self

    def transfer(
        self,
        X,
        y,
        *,
        layers: str = "all",
        head_init: str = "reference",
        epochs: int | None = None,
        learning_rate: float | None = None,
        batch_size: int | None = None,
        loss: str | None = None,
        random_state: int | None = None,
        body_lr_scale: float = 1.0,
        validation_fraction: float | None = None,
        dropout: float | None = None,
        cv_folds: int = 5,
    ) -> PowerTrainMLP:
        """A new estimator: this one's hidden layers, a replaced output layer, retrained.

        Keeps the reference's input scaling (the hidden features are defined on it) and
        standardises the new targets on their own. ``layers="head"`` trains the output
        layer only; ``"all"`` fine-tunes everything from the reference weights.
        ``head_init="fresh"`` re-initialises the output layer as the paper describes;
        ``"reference"`` starts it from the reference's (the new targets are standardised,
        so the reference head is a close first guess). ``self`` is never modified.
        ``cv_folds`` extra transfers on k-1 folds measure the out-of-sample error that
        sets the uncertainty's noise term (the training residuals of a fine-tuned net are
        near zero); 0 skips them.
        """
        check_is_fitted(self)
        _check_choice("layers", layers, _LAYERS)
        _check_choice("head_init", head_init, _HEAD_INIT)
        overrides = {
            k: v
            for k, v in (
                ("epochs", epochs),
                ("learning_rate", learning_rate),
                ("batch_size", batch_size),
                ("loss", loss),
                ("random_state", random_state),
                ("validation_fraction", validation_fraction),
            )
            if v is not None
        }
        kwargs = dict(
            layers=layers,
            head_init=head_init,
            body_lr_scale=body_lr_scale,
            dropout=dropout,
            **overrides,
        )
        new = copy.copy(self)  # shallow: params and learned arrays, replaced below
        # a transfer (and its k-fold refits) takes well under a second: no progress bars
        new.set_params(verbose=False, **overrides)
        new._check_params()
        X, y = validate_data(self, X, y, y_numeric=True, dtype=np.float64, reset=False)
        yt = new._ty(y)
        new.y_mean_ = float(yt.mean())
        new.y_scale_ = float(yt.std()) or 1.0
        new.net_ = copy.deepcopy(self.net_)
        if dropout is not None:  # rate while retraining only; the layout (and file) is unchanged
            for m in new.net_.modules():
                if isinstance(m, torch.nn.Dropout):
                    m.p = float(dropout)
        gen = torch.Generator().manual_seed(_seed(new.random_state))
        if head_init == "fresh":
            head = new.net_.head
            bound = 1.0 / np.sqrt(head.in_features)
            with torch.no_grad():
                head.weight.uniform_(-bound, bound, generator=gen)
                head.bias.uniform_(-bound, bound, generator=gen)
        head = list(new.net_.head.parameters())
        if layers == "head":
            params: list | None = head
        elif body_lr_scale != 1.0:  # gentler on the kept layers than on the new one
            body = {
                "params": list(new.net_.body.parameters()),
                "lr": float(new.learning_rate) * body_lr_scale,
            }
            params = [body, {"params": head}]
        else:
            params = None
        new._train(
            X,
            y,
            new.loss,
            int(new.epochs),
            float(new.learning_rate),
            int(new.batch_size),
            gen,
            params=params,
            desc="transfer",
            noise_floor=max(
                # not expected to beat the reference's held-out error, nor its own k-fold one
                self.noise_var_ * (self.y_scale_ / new.y_scale_) ** 2,
                self._cv_noise(X, y, new, cv_folds, kwargs) / new.y_scale_**2,
            ),
        )
        for m in new.net_.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = float(new.dropout)
        return new

    def _cv_noise(self, X, y, new: PowerTrainMLP, folds: int, kwargs: dict) -> float:
        """Mean squared k-fold error of this transfer, in transformed-target units."""
        folds = min(int(folds), len(X) // 2)
        if folds < 2:
            return 0.0
        perm = np.random.default_rng(_seed(new.random_state) + 1).permutation(len(X))
        sq = []
        for k in range(folds):
            va = perm[k::folds]
            tr = np.setdiff1d(perm, va)
            m = self.transfer(X[tr], y[tr], cv_folds=0, **kwargs)
            sq.append((new._ty(y[va]) - new._ty(m.predict(X[va]))) ** 2)
        return float(np.mean(np.concatenate(sq)))

    def _train(
        self, X, y, loss, epochs, lr, batch_size, gen, params, desc, noise_floor: float = 0.0
    ) -> None:
        rng = np.random.default_rng(_seed(self.random_state))
        tr, va = self._split(len(X), rng)
        xs, z = self._scale_x(X), self._z(y)
        info = mlp.train(
            self.net_,
            xs[tr],
            z[tr],
            xs[va],
            z[va],
            loss_fn=self._loss_fn(loss),
            epochs=epochs,
            lr=lr,
            batch_size=batch_size,
            generator=gen,
            params=params,
            progress=bool(self.verbose),
            desc=desc,
        )
        for p in self.net_.parameters():
            p.requires_grad_(True)
        self.best_epoch_ = int(info["best_epoch"])
        self.loss_curve_ = info["history"]["train"]
        self.validation_curve_ = info["history"]["val"]
        # uncertainty: residuals of the chosen weights, posterior of the output layer
        phi, out = mlp.predict(self.net_, xs)
        out = out.numpy()
        resid = z - out
        self.noise_var_ = max(uncertainty.noise_variance(resid[va], resid[tr]), noise_floor)
        self.head_cov_ = uncertainty.posterior_cov(phi[tr], self.noise_var_)
        # MAPE % on the held-out rows (they picked the epoch, so mildly optimistic)
        t = out.astype(np.float64) * self.y_scale_ + self.y_mean_
        yhat = np.exp(t) if self.target_transform == "log" else t
        yv, hv = y[va], yhat[va]
        nz = yv != 0  # MAPE is undefined at zero targets (never in time/power data)
        self.validation_mape_ = (
            float(np.mean(np.abs(hv[nz] / yv[nz] - 1)) * 100) if nz.any() else None
        )
        self.n_features_in_ = X.shape[1]

    # ------------------------------------------------------------------ predict
    def _predict_z(self, X, return_std: bool):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        phi, out = mlp.predict(self.net_, self._scale_x(X))
        z = out.numpy().astype(np.float64)
        var = (
            uncertainty.predictive_var(phi, self.head_cov_, self.noise_var_) if return_std else None
        )
        return z, var

    def predict(self, X, return_std: bool = False):
        """Predictions in the target's units; with ``return_std`` also a 1-sigma spread.

        The spread is the delta-method image of the standardised predictive std (for log
        targets: relative std times the prediction).
        """
        z, var = self._predict_z(X, return_std)
        t = z * self.y_scale_ + self.y_mean_
        yhat = np.exp(t) if self.target_transform == "log" else t
        if not return_std:
            return yhat
        sd_t = np.sqrt(var) * self.y_scale_
        return yhat, (yhat * sd_t if self.target_transform == "log" else sd_t)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags

    # ------------------------------------------------------------------ state for model_io
    def export_state(self) -> tuple[dict[str, torch.Tensor], dict]:
        """Tensors and JSON-able metadata that :meth:`from_state` rebuilds exactly."""
        check_is_fitted(self)
        tensors = {f"net.{k}": v.detach().clone() for k, v in self.net_.state_dict().items()}
        tensors["x_mean"] = torch.as_tensor(self.x_mean_, dtype=torch.float64)
        tensors["x_scale"] = torch.as_tensor(self.x_scale_, dtype=torch.float64)
        tensors["head_cov"] = self.head_cov_.clone()
        meta = {
            "params": {
                k: (list(v) if isinstance(v, tuple) else v) for k, v in self.get_params().items()
            },
            "y_mean": self.y_mean_,
            "y_scale": self.y_scale_,
            "noise_var": self.noise_var_,
            "n_features_in": int(self.n_features_in_),
            "constant_features": [bool(b) for b in self.constant_features_],
            "best_epoch": self.best_epoch_,
            "validation_mape": self.validation_mape_,
        }
        return tensors, meta

    @classmethod
    def from_state(cls, tensors: dict[str, torch.Tensor], meta: dict) -> PowerTrainMLP:
        params = dict(meta["params"])
        params["hidden_layer_sizes"] = tuple(int(h) for h in params["hidden_layer_sizes"])
        est = cls(**params)
        est._check_params()
        n_in = int(meta["n_features_in"])
        est.net_ = mlp.MLP(n_in, est.hidden_layer_sizes, float(est.dropout))
        net_state = {k[4:]: v for k, v in tensors.items() if k.startswith("net.")}
        est.net_.load_state_dict(net_state, strict=True)
        est.net_.eval()
        est.x_mean_ = tensors["x_mean"].numpy().astype(np.float64)
        est.x_scale_ = tensors["x_scale"].numpy().astype(np.float64)
        est.head_cov_ = tensors["head_cov"].to(torch.float64)
        est.y_mean_ = float(meta["y_mean"])
        est.y_scale_ = float(meta["y_scale"])
        est.noise_var_ = float(meta["noise_var"])
        est.n_features_in_ = n_in
        est.constant_features_ = np.asarray(meta["constant_features"], dtype=bool)
        est.best_epoch_ = int(meta["best_epoch"])
        vm = meta.get("validation_mape")
        est.validation_mape_ = None if vm is None else float(vm)
        if (
            est.x_mean_.shape != (n_in,)
            or est.x_scale_.shape != (n_in,)
            or tuple(est.head_cov_.shape) != (est.hidden_layer_sizes[-1] + 1,) * 2
        ):
            raise ValueError("tensor shapes do not match the metadata")
        return est


def _seed(random_state: int | None) -> int:
    if random_state is None:
        return int(np.random.SeedSequence().entropy % (2**62))
    return int(random_state)
