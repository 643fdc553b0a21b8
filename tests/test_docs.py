"""The README and the documentation site: short, runnable, generated where they report
figures, and complete.

Every ```python block of the README and of each page under docs/ runs, in order, in one
namespace per page. A block that needs what a test machine lacks (a Jetson, root, a GPU)
starts with a ``# skip: REASON`` line, so the reason shows on the page itself.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path
from types import ModuleType

import pytest

import powertrain as pt

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.glob("*.md"))
SKIP = re.compile(r"^# skip: (\S.*)$")
#: words of a development log, which belong in commit messages, not in the docs
DEV_LOG = re.compile(
    r"this\s+stop|previous\s+(run|stop|code)|issue\s+\d+|the\s+older\s+paragraph|"
    r"before\s+this\s+change|"
    r"rerun\s+on\s+the\s+final\s+code",
    re.IGNORECASE,
)


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.S)


def run_blocks(path: Path, tmp_path: Path, shown: list | None = None) -> int:
    """Run the page's blocks in order in one namespace (in ``tmp_path``); the count run.
    The warnings a user would see (UserWarning and its kind) go into ``shown``."""
    namespace: dict = {"__name__": "__docs__"}
    ran = 0
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # e.g. extrapolation notes: the pages explain them
            for i, block in enumerate(python_blocks(path), 1):
                first = block.splitlines()[0] if block.strip() else ""
                if first.startswith("# skip"):
                    assert SKIP.match(first), f"{path.name} block {i}: a skip needs a reason"
                    continue
                exec(compile(block, f"{path.name} block {i}", "exec"), namespace)
                ran += 1
        if shown is not None:
            shown += [
                f"{w.category.__name__}: {w.message}"
                for w in caught
                if issubclass(w.category, UserWarning)
            ]
    finally:
        os.chdir(cwd)
    return ran


def test_the_readme_is_short_and_points_at_every_guide():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    for page in ("user-guide", "deciding", "jetson", "results", "decisions", "gpu-clocks"):
        assert f"docs/{page}.md" in text
    for page in ("training-callbacks", "safety"):
        assert f"docs/{page}.md" in text
    assert "make test" in text and "download.pytorch.org/whl/cpu" in text


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_no_development_log_language(page):
    found = DEV_LOG.search(page.read_text())
    assert found is None, f"{page.name}: {found.group(0)!r}"


@pytest.mark.slow  # transfers and decisions on the twin: up to a minute a page
@pytest.mark.parametrize(
    "page",
    [ROOT / "README.md", *(p for p in PAGES if python_blocks(p))],
    ids=lambda p: p.name,
)
def test_every_python_block_runs_in_order(page, tmp_path):
    shown: list[str] = []
    assert run_blocks(page, tmp_path, shown) >= 1 or page.name == "jetson.md"
    if page.name == "README.md":  # the quick start: a newcomer's first run warns of nothing
        assert shown == []


def test_skipped_blocks_say_why(tmp_path):
    blocks = [b for p in PAGES for b in python_blocks(p) if b.startswith("# skip")]
    assert blocks and all(SKIP.match(b.splitlines()[0]) for b in blocks)


def test_the_results_page_is_generated_from_the_benchmark_files():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import results_page
    finally:
        sys.path.remove(str(ROOT / "tools"))
    assert (DOCS / "results.md").read_text() == results_page.page()
    # a benchmark file it has never seen still gets a section
    text = results_page.section_of("new_bench", {"draws": 3, "rows": [{"a": "x", "v": 1.5}]})
    assert text.startswith("## New bench") and "| x | 1.5 |" in text


def _nav(text: str) -> list[tuple[str, str]]:
    return re.findall(r"^\s*- ([^:\n]+): ([\w/.-]+\.md)\s*$", text, re.M)


def test_the_menu_has_no_duplicates_and_every_page():
    nav = _nav((ROOT / "mkdocs.yml").read_text())
    titles = [t.lower() for t, _ in nav]
    files = [f for _, f in nav]
    assert len(set(titles)) == len(titles) and len(set(files)) == len(files)
    assert all((DOCS / f).is_file() for f in files)
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages == set(files)


def _resolve(path: str) -> object:
    """The object a ``::: dotted.path`` directive documents."""
    import importlib

    try:
        return importlib.import_module(path)
    except ImportError:
        parent, _, name = path.rpartition(".")
        return getattr(importlib.import_module(parent), name)


PACKAGES = ("powertrain", "powertrain.backends", "powertrain.steps", "powertrain.predictor",
            "powertrain.profiling", "powertrain.report")  # fmt: skip


def test_every_exported_name_is_documented():
    import importlib

    paths = set()
    for page in (DOCS / "api").glob("*.md"):
        paths |= set(re.findall(r"^::: ([\w.]+)", page.read_text(), re.M))
    documented = [_resolve(p) for p in paths]
    modules = {id(o) for o in documented if isinstance(o, ModuleType)}
    missing = []
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            obj = getattr(module, name)
            if name == "__version__" or any(obj is d for d in documented):
                continue
            if isinstance(obj, ModuleType) and any(p.startswith(obj.__name__) for p in paths):
                continue  # pt.report: the callable package, documented by its contents
            home = sys.modules.get(getattr(obj, "__module__", "") or "")
            if id(home) not in modules:  # nor documented with its whole module
                missing.append(f"{package}.{name}")
    assert missing == [], f"exported but on no API page: {missing}"


@pytest.mark.system  # a subprocess; needs the docs extra (pip install -e ".[docs]")
def test_the_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"}
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr[-3000:]
    site = tmp_path / "site"
    predictor = (site / "api" / "predictor.html").read_text()
    assert ":meth:" not in predictor and "<th>Name</th>" in predictor  # a parameter table
    assert not list(site.rglob("*.py"))  # the build's hook is no page of the site
    # opened from disk (file://), every link between pages names a file, not a folder
    index = (site / "index.html").read_text()
    links = re.findall(r'href="([^"#:]+)"', index)
    assert "user-guide.html" in links
    folders = [h for h in links if h.endswith("/") and not h.startswith("http")]
    assert folders == []


def test_pt_names_resolve():
    for name in pt.__all__:
        assert getattr(pt, name) is not None


def _demo_lines(page: Path) -> list[str]:
    """The demo's answer as a page shows it: the code block that starts with it."""
    text = page.read_text()
    block = re.search(r"```\n(the pick under 30 W:\n.*?)```", text, re.S)
    assert block, f"{page.name} shows no demo answer"
    return block.group(1).strip().splitlines()


_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


def _same_line(shown: str, printed: str) -> bool:
    """``shown`` (``...`` for any text) matches ``printed``: the same words, and numbers
    within 2 % (or 0.2) of each other, so a page cannot fall behind the demo."""
    parts = shown.split("...")

    def literal(part: str) -> str:  # the words as they are, each number as a group
        bits = re.split(f"({_NUMBER.pattern})", part)
        return "".join(
            f"({_NUMBER.pattern})" if i % 2 else re.escape(b) for i, b in enumerate(bits)
        )

    m = re.fullmatch(".*?".join(literal(p) for p in parts), printed)
    if not m:
        return False
    want = [float(x) for p in parts for x in _NUMBER.findall(p)]
    got = [float(x) for x in m.groups()]
    return all(abs(a - b) <= max(0.2, 0.02 * abs(a)) for a, b in zip(want, got))


@pytest.mark.slow  # runs `powertrain demo` as the README tells a newcomer to (a minute or two)
def test_the_demo_output_shown_in_the_docs_is_what_the_demo_prints(tmp_path, capsys):
    from powertrain.cli import main

    assert main(["demo", "-o", str(tmp_path / "demo")]) == 0
    printed = capsys.readouterr().out.splitlines()
    start = printed.index("the pick under 30 W:")
    answer = printed[start : start + 4]
    for page in (ROOT / "README.md", DOCS / "newcomer.md"):
        shown = _demo_lines(page)
        assert len(shown) == len(answer), page.name
        for s, p in zip(shown, answer):
            assert _same_line(s, p), f"{page.name} shows\n{s}\nthe demo printed\n{p}"


def _numpy_sections_missing(obj: object) -> list[str]:
    """The numpy-style sections the API site renders that ``obj``'s docstring lacks:
    Parameters where it takes any, Returns for a function."""
    import inspect

    doc = inspect.getdoc(obj) or ""
    target = obj.__init__ if inspect.isclass(obj) else obj  # type: ignore[misc]
    try:
        params = [p for p in inspect.signature(target).parameters if p not in ("self", "cls")]
    except (TypeError, ValueError):
        params = []
    if target is object.__init__:  # an abstract base: nothing to construct it with
        params = []
    missing = []
    if params and "Parameters\n----------" not in doc:
        missing.append("Parameters")
    if not inspect.isclass(obj) and "Returns\n-------" not in doc:
        missing.append("Returns")
    return missing


def test_public_names_have_parameters_and_returns_sections():
    import inspect

    missing = {}
    for name in pt.__all__:
        obj = getattr(pt, name)
        if isinstance(obj, ModuleType):  # pt.report: the callable package
            obj = obj.report
        if name == "__version__" or (inspect.isclass(obj) and issubclass(obj, Exception)):
            continue  # an error class is its message
        gaps = _numpy_sections_missing(obj)
        if gaps:
            missing[name] = gaps
    for method in ("fit", "transfer", "predict", "save", "load", "from_pretrained"):
        gaps = _numpy_sections_missing(getattr(pt.Predictor, method))
        if gaps:
            missing[f"Predictor.{method}"] = gaps
    assert missing == {}


def test_the_api_pages_entries_have_parameters_and_returns_sections():
    """Every function and class a ``:::`` entry of docs/api/ renders (a module entry:
    each name of its ``__all__``)."""
    import inspect

    missing = {}
    for page in (DOCS / "api").glob("*.md"):
        for path in re.findall(r"^::: ([\w.]+)", page.read_text(), re.M):
            obj = _resolve(path)
            members = (
                [(f"{path}.{n}", getattr(obj, n)) for n in getattr(obj, "__all__", [])]
                if isinstance(obj, ModuleType)
                else [(path, obj)]
            )
            for name, member in members:
                if not callable(member) or isinstance(member, ModuleType):
                    continue
                if inspect.isclass(member) and issubclass(member, Exception):
                    continue  # an error class is its message
                gaps = _numpy_sections_missing(member)
                if gaps:
                    missing[name] = gaps
    assert missing == {}


def _pyproject() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_a_fresh_make_test_can_build_the_site_strictly():
    """`make test` installs the dev extra and runs every test: without the docs extra's
    packages in dev, test_the_site_builds_strictly skipped on every fresh set-up."""
    extras = _pyproject()["project"]["optional-dependencies"]

    def names(requirements: list[str]) -> set[str]:
        return {re.split(r"[\s<>=!~\[;]", r, maxsplit=1)[0].lower() for r in requirements}

    assert {"mkdocs", "mkdocstrings"} <= names(extras["docs"])
    assert names(extras["docs"]) <= names(extras["dev"])
    make = (ROOT / "Makefile").read_text()
    assert 'pip install -q -e ".[dev]"' in make
    assert re.search(r"^test: setup\n\t\$\(PYTEST\)\n", make, re.M)  # no marker left out


def test_the_mutation_run_takes_the_tests_that_judge_selects_labels():
    """select's labels ("measured", "predicted with a margin", "predicted") are mutated
    with powertrain/decisions/selection.py; the test files that assert them must be in
    the mutation run's selection, or their mutants survive for want of a test."""
    config = _pyproject()["tool"]["mutmut"]
    assert "powertrain/decisions/selection.py" in config["only_mutate"]
    selection = set(config["pytest_add_cli_args_test_selection"])
    judging = {
        f"tests/{p.name}"
        for p in (ROOT / "tests").glob("test_*.py")
        if 'attrs["how"]' in p.read_text() and p.name != Path(__file__).name
    }
    assert {"tests/test_first_contact.py", "tests/test_measured_rule.py"} <= judging
    assert judging <= selection, f"not in [tool.mutmut]: {sorted(judging - selection)}"
    assert all((ROOT / t).is_file() for t in selection)
