"""Model directories: tensors + JSON, verified before anything is deserialised.

Why: model files get downloaded and shared, so they are data, never code (docs/design.md,
"Model files"). A directory holds ``model.json`` (format name and version, hyper-parameters,
provenance, the SHA-256 of the weights, and the SHA-256 of everything else it says) and
``weights.pt``, a flat dict of tensors that is only ever read with
``torch.load(weights_only=True)`` -- torch's restricted unpickler that refuses any class or
function -- and only after its hash matched. Torch is already a dependency, so no extra
package is needed to read the shipped reference models.

The content hash makes an edited ``model.json`` (inputs reordered, a head's scaling
shifted, heads swapped) fail to load instead of predicting silently wrong numbers. It
guards against accidents and careless edits, not against someone who recomputes it: it
is a checksum, not a signature.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
import warnings
from importlib import resources
from pathlib import Path
from typing import Any, Callable, TypeGuard

import torch

from ..errors import ModelFileError
from ..schema import CONFIG_COLUMNS
from ..schema import TARGET_COLUMNS as TARGETS
from ..utils.files import DISK_ERRNOS, disk_reason, replace_dir
from ..utils.hashing import sha256_file
from .estimator import PowerTrainMLP, base_estimator

FORMAT = "powertrain-predictor"
#: bump on any change an older reader would misread. 2: ``params`` holds the per-head
#: ``estimator`` parameters, ``inputs`` and ``targets`` (1 had the flat Predictor
#: parameters of the time when it re-declared the estimator's; still read). 3: the
#: estimator holds the transfer settings (``transfer_*``) and ``loss`` governs transfers
#: too (``"auto"``); in 1 and 2 a transfer ignored ``loss``, so it reads as ``"auto"``.
#: 4: ``content_sha256`` covers the whole of ``model.json``; 1 to 3 are still read, with
#: a warning that their ``model.json`` cannot be checked for edits. 5: ``constraints``
#: (monotone heads, a power-cap clip an older reader would skip) and a correction that
#: weighs three models (``weights``, ``choice``, an optional from-scratch model)
FORMAT_VERSION = 5
READABLE_VERSIONS = (1, 2, 3, 4, 5)
#: the first version whose ``model.json`` records the SHA-256 of its own content
HASHED_VERSION = 4
#: the field holding the SHA-256 of the rest of ``model.json``
CONTENT_HASH = "content_sha256"
META_FILE = "model.json"
WEIGHTS_FILE = "weights.pt"
#: shipped reference models live in this package (reference_models/ in the repository)
PRETRAINED_PACKAGE = "powertrain._reference_models"


def _version() -> str:
    from .._version import __version__

    return __version__


class UncheckedModelWarning(UserWarning):
    """A model file of an older format: its ``model.json`` has no content hash, so an edit
    to it cannot be detected. Re-saving the model adds one."""


def content_sha256(meta: dict) -> str:
    """SHA-256 of ``model.json``'s content without its own hash field.

    Canonical JSON (sorted keys, no whitespace, floats as Python writes them exactly), so
    re-indenting or re-ordering the file keeps the hash and any change of a value breaks it.
    """
    body = {k: v for k, v in meta.items() if k != CONTENT_HASH}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _disk_error(path: Path, e: OSError) -> ModelFileError:
    return ModelFileError(f"{path}: cannot write the model ({disk_reason(e)})")


def check_writable(path: str | Path) -> None:
    """Refuse a model directory that cannot be written, before any training runs: its
    folder must exist and take a new file (read-only, full or forbidden folders fail
    here with :class:`ModelFileError`, not after minutes of training)."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    if path.exists() and not path.is_dir():
        raise ModelFileError(f"{path}: exists and is not a model directory")
    if not folder.is_dir():
        raise ModelFileError(f"{path}: folder {folder} does not exist")
    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".powertrain-write-test-") as f:
            f.write(b"x")
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        raise _disk_error(folder, e) from None


def save_predictor(model: Any, path: str | Path) -> Path:
    """Write ``model`` to directory ``path`` (created; existing model files replaced)."""
    if not hasattr(model, "heads_"):
        raise ModelFileError("cannot save an unfitted Predictor; call fit() or transfer() first")
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ModelFileError(f"{path}: exists and is not a model directory")
    tensors: dict[str, torch.Tensor] = {}
    heads = {}
    for target in model.targets_:
        t, meta = model.heads_[target].export_state()
        tensors.update({f"{target}.{k}": v.contiguous() for k, v in t.items()})
        heads[target] = meta
    # everything goes into a sibling folder first, which then takes the old one's place:
    # an interrupted save leaves the old model (or no model), never a mix of the two
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        new = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".new"))
    except OSError as e:
        raise _disk_error(path, e) from None
    try:
        os.chmod(new, 0o755)  # mkdtemp makes it private; a model directory is meant to be shared
        with open(new / WEIGHTS_FILE, "wb") as f:  # a file object: the archive name is fixed,
            torch.save(tensors, f)  # so equal tensors give equal bytes
        meta = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "powertrain_version": _version(),
            "torch_version": torch.__version__,
            "inputs": list(model.inputs_),
            "targets": list(model.targets_),
            "weights_file": WEIGHTS_FILE,
            "weights_sha256": sha256_file(new / WEIGHTS_FILE),
            "params": _params_to_json(model),
            "feature_ranges": model.feature_ranges_,
            "n_samples": model.n_samples_,
            "info": model.info_,
            "heads": heads,
            "constraints": getattr(model, "constraints_", {"monotone": {}, "power_cap": None}),
        }
        meta = json.loads(json.dumps(meta))  # hashed as it will be read back
        meta[CONTENT_HASH] = content_sha256(meta)
        (new / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        if path.is_dir():
            for kept in path.iterdir():  # keep what else lives there (e.g. a model card)
                if kept.is_file() and kept.name not in (WEIGHTS_FILE, META_FILE):
                    shutil.copy2(kept, new / kept.name)
        replace_dir(new, path)
    except OSError as e:
        shutil.rmtree(new, ignore_errors=True)
        if e.errno in DISK_ERRNOS:
            raise _disk_error(path, e) from None
        raise
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise
    return path


def _read_meta(path: Path) -> dict:
    meta_path = path / META_FILE
    if not meta_path.is_file():
        raise ModelFileError(f"{path}: not a model directory (no {META_FILE})")
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelFileError(f"{meta_path}: unreadable metadata ({e})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ModelFileError(
            f"{meta_path}: not a {FORMAT} file (format={meta.get('format')!r})"
            if isinstance(meta, dict)
            else f"{meta_path}: not a JSON object"
        )
    version = meta.get("format_version")
    if isinstance(version, bool) or version not in READABLE_VERSIONS:
        raise ModelFileError(
            f"{meta_path}: format version {version!r} is not supported by powertrain "
            f"{_version()} (reads versions {', '.join(map(str, READABLE_VERSIONS))}); "
            "retrain or upgrade"
        )
    missing = [
        k
        for k in (
            "weights_file",
            "weights_sha256",
            "params",
            "feature_ranges",
            "heads",
            "inputs",
            "targets",
        )
        if k not in meta
    ]
    if missing:
        raise ModelFileError(f"{meta_path}: missing field(s) {', '.join(missing)}")
    _check_types(meta_path, meta)
    if version == 1 and (
        list(meta["inputs"]) != list(CONFIG_COLUMNS) or list(meta["targets"]) != list(TARGETS)
    ):
        raise ModelFileError(
            f"{meta_path}: a version-1 file must have the Jetson inputs/targets "
            f"{list(CONFIG_COLUMNS)}/{list(TARGETS)}, found {meta['inputs']}/{meta['targets']}"
        )
    for key in ("inputs", "targets"):
        names = meta[key]
        if not names or len(set(names)) != len(names):
            raise ModelFileError(f"{meta_path}: {key} must be distinct names, got {names!r}")
    if set(meta["heads"]) != set(meta["targets"]):
        raise ModelFileError(
            f"{meta_path}: heads {sorted(meta['heads'])} do not match targets {meta['targets']}"
        )
    if set(meta["feature_ranges"]) != set(meta["inputs"]):
        raise ModelFileError(
            f"{meta_path}: feature_ranges {sorted(meta['feature_ranges'])} do not match "
            f"inputs {meta['inputs']}"
        )
    _check_content_hash(meta_path, meta)
    _check_values(meta_path, meta)
    return meta


def _check_content_hash(meta_path: Path, meta: dict) -> None:
    """Version 4 on: the file says what it held when saved. Older: a warning."""
    if meta["format_version"] < HASHED_VERSION:
        warnings.warn(
            f"{meta_path}: format version {meta['format_version']} has no content hash, so "
            f"edits to {META_FILE} cannot be detected; re-save the model "
            "(Predictor.load(path).save(path)) to add one",
            UncheckedModelWarning,
            stacklevel=4,
        )
        return
    recorded = meta.get(CONTENT_HASH)
    if not isinstance(recorded, str):
        raise ModelFileError(
            f"{meta_path}: missing field {CONTENT_HASH} (format version "
            f"{meta['format_version']} records the SHA-256 of its content)"
        )
    if content_sha256(meta) != recorded:
        raise ModelFileError(
            f"{meta_path}: its content does not match the {CONTENT_HASH} recorded when it "
            "was saved; the file was edited or corrupted (inputs, targets, heads or "
            "scaling changed): restore the original or retrain"
        )


def _finite(x: Any) -> TypeGuard[float]:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _check_values(meta_path: Path, meta: dict) -> None:
    """Numbers a prediction is scaled by: finite, and scales > 0 (a NaN or zero ``y_scale``
    would predict NaN or one constant for every mode, with exit 0)."""
    for target, head in meta["heads"].items():
        if not isinstance(head, dict):
            raise ModelFileError(f"{meta_path}: heads.{target} must be a JSON object")
        where = f"{meta_path}: heads.{target}"
        checks = [("y_mean", False), ("y_scale", True), ("noise_var", None)]
        corr = head.get("correction")
        for key, positive in checks:
            v = head.get(key)
            if not _finite(v) or (positive and v <= 0) or (positive is None and v < 0):
                need = "> 0" if positive else (">= 0" if positive is None else "finite")
                raise ModelFileError(f"{where}.{key} = {v!r} must be a finite number {need}")
        if corr is not None:
            if not isinstance(corr, dict):
                raise ModelFileError(f"{where}.correction must be a JSON object or null")
            weights = corr.get("weights")
            if "weight" in corr or not isinstance(weights, dict):  # before format 5: one
                weights = {"weight": corr.get("weight")}
            elif set(weights) != {"nn", "rx", "scratch"} or not all(
                _finite(w) for w in weights.values()
            ):
                raise ModelFileError(f"{where}.correction.weights must be nn, rx, scratch")
            elif abs(sum(weights.values()) - 1) > 1e-9:
                raise ModelFileError(f"{where}.correction.weights must sum to 1")
            values = {
                "ref_y_mean": corr.get("ref_y_mean"),
                "ref_y_scale": corr.get("ref_y_scale"),
                **{f"weights.{k}": w for k, w in weights.items()},
            }
            for key, v in values.items():
                if key == "ref_y_mean":
                    ok = _finite(v)
                elif key == "ref_y_scale":
                    ok = _finite(v) and v > 0
                else:
                    ok = _finite(v) and 0 <= v <= 1
                if not ok:
                    raise ModelFileError(f"{where}.correction.{key} = {v!r} is out of range")
    for name, rng in meta["feature_ranges"].items():
        valid = isinstance(rng, list) and len(rng) == 2 and all(_finite(v) for v in rng)
        if not valid or rng[0] > rng[1]:
            raise ModelFileError(
                f"{meta_path}: feature_ranges.{name} = {rng!r} must be [low, high], finite"
            )


#: version-1 ``params`` (flat, Predictor-level) -> the estimator parameter they set
_V1_ESTIMATOR_PARAMS = {
    "hidden": "hidden_layer_sizes",
    "dropout": "dropout",
    "learning_rate": "learning_rate",
    "epochs": "epochs",
    "batch_size": "batch_size",
    "validation_fraction": "validation_fraction",
    "input_transform": "input_transform",
    "target_transform": "target_transform",
}


def _params_to_json(model: Any) -> dict:
    params = model.get_params(deep=False)
    est = params.pop("estimator")
    out = {k: (list(v) if isinstance(v, tuple) else v) for k, v in params.items()}
    out["estimator"] = (
        None
        if est is None
        else {k: (list(v) if isinstance(v, tuple) else v) for k, v in est.get_params().items()}
    )
    return out


def _params_from_json(meta: dict) -> dict:
    """Keyword arguments of the Predictor a file describes (either format version)."""
    raw = dict(meta["params"])
    if meta["format_version"] == 1:  # the transfer_* settings did not change predictions
        v1 = {_V1_ESTIMATOR_PARAMS[k]: v for k, v in raw.items() if k in _V1_ESTIMATOR_PARAMS}
        raw = {k: raw[k] for k in ("random_state", "progress") if k in raw}
        raw["estimator"] = v1
    est = raw.get("estimator")
    if est is not None:
        if not isinstance(est, dict):
            raise ValueError("params.estimator must be a JSON object or null")
        est = dict(est)
        if meta["format_version"] < 3 and est.get("loss", "mse") == "mse":
            est["loss"] = "auto"  # MSE for fits, as before; transfers never read it
        if "hidden_layer_sizes" in est:
            est["hidden_layer_sizes"] = tuple(int(h) for h in est["hidden_layer_sizes"])
        raw["estimator"] = PowerTrainMLP(**est)
    for key in ("inputs", "targets"):
        if raw.get(key) is not None:
            raw[key] = tuple(raw[key])
    if isinstance(raw.get("monotone"), list):  # target names (JSON has no tuples)
        raw["monotone"] = tuple(raw["monotone"])
    return raw


def _check_types(meta_path: Path, meta: dict) -> None:
    """Every field its JSON type, so a tampered file is a ModelFileError, not a TypeError."""
    sha = meta["weights_sha256"]
    if not (isinstance(sha, str) and len(sha) == 64 and all(c in "0123456789abcdef" for c in sha)):
        raise ModelFileError(f"{meta_path}: weights_sha256 must be 64 hex digits, got {sha!r}")
    for key in ("inputs", "targets"):
        v = meta[key]
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise ModelFileError(f"{meta_path}: {key} must be a list of names, got {v!r}")
    for key in ("params", "feature_ranges", "heads"):
        if not isinstance(meta[key], dict):
            raise ModelFileError(f"{meta_path}: {key} must be a JSON object")
    if not isinstance(meta.get("info", {}), dict):
        raise ModelFileError(f"{meta_path}: info must be a JSON object")
    n = meta.get("n_samples", 0)
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ModelFileError(f"{meta_path}: n_samples must be an integer >= 0, got {n!r}")


def load_predictor(path: str | Path, factory: Callable[..., Any]) -> Any:
    """Read a model directory into ``factory(**params)`` (the Predictor class, passed in
    so this module never imports it); :class:`ModelFileError` if incomplete, tampered or
    foreign.

    Order matters: metadata is checked, then the weights' SHA-256, and only then are the
    weights read, with torch's tensor-only unpickler.
    """
    path = Path(path)
    if not path.is_dir():
        raise ModelFileError(f"{path}: no such model directory")
    meta = _read_meta(path)
    name = meta["weights_file"]
    if not isinstance(name, str) or Path(name).name != name:
        raise ModelFileError(
            f"{path / META_FILE}: weights_file must be a plain file name, got {name!r}"
        )
    wpath = path / name
    if not wpath.is_file():
        raise ModelFileError(f"{path}: incomplete model directory, {name} is missing")
    digest = sha256_file(wpath)
    if digest != meta["weights_sha256"]:
        raise ModelFileError(
            f"{wpath}: SHA-256 {digest[:12]}... != the {meta['weights_sha256'][:12]}... "
            f"recorded in {META_FILE}; the file was modified or corrupted"
        )
    try:
        tensors = torch.load(wpath, map_location="cpu", weights_only=True)
    except Exception as e:  # UnpicklingError, RuntimeError, zip errors: all mean "refused"
        raise ModelFileError(f"{wpath}: refused to load ({type(e).__name__}: {e})") from None
    if not isinstance(tensors, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in tensors.items()
    ):
        raise ModelFileError(f"{wpath}: expected a flat dict of tensors")
    bad = [k for k, v in tensors.items() if v.is_floating_point() and not torch.isfinite(v).all()]
    if bad:  # a poisoned model would predict NaN everywhere, silently
        raise ModelFileError(f"{wpath}: tensor {bad[0]!r} holds NaN or infinite values")
    bad = [k for k, v in tensors.items() if k.endswith("x_scale") and not (v > 0).all()]
    if bad:  # inputs are divided by it
        raise ModelFileError(f"{wpath}: tensor {bad[0]!r} must be > 0 everywhere")
    try:
        model = factory(**_params_from_json(meta))
        hidden = tuple(base_estimator(model.estimator).hidden_layer_sizes)
        model.heads_ = {}
        for target in meta["targets"]:
            prefix = f"{target}."
            part = {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
            head = PowerTrainMLP.from_state(part, meta["heads"][target])
            if tuple(head.hidden_layer_sizes) != hidden:
                raise ModelFileError(
                    f"{path / META_FILE}: the hidden layers {list(hidden)} in params disagree "
                    f"with the {target} head's layers {list(head.hidden_layer_sizes)}"
                )
            if head.n_features_in_ != len(meta["inputs"]):
                raise ModelFileError(
                    f"{path / META_FILE}: the {target} head reads {head.n_features_in_} "
                    f"inputs, the file lists {len(meta['inputs'])} ({meta['inputs']})"
                )
            model.heads_[target] = head
        model.inputs_ = tuple(meta["inputs"])
        model.targets_ = tuple(meta["targets"])
        model.feature_ranges_ = {
            c: [float(a), float(b)] for c, (a, b) in meta["feature_ranges"].items()
        }
        model.n_samples_ = int(meta.get("n_samples", 0))
        model.info_ = dict(meta.get("info", {}))
        model.constraints_ = _constraints(meta.get("constraints"), meta)
    except ModelFileError:
        raise
    except Exception as e:  # wrong keys, shapes or types inside an otherwise valid file
        raise ModelFileError(f"{path}: inconsistent model ({type(e).__name__}: {e})") from None
    return model


def _constraints(raw: Any, meta: dict) -> dict:
    """The physics a model was built to respect (none in files older than format 3)."""
    if raw is None:
        return {"monotone": {}, "power_cap": None}
    monotone, cap = raw["monotone"], raw["power_cap"]
    for target, dirs in monotone.items():
        head = meta["heads"][target]["params"].get("monotonic_cst")
        if head != [int(dirs.get(c, 0)) for c in meta["inputs"]]:
            raise ValueError(f"the {target} head's monotonic_cst disagrees with constraints")
    if cap is not None:
        if cap["knob"] not in meta["inputs"] or cap["target"] not in meta["targets"]:
            raise ValueError("constraints.power_cap names a column the model does not have")
        cap = {
            "knob": str(cap["knob"]),
            "target": str(cap["target"]),
            "max_excess_w": float(cap["max_excess_w"]),
        }
    return {
        "monotone": {t: {k: int(v) for k, v in d.items()} for t, d in monotone.items()},
        "power_cap": cap,
    }


def pretrained_names() -> list[str]:
    """The shipped reference models, by the name ``Predictor.from_pretrained`` takes.

    Returns
    -------
    list of str
        ``"device/workload"`` names, e.g. ``["orin-agx/mobilenetv3", ...]``.
    """
    root = resources.files(PRETRAINED_PACKAGE)
    names = []
    for device in root.iterdir():
        if device.is_dir() and not device.name.startswith(("_", ".")):
            for model in device.iterdir():
                if model.is_dir() and model.joinpath(META_FILE).is_file():
                    names.append(f"{device.name}/{model.name}")
    return sorted(names)


def load_pretrained(name: str, factory: Callable[..., Any]) -> Any:
    """A shipped reference model by ``device/workload`` name."""
    available = pretrained_names()
    if name not in available:
        raise ModelFileError(
            f"no shipped reference model {name!r}; available: {', '.join(available) or 'none'}"
        )
    device, workload = name.split("/")
    ref = resources.files(PRETRAINED_PACKAGE) / device / workload
    with resources.as_file(ref) as p:
        return load_predictor(p, factory)
