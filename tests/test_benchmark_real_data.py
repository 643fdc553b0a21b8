"""The real-data benchmark end to end on its quick setting: a saved run reprints the same
tables, and the board-in-the-loop rows come from a decisions file when there is one."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import real_data as rd  # noqa: E402

pytestmark = pytest.mark.slow


def test_a_saved_run_reprints_its_tables(tmp_path, capsys, monkeypatch):
    decisions = tmp_path / "decisions.json"
    real = [  # one pick 3 W over its cap, one at the optimum, one refused
        dict(gpu="a40", workload="w", draw=0, cap_w=110.0, n_measured=10, penalty_pct=0.0,
             excess_w=3.0),
        dict(gpu="a40", workload="w", draw=1, cap_w=110.0, n_measured=7, penalty_pct=2.0,
             excess_w=-5.0),
        dict(gpu="v100", workload="w", draw=0, cap_w=90.0, n_measured=4, error="refused"),
    ]  # fmt: skip
    decisions.write_text(json.dumps({"real": real}))
    monkeypatch.setattr(rd, "DECISIONS_JSON", decisions)
    saved = tmp_path / "run.json"
    rd.main(["--quick", "--json", str(saved)])
    first = capsys.readouterr().out
    rd.main(["--show", str(saved)])
    again = capsys.readouterr().out
    assert "pooled time MAPE" in first and "all GPUs and workloads" in first
    body = first.split("\n", 1)[1]  # the live run names its corpora first
    assert again.strip() == body.strip()
    board = again.split("Board in the loop")[1].splitlines()
    row = next(line.split() for line in board if line.startswith("all"))
    # the refused decision is left out: 2 picks, half over cap + 1 W, worst 3 W
    assert [float(v) for v in row[1:5]] == [1.0, 2.0, 50.0, 3.0]


def test_board_rows_of_other_data_are_not_printed_as_this_datas(tmp_path, capsys):
    decisions = tmp_path / "decisions.json"
    row = dict(gpu="a40", workload="w", draw=0, cap_w=110.0, n_measured=3, penalty_pct=0.0,
               excess_w=-1.0)  # fmt: skip
    decisions.write_text(json.dumps({"real": [row]}))  # no key: run on datasets/real
    rd.board_in_the_loop(decisions, tmp_path / "mine")
    out = capsys.readouterr().out
    assert "are for datasets/real, not" in out and "Board in the loop" not in out
    assert "decisions.py --sections real --data" in out
    rd.board_in_the_loop(decisions, rd.real_folder())
    assert "Board in the loop" in capsys.readouterr().out
    decisions.write_text(json.dumps({"real": [row], "real_data": str(tmp_path / "mine")}))
    rd.board_in_the_loop(decisions, tmp_path / "mine")
    assert "Board in the loop" in capsys.readouterr().out
    rd.board_in_the_loop(decisions, None)  # the package's data: not these rows
    assert "Board in the loop" not in capsys.readouterr().out
