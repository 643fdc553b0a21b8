"""A P3767 Jetson (Orin Nano / Orin NX) recognised, its pick applied and restored, and
written as an nvpmodel custom mode that reads back the same, all on fake sysfs trees."""

import os
import warnings

import pandas as pd
import pytest
from fake_sysfs import GPU_DIR, make_p3767

import powertrain as pt
from powertrain.backends.jetson import nvpmodel
from powertrain.backends.jetson.board_id import SuperFirmwareWarning, read_board, recognise
from powertrain.cli import main
from powertrain.errors import ModeError, ProfilingError

MODULES = (
    "orin-nano",
    "orin-nano-super",
    "orin-nano-4gb-super",
    "orin-nx-8gb-super",
    "orin-nx-16gb-super",
)


@pytest.mark.parametrize("device", MODULES)
def test_each_module_is_recognised_from_its_device_tree_and_nvpmodel_file(tmp_path, device):
    make_p3767(tmp_path, device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a board that matches its spec: nothing to warn
        rec = recognise(tmp_path)
    assert rec.spec.name == device and not rec.warnings
    spec = rec.spec
    assert rec.board.image == spec.extra["nvpmodel"]["image"]
    assert rec.board.active_mode == spec.extra["nvpmodel"]["default_preset"]
    assert rec.tables.gpu_mhz == spec.gpu_mhz and rec.tables.cores == spec.cores
    for p in spec.presets:  # by name, on the board's own file
        assert rec.preset_id(p["name"]) == p["nvpmodel_id"]


def test_a_super_image_with_capped_firmware_is_named_not_trusted(tmp_path):
    make_p3767(tmp_path, "orin-nano-super", capped=True)
    with pytest.warns(SuperFirmwareWarning, match=r"stop at 624\.75 MHz.*25W, MAXN_SUPER"):
        rec = recognise(tmp_path)
    assert max(rec.tables.gpu_mhz) == 624.75  # the board's table is used
    assert any("boot firmware lacks its Super part" in w for w in rec.warnings)
    # the profiler says it too, and draws from the board's table
    with pytest.warns(SuperFirmwareWarning):
        backend = pt.backends.JetsonBackend(
            "auto", lambda bs: None, root=tmp_path, sensor="hwmon", check_root=False,
            handle_signals=False, fan=False,
        )  # fmt: skip
    try:
        assert backend.device.name == "orin-nano-super"
        assert max(backend.device.spec.gpu_mhz) == 624.75
    finally:
        backend.close()


def test_an_unknown_module_or_a_board_without_a_device_tree_is_said(tmp_path):
    make_p3767(tmp_path, "orin-nano-super")
    (tmp_path / "proc/device-tree/compatible").write_bytes(b"nvidia,p9999-0000\0")
    with pytest.raises(ProfilingError, match="p9999-0000.*no catalog device matches"):
        recognise(tmp_path)
    assert recognise(tmp_path, device="orin-nano-super").spec.name == "orin-nano-super"
    assert read_board(tmp_path / "nothing").conf is None


def test_profiling_rows_record_vdd_in_and_the_rails_beside_it(tmp_path):
    board = make_p3767(tmp_path, "orin-nx-16gb-super")
    with pt.backends.JetsonBackend(
        "orin-nx-16gb-super", lambda bs: None, root=tmp_path, sensor="hwmon",
        write=board.kernel, check_root=False, handle_signals=False, fan=False,
        sample_period_s=0.01,
    ) as backend:  # fmt: skip
        assert backend.sensor.rails == ["VDD_IN"]
        assert backend.observed_columns == ("observed_vdd_cpu_gpu_cv_w", "observed_vdd_soc_w")
        backend.configure(dict(cores=4, cpu_mhz=1190.4, gpu_mhz=612, mem_mhz=2133, batch_size=8))
        import time

        t0 = backend.clock()
        time.sleep(0.2)
        seen = backend.observed(t0, backend.clock())
        total = backend.sensor.read_w()
        parts = backend.sensor.read_components()
        assert seen["observed_vdd_soc_w"] == pytest.approx(parts["VDD_SOC"], rel=1e-6)
        assert total > parts["VDD_CPU_GPU_CV"] + parts["VDD_SOC"] - 1e-9  # VDD_IN: the whole
        assert "VDD_IN" in backend.describe()["power_w_is"]


@pytest.mark.parametrize("device", MODULES)
def test_a_block_reads_back_as_the_configuration_it_was_written_from(device):
    dev = pt.get_device(device)
    for _, row in dev.sample(12, seed=3).iterrows():
        block = nvpmodel.write_block(dev, row, 20, "PICK")
        back = nvpmodel.read_block(dev, block)
        for k in ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz"):
            assert back[k] == pytest.approx(row[k]), (device, k)
        assert (
            back["cpu_min_mhz"] == back["cpu_mhz"]
            and back["gpu_tpcs"] == dev.spec.hardware["gpu_tpcs"]
        )
        lines = block.splitlines()
        assert (
            sum(line.startswith("CPU_ONLINE") and line.endswith(" 1") for line in lines)
            == (row["cores"])
        )


def test_a_block_off_the_tables_is_refused_naming_the_clock():
    dev = pt.get_device("orin-nano-super")
    with pytest.raises(ModeError, match="'gpu_mhz': 1100 MHz is not a orin-nano-super"):
        nvpmodel.write_block(dev, dict(cores=6, cpu_mhz=1728, gpu_mhz=1100, mem_mhz=3199), 9)
    good = nvpmodel.write_block(dev, dict(cores=6, cpu_mhz=1728, gpu_mhz=1020, mem_mhz=3199), 9)
    bad = good.replace("GPU MAX_FREQ 1020000000", "GPU MAX_FREQ 1100000000")
    with pytest.raises(ModeError, match="'gpu_mhz': 1100 MHz"):
        nvpmodel.read_block(dev, bad)
    with pytest.raises(ModeError, match="uncapped"):
        nvpmodel.read_block(dev, good.replace("EMC MAX_FREQ 3199000000", "EMC MAX_FREQ -1"))
    with pytest.raises(ModeError, match="gates every TPC"):
        nvpmodel.read_block(dev, good.replace("TPC_PG_MASK 240", "TPC_PG_MASK 255"))


def test_install_needs_the_flag_keeps_a_backup_and_refuses_a_clash(tmp_path, monkeypatch):
    make_p3767(tmp_path, "orin-nano-super")
    conf = tmp_path / "etc/nvpmodel.conf"
    before = conf.read_text()
    config = "cores=4,cpu_mhz=1344,gpu_mhz=918,mem_mhz=3199"
    out = tmp_path / "block.conf"
    argv = ["apply", "--root", str(tmp_path), "--config", config, "--nvpmodel", str(out)]
    assert main(argv) == 0
    assert conf.read_text() == before  # written out, not installed
    back = nvpmodel.read_block("orin-nano-super", out.read_text())
    assert (back["cores"], back["cpu_mhz"], back["gpu_mhz"], back["mem_mhz"]) == (
        4,
        1344,
        918,
        3199,
    )
    assert nvpmodel.parse_modes(out.read_text())[0]["id"] == 3  # above the file's 0..2
    assert main([*argv, "--install"]) == 0
    assert conf.is_symlink()  # the link kept, its target changed
    after = conf.read_text()
    assert nvpmodel.conf_modes(after) == {"15W": 0, "25W": 1, "MAXN_SUPER": 2, "POWERTRAIN": 3}
    assert nvpmodel.conf_default(after) == 1  # the boot mode is not changed
    backups = list(conf.resolve().parent.glob("*.powertrain-*.bak"))
    assert len(backups) == 1 and backups[0].read_text() == before
    with pytest.raises(ModeError, match="already has mode ID=3"):
        nvpmodel.install_block(conf, out.read_text())
    assert conf.read_text() == after


def test_apply_and_restore_leave_the_tree_as_it_was(tmp_path):
    board = make_p3767(tmp_path, "orin-nano-super")
    before = board.state()
    pick = pd.DataFrame([dict(cores=4, cpu_mhz=1344.0, gpu_mhz=918.0, mem_mhz=3199.0)])
    kw = dict(root=tmp_path, write=board.kernel, check_root=False, handle_signals=False)
    with pt.apply("auto", pick, **kw) as applied:
        assert applied.state == dict(cores=4, cpu_mhz=1344.0, gpu_mhz=918.0, mem_mhz=3199.0)
        assert board.read(f"{GPU_DIR}/max_freq") == "918000000"
    assert board.state() == before
    with pytest.raises(ProfilingError, match="GPU 1000 MHz is not in this board's table"):
        pt.apply("auto", dict(cores=4, cpu_mhz=1344, gpu_mhz=1000, mem_mhz=3199), **kw)
    assert board.state() == before
    board.refuse.add("cpu4/cpufreq/scaling_max_freq")  # the kernel refuses midway
    with pytest.raises(ProfilingError, match="refused"):
        pt.apply("auto", pick, **kw)
    board.refuse.clear()
    assert board.state() == before  # restored after a partial write
    kept = pt.apply("auto", pick, keep=True, **kw)
    assert board.state() != before and kept.state["gpu_mhz"] == 918.0
    kept.restore()
    assert board.state() == before


def test_apply_needs_root_and_a_preset_is_resolved_by_name_on_the_board(tmp_path, capsys):
    make_p3767(tmp_path, "orin-nano-super")
    if os.geteuid() != 0:
        with pytest.raises(ProfilingError, match="needs root"):
            pt.apply("auto", dict(cores=6, cpu_mhz=1728, gpu_mhz=1020, mem_mhz=3199), root=tmp_path)
    assert main(["apply", "--root", str(tmp_path), "--preset", "25W"]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("sudo nvpmodel -m 1") and "clock cap" in out.err
    nano = tmp_path / "old"
    make_p3767(nano, "orin-nano")
    assert main(["apply", "--root", str(nano), "--preset", "7W"]) == 0
    assert capsys.readouterr().out.startswith("sudo nvpmodel -m 1")
    assert main(["apply", "--root", str(nano), "--preset", "25W"]) == 1
    assert "no preset '25W' on its non-super image" in capsys.readouterr().err


@pytest.mark.system  # runs a subprocess under the pick
def test_the_command_runs_a_job_under_the_pick_then_restores_or_keeps_it(tmp_path, monkeypatch):
    board = make_p3767(tmp_path, "orin-nx-8gb-super")
    before = board.state()
    monkeypatch.setattr(os, "geteuid", lambda: 0)  # the fake tree stands in for root's sysfs
    seen = tmp_path / "seen.txt"
    gpu = tmp_path / GPU_DIR / "max_freq"
    config = "cores=4,cpu_mhz=1420.8,gpu_mhz=612,mem_mhz=3199"
    job = ["--", "sh", "-c", f"cat {gpu} > {seen}"]
    assert main(["apply", "--root", str(tmp_path), "--config", config, *job]) == 0
    assert seen.read_text().strip() == "612000000"  # the job ran under the pick
    assert board.state() == before  # and the board is back
    assert main(["apply", "--root", str(tmp_path), "--config", config, "--keep"]) == 0
    assert board.read(f"{GPU_DIR}/max_freq") == "612000000"
    assert board.read("sys/devices/system/cpu/cpu5/online") == "0"
    assert main(["apply", "--root", str(tmp_path), "--config", "cores=4,gpu_mhz=612"]) == 1


def test_a_pick_of_select_becomes_a_custom_mode_with_the_same_clocks(tmp_path, capsys):
    dev = pt.get_device("orin-nano-super")
    twin = pt.Twin(dev, "resnet18", seed=0)
    est = twin.expected(dev.sample(200, seed=1), 16).assign(device=dev.name, batch_size=16)
    est.to_csv(tmp_path / "est.csv", index=False)
    assert main(["select", str(tmp_path / "est.csv"), "--power-cap", "12", "--plain", "-q"]) == 0
    (tmp_path / "pick.csv").write_text(capsys.readouterr().out)
    pick = pd.read_csv(tmp_path / "pick.csv").iloc[0]
    out = tmp_path / "pick.conf"
    argv = ["apply", "--device", dev.name, "--from", str(tmp_path / "pick.csv")]
    assert main([*argv, "--nvpmodel", str(out)]) == 0
    back = nvpmodel.read_block(dev, out.read_text())
    assert {k: back[k] for k in ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz")} == pytest.approx(
        {k: float(pick[k]) for k in ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz")}
    )
    assert nvpmodel.parse_modes(out.read_text())[0]["id"] == 3  # above the presets' 0..2


def test_on_a_capped_board_a_block_is_checked_against_the_boards_own_table(tmp_path, capsys):
    make_p3767(tmp_path, "orin-nano-super", capped=True)
    argv = ["apply", "--root", str(tmp_path), "--nvpmodel", "-", "--config"]
    with pytest.warns(SuperFirmwareWarning):
        assert main([*argv, "cores=6,cpu_mhz=1728,gpu_mhz=918,mem_mhz=3199"]) == 1
    assert "918 MHz is not a orin-nano-super frequency; available: 306, 408, 510, 612, 624.75" in (
        capsys.readouterr().err
    )
    with pytest.warns(SuperFirmwareWarning):
        assert main([*argv, "cores=6,cpu_mhz=1728,gpu_mhz=624.75,mem_mhz=3199"]) == 0
    assert "GPU MAX_FREQ 624750000" in capsys.readouterr().out


def test_a_mode_only_the_boards_file_has_is_still_found_by_name(tmp_path):
    """A newer Super release adds 7W (ID 3); the catalog cannot describe it, the board's
    own file names it."""
    make_p3767(tmp_path, "orin-nano-super")
    conf = (tmp_path / "etc/nvpmodel.conf").resolve()
    seven = nvpmodel.write_block(
        "orin-nano-super", dict(cores=4, cpu_mhz=960, gpu_mhz=408, mem_mhz=2133), 3, "7W"
    )
    nvpmodel.install_block(conf, seven)
    rec = recognise(tmp_path)
    assert rec.preset_id("7w") == 3 and rec.preset_id("MAXN_SUPER") == 2
    with pytest.raises(ModeError, match="not found in a primary source"):
        pt.find_preset(rec.spec, "7W")  # the catalog itself still does not guess it
