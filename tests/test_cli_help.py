"""The command line's help and exit codes, as README.md and docs/cli.md state them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from powertrain.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]


def _commands() -> dict:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return sub.choices


def test_every_command_has_a_description():
    missing = [name for name, p in _commands().items() if not (p.description or "").strip()]
    assert missing == []


def test_every_option_says_what_it_takes():
    """No bare unit as a whole help text: an option's help says what it is, and its
    default where it has one."""
    demo = _commands()["demo"]
    cap = next(a for a in demo._actions if "--power-cap" in a.option_strings)
    assert "watts" in cap.help and str(int(cap.default)) in cap.help
    bare = [
        (name, a.dest)
        for name, p in _commands().items()
        for a in p._actions
        if a.help and re.fullmatch(r"\w+", a.help.strip())
    ]
    assert bare == []


def test_exit_codes_are_as_documented(tmp_path, capsys):
    readme = (ROOT / "README.md").read_text()
    assert "exit code 1" in readme and "exits 2" in readme
    with pytest.raises(SystemExit) as bad_line:  # argparse: an unknown option
        main(["select", "--no-such-option"])
    assert bad_line.value.code == 2
    with pytest.raises(SystemExit) as bad_value:  # argparse: a value of the wrong type
        main(["demo", "--power-cap", "thirty"])
    assert bad_value.value.code == 2
    bad = tmp_path / "est.csv"
    bad.write_text("cores,cpu_mhz\n4,1000\n")  # no time or power column
    assert main(["select", str(bad), "--power-cap", "30"]) == 1
    assert "est.csv" in capsys.readouterr().err


@pytest.mark.system  # a subprocess whose torch import fails
def test_a_command_without_torch_says_so_in_one_line(tmp_path):
    (tmp_path / "torch.py").write_text("raise ModuleNotFoundError('no torch', name='torch')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    run = subprocess.run(
        [sys.executable, "-m", "powertrain", "demo", "-o", str(tmp_path / "out")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 1
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "PyTorch is not installed" in lines[0], run.stderr
    assert "Traceback" not in run.stderr
