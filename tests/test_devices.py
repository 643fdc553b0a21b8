"""Device catalog, power-mode enumeration, presets, sampling and sweep order."""

import json

import numpy as np
import pandas as pd
import pytest

import powertrain as pt
from powertrain.errors import ModeError, SpecError

EXPECTED_MODES = {
    "orin-agx": 18096,
    "xavier-agx": 29232,
    "orin-nano": 1800,
    "nano": 5040,
    "tx2-nx": 4680,
    # the Super images (JetPack 6.2+): cores x CPU x GPU x memory
    "orin-nano-super": 6 * 22 * 8 * 4,
    "orin-nano-4gb-super": 6 * 22 * 8 * 4,
    "orin-nx-8gb-super": 6 * 26 * 10 * 4,
    "orin-nx-16gb-super": 8 * 26 * 10 * 4,
}


#: datacenter GPUs of the real traces: one knob, the power limit (25 W steps)
GPU_MODES = {"v100": 7, "a40": 9}


def test_catalog_lists_the_jetsons_and_two_gpus():
    assert set(pt.device_names()) == set(EXPECTED_MODES) | set(GPU_MODES)


@pytest.mark.parametrize("name,count", GPU_MODES.items())
def test_a_gpu_declares_its_own_knobs(name, count):
    dev = pt.get_device(name)
    assert dev.knobs == ("power_limit_w",) and dev.n_modes == count
    assert dev.config_columns == ("power_limit_w", "batch_size")
    modes = dev.power_modes()
    assert list(modes.columns) == ["power_limit_w"] and modes.power_limit_w.min() == 100
    assert dev.maxn().power_limit_w.item() == modes.power_limit_w.max()
    order = dev.sweep_order(modes)
    assert order.power_limit_w.is_monotonic_decreasing and not order.reset_before.any()
    assert len(dev.sample(3, seed=1)) == len(dev.sample(3, seed=1, stratified=True)) == 3
    with pytest.raises(pt.ModeError, match=r"row 2, column 'power_limit_w': 130 is not a"):
        dev.validate(pd.DataFrame({"power_limit_w": [100, 130]}))
    again = pt.get_device(dev.spec.to_dict())  # the JSON form round-trips
    assert again.spec == dev.spec


def test_a_jetson_spec_round_trips_through_its_json_form():
    spec = pt.get_device("orin-agx").spec
    assert pt.get_device(spec.to_dict()).spec == spec


@pytest.mark.parametrize(
    "spec, match",
    [
        ({"name": "g", "knobs": {}}, "non-empty mapping"),
        ({"name": "g", "knobs": {"batch_size": [1]}}, "'batch_size' is reserved"),
        ({"name": "g", "knobs": {"power_limit_w": [100, 100]}}, "lists a value twice"),
        ({"name": "g", "knobs": {"power_limit_w": [-5]}}, r"knobs\['power_limit_w'\]\[0\]"),
        ({"name": "g", "knobs": {"w": [1]}, "cores": 4}, "either 'knobs' or"),
        ({"name": "g", "knobs": {"w": [1]}, "step_down": ["v"]}, "step_down"),
        ({"name": "g"}, "or give 'knobs'"),
    ],
)
def test_bad_knob_specs_are_refused_by_name(spec, match):
    with pytest.raises(pt.SpecError, match=match):
        pt.get_device(spec)


@pytest.mark.parametrize("name,count", EXPECTED_MODES.items())
def test_mode_counts_match_the_paper(name, count):
    dev = pt.get_device(name)
    modes = dev.power_modes()
    assert len(modes) == count == dev.n_modes
    assert list(modes.columns) == ["cores", "cpu_mhz", "gpu_mhz", "mem_mhz"]
    assert not modes.duplicated().any()


def test_orin_profiling_grid_is_the_papers_4368():
    dev = pt.get_device("orin-agx")
    grid = dev.profiling_grid()
    assert len(grid) == 4368
    assert sorted(grid["cores"].unique()) == [2, 4, 6, 8, 10, 12]
    assert grid["cpu_mhz"].nunique() == 14 and grid["gpu_mhz"].nunique() == 13
    assert grid["mem_mhz"].nunique() == 4
    # the two slowest CPU frequencies are excluded
    assert grid["cpu_mhz"].min() > sorted(dev.spec.cpu_mhz)[1]
    # every grid mode is a real mode
    all_modes = dev.power_modes()
    merged = grid.merge(all_modes, how="left", indicator=True)
    assert (merged["_merge"] == "both").all()


def test_devices_without_published_grid_fall_back_to_all_modes():
    dev = pt.get_device("orin-nano")
    assert len(dev.profiling_grid()) == 1800


def test_presets_resolve_caps_to_the_boards_values():
    orin = pt.get_device("orin-agx")
    presets = orin.presets().set_index("name")
    assert set(presets.index) == {"MAXN", "MODE_15W", "MODE_30W", "MODE_50W"}
    maxn = presets.loc["MAXN"]
    assert (maxn["cores"], maxn["cpu_mhz"], maxn["gpu_mhz"], maxn["mem_mhz"]) == (
        12,
        2201.6,
        1300.5,
        3199.0,
    )
    assert presets.loc["MODE_15W", "budget_w"] == 15
    orin.validate(presets.reset_index(), presets=True)  # every preset passes as a preset
    nano = pt.get_device("nano").presets().set_index("name")
    # nvpmodel asks 640 MHz for the Nano 5W GPU; the driver rounds down to 614.4
    assert nano.loc["5W", "gpu_mhz"] == pytest.approx(614.4)


def test_maxn_is_the_top_of_every_table():
    dev = pt.get_device("xavier-agx")
    row = dev.maxn().iloc[0]
    assert row["gpu_mhz"] == max(dev.spec.gpu_mhz) and row["cores"] == 8


def test_random_sample_is_seeded_and_distinct():
    dev = pt.get_device("orin-agx")
    a, b = dev.sample(50, seed=3), dev.sample(50, seed=3)
    pd.testing.assert_frame_equal(a, b)
    assert not a.duplicated().any()
    assert not dev.sample(50, seed=4).equals(a)


def test_stratified_sample_covers_gpu_mem_cells():
    dev = pt.get_device("orin-agx")
    s = dev.sample(52, seed=0, stratified=True)
    assert len(s) == 52 and not s.duplicated().any()
    # 13 GPU x 4 memory = 52 cells: one mode in each
    assert s.groupby(["gpu_mhz", "mem_mhz"]).size().max() == 1


def test_sample_rejects_bad_n():
    with pytest.raises(ValueError, match="n=5000: a sample needs 1..1,800"):
        pt.get_device("orin-nano").sample(5000)


def test_sweep_order_only_steps_down_within_chains():
    dev = pt.get_device("orin-agx")
    order = dev.sweep_order(dev.profiling_grid().sample(frac=1.0, random_state=0))
    assert len(order) == 4368
    chain = order["reset_before"].cumsum()
    for _, seg in order.groupby(chain):
        assert (np.diff(seg["gpu_mhz"]) <= 0).all()
        assert (np.diff(seg["cpu_mhz"]) <= 0).all()
    # one reset per GPU step after the first: the minimum for a 13 x 14 CPU-GPU grid
    assert order["reset_before"].sum() == 12
    assert not order["reset_before"].iloc[0]


def test_validate_names_row_and_column_of_a_bad_frequency():
    dev = pt.get_device("orin-agx")
    modes = dev.sample(5, seed=0)
    modes.loc[3, "gpu_mhz"] = 999.0
    with pytest.raises(
        ModeError, match=r"row 4, column 'gpu_mhz': 999 MHz is not a orin-agx frequency"
    ):
        dev.validate(modes)
    modes = dev.sample(5, seed=0)
    modes.loc[0, "cores"] = 13
    with pytest.raises(ModeError, match=r"row 1, column 'cores'"):
        dev.validate(modes)


def test_validate_snaps_float_noise():
    dev = pt.get_device("orin-agx")
    modes = dev.sample(3, seed=1)
    noisy = modes.assign(cpu_mhz=modes["cpu_mhz"] + 1e-6)
    out = dev.validate(noisy)
    assert (out["cpu_mhz"].to_numpy() == modes["cpu_mhz"].to_numpy()).all()


def test_unknown_device_is_a_clear_error():
    with pytest.raises(SpecError, match="unknown device 'orin-xl'; known: .*orin-agx"):
        pt.get_device("orin-xl")


def test_user_device_spec_from_dict_and_file(tmp_path):
    spec = {
        "name": "my-board",
        "cores": 2,
        "cpu_mhz": [500, 1000],
        "gpu_mhz": [300, 600, 900],
        "mem_mhz": [800],
        "presets": [{"name": "TOP", "cores": 2, "cpu_mhz": 1000, "gpu_mhz": 900, "mem_mhz": 800}],
    }
    dev = pt.get_device(spec)
    assert dev.n_modes == 2 * 2 * 3 * 1 == len(dev.power_modes())
    path = tmp_path / "my-board.json"
    path.write_text(json.dumps(spec))
    assert pt.get_device(str(path)).n_modes == 12
    assert list(pt.get_device(path).presets()["name"]) == ["TOP"]


@pytest.mark.parametrize(
    "text,match",
    [
        ("{not json", r"not valid JSON: line 1"),
        ("[1, 2]", "must hold a JSON object"),
        ('{"name": "x", "cores": 2, "cpu_mhz": [1], "gpu_mhz": [1]}', "missing field.*mem_mhz"),
        (
            '{"name": "x", "cores": 0, "cpu_mhz": [1], "gpu_mhz": [1], "mem_mhz": [1]}',
            "'cores' must be",
        ),
        (
            '{"name": "x", "cores": 2, "cpu_mhz": [1, "fast"], "gpu_mhz": [1], "mem_mhz": [1]}',
            r"'cpu_mhz'\[1\] = 'fast' is not a frequency in MHz",
        ),
    ],
)
def test_malformed_device_spec_files_name_the_file_and_field(tmp_path, text, match):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(SpecError, match=match) as info:
        pt.get_device(path)
    assert "bad.json" in str(info.value)


def test_missing_spec_file():
    with pytest.raises(SpecError, match="does not exist"):
        pt.get_device("nowhere/board.json")


def test_sampling_a_huge_space_does_not_enumerate_it():
    spec = dict(
        name="huge",
        cores=1000,
        cpu_mhz=list(range(1, 1001)),
        gpu_mhz=list(range(1, 1001)),
        mem_mhz=list(range(1, 101)),
    )  # 10^11 modes: enumerating them would need terabytes
    s = pt.get_device(spec).sample(100, seed=0)
    assert len(s) == 100 and not s.duplicated().any()
    assert s.cores.between(1, 1000).all() and s.mem_mhz.between(1, 100).all()


def test_sample_draws_the_same_modes_as_indexing_the_space():
    dev = pt.get_device("orin-agx")
    pool = dev.power_modes()
    idx = np.sort(np.random.default_rng(3).choice(len(pool), 50, replace=False))
    assert dev.sample(50, seed=3).equals(pool.iloc[idx].reset_index(drop=True))


@pytest.mark.parametrize("bad", [float("inf"), 1e300, float("nan"), 0, -1])
def test_absurd_spec_frequencies_are_refused(bad):
    spec = dict(name="x", cores=4, cpu_mhz=[100], gpu_mhz=[100, bad], mem_mhz=[100])
    with pytest.raises(pt.SpecError, match=r"'gpu_mhz'\[1\] = .* is not a frequency in MHz"):
        pt.get_device(spec)


@pytest.mark.parametrize(
    "knob", ["power_w", "time_ms", "device", "workload", "power_w_std", "observed_gpu_mhz"]
)
def test_knobs_named_like_a_column_the_package_writes_are_refused(knob):
    with pytest.raises(pt.SpecError, match=f"knob name '{knob}' is reserved"):
        pt.get_device({"name": "g", "knobs": {knob: [100, 200]}})


def test_a_space_too_big_for_one_table_is_refused_by_size_and_iterated_in_chunks():
    from powertrain.devices.device import MAX_MODES

    tables = {f"k{i}": list(range(1, 401)) for i in range(6)}
    dev = pt.get_device({"name": "huge", "knobs": tables})
    with pytest.raises(pt.ModeError, match=r"4,096,000,000,000,000 modes, more than the"):
        dev.power_modes()
    first = next(dev.iter_power_modes(chunk=5))
    assert len(first) == 5 and list(first["k5"]) == [1, 2, 3, 4, 5]
    assert dev.n_modes > MAX_MODES
    small = pt.get_device("orin-nano")
    pd.testing.assert_frame_equal(
        pd.concat(list(small.iter_power_modes(chunk=700))), small.power_modes()
    )


@pytest.mark.parametrize("n, seed, match", [(5, -1, "seed=-1"), (10**7, 0, "n=10000000")])
def test_a_sample_names_a_bad_size_or_seed(n, seed, match):
    with pytest.raises(pt.DataError, match=match):
        pt.get_device("orin-nano").sample(n, seed=seed)


def test_a_device_id_registered_again_with_another_spec_warns():
    import warnings

    from powertrain.devices.specs import load_device_spec, register_device, unregister_device

    spec = load_device_spec("orin-agx").to_dict()
    spec["name"] = "orin-agx-twice"
    unregister_device("orin-agx-twice")
    try:
        register_device(spec)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            register_device(dict(spec))  # the same spec again: a no-op, silent
        other = {**spec, "description": "another board"}
        with pytest.warns(RuntimeWarning, match="'orin-agx-twice' was registered with another"):
            register_device(other)
        assert pt.get_device("orin-agx-twice").spec.description == "another board"
    finally:
        unregister_device("orin-agx-twice")
