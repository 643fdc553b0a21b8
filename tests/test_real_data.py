"""The real Zeus corpora: import, provenance, loading, bad traces."""

import subprocess
import sys
from pathlib import Path

import pytest

from powertrain.errors import DataError
from powertrain.real_data import load_real_corpus, load_real_r, real_corpus_names

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / "shared" / "data" / "zeus_nsdi23"
IMPORT = [sys.executable, str(ROOT / "tools" / "import_zeus.py")]


def test_every_real_corpus_loads_and_matches_its_provenance():
    names = real_corpus_names()
    assert len(names) == 12 and {n.split("_")[0] for n in names} == {"v100", "a40"}
    for n in names:
        df = load_real_corpus(n)
        assert len(df) >= 30 and (df.power_w > 0).all() and (df.epoch_s > 0).all()
        assert df.device.nunique() == 1 and df.device.iloc[0] == n.split("_")[0]
    r = load_real_r("resnet50-imagenet")
    assert r.batch_size.is_monotonic_increasing and (r.epochs > 0).all()


def test_unknown_names_are_clear_errors():
    with pytest.raises(DataError, match="no real corpus named 'x'"):
        load_real_corpus("x")
    with pytest.raises(DataError, match="no training trace for workload 'x'"):
        load_real_r("x")


@pytest.mark.skipif(not TRACES.is_dir(), reason=f"the Zeus traces are not at {TRACES}")
def test_importer_reproduces_the_shipped_files_and_names_a_missing_column(tmp_path):
    out = tmp_path / "real"
    res = subprocess.run([*IMPORT, "--source", str(TRACES), "--out", str(out)], capture_output=True)
    assert res.returncode == 0, res.stderr
    for f in out.glob("*.csv"):
        assert f.read_bytes() == (ROOT / "datasets" / "real" / f.name).read_bytes(), f.name
    bad = tmp_path / "bad"
    bad.mkdir()
    for f in TRACES.iterdir():
        text = f.read_text()
        if f.name == "summary_power_a40.csv":
            text = text.replace("average_power", "avg_power", 1)
        (bad / f.name).write_text(text)
    res = subprocess.run(
        [*IMPORT, "--source", str(bad), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 1
    assert "summary_power_a40.csv: missing column(s) average_power" in res.stderr
