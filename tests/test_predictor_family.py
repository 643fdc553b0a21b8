"""Family references: the device's spec figures as inputs (predictor/spec_features)."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest
import torch
from synthetic import synthetic_corpus

import powertrain as pt
from powertrain.errors import DataError
from powertrain.predictor import ExtrapolationWarning, PowerTrainMLP, Predictor
from powertrain.predictor import spec_features as sf
from powertrain.schema import CONFIG_COLUMNS

torch.set_num_threads(1)

TINY = PowerTrainMLP(hidden_layer_sizes=(16, 8), epochs=4, batch_size=64)


def _corpus(device: str, n: int, seed: int) -> pd.DataFrame:
    modes = pt.get_device(device).power_modes().sample(n, random_state=seed)
    return synthetic_corpus(modes, "a", seed=seed).assign(device=device)


def test_attach_fills_each_device_from_its_spec():
    df = pd.concat([_corpus("orin-agx", 3, 0), _corpus("orin-nano", 2, 1)], ignore_index=True)
    out = sf.attach(df, sf.SPEC_FEATURES)
    assert "gpu_cuda_cores" not in df.columns  # a copy
    assert out.gpu_cuda_cores.tolist() == [2048.0] * 3 + [1024.0] * 2
    assert out.mem_bus_bits.tolist() == [256.0] * 3 + [128.0] * 2
    assert sf.attach(df, ()) is df


def test_attach_without_a_device_needs_a_default():
    modes = pt.get_device("orin-nano").power_modes().head(3)
    with pytest.raises(DataError, match="'device' column"):
        sf.attach(modes, sf.SPEC_FEATURES)
    out = sf.attach(modes, sf.SPEC_FEATURES, default_device="orin-nano")
    assert set(out.gpu_cuda_cores) == {1024.0}


def test_a_spec_without_the_figures_is_a_clear_error():
    with pytest.raises(DataError, match="a40: its spec gives no gpu_cuda_cores"):
        sf.spec_values("a40")


def test_knobs_only_drops_the_spec_features():
    inputs = (*CONFIG_COLUMNS, *sf.SPEC_FEATURES)
    assert sf.knobs_only(inputs, {sf.INFO_KEY: list(sf.SPEC_FEATURES)}) == CONFIG_COLUMNS
    assert sf.knobs_only(CONFIG_COLUMNS, {}) == CONFIG_COLUMNS


@pytest.mark.slow
def test_family_reference_transfers_to_a_device_it_never_saw(tmp_path):
    corpus = pd.concat([_corpus("orin-agx", 150, 0), _corpus("xavier-agx", 150, 1)])
    fam = Predictor(TINY, inputs=(*CONFIG_COLUMNS, *sf.SPEC_FEATURES), progress=False)
    fam.fit(corpus.reset_index(drop=True))
    assert fam.info_[sf.INFO_KEY] == list(sf.SPEC_FEATURES)
    assert fam.info_["trained_on"]["device"] == ["orin-agx", "xavier-agx"]
    loaded = Predictor.load(fam.save(tmp_path / "fam"))
    samples = _corpus("orin-nano", 40, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExtrapolationWarning)  # a 128-bit bus is new to it
        model = loaded.transfer(samples, random_state=0)
        # the transferred model knows its device: modes need no device column
        est = model.predict(pt.get_device("orin-nano").power_modes().head(20), batch_size=16)
    assert model.info_[sf.INFO_KEY] == list(sf.SPEC_FEATURES)
    assert model.info_["transfer"]["cross_device"]
    assert "gpu_cuda_cores" not in est and (est.time_ms > 0).all()  # filled, not returned
    with pytest.raises(DataError, match="'device' column"):
        loaded.predict(pt.get_device("orin-nano").power_modes().head(3), batch_size=16)


def test_a_jetson_without_its_own_reference_starts_from_the_family():
    from powertrain.workflow import best_reference

    assert best_reference("orin-nano", "resnet18") == sf.FAMILY_REFERENCE
    assert best_reference("orin-nano-super", "mobilenetv3") == sf.FAMILY_REFERENCE
    assert best_reference("orin-agx", "yolov8n") == "orin-agx/resnet18"  # its own device
    assert best_reference("a40", "resnet18") == "orin-agx/resnet18"  # not in the family


def test_the_family_covers_jetsons_whose_spec_gives_its_figures():
    assert sf.family_covers("orin-nano-super") and sf.family_covers("orin-agx")
    assert sf.FAMILY_REFERENCE in pt.predictor.pretrained_names()
    assert not sf.family_covers("a40")  # other knobs: the family cannot start there
    assert not sf.family_covers("no-such-device")
