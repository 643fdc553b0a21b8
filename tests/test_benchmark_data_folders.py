"""benchmarks/decisions.py section 4 takes ``--data DIR`` like the other real-data
benchmarks (the issue-29 plumbing; kept apart from that benchmark's own tests)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from powertrain.data.real_data import real_folder

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import decisions as bench  # noqa: E402


@pytest.mark.slow
def test_section_4_reads_the_folder_given(tmp_path):
    """The real-trace section decides on that folder's corpora, not the package's."""
    for name in ("v100_bert-squad", "v100_bert-sentiment140"):
        for suffix in (".csv", ".provenance.json"):
            shutil.copy(real_folder() / f"{name}{suffix}", tmp_path / f"{name}{suffix}")
    shutil.copy(real_folder() / "r_bert-sentiment140.csv", tmp_path / "r_bert-sentiment140.csv")
    rows = bench.real_traces(range(1), budget=3, folder=tmp_path)
    assert set(rows.workload) == {"bert-sentiment140"}  # bert-squad is the reference
    assert set(rows.gpu) == {"v100"} and (rows.n_measured <= 3).all()


@pytest.mark.parametrize("bench_name", ["decisions", "real_data", "frequency"])
@pytest.mark.parametrize("bad", ["missing", "a-file", "empty"])
def test_a_bad_data_folder_is_one_line(tmp_path, bench_name, bad):
    import importlib

    module = importlib.import_module(bench_name)
    folder = tmp_path / "data"
    if bad == "a-file":
        folder.write_text("x")
    elif bad == "empty":
        folder.mkdir()
    argv = ["--data", str(folder)]
    if bench_name == "decisions":
        argv += ["--sections", "real", "--draws", "1"]
    with pytest.raises(SystemExit) as e:
        module.main(argv)
    message = str(e.value.code)
    assert message.startswith(f"{bench_name}.py: error: ") and "\n" not in message
    assert str(folder) in message


def test_section_4_on_a_clock_sweep_folder_is_an_error_not_an_empty_table(tmp_path):
    perseus = real_folder() / "perseus"
    for f in perseus.glob("*"):
        shutil.copy(f, tmp_path / f.name)
    with pytest.raises(SystemExit) as e:
        bench.main(["--data", str(tmp_path), "--sections", "real", "--draws", "1"])
    assert "no corpus section 4 can decide on" in str(e.value.code)
