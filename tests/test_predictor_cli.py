"""``powertrain fit / transfer / predict`` round trip through CSV files and model dirs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from synthetic import synthetic_corpus

import powertrain as pt
from powertrain.cli import main

# slow tests are marked one by one: the rest are part of `make test-fast`

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    grid = pt.get_device("orin-agx").profiling_grid().sample(300, random_state=0)
    synthetic_corpus(grid, "a").to_csv(d / "corpus.csv", index=False)
    synthetic_corpus(grid, "b").sample(20, random_state=0).to_csv(d / "samples.csv", index=False)
    grid.head(7).to_csv(d / "modes.csv", index=False)
    return d


@pytest.mark.slow  # trains a reference: ~3 s
def test_fit_transfer_predict(files, capsys):
    d = files
    assert main(["fit", str(d / "corpus.csv"), "-o", str(d / "ref"), "--epochs", "3", "-q"]) == 0
    assert (
        main(
            [
                "transfer",
                str(d / "samples.csv"),
                "-r",
                str(d / "ref"),
                "-o",
                str(d / "tl"),
                "--epochs",
                "10",
                "--loss",
                "mape",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "predict",
                str(d / "modes.csv"),
                "-m",
                str(d / "tl"),
                "-b",
                "16",
                "-o",
                str(d / "pred.csv"),
            ]
        )
        == 0
    )
    pred = pd.read_csv(d / "pred.csv")
    assert len(pred) == 7 and {"time_ms", "power_w", "time_ms_std"} <= set(pred.columns)
    assert (
        main(
            [
                "predict",
                str(d / "modes.csv"),
                "-m",
                str(d / "tl"),
                "-b",
                "16",
                "32",
                "--no-std",
                "-o",
                str(d / "pred2.csv"),
            ]
        )
        == 0
    )
    assert "extrapolation" in capsys.readouterr().err  # batch 32 was never seen
    assert len(pd.read_csv(d / "pred2.csv")) == 14


def test_errors_are_one_line(files, capsys):
    d = files
    # a shipped reference: this test must not depend on another test's trained one
    argv = ["transfer", str(d / "missing.csv"), "-r", "orin-agx/resnet18", "-o", str(d / "x")]
    assert main(argv) == 1
    assert "no such file" in capsys.readouterr().err
    assert main(["predict", str(d / "modes.csv"), "-m", str(d / "nope"), "-b", "16"]) == 1
    assert "neither a model directory" in capsys.readouterr().err


def test_output_path_problems_are_caught_before_training(files, capsys):
    d = files
    corpus = str(d / "corpus.csv")
    # missing folder: refused before a single epoch runs (an unreadable corpus would
    # otherwise be reported first, so the message proves the order)
    assert main(["fit", str(d / "nope.csv"), "-o", str(d / "no" / "ref"), "-q"]) == 1
    err = capsys.readouterr().err
    assert "does not exist" in err and len(err.strip().splitlines()) == 1
    (d / "plain_file").write_text("x")
    assert main(["fit", corpus, "-o", str(d / "plain_file"), "-q"]) == 1
    assert "not a directory" in capsys.readouterr().err
    assert main(["predict", str(d / "modes.csv"), "-m", "x", "-b", "16", "-o", str(d)]) == 1
    assert "is a directory" in capsys.readouterr().err


def test_predict_device_checks_the_modes_csv(files, capsys):
    d = files
    assert main(["fit", str(d / "corpus.csv"), "-o", str(d / "ref2"), "--epochs", "2", "-q"]) == 0
    ok = ["predict", str(d / "modes.csv"), "-m", str(d / "ref2"), "-b", "16"]
    assert main([*ok, "--device", "orin-agx", "-o", str(d / "p.csv")]) == 0
    bad = pd.read_csv(d / "modes.csv")
    bad.loc[3, "gpu_mhz"] = 123.0  # not a GPU frequency of the Orin AGX
    bad.to_csv(d / "bad_modes.csv", index=False)
    argv = ["predict", str(d / "bad_modes.csv"), "-m", str(d / "ref2"), "-b", "16"]
    assert main([*argv, "--device", "orin-agx"]) == 1
    err = capsys.readouterr().err
    assert "bad_modes.csv: row 4, column 'gpu_mhz': 123 MHz is not a orin-agx frequency" in err


def test_predict_streams_in_chunks_with_file_row_numbers(files, capsys, monkeypatch):
    """A CSV larger than one chunk gives the same predictions as one piece, and an error
    in a later chunk names the row of the file, not of the chunk."""
    from powertrain.predictor import Predictor, streaming

    d = files
    assert main(["fit", str(d / "corpus.csv"), "-o", str(d / "ref3"), "--epochs", "2", "-q"]) == 0
    modes = pd.read_csv(d / "modes.csv")
    whole = Predictor.load(d / "ref3").predict(modes, batch_size=16)
    monkeypatch.setattr(streaming, "CHUNK_ROWS", 3)
    monkeypatch.setattr(streaming.read_csv_chunks, "__defaults__", (3, ""))
    argv = ["predict", str(d / "modes.csv"), "-m", str(d / "ref3"), "-b", "16"]
    assert main([*argv, "-o", str(d / "chunked.csv")]) == 0
    chunked = pd.read_csv(d / "chunked.csv")
    assert len(chunked) == len(modes) > 3
    # float32 sums depend on how many rows the network sees at once: equal to 1e-6
    np.testing.assert_allclose(chunked["time_ms"], whole["time_ms"], rtol=1e-6)
    np.testing.assert_allclose(chunked["power_w_std"], whole["power_w_std"], rtol=1e-6)
    bad = modes.copy()
    bad.loc[4, "gpu_mhz"] = -1.0  # in the second chunk of three rows
    bad.to_csv(d / "bad.csv", index=False)
    capsys.readouterr()
    assert main(["predict", str(d / "bad.csv"), "-m", str(d / "ref3"), "-b", "16"]) == 1
    assert "bad.csv: row 5, column 'gpu_mhz'" in capsys.readouterr().err


@pytest.mark.parametrize("sizes", [["16,32"], ["16", "32"], ["16,", "32"]])
def test_batch_sizes_accept_commas_and_spaces(tmp_path, sizes):
    out = tmp_path / "p.csv"
    args = ["predict", "-m", "orin-agx/resnet18", "--device", "orin-nano", "--no-std"]
    args.append("--cross-device")  # an orin-agx model on the orin-nano: allowed when asked
    assert main([*args, "-b", *sizes, "-o", str(out)]) == 0
    assert sorted(pd.read_csv(out).batch_size.unique()) == [16, 32]


def test_cli_hints_are_cli_flags_not_python(tmp_path, capsys):
    grid = tmp_path / "grid.csv"
    assert main(["modes", "orin-agx", "--which", "grid", "-o", str(grid)]) == 0
    assert main(["predict", "-m", "orin-agx/resnet18", str(grid)]) == 1
    err = capsys.readouterr().err
    assert "-b 16" in err and "predict(" not in err


def test_fit_and_predict_a_gpu_model_on_its_own_knobs(tmp_path, capsys):
    """A real GPU trace: fit reads the device's knobs, --targets names the time column,
    predict --device writes the GPU's modes; a Jetson's modes are refused by name."""
    from powertrain.data.real_data import load_real_corpus

    corpus = tmp_path / "v100.csv"
    load_real_corpus("v100_bert-squad").to_csv(corpus, index=False)
    model, out = str(tmp_path / "m"), tmp_path / "est.csv"
    args = ["fit", str(corpus), "-o", model, "--targets", "epoch_s,power_w", "--epochs", "3"]
    assert main([*args, "-q"]) == 0
    assert main(["predict", "-m", model, "--device", "v100", "-b", "16,32", "-o", str(out)]) == 0
    est = pd.read_csv(out)
    assert list(est.columns[:3]) == ["power_limit_w", "batch_size", "epoch_s"]
    assert len(est) == 7 * 2
    capsys.readouterr()
    assert main(["predict", "-m", model, "--device", "orin-agx", "-b", "16"]) == 1
    assert "this model reads power_limit_w, batch_size" in capsys.readouterr().err
    assert main(["fit", str(corpus), "-o", model, "--targets", "epoch_s"]) == 1
