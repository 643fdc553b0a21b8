"""What the package guarantees about files, devices and sizes (docs/safety.md).

Why: data loss and silent wrong answers are the failures a user remembers. Each test
here is one case of issue 26: an output that is whole or absent, an input that survives,
a write that stays in its folder, a table that matches its device, a size refused before
work starts.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import powertrain as pt
from powertrain.backends.replay import RepeatedRecordsWarning, ReplayBackend
from powertrain.cli import main
from powertrain.data.corpora import load_corpus
from powertrain.errors import DataError, ModeError, ModelFileError
from powertrain.predictor import CrossDeviceWarning, ExtrapolationWarning, Predictor, streaming
from powertrain.utils.files import atomic_open, inside, refuse_same, same_file

REPO = Path(pt.__file__).resolve().parents[1]
MODES = "cores,cpu_mhz,gpu_mhz,mem_mhz,batch_size\n"
ROW = "12,2201.6,1300.5,3199,16\n"


@pytest.fixture(scope="module")
def ref() -> Predictor:
    return Predictor.from_pretrained("orin-agx/resnet18")


def _modes_csv(path: Path, rows: list[str]) -> Path:
    path.write_text(MODES + "".join(rows))
    return path


# -- outputs: whole or absent -------------------------------------------------------------


def test_atomic_open_leaves_the_previous_file_on_an_error(tmp_path):
    out = tmp_path / "out.csv"
    out.write_text("old\n")
    with pytest.raises(RuntimeError), atomic_open(out) as f:
        f.write("half of a new file")
        raise RuntimeError("mid-stream")
    assert out.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["out.csv"]  # no temporary file left behind


def test_a_device_or_pipe_is_written_in_place_never_replaced(tmp_path):
    """A rename over /dev/full would swap the device for a regular file (it once did)."""
    import stat

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    with atomic_open(fifo) as f:
        f.write("a,b\n")
    reader.join(10)
    assert got == [b"a,b\n"] and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert os.listdir(tmp_path) == ["pipe"]


@pytest.mark.parametrize(
    "bad, says",
    [
        ("12,2201.6,abc,3199,16\n", "row 13, column 'gpu_mhz'"),
        ("12,2201.6,,3199,16\n", "row 13, column 'gpu_mhz': the cell is empty"),
        ("12,2201.6,1300.5,3199,16,7\n", "not a readable csv"),
    ],
)
def test_an_error_mid_stream_leaves_no_output_that_looks_whole(tmp_path, monkeypatch, bad, says):
    """Defect 1: rows after the first chunks were written before a bad row was read."""
    monkeypatch.setattr(streaming.read_csv_chunks, "__defaults__", (5, ""))  # chunks of 5
    src = _modes_csv(tmp_path / "big.csv", [ROW] * 12 + [bad] + [ROW] * 3)
    out = tmp_path / "out.csv"
    assert main(["predict", "-m", "orin-agx/resnet18", str(src), "-o", str(out)]) == 1
    assert not out.exists()
    assert os.listdir(tmp_path) == ["big.csv"]


def test_a_latin1_byte_names_its_row(tmp_path, capsys):
    src = tmp_path / "l.csv"
    src.write_bytes((MODES + ROW + ROW).encode() + b"12,2201.6,1300.5,3199,16\xe9\n")
    assert main(["predict", "-m", "orin-agx/resnet18", str(src), "-o", str(tmp_path / "o")]) == 1
    assert "row 3 is not UTF-8" in capsys.readouterr().err


def test_a_successful_stream_writes_every_row(tmp_path, monkeypatch):
    monkeypatch.setattr(streaming.read_csv_chunks, "__defaults__", (5, ""))
    src = _modes_csv(tmp_path / "m.csv", [ROW] * 13)
    out = tmp_path / "out.csv"
    assert main(["predict", "-m", "orin-agx/resnet18", str(src), "-o", str(out)]) == 0
    assert len(pd.read_csv(out)) == 13


# -- inputs survive -----------------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["{d}/same.csv", "{d}/./same.csv", "{d}/link.csv"])
def test_predict_into_its_own_input_is_refused_before_opening(tmp_path, capsys, spelling):
    """Defect 2: the output was opened (truncated) before the lazy reader read."""
    src = _modes_csv(tmp_path / "same.csv", [ROW])
    (tmp_path / "link.csv").symlink_to(src)
    before = src.read_bytes()
    out = spelling.format(d=tmp_path)
    assert main(["predict", "-m", "orin-agx/resnet18", str(src), "-o", out]) == 1
    assert "would destroy the input" in capsys.readouterr().err
    assert src.read_bytes() == before


def test_select_front_into_its_own_estimates_is_refused(tmp_path, capsys):
    est = tmp_path / "est.csv"
    est.write_text("cores,batch_size,time_ms,power_w\n4,16,100,10\n8,16,60,14\n")
    before = est.read_bytes()
    assert main(["select", str(est), "--power-cap", "20", "--front", str(est)]) == 1
    assert "--front" in capsys.readouterr().err and est.read_bytes() == before


def test_profile_out_into_its_modes_csv_is_refused(tmp_path, capsys):
    src = tmp_path / "pm.csv"
    src.write_text("cores,cpu_mhz,gpu_mhz,mem_mhz\n12,2201.6,1300.5,3199\n")
    before = src.read_bytes()
    argv = ["profile", "--workload", "resnet18", "--device", "orin-agx", "--modes", str(src)]
    assert main([*argv, "--out", str(src)]) == 1
    assert "would destroy the input" in capsys.readouterr().err and src.read_bytes() == before


def test_same_file_and_refuse_same(tmp_path):
    a = tmp_path / "a.csv"
    a.write_text("x\n")
    assert same_file(a, tmp_path / "." / "a.csv")
    assert not same_file(a, tmp_path / "b.csv")  # a new file is never the input
    refuse_same(tmp_path / "b.csv", a, None)
    with pytest.raises(DataError, match="--out"):
        refuse_same(a, None, a)


# -- writes stay in the named folder ------------------------------------------------------


def test_examples_overwrite_replaces_a_symlink_instead_of_writing_through_it(tmp_path):
    """Defect 3: DIR/fleet.toml -> ../outside.txt was overwritten through the link."""
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n")
    d = tmp_path / "ex"
    d.mkdir()
    (d / "fleet.toml").symlink_to(outside)
    assert main(["examples", "-o", str(d), "--overwrite"]) == 0
    assert outside.read_text() == "keep me\n"
    assert not (d / "fleet.toml").is_symlink()
    assert "devices" in (d / "fleet.toml").read_text()


def test_inside_refuses_a_symlinked_folder_leading_out(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "cases").symlink_to(tmp_path / "elsewhere")
    assert inside(tmp_path / "out", tmp_path / "out" / "a.csv").name == "a.csv"
    with pytest.raises(DataError, match="leads out of the folder"):
        inside(tmp_path / "out", tmp_path / "out" / "cases" / "x.csv")


# -- a table meets its own device ---------------------------------------------------------


def test_predict_refuses_a_device_the_model_was_not_trained_on(tmp_path, capsys):
    """Defect 4: NX clocks lie inside the AGX ranges, so no warning fired at all."""
    spec = str(REPO / "examples" / "orin-nx-16gb.json")
    out = tmp_path / "nx.csv"
    argv = ["--device-spec", spec, "predict", "-m", "orin-agx/resnet18"]
    argv += ["--device", "orin-nx-16gb", "-b", "16", "-o", str(out)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "trained on orin-agx, not on orin-nx-16gb" in err and "--cross-device" in err
    assert not out.exists()
    assert main([*argv, "--cross-device"]) == 0
    assert "cross-device guess" in capsys.readouterr().err and out.exists()


def test_the_api_says_loudly_that_another_device_is_a_guess(ref):
    modes = pt.get_device("orin-nano").power_modes().head(3).assign(device="orin-nano")
    with pytest.warns(CrossDeviceWarning, match="trained on orin-agx"):
        ref.predict(modes, batch_size=16)
    own = pt.get_device("orin-agx").power_modes().head(3).assign(device="orin-agx")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CrossDeviceWarning)
        ref.predict(own, batch_size=16)


def test_replay_refuses_another_devices_rows():
    """Defect 5: an AGX table replayed as an Orin Nano gave a pick no Nano has."""
    agx = load_corpus("orin-agx_resnet18_bs16")
    with pytest.raises(DataError, match="recorded on 'orin-agx', not on 'orin-nano'"):
        ReplayBackend(agx, device="orin-nano")
    with pytest.raises(ModeError, match="orin-nano"):  # no device column: the modes tell
        ReplayBackend(agx.drop(columns="device"), device="orin-nano")
    assert len(ReplayBackend(agx, device="orin-agx").table) == len(agx)


def test_replay_refuses_records_far_apart_and_warns_on_close_ones():
    agx = load_corpus("orin-agx_resnet18_bs16")
    twice = pd.concat([agx, agx.head(1).assign(time_ms=agx.time_ms.iloc[0] * 10)])
    with pytest.raises(DataError, match=r"rows 1, 4369 record one configuration.*10.0x apart"):
        ReplayBackend(twice)
    close = pd.concat([agx, agx.head(2).assign(time_ms=agx.time_ms.iloc[:2] * 1.1)])
    with pytest.warns(RepeatedRecordsWarning, match="2 repeated"):
        b = ReplayBackend(close)
    row = b.table.iloc[0]
    assert row.time_ms == pytest.approx(agx.time_ms.iloc[0] * 1.05)  # the mean of the two


# -- sizes are refused before work starts -------------------------------------------------


def test_modes_all_of_a_huge_space_is_refused_with_its_size(tmp_path, capsys):
    """Defect 7: 4e15 modes streamed to disk with no check."""
    spec = tmp_path / "huge.json"
    spec.write_text(
        json.dumps({"name": "huge", "knobs": {f"k{i}": list(range(1, 401)) for i in range(6)}})
    )
    out = tmp_path / "h.csv"
    assert main(["modes", str(spec), "--which", "all", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "4,096,000,000,000,000 rows" in err and "--max-rows" in err and "PB" in err
    assert not out.exists()


def test_max_rows_is_the_limit_both_ways(tmp_path, capsys):
    out = tmp_path / "m.csv"
    argv = ["modes", "orin-nano", "--which", "all", "-o", str(out)]
    n = pt.get_device("orin-nano").n_modes
    assert main([*argv, "--max-rows", str(n - 1)]) == 1 and not out.exists()
    assert f"--max-rows {n}" in capsys.readouterr().err
    assert main([*argv, "--max-rows", str(n)]) == 0 and len(pd.read_csv(out)) == n


def test_predict_device_checks_rows_times_batch_sizes(tmp_path, capsys):
    n = pt.get_device("orin-agx").n_modes
    argv = ["predict", "-m", "orin-agx/resnet18", "--device", "orin-agx", "-b", "16", "32"]
    assert main([*argv, "--max-rows", str(2 * n - 1), "-o", str(tmp_path / "p.csv")]) == 1
    assert f"{2 * n:,} rows" in capsys.readouterr().err


# -- predictions that cannot be right are not written -------------------------------------


def test_weights_scaled_out_of_range_are_refused(ref):
    import copy

    import torch

    broken = copy.deepcopy(ref)
    with torch.no_grad():
        for p in broken.heads_["time_ms"].net_.parameters():
            p.mul_(1e30)
    modes = pt.get_device("orin-agx").power_modes().head(50)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy's overflow note
        with pytest.raises(ModelFileError, match="time_ms.* not a finite number"):
            broken.predict(modes, batch_size=16)


def test_batch_size_true_is_not_a_batch_size(ref):
    modes = pt.get_device("orin-agx").power_modes().head(2)
    for bad in (True, 0, 2.5, [16, False]):
        with pytest.raises(DataError, match="batch_size must be a whole number"):
            ref.predict(modes, batch_size=bad)


def test_one_batch_size_model_says_it_cannot_tell_sizes_apart(ref):
    modes = pt.get_device("orin-agx").power_modes().head(2)
    with pytest.warns(ExtrapolationWarning, match="trained at batch size 16 only"):
        est = ref.predict(modes, batch_size=[16, 32])
    t = est.time_ms.to_numpy()
    assert t[0] == t[1]  # the reason for the warning: the same numbers


def test_a_batch_size_list_gives_unique_labels_and_refine_works(ref):
    modes = pt.get_device("orin-agx").profiling_grid().head(40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = ref.predict(modes, batch_size=[16, 32])
    assert est.index.is_unique and len(est) == 80
    picked = pt.refine_modes(est, 3, (15, 40))
    assert 1 <= len(picked) <= 3 and picked.index.isin(est.index).all()


def test_fit_with_no_targets_is_refused():
    corpus = load_corpus("orin-agx_resnet18_bs16").head(30)
    with pytest.raises(DataError, match="targets must name at least one"):
        Predictor(targets=(), progress=False).fit(corpus)


def test_a_sidecar_without_its_digest_is_refused(tmp_path):
    from powertrain.data.real_data import load_real_corpus, real_corpus_names

    name = real_corpus_names()[0]
    src = REPO / "datasets" / "real"
    for suffix in (".csv", ".provenance.json"):
        (tmp_path / f"{name}{suffix}").write_bytes((src / f"{name}{suffix}").read_bytes())
    side = tmp_path / f"{name}.provenance.json"
    meta = json.loads(side.read_text())
    del meta["csv_sha256"]
    side.write_text(json.dumps(meta))
    with pytest.raises(DataError, match="no csv_sha256"):
        load_real_corpus(name, tmp_path)


# -- report folder ------------------------------------------------------------------------


def test_a_second_report_into_a_running_ones_folder_says_so(tmp_path):
    import fcntl

    from powertrain.report.folder import ReportError

    out = tmp_path / "r"
    out.mkdir()
    fd = os.open(out, os.O_RDONLY)  # what a running report holds
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(ReportError, match="another report that is still running"):
            pt.report(REPO / "examples" / "fleet.toml", out)
    finally:
        os.close(fd)
    assert list(out.iterdir()) == []


def test_a_scheduler_answering_garbage_is_a_clear_error():
    pytest.importorskip("distributed")
    from powertrain.report.folder import ReportError, connect

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    port = srv.getsockname()[1]

    def answer() -> None:
        for _ in range(4):
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            conn.sendall(b"HTTP/1.0 200 OK\r\n\r\n" + bytes(range(256)) * 8)
            conn.close()

    threading.Thread(target=answer, daemon=True).start()
    try:
        with pytest.raises(ReportError, match="scheduler"):
            connect(f"tcp://127.0.0.1:{port}", timeout_s=2)
    finally:
        srv.close()


# -- a boundary a flipped comparison would move -------------------------------------------


def test_select_keeps_a_configuration_that_finishes_exactly_at_the_deadline():
    """``<=`` in the deadline filter: a run that finishes at the deadline meets it."""
    est = pd.DataFrame(
        dict(gpu_mhz=[1, 2], batch_size=[8, 8], time_ms=[10.0, 20.0], power_w=[9.0, 4.0])
    )
    r = pd.DataFrame({"batch_size": [8], "samples": [800]})  # tt_acc 1.0 s and 2.0 s
    fast = pt.select(est, r, power_cap_w=10, objective="energy", deadline_s=2.0)
    assert fast.gpu_mhz == 2 and fast.tt_acc == pytest.approx(2.0)
    assert pt.select(est, r, power_cap_w=10, objective="energy", deadline_s=1.999).gpu_mhz == 1
    assert np.isclose(pt.select(est, r, power_cap_w=10, deadline_s=2.0).tt_acc, 1.0)


# -- the fast CSV writer writes what pandas writes ----------------------------------------


def test_csv_text_is_exactly_what_to_csv_writes():
    from powertrain.predictor.streaming import csv_text

    rng = np.random.default_rng(0)
    n = 400
    df = pd.DataFrame(
        {
            "cores": rng.integers(1, 12, n),  # few values: formatted once each
            "cpu_mhz": rng.choice([115.2, 2201.6, 612.0], n),
            "time_ms": rng.random(n) * 1e3,  # every value distinct
            "tiny": np.where(rng.random(n) < 0.1, np.nan, rng.random(n) * 1e-9),
            "big": rng.choice([1e20, np.inf, -0.0, 3.0], n),
            "device": np.where(rng.random(n) < 0.1, None, "orin-agx"),
            "ok": rng.random(n) < 0.5,
            "count": pd.array(np.where(rng.random(n) < 0.1, None, 3), dtype="Int64"),
        }
    )
    for frame in (df, df.head(1), df.head(0), df.assign(note="a,b"), df.assign(note='say "x"')):
        for header in (True, False):
            want = frame.to_csv(index=False, header=header, lineterminator="\n")
            assert csv_text(frame, header=header) == want


def test_a_producer_error_reaches_the_writer_at_its_chunk():
    from powertrain.predictor.streaming import prefetch

    def frames():
        yield pd.DataFrame({"a": [1]})
        raise DataError("row 7 is bad")

    got = []
    with pytest.raises(DataError, match="row 7"):
        for df in prefetch(frames()):
            got.append(len(df))
    assert got == [1]
