"""The decisions benchmark scores every budget from one run: the fastest of the first k
measurements under the cap, against the truth."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import decisions as bench  # noqa: E402

KEYS = bench.KEYS


def _rows(times, powers):
    n = len(times)
    return pd.DataFrame(
        {"cores": np.arange(n) + 1, "cpu_mhz": 1.0, "gpu_mhz": 1.0, "mem_mhz": 1.0,
         "batch_size": 16, "time_ms": times, "power_w": powers}
    )  # fmt: skip


def test_prefix_scores_use_only_the_first_k_measurements():
    truth = _rows([100.0, 80.0, 60.0, 50.0], [10.0, 20.0, 30.0, 40.0])
    # measured in this order: slow, the optimum under 30 W, then a faster one over the cap
    measured = truth.iloc[[0, 2, 3]].assign(round=[0, 1, 2])
    rows = bench.prefix_scores(measured, truth, np.array([30.0]), budgets=(1, 2, 3))
    by_k = {r["budget"]: r for r in rows}
    assert by_k[1]["penalty_pct"] == 100 * (100 / 60 - 1)  # only the slow one yet
    assert by_k[2]["penalty_pct"] == 0 and by_k[3]["penalty_pct"] == 0
    assert all(r["excess_w"] <= 0 for r in rows)


def test_a_budget_with_nothing_under_the_cap_is_no_pick():
    truth = _rows([100.0, 50.0], [10.0, 40.0])
    measured = truth.iloc[[1]].assign(round=[0])
    (row,) = bench.prefix_scores(measured, truth, np.array([20.0]), budgets=(1,))
    assert row["no_pick"] and np.isnan(row["penalty_pct"])


def test_the_penalty_is_against_the_optimum_the_board_records_under_the_cap():
    truth = _rows([100.0, 60.0, 70.0], [10.0, 29.9, 25.0])
    # the board's record puts the true optimum under 30 W (29.9 W expected) over the cap
    board = truth.assign(power_w=[10.0, 30.1, 25.0])
    measured = board.assign(round=[0, 1, 2])
    (row,) = bench.prefix_scores(measured, truth, np.array([30.0]), budgets=(3,), board=board)
    assert row["penalty_pct"] == 0  # the fastest whose recorded power fits: 70 ms
    assert row["penalty_expected_pct"] == 100 * (70 / 60 - 1)
    assert row["excess_w"] == 25.0 - 30.0  # on the expected power


def test_an_optuna_peer_measures_distinct_configurations_in_order():
    """The peer asks Optuna for configurations, measures each once, and stops at the
    budget; a repeat is answered from its record (not measured or charged again)."""
    import pytest

    pytest.importorskip("optuna")
    from decision_peers import peer_run

    values = {"a": [1.0, 2.0, 3.0, 4.0], "b": [10.0, 20.0, 30.0]}
    calls = []

    def measure(configs):
        calls.append(len(configs))
        c = configs.iloc[0]
        return configs.assign(time_ms=100.0 / (c.a * c.b), power_w=c.a * c.b)

    m = peer_run(
        measure, ["a", "b"], values, "optuna-tpe", 0, budget=6, cap=40.0, fixed={"batch_size": 8}
    )
    assert len(m) == 6 == len(calls) and m["round"].tolist() == list(range(6))
    assert not m.duplicated(["a", "b"]).any() and (m.batch_size == 8).all()


def test_the_held_out_run_takes_a_catalog_device_for_the_cross_device_cases():
    """Section 8 runs section 7's code on the tuning set's catalog devices: the rows name
    the device and workload asked for, and the caps span that device's own range."""
    rows = bench.held_out(
        1, budget=10, methods={"table": bench.HELD_OUT_RUNS["table"]}, samplers=(),
        device="orin-nano", workload="resnet18-cifar",
    )  # fmt: skip
    assert set(rows.device) == {"orin-nano"} and set(rows.workload) == {"resnet18-cifar"}
    assert rows.cap_w.min() > 4 and rows.cap_w.max() < 8  # Orin Nano's twin: 4-8 W
    assert (rows[rows.budget == 10].n_measured <= 10).all()
