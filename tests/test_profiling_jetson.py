"""The Jetson backend against a fake sysfs tree: tables, knobs, sensors, restore on failure."""

from __future__ import annotations

import math
import signal
import time
import warnings

import pandas as pd
import pytest
from fake_sysfs import EMC_DIR, FAN, GPU_DIR, ORIN_JP6_GPU_HZ, make_nano_iio, make_orin

from powertrain.backends.jetson import JetsonBackend
from powertrain.backends.jetson import backend as jetson
from powertrain.backends.jetson.power_sensors import (
    HwmonSensor,
    JtopSensor,
    open_sensor,
    total_rails,
)
from powertrain.backends.jetson.sysfs_knobs import BoardTableWarning, SysfsKnobs
from powertrain.cli import main
from powertrain.devices.device import get_device
from powertrain.errors import ProfilingError
from powertrain.profiling.sweep import profile

ORIN = get_device("orin-agx").spec


def quick_step(batch_size: int) -> float:
    time.sleep(0.0005)
    return 0.5


def backend(board, step=quick_step, **kw) -> JetsonBackend:
    kw = {"sensor": "hwmon", "sample_period_s": 0.01, "check_root": False, **kw}
    return JetsonBackend("orin-agx", step, root=board.root, write=board.kernel, **kw)


def few_modes(dev, n=3):
    return dev.sample(n, seed=1)


# -- knobs ------------------------------------------------------------------------------


def test_board_tables_match_catalog(tmp_path):
    knobs = SysfsKnobs(ORIN, make_orin(tmp_path).root)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = knobs.check_against_catalog()
    assert t.cores == 12 and t.cpu_mhz == ORIN.cpu_mhz and t.gpu_mhz == ORIN.gpu_mhz
    assert knobs.emc.method == "bpmp"


def test_board_whose_table_differs_warns_and_uses_the_boards(tmp_path):
    board = make_orin(tmp_path, gpu_hz=ORIN_JP6_GPU_HZ)
    with pytest.warns(BoardTableWarning, match="GPU frequency table differs.*board only: 306"):
        b = backend(board)
    with b:
        assert b.device.spec.gpu_mhz == tuple(f / 1e6 for f in ORIN_JP6_GPU_HZ)
        assert b.device.spec.profiling_grid is None  # the paper's grid is not this board's
        df = profile(b, few_modes(b.device), batch_size=4, n_minibatches=3, progress=False)
        assert set(df["gpu_mhz"]) <= set(b.device.spec.gpu_mhz)
        with pytest.raises(ProfilingError, match="114.75 MHz is not in this board's table"):
            b.configure({"cores": 4, "cpu_mhz": 729.6, "gpu_mhz": 114.75, "mem_mhz": 3199.0})


def test_apply_sets_and_reads_back_every_knob(tmp_path):
    board = make_orin(tmp_path)
    knobs = SysfsKnobs(ORIN, board.root, board.kernel)
    knobs.apply(3, 1113.6, 318.75, 665.6)
    assert knobs.state() == {"cores": 3, "cpu_mhz": 1113.6, "gpu_mhz": 318.75, "mem_mhz": 665.6}
    assert board.read(f"{EMC_DIR}/mrq_rate_locked") == "1"
    for n in (0, 4, 8):
        assert board.read(f"sys/devices/system/cpu/cpu{n}/cpufreq/scaling_min_freq") == "1113600"
    knobs.apply(12, 2201.6, 1300.5, 3199.0)  # stepping up needs max before min
    assert knobs.state()["gpu_mhz"] == 1300.5 and knobs.state()["cores"] == 12


def test_emc_through_nvpmodel_cap(tmp_path):
    board = make_orin(tmp_path, emc="cap")  # this board lists no EMC rates
    knobs = SysfsKnobs(ORIN, board.root, board.kernel)
    assert knobs.emc.method == "cap"
    with pytest.raises(ProfilingError, match="comes from the catalog.*--allow-unlisted-emc"):
        knobs.apply(4, 729.6, 318.75, 2133.0)
    assert board.read("sys/kernel/nvpmodel_emc_cap/emc_iso_cap") == "3199000000"
    knobs = SysfsKnobs(ORIN, board.root, board.kernel, allow_unlisted_emc=True)
    knobs.apply(4, 729.6, 318.75, 2133.0)
    assert board.read("sys/kernel/nvpmodel_emc_cap/emc_iso_cap") == "2133000000"


def test_missing_emc_control_says_what_to_do(tmp_path):
    board = make_orin(tmp_path, emc="none")
    knobs = SysfsKnobs(ORIN, board.root, board.kernel)
    with pytest.raises(ProfilingError, match="mount -t debugfs"):
        knobs.apply(4, 729.6, 318.75, 2133.0)


def test_missing_gpu_devfreq_file_names_it(tmp_path):
    board = make_orin(tmp_path, missing=(f"{GPU_DIR}/available_frequencies",))
    with pytest.raises(ProfilingError, match="no GPU devfreq folder found.*gpu-devfreq"):
        SysfsKnobs(ORIN, board.root, board.kernel)
    board = make_orin(tmp_path / "b", missing=(f"{GPU_DIR}/max_freq",))
    with pytest.raises(ProfilingError, match="max_freq is missing; this JetPack version"):
        SysfsKnobs(ORIN, board.root, board.kernel, gpu_devfreq=GPU_DIR)


def test_missing_cpufreq_file_names_it(tmp_path):
    board = make_orin(tmp_path, missing=("sys/devices/system/cpu/cpu4/cpufreq",))
    with pytest.raises(
        ProfilingError, match="CPU cluster 4.*scaling_available_frequencies is missing"
    ):
        SysfsKnobs(ORIN, board.root, board.kernel)


# -- sensors ----------------------------------------------------------------------------


def test_orin_total_is_three_rails_not_four(tmp_path):
    assert total_rails(ORIN) == ("VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0")
    board = make_orin(tmp_path)
    s = HwmonSensor(ORIN, board.root)
    assert s.rails == ["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"]
    gpu = int(board.read(f"{GPU_DIR}/max_freq")) / 1e9
    expected = (2.0 + 20 * gpu) + (1.0 + 0.8 * 8 * 1.728) + 4.0
    assert s.read_w() == pytest.approx(expected, rel=0.01)


def test_nano_iio_input_rail(tmp_path):
    make_nano_iio(tmp_path)
    s = HwmonSensor(get_device("nano").spec, tmp_path)
    assert s.rails == ["POM_5V_IN"] and s.read_w() == pytest.approx(4.2)


def test_no_rails_is_a_clear_error(tmp_path):
    with pytest.raises(ProfilingError, match="no INA3221 power rails.*jetson-stats"):
        HwmonSensor(ORIN, tmp_path)


def test_jtop_service_not_running_falls_back_or_explains(tmp_path):
    """The real jetson-stats raises JtopException here (no service on this machine)."""
    pytest.importorskip("jtop")
    board = make_orin(tmp_path)
    with pytest.raises(ProfilingError, match="systemctl restart jtop.service"):
        open_sensor(ORIN, board.root, "jtop")
    with pytest.warns(RuntimeWarning, match="jtop.*INA3221 files instead"):
        s = open_sensor(ORIN, board.root, "auto")
    assert isinstance(s, HwmonSensor)


def test_jtop_rails_summed_as_the_catalog_says():
    class FakeJtop:
        def __init__(self, interval):
            self.power = {
                "rail": {
                    n: {"power": mw}
                    for n, mw in (
                        ("VDD_GPU_SOC", 5000),
                        ("VDD_CPU_CV", 2000),
                        ("VIN_SYS_5V0", 4000),
                        ("VDDQ_VDD2_1V8AO", 900),
                    )
                },
                "tot": {"power": 11900},  # jtop's own total double-counts VDDQ
            }

        def start(self):
            pass

        def close(self):
            pass

    s = JtopSensor(ORIN, 1.0, FakeJtop)
    assert s.read_w() == pytest.approx(11.0)


# -- the backend --------------------------------------------------------------------------


def test_sweep_restores_board_and_fan(tmp_path):
    board = make_orin(tmp_path)
    before = board.state()
    with backend(board) as b:
        assert board.read(FAN) == "255"
        df = profile(b, few_modes(b.device, 4), batch_size=4, n_minibatches=4, progress=False)
        assert len(df) == 4 and (df["power_w"] > 5).all() and (df["n_power_samples"] >= 2).all()
        assert b.describe()["sensor"] == "hwmon"
    assert board.state() == before


def test_sweep_goes_downward(tmp_path):
    board = make_orin(tmp_path)
    with backend(board) as b:
        grid = pd.DataFrame(
            {"cores": 4, "cpu_mhz": [729.6, 2201.6], "gpu_mhz": [318.75, 1300.5], "mem_mhz": 3199.0}
        )
        profile(b, grid, batch_size=4, n_minibatches=2, progress=False)
    gpu_max = [int(v) for p, v in board.writes if p == f"{GPU_DIR}/max_freq"]
    assert gpu_max[:2] == [1300500000, 318750000]


def test_refused_frequency_restores_board(tmp_path):
    board = make_orin(tmp_path)
    before = board.state()
    board.gpu_cap_hz = 624750000  # an nvpmodel budget caps the GPU
    with backend(board) as b:
        grid = pd.DataFrame(
            {"cores": 4, "cpu_mhz": 729.6, "gpu_mhz": [318.75, 1300.5], "mem_mhz": 3199.0}
        )
        with pytest.raises(ProfilingError, match="refused: GPU 1300.5 MHz.*nvpmodel -m 0"):
            profile(b, grid, batch_size=4, n_minibatches=2, progress=False)
        assert board.state() == before  # restored at once, before the with block ends
    assert board.state() == before


def test_write_refused_by_kernel_restores_board(tmp_path):
    board = make_orin(tmp_path)
    before = board.state()
    board.refuse = {f"{EMC_DIR}/rate"}
    with backend(board) as b:
        with pytest.raises(ProfilingError, match="refused"):
            b.configure({"cores": 4, "cpu_mhz": 729.6, "gpu_mhz": 318.75, "mem_mhz": 204.0})
        board.refuse = set()  # the original rate is accepted again
    assert board.state() == before


@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda bs: 1 / 0, "raised ZeroDivisionError"),
        (lambda bs: math.nan, "returned a nan loss"),
    ],
)
def test_bad_step_restores_board(tmp_path, bad, match):
    board = make_orin(tmp_path)
    before = board.state()
    b = backend(board, step=bad)
    with pytest.raises(ProfilingError, match=match):
        profile(b, few_modes(b.device), batch_size=4, n_minibatches=2, progress=False)
    assert board.state() == before  # without a with block: on_error restored it
    b.close()
    assert board.state() == before


@pytest.mark.system
def test_ctrl_c_and_sigterm_restore_board(tmp_path):
    for exc in ("ctrl-c", "sigterm"):
        board = make_orin(tmp_path / exc)
        before = board.state()
        calls = {"n": 0}

        def step(bs, exc=exc, calls=calls):
            calls["n"] += 1
            if calls["n"] == 5:
                if exc == "ctrl-c":
                    raise KeyboardInterrupt
                signal.raise_signal(signal.SIGTERM)
            return 0.1

        expected = KeyboardInterrupt if exc == "ctrl-c" else SystemExit
        b = backend(board, step=step)
        with pytest.raises(expected):
            with b:
                profile(b, few_modes(b.device), batch_size=4, n_minibatches=3, progress=False)
        assert board.state() == before, exc
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # our handler is gone again


def test_not_root_says_what_to_do(tmp_path, monkeypatch):
    board = make_orin(tmp_path)
    monkeypatch.setattr(jetson, "_is_root", lambda: False)
    with pytest.raises(ProfilingError, match="needs root.*sudo -E"):
        JetsonBackend("orin-agx", quick_step, root=board.root, write=board.kernel)


def test_cli_profile_jetson_end_to_end_and_resume(tmp_path, monkeypatch, capsys):
    board = make_orin(tmp_path / "board")
    before = board.state()
    monkeypatch.setattr(jetson, "write_sysfs", board.kernel)
    monkeypatch.setattr(jetson, "_is_root", lambda: True)
    step_file = tmp_path / "my_job.py"
    step_file.write_text(
        "import time\n\ndef train_step(batch_size):\n    time.sleep(0.0005)\n    return 1.0\n"
    )
    out = tmp_path / "out.csv"
    argv = [
        "profile",
        "--backend",
        "jetson",
        "--device",
        "orin-agx",
        "--workload",
        f"{step_file}:train_step",
        "--modes",
        "3",
        "--batch-size",
        "4,8",
        "--out",
        str(out),
        "--minibatches",
        "3",
        "--sample-period",
        "0.01",
        "--sensor",
        "hwmon",
        "--sysfs-root",
        str(board.root),
        "--quiet",
    ]
    assert main(argv) == 0
    df = pd.read_csv(out)
    assert (
        len(df) == 6 and set(df["batch_size"]) == {4, 8} and (df["workload"] == "train_step").all()
    )
    assert board.state() == before
    assert main(argv) == 0  # resume: nothing left to do, nothing duplicated
    assert len(pd.read_csv(out)) == 6
    assert "6 configurations" in capsys.readouterr().err
