"""The reference at a new device's clocks (predictor/shifted.py), and its use by a
transfer across devices and by the decision loop."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from powertrain.predictor import PowerTrainMLP, shifted
from powertrain.predictor.mlp import MLP, init_mlp

torch.set_num_threads(1)


def _net(monotone=None) -> MLP:
    net = MLP(3, (16, 8), dropout=0.0, monotone=monotone)
    init_mlp(net, torch.Generator().manual_seed(0))
    return net.eval()


def _rows(n: int = 60) -> np.ndarray:
    rng = np.random.default_rng(1)
    xs = rng.uniform(-1.5, 1.5, size=(n, 3))
    xs[:, 2] = 0.3  # constant in the samples, as a batch size or a spec figure is
    return xs


def _out(net: MLP, xs: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return net(torch.as_tensor(xs, dtype=torch.float32)).numpy().astype(float)


def test_a_device_with_shifted_clocks_is_the_reference_read_at_them():
    """Targets made by the reference at shifted, rescaled inputs: the fitted copy
    predicts them far better than the reference does, and leaves the reference as it
    was and the constant input's weights alone."""
    net = _net()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    xs = _rows()
    moved = xs * np.array([1.15, 0.9, 1.0]) + np.array([0.3, -0.25, 0.0])
    t = 20.0 * _out(net, moved) + 1.0  # target mean 1, scale 20 in transformed units
    fitted, y_mean, y_scale = shifted.fit(net, xs, t, 1.0, 20.0)
    pred = _out(fitted, xs) * y_scale + y_mean
    as_is = _out(net, xs) * 20.0 + 1.0
    err = np.sqrt(np.mean((pred - t) ** 2))
    assert err < 0.25 * np.sqrt(np.mean((as_is - t) ** 2))
    assert all(torch.equal(v, net.state_dict()[k]) for k, v in before.items())
    w0, w1 = net.linears()[0].weight, fitted.linears()[0].weight
    assert torch.equal(w0[:, 2], w1[:, 2]) and not torch.equal(w0[:, 0], w1[:, 0])


def test_samples_the_reference_already_fits_keep_it_close():
    net = _net()
    xs = _rows()
    t = _out(net, xs) * 2.0 + 1.0
    fitted, y_mean, y_scale = shifted.fit(net, xs, t, 1.0, 2.0)
    assert y_mean == pytest.approx(1.0, abs=0.05) and y_scale == pytest.approx(2.0, rel=0.05)
    w0, w1 = net.linears()[0].weight, fitted.linears()[0].weight
    assert torch.allclose(w0, w1, atol=0.05)


def test_a_monotone_network_is_left_as_it_is():
    net = _net(monotone=(1, 0, 0))
    xs = _rows()
    assert shifted.fit(net, xs, _out(net, xs), 0.0, 1.0) == (net, 0.0, 1.0)


def _fitted_estimator() -> tuple[PowerTrainMLP, np.ndarray]:
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.integers(1, 9, 400), rng.uniform(300, 1300, 400), np.full(400, 16)])
    y = 50 / X[:, 1] * 1000 + 200 / X[:, 0]
    est = PowerTrainMLP(hidden_layer_sizes=(16, 8), epochs=30, batch_size=64, verbose=False)
    return est.fit(X, y), X


def test_a_transfer_across_devices_starts_its_correction_from_the_shifted_reference():
    """Only across devices: the correction's network is a refitted copy, and the
    estimator's saved state rebuilds the same predictions."""
    est, X = _fitted_estimator()
    new = X[:50] * np.array([1, 0.7, 1])  # a device whose clocks run lower
    y = 50 / (new[:, 1] * 1.3) * 1000 + 200 / new[:, 0]
    same = est.transfer(new, y, cross_device=False)
    other = est.transfer(new, y, cross_device=True)
    assert same.correction_["net"] is not None and other.correction_["net"] is not None
    ref_w = est.net_.linears()[0].weight
    assert torch.equal(same.correction_["net"].linears()[0].weight, ref_w)
    assert not torch.equal(other.correction_["net"].linears()[0].weight, ref_w)
    back = PowerTrainMLP.from_state(*other.export_state())
    np.testing.assert_allclose(back.predict(new), other.predict(new), rtol=1e-6)


def test_the_decision_loop_names_the_boards_device_in_its_samples():
    """So a transfer knows when it crosses devices (and reads the reference at the
    device's clocks); without a device the samples are as measured."""
    from types import SimpleNamespace

    import pandas as pd

    from powertrain.decisions.samplers.random import RandomSampler
    from powertrain.decisions.settings import Settings
    from powertrain.decisions.study import Study

    class _Reference:
        inputs_ = ("power_limit_w", "batch_size")
        targets_ = ("time_ms", "power_w")
        info_: dict = {}

    cands = pd.DataFrame({"power_limit_w": [100.0, 200.0], "batch_size": [16, 16]})
    settings = Settings(budget=10, seed=7).checked(2)
    device = SimpleNamespace(spec=SimpleNamespace(name="orin-nano-super", hardware={}))
    rows = cands.assign(time_ms=[100.0, 200.0], power_w=[25.0, 20.0])
    for dev, expect in ((device, ["orin-nano-super"] * 2), (None, None)):
        study = Study(cands, _Reference(), np.array([30.0]), settings, RandomSampler(),
                      device=dev)  # fmt: skip
        study.tell(rows)
        samples = study._samples(study.history())
        assert samples[["time_ms", "power_w"]].equals(rows[["time_ms", "power_w"]])
        assert (samples["device"].tolist() if "device" in samples else None) == expect
