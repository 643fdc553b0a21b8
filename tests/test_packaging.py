"""A non-editable install must carry the catalog, the corpora, the reference models, the
examples and the licence, and stay small: the raw profiling logs stay in the repository."""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.system]

ROOT = Path(__file__).resolve().parents[1]
#: the wheel a newcomer downloads (the corpora and models are about 2 MB compressed)
MAX_WHEEL_BYTES = 5 * 1024 * 1024

PROBE = r"""
import sys
from importlib import resources
import powertrain as pt
assert pt.__file__.startswith(sys.argv[1]), pt.__file__
assert len(pt.get_device("orin-agx").power_modes()) == 18096
import importlib
for name in sys.argv[2].split(","):  # every module of the source tree made it into the wheel
    assert importlib.import_module(name).__file__.startswith(sys.argv[1]), name
for name in ("orin-agx/resnet18", "orin-agx/mobilenetv3"):
    ref = pt.Predictor.from_pretrained(name)
    est = ref.predict(pt.get_device("orin-agx").maxn(), batch_size=16)
    assert est["time_ms"].iloc[0] > 0 and est["power_w"].iloc[0] > 0
from powertrain.data.corpora import load_corpus
assert len(load_corpus("orin-agx_resnet18_bs16")) == 4368
assert resources.files("powertrain").joinpath("py.typed").is_file()  # PEP 561: hints ship
data = [p.name for p in resources.files("powertrain._datasets").iterdir()]
models = [p.name for p in resources.files("powertrain._reference_models").iterdir()]
print("datasets", sum(n.endswith(".csv") for n in data))
print("models", sorted(models))
"""


def test_wheel_install_ships_catalog_datasets_and_models(tmp_path):
    wheels, site, src = tmp_path / "wheels", tmp_path / "site", tmp_path / "src"
    # build from a clean copy: an in-tree build/ folder left by an earlier build would
    # otherwise leak stale files into the wheel and hide a package missing from pyproject
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for name in ("powertrain", "datasets", "reference_models", "examples", "notebooks"):
        shutil.copytree(ROOT / name, src / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-v",  # the build backend's own output: its warnings
            "-w",
            str(wheels),
            str(src),
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    said = build.stdout + build.stderr  # no deprecated license table, no unlisted data folder
    for warning in ("SetuptoolsDeprecationWarning", "absent from the `packages`"):
        assert warning not in said, f"the build warns: {warning}"
    wheel = next(wheels.glob("powertrain-*.whl"))
    size = wheel.stat().st_size
    assert size <= MAX_WHEEL_BYTES, f"wheel is {size / 2**20:.1f} MB (limit 5 MB)"
    names = zipfile.ZipFile(wheel).namelist()
    raw = [n for n in names if n.endswith((".minibatches.csv.gz", ".power.csv.gz"))]
    assert not raw, f"raw profiling logs in the wheel: {raw[:3]}"
    licence = [n for n in names if n.endswith(".dist-info/LICENSE") or "/licenses/LICENSE" in n]
    assert licence, "LICENSE missing from the wheel's metadata"
    assert "Apache License" in zipfile.ZipFile(wheel).read(licence[0]).decode()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(site),
            str(wheel),
        ],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    modules = sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for p in (ROOT / "powertrain").rglob("*.py")
        if p.name != "__main__.py"
    )
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(site), ",".join(modules)],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    ).stdout
    cli = subprocess.run(
        [str(site / "bin" / "powertrain"), "devices"], capture_output=True, text=True, env=env
    )
    assert cli.returncode == 0 and "18,096" in cli.stdout, cli.stderr
    # the shipped examples are reachable without a checkout: a corpus by its id, and the
    # fleet spec and the notebooks copied out of the package
    fit = [str(site / "bin" / "powertrain"), "fit", "v100_bert-squad", "--epochs", "1"]
    cli = subprocess.run([*fit, "-o", str(tmp_path / "m")], capture_output=True, text=True, env=env)
    assert cli.returncode == 0, cli.stderr
    ex = [str(site / "bin" / "powertrain"), "examples", "-o", str(tmp_path / "ex")]
    cli = subprocess.run(ex, capture_output=True, text=True, env=env)
    assert cli.returncode == 0, cli.stderr
    assert {"fleet.toml", "quickstart.ipynb", "real_gpus.ipynb"} <= {
        p.name for p in (tmp_path / "ex").iterdir()
    }
    n_csv = sum(1 for p in (ROOT / "datasets").glob("*.csv"))
    assert f"datasets {n_csv}" in out
    for folder in (ROOT / "reference_models").iterdir():
        if folder.is_dir() and not folder.name.startswith("__"):
            assert repr(folder.name) in out, (
                f"reference_models/{folder.name} missing from the wheel"
            )
