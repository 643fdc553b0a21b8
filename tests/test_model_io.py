"""Model directories: bit-identical round trip; refuse pickles, tampering, old formats."""

from __future__ import annotations

import json
import pickle
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from synthetic import synthetic_corpus

import powertrain as pt
from powertrain.errors import ModelFileError
from powertrain.predictor import PowerTrainMLP, Predictor, pretrained_names
from powertrain.predictor.model_io import (
    FORMAT_VERSION,
    META_FILE,
    WEIGHTS_FILE,
    UncheckedModelWarning,
    content_sha256,
)
from powertrain.utils.hashing import sha256_file

pytestmark = pytest.mark.slow

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def grid() -> pd.DataFrame:
    return pt.get_device("orin-agx").profiling_grid().sample(500, random_state=1)


@pytest.fixture(scope="module")
def model(grid) -> Predictor:
    ref = Predictor(PowerTrainMLP(hidden_layer_sizes=(32, 16, 8), epochs=5), progress=False).fit(
        synthetic_corpus(grid)
    )
    return ref.transfer(synthetic_corpus(grid, "c").sample(30, random_state=0), epochs=20)


@pytest.fixture()
def saved(model, tmp_path) -> Path:
    return model.save(tmp_path / "m")


def test_round_trip_is_bit_identical(model, saved, grid):
    loaded = Predictor.load(saved)
    modes = grid.assign(batch_size=16)
    a, b = model.predict(modes), loaded.predict(modes)
    for c in ("time_ms", "power_w", "time_ms_std", "power_w_std"):
        assert np.array_equal(a[c].to_numpy(), b[c].to_numpy()), c
    assert repr(loaded.get_params()) == repr(model.get_params())
    assert loaded.feature_ranges_ == model.feature_ranges_
    assert loaded.info_["kind"] == "transferred"
    for t, head in loaded.heads_.items():  # the k-fold choice and its models came back
        assert head.correction_ is not None
        assert head.correction_["weights"] == model.heads_[t].correction_["weights"]
    # a loaded model transfers again
    loaded.transfer(synthetic_corpus(grid, "b").sample(10, random_state=2), epochs=3)


def test_files_are_tensors_and_json(saved):
    assert sorted(p.name for p in saved.iterdir()) == [META_FILE, WEIGHTS_FILE]
    meta = json.loads((saved / META_FILE).read_text())
    assert meta["format_version"] == FORMAT_VERSION and meta["weights_sha256"] == sha256_file(
        saved / WEIGHTS_FILE
    )
    assert meta["content_sha256"] == content_sha256(meta)
    tensors = torch.load(saved / WEIGHTS_FILE, weights_only=True)
    assert all(isinstance(v, torch.Tensor) for v in tensors.values())


class _Payload:
    """Unpickling this would create ``path`` -- the proof that code ran."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _rehash(d: Path) -> None:
    meta = json.loads((d / META_FILE).read_text())
    meta["weights_sha256"] = sha256_file(d / WEIGHTS_FILE)
    _write_sealed(d, meta)


def _write_sealed(d: Path, meta: dict) -> None:
    """Write ``meta`` with its content hash recomputed: what someone who knows the format
    would do, so the checks behind the hash are tested too."""
    meta["content_sha256"] = content_sha256(meta)
    (d / META_FILE).write_text(json.dumps(meta))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
@pytest.mark.parametrize("how", ["plain-pickle", "torch-zip"])
def test_pickle_payload_refused_without_running(saved, tmp_path, how):
    marker = tmp_path / "pwned"
    if how == "plain-pickle":
        (saved / WEIGHTS_FILE).write_bytes(pickle.dumps({"x": _Payload(str(marker))}))
    else:
        torch.save({"x": _Payload(str(marker))}, saved / WEIGHTS_FILE)
    _rehash(saved)  # an attacker would fix the hash too: the unpickler must still refuse
    with pytest.raises(ModelFileError, match="refused"):
        Predictor.load(saved)
    assert not marker.exists()


def test_tampered_weights_refused(saved):
    w = saved / WEIGHTS_FILE
    tensors = torch.load(w, weights_only=True)
    key = next(k for k in tensors if k.endswith("head.bias"))
    tensors[key] = tensors[key] + 1.0
    torch.save(tensors, w)
    with pytest.raises(ModelFileError, match="SHA-256"):
        Predictor.load(saved)


@pytest.mark.parametrize(
    "damage, match",
    [
        (lambda d: (d / WEIGHTS_FILE).unlink(), "incomplete"),
        (lambda d: (d / META_FILE).unlink(), "not a model directory"),
        (lambda d: (d / META_FILE).write_text("{not json"), "unreadable"),
        (lambda d: _edit(d, format_version=99), "version 99 is not supported"),
        (lambda d: _edit(d, format="something-else"), "not a powertrain-predictor"),
        (lambda d: _edit(d, inputs=["cores"]), "feature_ranges .* do not match inputs"),
        (lambda d: _edit(d, targets=["time_ms"]), "heads .* do not match targets"),
        (lambda d: _edit(d, inputs=["cores", "cores"]), "distinct names"),
        (lambda d: _edit(d, weights_file="../../etc/passwd"), "plain file name"),
        (lambda d: _drop(d, "heads"), "missing field"),
        (lambda d: _drop_tensor(d), "inconsistent model"),
        (lambda d: _edit(d, weights_sha256=12345), "64 hex digits"),
        (lambda d: _edit(d, inputs="cores"), "list of names"),
        (lambda d: _edit(d, heads=[1, 2]), "heads must be a JSON object"),
        (lambda d: _edit(d, n_samples="many"), "n_samples"),
        (lambda d: _poison_tensor(d), "NaN or infinite"),
    ],
)
def test_damaged_directories_refused(saved, damage, match):
    damage(saved)
    with pytest.raises(ModelFileError, match=match):
        Predictor.load(saved)


def _edit(d: Path, **changes) -> None:
    meta = json.loads((d / META_FILE).read_text())
    meta.update(changes)
    _write_sealed(d, meta)


def _drop(d: Path, key: str) -> None:
    meta = json.loads((d / META_FILE).read_text())
    del meta[key]
    _write_sealed(d, meta)


def _poison_tensor(d: Path) -> None:
    tensors = torch.load(d / WEIGHTS_FILE, weights_only=True)
    key = next(k for k in tensors if k.endswith("head.bias"))
    tensors[key] = torch.full_like(tensors[key], float("nan"))
    torch.save(tensors, d / WEIGHTS_FILE)
    _rehash(d)  # hash matches: only the finiteness check can catch it


def _drop_tensor(d: Path) -> None:
    tensors = torch.load(d / WEIGHTS_FILE, weights_only=True)
    del tensors[next(k for k in tensors if k.endswith("x_scale"))]
    torch.save(tensors, d / WEIGHTS_FILE)
    _rehash(d)


def test_missing_directory_and_unknown_pretrained(tmp_path):
    with pytest.raises(ModelFileError, match="no such model directory"):
        Predictor.load(tmp_path / "nope")
    with pytest.raises(ModelFileError, match="no shipped reference model"):
        Predictor.from_pretrained("orin-agx/not-a-model")


def test_unfitted_cannot_be_saved(tmp_path):
    with pytest.raises(ModelFileError, match="unfitted"):
        Predictor().save(tmp_path / "x")


@pytest.mark.parametrize("name", pretrained_names())
def test_shipped_reference_models_load_and_predict(name):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UncheckedModelWarning)  # current format: hash checked
        ref = Predictor.from_pretrained(name)
    device = name.split("/")[0]
    if ref.info_.get("spec_features"):  # a family reference: a device it was trained on
        device = ref.info_["trained_on"]["device"][0]
    modes = pt.get_device(device).profiling_grid().head(50).assign(device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = ref.predict(modes, batch_size=16)
    assert (out["time_ms"] > 0).all() and (out["power_w"] > 0).all()


def test_copy_of_directory_loads(saved, tmp_path):
    dest = tmp_path / "copy"
    shutil.copytree(saved, dest)
    Predictor.load(dest)


def test_saving_is_deterministic(model, tmp_path):
    a, b = model.save(tmp_path / "a"), model.save(tmp_path / "b")
    assert sha256_file(a / WEIGHTS_FILE) == sha256_file(b / WEIGHTS_FILE)


def test_an_interrupted_save_leaves_the_old_model_loadable(tmp_path, monkeypatch):
    from powertrain.predictor import model_io

    ref = Predictor.from_pretrained("orin-agx/mobilenetv3")
    target = tmp_path / "m"
    ref.save(target)
    (target / "README.md").write_text("model card")
    before = (target / "weights.pt").read_bytes()

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(model_io, "sha256_file", boom)  # fails after the weights are written
    with pytest.raises(OSError, match="disk full"):
        Predictor.from_pretrained("orin-agx/resnet18").save(target)
    monkeypatch.undo()
    assert (target / "weights.pt").read_bytes() == before
    Predictor.load(target)  # still the old, whole model
    assert [p.name for p in tmp_path.iterdir()] == ["m"]  # no half-written folder left
    Predictor.from_pretrained("orin-agx/resnet18").save(target)  # a good save replaces it
    assert (target / "weights.pt").read_bytes() != before
    assert (target / "README.md").read_text() == "model card"


def test_architecture_in_model_json_must_match_the_tensors(tmp_path):
    src = tmp_path / "m"
    Predictor.from_pretrained("orin-agx/resnet18").save(src)
    meta = json.loads((src / "model.json").read_text())
    meta["params"]["estimator"] = {"hidden_layer_sizes": [512, 128, 64]}  # weights: 256-128-64
    _write_sealed(src, meta)
    with pytest.raises(ModelFileError, match=r"hidden layers \[512, 128, 64\] in params disagree"):
        Predictor.load(src)
    meta["params"]["estimator"] = None  # the default estimator: 256-128-64
    meta["heads"]["power_w"]["params"]["hidden_layer_sizes"] = [512, 128, 64]
    _write_sealed(src, meta)
    with pytest.raises(ModelFileError):
        Predictor.load(src)


def test_a_version_1_file_still_loads_and_predicts_the_same(model, saved, grid):
    """Files written before the Predictor held clones (flat parameters, format 1) load
    into the same model."""
    meta = json.loads((saved / "model.json").read_text())
    est = meta["params"].pop("estimator")
    meta["params"].update(
        hidden=est["hidden_layer_sizes"],
        **{k: est[k] for k in ("dropout", "learning_rate", "epochs", "batch_size")},
        validation_fraction=est["validation_fraction"],
        input_transform=est["input_transform"],
        target_transform=est["target_transform"],
        transfer_epochs=100,
        transfer_residual_blend=True,
    )
    del meta["params"]["inputs"], meta["params"]["targets"]
    meta["format_version"] = 1
    del meta["content_sha256"]
    (saved / "model.json").write_text(json.dumps(meta))
    with pytest.warns(UncheckedModelWarning, match="re-save"):
        old = Predictor.load(saved)
    assert old.estimator.get_params() == model.estimator.get_params()
    assert old.inputs_ == model.inputs_ and old.targets_ == model.targets_
    modes = grid.head(30)
    pd.testing.assert_frame_equal(old.predict(modes, 16), model.predict(modes, 16))
    meta["inputs"] = ["power_limit_w", "batch_size"]  # version 1 knew only the Jetson inputs
    (saved / "model.json").write_text(json.dumps(meta))
    with pytest.raises(ModelFileError, match="version-1 file must have the Jetson inputs"):
        Predictor.load(saved)


def test_transfer_settings_are_saved_and_a_version_2_loss_reads_as_auto(model, saved):
    """The transfer settings live in the estimator (and so in the file); a version-2
    file's ``loss="mse"`` never governed transfers, so it reads as ``"auto"``."""
    meta = json.loads((saved / "model.json").read_text())
    assert "transfer_epochs" in meta["params"]["estimator"]
    assert meta["heads"]["time_ms"]["transfer_settings"]["epochs"] == 20
    meta["format_version"] = 2
    meta["params"]["estimator"]["loss"] = "mse"
    for k in [k for k in meta["params"]["estimator"] if k.startswith("transfer_")]:
        del meta["params"]["estimator"][k]
    (saved / "model.json").write_text(json.dumps(meta))
    old = Predictor.load(saved)
    assert old.estimator.loss == "auto" and old.estimator.transfer_cv_folds == 5


def _swap_heads(meta: dict) -> None:
    h = meta["heads"]
    h["time_ms"], h["power_w"] = h["power_w"], h["time_ms"]


def _shift(key: str, value) -> object:
    def edit(meta: dict) -> None:
        meta["heads"]["power_w"][key] = value(meta["heads"]["power_w"][key])

    return edit


def _reorder(meta: dict) -> None:
    meta["inputs"] = [meta["inputs"][2], meta["inputs"][1], meta["inputs"][0], *meta["inputs"][3:]]


@pytest.mark.parametrize(
    "edit",
    [
        _reorder,
        _swap_heads,
        _shift("y_mean", lambda v: v + 1.0),
        _shift("y_scale", lambda v: float("nan")),
        _shift("y_scale", lambda v: 0.0),
        lambda meta: meta["info"].update(kind="reference"),
    ],
    ids=["inputs-reordered", "heads-swapped", "y_mean-shifted", "y_scale-nan", "y_scale-0", "info"],
)
def test_any_edit_of_model_json_is_refused(saved, edit):
    """The content hash covers all of model.json, not only the weights."""
    meta = json.loads((saved / META_FILE).read_text())
    edit(meta)
    (saved / META_FILE).write_text(json.dumps(meta, indent=2))
    with pytest.raises(ModelFileError, match="content does not match the content_sha256"):
        Predictor.load(saved)


def test_reformatting_model_json_keeps_it_loadable(saved):
    """Whitespace and key order are not content."""
    meta = json.loads((saved / META_FILE).read_text())
    (saved / META_FILE).write_text(json.dumps(dict(reversed(list(meta.items())))))
    Predictor.load(saved)


@pytest.mark.parametrize(
    "edit, match",
    [
        (_shift("y_scale", lambda v: float("nan")), r"heads.power_w.y_scale = nan must be"),
        (
            _shift("y_scale", lambda v: 0.0),
            r"heads.power_w.y_scale = 0.0 must be a finite number > 0",
        ),
        (_shift("y_mean", lambda v: float("inf")), r"heads.power_w.y_mean = inf"),
        (_shift("noise_var", lambda v: -1.0), r"heads.power_w.noise_var = -1.0"),
        (lambda m: m["feature_ranges"].update(cores=[12.0, 2.0]), r"feature_ranges.cores"),
    ],
)
def test_values_are_checked_even_with_a_matching_hash(saved, edit, match):
    """Someone who recomputes the hash still cannot load NaN or zero scales."""
    meta = json.loads((saved / META_FILE).read_text())
    edit(meta)
    _write_sealed(saved, meta)
    with pytest.raises(ModelFileError, match=match):
        Predictor.load(saved)


def test_a_version_2_file_loads_with_a_warning_and_checked_values(model, saved, grid):
    meta = json.loads((saved / META_FILE).read_text())
    meta["format_version"] = 2
    del meta["content_sha256"]
    (saved / META_FILE).write_text(json.dumps(meta))
    with pytest.warns(UncheckedModelWarning, match="cannot be detected"):
        old = Predictor.load(saved)
    pd.testing.assert_frame_equal(old.predict(grid.head(5), 16), model.predict(grid.head(5), 16))
    meta["heads"]["time_ms"]["y_scale"] = 0.0  # the value checks still apply
    (saved / META_FILE).write_text(json.dumps(meta))
    with pytest.raises(ModelFileError, match="y_scale"), warnings.catch_warnings():
        warnings.simplefilter("ignore", UncheckedModelWarning)
        Predictor.load(saved)


def test_a_model_json_without_its_hash_is_refused(saved):
    meta = json.loads((saved / META_FILE).read_text())
    del meta["content_sha256"]
    (saved / META_FILE).write_text(json.dumps(meta))
    with pytest.raises(ModelFileError, match="missing field content_sha256"):
        Predictor.load(saved)


def test_an_unwritable_folder_is_refused_before_training(tmp_path, monkeypatch):
    import errno as errno_

    from powertrain.predictor import model_io

    def refuse(*a, **k):
        raise OSError(errno_.EROFS, "Read-only file system")

    monkeypatch.setattr(model_io.tempfile, "TemporaryFile", refuse)
    with pytest.raises(ModelFileError, match="read-only"):
        model_io.check_writable(tmp_path / "m")
    monkeypatch.undo()
    model_io.check_writable(tmp_path / "m")  # a writable folder passes
