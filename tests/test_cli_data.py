"""The catalog commands of the ``powertrain`` CLI."""

import pandas as pd
import pytest

from powertrain.cli import main


def test_devices_lists_mode_counts(capsys):
    assert main(["devices"]) == 0
    out = capsys.readouterr().out
    assert "orin-agx" in out and "18,096" in out and "29,232" in out and "1,800" in out
    assert f"{'v100':<20} {7:>7,}  power_limit_w 7 (100-250)  presets: none" in out
    assert "orin-nano-4gb-super    4,224" in out  # the longest id still lines up
    assert "clock caps, not power budgets" in out


def test_modes_grid_to_csv(tmp_path):
    out = tmp_path / "grid.csv"
    assert main(["modes", "orin-agx", "--which", "grid", "--sweep-order", "-o", str(out)]) == 0
    df = pd.read_csv(out)
    assert len(df) == 4368 and df["reset_before"].sum() == 12


def test_modes_sample(tmp_path):
    out = tmp_path / "s.csv"
    assert main(["modes", "xavier-agx", "--which", "sample", "-n", "7", "-o", str(out)]) == 0
    assert len(pd.read_csv(out)) == 7


def test_unknown_device_exits_1_with_message(capsys):
    assert main(["modes", "orin-xl"]) == 1
    assert "unknown device 'orin-xl'" in capsys.readouterr().err


def test_bad_argument_is_argparse_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["modes", "orin-agx", "--which", "sample", "-n", "0"])
    assert e.value.code == 2
    assert "must be >= 1" in capsys.readouterr().err


def test_missing_output_folder(tmp_path, capsys):
    assert main(["modes", "nano", "-o", str(tmp_path / "no" / "x.csv")]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_predict_then_select_under_a_cap(tmp_path, capsys):
    est = tmp_path / "est.csv"
    assert (
        main(
            [
                "predict",
                "-m",
                "orin-agx/resnet18",
                "--device",
                "orin-agx",
                "-b",
                "16",
                "-o",
                str(est),
            ]
        )
        == 0
    )
    front = tmp_path / "front.csv"
    capsys.readouterr()
    assert (
        main(["select", str(est), "--power-cap", "30", "--k-sigma", "1", "--front", str(front)])
        == 0
    )
    best = pd.read_csv(__import__("io").StringIO(capsys.readouterr().out)).iloc[0]
    assert best["power_w"] + best["power_w_std"] <= 30
    table = pd.read_csv(est)
    assert 0 < len(pd.read_csv(front)) < len(table)


def test_select_with_no_feasible_mode_exits_1(tmp_path, capsys):
    est = tmp_path / "est.csv"
    pd.DataFrame({"time_ms": [10.0, 20.0], "power_w": [40.0, 30.0]}).to_csv(est, index=False)
    assert main(["select", str(est), "--power-cap", "5"]) == 1
    assert "no configuration fits under 5 W" in capsys.readouterr().err


def test_modes_all_streams_a_space_too_big_for_one_table(tmp_path, monkeypatch, capsys):
    import powertrain as pt
    from powertrain.devices import device as devices

    whole = pt.get_device("orin-nano").power_modes()
    monkeypatch.setattr(devices, "MAX_MODES", 100)  # orin-nano's 1,800 modes: "too many"
    monkeypatch.setattr(devices, "CHUNK_MODES", 700)
    assert main(["modes", "orin-nano", "-o", str(tmp_path / "all.csv")]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "all.csv"), whole)
    assert main(["modes", "orin-nano", "--sweep-order"]) == 1  # needs one table: refused
    assert "1,800 modes, more than the 100 one table can hold" in capsys.readouterr().err
