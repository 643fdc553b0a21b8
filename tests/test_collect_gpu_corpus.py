"""tools/collect_gpu_corpus.py against the fake NVML: the grid NVML allows, every row
measured under the limit and clock it names, settings restored, a loadable corpus."""

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import collect_gpu_corpus as collect  # noqa: E402
from test_profiling_nvml import START_MW, FakeNvml, Step  # noqa: E402

from powertrain.backends.nvml import NvmlBackend  # noqa: E402
from powertrain.backends.nvml_state import STATE_DIR_ENV  # noqa: E402
from powertrain.data.real_data import load_real_corpus  # noqa: E402
from powertrain.devices.specs import unregister_device  # noqa: E402


class ManyClocks(FakeNvml):
    """A GPU with an H100's table of SM clocks: 345..1980 MHz, 15 MHz apart."""

    def nvmlDeviceGetSupportedGraphicsClocks(self, h, mem):
        return list(range(1980, 344, -15))


def test_the_default_grid_is_at_least_300_configurations_nvml_allows(tmp_path, monkeypatch):
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    nvml = ManyClocks(setters=True)
    with NvmlBackend(Step(), nvml=nvml, allow_power_limit=True, allow_clocks=True) as b:
        grids = {wl: collect.grid(b, sizes) for wl, sizes in collect.BATCH_SIZES.items()}
    assert sum(len(g) for g in grids.values()) >= 300
    for g in grids.values():
        assert sorted(set(g.power_limit_w)) == [100, 250, 400, 550, 700]  # 100..700 W
        clocks = sorted(set(g.gpu_mhz))
        assert len(clocks) == collect.N_CLOCKS and set(clocks) <= set(range(345, 1981, 15))
        assert min(clocks) >= collect.MIN_CLOCK_SHARE * 1980 and max(clocks) == 1980
    assert nvml.locks == [] and nvml.sets == []  # building the grid sets nothing


@pytest.mark.slow
def test_collection_on_the_fake_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    nvml = FakeNvml(setters=True)
    out = tmp_path / "corpus"
    argv = ["--out", str(out), "--small", "--device", "cpu", "--minibatches", "1"]
    argv += ["--n-limits", "2", "--n-clocks", "2", "--sample-period", "0.005"]
    assert collect.main([*argv, "--budget-s", "3000"], nvml=nvml) == 0
    assert nvml.limit_mw == START_MW and nvml.sm_lock is None  # restored
    assert not list((tmp_path / "state").glob("*.json"))
    try:
        for wl in collect.BATCH_SIZES:
            df = load_real_corpus(out / f"nvidia-h100-80gb-hbm3_{wl}.csv")
            assert len(df) == 2 * 2 * len(collect.SMALL_BATCH_SIZES)
            assert sorted(set(df.power_limit_w)) == [100, 700]
            assert sorted(set(df.gpu_mhz)) == [990, 1980]  # >= 40 % of the top clock
            assert (df.observed_gpu_mhz == df.gpu_mhz).all()  # ran at the locked clock
            assert (df.power_w == df.power_limit_w / 2).all()  # the fake draws half its limit
            side = json.loads((out / f"nvidia-h100-80gb-hbm3_{wl}.provenance.json").read_text())
            assert {"gpu", "driver", "cuda", "torch", "date"} <= set(side)
            assert side["device_spec"]["power_cap"] == "power_limit_w"
    finally:
        unregister_device("nvidia-h100-80gb-hbm3")


def test_a_spent_budget_starts_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    out = tmp_path / "c"
    argv = ["--out", str(out), "--small", "--device", "cpu", "--budget-s", "0"]
    nvml = FakeNvml(setters=True)
    collect.main(argv, nvml=nvml)
    assert nvml.locks == [] and nvml.sets == []
    for wl in collect.BATCH_SIZES:
        csv = out / f"nvidia-h100-80gb-hbm3_{wl}.csv"
        assert not csv.exists() or pd.read_csv(csv).empty


@pytest.mark.slow
def test_hands_off_collection_calls_no_setter_and_records_the_clocks_the_gpu_chose(
    tmp_path, monkeypatch
):
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    nvml = FakeNvml(setters=False)  # any setter or reset raises
    out = tmp_path / "corpus"
    argv = ["--out", str(out), "--small", "--device", "cpu", "--minibatches", "12"]
    argv += ["--hands-off", "--settle-tol", "0.5", "--sample-period", "0.005"]
    assert collect.main([*argv, "--budget-s", "3000"], nvml=nvml) == 0
    assert not [c for c in nvml.calls if c.startswith("nvmlDeviceSet") or "Reset" in c]
    for wl in collect.BATCH_SIZES:
        df = pd.read_csv(out / f"nvidia-h100-80gb-hbm3_{wl}.csv")
        assert "power_limit_w" not in df.columns and "gpu_mhz" not in df.columns
        assert sorted(set(zip(df.threads, df.batch_size))) == [
            (t, b) for t in (1, 2) for b in collect.SMALL_BATCH_SIZES
        ]
        assert (df.observed_gpu_mhz > 0).all() and (df.power_w == START_MW / 2e3).all()
        side = json.loads((out / f"nvidia-h100-80gb-hbm3_{wl}.provenance.json").read_text())
        assert side["settings"].startswith("hands-off") and side["settle_tol"] == 0.5
        assert side["power_limit_w"] == START_MW / 1e3  # the card's own limit, read only


def test_workloads_sweeps_only_the_ones_named(tmp_path, monkeypatch):
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    nvml = FakeNvml(setters=False)
    out = tmp_path / "corpus"
    argv = ["--out", str(out), "--small", "--device", "cpu", "--minibatches", "2"]
    argv += ["--hands-off", "--sample-period", "0.005", "--workloads", "resnet18"]
    assert collect.main([*argv, "--budget-s", "3000"], nvml=nvml) == 0
    assert not list(out.glob("*gpt-small*"))  # the other workload: not swept, no file
    assert len(pd.read_csv(out / "nvidia-h100-80gb-hbm3_resnet18.csv")) == 2 * len(
        collect.SMALL_BATCH_SIZES
    )
