"""What a newcomer meets first: safe picks by default, commands that find what earlier
commands wrote, the examples the README names, and a tidy ``dir(pt)``."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pandas as pd
import pytest

import powertrain as pt
from powertrain.cli import main
from powertrain.decisions.optimise import SAFE_K_SIGMA
from powertrain.errors import DataError

ROOT = Path(__file__).resolve().parents[1]
NX = ROOT / "examples" / "orin-nx-16gb.json"


def test_dir_lists_the_public_names_only():
    names = dir(pt)
    assert names == sorted(pt.__all__)
    for private in ("Any", "TYPE_CHECKING", "annotations", "_LAZY", "errors"):
        assert private not in names


def test_select_keeps_the_safe_margin_on_predictions_and_says_how():
    est = pd.DataFrame(
        {
            "cores": [4, 8, 12],
            "batch_size": [16, 16, 16],
            "time_ms": [30.0, 20.0, 10.0],
            "power_w": [10.0, 20.0, 28.0],
            "power_w_std": [0.5, 0.5, 1.0],
        }
    )
    r = {16: 1.0}
    safe = pt.select(est, r, power_cap_w=30)
    assert safe.power_w == 20.0  # 28 + 3 x 1.0 > 30: the margin rules the fastest out
    assert safe.attrs["how"] == f"predicted with a margin ({SAFE_K_SIGMA:g} sigma)"
    plain = pt.select(est, r, power_cap_w=30, k_sigma=0)
    assert plain.power_w == 28.0 and plain.attrs["how"] == "predicted"
    measured = pt.select(est.drop(columns="power_w_std"), r, power_cap_w=30)
    assert measured.power_w == 28.0 and measured.attrs["how"] == "predicted"


def test_the_select_help_states_the_library_default_margin(capsys):
    with pytest.raises(SystemExit):
        main(["select", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"default: {SAFE_K_SIGMA:g} where they have power_w_std" in text
    assert "--plain" in text


@pytest.mark.slow  # a transfer: about 10 s
def test_simulate_on_a_device_outside_the_catalog_feeds_every_later_command(tmp_path):
    samples = tmp_path / "s.csv"
    argv = ["simulate", str(NX), "resnet18", "-n", "12", "-o", str(samples), "-q"]
    assert main(argv) == 0
    assert not list(tmp_path.glob("*.lock"))  # a finished run leaves only its outputs
    model = tmp_path / "m"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # no --device-spec: the sidecar beside the CSV carries the spec
        assert main(["transfer", str(samples), "-r", "orin-agx/resnet18", "-o", str(model)]) == 0
    est = tmp_path / "e.csv"
    argv = ["predict", "-m", str(model), "--device", "orin-nx-16gb", "-b", "16", "-o", str(est)]
    assert main(argv) == 0
    assert pd.read_csv(est)["power_w"].gt(0).all()


def test_a_report_refuses_samples_of_another_workload(tmp_path):
    from powertrain.report.cases import case_samples
    from powertrain.report.spec import parse_spec

    dev = pt.get_device("orin-agx")
    twin = pt.Twin("orin-agx", "resnet18", seed=0)
    pt.profile(twin, dev.sample(6, seed=0), batch_size=16).to_csv(tmp_path / "s.csv", index=False)
    text = (
        'devices = ["orin-agx"]\nbatch_sizes = [16]\npower_caps = [25]\n'
        '[workloads.mobilenetv3]\nsamples_csv = "s.csv"\n'
    )
    case = parse_spec(text, source="x.toml", base=tmp_path).cases()[0]
    with pytest.raises(DataError, match="column 'workload' holds resnet18, not the case's"):
        case_samples(case)


def test_examples_ships_every_example_the_readme_names(tmp_path):
    named = set(re.findall(r"examples/([\w.-]+\.(?:toml|json))", (ROOT / "README.md").read_text()))
    named |= set(
        re.findall(r"examples/([\w.-]+\.(?:toml|json))", (ROOT / "docs" / "devices.md").read_text())
    )
    assert {"fleet.toml", "orin-nx-16gb.json"} <= named
    assert main(["examples", "-o", str(tmp_path / "ex"), "-q"]) == 0
    for name in named:
        assert (tmp_path / "ex" / name).is_file(), name


@pytest.mark.parametrize("device", ["orin-agx", str(NX)])
def test_profile_runs_the_twins_own_presets(device):
    dev = pt.get_device(device)
    twin = pt.Twin(dev, "resnet18", seed=0)
    presets = dev.presets()
    measured = pt.profile(twin, presets, batch_size=16)
    expected = twin.expected(presets, 16)
    assert len(measured) == len(presets)
    # the gated-TPC presets run as defined: the board's averages, within its noise
    assert measured["time_ms"].to_numpy() == pytest.approx(expected["time_ms"], rel=0.03)
    assert measured["power_w"].to_numpy() == pytest.approx(expected["power_w"], rel=0.03)
