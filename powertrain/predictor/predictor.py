"""``Predictor``: time and power of a training workload in every power mode.

Why: this is the object users hold. It pairs a time head and a power head (PowerTrain,
paper §3), speaks DataFrames in the package schema, and carries what it was trained on,
so it can warn about extrapolation and say where it came from when saved.
"""

from __future__ import annotations

import copy
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, clone
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from ..devices.device import table_device
from ..devices.specs import register_device, registered_devices
from ..errors import DataError
from ..metrics import mape
from ..schema import CONFIG_COLUMNS, TARGET_COLUMNS
from . import checks, mlp, spec_features
from .estimator import TRANSFER_PARAMS, PowerTrainMLP, base_estimator, transfers_in_parallel

#: the two heads by default, in the order they are trained and written
TARGETS = TARGET_COLUMNS
#: rows the network sees at once in predict (its activations: ~60 MB per 65,536 rows)
_PREDICT_ROWS = 65_536
#: what to do about inputs that can be 0 (said when a log transform meets one)
_LOG_FIX = "use PowerTrainMLP(input_transform='none') for inputs that can be 0"
#: ``Predictor(monotone=...)`` settings by name (the ``--monotone`` choices of the
#: benchmarks and ``tools/train_reference.py``)
MONOTONE_CHOICES: dict[str, Any] = {"none": None, "power": ("power_w",), "device": "device"}
#: estimator parameters that fix the network a transfer keeps
_LAYOUT_PARAMS = ("hidden_layer_sizes", "input_transform", "target_transform", "monotonic_cst")


class Predictor(BaseEstimator):
    """A time head and a power head over a device's knobs and ``batch_size``.

    The constructor only stores its parameters (scikit-learn style); ``fit`` and
    ``transfer`` read them.

    Parameters
    ----------
    estimator
        the per-target model both heads are cloned from (``sklearn.base.clone``);
        None: ``PowerTrainMLP()``, whose defaults are the package's (paper Table 4
        network, log inputs and targets, the transfer settings measured best). Change a
        hyper-parameter with ``Predictor(PowerTrainMLP(epochs=50))`` or
        ``set_params(estimator__epochs=50)``.
    inputs
        the configuration columns the heads read. None: the knobs of the device a
        ``device`` column names plus ``batch_size`` (a Jetson's ``cores, cpu_mhz,
        gpu_mhz, mem_mhz, batch_size``; a datacenter GPU's ``power_limit_w,
        batch_size``), or a Jetson's when the table has no ``device`` column.
    targets
        the measured columns predicted; None: ``time_ms, power_w``.
    random_state
        seed of both heads (the power head gets ``random_state + 1``).
    progress
        tqdm bars (None: reference training only).
    reference
        a shipped model name (``"orin-agx/resnet18"``) or a model directory;
        then :meth:`fit` is a transfer from it with this ``estimator``'s settings, so
        ``GridSearchCV(Predictor(reference=...), {"estimator__transfer_epochs": ...})``
        tunes a transfer on the samples.
    monotone
        physics a head :meth:`fit` trains must respect by construction (a
        transfer keeps its reference's). None (default): no constraint; target names
        (``("power_w",)``): the directions the device's spec declares for those targets
        (a Jetson: power never falls as a clock or the core count rises); ``"device"``:
        every direction it declares (also time never rising with the GPU or memory
        clock); a dict ``{target: {knob: +1 or -1}}``: these. Why off by default,
        measured on the twin: references with monotone power put more cap picks over
        the cap (PT@50, 30 draws: 18.3 -> 21.9 % of picks more than 1 W over, worse on
        every workload) for PT@50 power MAPE within -0.13 to +0.39 point, and a
        time-monotone reference lost up to 2.2 points of PT@50 time MAPE (docs:
        Results). Where the device declares a ``power_cap`` knob, predicted power above
        that limit by more than the training samples ever went is clipped to it
        (whatever this setting).
    """

    def __init__(
        self,
        estimator: PowerTrainMLP | None = None,
        *,
        inputs: Sequence[str] | None = None,
        targets: Sequence[str] | None = None,
        random_state: int | None = 0,
        progress: bool | None = None,
        reference: str | Path | None = None,
        monotone: str | Sequence[str] | dict | None = None,
    ):
        self.estimator = estimator
        self.inputs = inputs
        self.targets = targets
        self.random_state = random_state
        self.progress = progress
        self.reference = reference
        self.monotone = monotone

    # ------------------------------------------------------------------ training
    def _head(self, index: int) -> PowerTrainMLP:
        base = base_estimator(self.estimator)
        seed = None if self.random_state is None else int(self.random_state) + index
        return clone(base).set_params(random_state=seed, verbose=self.progress is not False)

    def fit(self, corpus: pd.DataFrame, source: str | None = None) -> Predictor:
        """Train both heads from scratch on a profiled corpus (a reference, or a baseline).

        ``corpus`` needs the input columns plus the targets; a ``device``/``workload``
        column, when present, is recorded as provenance. With ``reference`` set this is a
        transfer from that model instead (with this estimator's transfer settings).

        Parameters
        ----------
        corpus : DataFrame
            One row per profiled configuration: the inputs and the targets.
        source : str, optional
            The corpus's name or file, for error messages and provenance.

        Returns
        -------
        Predictor
            This predictor, fitted.
        """
        if self.reference is not None:
            return self._fit_by_transfer(corpus, source)
        inputs, targets = resolve_columns(self.inputs, self.targets, corpus, source)
        checks.check_column_roles(inputs, targets, source)
        feats = tuple(f for f in inputs if f in spec_features.SPEC_FEATURES)
        corpus = spec_features.attach(corpus, feats, None, "fit")
        df = checks.samples_table(
            corpus, "fit", source, inputs, targets, catalog_knobs=self.inputs is None
        )
        if base_estimator(self.estimator).input_transform == "log":
            checks.check_log_inputs(df, inputs, source, _LOG_FIX)
        X = df[list(inputs)].to_numpy(dtype=np.float64)
        device = table_device(df, source) if self.inputs is None else None
        monotone = _monotone_map(self.monotone, device, inputs, targets)
        t0 = time.perf_counter()
        self.heads_ = {
            t: self._head(i)
            .set_params(monotonic_cst=_signs(monotone.get(t), inputs))
            .fit(X, df[t].to_numpy(dtype=np.float64))
            for i, t in enumerate(targets)
        }
        self.constraints_ = {
            "monotone": monotone,
            "power_cap": _power_cap(device, df, inputs, targets),
        }
        self.inputs_, self.targets_ = inputs, targets
        self.feature_ranges_ = checks.ranges_of(df, inputs)
        self.n_samples_ = len(df)
        self.info_: dict[str, Any] = {
            "kind": "reference",
            "trained_on": _describe(corpus, len(df)),
            "fit_seconds": round(time.perf_counter() - t0, 3),
        }
        if feats:
            self.info_[spec_features.INFO_KEY] = list(feats)
        return self

    def transfer(
        self,
        samples: pd.DataFrame,
        *,
        random_state: int | None = None,
        source: str | None = None,
        own_measurements: bool = False,
        **params,
    ) -> Predictor:
        """A new predictor for the workload (or device) the ``samples`` were profiled on.

        Keeps this predictor's hidden layers, replaces the output layers and retrains on
        the samples (paper §3.2), full-batch, then averages each head with this
        predictor's frozen network plus a ridge correction, weighted by their k-fold
        errors (:meth:`PowerTrainMLP.transfer`). Every setting is a parameter of the
        ``estimator`` (``loss`` and the ``transfer_*`` ones), so
        ``set_params(estimator__transfer_epochs=50)`` or GridSearchCV over
        ``Predictor(reference=...)`` reach it; ``params`` sets some for this call only
        (``ref.transfer(s, loss="mape")``) and the new predictor records them. With the
        default ``loss="auto"`` a transfer to samples of another device uses MAPE. The
        samples must have this predictor's inputs: a device with other knobs is an
        error. This predictor is left untouched. Warns (:class:`ExtrapolationWarning`)
        if the samples leave the reference's ranges.

        Parameters
        ----------
        samples : DataFrame
            The new workload's profiled samples (about 50): inputs and targets.
        random_state : int, optional
            Seed of the transfer; default this predictor's.
        source : str, optional
            The samples' name or file, for error messages and provenance.
        own_measurements : bool
            The samples are a board's readings taken by this package (the decision
            engine's own): the outlier rule, which catches typing and unit errors in a
            table, is skipped, since a board's real times can span more than 100x
            (thread counts, batch sizes, power modes) and one such measurement must not
            stop a training job.
        **params
            Estimator settings for this call only (``loss="mape"``, ``transfer_epochs``).

        Returns
        -------
        Predictor
            A new, fitted predictor.
        """
        check_is_fitted(self, "heads_")
        feats = spec_features.features_of(self.info_)
        samples = spec_features.attach(samples, feats, None, "transfer")
        self._check_same_knobs(samples, source)
        df = checks.samples_table(
            samples,
            "transfer",
            source,
            self.inputs_,
            self.targets_,
            catalog_knobs=self.inputs is None,
            free=spec_features.knobs_only(self.inputs_, self.info_),
            outliers=not own_measurements,
        )
        if self.heads_[self.targets_[0]].input_transform == "log":
            checks.check_log_inputs(df, self.inputs_, source, _LOG_FIX)
        checks.warn_extrapolation(df, self.feature_ranges_, "transfer samples")
        X = df[list(self.inputs_)].to_numpy(dtype=np.float64)
        seed = self.random_state if random_state is None else random_state
        config = self._transfer_config(params)
        cross_device = _other_device(self.info_, df)
        t0 = time.perf_counter()
        new = clone(self).set_params(estimator=config if params else self.estimator)
        settings = {k: v for k, v in config.get_params().items() if k in TRANSFER_PARAMS}
        heads = [
            copy.copy(self.heads_[t]).set_params(
                **settings, random_state=None if seed is None else int(seed) + i
            )
            for i, t in enumerate(self.targets_)
        ]

        def run(i: int) -> PowerTrainMLP:
            y = df[self.targets_[i]].to_numpy(dtype=np.float64)
            return heads[i]._transfer(X, y, cross_device)

        # the heads side by side on single-threaded torch and BLAS (as predict): each is
        # tens of rows, too small to share a product between threads, and threads that
        # wait for each other at every product stall when another process holds a core
        side_by_side = transfers_in_parallel(heads, len(X), cross_device)
        try:
            with mlp.single_threaded() as workers, threadpool_limits(limits=1):
                if side_by_side and workers > 1 and len(heads) > 1:
                    with ThreadPoolExecutor(min(workers, len(heads))) as pool:
                        done = list(pool.map(run, range(len(heads))))
                else:
                    done = [run(i) for i in range(len(heads))]
        except ValueError as e:  # a setting the estimator refused (epochs=0, layers="")
            raise DataError(f"transfer: {e}") from None
        new.heads_ = dict(zip(self.targets_, done))
        new.inputs_, new.targets_ = self.inputs_, self.targets_
        cap = getattr(self, "constraints_", {}).get("power_cap")
        new.constraints_ = {
            "monotone": getattr(self, "constraints_", {}).get("monotone", {}),
            "power_cap": None if cap is None else _cap_from(cap["knob"], cap["target"], df),
        }
        new.feature_ranges_ = checks.union_ranges(
            self.feature_ranges_, checks.ranges_of(df, self.inputs_)
        )
        new.n_samples_ = len(df)
        first = next(iter(new.heads_.values()))
        used = first.transfer_settings_
        new.info_ = {
            "kind": "transferred",
            "trained_on": _describe(samples, len(df)),
            "reference": self.info_,
            "transfer": {
                "loss": used["loss"],
                "cross_device": cross_device,
                "layers": used["layers"],
                "head_init": used["head_init"],
                "epochs": used["epochs"],
                "residual_blend": first.correction_ is not None,
                "choice": {t: h.transfer_choice() for t, h in new.heads_.items()},
            },
            "fit_seconds": round(time.perf_counter() - t0, 3),
        }
        if feats:
            new.info_[spec_features.INFO_KEY] = list(feats)
        return new

    def _fit_by_transfer(self, samples: pd.DataFrame, source: str | None) -> Predictor:
        assert self.reference is not None  # fit() comes here only with a reference
        ref_path = Path(self.reference)
        ref = (
            Predictor.load(ref_path)
            if ref_path.is_dir()
            else Predictor.from_pretrained(str(ref_path))
        )
        if self.estimator is not None:
            head = next(iter(ref.heads_.values()))
            layout = {k: head.get_params()[k] for k in _LAYOUT_PARAMS[:3]}
            ref.estimator = clone(self.estimator).set_params(**layout)
        new = ref.transfer(samples, random_state=self.random_state, source=source)
        for name in ("heads_", "inputs_", "targets_", "feature_ranges_", "n_samples_", "info_"):
            setattr(self, name, getattr(new, name))
        return self

    def _transfer_config(self, params: dict) -> PowerTrainMLP:
        """This predictor's estimator with ``params`` set: what a transfer reads its
        settings from. The network is the reference's, so its layout cannot change."""
        base = base_estimator(self.estimator)
        if not params:
            base._check_params()
            return base
        try:
            config = clone(base).set_params(**params)
            config._check_params()
        except ValueError as e:
            raise DataError(f"transfer: {e}") from None
        fixed = [k for k in params if k in _LAYOUT_PARAMS and params[k] != base.get_params()[k]]
        if fixed:
            raise DataError(
                f"transfer: {', '.join(fixed)} describe the reference's network, which a "
                "transfer keeps; train a new reference to change them"
            )
        return config

    def _check_same_knobs(self, samples: pd.DataFrame, source: str | None) -> None:
        """A transfer between devices with different knobs has nothing to keep: refuse it
        by name rather than as a missing column."""
        if not isinstance(samples, pd.DataFrame):
            return  # samples_table says what is wrong
        try:
            dev = table_device(samples, source)
        except DataError:
            if self.inputs is None:
                raise
            return  # the caller named the inputs: the device column is provenance only
        knobs = spec_features.knobs_only(self.inputs_, self.info_)
        if dev is not None and tuple(dev.config_columns) != knobs:
            where = f"{source}: " if source else ""
            raise DataError(
                f"{where}the samples come from {dev.name}, whose configuration columns are "
                f"{', '.join(dev.config_columns)}; this model reads {', '.join(self.inputs_)}. "
                "A transfer needs the same knobs; train a reference on this kind of device"
            )

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
        model's held-out error) for safety margins. Where the device has a power-limit
        knob (its spec's ``power_cap``) also ``power_w_max``: the most the hardware lets
        the configuration draw (its limit plus the largest excess the samples showed),
        which a safety margin never needs to exceed
        (:func:`~powertrain.decisions.optimise.fastest_under`).
        Existing ``time_ms``/``power_w`` columns are overwritten. Warns on
        configurations outside the training ranges. A transferred predictor's result
        says what each head's transfer kept in ``.attrs["transfer_choice"]`` (as
        ``info_["transfer"]["choice"]``: the fine-tuned network, the corrected
        reference, the samples-only model or a blend, with weights).

        Parameters
        ----------
        modes : DataFrame
            One row per configuration (the model's input columns).
        batch_size : int or iterable of int, optional
            One size for every row, or several (each mode repeated per size); default
            the ``batch_size`` column of ``modes``.
        return_std : bool
            Also the 1-sigma spreads ``time_ms_std`` and ``power_w_std``.

        Returns
        -------
        DataFrame
            ``modes`` with the predicted columns added.
        """
        check_is_fitted(self, "heads_")
        feats = spec_features.features_of(self.info_)
        added = [f for f in feats if isinstance(modes, pd.DataFrame) and f not in modes]
        modes = spec_features.attach(modes, feats, spec_features.target_device(self.info_))
        frame = checks.config_table(
            modes, batch_size, self.inputs_, catalog_knobs=self.inputs is None
        )
        X = frame[list(self.inputs_)].to_numpy(dtype=np.float64)
        checks.warn_extrapolation(frame, self.feature_ranges_, "predict")
        checks.warn_other_device(frame, self.info_)
        checks.warn_one_batch_size(frame, self.feature_ranges_)
        out = frame.drop(columns=added)  # the spec features filled in: not the caller's
        cap = getattr(self, "constraints_", {}).get("power_cap")
        rows = [slice(i, i + _PREDICT_ROWS) for i in range(0, len(X), _PREDICT_ROWS)]
        tasks = [(target, i) for target in self.targets_ for i in range(len(rows))]

        def run(task):  # a slice at a time: the network's memory stays bounded
            head, r = self.heads_[task[0]], rows[task[1]]
            return head.predict(X[r], return_std=True) if return_std else (head.predict(X[r]), None)

        # the heads and slices run side by side on single-threaded torch: two-thread
        # products wait for each other at every step, which stalls badly when another
        # process (on a Jetson, the training job) holds a core
        with mlp.single_threaded() as workers, ThreadPoolExecutor(workers) as pool:
            results = dict(zip(tasks, pool.map(run, tasks)))
        for target in self.targets_:
            parts = [results[(target, i)] for i in range(len(rows))]
            mean = np.concatenate([m for m, _ in parts])
            if return_std:
                std = np.concatenate([s for _, s in parts])
            bound = None
            if cap is not None and cap["target"] == target:  # physics: at most the limit
                limit = frame[cap["knob"]].to_numpy(dtype=np.float64)
                bound = limit + max(cap["max_excess_w"], 0.0)
                mean = np.minimum(mean, bound)
            out[target] = mean
            if return_std:
                out[f"{target}_std"] = std
            if bound is not None:
                out[f"{target}_max"] = bound
        std_cols = [f"{t}_std" for t in self.targets_] if return_std else []
        checks.check_finite(out, [*self.targets_, *std_cols])
        choice = (self.info_.get("transfer") or {}).get("choice")
        if choice is not None:
            out.attrs["transfer_choice"] = copy.deepcopy(choice)
        return out

    def score_by_target(self, samples: pd.DataFrame) -> dict[str, float]:
        """MAPE % of each target on measured ``samples`` (the paper's metric)."""
        check_is_fitted(self, "heads_")
        df = checks.measured_table(
            samples, None, self.inputs_, self.targets_, catalog_knobs=self.inputs is None
        )
        pred = self.predict(df[list(self.inputs_)], return_std=False)
        return {t: mape(df[t].to_numpy(), pred[t].to_numpy()) for t in self.targets_}

    def score(self, samples: pd.DataFrame) -> float:
        """One float, higher is better (scikit-learn's contract): minus the mean MAPE %
        over the targets. Per-target errors: :meth:`score_by_target`."""
        return -float(np.mean(list(self.score_by_target(samples).values())))

    # ------------------------------------------------------------------ files
    def save(self, path: str | Path) -> Path:
        """Write a model directory (tensors + JSON, no pickle: loading one runs no code).

        Parameters
        ----------
        path : str or Path
            The directory to write.

        Returns
        -------
        Path
            The directory written.
        """
        from .model_io import save_predictor

        return save_predictor(self, path)

    @classmethod
    def load(cls, path: str | Path) -> Predictor:
        """Read a model directory written by :meth:`save`; refuses anything suspicious
        (a file it did not write, a checksum that does not match).

        Parameters
        ----------
        path : str or Path
            The model directory.

        Returns
        -------
        Predictor
            The fitted predictor.
        """
        from .model_io import load_predictor

        model = load_predictor(path, cls)
        _register_recorded_devices(model.info_)
        return model

    @classmethod
    def from_pretrained(cls, name: str) -> Predictor:
        """A shipped reference model, the start of every transfer.

        Parameters
        ----------
        name : str
            ``"device/workload"``, e.g. ``"orin-agx/resnet18"``.

        Returns
        -------
        Predictor
            The fitted reference.
        """
        from .model_io import load_pretrained

        return load_pretrained(name, cls)


def resolve_columns(
    inputs: Sequence[str] | None,
    targets: Sequence[str] | None,
    table: pd.DataFrame,
    source: str | None = None,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The inputs and targets a model trains on for ``table``: as given, else the knobs
    of the device a ``device`` column names plus ``batch_size`` (a Jetson's without that
    column), and ``time_ms, power_w``."""
    targets = tuple(TARGETS if targets is None else targets)
    if inputs is not None:
        return tuple(inputs), targets
    if not isinstance(table, pd.DataFrame):
        return tuple(CONFIG_COLUMNS), targets  # the table check says what is wrong
    try:
        dev = table_device(table, source)
    except DataError as e:
        raise DataError(
            f"{e}; or, for a device outside the catalog without a spec, name the inputs: "
            "Predictor(inputs=(...knob columns..., 'batch_size'))"
        ) from None
    return (tuple(CONFIG_COLUMNS) if dev is None else dev.config_columns), targets


def _monotone_map(
    monotone: str | Sequence[str] | dict | None,
    device,
    inputs: Sequence[str],
    targets: Sequence[str],
) -> dict[str, dict[str, int]]:
    """Per target, the knobs with a guaranteed direction that this model reads."""
    if monotone is None:
        return {}
    declared = {} if device is None else device.spec.monotone
    if isinstance(monotone, dict):
        spec = monotone
    elif monotone == "device":
        spec = declared
    elif isinstance(monotone, (list, tuple)) and all(isinstance(t, str) for t in monotone):
        spec = {t: declared[t] for t in monotone if t in declared}
    else:
        raise DataError(
            f"monotone must be 'device', target names, a dict or None; got {monotone!r}"
        )
    out = {}
    for target, dirs in spec.items():
        if target not in targets:
            continue
        unknown = [k for k in dirs if k not in inputs]
        if unknown and isinstance(monotone, dict):
            raise DataError(
                f"monotone[{target!r}] names {unknown}, not among the inputs {list(inputs)}"
            )
        kept = {k: int(v) for k, v in dirs.items() if k in inputs}
        if kept:
            out[target] = kept
    return out


def _signs(dirs: dict[str, int] | None, inputs: Sequence[str]) -> tuple[int, ...] | None:
    return None if not dirs else tuple(int(dirs.get(c, 0)) for c in inputs)


def _cap_from(knob: str, target: str, df: pd.DataFrame) -> dict:
    """How far the samples' power ever went above the power limit they ran under."""
    excess = df[target].to_numpy(dtype=np.float64) - df[knob].to_numpy(dtype=np.float64)
    return {"knob": knob, "target": target, "max_excess_w": float(np.max(excess))}


def _power_cap(device, df: pd.DataFrame, inputs: Sequence[str], targets: Sequence[str]):
    knob = None if device is None else device.spec.power_cap
    if knob is None and device is not None and device.spec.knobs and "power_w" in targets:
        warnings.warn(
            f"device {device.spec.name!r} has no power-limit knob (no 'power_cap' in its "
            "spec, no 'power_limit_w' knob): predicted power has no hardware guard "
            "(power_w_max), so picks under a power cap rest on the prediction alone",
            UserWarning,
            stacklevel=3,
        )
    if knob is None or knob not in inputs or "power_w" not in targets:
        return None
    return _cap_from(knob, "power_w", df)


def _other_device(info: dict, samples: pd.DataFrame) -> bool:
    """The samples name a device the model was not trained on (what ``loss="auto"``
    answers with MAPE); False when either side does not say."""
    if "device" not in samples.columns:
        return False
    trained = info.get("trained_on", {}).get("device")
    if not trained:
        return False
    return bool(set(map(str, samples["device"].dropna().unique())) - set(trained))


def _describe(df: pd.DataFrame, n: int) -> dict:
    """Provenance recorded with a model: row count and the ids present in the table, and
    the spec of every device that is not in the catalog (so a loaded model knows it)."""
    d: dict = {"rows": int(n)}
    for col in ("device", "workload", "batch_size"):
        if col in df.columns:
            vals = sorted({str(v) if col != "batch_size" else int(v) for v in df[col].dropna()})
            d[col] = vals if len(vals) <= 8 else vals[:8] + ["..."]
    user = registered_devices()
    specs = {i: user[i].to_dict() for i in d.get("device", []) if i in user}
    if specs:
        d["device_specs"] = specs
    return d


def _register_recorded_devices(info: Any) -> None:
    """Register the user device specs a model file recorded (its own and its reference's)."""
    while isinstance(info, dict):
        for spec in (info.get("trained_on") or {}).get("device_specs", {}).values():
            register_device(spec)
        info = info.get("reference")
