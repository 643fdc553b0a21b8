"""The cap table's posterior (errors shared by neighbours), its expected loss, and the
round that spreads over the caps."""

import numpy as np
import pandas as pd
import pytest

from powertrain.decisions.loss import CLIP, assess, table_loss
from powertrain.decisions.posterior import (
    CLIP_Z,
    PRIOR_N,
    Field,
    field_draws,
    knob_space,
    spread_scale,
)
from powertrain.decisions.samplers.random import RandomSampler
from powertrain.decisions.samplers.table import batch as _batch
from powertrain.decisions.settings import Settings
from powertrain.decisions.study import Study


def _line(n=41):
    """Configurations on one knob, 1 to 5 GHz: standardised log positions."""
    return knob_space(np.linspace(1000.0, 5000.0, n)[:, None])


def test_neighbours_err_together_and_far_ones_do_not():
    x = _line()
    g = field_draws(x, np.array([], int), np.array([]), 4000, np.random.default_rng(0))
    c = np.corrcoef(g)
    assert c[20, 21] > 0.9  # next door
    assert abs(c[0, 40]) < 0.2  # the two ends
    assert g.std(axis=1) == pytest.approx(np.ones(len(x)), abs=0.1)  # the prior scale
    indep = field_draws(x, np.array([], int), np.array([]), 4000, np.random.default_rng(0),
                        Field(length=0.0))  # fmt: skip
    assert abs(np.corrcoef(indep)[20, 21]) < 0.1


def test_a_measurement_pulls_its_neighbours_and_shrinks_their_spread():
    x = _line()
    g = field_draws(x, np.array([20]), np.array([2.0]), 4000, np.random.default_rng(1))
    assert g[20].mean() == pytest.approx(2.0, abs=0.2)  # what was measured, up to its noise
    assert g[20].std() < 0.3 and g[21].std() < 0.5 and g[0].std() > 0.8
    assert g[21].mean() > 1.5 and abs(g[0].mean()) < 0.3  # a near one follows, a far one not


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_measured_surprise_moves_its_neighbours_forecasts_the_same_way(sign):
    """The residuals the field is conditioned on are measured minus predicted: a mode
    measured 20 % slower and 2 W hungrier than predicted makes its neighbours' forecasts
    slower and hungrier too (faster and leaner when it measured under). With the sign
    flipped the neighbours of a power-hungry measurement would look leaner under the cap."""
    x, n = _line(), len(_line())
    measured = np.zeros(n, bool)
    measured[20] = True
    time, power = 100.0 * 1.2**sign, 20.0 + 2 * sign
    values = (np.where(measured, time, np.nan), np.where(measured, power, np.nan))
    pred = (np.full(n, 100.0), np.full(n, 10.0), np.full(n, 20.0), np.full(n, 1.0))  # +-10 %
    a = assess(pred, measured, values, x, np.array([30.0]), np.ones(n), False, 2000,
               np.random.default_rng(0), Field())  # fmt: skip
    assert 21 in a.rivals and 19 in a.rivals
    for near in (19, 21):
        assert sign * (a.forecast[0, near] - np.log(100.0)) > 0.5 * np.log(1.2)  # log time
        assert sign * (a.forecast[2, near] - 20.0) > 1.0  # power: most of the 2 W


def test_the_loss_is_how_much_slower_the_pick_may_be_and_goes_to_who_wins():
    # one rival sure to fit and 20 % faster than the 100 ms pick; one over every cap
    cost = np.array([[80.0] * 10, [50.0] * 10])
    power = np.array([[19.0] * 10, [45.0] * 10])
    loss = table_loss(cost, power, best=np.array([100.0, np.inf]), caps=np.array([20.0, 18.0]))
    assert loss.per_cap[0] == pytest.approx(0.2)  # the stop rule reads the whole loss
    # a table credits each draw up to CLIP: many caps near their optimum beat one fixed;
    # the rival's own improvement is not clipped
    assert loss.credit[0].tolist() == pytest.approx([CLIP, 0.0])
    assert loss.improvement[0].tolist() == pytest.approx([0.2, 0.0])
    assert loss.beaten[0] == 1.0
    # one cap alone: its pick's whole loss is the point, nothing clipped
    one = table_loss(cost, power, best=np.array([100.0]), caps=np.array([20.0]))
    assert one.credit[0].tolist() == pytest.approx([0.2, 0.0])
    # 18 W: no pick and nothing fits in any draw: nothing to lose there
    assert loss.per_cap[1] == 0 and loss.beaten[1] == 0
    no_pick = table_loss(cost, power, best=np.array([np.inf]), caps=np.array([20.0]))
    assert no_pick.per_cap[0] == 1.0  # a cap without a pick where something fits: 100 %


def test_the_spread_is_scaled_by_how_far_the_forecasts_were_off():
    assert spread_scale(np.array([])) == 1.0  # nothing measured yet: the model's own
    narrow = spread_scale(np.full(40, 0.3))  # forecasts off by 0.3 sigma, 40 times
    assert narrow == pytest.approx(np.sqrt((PRIOR_N + 40 * 0.09) / (PRIOR_N + 40)))
    assert narrow < 0.45
    assert spread_scale(np.full(3, 0.3)) > narrow  # three errors say less than forty
    assert spread_scale(np.full(40, 1.8)) > 1.5  # an overconfident model is widened
    # one odd mode 5.5 sigma off counts as CLIP_Z: it cannot widen every spread 3-fold
    one_odd = spread_scale(np.array([5.5]))
    assert one_odd == pytest.approx(np.sqrt((PRIOR_N + CLIP_Z**2) / (PRIOR_N + 1)))
    assert spread_scale(np.array([np.nan, 0.3])) == spread_scale(np.array([0.3]))


def test_the_study_keeps_each_forecast_and_what_it_measured():
    cands = pd.DataFrame({"f": [1.0, 2.0, 3.0]})

    class Reference:  # what a study reads of a reference: its columns
        inputs_, targets_ = ("f",), ("time_ms", "power_w")

    study = Study(cands, Reference(), np.array([30.0]), Settings().checked(5), RandomSampler())
    study.ahead[:, 1] = [np.log(100.0), 0.05, 20.0, 0.5]  # 100 ms +-5 %, 20 +- 0.5 W
    study.tell(cands.iloc[1:].assign(time_ms=110.0, power_w=21.0))  # 2 forecast, 3 not
    z_t, z_p = study.surprise()
    assert z_t.tolist() == pytest.approx([np.log(1.1) / 0.05])  # only the forecast one
    assert z_p.tolist() == pytest.approx([2.0])


def test_a_round_spreads_over_the_caps():
    # rivals 0 and 1 both remove the 20 W cap's loss, rival 2 the 40 W cap's (smaller)
    gain = np.array([[0.30, 0.12, 0.0], [0.0, 0.0, 0.1]])  # without the discount: 0, 1
    w = np.array([0.5, 0.5])
    assert _batch(gain, w, 2).tolist() == [0, 2]  # not two neighbours under one cap
    assert _batch(np.zeros((2, 3)), w, 2).size == 0  # nothing to gain: nothing measured


def test_a_neighbour_edged_out_keeps_its_own_improvement_and_the_round_measures_it():
    # rival 0 is 80 ms in every draw; rival 1 is 65 or 90 ms, but when it is 65 rival 2
    # (64 ms) wins: rival 1 gets no credit, yet alone it would beat the 100 ms pick most
    cost = np.array([[80.0] * 4, [65.0, 90.0, 65.0, 90.0], [64.0, 120.0, 64.0, 120.0]])
    loss = table_loss(cost, np.full((3, 4), 19.0), best=np.array([100.0]), caps=np.array([20.0]))
    assert loss.credit[0].tolist() == pytest.approx([0.1, 0.0, 0.18])
    assert loss.improvement[0].tolist() == pytest.approx([0.2, 0.225, 0.18])
    w = np.array([1.0])
    assert _batch(loss.credit, w, 2).tolist() == [2, 0]  # by credit alone: never rival 1
    # the portfolio: the first by credit, the second by its own improvement
    assert _batch(loss.credit, w, 2, loss.improvement).tolist() == [2, 1]
    assert _batch(loss.credit, w, 1, loss.improvement).tolist() == [2]


def test_a_settled_window_measures_shorter_and_stays_close_to_the_truth():
    """The settled protocol stops a configuration's window once its mean time and power
    are pinned to 1 %: fewer minibatches than the paper's 40 on the twin, and the
    measured values still within 3 % of what the twin draws on average."""
    import powertrain as pt
    from powertrain.backends import TwinBackend

    twin = pt.Twin("orin-agx", "resnet18", seed=0)
    grid = twin.device.profiling_grid().sample(6, random_state=1)
    truth = twin.expected(grid, 16)
    fixed = pt.profile(TwinBackend(pt.Twin("orin-agx", "resnet18", seed=0)), grid,
                       batch_size=16, progress=False)  # fmt: skip
    short = pt.profile(TwinBackend(pt.Twin("orin-agx", "resnet18", seed=0)), grid,
                       batch_size=16, progress=False, settle_tol=0.01)  # fmt: skip
    assert short.profile_s.sum() < 0.8 * fixed.profile_s.sum()
    assert (short.n_minibatches < fixed.n_minibatches).any()
    for col in ("time_ms", "power_w"):
        err = short[col].to_numpy() / truth[col].to_numpy() - 1
        assert np.abs(err).max() < 0.03, col
