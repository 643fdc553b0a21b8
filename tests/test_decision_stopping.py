"""The active loop's stable stop (a pick that merely stood is not enough) and following a
cap with a controller that measures on the training board."""

import numpy as np
import pytest

import powertrain as pt
from powertrain.backends import TwinBackend
from powertrain.decisions.cap_following import CapController
from powertrain.decisions.decide import CapPick, contest, is_stable

TOL = 0.005


def _crowd(rival_time: float):
    """One measured pick (100 ms at 19 W) and 200 unmeasured configurations, each
    predicted at ``rival_time`` ms and 20.5 W (1 W spread) under a 20 W cap: each rival is
    unlikely to fit, so none is likely the fastest, yet together some of them fit."""
    n = 201
    mu_t = np.full(n, rival_time)
    mu_t[0] = 100.0
    mu_p = np.full(n, 20.5)
    mu_p[0] = 19.0
    measured = np.zeros(n, dtype=bool)
    measured[0] = True
    return contest(
        mu_t, 0.05 * mu_t, mu_p, np.ones(n), measured, np.array([20.0]),
        rng=np.random.default_rng(1),
    )  # fmt: skip


def test_a_crowd_of_small_chances_does_not_stop_a_pick_that_stood():
    """The case the old rule (the picks stood for ``patience`` rounds) stopped on: BERT at
    20 W, 20 % slow after 22 measurements, each challenger 1-2 % likely to win."""
    c = _crowd(rival_time=88.0)
    assert c.incumbent[0] == 0
    assert c.probs[0, 1:].max() < 0.03  # no single challenger is likely to win ...
    assert c.beaten[0] > 0.9  # ... but one of them almost surely does
    # each fits with a ~31 % chance and is then ~12 % faster: ~3.7 % expected gain
    assert c.improvement[0, 1:].max() == pytest.approx(0.037, abs=0.01)
    history = [(0,)] * 6  # the pick stood for five rounds: the old rule stopped here
    assert not is_stable(history, c.improvement.max(axis=1), patience=4, tolerance=TOL)


def test_a_pick_that_stood_and_that_no_challenger_is_likely_to_beat_stops():
    c = _crowd(rival_time=130.0)  # 30 % slower: a win needs a 5-sigma draw
    best = c.improvement.max(axis=1)
    assert best[0] <= TOL
    assert is_stable([(0,)] * 5, best, patience=4, tolerance=TOL)
    assert not is_stable([(3,), (0,), (0,), (0,), (0,)], best, patience=4, tolerance=TOL)
    assert not is_stable([(0,)] * 4, best, patience=4, tolerance=TOL)  # too few rounds


def test_a_cap_without_a_measured_pick_is_never_stable():
    assert not is_stable([(-1,)] * 6, np.array([0.0]), patience=4, tolerance=TOL)
    assert not is_stable([(0, -1)] * 6, np.array([0.0, 0.0]), patience=4, tolerance=TOL)


def test_improvement_weighs_how_much_faster_not_only_how_likely():
    """Two rivals sure to fit: the one predicted 40 % faster is worth far more than the
    one 5 % faster, and its expected improvement is about those 40 %."""
    mu_t = np.array([100.0, 95.0, 60.0])
    mu_p = np.array([19.0, 19.0, 19.0])
    measured = np.array([True, False, False])
    sd_p = np.array([0.0, 0.3, 0.3])
    c = contest(mu_t, 0.02 * mu_t, mu_p, sd_p, measured, np.array([20.0]))
    assert c.improvement[0, 2] > 5 * c.improvement[0, 1] > 0
    assert c.improvement[0, 2] == pytest.approx(0.4, abs=0.02)
    assert c.improvement[0, 0] == 0  # the pick itself


def test_follow_applies_the_pick_again_after_the_controller_measured_on_the_board():
    """A controller that re-decides measures on the training board, leaving it in the
    last measured configuration: follow applies the pick again, even an unchanged one."""
    twin = pt.Twin("orin-agx", "mobilenetv3", seed=0)
    grid = twin.device.profiling_grid()
    keys = ["cores", "cpu_mhz", "gpu_mhz", "mem_mhz"]
    pick, other = ({**grid.iloc[i][keys].to_dict(), "batch_size": 16} for i in (0, 1))
    board = TwinBackend(twin)
    applied = []
    original = board.configure
    board.configure = lambda c: (applied.append(dict(c)), original(c))[1]

    class Measuring:
        n_measured, board_s = 0, 0.0

        def config_for(self, cap):
            board.configure(other)  # profiling moved the board
            self.n_measured += 2
            self.board_s += 30.0
            return CapPick(cap, pick, True, None, None, None, 1.0, "")

    sched = pt.CapSchedule([(0, 40.0), (0.5, 20.0)])
    out = pt.follow(board, Measuring(), sched, minibatches=40)
    assert applied == [other, pick, other, pick]
    assert out.minibatches == 40 and out.segments.power_cap_w.tolist() == [40.0, 20.0]
    assert out.profiled == 4 and out.profiling_s == 60.0


def test_follow_keeps_k_sigma_below_the_cap_when_nothing_measured_fits():
    """Nothing measured fits under 30 W: the fastest unmeasured configuration predicted
    at 29 +- 2 W is not applied (29 + 1 x 2 > 30); the one at 25 +- 1 W is."""
    twin = pt.Twin("orin-agx", "mobilenetv3", seed=0)
    grid = twin.device.profiling_grid()
    keys = ["cores", "cpu_mhz", "gpu_mhz", "mem_mhz"]
    est = (
        grid.iloc[:3][keys]
        .reset_index(drop=True)
        .assign(
            batch_size=16,
            cost=[1.0, 2.0, 0.5],
            power_w=[29.0, 25.0, 40.0],
            power_w_std=[2.0, 1.0, 0.0],
            measured=[False, False, True],  # the measured one is over the cap
        )
    )
    ctrl = CapController(est, [*keys, "batch_size"])  # k_sigma 1 by default
    board = TwinBackend(twin)
    applied = []
    original = board.configure
    board.configure = lambda c: (applied.append(dict(c)), original(c))[1]
    out = pt.follow(board, ctrl, pt.CapSchedule([(0, 30.0)]), minibatches=3)
    safe = {**est.iloc[1][[*keys, "batch_size"]].to_dict()}
    assert applied == [safe] and out.segments.measured.tolist() == [False]
    pick = ctrl.config_for(30.0)
    assert pick.power_w == 25.0 and "25.0 W + 1 sigma" in pick.reason
    assert ctrl.config_for(31.0).power_w == 29.0  # 29 + 2 fits 31
