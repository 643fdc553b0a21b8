"""benchmarks/results/ stays small and complete: summaries committed, per-draw records in
an ignored detail/ folder, and ``make bench`` regenerating every file the docs cite."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT / "benchmarks"))
import results_file  # noqa: E402
from results_page import DETAIL_ROWS, compact, section_of  # noqa: E402  (tools/, via it)


def _committed() -> list[Path]:
    return [p for p in RESULTS.iterdir() if p.is_file()]


def test_no_results_file_over_1_mb_and_3_mb_in_all():
    sizes = {p.name: p.stat().st_size for p in _committed()}
    assert {n: s for n, s in sizes.items() if s > 1_000_000} == {}
    assert sum(sizes.values()) <= 3_000_000


def test_make_bench_writes_every_results_file():
    """Each JSON, text and image file in the folder is written by a line of `make bench`."""
    make = (ROOT / "Makefile").read_text()
    bench = make.split("\nbench:", 1)[1].split("\n\n", 1)[0]
    written = set(re.findall(r"\$\(RESULTS\)/([\w.]+)", bench))
    by_out = {"accuracy.csv", "accuracy_matrix.csv", "accuracy_targets.csv", "accuracy.png"}
    by_out |= {"speed.csv", "real_gpu.txt", "tuner_real_gpu.txt"}  # --out; the two .txt
    missing = [p.name for p in _committed() if p.name not in written | by_out]
    assert missing == []


def _decisions(n: int) -> dict:
    rng = np.random.default_rng(0)
    rows = [
        dict(gpu="a40", workload=["a", "b"][i % 2], budget=[10, 20][i % 3 % 2], cap_w=20.0 + i % 5,
             draw=i % 4, n_measured=int(rng.integers(5, 20)),
             penalty_pct=float(rng.exponential(2)), excess_w=float(rng.normal(-1, 1.5)))
        for i in range(n)
    ]  # fmt: skip
    return {"draws": 4, "shared": rows, "real": rows[:10]}


def test_a_compacted_file_shows_the_same_page_and_keeps_what_is_asked():
    data = _decisions(DETAIL_ROWS + 200)
    small = compact("decisions", data, keep=("real",))
    assert small["shared"]["detail_rows"] == DETAIL_ROWS + 200
    assert small["real"] == data["real"]
    assert len(json.dumps(small)) < len(json.dumps(data)) / 20
    shown = section_of("decisions", json.loads(json.dumps(small)))
    assert shown == section_of("decisions", data) and "| a | 10 |" in shown
    few = _decisions(50)  # a short list stays as it is
    assert compact("decisions", few) == few


def test_a_benchmark_writes_the_summary_and_reads_its_records_back(tmp_path):
    data = _decisions(DETAIL_ROWS + 1)
    path = results_file.write(tmp_path / "decisions.json", data)
    assert results_file.detail_path(path) == tmp_path / "detail" / "decisions.json"
    assert "detail_rows" in json.loads(path.read_text())["shared"]
    assert results_file.load(path) == json.loads(json.dumps(data))
    results_file.detail_path(path).unlink()
    with pytest.raises(SystemExit, match="detail/decisions.json"):
        results_file.load(path)


def _target(text: str, label: str) -> float:
    """The measured figure of one line of a benchmark's printed targets."""
    line = next(x for x in text.splitlines() if x.strip().startswith(label))
    return float(line[len(line) - len(line.lstrip()) + len(label) :].split()[0])


def test_the_readme_figures_come_from_the_results_files():
    readme = (ROOT / "README.md").read_text()
    margin = json.loads((RESULTS / "select_margin.json").read_text())
    held = {r["margin_sigma"]: r for r in margin["table"] if r["split"] == "held-out"}
    chosen = margin["chosen_margin_sigma"]
    assert f"{held[chosen]['over_cap_1w_pct']:.2f} % of" in readme  # with the margin
    assert f"against {held[0.0]['over_cap_1w_pct']:.1f} % without" in readme
    assert f"The default margin is\n   {chosen:g}σ" in readme
    table = (RESULTS / "decisions_table.txt").read_text()
    median = _target(table, "shared budget 50 (Orin AGX 17-50 W) median penalty %")
    q3 = _target(table, "shared budget 50 (Orin AGX) Q3 penalty %")
    held_out = _target(table, "held-out shared budget 50 median penalty %")
    assert f"median {median:.2f} % slower" in readme and f"(Q3 {q3:.2f} %)" in readme
    assert f"{held_out:.2f} %" in readme
