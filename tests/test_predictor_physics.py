"""Physics the predictor respects by construction: monotone knobs and power caps."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from synthetic import synthetic_corpus

import powertrain as pt
from powertrain.data.real_data import load_real_corpus
from powertrain.predictor import PowerTrainMLP, Predictor

torch.set_num_threads(1)

SMALL = dict(hidden_layer_sizes=(32, 16), epochs=60, batch_size=16)


def _wavy(n=120, seed=0):
    """Power-like data that rises with x overall but dips between samples (noise a few
    samples can carry): an unconstrained net follows the dips."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(1, 10, size=(n, 2))
    y = 6 + x[:, 0] + 4 * np.sin(1.5 * x[:, 0]) + x[:, 1]
    return x, y


def _wrong_way_steps(est, inputs, target: str, knob: str, sign: int) -> int:
    """Single-knob steps of ``est[target]`` (all other inputs fixed) against ``sign``,
    beyond float noise."""
    others = [c for c in inputs if c != knob]
    steps = est.sort_values(knob).groupby(others)[target].diff().dropna()
    return int((sign * steps < -1e-6 * est[target].max()).sum())


def _steps(est, x_free=5.0):
    grid = np.column_stack([np.linspace(1, 10, 400), np.full(400, x_free)])
    return np.diff(est.predict(grid))


@pytest.mark.slow  # trains two networks: ~6 s under load
def test_an_unconstrained_net_dips_and_a_monotone_one_cannot():
    X, y = _wavy()
    free = PowerTrainMLP(**SMALL).fit(X, y)
    assert _steps(free).min() < -0.01  # the contract below would catch this net
    mono = PowerTrainMLP(**SMALL, monotonic_cst=(1, 0)).fit(X, y)
    assert _steps(mono).min() >= -1e-9
    down = PowerTrainMLP(**SMALL, monotonic_cst=(-1, 0)).fit(X, y)
    assert _steps(down).max() <= 1e-9


def test_a_transfer_keeps_the_contract_even_on_samples_that_break_it():
    X, y = _wavy()
    mono = PowerTrainMLP(**SMALL, monotonic_cst=(1, 0)).fit(X, y)
    rng = np.random.default_rng(1)
    Xs = rng.uniform(1, 10, size=(30, 2))
    ys = 50 - 3 * Xs[:, 0] + Xs[:, 1]  # falls with x: the opposite of the contract
    new = mono.transfer(Xs, ys)
    assert new.correction_ is not None
    assert _steps(new).min() >= -1e-9
    # the ridge parts keep the signs: a falling column gets no negative coefficient
    from powertrain.predictor.estimator import _ridge

    F = np.column_stack([Xs[:, 0], Xs[:, 1]])
    assert _ridge(F, ys, None)[0] < 0  # unconstrained, it would follow the samples down
    assert _ridge(F, ys, np.array([1, 0]))[0] == 0


@pytest.mark.slow  # trains references: ~20 s under load
def test_the_predictor_takes_the_directions_from_the_device_spec():
    grid = pt.get_device("orin-agx").profiling_grid().sample(300, random_state=0)
    corpus = synthetic_corpus(grid, "a").assign(device="orin-agx")
    model = Predictor(PowerTrainMLP(**SMALL), progress=False, monotone="device").fit(corpus)
    inputs = model.inputs_
    assert model.heads_["power_w"].monotonic_cst == tuple(
        1 if c in ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz") else 0 for c in inputs
    )
    assert model.heads_["time_ms"].monotonic_cst == tuple(
        -1 if c in ("gpu_mhz", "mem_mhz") else 0 for c in inputs
    )
    modes = pt.get_device("orin-agx").power_modes().assign(batch_size=16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = model.predict(modes, return_std=False)
    for knob, target, sign in (("gpu_mhz", "power_w", 1), ("gpu_mhz", "time_ms", -1)):
        assert _wrong_way_steps(est, inputs, target, knob, sign) == 0
    plain = Predictor(PowerTrainMLP(**SMALL), progress=False, monotone=None).fit(corpus)
    assert plain.constraints_ == {"monotone": {}, "power_cap": None}
    assert "power_w_max" not in plain.predict(corpus.head(3)).columns  # no limit knob
    assert plain.heads_["power_w"].monotonic_cst is None


@pytest.mark.slow  # trains two references: ~20 s under load
def test_by_default_nothing_is_constrained_and_a_bad_setting_is_named():
    grid = pt.get_device("orin-agx").profiling_grid().sample(200, random_state=1)
    corpus = synthetic_corpus(grid, "a").assign(device="orin-agx")
    model = Predictor(PowerTrainMLP(**SMALL), progress=False).fit(corpus)
    assert model.constraints_["monotone"] == {}
    assert all(h.monotonic_cst is None for h in model.heads_.values())
    power = Predictor(PowerTrainMLP(**SMALL), progress=False, monotone=("power_w",))
    power.fit(corpus)
    assert set(power.constraints_["monotone"]) == {"power_w"}
    assert power.heads_["time_ms"].monotonic_cst is None
    timed = Predictor(PowerTrainMLP(**SMALL), progress=False, monotone=["time_ms"])
    assert set(timed.fit(corpus).constraints_["monotone"]) == {"time_ms"}
    with pytest.raises(pt.DataError, match="monotone must be"):
        Predictor(PowerTrainMLP(**SMALL), progress=False, monotone="power_w").fit(corpus)


def test_a_sign_constrained_network_starts_with_bounded_activations():
    """Non-negative weights drawn as |U(-b, b)| add correlated inputs coherently: the
    output's spread grew ~3x a layer (std ~10 on standardised targets), which left a fit
    on tens of rows far from converged. The start must keep it on the input's scale."""
    from powertrain.predictor import mlp

    x = torch.randn(500, 5, generator=torch.Generator().manual_seed(0))
    net = mlp.MLP(5, monotone=(1, 1, 1, 1, 0))
    mlp.init_mlp(net, torch.Generator().manual_seed(0))
    net.eval()
    with torch.no_grad():
        assert float(net(x).std()) < 1.0
        assert all(float(mlp.weight_of(lin).min()) >= 0 for lin in net.linears()[1:])


def test_gpu_power_is_monotone_in_the_limit_and_clipped_near_it(tmp_path):
    v100 = load_real_corpus("v100_resnet50-imagenet")
    model = Predictor(PowerTrainMLP(**SMALL), targets=("epoch_s", "power_w"), progress=False)
    model.fit(v100)
    cap = model.constraints_["power_cap"]
    excess = (v100.power_w - v100.power_limit_w).max()
    assert cap == {"knob": "power_limit_w", "target": "power_w", "max_excess_w": excess}
    a40 = load_real_corpus("a40_resnet50-imagenet")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        new = model.transfer(a40.sample(10, random_state=0))
        modes = pt.get_device("a40").power_modes()
        est = new.predict(modes, batch_size=[64, 128, 256])
    limit = est.power_limit_w + max(new.constraints_["power_cap"]["max_excess_w"], 0)
    assert (est.power_w <= limit + 1e-9).all()
    np.testing.assert_allclose(est.power_w_max, limit)  # the bound a margin stops at
    steps = est.sort_values("power_limit_w").groupby("batch_size").power_w.diff().dropna()
    assert (steps >= -1e-6).all()
    new.save(tmp_path / "m")
    back = Predictor.load(tmp_path / "m")
    assert back.constraints_ == new.constraints_
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = back.predict(modes, batch_size=[64, 128, 256])
    np.testing.assert_array_equal(again.power_w.to_numpy(), est.power_w.to_numpy())


@pytest.mark.slow  # trains a monotone reference: ~40 s under load
def test_a_transfer_of_a_power_monotone_reference_is_monotone_on_every_mode():
    """The flow users run, with the constraint asked for: a reference fitted with
    ``monotone=("power_w",)`` and every transfer of it predict power that never falls as
    a knob rises, on all 18,096 Orin AGX modes; the same reference unconstrained does
    not (what the contract buys)."""
    from powertrain.data.corpora import load_corpus

    corpus = load_corpus("orin-agx_resnet18_bs16").sample(800, random_state=0)
    samples = load_corpus("orin-agx_yolov8n_bs16").sample(50, random_state=0)
    modes = pt.get_device("orin-agx").power_modes().assign(batch_size=16)
    wrong = {}
    for setting in (("power_w",), None):
        ref = Predictor(PowerTrainMLP(**SMALL), progress=False, monotone=setting).fit(corpus)
        model = ref.transfer(samples)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = model.predict(modes, return_std=False)
        wrong[setting] = sum(
            _wrong_way_steps(est, model.inputs_, "power_w", knob, 1)
            for knob in ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz")
        )
    assert wrong[("power_w",)] == 0
    assert wrong[None] > 0
