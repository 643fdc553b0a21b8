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
