"""The power guard (power_w_max) comes from a power-limit knob, declared or not; a GPU
spec without one is told that its picks have no hardware guard."""

import warnings

import pytest

from powertrain.data.real_data import load_real_corpus, real_folder
from powertrain.devices.specs import device_spec_from_dict
from powertrain.predictor import PowerTrainMLP, Predictor


def test_a_power_limit_knob_is_the_guard_unless_the_spec_opts_out():
    knobs = {"power_limit_w": [150, 200, 250], "gpu_mhz": [900, 1400]}
    assert device_spec_from_dict({"name": "g", "knobs": knobs}).power_cap == "power_limit_w"
    opted_out = device_spec_from_dict({"name": "g", "knobs": knobs, "power_cap": None})
    assert opted_out.power_cap is None
    clocks_only = device_spec_from_dict({"name": "g", "knobs": {"gpu_mhz": [900, 1400]}})
    assert clocks_only.power_cap is None


@pytest.mark.slow
def test_a_gpu_without_a_power_limit_knob_warns_and_one_with_it_does_not():
    clocks = load_real_corpus("a40-locked-clock_gpt3-175b", real_folder() / "perseus")
    one = clocks[clocks.workload == "gpt3-175b-stage0-forward"]
    with pytest.warns(UserWarning, match="'a40-locked-clock' has no power-limit knob"):
        Predictor(PowerTrainMLP(epochs=5), progress=False).fit(one)
    limits = load_real_corpus("a40_resnet50-imagenet")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        model = Predictor(
            PowerTrainMLP(epochs=5), targets=("epoch_s", "power_w"), progress=False
        ).fit(limits)
    assert "power_w_max" in model.predict(limits.head(3)).columns
