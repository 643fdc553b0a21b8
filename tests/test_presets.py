"""Catalog presets are what NVIDIA's nvpmodel files define, and the twin runs them.

The transcription (tests/data/nvpmodel_presets.json) keeps the raw values of each cited
file; a preset's clock is the highest entry at or below the file's cap in the table the
preset runs on (the knob's, or the spec's ``preset_tables``), uncapped = the top entry.
"""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import powertrain as pt
from powertrain.devices.specs import load_device_spec
from powertrain.errors import ModeError, SpecError

FILES = json.loads((Path(__file__).parent / "data" / "nvpmodel_presets.json").read_text())


def _resolve(cap_mhz: float, table) -> float:
    table = sorted(float(v) for v in table)
    if cap_mhz <= 0:  # -1 (and EMC 0): no cap
        return table[-1]
    return max(v for v in table if v <= cap_mhz + 1e-3)


@pytest.mark.parametrize("device", sorted(FILES["devices"]))
def test_every_preset_matches_its_nvpmodel_file(device):
    spec = load_device_spec(device)
    conf = FILES["devices"][device]
    assert conf["sources"], f"{device}: no cited nvpmodel file"
    modes = {m["name"]: m for m in conf["modes"]}
    assert [p["name"] for p in spec.presets] == [m["name"] for m in conf["modes"]]
    for p in spec.presets:
        m = modes[p["name"]]
        gpu_table = spec.preset_tables.get("gpu_mhz", spec.gpu_mhz)
        want = {
            "cores": m["online_cores"],
            "cpu_mhz": _resolve(m["cpu_max_khz"] / 1e3, spec.cpu_mhz),
            "gpu_mhz": _resolve(m["gpu_max_hz"] / 1e6, gpu_table),
            "mem_mhz": _resolve(m["emc_max_hz"] / 1e6, spec.mem_mhz),
        }
        got = {k: p[k] for k in want}
        assert got == pytest.approx(want), f"{device} {p['name']}"
        assert p.get("tpc_pg_mask", 0) == m.get("tpc_pg_mask", 0), f"{device} {p['name']}"


def test_orin_agx_presets_gate_tpcs_and_cap_the_gpu_off_the_custom_table():
    dev = pt.get_device("orin-agx")
    pre = dev.presets().set_index("name")
    assert pre.loc[["MAXN", "MODE_15W", "MODE_30W", "MODE_50W"], "gpu_tpcs"].tolist() == [
        8,
        3,
        4,
        8,
    ]
    assert pre.loc[["MODE_15W", "MODE_30W", "MODE_50W"], "gpu_mhz"].tolist() == [408, 612, 816]
    assert 408.0 not in dev.spec.gpu_mhz  # outside the custom-mode table ...
    with pytest.raises(ModeError, match="408 MHz is not a orin-agx frequency"):
        dev.validate(pre.reset_index().drop(columns="gpu_tpcs"))
    dev.validate(pre.reset_index(), presets=True)  # ... yet a preset
    with pytest.raises(ModeError, match="'gpu_tpcs': 3 is not a TPC count"):
        dev.validate(dev.maxn().assign(gpu_tpcs=3), presets=True)  # custom modes: all on
    assert len(dev.power_modes()) == 13 * 29 * 4 * 12  # the custom space is unchanged


def test_the_twin_runs_fewer_tpcs_slower_and_at_lower_power():
    dev = pt.get_device("orin-agx")
    twin = pt.Twin(dev, "resnet18", seed=0)
    pre = dev.presets().set_index("name")
    row = pre.loc[["MODE_30W"]].reset_index().drop(columns=["name", "budget_w"])
    gated = twin.physics(row, 16).iloc[0]
    # the same clocks with all 8 TPCs on is not a preset: compare through the physics
    from powertrain.twin import physics

    cols = [np.array([float(row[c].iloc[0])]) for c in ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz")]
    all_on = physics.minibatch(twin.dev, twin.wl, *cols, np.array([16.0]), tpc_frac=1.0)
    assert gated.time_ms > all_on["time_ms"][0] and gated.power_w < all_on["power_w"][0]
    assert gated.p_gpu_w < 0.75 * all_on["p_gpu_w"][0]  # 4 of 8 TPCs: about half
    est = twin.expected(pre.reset_index().drop(columns=["name", "budget_w"]), 16)
    assert est.time_ms.is_unique and (est.power_w > 0).all()
    # MAXN is a custom mode too: the same figures whether or not gpu_tpcs is given
    maxn = twin.expected(dev.maxn(), 16)
    assert est.loc[0, "time_ms"] == maxn.time_ms.iloc[0]


def test_a_preset_off_its_table_or_gating_without_a_tpc_count_is_refused():
    spec = load_device_spec("orin-agx").to_dict()
    spec["name"] = "orin-agx-bad"
    spec["presets"][1]["gpu_mhz"] = 400.0
    with pytest.raises(SpecError, match=r"MODE_15W\) 'gpu_mhz' = 400.0 is not in the 'gpu_mhz'"):
        pt.get_device(spec)
    spec = load_device_spec("orin-agx").to_dict()
    spec["name"] = "orin-agx-bad"
    del spec["hardware"]["gpu_tpcs"]
    with pytest.raises(SpecError, match="gates TPCs .*give 'hardware.gpu_tpcs'"):
        pt.get_device(spec)


def test_custom_mode_corpora_are_unchanged_by_presets():
    """The twin's expectation of every custom mode is what the shipped corpora hold."""
    from powertrain.data.corpora import load_corpus

    twin = pt.Twin("orin-agx", "resnet18", seed=0)
    corpus = load_corpus("orin-agx_resnet18_bs16").head(50)
    est = twin.expected(corpus[["cores", "cpu_mhz", "gpu_mhz", "mem_mhz"]], 16)
    ratio = est.time_ms.to_numpy() / corpus.time_ms.to_numpy()
    assert np.median(np.abs(np.log(ratio))) < 0.05  # measured vs expected: noise only
    assert isinstance(est, pd.DataFrame)
