"""Every notebook in notebooks/ runs top to bottom with small settings and shows its plots.

Each is executed in a fresh kernel with ``POWERTRAIN_QUICK=1`` (the notebooks' own quick
mode) and the matplotlib backend the user would get in Jupyter (inline): a cell that
plots but produced no ``image/png`` output fails, as happens when something switches
the backend to Agg behind the user's back.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.slow

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
REQUIRED = {"quickstart", "transfer_accuracy", "pareto_and_caps", "batch_size", "real_gpus"}
#: a cell that draws: pyplot, a plotting method or helper, imshow, a Figure
PLOTS = re.compile(r"\bplt\.|\.plot\(|\bplot_\w+\(|imshow\(|\bFigure\b|\.scatter\(|\.hist\(")


def plotting_cells_without_image(nb) -> list[int]:
    """Indices of code cells that draw but whose outputs hold no PNG."""
    missing = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or not PLOTS.search(cell.source):
            continue
        if not any("image/png" in out.get("data", {}) for out in cell.get("outputs", [])):
            missing.append(i)
    return missing


def test_the_notebooks_are_there():
    names = {p.stem for p in NOTEBOOKS}
    assert NOTEBOOKS, f"no notebooks in {NOTEBOOK_DIR}"
    assert REQUIRED <= names, f"missing notebooks: {sorted(REQUIRED - names)}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_and_shows_its_plots(path, tmp_path, monkeypatch):
    monkeypatch.setenv("POWERTRAIN_QUICK", "1")
    monkeypatch.delenv("MPLBACKEND", raising=False)  # what a Jupyter user has
    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    assert os.environ["POWERTRAIN_QUICK"] == "1"
    missing = plotting_cells_without_image(nb)
    assert not missing, f"{path.name}: plotting cells {missing} produced no image/png output"


def test_the_check_catches_a_plot_that_does_not_show(tmp_path):
    """A cell that plots after the backend was switched to Agg shows nothing: caught."""
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("import matplotlib\nmatplotlib.use('Agg')"),
            nbformat.v4.new_code_cell("import matplotlib.pyplot as plt\nplt.plot([1, 2])"),
        ]
    )
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    assert plotting_cells_without_image(nb) == [1]
