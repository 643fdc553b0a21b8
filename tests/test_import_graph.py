"""The package's import graph: no cycles, no imports of the package root, layers respected.

Why: cycles and back-imports of ``powertrain`` make import order matter (a module sees a
half-initialised package) and tie layers together that should not know of each other.
Every import counts, including those inside functions and under TYPE_CHECKING, and so
does every parent package Python runs on the way: importing ``a.b.c`` runs ``a/__init__``
and ``a/b/__init__`` first, so a module importing ``a.b.c`` depends on all three (except
on its own parent packages, which are already running when it is imported).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import powertrain

PACKAGE_DIR = Path(powertrain.__file__).resolve().parent
#: modules allowed to import the package root (entry points, not library code)
ROOT_IMPORTERS = ("powertrain", "powertrain.__main__")
ROOT_IMPORTER_PACKAGES = ("powertrain.cli",)
#: (importer prefix, forbidden imported prefix)
LAYERS = [
    ("powertrain.twin", "powertrain.profiling"),
    ("powertrain.twin", "powertrain.backends"),
    ("powertrain.backends", "powertrain.profiling"),
    ("powertrain.steps", "powertrain.backends"),
    ("powertrain.steps", "powertrain.profiling"),
    ("powertrain.predictor", "powertrain.twin"),
    ("powertrain.predictor", "powertrain.profiling"),
    ("powertrain.predictor", "powertrain.backends"),
    ("powertrain.decisions.optimise", "powertrain.predictor"),
    ("powertrain.workflow", "powertrain.report"),
    ("powertrain.decisions", "powertrain.workflow"),
    ("powertrain.decisions.evaluate", "powertrain.workflow"),
]
FOREIGN = ("tools", "tests")
#: known cycles left out of the search while being removed (none now)
PENDING_EDGES: set[tuple[str, str]] = set()


def module_name(path: Path, root: Path, package: str) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([package, *parts])


def parents_run(target: str, importer: str) -> list[str]:
    """The parent packages importing ``target`` runs first, less the importer and its own
    parents (they are already running when the importer runs)."""
    parts = target.split(".")
    chain = [".".join(parts[:i]) for i in range(1, len(parts))]
    own = {importer.rsplit(".", k)[0] for k in range(importer.count(".") + 1)}
    return [m for m in chain if m not in own]


def import_graph(root: Path, package: str) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(edges between the package's modules, every absolute module name each imports)."""
    modules = {
        module_name(p, root, package): p for p in root.rglob("*.py") if "__pycache__" not in p.parts
    }
    edges: dict[str, set[str]] = {m: set() for m in modules}
    imported: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        is_pkg = path.name == "__init__.py"
        here = name if is_pkg else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                # `from pkg import sub` depends on the submodule pkg.sub when it is one,
                # on pkg itself only for names that are not submodules
                subs = [f"{mod}.{a.name}" for a in node.names]
                targets = [t for t in subs if t in modules]
                if len(targets) < len(subs):
                    targets.append(mod)
            for t in targets:
                imported[name].add(t)
                if t in modules and t != name:
                    edges[name].add(t)
                for parent in parents_run(t, name):
                    imported[name].add(parent)
                    if parent in modules:
                        edges[name].add(parent)
    return edges, imported


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(edges[m]):
            if state.get(n) == 1:
                return stack[stack.index(n) :] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(edges):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


EDGES, IMPORTED = import_graph(PACKAGE_DIR, "powertrain")


def test_the_graph_sees_the_package():
    assert "powertrain.profiling.sweep" in EDGES
    assert (
        "powertrain.backends.base"
        in EDGES["powertrain.profiling.sweep"] | {t for t in IMPORTED["powertrain.profiling.sweep"]}
        or "powertrain.backends" in EDGES["powertrain.profiling.sweep"]
    )


def test_no_import_cycle():
    edges = {m: {t for t in ts if (m, t) not in PENDING_EDGES} for m, ts in EDGES.items()}
    cycle = find_cycle(edges)
    assert cycle is None, f"import cycle: {' -> '.join(cycle)}"


def test_no_module_imports_the_package_root():
    offenders = sorted(
        m
        for m, targets in IMPORTED.items()
        if "powertrain" in targets
        and m not in ROOT_IMPORTERS
        and not any(m == p or m.startswith(p + ".") for p in ROOT_IMPORTER_PACKAGES)
    )
    assert not offenders, f"import the package root (use powertrain._version etc.): {offenders}"


def layer_violations(imported: dict[str, set[str]], importer: str, forbidden: str) -> list[str]:
    """Imports from modules under ``importer`` of modules under ``forbidden``."""
    return sorted(
        f"{m} -> {t}"
        for m, targets in imported.items()
        if m == importer or m.startswith(importer + ".")
        for t in targets
        if t == forbidden or t.startswith(forbidden + ".")
    )


@pytest.mark.parametrize(("importer", "forbidden"), LAYERS)
def test_layers(importer, forbidden):
    bad = layer_violations(IMPORTED, importer, forbidden)
    assert not bad, f"{importer} must not import {forbidden}: {bad}"


def test_library_never_imports_tools_or_tests():
    bad = sorted(
        f"{m} -> {t}" for m, ts in IMPORTED.items() for t in ts if t.split(".")[0] in FOREIGN
    )
    assert not bad, bad


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_deliberate_cycle_is_found(tmp_path):
    pkg = tmp_path / "toy"
    _write(
        pkg,
        {
            "__init__.py": "",
            "a.py": "from .b import f\n",
            "sub/__init__.py": "",
            "sub/c.py": "def g():\n    from ..a import f  # a lazy import still counts\n",
            "b.py": "from .sub import c\ndef f():\n    pass\n",
        },
    )
    edges, _ = import_graph(pkg, "toy")
    assert edges["toy.b"] == {"toy.sub", "toy.sub.c"}  # the parent package runs too
    cycle = find_cycle(edges)
    assert cycle is not None and set(cycle) == {"toy.a", "toy.b", "toy.sub.c"}
    (pkg / "sub" / "c.py").write_text("def g():\n    pass\n")
    edges, imported = import_graph(pkg, "toy")
    assert find_cycle(edges) is None
    assert "toy" not in imported["toy.a"]


def test_a_root_import_is_seen(tmp_path):
    pkg = tmp_path / "toy"
    _write(pkg, {"__init__.py": "", "sub/__init__.py": "", "sub/m.py": "from .. import x\n"})
    _, imported = import_graph(pkg, "toy")
    assert "toy" in imported["toy.sub.m"]


def test_the_old_hardware_cycle_is_found(tmp_path, monkeypatch):
    """The layout the hardware wing replaced: a backend imported a profiling submodule,
    and the profiling package re-exported the backends. Only the parent-package edge
    (importing ``profiling.power_sensors`` runs ``profiling/__init__``) closes the cycle,
    and Python indeed fails on it."""
    pkg = tmp_path / "toy"
    _write(
        pkg,
        {
            "__init__.py": "",
            "backends/__init__.py": "from .jetson import JetsonBackend\n",
            "backends/jetson.py": (
                "from ..profiling.power_sensors import PowerSampler\n"
                "class JetsonBackend:\n    pass\n"
            ),
            "profiling/__init__.py": "from ..backends import JetsonBackend\n",
            "profiling/power_sensors.py": "class PowerSampler:\n    pass\n",
        },
    )
    edges, imported = import_graph(pkg, "toy")
    assert "toy.profiling" in edges["toy.backends.jetson"]  # the parent package it runs
    cycle = find_cycle(edges)
    assert cycle is not None and set(cycle) == {
        "toy.backends",
        "toy.backends.jetson",
        "toy.profiling",
    }
    assert layer_violations(imported, "toy.backends", "toy.profiling") == [
        "toy.backends.jetson -> toy.profiling",
        "toy.backends.jetson -> toy.profiling.power_sensors",
    ]
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.raises(ImportError, match="partially initiali[sz]ed"):
            __import__("toy.backends")
    finally:
        for name in [m for m in sys.modules if m == "toy" or m.startswith("toy.")]:
            del sys.modules[name]


def test_own_parent_packages_are_not_edges(tmp_path):
    pkg = tmp_path / "toy"
    _write(
        pkg,
        {
            "__init__.py": "from .sub import m\n",
            "sub/__init__.py": "from .m import f\n",
            "sub/m.py": "from .n import g\ndef f():\n    pass\n",
            "sub/n.py": "import toy.other.x\ndef g():\n    pass\n",
            "other/__init__.py": "",
            "other/x.py": "",
        },
    )
    edges, _ = import_graph(pkg, "toy")
    assert edges["toy.sub.m"] == {"toy.sub.n"}  # not toy.sub: it is already running
    assert edges["toy.sub.n"] == {"toy.other", "toy.other.x"}
    assert find_cycle(edges) is None
