"""The Jetson backend never writes outside sysfs and never leaves a board half restored."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from fake_sysfs import GPU_DIR, make_orin

from powertrain.backends.jetson import JetsonBackend
from powertrain.backends.jetson.sysfs_knobs import SysfsKnobs, confined
from powertrain.devices.device import get_device
from powertrain.errors import ProfilingError

HERE = Path(__file__).resolve().parent
ORIN = get_device("orin-agx").spec


def test_writes_outside_the_roots_are_refused(tmp_path):
    board = make_orin(tmp_path / "board")
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    write = confined(board.kernel, [board.root / "sys"])
    with pytest.raises(ProfilingError, match="not under"):
        write(outside, "1")
    # a symlink inside sysfs that points out of it is refused by where it resolves
    link = board.root / "sys" / "evil"
    link.symlink_to(outside)
    with pytest.raises(ProfilingError, match=r"resolves to .*outside.txt"):
        write(link, "1")
    assert outside.read_text() == "keep"
    write(board.root / GPU_DIR / "min_freq", str(board.gpu_hz[0]))  # inside: allowed


def test_a_spec_path_with_dotdot_is_refused(tmp_path):
    board = make_orin(tmp_path)
    with pytest.raises(ProfilingError, match=r"'\.\.'"):
        SysfsKnobs(ORIN, board.root, board.kernel, gpu_devfreq="/sys/../etc/devfreq")
    from dataclasses import replace

    spec = replace(
        ORIN, sysfs={"gpu_devfreq_sysfs": {"path": "/sys/class/devfreq/../../../etc/gpu"}}
    )
    with pytest.raises(ProfilingError, match=r"contains '\.\.'"):
        SysfsKnobs(spec, board.root, board.kernel)


def test_configurable_roots_confine_the_backend(tmp_path):
    board = make_orin(tmp_path)
    before = board.state()
    # roots that leave out the GPU's devfreq folder: setting a mode is refused there
    knobs = SysfsKnobs(
        ORIN, board.root, board.kernel, write_roots=[board.root / "sys/devices/system"]
    )
    with pytest.raises(ProfilingError, match="not under"):
        knobs.apply(4, 729.6, 318.75, 3199.0)
    gpu = {k: v for k, v in board.state().items() if k.startswith(GPU_DIR)}
    assert gpu == {k: v for k, v in before.items() if k.startswith(GPU_DIR)}


def test_restore_runs_every_step_and_reports_all(tmp_path):
    board = make_orin(tmp_path)
    calls = []

    def kernel(path, value):
        calls.append(Path(path).name)
        board.kernel(path, value)

    b = JetsonBackend(
        "orin-agx",
        lambda bs: 0.5,
        root=board.root,
        write=kernel,
        sensor="hwmon",
        sample_period_s=0.01,
        check_root=False,
        handle_signals=False,
    )
    b.configure(
        {"cores": 4, "cpu_mhz": 729.6, "gpu_mhz": 318.75, "mem_mhz": 665.6, "batch_size": 4}
    )
    board.refuse = {f"{GPU_DIR}/min_freq"}  # the GPU floor cannot be written back
    calls.clear()
    with pytest.raises(ProfilingError, match="could not restore"):
        b.close()
    # the steps after the failing one still ran: EMC, cores and the fan were written back
    assert {"rate", "online", "pwm1"} <= set(calls)
    board.refuse = set()
    state = board.state()
    assert state["sys/kernel/debug/bpmp/debug/clk/emc/rate"] == "3199000000"
    assert state["sys/devices/system/cpu/cpu7/online"] == "1"


CHILD = """
import sys, time
sys.path.insert(0, {here!r})
from pathlib import Path
from powertrain.backends.jetson import JetsonBackend
from powertrain.profiling.sweep import profile
from fake_sysfs import FakeBoard
import json
root = Path(sys.argv[1])  # the tree exists already; this process writes it like the kernel
fb = FakeBoard(root, *json.loads((root / "tables.json").read_text()))
def kernel(path, value):  # says each write, so the test signals at a known write
    fb.kernel(path, value)
    print("w", flush=True)
    time.sleep(0.003)  # slow, as a real kernel write can be: more signals land inside
def step(bs):
    time.sleep(0.002)
    return 0.5
b = JetsonBackend("orin-agx", step, root=root, write=kernel, sensor="hwmon",
                  sample_period_s=0.01, check_root=False)
with b:
    print("ready", flush=True)
    modes = b.device.sample(200, seed=0).assign(mem_mhz=3199.0)
    profile(b, modes, batch_size=4, n_minibatches=20, progress=False)
"""


def _writes(child: subprocess.Popen, n: int) -> None:
    """Wait until the child's kernel has made ``n`` more writes (or the child ended)."""
    for _ in range(n):
        if not child.stdout.readline():
            return


@pytest.mark.slow
@pytest.mark.system
@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="POSIX signals")
def test_quick_signals_never_leave_the_board_half_restored(tmp_path):
    import json

    root = tmp_path / "board"
    board = make_orin(root)
    (root / "tables.json").write_text(json.dumps([board.gpu_hz, board.cpu_khz, board.emc_hz]))
    original = board.state()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")]),
    }
    pairs = [
        (signal.SIGTERM, signal.SIGTERM),
        (signal.SIGINT, signal.SIGTERM),
        (signal.SIGTERM, signal.SIGINT),
        (signal.SIGHUP, signal.SIGTERM),
    ]
    for i in range(20):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD.format(here=str(HERE)), str(root)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:  # signals sent after counted kernel writes, not after sleeps: no race on time
            lines = iter(child.stdout.readline, "")  # the set-up writes come first
            assert "ready" in (ln.strip() for ln in lines), child.stderr.read()
            _writes(child, 5 + 7 * (i % 5))  # somewhere inside the sweep
            first, second = pairs[i % len(pairs)]
            child.send_signal(first)
            _writes(child, 1 + i % 3)  # the second lands while the board is restored
            child.send_signal(second)
            _writes(child, 1)
            child.send_signal(first)  # and one more, as an impatient user would
            err = child.communicate(timeout=60)[1]
        finally:
            if child.poll() is None:
                child.kill()
        assert child.returncode != 0
        assert board.state() == original, f"round {i}: {err[-500:]}"
