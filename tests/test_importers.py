"""tools/import_zeus.py and tools/import_perseus.py take any GPU of their release."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from powertrain.data.real_data import load_real_corpus, real_corpus_names
from powertrain.devices.specs import unregister_device

ROOT = Path(__file__).resolve().parents[1]
ZEUS = ROOT.parent / "shared" / "data" / "zeus_nsdi23"
PERSEUS = ROOT.parent / "shared" / "data" / "perseus_sosp24"


def _run(tool: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / tool), *args], capture_output=True, text=True
    )


@pytest.mark.system
@pytest.mark.skipif(not ZEUS.is_dir(), reason=f"the Zeus traces are not at {ZEUS}")
def test_zeus_importer_takes_a_gpu_the_catalog_does_not_know(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for f in ("summary_train.csv", "LICENSE"):
        shutil.copy(ZEUS / f, src / f)
    shutil.copy(ZEUS / "summary_power_a40.csv", src / "summary_power_l40s.csv")  # "another GPU"
    res = _run("import_zeus.py", "--source", str(src), "--out", str(tmp_path / "o"))
    assert res.returncode == 0, res.stderr
    names = real_corpus_names(tmp_path / "o")
    assert names and all(n.startswith("l40s_") for n in names)
    side = json.loads((tmp_path / "o" / f"{names[0]}.provenance.json").read_text())
    assert side["device_spec"]["power_cap"] == "power_limit_w"
    try:
        df = load_real_corpus(names[0], tmp_path / "o")  # the sidecar declares the device
        assert set(df.device) == {"l40s"} and df.power_limit_w.min() >= 100
    finally:
        unregister_device("l40s")
    res = _run(
        "import_zeus.py", "--source", str(src), "--out", str(tmp_path / "x"), "--gpu", "h100"
    )
    assert res.returncode == 1 and "no summary_power_h100.csv (GPUs found: l40s)" in res.stderr


@pytest.mark.system
@pytest.mark.skipif(not PERSEUS.is_dir(), reason=f"the Perseus profiles are not at {PERSEUS}")
def test_perseus_importer_takes_any_gpu_and_describes_it(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(PERSEUS / "LICENSE", src / "LICENSE")
    shutil.copy(PERSEUS / "bloom+a40_bf16.csv", src / "bloom+a40_bf16.csv")
    shutil.copy(PERSEUS / "bloom+a40_bf16.csv", src / "bloom+a100_fp16.csv")  # "another GPU"
    res = _run("import_perseus.py", "--source", str(src), "--out", str(tmp_path / "o"))
    assert res.returncode == 0, res.stderr
    names = real_corpus_names(tmp_path / "o")
    assert names == ["a100-locked-clock_bloom", "a40-locked-clock_bloom"]
    side = json.loads((tmp_path / "o" / "a100-locked-clock_bloom.provenance.json").read_text())
    assert side["device_spec"]["description"].startswith("NVIDIA A100 with its SM clock")
    readme = (tmp_path / "o" / "README.md").read_text()
    assert "on an NVIDIA A100" in readme and "on an A40" in readme
    res = _run(
        "import_perseus.py", "--source", str(src), "--out", str(tmp_path / "p"), "--gpu", "h100"
    )
    assert res.returncode == 1 and "no profile of GPU(s) h100" in res.stderr
