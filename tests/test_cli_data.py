"""The catalog commands of the ``powertrain`` CLI."""

import pandas as pd
import pytest

from powertrain.cli import main


def test_devices_lists_mode_counts(capsys):
    assert main(["devices"]) == 0
    out = capsys.readouterr().out
    assert "orin-agx" in out and "18,096" in out and "29,232" in out and "1,800" in out


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
