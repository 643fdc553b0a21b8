"""The newcomer's path around reports: backend left alone, workloads listed, versions stated."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import powertrain as pt
from powertrain.cli import main

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "powertrain"


def backend_switches(path: Path) -> list[int]:
    """Lines of ``matplotlib.use(...)`` / ``plt.switch_backend(...)`` calls in a file."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", "")
            if (name, node.func.attr) in {("matplotlib", "use"), ("plt", "switch_backend")}:
                lines.append(node.lineno)
    return lines


def test_the_library_never_switches_the_matplotlib_backend():
    offenders = {
        str(p.relative_to(ROOT)): backend_switches(p)
        for p in PACKAGE.rglob("*.py")
        if "cli" not in p.relative_to(PACKAGE).parts and backend_switches(p)
    }
    assert not offenders, f"only the CLI may set a backend: {offenders}"
    # the scan finds a call where there is one (the report command sets Agg)
    assert backend_switches(PACKAGE / "cli" / "report.py")


def test_workloads_command_lists_the_catalog(capsys):
    assert main(["workloads"]) == 0
    out = capsys.readouterr().out
    for name in pt.workload_names():
        assert re.search(rf"^{re.escape(name)}\s", out, re.M), name


def test_readme_states_the_python_versions_pyproject_requires():
    pyproject = (ROOT / "pyproject.toml").read_text()
    lower = re.search(r'requires-python = ">=3\.(\d+)"', pyproject)
    assert lower, "requires-python must state a lower bound"
    readme = (ROOT / "README.md").read_text()
    assert f"Python 3.{lower.group(1)} or newer" in readme
    assert int(lower.group(1)) >= 10  # torch==2.13.0 (Makefile) has no 3.9 build
    guide = readme + (ROOT / "docs" / "user-guide.md").read_text()  # the README points at it
    for command in ("powertrain report examples/fleet.toml", "jupyter lab notebooks/"):
        assert command in guide, command


def test_every_command_option_has_a_help_line():
    import argparse

    from powertrain.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = [
        (name, a.option_strings or a.dest)
        for name, sp in sub.choices.items()
        for a in sp._actions
        if not isinstance(a, argparse._HelpAction) and not a.help
    ]
    assert not missing, f"options without --help text: {missing}"
