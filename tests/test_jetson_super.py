"""The Orin Nano and Orin NX on their Super images: catalog, presets by name, the twin.

The caps below are ../shared/reference/super_modes.md's (nvpmodel_p3767_000{0,1,3,4}
_super.conf), resolved to the table entry the board runs at; tests/test_presets.py also
checks every preset against the raw transcription in tests/data/nvpmodel_presets.json.
"""

import numpy as np
import pytest

import powertrain as pt
from powertrain.devices.presets import find_preset, nvpmodel_info, preset_id, preset_note
from powertrain.errors import ModeError
from powertrain.twin.params import DERIVED, device_params

SUPER = ("orin-nano-super", "orin-nano-4gb-super", "orin-nx-8gb-super", "orin-nx-16gb-super")

#: device -> {preset: (ID, cores, CPU MHz, GPU MHz, EMC MHz, TPC_PG_MASK)}
CAPS = {
    "orin-nano-super": {
        "15W": (0, 6, 1497.6, 612, 2133, 240),
        "25W": (1, 6, 1344, 918, 3199, 240),
        "MAXN_SUPER": (2, 6, 1728, 1020, 3199, 240),
    },
    "orin-nano-4gb-super": {
        "10W": (0, 6, 1497.6, 612, 2133, 252),
        "25W": (1, 6, 1728, 1020, 3199, 252),
        "MAXN_SUPER": (2, 6, 1728, 1020, 3199, 252),
    },
    "orin-nx-16gb-super": {
        "MAXN_SUPER": (0, 8, 1984, 1173, 3199, 240),
        "10W": (1, 4, 1190.4, 612, 2133, 252),
        "15W": (2, 4, 1420.8, 612, 3199, 252),
        "25W": (3, 8, 1497.6, 408, 3199, 240),
        "40W": (4, 8, 1497.6, 1173, 3199, 240),
    },
    "orin-nx-8gb-super": {
        "MAXN_SUPER": (0, 6, 1984, 1173, 3199, 240),
        "10W": (1, 4, 1190.4, 612, 2133, 252),
        "15W": (2, 4, 1420.8, 612, 3199, 252),
        "20W": (3, 6, 1497.6, 408, 3199, 240),
        "40W": (4, 6, 1984, 1173, 3199, 240),
    },
}


@pytest.mark.parametrize("device", SUPER)
def test_each_super_preset_is_found_by_name_with_the_caps_of_its_file(device):
    for name, (pid, cores, cpu, gpu, mem, mask) in CAPS[device].items():
        p = find_preset(device, name)
        got = (p["nvpmodel_id"], p["cores"], p["cpu_mhz"], p["gpu_mhz"], p["mem_mhz"])
        assert got == pytest.approx((pid, cores, cpu, gpu, mem)), f"{device} {name}"
        assert p["tpc_pg_mask"] == mask
    assert [p["name"] for p in pt.get_device(device).spec.presets] == list(CAPS[device])
    assert nvpmodel_info(device)["image"] == "super"


def test_ids_are_per_image_and_names_are_forgiving():
    # the trap: on a Super image the Orin Nano's ID 1 is 25W; before it, 7W
    assert preset_id("orin-nano-super", "25W") == 1
    assert preset_id("orin-nano", "7W") == 1
    assert preset_id("orin-nano-super", "maxn super") == 2  # ID 0 on the NX
    assert preset_id("orin-nx-16gb-super", "MAXN-SUPER") == 0
    assert find_preset("orin-agx", "15w")["name"] == "MODE_15W"
    with pytest.raises(ModeError, match="no preset '7W'.*super image; its presets: 10W, 25W"):
        find_preset("orin-nano-4gb-super", "7W")
    # a mode newer releases have, whose caps no primary source gives: said, not guessed
    with pytest.raises(ModeError, match="'7W' exists as nvpmodel ID 3 .*not found in a primary"):
        find_preset("orin-nano-super", "7W")
    assert "clock caps, not power budgets" in preset_note("orin-nx-16gb-super")
    assert preset_note("v100") is None


def test_the_super_tables_reach_the_super_clocks_and_the_old_orin_nano_is_unchanged():
    nano = pt.get_device("orin-nano-super").spec
    assert max(nano.gpu_mhz) == 1020 and max(nano.mem_mhz) == 3199 and max(nano.cpu_mhz) == 1728
    assert len(nano.cpu_mhz) == 22 and np.allclose(np.diff(nano.gpu_mhz), 102)
    nx = pt.get_device("orin-nx-16gb-super").spec
    assert (max(nx.cpu_mhz), max(nx.gpu_mhz), nx.cores) == (1984, 1173, 8)
    old = pt.get_device("orin-nano").spec  # existing benchmarks and corpora depend on it
    assert old.gpu_mhz == (306, 408, 510, 612, 624.75) and max(old.mem_mhz) == 2133
    assert pt.get_device("orin-nano").n_modes == 1800


@pytest.mark.parametrize("device", SUPER)
def test_every_table_says_where_it_came_from(device):
    spec = pt.get_device(device).spec
    prov = spec.extra["provenance"]
    for knob in ("cpu_mhz", "gpu_mhz", "mem_mhz", "presets"):
        assert prov[knob]["source"], f"{device} {knob}"
    for knob in ("cpu_mhz", "gpu_mhz", "mem_mhz"):
        table = getattr(spec, knob)
        unsourced = prov[knob]["not_in_primary_source"]
        assert set(unsourced) <= set(table), f"{device} {knob}: marks a value it lacks"
        # every preset clock is a cap some nvpmodel file writes, or the table's top
        for p in spec.presets:
            assert p[knob] not in unsourced or p[knob] == max(table), f"{device} {p['name']}"


@pytest.mark.parametrize("device", SUPER)
def test_the_twin_covers_each_module_with_derived_and_labelled_constants(device):
    spec = pt.get_device(device).spec
    given = {f"{s}.{k}" for s, sub in spec.twin.items() if isinstance(sub, dict) for k in sub}
    assert given == {"gpu.dyn_w", "mem.dyn_w", "cpu.dyn_w_per_core"}  # + static_w
    assert any(s.startswith("estimated, not measured") for s in spec.extra["sources"])
    p = device_params(spec)
    for key, (_, rule) in DERIVED.items():
        assert p[key] == pytest.approx(rule(spec)), key
    dev = pt.get_device(device)
    twin = pt.Twin(dev, "resnet18", seed=0)
    est = twin.expected(dev.presets().drop(columns=["name", "budget_w"]), 16)
    assert (est.time_ms > 0).all() and (est.power_w > 0).all()
    slow = twin.expected(dev.power_modes().head(1), 16).time_ms.iloc[0]
    assert slow > twin.expected(dev.maxn(), 16).time_ms.iloc[0]


def test_the_super_image_is_faster_than_the_old_one_on_the_same_module():
    """The Super clocks (GPU 1020 vs 624.75 MHz, EMC 3199 vs 2133) make the same module's
    top mode faster in the twin; the old twin's constants were never changed for this."""
    old = pt.Twin("orin-nano", "resnet18", seed=0)
    new = pt.Twin("orin-nano-super", "resnet18", seed=0)
    t_old = old.expected(pt.get_device("orin-nano").maxn(), 16).time_ms.iloc[0]
    t_new = new.expected(pt.get_device("orin-nano-super").maxn(), 16).time_ms.iloc[0]
    assert t_new < t_old


def test_the_two_images_of_one_module_agree_at_the_clocks_they_share():
    """orin-nano's twin was calibrated; orin-nano-super's is derived from its datasheet
    alone. The same silicon at the same clocks should cost about the same."""
    import pandas as pd

    shared = pd.DataFrame(
        [
            dict(cores=6, cpu_mhz=1497.6, gpu_mhz=612.0, mem_mhz=2133.0),
            dict(cores=4, cpu_mhz=960.0, gpu_mhz=408.0, mem_mhz=2133.0),
            dict(cores=6, cpu_mhz=1497.6, gpu_mhz=306.0, mem_mhz=665.6),
        ]
    )
    for workload in ("resnet18", "mobilenetv3"):
        old = pt.Twin("orin-nano", workload, seed=0).expected(shared, 16)
        new = pt.Twin("orin-nano-super", workload, seed=0).expected(shared, 16)
        assert np.allclose(new.time_ms, old.time_ms, rtol=0.10), workload
        assert np.allclose(new.power_w, old.power_w, rtol=0.20), workload
