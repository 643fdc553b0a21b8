"""Tests written for the mutants the mutation check found alive (docs/safety.md; the
runs and their survivors: docs/method-notes.md).

Why: in these modules one flipped comparison puts a pick over the cap or hides a bad
input. Each test names the mutant it kills (mutmut's name, module.x_function__mutmut_N),
so a later run can tell a new survivor from an old one.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import powertrain as pt
from powertrain.errors import DataError


def _est(power, time, **more) -> pd.DataFrame:
    return pd.DataFrame({"power_w": power, "time_ms": time, **more})


def test_power_exactly_at_the_cap_fits():
    """fastest_under_80 / _89 (``<=`` -> ``<``): a row drawing exactly the cap fits."""
    est = _est([30.0, 29.0], [1.0, 2.0])
    assert pt.fastest_under(est, 30).time_ms == 1.0
    assert pt.fastest_under(est, 30, margin_w=1.0).time_ms == 2.0  # 29 + 1 = 30 fits too
    std = est.assign(power_w_std=[0.0, 0.5])
    assert pt.fastest_under(std, 30, k_sigma=2.0).time_ms == 1.0  # a measured row: 30 + 0


def test_a_negative_margin_or_k_sigma_is_named():
    """fastest_under_18 / _25 (the argument's name in the error) and _number_21."""
    est = _est([10.0], [1.0])
    with pytest.raises(DataError, match=r"^margin_w must be a finite number >= 0"):
        pt.fastest_under(est, 30, margin_w=-1)
    with pytest.raises(DataError, match=r"^k_sigma must be a finite number >= 0"):
        pt.fastest_under(est, 30, k_sigma=-1)
    with pytest.raises(DataError, match=r"^power_cap_w must be a finite number > 0"):
        pt.fastest_under(est, 0)


def test_a_non_number_names_its_type():
    """_number_5: the type of the value given, not of None."""
    with pytest.raises(DataError, match=r"power_cap_w must be a number, got '30' \(str\)"):
        pt.fastest_under(_est([10.0], [1.0]), "30")


def test_the_default_time_column_is_the_tables_own():
    """fastest_under_29 / pareto_front_3: a per-epoch table is ranked by its epoch_s."""
    est = pd.DataFrame({"power_w": [10.0, 12.0], "epoch_s": [5.0, 3.0]})
    assert pt.fastest_under(est, 20).epoch_s == 3.0
    assert list(pt.pareto_front(est).epoch_s) == [5.0, 3.0]


def test_any_k_sigma_above_zero_needs_the_spread():
    """fastest_under_39 (``k_sigma > 0`` -> ``> 1``): 0.5 sigma needs power_w_std too."""
    with pytest.raises(DataError, match="k_sigma > 0 needs a 'power_w_std' column"):
        pt.fastest_under(_est([10.0], [1.0]), 30, k_sigma=0.5)


def test_bad_values_are_named_with_the_function_and_refused_at_zero():
    """fastest_under_45.._52 and pareto_front_7.._14: the source in the error, and power
    or time of 0 refused (``positive``)."""
    for fn in (pt.fastest_under, pt.pareto_front):
        args = (30,) if fn is pt.fastest_under else ()
        with pytest.raises(DataError, match=rf"^{fn.__name__}: row 2, column 'power_w'"):
            fn(_est([10.0, 0.0], [1.0, 2.0]), *args)
        with pytest.raises(DataError, match=rf"^{fn.__name__}: row 1, column 'time_ms'"):
            fn(_est([10.0, 12.0], [0.0, 2.0]), *args)


def test_a_zero_spread_is_allowed_and_a_negative_one_is_named_by_row():
    """fastest_under_58 / _63 (``< 0`` -> ``<= 0``), _64 (``< 1``), _67 / _68 (row +-1)."""
    est = _est([10.0, 11.0, 12.0], [3.0, 2.0, 1.0])
    ok = est.assign(power_w_std=[0.0, 0.0, 0.0])
    assert pt.fastest_under(ok, 30, k_sigma=1.0).time_ms == 1.0
    bad = est.assign(power_w_std=[0.5, 0.5, -0.5])
    with pytest.raises(DataError, match=r"row 3, column 'power_w_std'"):
        pt.fastest_under(bad, 30, k_sigma=1.0)


def test_a_tie_in_time_keeps_only_the_lower_power_row_on_the_front():
    """pareto_front_28 (``<`` -> ``<=``): a row as slow as a cheaper one is dominated."""
    est = _est([10.0, 12.0, 14.0], [5.0, 5.0, 3.0])
    front = pt.pareto_front(est)
    assert list(front.power_w) == [10.0, 14.0]


def test_select_at_the_cap_and_at_the_deadline():
    """selection: power at the cap fits, a run that ends at the deadline meets it."""
    est = pd.DataFrame(
        dict(gpu_mhz=[1, 2], batch_size=[8, 8], time_ms=[10.0, 20.0], power_w=[9.0, 4.0])
    )
    r = pd.DataFrame({"batch_size": [8], "samples": [800]})  # tt_acc 1.0 s and 2.0 s
    assert pt.select(est, r, power_cap_w=9.0).gpu_mhz == 1
    assert pt.select(est, r, power_cap_w=8.99).gpu_mhz == 2
    assert np.isclose(pt.select(est, r, 10, deadline_s=2.0, objective="energy").tt_acc, 2.0)


def test_time_to_accuracy_per_epoch_and_per_minibatch():
    """selection.time_to_accuracy_39.._53: a per-epoch table uses the r vector's epochs
    (else r itself); a per-minibatch one converts ms per batch to seconds per sample."""
    from powertrain.decisions.selection import time_to_accuracy

    per_epoch = pd.DataFrame({"power_limit_w": [100, 200], "batch_size": [8, 16],
                              "epoch_s": [10.0, 6.0], "power_w": [90.0, 180.0]})  # fmt: skip
    epochs = pd.DataFrame({"batch_size": [8, 16], "epochs": [3.0, 5.0]})
    assert list(time_to_accuracy(per_epoch, epochs).tt_acc) == [30.0, 30.0]
    relative = pd.DataFrame({"batch_size": [8, 16], "r": [1.0, 2.0]})
    # r normalised by eq. 3 of the batch-size paper (to the largest): 0.5 and 1.0
    assert list(time_to_accuracy(per_epoch, relative).tt_acc) == [5.0, 6.0]
    per_batch = pd.DataFrame({"batch_size": [8], "time_ms": [80.0], "power_w": [5.0]})
    samples = pd.DataFrame({"batch_size": [8], "samples": [1000]})
    got = time_to_accuracy(per_batch, samples)
    assert got.tt_acc.iloc[0] == pytest.approx(80 / 1e3 / 8 * 1000)  # 10 s
    assert got.energy_acc.iloc[0] == pytest.approx(50.0)  # 10 s x 5 W


def test_time_to_accuracy_errors_name_what_is_missing():
    """selection.time_to_accuracy_4.._18: the missing column and the columns found."""
    from powertrain.decisions.selection import time_to_accuracy

    r = {8: 1.0}
    with pytest.raises(DataError, match=r"^estimates need a batch_size column"):
        time_to_accuracy(pd.DataFrame({"time_ms": [1.0]}), r)
    with pytest.raises(DataError, match=r"no time column 'epoch_s' \(found batch_size, power_w\)"):
        time_to_accuracy(pd.DataFrame({"batch_size": [8], "power_w": [1.0]}), r, time="epoch_s")


def test_a_deadline_on_a_per_epoch_table_uses_epochs_to_target():
    """selection._absolute_1.._7: r in epochs makes a per-epoch table's times absolute."""
    per_epoch = pd.DataFrame({"power_limit_w": [100, 200], "batch_size": [8, 16],
                              "epoch_s": [10.0, 6.0], "power_w": [90.0, 180.0]})  # fmt: skip
    epochs = pd.DataFrame({"batch_size": [8, 16], "epochs": [3.0, 4.0]})  # 30 s and 24 s
    pick = pt.select(per_epoch, epochs, power_cap_w=200, deadline_s=30.0, objective="energy")
    assert pick.batch_size == 8 and pick.tt_acc == 30.0  # 2,700 J beats 4,320 J
    with pytest.raises(DataError, match="deadline_s needs absolute epochs"):
        pt.select(per_epoch, {8: 1.0, 16: 1.0}, power_cap_w=200, deadline_s=30.0)


def test_select_passes_its_margins_to_the_cap_check():
    """selection.select_73 / _74: a margin or k sigma dropped puts the pick over the cap."""
    est = pd.DataFrame(dict(gpu_mhz=[1, 2], batch_size=[8, 8], time_ms=[10.0, 20.0],
                            power_w=[9.0, 4.0], power_w_std=[1.0, 0.1]))  # fmt: skip
    r = {8: 1.0}
    assert pt.select(est, r, power_cap_w=10, k_sigma=0).gpu_mhz == 1  # the plain pick
    assert pt.select(est, r, power_cap_w=10).gpu_mhz == 2  # the default 3 sigma: 9 + 3 > 10
    assert pt.select(est, r, power_cap_w=10, k_sigma=0, margin_w=2.0).gpu_mhz == 2  # 9 + 2 > 10
    assert pt.select(est, r, power_cap_w=10, k_sigma=2.0).gpu_mhz == 2  # 9 + 2 x 1 > 10


def test_select_names_a_bad_deadline_and_objective():
    """selection.select_8, _18.._26: the argument's name, > 0, and the choices."""
    est = pd.DataFrame(dict(batch_size=[8], time_ms=[10.0], power_w=[9.0]))
    r = pd.DataFrame({"batch_size": [8], "samples": [800]})
    for bad in (0, -1):
        with pytest.raises(DataError, match=r"^deadline_s must be a finite number > 0"):
            pt.select(est, r, power_cap_w=10, deadline_s=bad)
    with pytest.raises(DataError, match=r"objective must be one of time, energy, got 'speed'"):
        pt.select(est, r, power_cap_w=10, objective="speed")


def test_columns_of_names_the_configuration_time_and_power():
    """optimise.columns_of_* and _catalog_device_for_4: a model's own names, else a
    device's knobs plus batch_size where the table has it, and the table's time column."""
    from powertrain.decisions.optimise import columns_of

    ref = pt.Predictor.from_pretrained("orin-agx/resnet18")
    c = columns_of(pd.DataFrame(), model=ref)
    assert (c.time, c.power, c.config) == ("time_ms", "power_w", tuple(ref.inputs_))
    assert c.knobs == tuple(k for k in ref.inputs_ if k != "batch_size")
    nano = pt.get_device("orin-nano")
    modes = nano.power_modes().head(2)
    c = columns_of(modes.assign(batch_size=16, epoch_s=1.0, power_w=5.0))
    assert c.knobs == tuple(nano.knobs) and c.config == (*nano.knobs, "batch_size")
    assert c.time == "epoch_s"
    assert columns_of(modes, device="orin-nano").config == tuple(nano.knobs)
    assert columns_of(modes).knobs == tuple(nano.knobs)  # _catalog_device_for_6: <= not <
    gpu = pd.DataFrame({"power_limit_w": [100], "batch_size": [8], "epoch_s": [1.0]})
    assert columns_of(gpu).knobs == ("power_limit_w",)


def test_a_table_without_a_time_column_is_told_about_time_ms():
    """optimise.time_column_15: the usual column is the one the error names."""
    with pytest.raises(DataError, match="time_ms"):
        pt.fastest_under(pd.DataFrame({"power_w": [10.0]}), 30)


def test_an_r_in_epochs_needs_per_epoch_times():
    """selection.time_to_accuracy_60: epochs to target do not mix with ms per minibatch."""
    from powertrain.decisions.selection import time_to_accuracy

    per_batch = pd.DataFrame({"batch_size": [8], "time_ms": [80.0], "power_w": [5.0]})
    epochs = pd.DataFrame({"batch_size": [8], "epochs": [3.0]})
    with pytest.raises(DataError, match="an r in epochs needs per-epoch times"):
        time_to_accuracy(per_batch, epochs)


def test_the_first_negative_spread_is_named_even_after_a_zero():
    """optimise.fastest_under_63 / _69: a zero before the negative one is not it."""
    bad = _est([10.0, 11.0, 12.0], [3.0, 2.0, 1.0], power_w_std=[0.0, 0.5, -0.5])
    with pytest.raises(DataError, match=r"row 3, column 'power_w_std': -0.5 is negative; a spread"):
        pt.fastest_under(bad, 30, k_sigma=1.0)


# -- the Jetson restore path (backends/jetson/backend.py) ---------------------------------


def _jetson(tmp_path, enable: str | None = "2"):
    """A fake Orin whose fan has a ``pwm1_enable`` (auto mode, as a board boots), and a
    backend on it, configured away from the original mode."""
    from fake_sysfs import FAN, make_orin

    from powertrain.backends.jetson import JetsonBackend

    board = make_orin(tmp_path)
    if enable is not None:
        (board.root / FAN).with_name("pwm1_enable").write_text(enable + "\n")
    board.fan0 = board.read(FAN)  # as the board booted
    b = JetsonBackend("orin-agx", lambda bs: 0.5, root=board.root, write=board.kernel,
                      sensor="hwmon", sample_period_s=0.01, check_root=False,
                      handle_signals=False)  # fmt: skip
    b.configure({"cores": 4, "cpu_mhz": 729.6, "gpu_mhz": 318.75, "mem_mhz": 665.6,
                 "batch_size": 4})  # fmt: skip
    return board, b


def test_the_fan_goes_back_to_auto_after_its_speed(tmp_path):
    """_Fan.restore_4, _5, _12, _16: pwm1 written back first, then pwm1_enable (else the
    fan stays in manual mode at full speed)."""
    from fake_sysfs import FAN

    board, b = _jetson(tmp_path)
    before = board.fan0
    assert before != board.read(FAN)  # the sweep set it to full speed
    board.writes.clear()
    b.close()
    fan = [(Path(p).name, v) for p, v in board.writes if "pwm-fan" in p]
    assert fan == [("pwm1", before), ("pwm1_enable", "2")]
    assert board.read(FAN.replace("pwm1", "pwm1_enable")) == "2"


def test_a_fan_that_refuses_is_reported_with_every_file(tmp_path):
    """_Fan.restore_1, _10, _20, _24: each failing fan file named, joined by '; '."""
    board, b = _jetson(tmp_path)
    board.refuse = {"pwm1", "pwm1_enable"}
    with pytest.raises(
        pt.errors.ProfilingError, match=r"fan: .*pwm1: .*Invalid argument; .*pwm1_enable: "
    ):
        b.close()


def test_a_board_that_ignores_the_restore_is_said_to_need_a_reboot(tmp_path):
    """_restore_board_6.._8: the snapshot after the restore is compared with the one
    before the sweep."""
    board, b = _jetson(tmp_path)
    b.knobs.restore = lambda snap: None  # writes that the kernel silently drops
    with pytest.raises(pt.errors.ProfilingError, match="did not return to its original mode"):
        b.close()


def test_a_failing_knob_restore_keeps_its_reason(tmp_path):
    """_restore_steps_5 / _6: the error of the knob restore, not 'None'."""
    board, b = _jetson(tmp_path)

    def fail(snap):
        raise pt.errors.ProfilingError("gpu min_freq: EINVAL")

    b.knobs.restore = fail
    with pytest.raises(pt.errors.ProfilingError, match="gpu min_freq: EINVAL"):
        b.close()


def test_close_restores_once_and_stops_the_sampler(tmp_path):
    """close_1 / _2 (a second close restores again), close_3 (the sampler not stopped)."""
    board, b = _jetson(tmp_path)
    sampler = b.sampler
    b.close()
    assert sampler is not None and not sampler._thread.is_alive()
    board.writes.clear()
    b.close()
    assert board.writes == []


# -------------------------------------------- the callbacks under torch.distributed --
class _FakeDist:
    """torch.distributed as Agreement sees it: this process's rank, every rank's board
    identity, and rank 0's broadcast buffer."""

    def __init__(self, rank: int, ids: list[str], sent=None):
        self.rank, self.ids, self.sent = rank, ids, sent

    def get_rank(self):
        return self.rank

    def get_world_size(self):
        return len(self.ids)

    def all_gather_object(self, out, mine):
        out[:] = self.ids

    def get_backend(self):
        return "gloo"

    def broadcast(self, buf, src):
        assert src == 0
        if self.rank > 0:
            buf.copy_(self.sent)
        self.sent = buf.clone()


class _Board:
    """A board that records its configurations, errors and closes."""

    config_columns = ("power_limit_w",)

    def __init__(self):
        self.configured, self.errored, self.closed = [], 0, 0

    def configure(self, config):
        self.configured.append(dict(config))

    def on_error(self):
        self.errored += 1

    def close(self):
        self.closed += 1


def _agreement(monkeypatch, rank, ids, sent=None):
    import torch  # noqa: F401 (Agreement's buffer)

    from powertrain.integrations import distributed

    fake = _FakeDist(rank, ids, sent)
    monkeypatch.setattr(distributed, "_dist", lambda: fake)
    monkeypatch.setattr(distributed, "as_backend", lambda board: board)
    board = _Board()
    return distributed.Agreement(board), board, fake


def test_a_rank_that_owns_its_board_runs_rank_zeros_configuration_and_restores_it(
    monkeypatch,
):
    """Agreement.share_*, Agreement.restore_*, Agreement.__init___*: the configuration
    broadcast is applied once on a rank that owns its board, and that board is put back
    (on_error first after a failure) once."""
    import torch

    sent = torch.tensor([1.0, 150.0], dtype=torch.float64)
    a, board, _ = _agreement(monkeypatch, 1, ["h:gpu0", "h:gpu1"], sent)
    assert a.owns_board and a.columns == ("power_limit_w",)
    assert a.share(None) == {"power_limit_w": 150.0}
    assert a.share(None) == {"power_limit_w": 150.0}
    assert board.configured == [{"power_limit_w": 150.0}]  # set once, not every step
    a.restore(error=True)
    assert (board.errored, board.closed) == (1, 1)
    a.restore(error=True)  # a second restore finds nothing changed
    assert (board.errored, board.closed) == (1, 1)


def test_a_rank_that_shares_rank_zeros_board_never_sets_or_restores_it(monkeypatch):
    """Agreement.__init___* (owns_board): a board a lower rank shares is left to it."""
    import torch

    sent = torch.tensor([1.0, 150.0], dtype=torch.float64)
    a, board, _ = _agreement(monkeypatch, 1, ["h:jetson", "h:jetson"], sent)
    assert not a.owns_board
    assert a.share(None) == {"power_limit_w": 150.0}
    a.restore(error=True)
    assert board.configured == [] and (board.errored, board.closed) == (0, 0)


def test_rank_zero_broadcasts_its_configuration_and_restores_after_a_clean_end(monkeypatch):
    """Agreement.share_* on rank 0 (the flag and the values sent; no configuration: the
    flag 0) and restore(error=False) without on_error."""
    a, board, fake = _agreement(monkeypatch, 0, ["h:gpu0", "h:gpu1"])
    assert not a.owns_board  # rank 0's Tuner sets its own board
    assert a.share(None) is None
    assert fake.sent.tolist() == [0.0, 0.0]
    assert a.share({"power_limit_w": 125}) == {"power_limit_w": 125.0}
    assert fake.sent.tolist() == [1.0, 125.0]
    assert board.configured == []
    a.changed = True  # as after a rank that owns its board applied one
    a.restore(error=False)
    assert (board.errored, board.closed) == (0, 1)


def test_a_group_of_one_process_is_no_distributed_job(monkeypatch):
    """_dist_*, world_*: a group counts from two processes; (rank, size) read from it."""
    import torch

    from powertrain.integrations import distributed

    assert distributed.world() == (0, 1)  # no group
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda *a: 1)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda *a: 0)
    assert distributed._dist() is None and distributed.world() == (0, 1)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda *a: 2)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda *a: 1)
    assert distributed._dist() is torch.distributed
    assert distributed.world() == (1, 2)


def test_boards_are_told_apart_by_gpu_per_host_and_simulated_per_process():
    """board_identity_*: two GPUs of one host are two boards, a Jetson one per host, a
    simulated board one per process."""
    import os
    import socket

    from powertrain.backends import StepBackend
    from powertrain.integrations.distributed import board_identity

    class Gpu(StepBackend):
        def __init__(self, index):
            self.gpu_index = index

        def configure(self, config):  # the abstract method; never called here
            raise AssertionError

    host = socket.gethostname()
    assert board_identity(Gpu(1)) == f"{host}:Gpu:1"
    assert board_identity(Gpu(None)) == f"{host}:Gpu"
    twin = _Board()
    assert board_identity(twin) == f"{host}:{os.getpid()}:{id(twin)}"  # type: ignore[arg-type]


def test_an_agreement_restores_even_when_the_boards_on_error_fails(monkeypatch):
    """Agreement.restore_4 (the error of on_error not suppressed): close still runs."""
    import torch

    sent = torch.tensor([1.0, 150.0], dtype=torch.float64)
    a, board, _ = _agreement(monkeypatch, 1, ["h:gpu0", "h:gpu1"], sent)
    a.share(None)

    def fails():
        raise RuntimeError("the driver is gone")

    board.on_error = fails
    a.restore(error=True)
    assert board.closed == 1


def test_a_configuration_with_a_first_knob_at_zero_or_missing_is_still_sent(monkeypatch):
    """Agreement.share_29 (the flag read from the first value: a first knob at 0, e.g.
    num_workers, would be taken for "no configuration"), _18, _20 (a knob rank 0's
    configuration lacks is sent as nan, not an error)."""
    import math

    monkeypatch.setattr(_Board, "config_columns", ("num_workers", "power_limit_w"))
    a, _, fake = _agreement(monkeypatch, 0, ["h:gpu0", "h:gpu1"])
    assert a.share({"num_workers": 0, "power_limit_w": 150}) == {
        "num_workers": 0.0,
        "power_limit_w": 150.0,
    }
    got = a.share({"num_workers": 2})
    assert got is not None and got["num_workers"] == 2.0 and math.isnan(got["power_limit_w"])


# ------------------------------------------------------------------------ the Tuner --
def test_a_board_that_refuses_the_first_configuration_is_put_back_and_left_alone(monkeypatch):
    """Tuner._release_1-3: the first configuration refused, the tuner goes inert after
    putting the board back (on_error, then close even when on_error fails: it used to
    skip close) and removing its signal handlers and exit hook."""
    import signal
    import types

    from test_engine import gpu_board
    from test_tuner import gpu_reference

    from powertrain.errors import PowerTrainError

    board = gpu_board([(100.0, 16, 300.0, 20.0), (200.0, 16, 200.0, 30.0)])
    calls: list[str] = []

    def refuse(config):
        raise PowerTrainError("the driver refused the limit")

    board.configure = refuse  # type: ignore[method-assign]

    def on_error():
        calls.append("on_error")
        raise RuntimeError("a restore that failed half way")

    board.on_error = on_error  # type: ignore[method-assign]
    board.close = lambda: calls.append("close")  # type: ignore[method-assign]
    from powertrain.decisions import tuner as tuner_module

    hooks: list = []
    fake_atexit = types.SimpleNamespace(
        register=hooks.append, unregister=lambda f: hooks.remove(f) if f in hooks else None
    )
    monkeypatch.setattr(tuner_module, "atexit", fake_atexit)
    before = signal.getsignal(signal.SIGTERM)
    tuner = pt.Tuner(board, gpu_reference(), 30.0, batch_size=16, minibatches=5,
                     log=lambda s: None)  # fmt: skip
    with pytest.warns(RuntimeWarning, match="refused a configuration"):
        with tuner.step():
            pass
    assert tuner.phase == "inert" and calls == ["on_error", "close"]
    assert signal.getsignal(signal.SIGTERM) is before and hooks == []
    tuner.close()
    assert calls == ["on_error", "close"]  # an inert tuner touches the board no more


# ------------------------------------------------------------------------ the Study --
class _NoTransfer:
    """A reference the study must not transfer (the sampler uses no model)."""

    inputs_ = ("power_limit_w", "batch_size")
    targets_ = ("time_ms", "power_w")

    def transfer(self, *a, **kw):
        raise AssertionError("a sampler that uses no model got a transfer")


class _Judged:
    """A sampler without a model whose assessment is given, recording what it saw."""

    stop_rule, uses_model = "settled", False

    def __init__(self, standing):
        self.standing, self.seen = standing, []

    def start(self, study, free, need):
        return np.zeros(0, dtype=int), "start"

    def assess(self, study, est):
        self.seen.append((study.caps.tolist(), np.asarray(study.weights).tolist(),
                          study.rng.random()))  # fmt: skip
        return self.standing


def _study(standing=None, objective="time", measured=3):
    from powertrain.decisions.settings import Settings
    from powertrain.decisions.study import Study

    cands = pd.DataFrame({"power_limit_w": [300.0, 200.0, 100.0], "batch_size": [16] * 3})
    rows = cands.assign(time_ms=[100.0, 200.0, 300.0], power_w=[45.0, 30.0, 20.0])
    settings = Settings(budget=10, objective=objective, seed=7).checked(measured)
    sampler = _Judged(standing)
    study = Study(cands, _NoTransfer(), np.array([20.0, 30.0]), settings, sampler)
    study.tell(rows.head(measured))
    return study, sampler


def test_a_cap_is_settled_by_the_studys_rule_at_that_cap_alone():
    """Study.settled_at_18-20 (nothing measured fits: never settled; the fastest at
    position 0 is a pick), _26, _28 (the cap alone, weight 1, the study's seed), _31 (no
    transfer for a sampler without a model), _40 (the tolerance given wins), _3 (energy)."""
    from powertrain.decisions.terminator import Standing

    unsure = Standing(np.array([0]), np.array([0.5]), np.array([0.01]), 0.01)
    study, sampler = _study(unsure, measured=1)  # only 300 W (45 W) measured
    assert not study.settled_at(50.0)  # 0.01 > the study's tolerance 0.005
    assert study.settled_at(50.0, tolerance=0.02)
    caps, weights, draw = sampler.seen[-1]
    assert caps == [50.0] and weights == [1.0]
    assert draw == np.random.default_rng(7).random()
    assert study.caps.tolist() == [20.0, 30.0] and len(study.weights) == 2  # put back
    assert not study.settled_at(44.9, tolerance=0.02)  # nothing measured fits
    assert len(sampler.seen) == 2  # not even assessed
    energy, _ = _study(unsure, objective="energy", measured=1)
    assert energy.settled_at(45.0, tolerance=0.02)  # at the cap: fits


def test_a_study_that_measured_everything_stops_with_nothing_left_to_lose():
    """Study._measured_only_23, _28, _33: every candidate measured, the standing's loss is
    0 under every cap (not unassessed), and each cap's pick is the fastest that fits."""
    study, _ = _study(measured=3)
    assert study.ask() is None and study.stop_reason == "exhausted"
    assert study.standing is not None and study.standing.expected_loss == 0.0
    picks = study.picks()
    assert [p.expected_loss for p in picks] == [0.0, 0.0]
    assert [p.config["power_limit_w"] for p in picks] == [100.0, 200.0]
    assert all(p.measured for p in picks)


# ------------------------------------------------------------ the stop rule, safe set --
def test_the_stable_rule_judges_a_new_cap_as_having_stood():
    """Terminator.settled_1, _4, _7 (the picks not taken as having stood patience rounds)
    and is_stable_10, _11 (the last assessment's picks, not another's, must be measured)."""
    from dataclasses import replace

    from powertrain.decisions.terminator import Standing, Terminator, is_stable

    rule = Terminator("stable", tolerance=0.005, patience=4, budget=10)
    sure = Standing(np.array([2]), np.array([0.5]), improvement=np.array([0.001]))
    assert rule.settled(sure)
    assert not rule.settled(replace(sure, improvement=np.array([0.01])))
    assert not rule.settled(replace(sure, incumbent=np.array([-1])))
    assert is_stable([(-1,), (0,)], np.array([0.0]), 0, 0.005)
    assert not is_stable([(0,), (-1,)], np.array([0.0]), 0, 0.005)
    assert not is_stable([(-1,), (0,), (-1,), (-1,)], np.array([0.0]), 1, 0.005)


def test_the_step_back_weighs_the_mean_against_the_readings_noise():
    """SafeSet.step_back and over_beyond_noise at their edges: a mean exactly at the cap
    is no hit; with the noise unknown (one reading's worth) only the ceiling counts; the
    pooled noise widens or narrows what counts as over."""
    from powertrain.decisions.safe_set import CEILING, SafeSet, over_beyond_noise

    cands = pd.DataFrame({"power_limit_w": [100.0, 200.0], "batch_size": [16, 16]})
    s = SafeSet(cands, 30.0)
    assert not s.step_back(0, [30.0, 30.0, 30.0])  # at the cap: not over it
    assert not s.step_back(0, [36.0, 36.0])  # one degree of freedom: the ceiling only
    assert not s.step_back(0, [30.0 * (1 + CEILING)])  # at the ceiling: not over it
    assert s.unsafe.tolist() == [False, False] and s.hits == []
    assert s.step_back(1, [30.0 * (1 + CEILING) + 0.1])  # over the ceiling: at once
    assert s.unsafe.tolist() == [False, True] and s.hits == [1]
    w = np.array([31.0, 31.2, 30.8, 31.0])
    z = 2.326
    assert over_beyond_noise(w, 30.0, z)  # its own spread: 0.16 W, 1 W over
    assert not over_beyond_noise(w, 30.0, z, (100 * 0.1**2, 100))  # a 10 % noisy board
    assert over_beyond_noise(w, 30.0, z, (100 * 0.005**2, 100))  # a quiet one
    assert not over_beyond_noise(np.array([31.0, 31.0]), 30.0, z)  # dof 1: the ceiling only
    assert over_beyond_noise(np.array([31.0, 31.0]), 30.0, z, (0.0, 1))  # dof 2: tested


# ------------------------------------------------------------------ following a cap --
def _following(controller, caps, minibatches=6):
    from powertrain.backends import TwinBackend

    board = TwinBackend(pt.Twin("orin-agx", "mobilenetv3", seed=0))
    applied, told = [], []
    original = board.configure
    board.configure = lambda c: (applied.append(dict(c)), original(c))[1]
    out = pt.follow(board, controller, lambda t, n: caps[min(n, len(caps) - 1)],
                    minibatches=minibatches,
                    on_switch=lambda t, cap, config: told.append((cap, config)))  # fmt: skip
    return out, applied, told


def _grid_config(i: int) -> dict:
    grid = pt.Twin("orin-agx", "mobilenetv3", seed=0).device.profiling_grid()
    return {**grid.iloc[i][["cores", "cpu_mhz", "gpu_mhz", "mem_mhz"]].to_dict(), "batch_size": 16}


@pytest.mark.parametrize("counts", [True, False], ids=["counting", "plain"])
def test_an_unchanged_pick_under_a_new_cap_is_not_applied_again(counts):
    """_switch_1-10, _17, _19-27 (the controller's count read wrong, or the pick always
    applied again: a new segment and a board write per cap change), _29, _32, _33 (the
    last segment's end), _50 (on_switch told no configuration)."""
    from powertrain.decisions.candidates import CapPick

    a, b = _grid_config(0), _grid_config(1)

    class Fixed:
        def config_for(self, cap):
            return CapPick(cap, a if cap >= 30 else b, True, None, None, None, 1.0, "")

    controller = Fixed()
    if counts:
        controller.n_measured = 5  # type: ignore[attr-defined]  # measured before following
    out, applied, told = _following(controller, [40.0, 40.0, 30.0, 30.0, 20.0])
    assert applied == [a, b] and told == [(40.0, a), (20.0, b)]
    seg = out.segments
    assert seg.power_cap_w.tolist() == [40.0, 20.0] and seg.minibatches.tolist() == [4, 2]
    assert seg.end_s.iloc[0] == seg.start_s.iloc[1] > 0
    assert seg.end_s.iloc[1] == out.total_s


def test_a_cap_nothing_fits_names_the_time_the_cap_and_the_reason():
    """_switch_14 (the error without its message)."""
    from powertrain.decisions.candidates import CapPick
    from powertrain.errors import NoFeasibleModeError

    class Nothing:
        def config_for(self, cap):
            return CapPick(cap, None, False, None, None, None, 0.0, "all draw more")

    with pytest.raises(NoFeasibleModeError, match="at 0 s the cap is 10 W: all draw more"):
        _following(Nothing(), [10.0])


# ------------------------------------------------------------------ a saved profile --
def test_a_saved_profile_names_its_board_and_keeps_its_columns_in_order(tmp_path):
    """save_rows_4-56 (the provenance sidecar: written once, with device, workload, key
    columns, source, version and time; the columns in the store's order; the folder made
    with its parents) and load_profile_10, _11 (the device not checked)."""
    import json
    import time

    from powertrain.decisions.saved_profile import load_profile, profile_columns, save_rows

    path = tmp_path / "new" / "deeper" / "profile.csv"
    cols = ("power_limit_w", "batch_size")
    rows = pd.DataFrame({"power_w": [20.0], "time_ms": [300.0], "batch_size": [16],
                         "power_limit_w": [100.0], "cap": [30.0], "index": [0]})  # fmt: skip
    save_rows(path, rows, cols, "a100", "bert")
    save_rows(path, rows.assign(power_w=21.0), cols, "a100", "ignored")  # the sidecar stays
    meta = path.with_name("profile.meta.json")
    text = meta.read_text()
    info = json.loads(text)
    assert text.endswith("}\n") and text.startswith('{\n "device": "a100"')
    assert (info["device"], info["workload"], info["key_columns"]) == ("a100", "bert", list(cols))
    assert info["source"].startswith("powertrain.Tuner (measured with the job")
    assert info["powertrain"] == pt.__version__
    time.strptime(info["created"], "%Y-%m-%dT%H:%M:%S%z")
    back = pd.read_csv(path)
    assert list(back.columns) == profile_columns(cols)
    assert back.power_w.tolist() == [20.0, 21.0] and back.power_cap_w.tolist() == [30.0, 30.0]
    with pytest.raises(DataError, match=r"saved for device a100, not 'v100'; give another "
                       r"profile= file \(or workload=\)"):  # fmt: skip
        load_profile(path, "v100", "bert")
    with pytest.raises(DataError, match="saved for workload bert, ignored, not 'bert'"):
        load_profile(path, "a100", "bert")  # the second save named another workload


def test_a_profile_empty_without_a_board_or_unreadable_is_handled(tmp_path):
    """load_profile_6 (an empty file), _18, _20 (no device or workload column), _9 (the
    message of an unreadable file)."""
    from powertrain.decisions.saved_profile import load_profile

    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert load_profile(empty, "a100", "bert").empty
    assert load_profile(tmp_path / "none.csv", "a100", "bert").empty
    bare = tmp_path / "bare.csv"
    bare.write_text("power_limit_w,batch_size,time_ms,power_w\n100,16,300,20\n")
    assert len(load_profile(bare, "a100", "bert")) == 1
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"a,b\n\xff\xfe,1\n")
    with pytest.raises(DataError, match="bad.csv: not a readable CSV"):
        load_profile(bad, "a100", "bert")


# ------------------------------------------------------------ the Tuner's restore --
def _counted_tuner(rows=None, fail_on_error=False, samples=None, cap=30.0, log=None):
    """A Tuner on a replayed GPU whose on_error and close are counted."""
    from test_engine import gpu_board
    from test_tuner import gpu_reference

    board = gpu_board(rows or [(100.0, 16, 300.0, 20.0), (200.0, 16, 200.0, 30.0)])
    calls: list[str] = []

    def on_error():
        calls.append("on_error")
        if fail_on_error:
            raise RuntimeError("a restore that failed half way")

    board.on_error = on_error  # type: ignore[method-assign]
    board.close = lambda: calls.append("close")  # type: ignore[method-assign]
    tuner = pt.Tuner(board, _gpu_reference(gpu_reference), cap, batch_size=16,
                     minibatches=5, handle_signals=False, log=log or (lambda s: None),
                     samples=samples)  # fmt: skip
    return tuner, calls


_REFERENCE: list = []


def _gpu_reference(make):
    if not _REFERENCE:  # one small fit for every test here
        _REFERENCE.append(make())
    return _REFERENCE[0]


def _hard_cap_tuner_until_hit(board, said: list[str]):
    """A budget-4 hard-cap Tuner under 30 W stepped until its first hit (at most 20 steps)."""
    from test_tuner import gpu_reference

    tuner = pt.Tuner(board, _gpu_reference(gpu_reference), 30.0, batch_size=16, budget=4,
                     minibatches=20, hard_cap=True, handle_signals=False,
                     log=said.append)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(20):
            with tuner.step():
                pass
            if tuner.hits:
                break
    return tuner


def test_aborting_a_tuner_that_never_ran_or_has_closed_touches_nothing():
    """Tuner.abort_2-4, _7, _8 (an idle or closed tuner aborted calls on_error on a board
    it never changed or already put back)."""
    tuner, calls = _counted_tuner()
    tuner.abort()  # idle: the board is not ours yet
    assert calls == [] and tuner.summary().stop_reason == "not started"
    tuner, calls = _counted_tuner()
    with tuner.step():
        pass
    tuner.close()
    assert calls == ["close"]
    tuner.abort()  # closed: put back already
    assert calls == ["close"]


def test_aborting_a_running_tuner_restores_even_when_on_error_fails():
    """Tuner.abort_11 (an on_error that fails skips close and raises), __exit___1 (with:
    an error aborts, a clean end closes)."""
    tuner, calls = _counted_tuner(fail_on_error=True)
    with pytest.raises(ZeroDivisionError):
        with tuner:
            with tuner.step():
                raise ZeroDivisionError
    assert calls == ["on_error", "close"] and tuner.phase == "closed"
    assert tuner.summary().stop_reason == "interrupted"
    tuner, calls = _counted_tuner()
    with tuner:
        with tuner.step():
            pass
    assert calls == ["close"] and tuner.summary().stop_reason != "interrupted"


def test_a_settled_tuner_aborted_keeps_its_pick_and_reason():
    """Tuner.abort_12 (a tuner with a pick aborted is called interrupted)."""
    from test_engine import settle

    tuner, calls = _counted_tuner()
    settle(tuner)
    assert tuner.settled
    reason = tuner.summary().stop_reason
    tuner.abort()
    assert calls == ["on_error", "close"]
    s = tuner.summary()
    assert s.stop_reason == reason != "interrupted" and s.config["power_limit_w"] == 200.0


def test_an_inert_tuner_aborted_does_not_restore_twice():
    """Tuner.abort_9, _10 (a tuner gone inert after a refused first configuration,
    already put back, aborted calls on_error again)."""
    from powertrain.errors import PowerTrainError

    tuner, calls = _counted_tuner()

    def refuse(config):
        raise PowerTrainError("refused")

    tuner.board.configure = refuse  # type: ignore[union-attr,method-assign]
    with pytest.warns(RuntimeWarning, match="refused a configuration"):
        with tuner.step():
            pass
    assert tuner.phase == "inert" and calls == ["on_error", "close"]
    tuner.abort()
    assert calls == ["on_error", "close"]


def test_a_controller_from_estimates_without_spreads_guards_with_the_power_alone():
    """CapController.config_for_29 (the spread column read although absent)."""
    est = pd.DataFrame({"power_limit_w": [100.0, 200.0], "cost": [2.0, 1.0],
                        "power_w": [20.0, 31.0], "measured": [0.0, 0.0]})  # fmt: skip
    pick = pt.CapController(est, ["power_limit_w"]).config_for(30.0)
    assert pick.config == {"power_limit_w": 100.0} and not pick.measured


# ------------------------------------------------------------ the callbacks' abort --
class _FakeTunerForHooks:
    """What TunerHooks.abort reads of a Tuner."""

    def __init__(self, config, active=True):
        import types

        self.phase, self.aborted = "running", 0
        self._summary = types.SimpleNamespace(config=config, active=active)

    def abort(self):
        self.aborted += 1
        self.phase = "closed"

    def summary(self):
        return self._summary

    def close(self):
        self.phase = "closed"
        return self._summary

    def measurements(self):
        return pd.DataFrame({"power_limit_w": [100.0], "batch_size": [16], "time_ms": [300.0],
                             "power_w": [20.0], "cap": [30.0]})  # fmt: skip


def _hooks(tuner):
    import types

    from powertrain.integrations import TunerHooks

    reference = types.SimpleNamespace(targets_=("time_ms", "power_w"))
    hooks = TunerHooks(None, reference, 30.0)
    notices: list[str] = []
    hooks.tuner, hooks._notice = tuner, notices.append
    return hooks, notices


def test_a_callbacks_abort_restores_every_rank_as_after_an_error_and_says_so_once():
    """TunerHooks.abort_2, _3 (the other ranks restored as after a clean end, without
    on_error), _7, _8 (a second abort reports again), _10 (a tuner with a pick reported
    as interrupted)."""
    restored: list = []
    hooks, notices = _hooks(_FakeTunerForHooks(config=None))
    hooks.agreement = type("A", (), {"restore": lambda self, error: restored.append(error)})()
    hooks.abort()
    assert restored == [True] and hooks.tuner.aborted == 1
    assert len(notices) == 1 and "best so far under 30 W: power_limit_w=100" in notices[0]
    hooks.abort()  # closed already: nothing more to say
    assert hooks.tuner.aborted == 1 and len(notices) == 1
    picked, notices = _hooks(_FakeTunerForHooks(config={"power_limit_w": 100.0}))
    picked.abort()
    assert notices == []  # its pick was logged when made
    inactive, notices = _hooks(_FakeTunerForHooks(config=None, active=False))
    inactive.abort()
    assert notices == []


def test_a_callbacks_clean_end_restores_the_other_ranks_without_on_error():
    """TunerHooks.finish_2, _3 (the other ranks restored as after an error), _7 (an inactive
    tuner's summary logged as numbers)."""
    restored: list = []
    hooks, _ = _hooks(None)
    hooks.agreement = type("A", (), {"restore": lambda self, error: restored.append(error)})()
    assert hooks.finish() is None
    assert restored == [False]
    inactive, _ = _hooks(_FakeTunerForHooks(config=None, active=False))
    assert inactive.finish() is None  # finish_7: no numbers from a tuner that did nothing


# ------------------------------------------------------------------- the hard cap --
def test_the_hard_cap_asks_only_for_what_is_measured_or_safe():
    """HardCap.allowed_8-10 (the model's safe set and the measured ones not joined, or
    read without the model). What is not allowed is replaced by an expander
    (``keep_safe``: tests/test_hard_cap.py)."""
    import types

    from powertrain.decisions.hard_cap import HardCap

    cands = pd.DataFrame({"power_limit_w": [100.0, 150.0, 200.0, 300.0], "batch_size": [16] * 4})
    study = types.SimpleNamespace(
        caps=np.array([30.0]), device=None, cands=cands,
        measured=np.array([True, False, False, True]),
        m_power=np.array([20.0, np.nan, np.nan, 40.0]),
    )  # fmt: skip
    hard = HardCap(study)
    # near the one measured under the cap (within a quarter of the range) and predicted
    # under it with 99 %: 150 W; 200 W is predicted under it but too far to trust
    est = pd.DataFrame({"power_w": [20.0, 25.0, 26.0, 40.0], "power_w_std": [0.0, 1.0, 1.0, 1.0]})
    assert hard.allowed(est).tolist() == [True, True, False, True]
    assert hard.set.unsafe.tolist() == [False, False, False, True]  # measured over it


def test_the_safe_set_at_the_cap_and_at_equal_knobs():
    """SafeSet.tell_2 and safe_20 (a measured power or an upper bound exactly at the cap is
    safe), _below_10, _13 (a knob equal to a safe one's is vouched for; one 0.5 higher,
    where power rises with it, is not)."""
    from powertrain.decisions.safe_set import SafeSet

    cands = pd.DataFrame({"power_limit_w": [100.0, 100.0, 100.5, 90.0],
                          "batch_size": [16, 8, 16, 16]})  # fmt: skip
    s = SafeSet(cands, 30.0, monotone={"power_limit_w": 1, "batch_size": 1})
    s.tell(0, 30.0)  # exactly at the cap
    assert s.measured_safe.tolist() == [True, False, False, False]
    assert s.known().tolist() == [True, True, False, True]
    mu, sd = np.full(4, 30.0), np.zeros(4)
    assert s.safe(mu, sd).tolist() == [True, True, True, True]  # 100.5 W: bound at the cap
    assert s.safe(mu + 0.1, sd).tolist() == [True, True, False, True]


def test_the_transformers_callback_guards_what_the_trainer_has_and_logs_without_it():
    """transformers _guard_8, _9 (a Trainer without one of the guarded methods), _unguard_1, _3
    (the wrappers left on the Trainer after training), on_train_end_3 (the summary's
    numbers into the log history when no Trainer was found)."""
    import types

    pytest.importorskip("transformers")
    from powertrain.integrations.transformers import PowerTrainCallback

    reference = types.SimpleNamespace(targets_=("time_ms", "power_w"))
    cb = PowerTrainCallback(None, reference, 30.0)
    trainer = types.SimpleNamespace(training_step=lambda *a: 1.0)  # no _run_epoch
    cb._trainer = trainer
    cb._guard()
    assert "training_step" in vars(trainer) and trainer.training_step() == 1.0
    assert "_run_epoch" not in vars(trainer)  # _guard_9: nothing to wrap, nothing set
    cb.finish = lambda: {"powertrain/n_measured": 3.0}  # type: ignore[method-assign]
    logged: list = []
    trainer.log = logged.append
    cb.on_train_end(None, None, None)  # type: ignore[arg-type]
    assert logged == [{"powertrain/n_measured": 3.0}]
    assert "training_step" not in vars(trainer)  # _unguard_1, _3: the wrapper removed
    cb._trainer = None
    state = types.SimpleNamespace(log_history=[], global_step=7)
    cb.on_train_end(None, state, None)  # type: ignore[arg-type]
    assert state.log_history == [{"powertrain/n_measured": 3.0, "step": 7}]


# ------------------------------------------------------------ the pick, the stop --
def test_the_fastest_measured_is_at_or_under_the_cap_and_none_is_minus_one():
    """fastest_measured_10 (none as -2: the documented answer is -1)."""
    from powertrain.decisions.candidates import fastest_measured

    measured = np.array([True, True, False])
    power, cost = np.array([30.0, 31.0, 10.0]), np.array([2.0, 1.0, 0.5])
    assert fastest_measured(measured, power, cost, 30.0) == 0  # at the cap: fits
    assert fastest_measured(measured, power, cost, 31.0) == 1
    assert fastest_measured(measured, power, cost, 29.9) == -1  # the unmeasured 10 W: no


def test_a_cap_left_without_a_pick_settles_only_where_nothing_can_fit():
    """Terminator.__call___19: a multi-cap decision settles with a cap left without a pick
    only where no unmeasured configuration can fit (beaten 0), never where one surely
    would (beaten 1)."""
    from powertrain.decisions.terminator import Standing, Terminator

    rule = Terminator("settled", confidence=0.9, tolerance=0.005, budget=10)
    picks = np.array([3, -1])

    def standing(beaten_no_pick):
        return Standing(picks, np.array([0.5, beaten_no_pick]), np.zeros(2), 0.0)

    assert rule(standing(0.0), [(3, -1)], 3) == "settled"
    assert rule(standing(1.0), [(3, -1)], 3) is None
    assert rule(standing(0.5), [(3, -1)], 3) is None


def test_saved_rows_become_the_tuners_measured_rows_with_what_they_carried():
    """prior_rows_1-79 (the listed survivors): no samples, a missing column named, a row
    of another configuration skipped (not the end), the window's counts and stability
    carried (or unknown), the cap read from power_cap_w or cap (or unknown), the last
    row of a configuration wins."""
    import math

    from powertrain.decisions.saved_profile import prior_rows

    cands = pd.DataFrame({"power_limit_w": [100.0, 200.0], "batch_size": [16, 16]})
    cols = ["power_limit_w", "batch_size"]
    assert prior_rows(cands, None, cols, "time_ms") == []  # type: ignore[arg-type]
    assert prior_rows(cands, pd.DataFrame(), cols, "time_ms") == []
    with pytest.raises(DataError, match=r"samples: missing column\(s\) time_ms, power_w"):
        prior_rows(cands, cands, cols, "time_ms")
    saved = pd.DataFrame({"power_limit_w": [300.0, 200.0, 100.0, 100.0], "batch_size": [16] * 4,
                          "time_ms": [1.0, 2.0, 3.0, 4.0], "power_w": [9.0, 8.0, 7.0, 6.0],
                          "n_minibatches": [5, 6, 7, 8], "n_power_samples": [50, 60, 70, 80],
                          "stable": [True, False, True, False],
                          "power_cap_w": [30.0, 31.0, 32.0, 33.0]})  # fmt: skip
    rows = prior_rows(cands, saved, cols, "time_ms")
    assert [(r["index"], r["time_ms"], r["power_w"]) for r in rows] == [
        (1, 2.0, 8.0),
        (0, 4.0, 6.0),
    ]
    assert [(r["n_minibatches"], r["n_power_samples"], r["stable"], r["cap"]) for r in rows] == [
        (6, 60, False, 31.0), (8, 80, False, 33.0)]  # fmt: skip
    assert all(r["given"] is True for r in rows)
    bare = saved[["power_limit_w", "batch_size", "time_ms", "power_w"]].tail(1)
    (row,) = prior_rows(cands, bare, cols, "time_ms")
    assert math.isnan(row["n_minibatches"]) and math.isnan(row["n_power_samples"])
    assert row["stable"] is True and math.isnan(row["cap"])
    (row,) = prior_rows(cands, bare.assign(cap=25.0), cols, "time_ms")
    assert row["cap"] == 25.0


def test_lightning_starts_at_the_loaders_batch_size_or_none():
    """lightning on_train_start_6 (a train loader without a batch_size: an error, not the
    job's batch size left to the callback's own)."""
    import types

    pytest.importorskip("lightning")
    from powertrain.integrations.lightning import PowerTrainCallback

    reference = types.SimpleNamespace(targets_=("time_ms", "power_w"))
    cb = PowerTrainCallback(None, reference, 30.0)
    found: list = []
    cb.start_tuner = lambda b, notice: found.append(b)  # type: ignore[method-assign,assignment]
    cb.on_train_start(types.SimpleNamespace(train_dataloader=[1, 2]), None)  # type: ignore[arg-type]
    cb.on_train_start(types.SimpleNamespace(train_dataloader=types.SimpleNamespace(batch_size=8)),
                      None)  # type: ignore[arg-type]  # fmt: skip
    assert found == [None, 8]


def test_a_controllers_pick_says_what_it_is_under_each_cap():
    """CapController.config_for_47-117 (the listed survivors): the measured pick at
    position 0, the cheapest unmeasured one within k_sigma, nothing that fits, each with
    its cap, cost, confidence and reason."""
    est = pd.DataFrame({"power_limit_w": [100.0, 150.0, 200.0, 250.0],
                        "cost": [4.0, 3.0, 2.0, 1.0], "power_w": [20.0, 22.0, 24.0, 40.0],
                        "power_w_std": [5.0, 1.0, 1.0, 1.0],
                        "measured": [1.0, 0.0, 0.0, 0.0]})  # fmt: skip
    ctl = pt.CapController(est, ["power_limit_w"], k_sigma=2.0)
    p = ctl.config_for(21.0)  # only the measured one fits (its own spread aside)
    assert (p.power_cap_w, p.config, p.measured, p.cost, p.confidence, p.reason) == (
        21.0,
        {"power_limit_w": 100.0},
        True,
        4.0,
        1.0,
        "fastest measured",
    )
    p = ctl.config_for(19.0)  # nothing measured fits: 22 + 2 x 1 and 24 + 2 x 1 W do
    assert p.power_cap_w == 19.0 and p.config is None and p.measured is False
    assert (p.time, p.power_w, p.cost, p.confidence) == (None, None, None, 0.0)
    assert p.reason == "no configuration fits under 19 W (lowest 20.0 W)"
    ctl = pt.CapController(est.assign(measured=[0.0, 0.0, 0.0, 1.0]), ["power_limit_w"],
                           k_sigma=2.0)  # fmt: skip
    p = ctl.config_for(26.0)  # 100 W: 20 + 2 x 5 > 26; 150 and 200 W fit: 200 is cheaper
    assert (p.power_cap_w, p.config, p.measured, p.cost, p.power_w) == (
        26.0,
        {"power_limit_w": 200.0},
        False,
        2.0,
        24.0,
    )
    assert np.isnan(p.confidence)
    assert p.reason == "nothing measured fits; predicted 24.0 W + 2 sigma"


def test_the_first_cap_is_decided_without_a_cap_change_message():
    """TunerLoop._new_cap_1 (the first cap announced as a change: "power cap now ... deciding
    again" at 0 s, which the callbacks show as a notice)."""
    from test_engine import gpu_board
    from test_tuner import gpu_reference

    said: list[str] = []
    board = gpu_board([(100.0, 16, 300.0, 20.0), (200.0, 16, 200.0, 30.0)])
    tuner = pt.Tuner(board, _gpu_reference(gpu_reference), 30.0, batch_size=16,
                     minibatches=5, handle_signals=False, log=said.append)  # fmt: skip
    with tuner.step():
        pass
    tuner.close()
    assert said and not any(line.startswith("power cap now") for line in said)


def test_a_tuner_under_which_nothing_fits_runs_the_lowest_power_with_a_warning():
    """TunerLoop._settle_11 (nothing measured fits: the lowest measured power is found in
    the rows measured)."""
    tuner, _ = _counted_tuner([(100.0, 16, 300.0, 40.0), (200.0, 16, 200.0, 50.0)])
    with pytest.warns(RuntimeWarning, match="nothing measured fits under 30 W: lowest power"):
        from test_engine import settle

        settle(tuner)
    s = tuner.close()
    assert s.config is not None and s.config["power_limit_w"] == 100.0 and s.power_w == 40.0


def test_a_callback_with_an_empty_profile_starts_from_its_last_run_and_saves_nothing_boardless(
    tmp_path,
):
    """TunerHooks._earlier_14 (an empty profile file taken over the last run's rows),
    _save_1 (a tuner without a board saved from)."""
    from powertrain.backends import TwinBackend

    hooks, _ = _hooks(_FakeTunerForHooks(config=None))
    hooks.board = TwinBackend(pt.Twin("orin-agx", "mobilenetv3", seed=0))
    hooks.profile = tmp_path / "profile.csv"
    hooks.profile.write_text("")
    kept = pd.DataFrame({"power_limit_w": [100.0]})
    hooks._kept = kept
    assert hooks._earlier() is kept
    hooks.tuner.board = None  # an inert tuner: nothing to save
    hooks._save()
    assert hooks.profile.read_text() == ""


# ------------------------------------------- run D: the Tuner's pick and its report --
def test_a_tuners_decision_row_counts_only_this_runs_rows_over_the_cap():
    """TunerLoop._settle_50, _51, _53-57 (rows given from a saved profile counted in the
    share of measuring time over the cap), _72-81 (the decision row's keys), _87-90 (its
    time's unit in the log), _new_cap_41,
    _43, _45, _46, _48 (a saved row at the same cap not counted against the budget)."""
    rows = [(100.0, 16, 300.0, 20.0), (200.0, 16, 200.0, 25.0), (300.0, 16, 150.0, 40.0)]
    saved = pd.DataFrame([rows[2]], columns=["power_limit_w", "batch_size", "time_ms", "power_w"])
    over = saved.assign(power_cap_w=30.0, n_minibatches=5, n_power_samples=9)  # over the cap
    said: list[str] = []
    tuner, _ = _counted_tuner(rows, samples=over, log=said.append)
    from test_engine import settle

    settle(tuner)
    assert (tuner.study.n_given, tuner.study.n_resumed) == (1, 1)  # same cap: resumed
    d = tuner.close().decisions[-1]
    assert {"power_cap_w", "minibatch", "reason", "expected_loss", "measured"} <= set(d)
    assert d["over_cap_time_share"] == 0.0 and d["over_cap_energy_share"] == 0.0
    assert d["power_limit_w"] == 200.0 and d["measured"] == 2 and d["minibatch"] > 0
    assert d["reason"] == tuner.summary().stop_reason and np.isfinite(d["expected_loss"])
    assert any("power_limit_w=200 batch_size=16 (200 ms, 25.0 W)" in line for line in said)


def _pick(measured, mu_p, sd_p, cost, incumbent, accept, cap=30.0, beaten=0.5):
    from powertrain.decisions.candidates import make_pick

    n = len(cost)
    cands = pd.DataFrame({"power_limit_w": 100.0 * np.arange(1, n + 1)})
    cost, mu_p, sd_p = (np.asarray(v, float) for v in (cost, mu_p, sd_p))
    return make_pick(cap, cands, ["power_limit_w"], np.asarray(measured), cost, mu_p, sd_p,
                     cost, incumbent, beaten, accept)  # fmt: skip


def test_an_unmeasured_pick_is_taken_only_when_sure_enough_and_cheaper():
    """make_pick_5, _8, _12 (the chance of staying within the cap computed wrong: an
    unmeasured pick over the cap taken), _14-17 (the measured pick at position 0 not the
    bar), _23, _24 (``>=`` / ``<`` at their edges), _27, _28, _30-32, _50, _51."""
    # 25 W and 29.5 W, sd 0.5: 100 % and 84 % sure within 30 W; the second is cheaper
    p = _pick([True, False, False, False], [20, 25, 29.5, 35], [0.5] * 3 + [2], [3, 2.5, 2, 1],
              0, 0.8)  # fmt: skip
    assert (p.config, p.measured, p.time, p.power_w, p.cost) == (
        {"power_limit_w": 300.0}, False, 2.0, 29.5, 2.0)  # fmt: skip
    assert p.power_cap_w == 30.0 and p.confidence == pytest.approx(0.8413, abs=1e-4)
    assert p.reason.endswith("84 % chance of staying within 30 W")
    assert _pick([True, False], [20, 29.5], [0.5, 0.5], [3, 2], 0, 0.85).measured  # 84 %
    assert _pick([True, False], [20, 29.9], [0, 0], [3, 2], 0, 0.5).measured is False
    assert _pick([True, False], [20, 30], [0, 0], [3, 2], 0, 0.5).measured is False  # 50 %
    assert _pick([True, False], [20, 10], [0, 0], [3, 2], 0, 1.0).measured is False  # 100 %
    # the measured pick at position 0 is the bar: the unmeasured one must be cheaper
    assert _pick([True, False], [20, 10], [0, 0], [3, 4], 0, 0.9).config == {"power_limit_w": 100.0}
    assert _pick([True, False], [20, 10], [0, 0], [3, 3], 0, 0.9).measured
    # nothing measured fits (-1): any sure one is taken, the unsure cheapest is no bar
    p = _pick([True, False, False], [40, 10, 35], [0, 0, 1], [3, 4, 1], -1, 0.9)
    assert p.config == {"power_limit_w": 200.0} and p.measured is False


def test_no_pick_says_what_was_measured_and_is_not_sure():
    """make_pick_55, _56, _58, _66 (the lowest measured power in the reason), _67, _69."""
    p = _pick([True, False], [40, 45], [0, 0], [3, 2], -1, None)
    assert (p.config, p.power_cap_w, p.confidence, p.measured) == (None, 30.0, 0.0, False)
    assert p.reason == "no measured configuration fits under 30 W (lowest measured power 40.0 W)"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no all-NaN minimum taken when nothing is measured
        p = _pick([False, False], [40, 45], [0, 0], [3, 2], -1, None)
    assert p.reason == "nothing measured under 30 W" and p.confidence == 0.0


def test_a_measured_pick_says_how_sure_it_is():
    """make_pick_85-87, _95, _113-116 (the measured pick's reason), _80 (no pick, sure)."""
    p = _pick([True, False], [20, 40], [1, 1], [3, 2], 0, None, beaten=0.25)
    assert (
        p.reason == "fastest measured under 30 W; 75 % chance no unmeasured configuration is faster"
    )
    assert p.measured and p.confidence == 0.75 and p.config == {"power_limit_w": 100.0}
    p = _pick([True, False], [20, 40], [1, 1], [3, 2], 0, None, beaten=np.nan)
    assert p.reason == "fastest measured under 30 W"


def test_a_row_measured_across_a_cap_change_is_told_to_the_new_study():
    """TunerLoop._told_3, _4 (the configuration being measured when the cap changed told
    to the new cap's study as nothing: it is measured again, or the tuner fails),
    _new_cap_5 (the change logged as None)."""
    rows = [(100.0, 16, 300.0, 20.0), (200.0, 16, 200.0, 25.0), (300.0, 16, 150.0, 28.0)]
    said: list = []
    tuner, _ = _counted_tuner(rows, cap=lambda s, n: 30.0 if n < 3 else 29.0, log=said.append)
    from test_engine import settle

    settle(tuner)
    tuner.close()
    given = tuner.study.history().query("round == -1")
    seen = tuner.measurements()
    assert len(given) == tuner.study.n_given == 1
    assert given["power_limit_w"].iloc[0] == seen["power_limit_w"].iloc[0]  # the first
    assert len(seen) == 3 and not seen.duplicated(["power_limit_w"]).any()
    assert sum(str(line).startswith("power cap now 29 W at ") for line in said) == 1


def test_given_rows_count_as_given_and_resumed_ones_against_the_budget():
    """Study.tell_1, _14, _16-20 (rows given or resumed miscounted: the budget spent on a
    cap is wrong), _5, _10, _12, _13 (their round and why), _22-27 (the errors)."""
    from powertrain.decisions.study import Ask

    study, _ = _study(measured=1)  # one row given, not resumed
    assert (study.n_given, study.n_resumed) == (1, 0)
    rows = study.cands.assign(time_ms=[100.0, 200.0, 300.0], power_w=[45.0, 30.0, 20.0])
    study.tell(rows.iloc[[1]], resumed=True)
    study.tell(rows.iloc[[2]], resumed=True)
    assert (study.n_given, study.n_resumed, study.n_new) == (3, 2, 0)
    seen = study.history()
    assert seen["round"].tolist() == [-1] * 3 and seen["why"].tolist() == ["given"] * 3
    stray = Ask(np.array([0]), rows.head(1), ["x"], 1)
    with pytest.raises(DataError, match=r"^Study\.tell: these rows answer no open ask of"):
        study.tell(rows.head(1), stray)
    study._asked = stray  # as if asked: two rows answer one configuration
    with pytest.raises(DataError, match=r"returned 2 measurement\(s\) for 1 configuration\(s\)"):
        study.tell(rows.head(2), stray)


def test_a_measurement_finds_its_candidate_by_the_rounded_knobs_and_names_bad_samples():
    """Study._record_38 (a knob with a fourth decimal looked up at 4 decimals: its
    measurement matches no candidate and is lost), _19 (a bad given row named as the
    board's), _8, _9 (``reset_index`` keeping the old index: an ``index`` column in the
    history), _4 (a family reference's spec features not taken from the device)."""
    from types import SimpleNamespace

    from powertrain.decisions.settings import Settings
    from powertrain.decisions.study import Study

    cands = pd.DataFrame({"power_limit_w": [100.12345, 200.0], "batch_size": [16, 16]})
    settings = Settings(budget=10, seed=7).checked(2)
    study = Study(cands, _NoTransfer(), np.array([30.0]), settings, _Judged(None))
    rows = cands.assign(time_ms=[100.0, 200.0], power_w=[25.0, 20.0], index=[0, 1])
    study.tell(rows.iloc[[1, 0]].set_axis([5, 9]))
    assert study.measured.tolist() == [True, True] and study.m_power.tolist() == [25.0, 20.0]
    with pytest.raises(DataError, match=r"^the given samples returned time_ms=nan for"):
        study.tell(rows.head(1).assign(time_ms=np.nan))
    study.tell(rows.drop(columns="index").set_axis([3, 4]))
    assert list(study.log[-1].columns) == [*cands, "time_ms", "power_w", "round", "why"]

    class _Family(_NoTransfer):
        inputs_ = ("power_limit_w", "batch_size", "gpu_cores")

    device = SimpleNamespace(spec=SimpleNamespace(hardware={"gpu_cores": 1024}))
    study = Study(cands.assign(gpu_cores=1024.0), _Family(), np.array([30.0]), settings,
                  _Judged(None), device=device)  # fmt: skip
    study.tell(rows.drop(columns="index"))  # the board's rows: no spec features
    assert study.measured.all() and study.history()["gpu_cores"].tolist() == [1024.0] * 2


def test_the_board_seconds_count_every_asked_round_and_no_given_row():
    """Study._record_48-55 (the board seconds spent measuring: given rows counted, round
    0 left out, or each round replacing the last)."""
    from powertrain.decisions.study import Ask

    study, _ = _study(measured=1)
    rows = study.cands.assign(time_ms=[100.0, 200.0, 300.0], power_w=[45.0, 30.0, 20.0])
    study.tell(rows.iloc[[1]].assign(profile_s=50.0))  # given: measured before
    for rnd, seconds in ((0, 10.0), (1, 5.0)):
        study._asked = asked = Ask(np.array([2]), rows.iloc[[2]], ["x"], rnd)
        study.tell(rows.iloc[[2]].assign(profile_s=seconds), asked)
    assert study.board_s == 15.0


def test_each_measurement_window_names_its_configuration_and_keeps_the_settle_limit():
    """TunerLoop._configure_18 (the window unnamed: its warnings name no configuration),
    _28 (``max_settle_s`` not passed on: a board that never settles is waited on 30 s),
    _35, _39 (the fixed protocol's window settling its means)."""
    from test_engine import gpu_board
    from test_tuner import gpu_reference

    for protocol, tol in (("settled", 0.01), ("fixed", 0.0)):
        board = gpu_board([(100.0, 16, 300.0, 20.0), (200.0, 16, 200.0, 30.0)])
        tuner = pt.Tuner(board, _gpu_reference(gpu_reference), 30.0, batch_size=16,
                         minibatches=5, max_settle_s=4.0, protocol=protocol,
                         handle_signals=False, log=lambda s: None)  # fmt: skip
        with tuner.step():
            pass
        window = tuner._probe.window
        assert window.max_settle_s == 4.0 and window.shown.startswith("power_limit_w=")
        assert window.settle_tol == tol
        tuner.close()


def test_the_cost_factors_errors_name_the_missing_batch_size():
    """cost_factor_6-8, _20-22 (the errors' text)."""
    from powertrain.decisions.candidates import cost_factor

    with pytest.raises(DataError, match=r"^an r vector needs a batch_size column in the conf"):
        cost_factor(pd.DataFrame({"power_limit_w": [100.0]}), 2.0, "time_ms")
    epochs = pd.DataFrame({"epochs": [10.0]})
    with pytest.raises(DataError, match=r"^r: a table of epochs needs a batch_size column$"):
        cost_factor(pd.DataFrame({"batch_size": [16]}), epochs, "time_ms")


def test_epochs_to_the_target_must_be_above_zero_and_numbers():
    """cost_factor_36 (a word as epochs: a raw ValueError), _42, _43 (``> 0`` at 0 and
    at 0.5), _44, _45 (the error names the first bad value)."""
    from powertrain.decisions.candidates import cost_factor

    configs = pd.DataFrame({"batch_size": [16, 32]})
    r = pd.DataFrame({"batch_size": [16, 32], "epochs": [0.5, 2.0]})
    assert cost_factor(configs, r, "epoch_s").tolist() == [0.5, 2.0]
    with pytest.raises(DataError, match=r"^r: epochs must be > 0, got (np\.float64\()?0\.0"):
        cost_factor(configs, r.assign(epochs=[0.0, 2.0]), "epoch_s")
    with pytest.raises(DataError, match=r"no entry for batch size\(s\) \[16\]"):
        cost_factor(configs, r.assign(epochs=["many", 2.0]), "epoch_s")


def test_a_tuners_study_gets_its_transfer_options_log_and_board_name():
    """TunerLoop._new_cap_20, _30 (transfer_options dropped), _21, _31 (the study's rounds
    not logged), _22, _32, _37 (errors name no board)."""
    from test_engine import gpu_board
    from test_tuner import gpu_reference

    said: list[str] = []
    board = gpu_board([(100.0, 16, 300.0, 20.0), (200.0, 16, 200.0, 30.0)])
    tuner = pt.Tuner(board, _gpu_reference(gpu_reference), 30.0, batch_size=16,
                     minibatches=5, transfer_options={"epochs": 3}, handle_signals=False,
                     log=said.append)  # fmt: skip
    with tuner.step():
        pass
    study = tuner.study
    assert study.transfer_options == {"epochs": 3} and study.source == "the board (ReplayBackend)"
    assert any(line.startswith("round 0: measuring power_limit_w=") for line in said)
    tuner.close()


def test_rows_of_this_run_at_a_cap_it_returns_to_are_given_not_resumed():
    """TunerLoop._new_cap_47 (with no saved profile, this run's rows at a cap it comes
    back to counted against the new decision's budget: it measures less)."""
    from test_engine import settle

    rows = [(100.0, 16, 300.0, 20.0), (200.0, 16, 200.0, 25.0), (300.0, 16, 150.0, 28.0)]
    tuner, _ = _counted_tuner(rows, cap=lambda s, n: 29.0 if 20 <= n < 40 else 30.0)
    for _ in range(60):  # one row measured under 30 W, two under 29 W, then 30 W again
        with tuner.step():
            pass
    settle(tuner)
    assert tuner.study.caps.tolist() == [30.0] and tuner.study.n_given == 3
    assert (tuner.measurements()["cap"] == 30.0).sum() == 1 and tuner.study.n_resumed == 0
    tuner.close()


def test_a_closed_or_inert_tuner_never_touches_the_board_or_its_schedule_again():
    """Tuner.on_step_begin_4, _5 (a step after close applies the pick decided before
    it: the board changed after it was put back), _2, _3 (an inert tuner asks its
    schedule for a cap)."""
    from test_engine import settle
    from test_tuner import gpu_reference

    tuner, calls = _counted_tuner()
    settle(tuner)
    tuner._apply = 0  # a pick decided, to be applied at the next step
    tuner.close()
    set_after: list[dict] = []
    tuner.board.configure = set_after.append  # type: ignore[method-assign]
    with tuner.step():
        pass
    assert set_after == [] and calls == ["close"]
    asked: list[int] = []
    with pytest.warns(RuntimeWarning, match="has no effect"):
        inert = pt.Tuner(None, _gpu_reference(gpu_reference), lambda s, n: asked.append(n) or 30)
    checked = list(asked)  # the schedule is tried once when the tuner is built
    with inert.step():
        pass
    assert asked == checked and inert.phase == "inert"


def test_close_twice_restores_once_and_an_unused_tuner_says_nothing():
    """Tuner.close_2, _3 (a second close restores and reports again), _17-20 (a tuner
    closed before its first step, or inert, reports a summary of nothing)."""
    said: list[str] = []
    tuner, calls = _counted_tuner(log=said.append)
    tuner.close()
    assert calls == [] and said == []
    tuner, calls = _counted_tuner(log=said.append)
    with tuner.step():
        pass
    tuner.close()
    reports = len(said)
    tuner.close()
    assert calls == ["close"] and len(said) == reports
    from test_tuner import gpu_reference

    with pytest.warns(RuntimeWarning, match="has no effect"):
        inert = pt.Tuner(None, _gpu_reference(gpu_reference), 30.0, log=said.append)
    inert.close()  # the warning said it all
    assert len(said) == reports


def test_a_step_ends_only_after_it_began_and_a_simulated_board_is_not_synced(monkeypatch):
    """Tuner.on_step_end_1 (an end with no begin timed: the tuner fails), _5, _6 (a step
    that closed the tuner timed after it), on_step_begin_38 (the GPU synced for a
    simulated board, not for a real one)."""
    import powertrain.decisions.tuner as tuner_module

    synced: list[int] = []
    monkeypatch.setattr(tuner_module, "_sync", lambda: synced.append(1))
    tuner, calls = _counted_tuner()
    tuner.on_step_end()  # no step began: nothing to time
    with tuner.step():
        tuner.close()
    assert tuner.minibatch == 0 and calls == ["close"] and synced == []


def _hard_cap(measured):
    """A hard cap over six GPU limits, 100-140 W predicted safe under 30 W."""
    from types import SimpleNamespace

    from powertrain.decisions.hard_cap import HardCap
    from powertrain.decisions.posterior import knob_space

    cands = pd.DataFrame({"power_limit_w": [100.0, 120, 140, 160, 300, 320], "batch_size": 16})
    est = pd.DataFrame({"power_w": [20.0, 22, 24, 26, 50, 55], "power_w_std": 0.1})
    measured = np.asarray(measured)
    study = SimpleNamespace(
        caps=np.array([30.0]), device=None, cands=cands, measured=measured,
        m_power=np.where(measured, est["power_w"], np.nan),
        knobs=knob_space(cands.to_numpy(float)), predict=lambda: (None, est),
        inputs=("power_limit_w", "batch_size"), time_col="time_ms", rng=np.random.default_rng(0),
        reference=SimpleNamespace(predict=lambda x: est.assign(time_ms=1.0).loc[x.index]),
        log=[], history=lambda: None,  # nothing measured yet: no readings' noise known
    )  # fmt: skip
    return HardCap(study)


def test_the_hard_cap_keeps_safe_choices_and_replaces_the_rest_once_each():
    """HardCap.keep_safe_14, _28 (``continue`` -> ``break``: the choices after the first
    safe one, or after one with no safe neighbour left, dropped), _22 (an expander already
    chosen or asked for chosen again: measured twice), _13 (its why), _40, _42 (an empty
    answer as floats)."""
    hard = _hard_cap([True, False, False, False, False, False])
    assert hard.allowed(hard.study.predict()[1]).tolist() == [True] * 3 + [False] * 3
    take, why = hard.keep_safe(np.array([1, 4, 2, 5]), ["a", "b", "c", "d"])
    assert take.tolist() == [1, 2] and why == ["a", "c"]
    take, why = hard.keep_safe(np.array([4]), ["b"])  # 140 W is the safe one nearest 300 W
    assert take.tolist() == [2]
    assert why == ["the safe one nearest a configuration not yet known safe (b)"]
    hard = _hard_cap([True] * 4 + [False] * 2)  # no safe one left unmeasured
    take, why = hard.keep_safe(np.array([4]), ["b"])
    assert take.tolist() == [] and take.dtype.kind == "i" and why == []


def test_a_controller_from_estimates_is_unsure_by_its_spreads_or_by_what_fits():
    """CapController.unsure, the branch without a study (no test ran it): nothing measured
    fits, or an unmeasured configuration may be faster by more than the tolerance."""
    est = pd.DataFrame({"power_limit_w": [100.0, 200.0, 300.0], "cost": [3.0, 2.0, 1.0],
                        "power_w": [20.0, 25.0, 40.0], "measured": [1, 0, 0]})  # fmt: skip
    bare = pt.CapController(est, ["power_limit_w"])
    assert not bare.unsure(30.0) and not bare.unsure(20.0) and bare.unsure(19.9)
    spread = est.assign(time_ms=[3.0, 2.0, 1.0], time_ms_std=[0.0, 0.2, 0.1],
                        power_w_std=[0.0, 0.5, 0.5])  # fmt: skip
    assert pt.CapController(spread, ["power_limit_w"]).unsure(30.0)  # 200 W: 2 vs 3
    slower = spread.assign(cost=[3.0, 6.0, 1.0], time_ms=[3.0, 6.0, 1.0])
    assert not pt.CapController(slower, ["power_limit_w"]).unsure(30.0)
    assert pt.CapController(slower, ["power_limit_w"]).unsure(19.0)  # nothing measured fits
    assert pt.CapController(slower, ["power_limit_w"]).unsure(45.0)  # 300 W fits now
    assert not pt.CapController(slower, ["power_limit_w"], tolerance=0.9).unsure(45.0)


def test_an_unsure_controller_weighs_the_time_spread_relative_to_the_time():
    """CapController.unsure_24-27 (the power spread taken for the time's, or read when
    absent), _51 (times under 1 clipped to 1), _65 (the cost spread divided by the cost),
    _4-6 (a study's verdict at the controller's tolerance and this cap)."""
    est = pd.DataFrame({"power_limit_w": [100.0, 200.0, 300.0], "cost": [3.0, 3.3, 1.0],
                        "power_w": [20.0, 25.0, 40.0], "measured": [1, 0, 0]})  # fmt: skip
    close = est.assign(power_w_std=[0.0, 5.0, 0.5], time_ms=[0.003, 0.0033, 0.001],
                       time_ms_std=[0.0, 0.00033, 0.0001])  # fmt: skip
    assert pt.CapController(close, ["power_limit_w"]).unsure(30.0)  # 3.3 +- 0.33 vs 3
    sure = close.assign(time_ms_std=[0.0, 0.000001, 0.0001])  # 3.3 +- 0.001: no chance
    assert not pt.CapController(sure, ["power_limit_w"]).unsure(30.0)
    no_power_spread = close.drop(columns="power_w_std")
    assert not pt.CapController(no_power_spread, ["power_limit_w"]).unsure(30.0)
    from powertrain.decisions.terminator import Standing

    loss = Standing(np.array([0]), np.array([0.5]), np.array([0.01]), 0.01)
    study, _ = _study(loss, measured=1)  # 300 W (45 W) measured; expected loss 0.01
    cands = study.cands.assign(cost=1.0, power_w=45.0, measured=[1, 0, 0])
    ctl = pt.CapController(cands, ["power_limit_w"], study=study, tolerance=0.02)
    assert not ctl.unsure(50.0) and ctl.unsure(40.0)  # 0.01 < 0.02; nothing fits 40 W


class _Controller:
    """Answers 30 W and over with 200 W, under it with 100 W; counts a re-decision."""

    def __init__(self, counts: bool = True):
        if counts:
            self.board_s, self.n_measured = 5.0, 2

    def config_for(self, cap):
        from powertrain.decisions.candidates import CapPick

        if cap < 25 and hasattr(self, "board_s"):
            self.board_s, self.n_measured = self.board_s + 1.0, self.n_measured + 1
        limit = 200.0 if cap >= 25 else 100.0
        return CapPick(cap, {"power_limit_w": limit, "batch_size": 16}, True, None, None,
                       None, 1.0, "fastest measured")  # fmt: skip


def test_follow_switches_by_the_training_clock_and_counts_samples_and_profiling():
    """follow_78 (the training clock summed wrong: a later cap applied at once), _12, _17,
    _89-100, _111 (the length in samples), _14-16 (one minibatch), _28-47, _122-143
    (what the controller measured while following), _6-8 (the error)."""
    from test_engine import gpu_board

    def board():
        return gpu_board([(100.0, 16, 300.0, 20.0), (200.0, 16, 200.0, 30.0)])

    ctl = _Controller()
    r = pt.follow(board(), ctl, lambda s, n: 30.0 if s < 0.99 else 20.0, samples=16 * 8)
    assert r.segments["power_limit_w"].tolist() == [200.0, 100.0]
    assert r.segments["minibatches"].tolist() == [5, 3] and r.minibatches == 8
    assert r.total_s == pytest.approx(5 * 0.2 + 3 * 0.3) and r.samples == 128
    assert (r.profiling_s, r.profiled) == (1.0, 1)
    r = pt.follow(board(), _Controller(counts=False), lambda s, n: 30.0, minibatches=1)
    assert (r.minibatches, r.profiling_s, r.profiled) == (1, 0.0, 0)
    with pytest.raises(DataError, match=r"^follow: the training length must be >= 1, got 0"):
        pt.follow(board(), ctl, lambda s, n: 30.0, minibatches=0)
    with pytest.raises(DataError, match=r"^follow: give the training length as minibatches or"):
        pt.follow(board(), ctl, lambda s, n: 30.0)


def test_a_hard_cap_tuner_steps_back_from_a_configuration_over_the_cap_at_once():
    """TunerLoop._step_back (no fast test ran it: the hard-cap test on the twin passes
    without a hit) and HardCap.step_back: readings over the cap beyond their noise (here
    33 % over with none known yet: the first reading past the sensor's lag) leave the
    configuration before its window ends, mark it hit, and tell what it showed."""
    from test_engine import gpu_board

    said: list[str] = []
    board = gpu_board([(100.0, 16, 300.0, 40.0), (200.0, 16, 200.0, 45.0)])  # both over
    tuner = _hard_cap_tuner_until_hit(board, said)
    assert tuner.hits == [0] and tuner.minibatch < 20
    row = tuner.measurements().iloc[0]
    assert (row["power_limit_w"], row["time_ms"], row["power_w"], row["index"]) == (
        100.0,
        300.0,
        40.0,
        0,
    )
    assert row["stable"] in (False,) and row["cap"] == 30.0 and 1 <= row["n_minibatches"] < 20
    assert row["n_power_samples"] >= 1 and 0 < row["profile_s"] <= tuner.board.now()
    assert said[-1] == "cap hit at power_limit_w=100 batch_size=16 (40.0 W): stepping back"
    assert tuner.study.hard.hits == [0] and tuner._answers[0]["index"] == 0  # told
    with tuner.step():  # the next configuration
        pass
    tuner.close()


def test_a_real_boards_step_is_timed_by_its_clock_and_summed():
    """TunerLoop._end_step_7-9 (a real board's minibatch time computed wrong: every
    measurement and the cap schedule's clock off), _14-20 (minibatches and training
    seconds not summed), _12, _13 (the next step's start), _22-24 (steps while deciding
    not counted), _26 (a probe measured after the tuner settled)."""
    from test_profiling_nvml import FakeNvml
    from test_tuner import gpu_reference, nvml_board

    tuner = pt.Tuner(nvml_board(FakeNvml(setters=True)), _gpu_reference(gpu_reference), 200.0,
                     batch_size=16, handle_signals=False, log=lambda s: None)  # fmt: skip
    try:
        for _ in range(2):
            tuner._t0 = tuner.board.now() - 0.25
            tuner._end_step()
        assert tuner.minibatch == 2 and tuner.elapsed_s == pytest.approx(0.5, abs=2e-4)
        assert tuner._last_end is not None and tuner._t0 is None
        tuner._pending = object()  # a decision computing: the step is not measured
        for _ in range(2):
            tuner._t0 = tuner.board.now()
            tuner._end_step()
        assert tuner.steps_while_deciding == 2
        tuner._pending, tuner.phase = None, "settled"
        tuner._probe = type("Probe", (), {"window": object(), "index": 0})()
        tuner._t0 = tuner.board.now()
        tuner._end_step()  # settled: the probe is not measured
        assert tuner._explore_s == 0.0
    finally:
        tuner._pending, tuner._probe = None, None
        tuner.close()


def test_the_hard_caps_start_without_anything_known_safe_is_the_lowest_predicted_power():
    """HardCap.start_for_35 (the start's fallback ranked by nothing: the first free one,
    here 300 W predicted at 50 W, explored over a 30 W cap), _5-11 (nothing needed)."""
    hard = _hard_cap([False] * 6)
    take, why = hard.start_for(hard.study, np.array([4, 5, 0]), 2)
    assert take.tolist() == [2, 0] and take.dtype.kind == "i"
    assert why.startswith("start inside the safe set (known")
    take, why = hard.start_for(hard.study, np.array([4, 5, 0]), 0)
    assert take.tolist() == [] and take.dtype.kind == "i" and why == "start inside the safe set"


def test_a_hit_measured_under_the_cap_stays_unsafe():
    """HardCap.safe_set_9, _10 (a configuration the cap was hit at, then told a mean under
    the cap, vouched for again: the study may ask for it again)."""
    hard = _hard_cap([True, False, False, False, False, False])
    assert hard.step_back(1, np.array([40.0, 41.0, 42.0]))  # the cap hit at 120 W
    hard.study.measured[1], hard.study.m_power[1] = True, 25.0  # its mean: under the cap
    assert hard.safe_set().unsafe[1] and hard.hits == [1]


def test_a_budget_too_small_names_what_is_missing_after_the_rows_given():
    """check_budget_13 (the budget needed counted with the rows given added, not taken
    off)."""
    from powertrain.decisions.settings import check_budget

    knobs = ["cores", "cpu_mhz", "gpu_mhz", "mem_mhz", "batch_size"]
    with pytest.raises(DataError, match=r"^budget must be >= 3 \(a transfer needs at least"):
        check_budget(1, 2, knobs, knobs)


# ------------------------------------------------- run F: the engine's entry points --
def test_decide_passes_every_argument_on_with_the_settings_defaults(monkeypatch):
    """decide_19, _27, _34, _36, _38, _41, _44-46, _48, _51 (``start``, ``correlation``,
    ``cap_weights``, ``confidence``, ``tolerance``, ``acquisition``, ``protocol``,
    ``n_minibatches`` left at their defaults), _53, _56 (``out`` dropped: **no measurement
    saved**), _62, _65, _66 (``batch_size``, ``progress``, ``transfer_options`` dropped),
    _1, _6, _7, _10, _11 (decide's defaults not Settings' own)."""
    from powertrain.decisions import decide as module
    from powertrain.decisions.settings import Settings

    seen: dict = {}

    def opened(*args):
        seen["open"] = args
        return "board", "study"

    def driven(board, study, s, out=None):
        seen["drive"] = (board, study, s, out)
        return "decision"

    monkeypatch.setattr(module, "open_study", opened)
    monkeypatch.setattr(module, "drive", driven)
    assert pt.decide("b", "ref", 30.0) == "decision"
    assert seen["drive"] == ("board", "study", Settings(), None)
    assert seen["open"] == ("b", "ref", 30.0, Settings(), None, None, None, None, None, None)
    say, options = print, {"epochs": 3}
    given = dict(budget=9, start=6, per_round=3, confidence=0.8, draws=64, patience=2,
                 tolerance=0.02, method="contest", seed=5, correlation=0.4,
                 acquisition="probability", protocol="fixed", objective="energy",
                 n_minibatches=12, accept_unmeasured=0.95, hard_cap=True,
                 cap_weights=[1, 2])  # fmt: skip
    pt.decide("b", "ref", [20, 30], candidates="c", batch_size=16, r="r", samples="s",
              progress=say, transfer_options=options, out="m.csv", **given)  # fmt: skip
    assert seen["drive"] == ("board", "study", Settings(**given), "m.csv")
    assert seen["open"] == (
        "b", "ref", [20, 30], Settings(**given), "c", 16, "r", "s", say, options
    )  # fmt: skip


def test_the_tables_assessment_scales_each_spread_and_weighs_the_caps(monkeypatch):
    """TableSampler.assess_1 (``wide`` 2 by default: every spread doubled), _11-14, _36,
    _37 (a spread divided by its scale, or scaled by another's), _22, _38-40 (energy not
    passed on), _43, _45 (the correlation given ignored), _46-50 (the forecast not put back
    at unit scale), _53, _55, _60, _61 (the standing's loss per cap, expected loss or
    forecast dropped)."""
    from types import SimpleNamespace

    from powertrain.decisions.samplers import table

    monkeypatch.setattr(table, "spread_scale", lambda z: float(z))  # z_t 2, z_p 3
    got: dict = {}

    def assessed(mean_sd, measured, m, knobs, caps, factor, energy, draws, rng, field):
        got.update(mean_sd=mean_sd, energy=energy, draws=draws, length=field.length)
        loss = SimpleNamespace(beaten=np.array([0.2]), per_cap=np.array([0.04]),
                               total=lambda w: float(np.sum(w) * 0.5))  # fmt: skip
        return SimpleNamespace(incumbent=np.array([1]), loss=loss,
                               forecast=np.array([[1.0], [6.0], [2.0], [12.0]]))  # fmt: skip

    monkeypatch.setattr(table, "assess", assessed)
    settings = SimpleNamespace(objective="energy", draws=7, correlation=0.3)
    study = SimpleNamespace(
        settings=settings, time_col="time_ms", surprise=lambda: (2.0, 3.0),
        measured=None, m_time=None, m_power=None, knobs=None, caps=np.array([30.0]),
        factor=None, rng=None, weights=np.array([0.25, 0.25]),
    )  # fmt: skip
    est = pd.DataFrame({"time_ms": [10.0], "time_ms_std": [1.0], "power_w": [20.0],
                        "power_w_std": [0.5]})  # fmt: skip
    standing = table.TableSampler().assess(study, est)
    t, st, p, sp = got["mean_sd"]
    assert (t.tolist(), st.tolist(), p.tolist(), sp.tolist()) == ([10.0], [2.0], [20.0], [1.5])
    assert (got["energy"], got["draws"], got["length"]) == (True, 7, 0.3)
    assert standing.forecast.ravel().tolist() == [1.0, 3.0, 2.0, 4.0]
    assert standing.loss.tolist() == [0.04] and standing.expected_loss == 0.25
    assert standing.incumbent.tolist() == [1] and standing.beaten.tolist() == [0.2]
    settings.objective, settings.correlation = "time", None
    table.TableSampler().assess(study, est, wide=2.0)
    assert got["energy"] is False and got["mean_sd"][1].tolist() == [4.0]
    from powertrain.decisions.posterior import LENGTH

    assert got["length"] == LENGTH


def test_a_callbacks_arguments_are_checked_when_it_is_built():
    """check_options_6, _7 (a batch size of 1 refused), _13 (every schedule refused),
    _15 (a bool taken as watts), _21, _22 (0 W accepted; 0.5 W refused), _41, _42
    (``minibatches`` not checked), _50 (a word as budget: a raw TypeError), _60, _63 (a
    reference without ``targets_``: a raw TypeError), _66 (the message), _9-11, _35, _37
    (the way round named: ``Tuner.batches``, the options known)."""
    import types

    from powertrain.integrations import TunerHooks

    ref = types.SimpleNamespace(targets_=("time_ms", "power_w"))
    TunerHooks(None, ref, 0.5, batch_size=1, budget=1, minibatches=1)  # the edges: fine
    TunerHooks(None, ref, lambda t, n: 30.0)  # a schedule is checked when training starts
    bad = [
        (dict(batch_size=0), r"batch_size: the callback tunes at one batch size \(the "
         r"dataloader's\); got 0; choose the batch size with powertrain\.Tuner\.batches"),
        (dict(power_cap_w=True), "power_cap_w must be positive watts or a schedule, got True"),
        (dict(power_cap_w=0), "power_cap_w must be positive watts or a schedule, got 0"),
        (dict(minibatches=0), "minibatches must be an integer >= 1, got 0"),
        (dict(budget="5"), "budget must be an integer >= 1, got '5'"),
        (dict(speed=1, zoom=2), r"unknown option\(s\) speed, zoom; the Tuner takes [a-z_]+, [a-z]"),
        (dict(reference=object()), "^TunerHooks: reference must be a fitted Predictor of power_w$"),
    ]  # fmt: skip
    for change, match in bad:
        args = dict(reference=ref, power_cap_w=30.0)
        args.update({k: change.pop(k) for k in list(change) if k in args})
        with pytest.raises(DataError, match=match):
            TunerHooks(None, args["reference"], args["power_cap_w"], **change)


def _started_hooks(monkeypatch, rank=0, size=1, batch_size=16, found=32):
    """TunerHooks whose Tuner, ranks and Agreement are fakes that record what they got."""
    import types

    from powertrain.decisions import tuner as tuner_module
    from powertrain.integrations import TunerHooks, distributed

    monkeypatch.undo()  # the real Tuner's options checked (a second call in one test)
    reference = types.SimpleNamespace(targets_=("time_ms", "power_w"))
    hooks = TunerHooks("the board", reference, 30.0, batch_size=batch_size, budget=7)
    made: dict = {}

    class _Tuner:
        def __init__(self, *args, **kwargs):
            made["tuner"] = (args, kwargs)

    monkeypatch.setattr(tuner_module, "Tuner", _Tuner)
    monkeypatch.setattr(distributed, "world", lambda: (rank, size))
    monkeypatch.setattr(distributed, "Agreement", lambda board: ("agreement", board))
    hooks._told = hooks._saved = 3  # as after a first fit
    hooks.start_tuner(found, print)
    return hooks, made


def test_a_callbacks_tuner_starts_at_its_batch_size_with_its_options_on_rank_zero_only(
    monkeypatch,
):
    """TunerHooks.start_tuner_2 (a reused callback's counts not reset: **its first
    measurement never saved to the profile**, its first decision never logged), _8 (the
    batch size given ignored for the loader's), _39 (the options and the log not passed
    on), _16, _17, _19, _21 (no Agreement, or one without the board, across two ranks:
    **the other rank's board never set**), _23, _24 (rank 1 running a Tuner of its own)."""
    hooks, made = _started_hooks(monkeypatch)
    args, kwargs = made["tuner"]
    assert args == ("the board", hooks.reference, 30.0) and kwargs["batch_size"] == 16
    assert kwargs["budget"] == 7 and kwargs["log"] == hooks._say and kwargs["samples"] is None
    assert (hooks._told, hooks._saved, hooks.agreement) == (0, 0, None)
    hooks, made = _started_hooks(monkeypatch, batch_size=None, size=2)
    assert made["tuner"][1]["batch_size"] == 32
    assert hooks.agreement == ("agreement", "the board")
    made.clear()
    hooks, made = _started_hooks(monkeypatch, rank=1, size=2)
    assert hooks.tuner is None and made == {} and hooks.agreement == ("agreement", "the board")


class _DecidingTuner:
    """What TunerHooks.step_end reads of a Tuner: a decision more at each step."""

    time_column = "time_ms"

    def __init__(self):
        self.decisions: list[dict] = []
        self.board = None

    def on_step_end(self):
        n = len(self.decisions)
        self.decisions.append({"power_cap_w": 30.0 - n, "time_ms": 100.0 + n, "power_w": 20.0,
                               "measured": True})  # fmt: skip

    def measurements(self):
        return pd.DataFrame({"cap": [30.0, 30.0], "time_ms": [100.0, 300.0],
                             "power_w": [35.0, 20.0]})  # fmt: skip


def test_each_decision_is_logged_once_with_its_share_over_the_cap():
    """TunerHooks.step_end_5, _6 (the decisions told counted wrong: the third step logs
    the second decision again), _7, _8, _12, _15 (the measured rows not passed on: no
    share of the time over the cap logged)."""
    import types

    from powertrain.integrations import TunerHooks

    hooks = TunerHooks(None, types.SimpleNamespace(targets_=("time_ms", "power_w")), 30.0)
    hooks.tuner = _DecidingTuner()
    logged = [hooks.step_end() for _ in range(3)]
    assert [[m["powertrain/power_cap_w"] for m in step] for step in logged] == [[30.0], [29.0],
                                                                               [28.0]]  # fmt: skip
    assert logged[0][0]["powertrain/over_cap_time_share"] == 0.25  # 100 of 400 ms at 35 W


def test_the_table_measures_by_credit_and_improvement_or_by_the_chance_to_win(monkeypatch):
    """TableSampler.choose_2-5, _7-11 (the acquisition read wrong: "improvement" measured
    by the chance to win, or "probability" by the portfolio)."""
    from types import SimpleNamespace

    from powertrain.decisions.samplers import table

    got: list = []
    monkeypatch.setattr(table, "batch", lambda gain, w, n, own: got.append((gain, own)) or
                        np.array([0, 1])[:n])  # fmt: skip
    monkeypatch.setattr(table, "_why", lambda now, j, caps, w, row, col, own=False: (j, own))
    loss = SimpleNamespace(credit="credit", wins="wins", improvement="improvement")
    now = SimpleNamespace(loss=loss, rivals=np.array([4, 7]))
    est = pd.DataFrame({"time_ms": np.arange(8.0)})
    settings = SimpleNamespace(acquisition="improvement")
    study = SimpleNamespace(settings=settings, weights=None, caps=None, time_col="time_ms")
    standing = SimpleNamespace(detail=(now, est))
    take, why = table.TableSampler().choose(study, standing, 2)
    assert take.tolist() == [4, 7] and why == [(4, False), (7, True)]
    assert got[-1] == ("credit", "improvement")
    settings.acquisition = "probability"
    take, why = table.TableSampler().choose(study, standing, 2)
    assert got[-1] == ("wins", None) and why == [(4, False), (7, False)]


def test_measure_profiles_by_the_protocol_and_returns_only_this_rounds_rows(monkeypatch):
    """measure_15-20 (the protocol read wrong: "settled" measured for the fixed window or
    the reverse), _24, _30, _34 (a progress bar), _32, _33 (the window or settling not
    passed on), _35 (**the whole ``out`` file returned: earlier rounds' rows told again**),
    _45 (a knob with a fourth decimal rounded at 4: its row, rounded at 3 in the file, is
    lost), _1-3 (the defaults)."""
    from types import SimpleNamespace

    from powertrain.decisions import decide as module
    from powertrain.decisions.settings import SETTLE_TOL

    cols = ["gpu_mhz", "batch_size"]
    earlier = pd.DataFrame({"gpu_mhz": [300.0], "batch_size": [16], "time_ms": [5.0]})
    seen: list = []

    def profiled(board, configs, **kwargs):
        seen.append(kwargs)
        got = configs.round(3).assign(time_ms=1.0)
        return got if kwargs["out"] is None else pd.concat([earlier, got], ignore_index=True)

    monkeypatch.setattr(module, "profile", profiled)
    board = SimpleNamespace(config_columns=cols)
    configs = pd.DataFrame({"gpu_mhz": [114.75049], "batch_size": [16]})
    got = module.measure(board, configs)
    assert seen[-1] == dict(progress=False, out=None, n_minibatches=40, settle_tol=SETTLE_TOL)
    assert got["gpu_mhz"].tolist() == [114.75]
    got = module.measure(board, configs, "m.csv", 7, "fixed")
    assert seen[-1] == dict(progress=False, out="m.csv", n_minibatches=7, settle_tol=0.0)
    assert got["gpu_mhz"].tolist() == [114.75] and got["time_ms"].tolist() == [1.0]


def test_a_second_ask_before_its_tell_is_refused():
    """Study.ask_2-5 (the message)."""
    study, _ = _study(measured=1)
    study._asked = object()
    with pytest.raises(DataError, match=r"^Study\.ask: tell the measurements of the last ask"):
        study.ask()


def test_the_start_is_the_hard_caps_when_it_explores_under_the_cap_and_counts_given_rows():
    """Study.ask_23 (**with ``hard_cap`` the sampler's start, not the safe set's: the first
    configurations explored may draw over the cap**), _19 (a start of 5 with 5 rows given
    asks for one more)."""
    from types import SimpleNamespace

    study, sampler = _study(measured=3)
    study.measured[:] = False  # as if the three were given and nothing is known
    asked: list = []
    sampler.start = lambda s, free, need: asked.append(("sampler", need)) or (np.zeros(0, int), "")
    study.hard = SimpleNamespace(
        start_for=lambda s, free, need: asked.append(("safe set", need)) or (np.array([2]), "safe")
    )  # fmt: skip
    got = study.ask()
    assert asked == [("safe set", 2)] and got.positions.tolist() == [2] and got.why == ["safe"]
    study, sampler = _study(measured=3)
    study.settings.start = 3  # as many given as the start needs
    study.measured[:] = False
    sampler.start = lambda s, free, need: asked.append(("sampler", need)) or (np.zeros(0, int), "")
    study.stop_reason = "budget"  # nothing asked after the start
    assert study.ask() is None and asked[-1] == ("sampler", 0)


def test_a_sampler_without_a_model_is_assessed_without_a_transfer():
    """Study.ask_51 (a transfer made for a sampler that uses no model)."""

    class _Assessed(Exception):
        pass

    study, sampler = _study(measured=1)
    seen: list = []

    def assessed(s, est):
        seen.append(est)
        raise _Assessed

    sampler.assess = assessed
    study._started = True  # past the start
    with pytest.raises(_Assessed):
        study.ask()  # _NoTransfer fails any transfer or prediction
    assert seen == [None]


def test_the_stop_rule_sees_every_assessments_picks_and_the_rows_spent():
    """Study.ask_59, _65 (the picks of each assessment not kept for the "stable" rule),
    _62 (resumed rows taken off the budget spent, not added: **more measured than the
    budget**)."""
    from powertrain.decisions.terminator import Standing

    study, _ = _study(Standing(np.array([0, 1]), np.array([0.5, 0.5])), measured=1)
    study._started, study.n_new, study.n_resumed = True, 3, 2
    told: list = []
    study.terminator = lambda standing, seen, spent: told.append((list(seen), spent)) or "budget"
    assert study.ask() is None and study.stop_reason == "budget"
    assert told == [([(0, 1)], 5)]


def test_a_round_under_a_hard_cap_keeps_only_what_is_known_safe_and_stays_in_budget():
    """Study.ask_93-96 (**with ``hard_cap`` a round's choices not passed through the safe
    set: a configuration over the cap explored**), _82 (a round larger than the budget
    left)."""
    from types import SimpleNamespace

    from powertrain.decisions.terminator import Standing

    standing = Standing(np.array([0]), np.array([0.5]))
    study, sampler = _study(standing, measured=1)
    study._started, study.n_new = True, 9  # one left of the budget of 10
    sampler.uses_model = True
    study.predict = lambda: (None, "the estimates")
    study.terminator = lambda *args: None
    chosen: list = []
    sampler.choose = lambda s, st, n: chosen.append(n) or (np.array([1, 2]), ["a", "b"])
    kept: list = []

    def keep_safe(take, why):
        kept.append((take.tolist(), take.dtype.kind, why))
        return np.array([2]), ["b, known safe"]

    study.hard = SimpleNamespace(keep_safe=keep_safe, grow=lambda est: 1 / 0)
    asked = study.ask()
    assert chosen == [1] and kept == [([1, 2], "i", ["a", "b"])]
    assert asked.positions.tolist() == [2] and asked.why == ["b, known safe"]
    assert asked.round == study.rounds == 1


def test_a_round_with_nothing_known_safe_grows_the_set_and_one_with_nothing_stops():
    """Study.ask_103-105 (nothing in reach known safe: the set not grown, or grown from
    no estimates), _106, _108-110 (a round with nothing to measure not stopped as
    exhausted), _113 (the rounds counted), the forecast kept for what is measured."""
    from types import SimpleNamespace

    from powertrain.decisions.terminator import Standing

    forecast = np.arange(12.0).reshape(4, 3)
    study, sampler = _study(Standing(np.array([0]), np.array([0.5]), forecast=forecast),
                            measured=1)  # fmt: skip
    study._started, study.rounds = True, 4
    sampler.uses_model = True
    study.predict = lambda: (None, "the estimates")
    study.terminator = lambda *args: None
    sampler.choose = lambda s, st, n: (np.array([1]), ["a"])
    grown: list = []
    study.hard = SimpleNamespace(
        keep_safe=lambda take, why: (np.zeros(0, int), []),
        grow=lambda est: grown.append(est) or (np.array([2]), ["grown"]),
    )  # fmt: skip
    asked = study.ask()
    assert grown == ["the estimates"] and asked.positions.tolist() == [2]
    assert asked.why == ["grown"] and asked.round == study.rounds == 5
    assert study.ahead[:, 2].tolist() == [2.0, 5.0, 8.0, 11.0] and np.isnan(study.ahead[:, 1]).all()
    study.tell(asked.configs.assign(time_ms=1.0, power_w=10.0), asked)
    sampler.choose = lambda s, st, n: (np.zeros(0, int), [])
    assert study.ask() is None and study.stop_reason == "exhausted" and study.rounds == 5


def test_a_reference_is_checked_for_each_part_and_its_time_column_is_not_power():
    """check_reference_18, _19, _28 (a reference without inputs, targets or ``transfer``
    let through, or a raw AttributeError), _42, _43 (**``power_w`` taken as the time
    column when it comes first**), _1, _36-38 (the messages)."""
    from types import SimpleNamespace

    from powertrain.decisions.settings import check_reference

    def ref(**parts):
        return SimpleNamespace(**{"inputs_": ("a",), "targets_": ("time_ms", "power_w"),
                                  "transfer": print, **parts})  # fmt: skip

    assert check_reference(ref(targets_=("power_w", "epoch_s"))) == (("a",), "epoch_s")
    for bad in (
        ref(inputs_=None),
        ref(targets_=None),
        ref(transfer=None),
        SimpleNamespace(inputs_=("a",), targets_=("power_w", "time_ms")),
    ):
        with pytest.raises(DataError, match=r"^reference must be a fitted powertrain\.Predictor"):
            check_reference(bad)
    with pytest.raises(DataError, match=r"^the reference predicts time_ms, epoch_s; a decision"):
        check_reference(ref(targets_=("time_ms", "epoch_s")))


_SETTING_ERRORS = [
    (dict(objective="speed"), r"objective must be one of time, energy, got 'speed'"),
    (dict(protocol="fast"), r"protocol must be one of settled, fixed, got 'fast'"),
    (dict(acquisition="x"), r"acquisition must be one of improvement, probability, got 'x'"),
    (dict(budget=0), r"budget must be an integer >= 1 \(a number of configurations\), got 0"),
    (dict(per_round=0), r"per_round must be a positive integer, got 0"),
    (dict(patience=-1), r"patience must be an integer >= 0 \(rounds\), got -1"),
    (dict(draws=0), r"draws must be a positive integer, got 0"),
    (dict(seed=-1), r"seed must be an integer >= 0, got -1"),
    (dict(n_minibatches=0), r"n_minibatches must be an integer >= 1, got 0"),
    (dict(confidence=1.0), r"confidence must be a probability in \(0, 1\), got 1\.0"),
    (dict(hard_cap=1), r"hard_cap must be True or False, got 1"),
    (dict(accept_unmeasured=0.0), r"accept_unmeasured must be a probability in \(0, 1\), got 0\.0"),
    (dict(tolerance=1.0), r"tolerance must be a fraction in \[0, 1\), got 1\.0"),
    (dict(tolerance=True), r"tolerance must be a fraction in \[0, 1\), got True"),
    (dict(tolerance="0.1"), r"tolerance must be a fraction in \[0, 1\), got '0\.1'"),
    (dict(correlation=-1.0), r"correlation must be a finite number >= 0, got -1\.0"),
    (dict(start=4), r"start must be an integer >= 5 \(a transfer needs at least 5 measured "
     r"configurations\), got 4"),
    (dict(start=5.0), r"start must be an integer >= 5 .*, got 5\.0"),
    (dict(start=True), r"start must be an integer >= 5 .*, got True"),
]  # fmt: skip


@pytest.mark.parametrize("change, match", _SETTING_ERRORS)
def test_each_setting_is_refused_by_name_just_past_its_edge(change, match):
    """Settings.checked: each check's name, edge and wording (an error names the setting
    and what it takes)."""
    from powertrain.decisions.settings import Settings

    with pytest.raises(DataError, match="^" + match + "$"):
        Settings(**change).checked(0)


def test_each_setting_is_taken_at_its_edge_and_the_start_fits_the_budget():
    """Settings.checked at the edges it accepts; ``start``: 5 by default, fewer with rows
    given, at most the budget plus them."""
    from powertrain.decisions.settings import Settings

    edge = dict(budget=1, per_round=1, patience=0, draws=1, seed=0, n_minibatches=1,
                tolerance=0, correlation=0.0, confidence=0.001, accept_unmeasured=0.999,
                hard_cap=False, objective="energy", protocol="fixed",
                acquisition="probability")  # fmt: skip
    assert Settings(**edge).checked(0).start == 1  # 5, at most the budget
    assert Settings(budget=50, tolerance=np.float64(0.5)).checked(0).start == 5
    assert Settings(budget=50, start=np.int64(2)).checked(3).start == 2  # 3 given
    assert Settings(budget=50, start=0).checked(7).start == 0
    assert Settings(budget=2, start=9).checked(4).start == 6
    with pytest.raises(DataError, match=r"^start must be an integer >= 2 "):
        Settings(budget=50, start=1).checked(3)


def test_caps_as_given_are_numbers_and_each_weight_follows_its_cap():
    """cap_values (the text, a bool, an empty or unlisted value named), cap_weights (a
    weight that does not follow its cap into sorted order: **the weight of one cap put
    on another**; one per cap; a cap given twice with two weights), their messages."""
    from powertrain.decisions.settings import cap_values, cap_weights, check_caps

    assert cap_values(30) == [30.0] and cap_values(np.float32(7.5)) == [7.5]
    assert cap_values((40, 20)) == [40.0, 20.0]
    for bad, match in [
        ("30", r"^power_cap_w must be watts or a list of watts, got the text '30': pass a "
               r"number \(30\) or numbers \(\[20, 30\]\)$"),
        (b"30", r"got the text b'30'"),
        (None, r"^power_cap_w must be watts or a list of watts, got None$"),
        ([], r"^power_cap_w: give at least one cap in watts$"),
        (True, r"^power_cap_w must be watts or a list of watts, got True$"),
        ([20, 0], r"^power_cap_w must be a finite number > 0, got 0$"),
    ]:  # fmt: skip
        with pytest.raises(DataError, match=match):
            cap_values(bad)
    given = [40, 20, 30]
    caps = check_caps(given)
    assert cap_weights(given, caps, None).tolist() == [1 / 3] * 3
    assert cap_weights(given, caps, [3, 1, 0]).tolist() == [0.25, 0.0, 0.75]
    assert cap_weights(given, caps, [0.5, 0.25, 0.25]).tolist() == [0.25, 0.25, 0.5]
    assert cap_weights([30, 30], check_caps([30, 30]), [1, 1]).tolist() == [1.0]
    for weights, match in [
        ([1, 1], r"^cap_weights: give one weight >= 0 per cap \(3\), not all 0; got 2$"),
        ([0, 0, 0], r"^cap_weights: give one weight >= 0 per cap \(3\), not all 0; got 3$"),
        (5, r"^cap_weights: give a list of numbers, got 5$"),
        ([1, -1, 1], r"^cap_weights must be a finite number >= 0, got -1$"),
    ]:  # fmt: skip
        with pytest.raises(DataError, match=match):
            cap_weights(given, caps, weights)
    with pytest.raises(DataError, match=r"^cap_weights: the cap 30 W is given twice with two "):
        cap_weights([30, 40, 30], check_caps([30, 40, 30]), [1, 1, 2])


def test_a_cap_schedule_is_checked_at_once_and_at_every_answer():
    """cap_schedule (**a schedule's answer of 0, -5, NaN or a bool taken as watts**; a
    schedule not asked at 0 s before training; a fixed cap of NaN, 0 or text), the
    messages naming the time and the value."""
    from powertrain.decisions.settings import cap_schedule

    asked: list = []
    schedule = cap_schedule(lambda t, n: asked.append((t, n)) or (30 if n < 5 else 0))
    assert asked == [(0.0, 0)]
    assert schedule(12.0, 3) == 30.0 and asked[-1] == (12.0, 3)
    assert isinstance(schedule(1.0, 1), float) and cap_schedule(0.5)(0.0, 0) == 0.5
    with pytest.raises(DataError, match=r"^the cap schedule returned 0 at 61 s: a cap must be "):
        schedule(61.2, 5)
    for bad in (lambda t, n: -5, lambda t, n: float("nan"), lambda t, n: True):
        with pytest.raises(DataError, match=r"^the cap schedule returned .* at 0 s"):
            cap_schedule(bad)
    fixed = cap_schedule(np.float64(25))
    assert fixed(100.0, 9) == 25.0 and isinstance(fixed(0.0, 0), float)
    for bad, match in [
        (float("nan"), r"^power_cap_w must be positive watts, got nan$"),
        (0, r"^power_cap_w must be positive watts, got 0$"),
        (True, r"^power_cap_w must be watts or a schedule, got True$"),
        ("30", r"^power_cap_w must be watts or a schedule, got '30'$"),
    ]:  # fmt: skip
        with pytest.raises(DataError, match=match):
            cap_schedule(bad)


def test_samples_must_be_a_table_of_measurements():
    """check_samples (**predictions given as samples taken as measured**; a list taken as
    a table), its messages."""
    from powertrain.decisions.settings import check_samples

    assert check_samples(None) is None
    rows = pd.DataFrame({"power_limit_w": [100.0], "time_ms": [5.0], "power_w": [20.0],
                         "n_minibatches": [40], "n_power_samples": [12]})  # fmt: skip
    assert check_samples(rows) is rows
    with pytest.raises(DataError, match=r"^samples must be a DataFrame of measurements, got list$"):
        check_samples([1, 2])
    with pytest.raises(DataError, match=r"^samples: row 1 is not a measurement: it records no "):
        check_samples(rows.drop(columns=["n_minibatches", "n_power_samples"]))
