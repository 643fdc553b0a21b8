"""The real Zeus corpora: import, provenance, loading, bad traces."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from powertrain.data.real_data import load_real_corpus, load_real_r, real_corpus_names
from powertrain.errors import DataError

pytestmark = pytest.mark.slow

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


def _small(**kw):
    from powertrain.predictor import PowerTrainMLP, Predictor

    est = PowerTrainMLP(hidden_layer_sizes=(16, 8), epochs=5)
    return Predictor(est, targets=("epoch_s", "power_w"), progress=False, **kw)


def test_a_predictor_on_a_gpu_corpus_reads_the_gpus_knobs_and_saves_them(tmp_path):
    from powertrain.predictor import Predictor

    corpus = load_real_corpus("v100_resnet50-imagenet")
    model = _small().fit(corpus)
    assert model.inputs_ == ("power_limit_w", "batch_size")
    assert model.targets_ == ("epoch_s", "power_w")
    a40 = load_real_corpus("a40_resnet50-imagenet")
    new = model.transfer(a40.sample(10, random_state=0))  # same knobs: a transfer
    new.save(tmp_path / "m")
    back = Predictor.load(tmp_path / "m")
    assert back.inputs_ == new.inputs_ and back.targets_ == new.targets_
    grid = a40[["power_limit_w", "batch_size"]]
    assert back.predict(grid).equals(new.predict(grid))
    assert set(back.score_by_target(a40)) == {"epoch_s", "power_w"}


def test_a_transfer_between_devices_with_other_knobs_is_a_clear_error():
    import powertrain as pt
    from powertrain.predictor import Predictor

    gpu_model = _small().fit(load_real_corpus("v100_bert-squad"))
    jetson = pt.profile(
        pt.Twin("orin-agx", "mobilenetv3", seed=0),
        pt.get_device("orin-agx").sample(8, seed=1),
        batch_size=16,
        progress=False,
    )
    with pytest.raises(DataError, match="samples come from orin-agx, whose configuration"):
        gpu_model.transfer(jetson)
    jetson_ref = Predictor.from_pretrained("orin-agx/resnet18")
    with pytest.raises(DataError, match=r"from v100.*power_limit_w, batch_size; this model"):
        jetson_ref.transfer(load_real_corpus("v100_bert-squad").rename(columns={"epoch_s": "x"}))


def test_a_power_limit_the_gpu_does_not_have_names_file_row_and_column():
    from powertrain.devices.device import check_device
    from powertrain.errors import ModeError

    df = load_real_corpus("a40_bert-squad").copy()
    df.loc[2, "power_limit_w"] = 130.0
    with pytest.raises(ModeError, match=r"a40_bert-squad.csv: row 3, column 'power_limit_w': 130"):
        check_device(df, source="a40_bert-squad.csv")


def test_a_corpus_from_a_gpu_outside_the_catalog_needs_named_inputs():
    """What an NVML sweep writes: the GPU's name (not a catalog device) and its own knobs.
    Without inputs the unknown device is refused with the way out; with them it trains."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    rows = [(t, w, b) for t in (1, 2, 4) for w in (0, 2) for b in (8, 16, 32)]
    df = pd.DataFrame(rows, columns=["threads", "num_workers", "batch_size"])
    df.insert(0, "device", "nvidia-h100-80gb-hbm3")
    df["time_ms"] = 5 * df.batch_size / df.threads**0.3 * rng.uniform(0.97, 1.03, len(df))
    df["power_w"] = 200 + df.batch_size + rng.uniform(-3, 3, len(df))
    df = df.rename(columns={"time_ms": "epoch_s"})
    with pytest.raises(DataError, match=r"unknown device .*name the inputs"):
        _small().fit(df)
    knobs = ("threads", "num_workers", "batch_size")
    with pytest.raises(DataError, match=r"row 1, column 'num_workers': 0 is not > 0.*'none'"):
        _small(inputs=knobs).fit(df)  # 0 workers is a real setting; log(0) is not
    from powertrain.predictor import PowerTrainMLP, Predictor

    est = PowerTrainMLP(hidden_layer_sizes=(16, 8), epochs=5, input_transform="none")
    model = Predictor(est, inputs=knobs, targets=("epoch_s", "power_w"), progress=False).fit(df)
    assert model.inputs_ == knobs
    new = model.transfer(df.head(10))
    assert len(new.predict(df[list(knobs)])) == len(df)
    with pytest.raises(DataError, match=r"column 'threads': -1 must be >= 0"):
        model.transfer(df.head(10).assign(threads=[-1] + [1] * 9))


def test_a_name_never_leaves_its_folder_and_a_path_reads_any_file(tmp_path):
    for bad in ("../x", "real/x", "/etc/passwd", ""):
        with pytest.raises(DataError, match="must be"):
            load_real_corpus(bad)
    with pytest.raises(DataError, match="must be a file stem inside"):
        load_real_r("../../x")
    src = ROOT / "datasets" / "real" / "a40_bert-squad.csv"
    mine = tmp_path / "mine.csv"
    mine.write_bytes(src.read_bytes())  # no sidecar: still a corpus
    df = load_real_corpus(mine)
    assert len(df) == len(load_real_corpus("a40_bert-squad"))
    assert load_real_corpus(str(mine)).equals(df) and real_corpus_names(tmp_path) == ["mine"]
    assert load_real_corpus("mine", folder=tmp_path).equals(df)


def test_a_users_corpus_declares_its_device_in_its_sidecar(tmp_path):
    """A GPU outside the catalog: the provenance sidecar's device_spec gives the id its
    knobs, so fit and transfer read them with no named inputs; a tampered file is refused."""
    import json

    import numpy as np
    import pandas as pd

    from powertrain.devices.specs import unregister_device

    clocks = [900.0, 1100.0, 1300.0, 1500.0, 1700.0]
    rows = [(f, b) for f in clocks for b in (8, 16, 32)]
    df = pd.DataFrame(rows, columns=["sm_mhz", "batch_size"])
    df.insert(0, "workload", "mine")
    df.insert(0, "device", "my-gpu")
    df["time_ms"] = 4e3 * df.batch_size / df.sm_mhz
    df["power_w"] = 60 + 0.1 * df.sm_mhz
    path = tmp_path / "my-gpu_mine.csv"
    df.to_csv(path, index=False)
    spec = {"name": "my-gpu", "knobs": {"sm_mhz": clocks}}
    side = tmp_path / "my-gpu_mine.provenance.json"
    from powertrain.utils.hashing import sha256_file

    side.write_text(json.dumps({"device_spec": spec}))
    unregister_device("my-gpu")
    with pytest.raises(DataError, match="no csv_sha256"):  # it must vouch for these rows
        load_real_corpus("my-gpu_mine", folder=tmp_path)
    side.write_text(json.dumps({"device_spec": spec, "csv_sha256": sha256_file(path)}))
    got = load_real_corpus("my-gpu_mine", folder=tmp_path)
    from powertrain.predictor import PowerTrainMLP, Predictor

    est = PowerTrainMLP(hidden_layer_sizes=(16, 8), epochs=5)
    model = Predictor(est, progress=False).fit(got)  # default targets: time_ms, power_w
    assert model.inputs_ == ("sm_mhz", "batch_size") and model.targets_ == ("time_ms", "power_w")
    assert np.isfinite(model.transfer(got.head(6)).predict(got).time_ms).all()
    side.write_text(json.dumps({"device_spec": spec, "csv_sha256": sha256_file(path)}))
    path.write_text(path.read_text().replace("1700", "1500", 1))
    with pytest.raises(DataError, match="contents differ from its provenance"):
        load_real_corpus(path)
    unregister_device("my-gpu")


def test_the_perseus_clock_sweeps_load_with_their_declared_device():
    folder = ROOT / "datasets" / "real" / "perseus"
    assert real_corpus_names(folder) == ["a40-locked-clock_bloom", "a40-locked-clock_gpt3-175b"]
    for n in real_corpus_names(folder):
        df = load_real_corpus(n, folder)
        assert len(df) == 960 and df.workload.nunique() == 16
        assert df.groupby("workload").gpu_mhz.nunique().eq(60).all()
        assert np.allclose(df.power_w * df.time_ms / 1e3, df.energy_j, rtol=1e-8)
        assert df.power_w.between(100, 310).all()


PERSEUS = ROOT.parent / "shared" / "data" / "perseus_sosp24"


@pytest.mark.skipif(not PERSEUS.is_dir(), reason=f"the Perseus profiles are not at {PERSEUS}")
def test_perseus_importer_reproduces_the_shipped_files(tmp_path):
    tool = [sys.executable, str(ROOT / "tools" / "import_perseus.py")]
    res = subprocess.run([*tool, "--source", str(PERSEUS), "--out", str(tmp_path)])
    assert res.returncode == 0
    shipped = ROOT / "datasets" / "real" / "perseus"
    for f in shipped.iterdir():
        assert f.read_bytes() == (tmp_path / f.name).read_bytes(), f.name
