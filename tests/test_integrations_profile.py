"""What one run measured, the next reuses: a callback used for a second ``fit`` or
``train()`` starts from its first run's measurements, and a saved profile (the
profiling store's format) serves the next run and ``pt.decide``; either way nothing new
is measured at the same cap and the decision is logged again."""

from __future__ import annotations

import logging

import pandas as pd
import pytest
from test_integrations import (
    Logged,
    board,
    cb_hf,
    cb_lightning,
    decision_rows,
    hf_run,
    lightning_run,
    reporter,
)
from test_tuner import QUICK

import powertrain as pt
from powertrain.errors import DataError


@pytest.fixture(scope="module")
def reference():
    return pt.Predictor.from_pretrained("orin-agx/resnet18")


def test_a_reused_lightning_callback_starts_from_what_it_measured(tmp_path, reference):
    cb, seen = cb_lightning(board(), reference), Logged()
    lightning_run(tmp_path / "1", cb)
    first = cb.summary
    assert first.n_measured >= 5
    lightning_run(tmp_path / "2", cb, seen=seen)
    again = cb.summary
    assert again.n_measured == 0 and again.config == first.config  # nothing measured anew
    assert len(decision_rows(seen.calls)) == 1  # and its decision logged again


def test_a_saved_profile_is_reused_by_the_next_run_and_by_decide(tmp_path, reference, caplog):
    from powertrain.profiling.store import MEASURED_COLUMNS

    path = tmp_path / "profile.csv"
    cb = cb_lightning(board(), reference, profile=path)
    lightning_run(tmp_path / "1", cb)
    saved = pd.read_csv(path)
    assert len(saved) == cb.summary.n_measured
    assert {"device", "workload", "batch_size", *MEASURED_COLUMNS} <= set(saved.columns)
    assert (saved.power_cap_w == 30.0).all() and (saved.workload == "mobilenetv3").all()
    b = board()  # a new process: a new callback, a new board
    cb2 = cb_lightning(b, reference, profile=path)
    with caplog.at_level(logging.INFO):
        lightning_run(tmp_path / "2", cb2)
    assert cb2.summary.n_measured == 0 and cb2.summary.config == cb.summary.config
    assert len(b.configured) == 1  # straight to the pick
    assert caplog.text.count("decided under 30 W") == 2
    assert len(pd.read_csv(path)) == len(saved)  # nothing new to save
    d = pt.decide(b, reference, 30.0, budget=1, samples=saved, transfer_options=QUICK)
    assert (d.measurements["round"] < 0).sum() == len(saved) and d.n_measured <= 1


def test_a_profile_of_another_workload_is_refused(tmp_path, reference):
    path = tmp_path / "profile.csv"
    pd.DataFrame({"device": ["orin-agx"], "workload": ["bert-base"]}).to_csv(path, index=False)
    with pytest.raises(DataError, match="saved for workload bert-base, not 'mobilenetv3'"):
        lightning_run(tmp_path, cb_lightning(board(), reference, profile=path))


def test_a_reused_transformers_callback_logs_its_decision_again(tmp_path, monkeypatch, reference):
    rep, cb = reporter(), cb_hf(board(), reference)
    hf_run(tmp_path / "1", monkeypatch, cb, also=[rep])
    first = cb.summary
    hf_run(tmp_path / "2", monkeypatch, cb, also=[rep])
    assert cb.summary.n_measured == 0 and cb.summary.config == first.config
    assert sum("powertrain/power_w" in h for h in rep.logs) == 2
