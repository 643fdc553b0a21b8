"""docs/design.md stays true: its module table names exactly the modules that exist, and
every script or module path it mentions is there.

Why: a design record that names a module nobody can find (or leaves out half the package)
sends a new maintainer the wrong way; this fails when a module is added, moved or removed
without the table following.

Table format (section "Modules and what each may import", column "modules"): a token
ending in ``/`` is a package (relative to ``powertrain/``), later plain tokens in the
same row are modules inside the last package named; tokens before any package are
top-level modules.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "powertrain"
DESIGN = ROOT / "docs" / "design.md"
#: modules that are plumbing, not design: the entry shim and the version string
UNLISTED = {"__main__", "_version"}


def table_rows(text: str, heading: str) -> list[list[str]]:
    """The cells of the markdown table under ``heading`` (header and rule left out)."""
    section = text.split(heading, 1)[1]
    rows = []
    for line in section.splitlines()[1:]:
        if line.startswith("## "):
            break
        if line.startswith("|") and not set(line) <= set("|-: "):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows[1:]  # without the header row


def named_modules(cell: str) -> set[str]:
    """Dotted module names (below ``powertrain``) that one table cell names."""
    names: set[str] = set()
    package = ""
    for token in re.findall(r"`([^`]+)`", cell):
        if token.endswith("/"):
            package = token.rstrip("/").replace("/", ".")
            names.add(package)
        else:
            names.add(f"{package}.{token}" if package else token)
    return names


def existing_modules(root: Path) -> set[str]:
    out = set()
    for path in root.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts and parts[-1] not in UNLISTED:
            out.add(".".join(parts))
    return out


def test_named_modules_parser():
    cell = "`report/` (`spec`, `pages`), `backends/jetson/` (`backend`), then `files`"
    assert named_modules(cell) == {
        "report",
        "report.spec",
        "report.pages",
        "backends.jetson",
        "backends.jetson.backend",
        "backends.jetson.files",
    }
    assert named_modules("`errors`, `metrics`") == {"errors", "metrics"}


TEXT = DESIGN.read_text()
ROWS = table_rows(TEXT, "## Modules and what each may import")
NAMED = set().union(*(named_modules(row[1]) for row in ROWS))
EXISTING = existing_modules(PACKAGE)


def test_the_table_is_read():
    assert len(ROWS) >= 5 and "errors" in NAMED


def test_every_module_the_table_names_exists():
    missing = sorted(NAMED - EXISTING)
    assert not missing, f"docs/design.md names modules that do not exist: {missing}"


def test_every_module_is_in_the_table():
    unlisted = sorted(EXISTING - NAMED)
    assert not unlisted, f"modules missing from docs/design.md's module table: {unlisted}"


@pytest.mark.parametrize(
    "path", sorted(set(re.findall(r"`((?:tools|benchmarks|tests|docs)/[\w/.-]+\.\w+)", TEXT)))
)
def test_every_file_path_it_names_exists(path):
    assert (ROOT / path).exists(), f"docs/design.md names {path}, which does not exist"


def test_every_script_it_names_exists():
    """Script names given bare (``make_corpora.py``) in the text name files in tools/ or
    benchmarks/."""
    scripts = set(re.findall(r"`(?:python )?([\w-]+\.py)\b", TEXT))
    missing = sorted(
        s for s in scripts if not any((ROOT / d / s).exists() for d in ("tools", "benchmarks"))
    )
    assert not missing, f"docs/design.md names scripts that do not exist: {missing}"
