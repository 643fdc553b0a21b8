"""benchmarks/frequency.py: its sampling rule, the naive baseline and the verified pick."""

import sys
from pathlib import Path

import numpy as np
import pytest

from powertrain.utils.hashing import sha256_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import frequency  # noqa: E402


@pytest.fixture(scope="module")
def data():
    return frequency.load()


def test_32_computations_of_60_clocks_and_the_reference_is_one_of_them(data):
    assert len(data) == 32 and frequency.REFERENCE in data
    assert all(len(df) == 60 and df.gpu_mhz.is_monotonic_increasing for df in data.values())


def test_k_clocks_include_the_top_one_and_spread_over_bins():
    rng = np.random.default_rng(0)
    for k in (3, 5, 10):
        idx = frequency.draw_clocks(60, k, rng)
        assert len(set(idx)) == k and idx[-1] == 59
        bins = np.array_split(np.arange(59), k - 1)
        assert all(np.isin(b, idx).sum() == 1 for b in bins)


def test_naive_baseline_is_exact_when_the_target_is_a_power_law_of_the_reference(data):
    ref = data[frequency.REFERENCE]
    target = ref.assign(
        time_ms=ref.time_ms * 1.3 * (ref.gpu_mhz / 1000) ** -0.2,
        power_w=ref.power_w * 0.9 * (ref.gpu_mhz / 1000) ** 0.1,
    )
    idx = [0, 30, 59]
    p = frequency.naive(ref, target.iloc[idx], target)
    assert np.allclose(p["time_ms"], target.time_ms) and np.allclose(p["power_w"], target.power_w)


@pytest.mark.parametrize("bound", frequency.BOUNDS)
def test_a_verified_pick_never_breaks_the_bound_whatever_the_prediction(data, bound):
    rng = np.random.default_rng(1)
    for wl in list(data)[:6]:
        df = data[wl]
        t_top = float(df.time_ms.iloc[-1])
        wrong_t = df.time_ms.to_numpy() * rng.uniform(0.8, 1.2, len(df))  # a bad model
        wrong_p = df.power_w.to_numpy() * rng.uniform(0.8, 1.2, len(df))
        idx = frequency.draw_clocks(len(df), 3, rng)
        for j in frequency.verified(df, wrong_t, wrong_p, idx, t_top, bound).values():
            assert df.time_ms[j] <= (1 + bound) * t_top


def _folder_of(tmp_path, data, names, device="my-gpu"):
    """A user's folder: the given computations under another device id and spec."""
    import json

    import pandas as pd

    df = pd.concat([data[n] for n in names]).assign(device=device)
    df.to_csv(tmp_path / f"{device}_sweep.csv", index=False)
    spec = {"name": device, "knobs": {"gpu_mhz": sorted(set(df.gpu_mhz))}}
    side = {"device_spec": spec, "csv_sha256": sha256_file(tmp_path / f"{device}_sweep.csv")}
    (tmp_path / f"{device}_sweep.provenance.json").write_text(json.dumps(side))
    return tmp_path


def test_any_folder_of_clock_sweeps(tmp_path, data, capsys):
    names = ["bloom-stage0-forward", "bloom-stage7-backward", "bloom-stage7-forward"]
    folder = _folder_of(tmp_path, data, names)
    got = frequency.load(folder)
    assert sorted(got) == names
    assert frequency.pick_reference(got) == "bloom-stage0-forward"  # no GPT-3: the first
    with pytest.raises(frequency.DataError, match="--reference nope: not a workload"):
        frequency.pick_reference(got, "nope")
    head = frequency.describe(got, folder)
    assert (
        head.startswith("my-gpu: 60 SM clocks 855-1740 MHz, 3 computations") and str(folder) in head
    )
    out = frequency.main(["--data", str(folder), "--ks", "3", "--draws", "1"])
    printed = capsys.readouterr().out
    assert "my-gpu: 60 SM clocks" in printed and "A40" not in printed.splitlines()[0]
    assert {r["workload"] for r in out["accuracy"]} == set(names[1:])
    assert {"clock", "naive", "PT", "NN"} <= {r["method"] for r in out["accuracy"]}
    verified = [r for r in out["decisions"] if "+verify" in r["method"]]
    assert verified and not any(r["over_bound"] for r in verified)


def test_a_folder_without_clock_sweeps_is_refused(tmp_path):
    with pytest.raises(frequency.DataError, match="0 clock sweep"):
        frequency.load(tmp_path)


@pytest.mark.slow
def test_a_corpus_of_our_own_splits_into_computations(tmp_path, data, capsys):
    """Clock x batch size x power limit per workload (what tools/collect_gpu_corpus.py
    writes): each (workload, batch size, limit) is one computation."""
    import json

    import pandas as pd

    base = data["bloom-stage0-backward"]
    rows = [
        base.assign(workload=wl, batch_size=b, power_limit_w=p, time_ms=base.time_ms * b * s)
        for wl, s in (("cnn", 1.0), ("lm", 1.3))
        for b in (1, 2)
        for p in (250, 300)
    ]
    df = pd.concat(rows).assign(device="our-gpu")
    df.to_csv(tmp_path / "our-gpu_sweep.csv", index=False)
    clocks = sorted(set(df.gpu_mhz))
    spec = {"name": "our-gpu", "knobs": {"power_limit_w": [250, 300], "gpu_mhz": clocks}}
    side = {"device_spec": spec, "csv_sha256": sha256_file(tmp_path / "our-gpu_sweep.csv")}
    (tmp_path / "our-gpu_sweep.provenance.json").write_text(json.dumps(side))
    got = frequency.load(tmp_path)
    assert sorted(got)[:2] == ["cnn-bs1-pl250", "cnn-bs1-pl300"] and len(got) == 8
    assert all(len(t) == 60 for t in got.values())
    out = frequency.main(["--data", str(tmp_path), "--ks", "3", "--draws", "1", "--quick"])
    assert {r["method"] for r in out["accuracy"]} >= {"PT", "NN", "clock", "naive"}
    assert "our-gpu: 60 SM clocks" in capsys.readouterr().out
