"""Batch-size r vector and the joint (batch size, power mode) selection."""

import json
import math

import numpy as np
import pandas as pd
import pytest

import powertrain as pt
from powertrain.cli import main
from powertrain.data.batch_efficiency import (
    TargetNotReachedError,
    digits_samples_to_target,
    normalise,
    sqrt_lr,
)
from powertrain.errors import DataError, NoFeasibleModeError

# slow tests are marked one by one: the rest are part of `make test-fast`


def test_sqrt_scaling_and_eq3_normalisation():
    assert sqrt_lr(128, 0.05, 32) == pytest.approx(0.1)
    assert sqrt_lr(8, 0.05, 32) == pytest.approx(0.025)
    r = normalise({8: 1000, 32: 1500, 128: 3000})
    assert r == {8: pytest.approx(1 / 3), 32: 0.5, 128: 1.0}


def _fake_train(calls):
    def fn(b, seed, target):
        calls.append((b, seed))
        return 1000 * b // 8 + 10 * seed

    return fn


def test_r_vector_medians_over_seeds_and_caches(tmp_path):
    calls = []
    r = pt.r_vector(
        [8, 32], seeds=[0, 1, 2], train_fn=_fake_train(calls), cache_dir=tmp_path, name="fake"
    )
    assert r.samples.tolist() == [1010, 4010]  # median over seeds 0, 1, 2
    assert r.r.tolist() == pytest.approx([1010 / 4010, 1.0])
    n = len(calls)
    again = pt.r_vector(
        [8, 32], seeds=[0, 1, 2], train_fn=_fake_train(calls), cache_dir=tmp_path, name="fake"
    )
    assert len(calls) == n  # a cache hit trains nothing
    pd.testing.assert_frame_equal(r, again)


def test_corrupt_or_foreign_cache_is_recomputed_with_a_warning(tmp_path):
    calls = []
    pt.r_vector([8], seeds=[0], train_fn=_fake_train(calls), cache_dir=tmp_path, name="fake")
    (cache,) = tmp_path.glob("r_*.json")
    cache.write_text("{not json")
    with pytest.warns(UserWarning, match="cache unusable"):
        pt.r_vector([8], seeds=[0], train_fn=_fake_train(calls), cache_dir=tmp_path, name="fake")
    data = json.loads(cache.read_text())
    data["meta"]["powertrain"] = "0.0.0-other"
    cache.write_text(json.dumps(data))
    with pytest.warns(UserWarning, match="other settings or another version"):
        pt.r_vector([8], seeds=[0], train_fn=_fake_train(calls), cache_dir=tmp_path, name="fake")
    assert len(calls) == 3


@pytest.mark.slow  # real proxy training (digits CNN): ~5 s
def test_real_proxy_training_is_reproducible_and_unreachable_targets_say_so():
    a = digits_samples_to_target(32, seed=0, target_accuracy=0.8, max_samples=20_000)
    b = digits_samples_to_target(32, seed=0, target_accuracy=0.8, max_samples=20_000)
    assert a == b and 0 < a <= 20_000 and a % 32 == 0
    with pytest.raises(TargetNotReachedError, match=r"not reached in 2,048 samples \(best"):
        digits_samples_to_target(32, seed=0, target_accuracy=1.0, max_samples=2048)


@pytest.mark.parametrize("bad", [[0], [-8], [8.5], [True], [8, 8], []])
def test_bad_batch_sizes(bad):
    with pytest.raises(DataError):
        pt.r_vector(bad, train_fn=lambda b, s, t: 1)


def _estimates():
    rng = np.random.default_rng(0)
    rows = []
    for b in (8, 32, 128):
        for f in np.linspace(100, 900, 9):
            t = 1000 * b / (f * (1 + b / 64))  # bigger batches: faster per sample
            p = 2 + f / 200 * (1 + b / 256) + rng.uniform(0, 0.05)
            rows.append(dict(gpu_mhz=f, batch_size=b, time_ms=t, power_w=p))
    return pd.DataFrame(rows)


def test_joint_selection_is_feasible_optimal_and_never_dominated():
    est = _estimates()
    r = {8: 1.0, 32: 1.3, 128: 4.0}  # samples to target (relative)
    for cap in (3.0, 4.0, 5.0, 8.0):
        best = pt.select(est, r, power_cap_w=cap)
        tt = pt.time_to_accuracy(est, r)
        feasible = tt[tt.power_w <= cap]
        assert best.power_w <= cap
        assert best.tt_acc == pytest.approx(feasible.tt_acc.min())
        # nothing feasible is both faster to accuracy and cheaper in power
        assert not ((feasible.tt_acc < best.tt_acc) & (feasible.power_w < best.power_w)).any()
    e = pt.select(est, r, power_cap_w=8, objective="energy")
    tt = pt.time_to_accuracy(est, r)
    assert e.energy_acc == pytest.approx(tt[tt.power_w <= 8].energy_acc.min())


def test_ties_are_broken_by_power_then_batch_size():
    est = pd.DataFrame(
        dict(
            gpu_mhz=[1, 2, 3],
            batch_size=[32, 8, 8],
            time_ms=[40.0, 10.0, 10.0],
            power_w=[5.0, 5.0, 4.0],
        )
    )
    r = {8: 1.0, 32: 1.0}  # all three take 1.25 ms per sample
    assert pt.select(est, r, power_cap_w=10).gpu_mhz == 3  # lowest power wins the tie
    est.loc[2, "power_w"] = 5.0
    assert pt.select(est, r, power_cap_w=10).gpu_mhz == 2  # then the smaller batch, then order


def test_selection_bad_inputs():
    est = _estimates()
    with pytest.raises(DataError, match=r"no entry for batch size\(s\) \[128\]"):
        pt.select(est, {8: 1.0, 32: 1.0}, power_cap_w=5)
    with pytest.raises(NoFeasibleModeError, match="lowest guarded power is"):
        pt.select(est, {8: 1.0, 32: 1.0, 128: 1.0}, power_cap_w=1.0)
    with pytest.raises(DataError, match="objective"):
        pt.select(est, {8: 1, 32: 1, 128: 1}, power_cap_w=5, objective="speed")
    with pytest.raises(DataError, match="deadline_s needs absolute samples"):
        pt.select(est, {8: 1, 32: 1, 128: 1}, power_cap_w=5, deadline_s=10)
    with pytest.raises(DataError, match="must be > 0"):
        pt.load_r({8: 0.0})


def test_deadline_picks_the_cheapest_in_time():
    est = _estimates()
    r = pd.DataFrame({"batch_size": [8, 32, 128], "samples": [1000, 1300, 4000]})
    fastest = pt.select(est, r, power_cap_w=8)
    deadline = fastest.tt_acc * 1.5
    e = pt.select(est, r, power_cap_w=8, objective="energy", deadline_s=deadline)
    assert e.tt_acc <= deadline and e.energy_acc <= fastest.energy_acc
    with pytest.raises(NoFeasibleModeError, match="within"):
        pt.select(est, r, power_cap_w=8, deadline_s=fastest.tt_acc / 2)


def test_cli_select_with_r(tmp_path, capsys):
    est = _estimates()
    est.to_csv(tmp_path / "est.csv", index=False)
    pd.DataFrame({"batch_size": [8, 32, 128], "r": [1.0, 1.3, 4.0]}).to_csv(
        tmp_path / "r.csv", index=False
    )
    assert (
        main(
            [
                "select",
                str(tmp_path / "est.csv"),
                "--power-cap",
                "4",
                "--r",
                str(tmp_path / "r.csv"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out.splitlines()
    row = dict(zip(out[0].split(","), out[1].split(",")))
    best = pt.select(est, {8: 1.0, 32: 1.3, 128: 4.0}, power_cap_w=4)
    assert math.isclose(float(row["tt_acc"]), best.tt_acc, rel_tol=1e-5)  # 6 digits printed
    assert (
        main(["select", str(tmp_path / "est.csv"), "--power-cap", "4", "--objective", "energy"])
        == 1
    )
