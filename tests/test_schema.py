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
