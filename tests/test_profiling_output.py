"""The sweep's output file under misuse: two writers, a changed run, bad paths, full disks."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest
from sim_backend import SimBoard

import powertrain as pt
from powertrain.cli import main
from powertrain.errors import DataError
from powertrain.profiling import store
from powertrain.profiling.store import meta_path
from powertrain.profiling.sweep import profile

HERE = Path(__file__).resolve().parent


def _modes(n: int = 4) -> pd.DataFrame:
    gpu = [300.0 + 100 * i for i in range(n)]
    return pd.DataFrame({"cores": 4, "cpu_mhz": 1000.0, "gpu_mhz": gpu, "mem_mhz": 2133.0})


def _run(out, n=4, **kw):
    kw.setdefault("n_minibatches", 5)
    return profile(SimBoard(), _modes(n), batch_size=8, out=out, progress=False, **kw)


def test_a_second_writer_is_refused_at_once(tmp_path):
    out = tmp_path / "s.csv"
    with store.exclusive(out):  # another run holds the output
        with pytest.raises(DataError, match="another run is writing to this output"):
            _run(out)
    assert not out.exists()
    assert len(_run(out)) == 4  # the lock is released with its holder


@pytest.mark.system
def test_the_package_imports_and_sweeps_without_fcntl(tmp_path):
    """Where ``fcntl`` does not exist (Windows), ``import powertrain`` and a locked,
    resumable sweep still work."""
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["fcntl"] = None  # `import fcntl` now raises ImportError
        import powertrain as pt
        from powertrain.profiling import store
        dev = pt.get_device("orin-agx")
        out = {str(tmp_path / "s.csv")!r}
        twin = pt.Twin("orin-agx", "resnet18", seed=0)
        df = pt.profile(twin, dev.sample(2, seed=0), batch_size=8, n_minibatches=5, out=out)
        with store.exclusive(out):
            try:
                pt.profile(twin, dev.sample(2, seed=0), batch_size=8, n_minibatches=5, out=out)
            except pt.DataError as e:
                print("refused:", e)
        print("rows", len(df), "fcntl" in sys.modules and sys.modules["fcntl"] is None)
        """
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "rows 2 True" in run.stdout
    assert "refused:" in run.stdout and "another run is writing" in run.stdout


def test_simulate_refuses_a_locked_output(tmp_path, capsys):
    out = tmp_path / "sim.csv"
    with store.exclusive(out):
        rc = main(["simulate", "orin-agx", "resnet18", "-n", "2", "-o", str(out), "-q"])
    assert rc == 1 and "another run is writing" in capsys.readouterr().err


def test_resume_with_other_settings_names_the_field(tmp_path):
    out = tmp_path / "s.csv"
    _run(out, n=2)
    assert json.loads(meta_path(out).read_text())["run"]["n_minibatches"] == 5
    with pytest.raises(DataError, match="n_minibatches = 5, this run has n_minibatches = 6"):
        _run(out, n=4, n_minibatches=6)
    assert len(_run(out, n=4)) == 4  # same settings: resumes
    other = tmp_path / "h.csv"
    _run(other, n=1, header={"seed": 1})
    with pytest.raises(DataError, match="written with seed = 1, this run has seed = 2"):
        _run(other, n=2, header={"seed": 2})


def test_simulate_resume_with_another_seed_is_an_error(tmp_path, capsys):
    out = tmp_path / "sim.csv"
    argv = ["simulate", "orin-nano", "resnet18", "-n", "2", "-o", str(out), "-q"]
    assert main([*argv, "--minibatches", "5"]) == 0
    capsys.readouterr()
    assert main([*argv, "--minibatches", "5", "--seed", "3"]) == 1
    err = capsys.readouterr().err
    assert "seed = 0, this run has seed = 3" in err and len(err.strip().splitlines()) == 1


def test_bad_output_paths_are_one_line_errors(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        _run(tmp_path / "missing" / "s.csv")
    with pytest.raises(DataError, match="is a folder"):
        _run(tmp_path)
    text = tmp_path / "notes.csv"
    text.write_text("just some notes\nnot a table of results\n")
    with pytest.raises(DataError, match="cannot resume, its columns differ"):
        _run(text)
    assert text.read_text() == "just some notes\nnot a table of results\n"


def test_read_only_output_is_a_one_line_error(tmp_path, monkeypatch):
    out = tmp_path / "s.csv"
    _run(out, n=2)
    before = out.read_bytes()
    real_open = open

    def read_only(path, mode="r", *a, **kw):
        if "a" in mode or "w" in mode:
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, mode, *a, **kw)

    monkeypatch.setattr("builtins.open", read_only)
    with pytest.raises(DataError, match=r"cannot write \(the file system is read-only\)"):
        _run(out, n=4)
    monkeypatch.undo()
    assert out.read_bytes() == before


@pytest.mark.system
@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE semantics")
def test_file_size_limit_keeps_every_written_row(tmp_path):
    out = tmp_path / "s.csv"
    script = textwrap.dedent(
        f"""
        import resource, signal, sys
        sys.path.insert(0, {str(HERE)!r})
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (40000, 40000))
        import pandas as pd
        from sim_backend import SimBoard
        from powertrain.errors import PowerTrainError
        from powertrain.profiling.sweep import profile
        modes = pd.DataFrame({{"cores": 4, "cpu_mhz": 1000.0,
                              "gpu_mhz": [300.0 + 50 * i for i in range(30)], "mem_mhz": 2133.0}})
        try:
            profile(SimBoard(), modes, batch_size=8, n_minibatches=5, out={str(out)!r},
                    progress=False)
        except PowerTrainError as e:
            print(e)
            sys.exit(3)
        """
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, r.stderr
    assert "cannot write (the file-size limit was reached)" in r.stdout
    assert len(r.stdout.strip().splitlines()) == 1
    kept = pd.read_csv(out)  # parses: no torn line
    assert 0 < len(kept) < 30 and kept.time_ms.notna().all()
    done = _resume_30(out)
    assert len(done) == 30
    assert done.iloc[: len(kept)].equals(kept)  # no measured row lost or changed


def _resume_30(out):
    modes = pd.DataFrame(
        {
            "cores": 4,
            "cpu_mhz": 1000.0,
            "gpu_mhz": [300.0 + 50 * i for i in range(30)],
            "mem_mhz": 2133.0,
        }
    )
    return profile(SimBoard(), modes, batch_size=8, n_minibatches=5, out=out, progress=False)


def test_no_progress_bar_when_stderr_is_not_a_terminal(tmp_path, capsys):
    out = tmp_path / "sim.csv"
    assert (
        main(["simulate", "orin-nano", "resnet18", "-n", "2", "-o", str(out), "--minibatches", "5"])
        == 0
    )
    assert "\r" not in capsys.readouterr().err
    out2 = tmp_path / "sim2.csv"
    assert (
        main(
            [
                "simulate",
                "orin-nano",
                "resnet18",
                "-n",
                "2",
                "-o",
                str(out2),
                "--minibatches",
                "5",
                "--progress",
            ]
        )
        == 0
    )
    assert "\r" in capsys.readouterr().err


def test_twin_is_profiled_through_the_adapter():
    twin = pt.Twin("orin-nano", "resnet18")
    df = pt.profile(
        twin,
        pt.get_device("orin-nano").sample(2, seed=1),
        batch_size=16,
        n_minibatches=5,
        progress=False,
    )
    assert len(df) == 2 and (df.device == "orin-nano").all()


@pytest.mark.slow
@pytest.mark.system
def test_twin_sweep_killed_and_resumed_is_bit_identical(tmp_path):
    from sweep_child import SlowTwin, twin_modes

    def sweep(out, backend):
        return profile(
            backend, twin_modes(), batch_size=16, n_minibatches=10, out=out, progress=False
        )

    whole = tmp_path / "whole.csv"
    sweep(whole, SlowTwin(pt.Twin("orin-nano", "resnet18", seed=7)))
    out = tmp_path / "killed.csv"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")]),
    }
    child = subprocess.Popen(
        [sys.executable, str(HERE / "sweep_child.py"), str(out), "twin"], env=env
    )
    try:
        deadline = time.time() + 180  # a loaded machine starts the child slowly
        while time.time() < deadline:
            if out.exists() and out.read_text().count("\n") >= 4:  # header + 3 rows
                break
            if child.poll() is not None:
                pytest.fail("the sweep finished before it could be killed")
            time.sleep(0.01)
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
    assert 3 <= len(pd.read_csv(out)) < 16
    # resumed in a fresh twin, as a new process would
    sweep(out, SlowTwin(pt.Twin("orin-nano", "resnet18", seed=7)))
    assert out.read_bytes() == whole.read_bytes()
