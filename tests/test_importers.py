"""tools/import_zeus.py and tools/import_perseus.py take any GPU of their release."""

import json
import os
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


def _tool(name: str):
    """A tools/ script as a module (the tools are scripts, not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PROFILE = "stage,instruction,frequency,time,energy\n"
PROFILE += "".join(
    f"{s},{p},{f},{0.1 * (2000 / f) + s / 100:.4f},{30 + f / 100:.2f}\n"
    for s in (0, 1) for p in ("forward", "backward") for f in (1200, 1740)
)  # fmt: skip


def _perseus_source(tmp_path: Path, name: str = "bloom+a40_bf16.csv", text: str = PROFILE):
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "LICENSE").write_text("Apache-2.0\n")
    (src / name).write_text(text)
    return src


def test_perseus_takes_a_gpu_name_with_an_underscore(tmp_path, capsys):
    perseus = _tool("import_perseus")
    src = _perseus_source(tmp_path, "bloom+a100_sxm_fp16.csv")
    assert perseus.main(["--source", str(src), "--out", str(tmp_path / "o")]) == 0
    assert real_corpus_names(tmp_path / "o") == ["a100-sxm-locked-clock_bloom"]
    try:
        df = load_real_corpus("a100-sxm-locked-clock_bloom", tmp_path / "o")
        assert len(df) == 8 and set(df.device) == {"a100-sxm-locked-clock"}
    finally:
        unregister_device("a100-sxm-locked-clock")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace("\n1,forward,1200", "\n0.5,forward,1200"), "row 5, column 'stage'"),
        (lambda t: t.replace(",42.00\n", ",-42.00\n", 1), "row 1, column 'energy'"),
        (lambda t: t.replace(",42.00\n", ",inf\n", 1), "row 1, column 'energy'"),
        (lambda t: t + "0,forward,1200,0.1,3\xe9\n", "not UTF-8 text"),
    ],
)
def test_perseus_bad_values_are_one_line_and_write_nothing(tmp_path, capsys, edit, message):
    perseus = _tool("import_perseus")
    src = _perseus_source(tmp_path)
    (src / "bloom+a40_bf16.csv").write_bytes(edit(PROFILE).encode("latin-1"))
    assert perseus.main(["--source", str(src), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def _source(tool: str, tmp_path: Path) -> Path:
    """A release folder for ``tool``: a small Perseus one, or a copy of Zeus's traces."""
    if tool == "import_perseus":
        return _perseus_source(tmp_path)
    if not ZEUS.is_dir():
        pytest.skip(f"the Zeus traces are not at {ZEUS}")
    src = tmp_path / "src"
    src.mkdir()
    for f in ("summary_train.csv", "summary_power_a40.csv", "LICENSE"):
        shutil.copy(ZEUS / f, src / f)
    return src


@pytest.mark.parametrize("tool", ["import_perseus", "import_zeus"])
def test_importers_check_the_licence_and_the_output_before_writing(tmp_path, capsys, tool):
    module = _tool(tool)
    src = _source(tool, tmp_path)
    (src / "LICENSE").unlink()
    out = tmp_path / "o"
    assert module.main(["--source", str(src), "--out", str(out)]) == 1
    assert "no LICENSE file" in capsys.readouterr().err and not out.exists()
    (src / "LICENSE").write_text("Apache-2.0\n")
    out.write_text("a file")
    assert module.main(["--source", str(src), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"--out {out}: cannot write it" in err and len(err.strip().splitlines()) == 1
    assert module.main(["--source", str(tmp_path / "nowhere"), "--out", str(out)]) == 1
    assert "no such folder" in capsys.readouterr().err


@pytest.mark.skipif(not ZEUS.is_dir(), reason=f"the Zeus traces are not at {ZEUS}")
@pytest.mark.parametrize("value", ["-27.1", "inf"])
def test_zeus_negative_or_infinite_values_are_refused(tmp_path, capsys, value):
    zeus = _tool("import_zeus")
    src = tmp_path / "src"
    src.mkdir()
    for f in ("summary_train.csv", "LICENSE"):
        shutil.copy(ZEUS / f, src / f)
    lines = (ZEUS / "summary_power_a40.csv").read_text().splitlines()
    lines[1] = lines[1].replace("27.130000000000003", value)
    (src / "summary_power_a40.csv").write_text("\n".join(lines) + "\n")
    assert zeus.main(["--source", str(src), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "row 1, column 'time_per_epoch': not a finite positive number" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("tool", ["import_perseus", "import_zeus"])
def test_importers_refuse_a_read_only_out_in_one_line(tmp_path, capsys, tool):
    """An --out that cannot be created (a read-only folder) is one line naming it, like
    an --out that is a file; nothing half written."""
    if os.geteuid() != 0:
        (tmp_path / "ro").mkdir()
        (tmp_path / "ro").chmod(0o500)
        out = tmp_path / "ro" / "o"
    elif Path("/sys/kernel").is_dir():  # root writes to read-only folders, not to sysfs
        out = Path("/sys/powertrain-import-test")
    else:
        pytest.skip("no read-only folder for root on this system")
    module = _tool(tool)
    src = _source(tool, tmp_path)
    assert module.main(["--source", str(src), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"--out {out}: cannot write it" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.skipif(not ZEUS.is_dir(), reason=f"the Zeus traces are not at {ZEUS}")
def test_zeus_a_latin1_byte_is_one_line_and_writes_nothing(tmp_path, capsys):
    zeus = _tool("import_zeus")
    src = tmp_path / "src"
    src.mkdir()
    for f in ("summary_train.csv", "LICENSE"):
        shutil.copy(ZEUS / f, src / f)
    lines = (ZEUS / "summary_power_a40.csv").read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].rstrip(b"\n") + b"\xe9\n"  # a latin-1 byte in the second row
    (src / "summary_power_a40.csv").write_bytes(b"".join(lines))
    assert zeus.main(["--source", str(src), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "summary_power_a40.csv: not UTF-8 text" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()
