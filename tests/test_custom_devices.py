"""Devices outside the catalog: a spec gives them an id that samples, models and the CLI
carry, never a file path."""

import json

import pandas as pd
import pytest

import powertrain as pt
from powertrain.cli import main
from powertrain.devices.specs import load_device_spec, registered_devices, unregister_device
from powertrain.errors import DataError, SpecError

pytestmark = pytest.mark.slow


def _custom(name="orin-agx-mine") -> dict:
    """The Orin AGX spec under another id (a board the catalog does not have)."""
    spec = load_device_spec("orin-agx").to_dict()
    spec["name"] = name
    return spec


@pytest.fixture
def spec_file(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(_custom()))
    unregister_device("orin-agx-mine")
    yield path
    unregister_device("orin-agx-mine")


def _small():
    from powertrain.predictor import PowerTrainMLP, Predictor

    return Predictor(PowerTrainMLP(hidden_layer_sizes=(16, 8), epochs=5), progress=False)


def test_a_spec_file_device_profiles_fits_transfers_and_saves_by_its_id(spec_file, tmp_path):
    twin = pt.Twin(spec_file, "resnet18", seed=0)
    dev = pt.get_device(spec_file)
    samples = pt.profile(twin, dev.sample(12, seed=1), batch_size=16, progress=False)
    assert set(samples.device) == {"orin-agx-mine"}  # the id, never the file path
    model = _small().fit(samples)
    assert model.inputs_ == ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz", "batch_size")
    ref = pt.Predictor.from_pretrained("orin-agx/resnet18")
    new = ref.transfer(samples, epochs=5)
    picked = pt.fastest_under(new.predict(dev.sample(50, seed=2), 16), power_cap_w=30)
    assert picked["power_w"] <= 30
    new.save(tmp_path / "m")
    meta = json.loads((tmp_path / "m" / "model.json").read_text())
    assert meta["info"]["trained_on"]["device_specs"]["orin-agx-mine"]["name"] == "orin-agx-mine"
    unregister_device("orin-agx-mine")  # a fresh session: only the model file knows it
    back = pt.Predictor.load(tmp_path / "m")
    assert "orin-agx-mine" in registered_devices()
    assert back.score(samples) == pytest.approx(new.score(samples))


def test_an_unknown_id_says_how_to_declare_it(spec_file):
    df = pd.DataFrame({"device": ["orin-agx-mine"], "cores": [12]})
    with pytest.raises(DataError, match="unknown device 'orin-agx-mine'.*--device-spec"):
        pt.Predictor().fit(df)


def test_the_cli_reads_samples_of_a_spec_device(spec_file, tmp_path, capsys):
    samples = tmp_path / "s.csv"
    twin = pt.Twin(spec_file, "resnet18", seed=0)
    df = pt.profile(twin, pt.get_device(spec_file).sample(10, seed=1), 16, progress=False)
    df.to_csv(samples, index=False)
    unregister_device("orin-agx-mine")  # a new process knows only what it is told
    out = str(tmp_path / "m")
    args = ["transfer", str(samples), "-r", "orin-agx/resnet18", "-o", out, "--epochs", "3"]
    assert main(args) == 1
    assert "unknown device 'orin-agx-mine'" in capsys.readouterr().err
    assert main([*args, "--device-spec", str(spec_file)]) == 0
    unregister_device("orin-agx-mine")
    assert main(["--device-spec", str(spec_file), *args]) == 0


def test_a_device_id_is_not_a_path_nor_a_changed_catalog_device(tmp_path):
    with pytest.raises(SpecError, match="must be an id .* not a file path"):
        pt.register_device(_custom("boards/mine.json"))
    changed = _custom("orin-agx")
    changed["description"] = "my own orin"
    with pytest.raises(SpecError, match="'orin-agx' is a catalog device and this spec differs"):
        pt.register_device(changed)
    assert pt.register_device(_custom("orin-agx")).name == "orin-agx"  # the same spec: fine
    assert "orin-agx" not in registered_devices()


def test_an_older_spec_with_rough_deviation_keys_gets_the_exact_fix():
    spec = _custom("old-twin")
    spec["twin"]["deviation"]["rough_time"] = 0.087
    spec["twin"]["deviation"]["rough_power"] = 0.04
    with pytest.raises(SpecError, match=r"remove 'rough_power', 'rough_time' from 'deviation'"):
        pt.Twin(spec, "resnet18")
    unregister_device("old-twin")
