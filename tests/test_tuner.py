"""pt.Tuner: the decision made with a job's own training minibatches -- on the twin (the
real step trains, the twin gives knobs, time and power), on the fake NVML, and with no
control of the board at all."""

from __future__ import annotations

import logging
import os
import signal
import time
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from test_profiling_nvml import START_MW, FakeNvml

import powertrain as pt
from powertrain.backends import NvmlBackend, TwinBackend
from powertrain.decisions.samplers.contest import contest
from powertrain.errors import DataError
from powertrain.predictor import PowerTrainMLP, Predictor

# slow tests are marked one by one: the rest are part of `make test-fast`

#: a quick transfer: these tests check the loop's contract, not the model's accuracy
QUICK = {"transfer_epochs": 30, "transfer_cv_folds": 2}


@pytest.fixture(scope="module")
def reference():
    return pt.Predictor.from_pretrained("orin-agx/resnet18")


class Job:
    """A tiny real training job: a linear model learning y = 2x."""

    def __init__(self, seed: int = 0):
        torch.manual_seed(seed)
        self.model = torch.nn.Linear(4, 1)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05)
        self.steps = 0
        self.sizes: list[int] = []

    def step(self, batch: torch.Tensor | None = None) -> float:
        x = torch.randn(16, 4) if batch is None else batch
        loss = (self.model(x) - 2 * x.sum(1, keepdim=True)).pow(2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.steps += 1
        self.sizes.append(len(x))
        return float(loss.detach())


class Recording(TwinBackend):
    """The twin board, recording every configuration set and whether it was restored."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.configured: list[dict] = []
        self.closed = self.errored = 0

    def configure(self, config):
        self.configured.append(dict(config))
        super().configure(config)

    def on_error(self):
        self.errored += 1

    def close(self):
        self.closed += 1


def twin_board(workload: str = "mobilenetv3") -> Recording:
    return Recording(pt.Twin("orin-agx", workload, seed=0))


@pytest.mark.slow  # a few hundred steps and several transfers
def test_a_plain_loop_trains_decides_and_restores(reference, caplog):
    board, job = twin_board(), Job()
    tuner = pt.Tuner(board, reference, 30.0, budget=8, minibatches=5, transfer_options=QUICK)
    first = None
    with caplog.at_level(logging.INFO, logger="powertrain.decisions.tuner"):
        for _ in range(400):
            with tuner.step():
                loss = job.step()
            first = loss if first is None else first
        summary = tuner.close()
    assert job.steps == 400 and loss < first  # every step trained
    assert summary.active and tuner.settled
    assert summary.power_w <= 30.0  # the pick is measured under the cap
    assert board.configured[-1] == {k: summary.config[k] for k in board.config_columns}
    assert 5 <= summary.n_measured <= 8
    assert 0 < summary.minibatches_to_pick < 400 and summary.explore_min > 0
    assert board.closed == 1  # restored at the end
    text = caplog.text
    assert "decided under 30 W" in text and "configurations measured in" in text
    # every measured configuration is the fastest measured one or slower
    rows = tuner.measurements()
    assert summary.time_ms == rows[rows.power_w <= 30].time_ms.min()


def test_the_first_minibatch_after_each_change_trains_but_is_not_timed(reference):
    board, job = twin_board(), Job()
    tuner = pt.Tuner(board, reference, 30.0, budget=6, minibatches=5, transfer_options=QUICK)
    while not tuner.settled:
        with tuner.step():
            job.step()
    rows = tuner.measurements()
    # exploring steps: per configuration one untimed minibatch, those before power
    # settled, and the timed ones
    assert job.steps >= (rows.n_minibatches + 1).sum()
    assert (rows.n_minibatches >= 5).all()
    # one change per measured configuration, plus one to the pick unless it was the last
    assert len(board.configured) in (len(rows), len(rows) + 1)
    tuner.close()  # the board back and the signal handlers gone for the next test
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


@pytest.mark.slow  # a few hundred steps and several transfers
def test_a_new_cap_is_decided_again_and_applied(reference, caplog):
    board, job = twin_board(), Job()
    schedule = pt.CapSchedule(steps=[(0, 30.0), (60.0, 20.0)])
    tuner = pt.Tuner(board, reference, schedule, budget=8, minibatches=5, transfer_options=QUICK)
    with caplog.at_level(logging.INFO, logger="powertrain.decisions.tuner"):
        while tuner.elapsed_s < 120 or not tuner.settled:
            with tuner.step():
                job.step()
    s = tuner.close()
    caps = [d["power_cap_w"] for d in s.decisions]
    assert caps == [30.0, 20.0]
    assert s.decisions[-1]["power_w"] <= 20.0 < s.decisions[0]["power_w"] + 10
    assert board.configured[-1]["gpu_mhz"] == s.config["gpu_mhz"]
    assert "power cap now 20 W" in caplog.text


def test_an_error_in_the_step_restores_the_board(reference):
    board, job = twin_board(), Job()
    tuner = pt.Tuner(board, reference, 30.0, budget=6, minibatches=5, transfer_options=QUICK)
    with pytest.raises(ZeroDivisionError):
        for i in range(50):
            with tuner.step():
                job.step()
                if i == 20:
                    raise ZeroDivisionError
    assert board.errored == 1 and board.closed == 1
    assert tuner.phase == "closed"
    n = len(board.configured)
    tuner.on_step_begin()  # a closed tuner does nothing
    tuner.on_step_end()
    assert len(board.configured) == n


@pytest.mark.slow  # a few hundred steps and several transfers
def test_the_tuner_chooses_the_batch_size_with_a_new_dataloader(reference):
    board, job = twin_board(), Job()
    tuner = pt.Tuner(
        board,
        reference,
        30.0,
        batch_size=[8, 16, 32],
        budget=8,
        minibatches=5,
        transfer_options=QUICK,
    )

    def make_loader(b):
        return (torch.randn(b, 4) for _ in range(10_000))

    for batch in tuner.batches(make_loader, steps=400):
        with tuner.step():
            assert len(batch) == tuner.config["batch_size"]
            job.step(batch)
    s = tuner.close()
    assert len(set(job.sizes)) > 1 and job.steps == 400
    assert job.sizes[-1] == s.config["batch_size"]


# ------------------------------------------------------------------------- NVML --
def gpu_reference() -> Predictor:
    """A small reference over a GPU's knobs: time falls and power rises with the limit."""
    lim = np.repeat(np.arange(100.0, 701.0, 50.0), 2)
    b = np.tile([16, 32], len(lim) // 2)
    table = pd.DataFrame(
        {
            "power_limit_w": lim,
            "batch_size": b,
            "time_ms": 2e3 * b / 16 / np.sqrt(lim),
            "power_w": lim / 2,
        }
    )
    est = PowerTrainMLP(hidden_layer_sizes=(16, 8), epochs=5)
    return Predictor(
        est, inputs=("power_limit_w", "batch_size"), targets=("time_ms", "power_w"), progress=False
    ).fit(table)


def nvml_board(fake: FakeNvml, allow: bool = True) -> NvmlBackend:
    return NvmlBackend(
        lambda batch_size: None,
        nvml=fake,
        allow_power_limit=allow,
        handle_signals=False,
        sample_period_s=0.01,
    )


def slow_step(job: Job) -> None:
    job.step()
    time.sleep(0.002)


def gpu_tuner(fake) -> pt.Tuner:
    """A tuner of the fake GPU's power limit under 200 W (a small budget)."""
    return pt.Tuner(
        nvml_board(fake), gpu_reference(), 200.0, batch_size=16, budget=6, minibatches=5,
        transfer_options=QUICK,
    )  # fmt: skip


def test_on_the_fake_nvml_it_sets_limits_and_puts_the_first_back():
    fake = FakeNvml(setters=True)
    job = Job()
    tuner = gpu_tuner(fake)
    for _ in range(3000):
        with tuner.step():
            slow_step(job)
        if tuner.settled:
            break
    s = tuner.close()
    assert tuner.settled and s.config["power_limit_w"] <= 400  # draws limit / 2 <= 200 W
    assert len(fake.sets) >= s.n_measured >= 5
    assert fake.limit_mw == START_MW and fake.sets[-1] == START_MW  # the limit found at start
    assert not fake.up  # NVML shut down


@pytest.mark.system
def test_a_stop_signal_mid_step_restores_the_power_limit():
    fake = FakeNvml(setters=True)
    tuner = gpu_tuner(fake)
    job = Job()
    with pytest.raises(SystemExit) as stop:
        for i in range(100):
            with tuner.step():
                slow_step(job)
                if i == 30:
                    os.kill(os.getpid(), signal.SIGTERM)
    assert stop.value.code == 128 + signal.SIGTERM
    assert fake.limit_mw == START_MW and len(fake.sets) >= 2
    assert signal.getsignal(signal.SIGTERM) is not None  # handler given back


def test_a_board_it_cannot_control_warns_once_and_changes_nothing():
    fake = FakeNvml(setters=False)  # any NVML setter call fails the test
    job = Job()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        tuner = pt.Tuner(nvml_board(fake, allow=False), gpu_reference(), 200.0, batch_size=16)
        for _ in range(50):
            with tuner.step():
                job.step()
        s = tuner.close()
    mine = [w for w in seen if "Tuner has no effect" in str(w.message)]
    assert len(mine) == 1 and "cannot set power_limit_w" in str(mine[0].message)
    assert job.steps == 50 and not s.active and s.n_measured == 0
    assert not any(c.startswith("nvmlDeviceSet") for c in fake.calls)


def test_a_few_candidates_are_all_measured_then_the_best_under_the_cap_runs(reference):
    board, job = twin_board(), Job()
    grid = board.device.profiling_grid()
    few = grid[grid.gpu_mhz.isin([318.75, 624.75, 930.75])].groupby("gpu_mhz").head(1)
    tuner = pt.Tuner(board, reference, 30.0, candidates=few.assign(batch_size=16), minibatches=5)
    while not tuner.settled:
        with tuner.step():
            job.step()
    rows = tuner.measurements()
    assert len(rows) == 3 and tuner.summary().stop_reason == "exhausted"
    under = rows[rows.power_w <= 30]
    best = under.loc[under.time_ms.idxmin(), "gpu_mhz"]
    assert tuner.summary().config["gpu_mhz"] == best
    with tuner.step():  # the pick runs from the next minibatch on
        job.step()
    assert tuner.config["gpu_mhz"] == best == board.configured[-1]["gpu_mhz"]
    tuner.close()


def test_a_reference_of_epoch_times_is_refused():
    ref = gpu_reference()
    ref.targets_ = ("epoch_s", "power_w")  # as a reference fitted on a per-epoch trace
    with pytest.raises(DataError, match="predicts epoch_s; the tuner times minibatches"):
        pt.Tuner(twin_board(), ref, 30.0)


def test_no_board_at_all_warns_once_and_the_loop_runs(reference):
    job = Job()
    with pytest.warns(RuntimeWarning, match="Tuner has no effect: cannot profile a NoneType"):
        tuner = pt.Tuner(None, reference, 30.0, batch_size=16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning
        for _ in range(5):
            with tuner.step():
                job.step()
        assert tuner.batch_size == 16 and not tuner.close().active
    assert job.steps == 5


# ---------------------------------------------------------------------- scoring --
def test_the_improvement_favours_a_likely_faster_rival_within_the_cap():
    cost = np.array([100.0, 80.0, 80.0, 200.0])
    rel = np.full(4, 0.1)
    power = np.array([20.0, 20.0, 40.0, 10.0])
    sd_p = np.full(4, 1.0)
    measured = np.array([True, False, False, False])
    c = contest(cost, rel * cost, power, sd_p, measured, np.array([30.0]))
    inc, gain = c.incumbent[0], c.improvement[0]
    assert inc == 0 and gain[0] == 0
    assert gain[1] > 0.1 and gain[2] < 1e-6 and gain[3] < 1e-6


def test_bad_arguments_are_named(reference):
    with pytest.raises(DataError, match="budget must be an integer >= 1"):
        pt.Tuner(twin_board(), reference, 30.0, budget=0)
    with pytest.raises(DataError, match="power_cap_w must be positive watts"):
        pt.Tuner(twin_board(), reference, -3.0)
    with pytest.raises(DataError, match="start must be an integer >= 5"):
        pt.Tuner(twin_board(), reference, 30.0, start=2)


def test_settled_means_the_pick_runs_not_only_that_it_is_decided(reference):
    """A pick decided at a step's end runs from the next step on: until then the tuner is
    not settled (a caller counting steps at the pick would count one at the last probe)."""
    board, job = twin_board(), Job()
    grid = board.device.profiling_grid()
    few = grid[grid.gpu_mhz.isin([318.75, 624.75, 930.75])].groupby("gpu_mhz").head(1)
    tuner = pt.Tuner(board, reference, 30.0, candidates=few.assign(batch_size=16), minibatches=5)
    while tuner.phase != "settled":
        with tuner.step():
            job.step()
    pick = tuner.summary().config["gpu_mhz"]
    assert tuner.config["gpu_mhz"] != pick  # the last probe was not the pick here
    assert not tuner.settled
    with tuner.step():
        job.step()
    assert tuner.settled and tuner.config["gpu_mhz"] == pick
    tuner.close()
