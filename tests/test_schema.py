"""Corpus/sample validation: clear errors naming file, row and column."""

import pandas as pd
import pytest

from powertrain.errors import DataError
from powertrain.schema import check_samples, read_csv


def read_corpus(path):
    return check_samples(read_csv(path), source=str(path))


def _good():
    return pd.DataFrame(
        {
            "cores": [4, 8],
            "cpu_mhz": [1000.0, 2000.0],
            "gpu_mhz": [300.0, 900.0],
            "mem_mhz": [2133.0, 3199.0],
            "batch_size": [16, 16],
            "time_ms": [120.0, 40.0],
            "power_w": [12.0, 40.0],
        }
    )


def test_good_samples_pass_and_keep_extra_columns():
    df = _good().assign(note=["a", "b"])
    out = check_samples(df)
    assert list(out["note"]) == ["a", "b"] and out["cores"].dtype.kind == "i"


def test_missing_column():
    with pytest.raises(DataError, match="missing column.*power_w"):
        check_samples(_good().drop(columns="power_w"), source="s.csv")


def test_non_numeric_value_names_row_and_column(tmp_path):
    df = _good().astype({"time_ms": object})
    df.loc[1, "time_ms"] = "fast"
    path = tmp_path / "c.csv"
    df.to_csv(path, index=False)
    with pytest.raises(
        DataError, match=r"c.csv: row 2, column 'time_ms': value 'fast' is not a finite number"
    ):
        read_corpus(path)


@pytest.mark.parametrize("value", [0.0, -3.0])
def test_non_positive_time_is_refused(value):
    df = _good()
    df.loc[0, "time_ms"] = value
    with pytest.raises(DataError, match=r"row 1, column 'time_ms'.*must be > 0"):
        check_samples(df)


def test_nan_is_refused_not_silently_kept():
    df = _good()
    df.loc[1, "power_w"] = float("nan")
    with pytest.raises(DataError, match=r"row 2, column 'power_w'"):
        check_samples(df)


def test_fractional_cores_refused():
    df = _good()
    df["cores"] = [4.5, 8]
    with pytest.raises(DataError, match="not an integer"):
        check_samples(df)


def test_empty_and_unreadable_files(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(DataError, match="empty.csv: the file is empty"):
        read_corpus(empty)
    with pytest.raises(DataError, match="no such file"):
        read_corpus(tmp_path / "missing.csv")
    header = tmp_path / "header.csv"
    header.write_text("cores,cpu_mhz,gpu_mhz,mem_mhz,batch_size,time_ms,power_w\n")
    with pytest.raises(DataError, match=r"header.csv: has a header \(cores, .*\) but no rows"):
        read_corpus(header)


def test_errors_never_echo_a_files_content_beyond_column_names(tmp_path, capsys):
    """A file that is not a table (a spec's samples_csv naming /etc/shadow): its first
    line is read as the header; an error names the columns that look like names only."""
    from powertrain.cli import main
    from powertrain.schema import check_columns, shown_columns

    secret = "s3cretuser:$6$salt$hash:19000:0:99999:7:::"
    shadow = tmp_path / "shadow"
    shadow.write_text(f"{secret}\ndaemon:*:19000:0:99999:7:::\n")
    assert main(["select", str(shadow), "--power-cap", "30"]) == 1
    err = capsys.readouterr().err
    assert "19000" not in err and "s3cretuser" not in err and "1 that are not column names" in err
    spec = tmp_path / "s.toml"
    spec.write_text(
        'title = "x"\ndevices = ["orin-agx"]\nbatch_sizes = [16]\npower_caps = [30]\n'
        f'objectives = ["time"]\n[workloads.resnet18]\nsamples_csv = "{shadow}"\n'
    )
    assert main(["report", str(spec), "-o", str(tmp_path / "out"), "-j", "1"]) == 1
    err = capsys.readouterr().err
    assert "19000" not in err and "s3cretuser" not in err and str(shadow) in err
    assert shown_columns(["time_ms", "power_w (W)", secret]) == (
        "time_ms, power_w (W) and 1 that are not column names"
    )
    df = pd.DataFrame({"time_ms": [1.0, secret], "power_w": [1.0, 2.0]})
    with pytest.raises(DataError, match=r"row 2, column 'time_ms': the value is not") as e:
        check_columns(df, ["time_ms"], "t.csv")
    assert "s3cret" not in str(e.value)
    with pytest.raises(DataError, match=r"value 'xyz' is not a finite number"):
        check_columns(df.assign(time_ms=["xyz", 1]), ["time_ms"], "t.csv")
