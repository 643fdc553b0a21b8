"""pt.Tuner(background=True): the decision (transfers, scoring) runs off the training
thread while training goes on in the current configuration; the result is the same kind
of pick, and the board is restored as before."""

from __future__ import annotations

import threading
import time

import pytest
from test_integrations import Logged, decision_rows, lightning_run
from test_tuner import QUICK, Job, twin_board

import powertrain as pt


@pytest.fixture()
def reference():
    return pt.Predictor.from_pretrained("orin-agx/resnet18")


def spy_on_transfers(reference, monkeypatch) -> list[bool]:
    """Whether each transfer ran on the main (training) thread."""
    on_main: list[bool] = []
    transfer = reference.transfer

    def recorded(*a, **kw):
        on_main.append(threading.current_thread() is threading.main_thread())
        return transfer(*a, **kw)

    monkeypatch.setattr(reference, "transfer", recorded)
    return on_main


def test_a_background_tuner_decides_off_the_training_thread(reference, monkeypatch):
    on_main = spy_on_transfers(reference, monkeypatch)
    board, job = twin_board(), Job()
    tuner = pt.Tuner(
        board, reference, 30.0, budget=8, minibatches=5, transfer_options=QUICK, background=True
    )
    with tuner:
        for _ in range(3000):
            with tuner.step():
                job.step()
                time.sleep(0.001)  # a step takes time: the decision overlaps a few
            if tuner.settled:
                break
    s = tuner.summary()
    assert s.active and s.config is not None and s.power_w <= 30.0
    assert on_main and not any(on_main)  # every transfer ran beside training
    assert tuner.steps_while_deciding > 0  # and training went on meanwhile
    assert 5 <= s.n_measured <= 8 and board.closed == 1
    rows = tuner.measurements()
    assert (rows.n_minibatches >= 5).all()  # the steps run while deciding were not timed


def test_the_callback_passes_background_on(tmp_path, reference, monkeypatch):
    from powertrain.integrations.lightning import PowerTrainCallback

    on_main = spy_on_transfers(reference, monkeypatch)
    seen, board = Logged(), twin_board()
    cb = PowerTrainCallback(
        board, reference, 30.0, budget=8, minibatches=5, transfer_options=QUICK, background=True
    )
    lightning_run(tmp_path, cb, steps=1500, seen=seen)
    assert cb.summary.config is not None and not any(on_main)
    assert len(decision_rows(seen.calls)) == 1 and board.closed == 1
