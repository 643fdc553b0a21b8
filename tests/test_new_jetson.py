"""A Jetson outside the catalog, from NVIDIA's public figures to a report, no workaround.

examples/orin-nx-16gb.json gives only datasheet facts (core counts, clock tables, TPCs,
memory bus), the nvpmodel presets and four power figures; the twin derives the rest.
"""

import json
from pathlib import Path

import pytest

import powertrain as pt
from powertrain.devices.specs import unregister_device
from powertrain.twin.params import DERIVED, device_params

SPEC = Path(__file__).resolve().parents[1] / "examples" / "orin-nx-16gb.json"


@pytest.fixture
def nx():
    unregister_device("orin-nx-16gb")
    yield pt.get_device(SPEC)
    unregister_device("orin-nx-16gb")


def test_the_twin_derives_what_the_datasheet_implies(nx):
    p = device_params(nx.spec)
    assert p["gpu.gflops_per_mhz"] == pytest.approx(2.048)  # 1024 cores x 2 FLOP
    assert p["gpu.parallel_width"] == pytest.approx(8.0)
    assert p["mem.gbps_per_mhz"] * 3199 == pytest.approx(102.4, rel=1e-3)  # the datasheet's
    given = {s: sub for s, sub in nx.spec.twin.items() if isinstance(sub, dict)}
    twin_keys = {f"{s}.{k}" for s, sub in given.items() for k in sub}
    assert twin_keys == {"gpu.dyn_w", "mem.dyn_w", "cpu.dyn_w_per_core"}  # + static_w


def test_derivation_agrees_with_every_catalog_jetson():
    """Where a catalog spec gives both the facts and the constant, they agree."""
    for name in pt.device_names():
        spec = pt.get_device(name).spec
        if spec.twin is None or not spec.hardware:
            continue
        p = device_params(spec)
        for key, (source, rule) in DERIVED.items():
            if source.startswith("hardware.") and source.split(".")[1] in spec.hardware:
                assert rule(spec) == pytest.approx(p[key]), f"{name} {key}"


@pytest.mark.slow
def test_a_jetson_from_its_datasheet_goes_from_spec_to_report(nx, tmp_path):
    twin = pt.Twin(SPEC, "resnet18", seed=0)
    samples = pt.profile(twin, nx.sample(10, seed=0, stratified=True), 16, progress=False)
    assert set(samples.device) == {"orin-nx-16gb"}
    modes = nx.power_modes()
    truth = twin.expected(modes, 16)
    top = truth.loc[truth.time_ms.idxmin()]
    assert 12 < top.power_w < 40  # a 10-25 W module, at its fastest mode
    ref = pt.Predictor.from_pretrained("orin-agx/resnet18")
    model = ref.transfer(samples, epochs=10, random_state=0)
    est = model.predict(modes, 16, return_std=False)
    pick = pt.fastest_under(est, power_cap_w=15)
    assert pick["power_w"] <= 15
    pre = nx.presets()
    assert pre.gpu_tpcs.tolist() == [4, 2, 2, 4]
    on_presets = twin.expected(pre.drop(columns=["name", "budget_w"]), 16)
    assert on_presets.time_ms.iloc[0] < on_presets.time_ms.iloc[1]  # MAXN beats 10W
    model.save(tmp_path / "nx-model")
    toml = tmp_path / "fleet.toml"
    toml.write_text(
        f'device_specs = ["{SPEC}"]\ndevices = ["orin-nx-16gb"]\nbatch_sizes = [16]\n'
        'power_caps = [12, 20]\nsamples = 10\nworkloads = ["resnet18"]\n'
        'reference = "nx-model"\n'
    )
    unregister_device("orin-nx-16gb")  # the report spec alone declares the device
    result = pt.report(toml, tmp_path / "report", n_jobs=1)
    state = json.loads((tmp_path / "report" / "report.json").read_text())
    assert "orin-nx-16gb" in json.dumps(state) and len(result.computed) == 1


def test_docs_table_names_every_twin_constant():
    from powertrain.twin.params import DEVICE_KEYS, WORKLOAD_KEYS

    doc = (Path(__file__).resolve().parents[1] / "docs" / "twin.md").read_text()
    for section, keys in DEVICE_KEYS.items():
        for key in keys:
            name = section if section == "static_w" else f"{section}.{key}"
            assert f"`{name}`" in doc, name
    for key in WORKLOAD_KEYS:
        assert f"`{key}`" in doc, key
