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
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data
from threadpoolctl import threadpool_limits

from . import ensemble, mlp, scratch, uncertainty

_TRANSFORMS = ("none", "log")
#: where a log input transform puts an input of 0 (inputs are knobs: MHz, cores, watts)
LOG_FLOOR = 1e-3
_LOSSES = ("auto", "mse", "mape")
_LAYERS = ("all", "head")
_HEAD_INIT = ("reference", "fresh")
#: the estimator parameters a transfer reads (besides the network it keeps)
TRANSFER_PARAMS = (
    "loss",
    "epochs",
    "learning_rate",
    "transfer_layers",
    "transfer_head_init",
    "transfer_epochs",
    "transfer_learning_rate",
    "transfer_batch_size",
    "transfer_body_lr_scale",
    "transfer_validation_fraction",
    "transfer_dropout",
    "transfer_cv_folds",
    "transfer_blend",
    "transfer_scratch",
)


def _check_choice(name: str, value: Any, choices: tuple) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")


def _check_fraction(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise ValueError(f"{name} must be in [0, 1); got {value!r}")
    if not 0 <= value < 1:
        raise ValueError(f"{name} must be in [0, 1); got {value!r}")


def _check_rate(name: str, value: Any) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, np.number))
        or not (np.isfinite(value) and value > 0)
    ):
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}")


def _check_count(name: str, value: Any, minimum: int = 1) -> None:
    # bool is an int subclass: batch_size=True must not silently mean 1
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")


def base_estimator(estimator: PowerTrainMLP | None) -> PowerTrainMLP:
    """The estimator a Predictor's heads are cloned from: the given one, or the package
    defaults (``PowerTrainMLP()``) for None."""
    if estimator is None:
        return PowerTrainMLP()
    if not isinstance(estimator, PowerTrainMLP):
        raise TypeError(f"estimator must be a PowerTrainMLP, got {type(estimator).__name__}")
    return estimator


class PowerTrainMLP(RegressorMixin, BaseEstimator):
    """MLP regressor with PowerTrain's network (paper Table 4) and ``transfer``.

    This is the one place the predictor's hyper-parameters are declared:
    :class:`~powertrain.predictor.Predictor` holds two clones of one of these.

    The ``transfer_*`` parameters (``transfer_layers``, ``transfer_head_init``,
    ``transfer_epochs``, ``transfer_learning_rate``, ``transfer_batch_size``,
    ``transfer_body_lr_scale``, ``transfer_validation_fraction``, ``transfer_dropout``,
    ``transfer_cv_folds``, ``transfer_blend``, ``transfer_scratch``) say how
    :meth:`transfer` retrains this estimator on a few samples; :meth:`transfer`
    documents each.

    Parameters
    ----------
    hidden_layer_sizes
        widths of the hidden layers (paper: 256, 128, 64).
    dropout
        dropout rate after the first two hidden layers (the paper gives no rate).
    learning_rate
        Adam step size (paper: 1e-3).
    epochs
        passes over the training rows (paper: 100).
    batch_size
        minibatch rows; the whole set when it has fewer rows.
    validation_fraction
        share of rows held out to pick the best epoch (paper: 90:10).
    loss
        ``"mse"`` on standardised targets (paper), ``"mape"`` on original units
        (what the paper needed for cross-device transfer), or ``"auto"``: MSE, except
        for a transfer to samples of another device (MAPE).
    input_transform, target_transform
        ``"log"`` (default) fits relative structure
        (time ~ 1/f) and cut the reference's time MAPE on the twin corpora
        (benchmarks/results/accuracy*); ``"none"`` is the paper's plain standardisation
        (and what inputs that can be zero or negative need).
    random_state
        seed for initialisation, dropout, shuffling and the validation split.
    verbose
        show a progress bar while training.
    monotonic_cst
        per input, +1 (prediction never falls as it rises), -1 (never
        rises) or 0 (free); None: no constraint. Held by construction, also after a
        transfer (sign-constrained network, sign-constrained ridge correction); the
        name and meaning are scikit-learn's ``HistGradientBoostingRegressor``'s.

    """

    def __init__(
        self,
        hidden_layer_sizes: tuple[int, ...] = (256, 128, 64),
        dropout: float = 0.1,
        learning_rate: float = 1e-3,
        epochs: int = 100,
        batch_size: int = 32,
        validation_fraction: float = 0.1,
        loss: str = "auto",
        input_transform: str = "log",
        target_transform: str = "log",
        random_state: int | None = 0,
        verbose: bool = False,
        transfer_layers: str = "all",
        transfer_head_init: str = "reference",
        transfer_epochs: int | None = None,
        transfer_learning_rate: float | None = None,
        transfer_batch_size: int | None = None,
        transfer_body_lr_scale: float = 1.0,
        transfer_validation_fraction: float = 0.0,
        transfer_dropout: float = 0.0,
        transfer_cv_folds: int = 5,
        transfer_blend: bool = True,
        transfer_scratch: bool = True,
        monotonic_cst: tuple[int, ...] | None = None,
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
        self.transfer_layers = transfer_layers
        self.transfer_head_init = transfer_head_init
        self.transfer_epochs = transfer_epochs
        self.transfer_learning_rate = transfer_learning_rate
        self.transfer_batch_size = transfer_batch_size
        self.transfer_body_lr_scale = transfer_body_lr_scale
        self.transfer_validation_fraction = transfer_validation_fraction
        self.transfer_dropout = transfer_dropout
        self.transfer_cv_folds = transfer_cv_folds
        self.transfer_blend = transfer_blend
        self.transfer_scratch = transfer_scratch
        self.monotonic_cst = monotonic_cst

    # ------------------------------------------------------------------ transforms
    def _check_params(self) -> None:
        _check_choice("loss", self.loss, _LOSSES)
        _check_choice("input_transform", self.input_transform, _TRANSFORMS)
        _check_choice("target_transform", self.target_transform, _TRANSFORMS)
        _check_choice("transfer_layers", self.transfer_layers, _LAYERS)
        _check_choice("transfer_head_init", self.transfer_head_init, _HEAD_INIT)
        for name in ("dropout", "validation_fraction", "transfer_dropout"):
            _check_fraction(name, getattr(self, name))
        _check_fraction("transfer_validation_fraction", self.transfer_validation_fraction)
        _check_rate("learning_rate", self.learning_rate)
        _check_rate("transfer_body_lr_scale", self.transfer_body_lr_scale)
        _check_count("epochs", self.epochs)
        _check_count("batch_size", self.batch_size)
        _check_count("transfer_cv_folds", self.transfer_cv_folds, minimum=0)
        cst = self.monotonic_cst
        if cst is not None and (
            np.ndim(cst) != 1 or any(isinstance(c, bool) or c not in (-1, 0, 1) for c in cst)
        ):
            raise ValueError(f"monotonic_cst must be None or a list of -1, 0, 1; got {cst!r}")
        for name in ("transfer_blend", "transfer_scratch"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValueError(f"{name} must be True or False; got {getattr(self, name)!r}")

    def _tx(self, X: np.ndarray) -> np.ndarray:
        if self.input_transform == "log":
            if np.any(X < 0):
                raise ValueError(
                    "Negative values in data passed to PowerTrainMLP: "
                    "input_transform='log' needs inputs >= 0"
                )
            # scikit-learn's positive_only contract includes 0 (an input at 0 maps to
            # log(LOG_FLOOR)); the Predictor refuses 0 in a knob before it gets here
            return np.log(np.maximum(X, LOG_FLOOR))
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

    @staticmethod
    def _split(n: int, rng: np.random.Generator, fraction: float) -> tuple[np.ndarray, np.ndarray]:
        n_val = int(np.floor(n * fraction))
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
        gen = torch.Generator().manual_seed(_torch_seed(self.random_state))
        if self.monotonic_cst is not None and len(self.monotonic_cst) != X.shape[1]:
            raise ValueError(
                f"monotonic_cst has {len(self.monotonic_cst)} entries for {X.shape[1]} inputs"
            )
        self.net_ = mlp.MLP(
            X.shape[1], tuple(self.hidden_layer_sizes), float(self.dropout), monotone=self._signs()
        )
        self.correction_: dict[str, Any] | None = None
        mlp.init_mlp(self.net_, gen)
        # an input that never varied taught the net nothing: start it neutral, so that a
        # later transfer to other values (e.g. another batch size) is not a random shift
        with torch.no_grad():
            self.net_.linears()[0].weight[:, torch.as_tensor(self.constant_features_)] = 0.0
        self._train(
            X,
            y,
            "mape" if self.loss == "mape" else "mse",
            int(self.epochs),
            float(self.learning_rate),
            int(self.batch_size),
            gen,
            params=None,
            desc="fit",
        )
        return self

    def transfer(self, X, y, *, cross_device: bool = False) -> PowerTrainMLP:
        """A new estimator for the workload (or device) ``X, y`` were measured on.

        Every setting is one of this estimator's ``transfer_*`` parameters (plus ``loss``),
        so ``set_params`` and GridSearchCV reach them and model files record them.
        ``cross_device``: the samples come from another device than this estimator's
        training data, which ``loss="auto"`` answers with MAPE (what the paper needed
        across devices) instead of MSE.

        Three steps, each its own method: :meth:`_kfold_errors` (how well this transfer
        and the ridge correction predict rows they did not see), :meth:`_fine_tune` (this
        estimator's network retrained on all rows), :meth:`_correction` (the
        frozen network plus a linear correction), and with ``transfer_scratch`` a model
        of the samples alone (:mod:`~powertrain.predictor.scratch`). The combination of
        them with the lowest k-fold error is kept (``correction_["choice"]``): the
        inverse-error blend of the first two unless the samples say otherwise, so a
        useless reference is dropped and more samples never make the model worse than
        the samples alone. ``self`` is never modified.

        Fine-tuning keeps the reference's input scaling (the hidden features are defined
        on it) and standardises the new targets on their own. ``transfer_layers="head"``
        trains the output layer only; ``"all"`` fine-tunes everything.
        ``transfer_head_init="fresh"`` re-initialises the output layer as the paper
        describes; ``"reference"`` starts from the reference's (the new targets are
        standardised, so it is a close first guess). ``transfer_epochs`` and
        ``transfer_learning_rate`` default (None) to ``epochs`` and ``learning_rate``;
        ``transfer_batch_size`` to all rows (full batch). ``transfer_dropout`` is the
        rate while retraining only (the layout is unchanged).

        Defaults are what the twin-corpus benchmark measured best (benchmarks/accuracy):
        no hold-out (choosing the epoch on 5 of 50 rows lost more than it gained), no
        dropout, and the blend (``transfer_blend``; needs ``transfer_cv_folds`` >= 2): the
        fine-tuned net can re-shape the response but varies from draw to draw at 10-50
        samples; the correction cannot re-shape it but barely varies; their errors are
        far from perfectly correlated, so the average beats both. ``transfer_cv_folds``
        also sets the uncertainty's noise term (a fine-tuned net's training residuals
        are near zero); 0 skips the k-fold step and the blend.
        """
        # tens of rows: every product is too small to share between threads, and shared
        # threads stall whenever another process holds a core
        with mlp.single_threaded(), threadpool_limits(limits=1):
            return self._transfer(X, y, cross_device)

    def _transfer(self, X, y, cross_device: bool) -> PowerTrainMLP:
        """:meth:`transfer` on torch and BLAS as the caller set them (one thread each)."""
        check_is_fitted(self)
        self._check_params()
        X, y = validate_data(self, X, y, y_numeric=True, dtype=np.float64, reset=False)
        settings = self._transfer_settings(len(X), cross_device)
        seed = settings["random_state"]
        t = self._ty(y)
        n_folds = min(int(self.transfer_cv_folds), len(X) // 2)
        folds = list(_kfold(n_folds, seed + 1).split(X)) if n_folds >= 2 else []
        blend = bool(self.transfer_blend)
        states = self._batched_fine_tunes(X, y, folds, settings)
        errors = self._kfold_errors(
            X, y, t, folds, settings, blend, blend and bool(self.transfer_scratch), states
        )
        correction: dict | None = None
        cv_mse = float(np.mean(errors["nn"] ** 2)) if folds else 0.0
        if blend and folds:
            choice, weights, cv_mse = scratch.choose_weights(errors)
            correction = self._correction(X, t, weights, choice)
        new = self._fine_tune(X, y, settings, cv_mse, None if states is None else states[-1])
        new.correction_ = correction
        return new

    def _batched_fine_tunes(self, X, y, folds: list, settings: dict) -> list | None:
        """The fold fine-tunes and the all-rows one trained as one batched network
        (:mod:`~powertrain.predictor.ensemble`): their state dicts, folds first. None
        when a setting draws random numbers per fit (a fresh head, dropout, minibatches,
        a hold-out) or splits the learning rate: those train one after another."""
        if not _batchable(settings, len(X)):
            return None
        t = self._ty(y)
        rows = np.zeros((len(folds) + 1, len(X)), dtype=bool)
        for i, (tr, _) in enumerate(folds):
            rows[i, tr] = True
        rows[-1] = True
        means = np.array([t[r].mean() for r in rows])
        scales = np.array([float(t[r].std()) or 1.0 for r in rows])
        z = (t[None, :] - means[:, None]) / scales[:, None]
        return ensemble.fine_tune(
            self.net_,
            self._scale_x(X),
            z.astype(np.float32),
            rows,
            loss=settings["loss"],
            y_mean=means,
            y_scale=scales,
            log_target=self.target_transform == "log",
            epochs=settings["epochs"],
            lr=settings["learning_rate"],
            layers=settings["layers"],
        )

    def _transfer_settings(self, n_rows: int, cross_device: bool) -> dict:
        """The transfer parameters with their defaults resolved (what a transfer used)."""
        loss = self.loss
        if loss == "auto":
            loss = "mape" if cross_device else "mse"
        epochs = self.epochs if self.transfer_epochs is None else self.transfer_epochs
        lr = (
            self.learning_rate
            if self.transfer_learning_rate is None
            else self.transfer_learning_rate
        )
        bs = n_rows if self.transfer_batch_size is None else self.transfer_batch_size
        _check_count("transfer_epochs", epochs)
        _check_count("transfer_batch_size", bs)
        _check_rate("transfer_learning_rate", lr)
        return dict(
            layers=self.transfer_layers,
            head_init=self.transfer_head_init,
            body_lr_scale=float(self.transfer_body_lr_scale),
            dropout=float(self.transfer_dropout),
            loss=loss,
            epochs=int(epochs),
            learning_rate=float(lr),
            batch_size=int(bs),
            validation_fraction=float(self.transfer_validation_fraction),
            random_state=_torch_seed(self.random_state),  # one seed: folds and the fit
        )

    def _fine_tune(
        self,
        X,
        y,
        settings: dict,
        cv_mse: float = 0.0,
        state: dict | None = None,
        finish: bool = True,
    ) -> PowerTrainMLP:
        """This estimator's network, output layer replaced or kept, retrained on ``X, y``
        (``state``: already trained, batched). ``finish=False`` (a k-fold fit, only
        asked for predictions) skips the uncertainty.

        ``cv_mse`` (transformed-target units) floors the noise term: a fine-tuned net is
        not expected to beat its own k-fold error, nor the reference's held-out error.
        """
        new = copy.copy(self)  # shallow: params and learned arrays, replaced below
        # a transfer (and its k-fold refits) takes well under a second: no progress bars
        new.set_params(verbose=False, random_state=settings["random_state"])
        yt = new._ty(y)
        new.y_mean_ = float(yt.mean())
        new.y_scale_ = float(yt.std()) or 1.0
        new.net_ = copy.deepcopy(self.net_)
        new.correction_ = None
        new.transfer_settings_ = {k: v for k, v in settings.items() if k != "random_state"}
        _set_dropout(new.net_, settings["dropout"])
        gen = torch.Generator().manual_seed(settings["random_state"])
        if settings["head_init"] == "fresh":
            head = new.net_.head
            bound = 1.0 / np.sqrt(head.in_features)
            with torch.no_grad():
                head.weight.uniform_(-bound, bound, generator=gen)
                head.bias.uniform_(-bound, bound, generator=gen)
        head_params = list(new.net_.head.parameters())
        if settings["layers"] == "head":
            params: list | None = head_params
        elif settings["body_lr_scale"] != 1.0:  # gentler on the kept layers than on the new one
            body = {
                "params": list(new.net_.body.parameters()),
                "lr": settings["learning_rate"] * settings["body_lr_scale"],
            }
            params = [body, {"params": head_params}]
        else:
            params = None
        noise_floor = max(
            self.noise_var_ * (self.y_scale_ / new.y_scale_) ** 2, cv_mse / new.y_scale_**2
        )
        new._train(
            X,
            y,
            settings["loss"],
            settings["epochs"],
            settings["learning_rate"],
            settings["batch_size"],
            gen,
            params=params,
            desc="transfer",
            noise_floor=noise_floor,
            validation_fraction=settings["validation_fraction"],
            trained=state,
            finish=finish,
        )
        _set_dropout(new.net_, float(new.dropout))
        return new

    def _signs(self) -> tuple[int, ...] | None:
        """The network's per-input signs (None when nothing is constrained)."""
        cst = self.monotonic_cst
        return None if cst is None else tuple(int(c) for c in cst)

    def _ridge_signs(self) -> np.ndarray | None:
        """Signs the ridge correction's coefficients must have: the inputs', and
        ``1 + c >= 0`` on the frozen network's prediction (so it is not turned over)."""
        signs = self._signs()
        return None if signs is None or not any(signs) else np.array([*signs, 0])

    def _ridge_features(self, X: np.ndarray) -> np.ndarray:
        """Scaled inputs and the frozen network's prediction (transformed-target units)."""
        xs = self._scale_x(X).astype(np.float64)
        return np.column_stack([xs, self._net_t(self.net_, xs, pad=False)])

    def _kfold_errors(
        self,
        X,
        y,
        t,
        folds: list,
        settings: dict,
        blend: bool,
        from_scratch: bool = False,
        states: list | None = None,
    ) -> dict[str, np.ndarray]:
        """Out-of-fold residuals (transformed units) on the same folds: of the fine-tuned
        net (``"nn"``), with ``blend`` of the ridge-corrected reference (``"rx"``), and
        with ``from_scratch`` of the model of the samples alone (``"scratch"``).
        ``states``: the fold fine-tunes already trained (batched), in fold order."""
        errors: dict[str, list] = {"nn": []}
        if blend:
            errors["rx"] = []
        if from_scratch:
            errors["scratch"] = []
        feats = self._ridge_features(X) if blend else None
        xs = self._scale_x(X).astype(np.float64)
        if states is not None and folds:  # every fold's fine-tune on every row at once
            z_out = ensemble.predict(self.net_, states[: len(folds)], xs)
        for i, (tr, va) in enumerate(folds):
            if states is None:
                m = self._fine_tune(X[tr], y[tr], settings, finish=False)
                pred = m._net_t(m.net_, xs[va], pad=False)
            else:  # the fold's own target standardisation, as _fine_tune sets it
                pred = z_out[i, va] * (float(t[tr].std()) or 1.0) + t[tr].mean()
            errors["nn"].append(t[va] - pred)
            if feats is not None:
                coef = _ridge(feats[tr], t[tr] - feats[tr, -1], self._ridge_signs())
                errors["rx"].append(t[va] - feats[va, -1] - feats[va] @ coef[:-1] - coef[-1])
            if from_scratch:
                alone = scratch.fit(xs[tr], t[tr], self._signs(), _ridge)
                errors["scratch"].append(t[va] - scratch.predict(alone, xs[va]))
        return {k: np.concatenate(v) if v else np.zeros(0) for k, v in errors.items()}

    def _correction(self, X, t, weights: dict[str, float], choice: str) -> dict:
        """What the transferred estimator averages in beside its own network, fitted on
        all rows: the frozen network plus a ridge correction (when ``weights["rx"]``)
        and the from-scratch model (when ``weights["scratch"]``); kept and saved."""
        corr: dict = {
            "net": None,
            "coef": None,
            "scratch": None,
            "ref_y_mean": float(self.y_mean_),
            "ref_y_scale": float(self.y_scale_),
            "weights": weights,
            "choice": choice,
        }
        if weights["rx"] > 0:
            feats = self._ridge_features(X)
            corr["net"] = copy.deepcopy(self.net_)
            corr["coef"] = _ridge(feats, t - feats[:, -1], self._ridge_signs())
        if weights["scratch"] > 0:
            xs = self._scale_x(X).astype(np.float64)
            corr["scratch"] = scratch.fit(xs, t, self._signs(), _ridge)
        return corr

    def _net_t(self, net, xs: np.ndarray, y_mean=None, y_scale=None, pad=True) -> np.ndarray:
        """``net``'s prediction for scaled inputs, in transformed-target units."""
        out = mlp.predict_with(net, xs, pad=pad)[0].numpy().astype(np.float64)
        return out * (self.y_scale_ if y_scale is None else y_scale) + (
            self.y_mean_ if y_mean is None else y_mean
        )

    def _train(
        self,
        X,
        y,
        loss,
        epochs,
        lr,
        batch_size,
        gen,
        params,
        desc,
        noise_floor: float = 0.0,
        validation_fraction: float | None = None,
        trained: dict | None = None,
        finish: bool = True,
    ) -> None:
        """Train (or, with ``trained``, take those weights as trained), then (``finish``)
        set the uncertainty, the held-out MAPE and the training record."""
        rng = np.random.default_rng(_torch_seed(self.random_state))
        frac = self.validation_fraction if validation_fraction is None else validation_fraction
        tr, va = self._split(len(X), rng, frac)
        xs, z = self._scale_x(X), self._z(y)
        if trained is not None:
            self.net_.load_state_dict(trained)
            self.net_.eval()
            info = {"best_epoch": epochs - 1, "history": {"train": [], "val": []}}
        else:
            info = self._fit_net(xs, z, tr, va, loss, epochs, lr, batch_size, gen, params, desc)
        if finish:  # thousands of rows in small chunks: as the training, single-threaded
            with mlp.single_threaded():
                self._finish(X, y, xs, z, tr, va, info, noise_floor)

    def _fit_net(self, xs, z, tr, va, loss, epochs, lr, batch_size, gen, params, desc) -> dict:
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
        return info

    def _finish(self, X, y, xs, z, tr, va, info: dict, noise_floor: float) -> None:
        self.best_epoch_ = int(info["best_epoch"])
        self.loss_curve_ = info["history"]["train"]
        self.validation_curve_ = info["history"]["val"]
        # uncertainty: residuals of the chosen weights, posterior of the output layer
        phi, out_t = mlp.predict(self.net_, xs, pad=False)
        out = out_t.numpy()
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

    def transfer_choice(self) -> dict[str, Any] | None:
        """What :meth:`transfer` kept, for people: ``{"choice": name, "weights": {model:
        weight}}`` with the models named as :data:`~powertrain.predictor.scratch.MODEL_NAMES`
        says; None for an estimator that was fitted, not transferred."""
        check_is_fitted(self)
        if getattr(self, "transfer_settings_", None) is None:
            return None
        corr = getattr(self, "correction_", None)
        choice, weights = (
            ("fine-tuned", {"nn": 1.0}) if corr is None else (corr["choice"], corr["weights"])
        )
        return {
            "choice": str(choice),
            "weights": {
                scratch.MODEL_NAMES[k]: round(float(w), 4) for k, w in weights.items() if w > 0
            },
        }

    # ------------------------------------------------------------------ predict
    def _predict_z(self, X, return_std: bool):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        xs = self._scale_x(X)
        quad = uncertainty.QuadForm(self.head_cov_) if return_std else None
        out, q = mlp.predict_with(self.net_, xs, quad)
        z = out.numpy().astype(np.float64)
        corr = getattr(self, "correction_", None)
        if corr is not None:  # the k-fold choice of fine-tuned, corrected reference, scratch
            w = corr["weights"]
            t = w["nn"] * (z * self.y_scale_ + self.y_mean_)
            if w["rx"] > 0:
                f_ref = self._net_t(corr["net"], xs, corr["ref_y_mean"], corr["ref_y_scale"])
                c = corr["coef"]
                t_rx = f_ref + xs.astype(np.float64) @ c[:-2] + f_ref * c[-2] + c[-1]
                t = t + w["rx"] * t_rx
            if w["scratch"] > 0:
                t = t + w["scratch"] * scratch.predict(corr["scratch"], xs.astype(np.float64))
            z = (t - self.y_mean_) / self.y_scale_
        var = None if q is None else uncertainty.variance_from(q, self.head_cov_, self.noise_var_)
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
        tags.input_tags.positive_only = self.input_transform == "log"
        tags.target_tags.positive_only = self.target_transform == "log"
        return tags

    # ------------------------------------------------------------------ state for model_io
    def export_state(self) -> tuple[dict[str, torch.Tensor], dict]:
        """Tensors and JSON-able metadata that :meth:`from_state` rebuilds exactly."""
        check_is_fitted(self)
        tensors = {f"net.{k}": v.detach().clone() for k, v in self.net_.state_dict().items()}
        tensors["x_mean"] = torch.as_tensor(self.x_mean_, dtype=torch.float64)
        tensors["x_scale"] = torch.as_tensor(self.x_scale_, dtype=torch.float64)
        tensors["head_cov"] = self.head_cov_.clone()
        corr = getattr(self, "correction_", None)
        if corr is not None:
            if corr["net"] is not None:
                for k, v in corr["net"].state_dict().items():
                    tensors[f"correction.net.{k}"] = v.detach().clone()
                tensors["correction.coef"] = torch.as_tensor(corr["coef"], dtype=torch.float64)
            if corr["scratch"] is not None:
                tensors["correction.scratch_coef"] = torch.as_tensor(
                    corr["scratch"]["coef"], dtype=torch.float64
                )
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
        if corr is not None:
            saved: dict[str, Any] = {
                k: corr[k] for k in ("ref_y_mean", "ref_y_scale", "weights", "choice")
            }
            if corr["scratch"] is not None:
                saved["scratch"] = {
                    "knots": corr["scratch"]["knots"],
                    "pairs": corr["scratch"]["pairs"],
                }
            meta["correction"] = saved
        if getattr(self, "transfer_settings_", None) is not None:
            meta["transfer_settings"] = dict(self.transfer_settings_)
        return tensors, meta

    @classmethod
    def from_state(cls, tensors: dict[str, torch.Tensor], meta: dict) -> PowerTrainMLP:
        params = dict(meta["params"])
        params["hidden_layer_sizes"] = tuple(int(h) for h in params["hidden_layer_sizes"])
        est = cls(**params)
        est._check_params()
        n_in = int(meta["n_features_in"])
        if est.monotonic_cst is not None:
            est.monotonic_cst = tuple(int(c) for c in est.monotonic_cst)
        est.net_ = mlp.MLP(n_in, est.hidden_layer_sizes, float(est.dropout), monotone=est._signs())
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
        est.correction_ = None
        if meta.get("correction") is not None:
            est.correction_ = _correction_from_state(est, tensors, meta["correction"], n_in)
        ts = meta.get("transfer_settings")
        if ts is not None:
            if not isinstance(ts, dict):
                raise ValueError("transfer_settings must be a JSON object")
            est.transfer_settings_ = dict(ts)
        vm = meta.get("validation_mape")
        est.validation_mape_ = None if vm is None else float(vm)
        if (
            est.x_mean_.shape != (n_in,)
            or est.x_scale_.shape != (n_in,)
            or tuple(est.head_cov_.shape) != (est.hidden_layer_sizes[-1] + 1,) * 2
        ):
            raise ValueError("tensor shapes do not match the metadata")
        return est


#: ridge strengths tried by leave-one-out (closed form, RidgeCV's default mode)
_RIDGE_ALPHAS = np.logspace(-3, 4, 29)


def _ridge(F: np.ndarray, r: np.ndarray, signs: np.ndarray | None = None) -> np.ndarray:
    """Ridge of ``r`` on the standardised columns of ``F``, strength by leave-one-out.

    Returns coefficients on the raw columns, then the intercept (7 numbers for the
    Jetson inputs), which is what the model file stores. With ``signs`` (+1/-1/0 per
    column) a coefficient of the wrong sign drops its column and the rest is refitted
    (an active set), and the last column's coefficient (the frozen network's
    prediction) may not go below -1: the correction keeps the monotone contract.
    """
    active = np.ones(F.shape[1], dtype=bool)
    while True:
        w = np.zeros(F.shape[1])
        if active.any():
            w[active], intercept = _ridge_cv(F[:, active], r)
        else:
            intercept = float(np.mean(r))
        if signs is None:
            break
        wrong = (signs * w < 0) | (np.arange(len(w)) == len(w) - 1) & (w < -1)
        wrong &= active
        if not wrong.any():
            break
        active &= ~wrong
    return np.append(w, intercept)


def _ridge_cv(F: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, float]:
    """``make_pipeline(StandardScaler(), RidgeCV(alphas=_RIDGE_ALPHAS))`` in closed form.

    Why not the pipeline: a transfer fits about twenty of these on tens of rows, where
    scikit-learn's input checks cost ten times the arithmetic. Same model: columns
    standardised (near-constant ones left unscaled, as StandardScaler decides), the
    intercept unpenalised, the strength with the lowest mean squared leave-one-out
    error (the first on a tie), from one SVD for all strengths. Returns coefficients on
    the raw columns and the intercept.
    """
    n = len(r)
    mean = F.mean(axis=0)
    var = F.var(axis=0)
    eps = np.finfo(np.float64).eps
    constant = var <= n * eps * var + (n * mean * eps) ** 2
    scale = np.where(constant, 1.0, np.sqrt(var))
    scale = np.where(scale < 10 * eps, 1.0, scale)
    X = (F - mean) / scale
    X -= X.mean(axis=0)
    y = r - r.mean()
    U, s, Vt = np.linalg.svd(X, full_matrices=False)
    s2 = (s**2)[:, None]
    shrink = s2 / (s2 + _RIDGE_ALPHAS)  # (rank, alphas): the hat matrix's eigenvalues
    Uy = U.T @ y
    with np.errstate(divide="ignore", invalid="ignore"):
        loo = (y[:, None] - U @ (shrink * Uy[:, None])) / (1 - (U**2) @ shrink - 1 / n)
        mse = np.mean(loo**2, axis=0)
    best = int(np.argmin(np.where(np.isnan(mse), np.inf, mse)))
    coef = Vt.T @ (s / (s**2 + _RIDGE_ALPHAS[best]) * Uy) / scale
    return coef, float(r.mean() - mean @ coef)


def _batchable(settings: dict, n_rows: int) -> bool:
    """Whether a transfer's fine-tunes train batched: no random numbers per fit (a
    fresh head, dropout, minibatches, a hold-out) and one learning rate. Such a
    transfer also leaves torch's global random state alone (what lets
    :class:`~powertrain.predictor.Predictor` run its heads side by side)."""
    return (
        settings["head_init"] == "reference"
        and settings["dropout"] == 0
        and settings["validation_fraction"] == 0
        and settings["body_lr_scale"] == 1.0
        and settings["batch_size"] >= n_rows
    )


def transfers_in_parallel(heads: list[PowerTrainMLP], n_rows: int, cross_device: bool) -> bool:
    """Whether these heads may transfer side by side, one thread each: every one batched
    (nothing touches torch's global random state; each uses its own buffers)."""
    try:
        return all(_batchable(h._transfer_settings(n_rows, cross_device), n_rows) for h in heads)
    except ValueError:
        return False  # a bad setting: the head's own transfer says which


def _correction_from_state(est: PowerTrainMLP, tensors: dict, raw: dict, n_in: int) -> dict:
    """A saved correction; files before the scratch model hold one ``weight`` (of the
    fine-tuned net against the corrected reference)."""
    if "weights" in raw:
        weights = {k: float(raw["weights"][k]) for k in ("nn", "rx", "scratch")}
    else:
        weights = {"nn": float(raw["weight"]), "rx": 1 - float(raw["weight"]), "scratch": 0.0}
    corr: dict = {
        "ref_y_mean": float(raw["ref_y_mean"]),
        "ref_y_scale": float(raw["ref_y_scale"]),
        "weights": weights,
        "choice": str(raw.get("choice", "blend")),
        "net": None,
        "coef": None,
        "scratch": None,
    }
    if "correction.coef" in tensors:
        corr["net"] = mlp.MLP(
            n_in, est.hidden_layer_sizes, float(est.dropout), monotone=est._signs()
        )
        pre = "correction.net."
        corr["net"].load_state_dict(
            {k[len(pre) :]: v for k, v in tensors.items() if k.startswith(pre)}, strict=True
        )
        corr["net"].eval()
        corr["coef"] = tensors["correction.coef"].numpy().astype(np.float64)
        if corr["coef"].shape != (n_in + 2,):
            raise ValueError("correction coefficients do not match the inputs")
    elif weights["rx"] > 0:
        raise ValueError("the correction weighs a reference network the file does not hold")
    if raw.get("scratch") is not None:
        state: dict[str, Any] = {
            "knots": [[float(k) for k in ks] for ks in raw["scratch"]["knots"]],
            "pairs": [[int(i), int(j)] for i, j in raw["scratch"]["pairs"]],
        }
        state["coef"] = tensors["correction.scratch_coef"].numpy().astype(np.float64)
        n_feat = sum(len(k) + 1 for k in state["knots"]) + len(state["pairs"])
        if len(state["knots"]) != n_in or state["coef"].shape != (n_feat + 1,):
            raise ValueError("the from-scratch model does not match the inputs")
        corr["scratch"] = state
    elif weights["scratch"] > 0:
        raise ValueError("the correction weighs a from-scratch model the file does not hold")
    return corr


def _set_dropout(net: torch.nn.Module, rate: float) -> None:
    for m in net.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = rate


def _torch_seed(random_state: int | np.random.RandomState | None) -> int:
    """An integer seed for torch and numpy generators from scikit-learn's random_state
    (an int is used as is, so a seed means the same weights as before)."""
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        return int(random_state)
    return int(check_random_state(random_state).randint(0, 2**31 - 1))


def _kfold(n_folds: int, seed: int) -> Any:
    """scikit-learn's KFold, imported on first use: sklearn.model_selection (and
    sklearn.metrics with it) is import time that ``powertrain predict`` never needs."""
    from sklearn.model_selection import KFold

    return KFold(n_folds, shuffle=True, random_state=seed)
