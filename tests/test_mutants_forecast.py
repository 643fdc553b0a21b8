"""Tests written for run I's survivors (docs/method-notes.md, "Run I"): the cap schedule
(which cap applies when), the posterior (the forecasts and spreads an unmeasured pick's
chance of fitting rests on) and the table's loss.

Why: each names the mutants it kills (mutmut's name, module.x_function__mutmut_N), so a
later run can tell a new survivor from an old one.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from powertrain.decisions.cap_schedule import CapSchedule
from powertrain.errors import DataError


def test_a_cap_step_applies_from_its_own_instant_on():
    """CapSchedule.__call__ (the step before the one that starts at ``t``: a lower cap
    applied late, the board over the new cap for a step), caps (not distinct, not
    sorted)."""
    s = CapSchedule([(0, 40.0), (10, 20.0), (20, 40.0)])
    assert [s(0.0), s(9.999), s(10.0), s(19.0), s(20.0), s(1e9)] == [40, 40, 20, 20, 40, 40]
    assert s.caps() == [20.0, 40.0]
    assert CapSchedule([(0, 50.0)])(0.0) == 50.0


def test_a_callback_schedule_is_asked_with_time_and_minibatch_and_checked():
    """CapSchedule.__init__ and __call__ (the callback dropped or asked without its
    arguments, 1: **the default minibatch 1: a schedule asked for the wrong step's cap**;
    **its answer of 0 W taken as a cap**; 5, 6: the message)."""
    asked: list[tuple[float, int]] = []
    s = CapSchedule(callback=lambda t, n: asked.append((t, n)) or (30 if n < 3 else 0))
    assert s.callback is not None and s.steps == []
    assert s(1.5, 2) == 30.0 and asked == [(1.5, 2)]
    with pytest.raises(DataError, match="returned 0 at 4 s"):
        s(4.0, 3)
    assert CapSchedule(callback=lambda t, n: 25)(0.0) == 25.0
    # asked without a minibatch: the first one's cap (__call___1: minibatch 1)
    assert CapSchedule(callback=lambda t, n: 40 if n == 0 else 20)(0.0) == 40.0
    with pytest.raises(DataError, match="^CapSchedule: give either steps or a callback$"):
        CapSchedule()
    with pytest.raises(DataError, match="^CapSchedule: give either steps or a callback$"):
        CapSchedule([(0, 40)], callback=lambda t, n: 40)


@pytest.mark.parametrize(
    "steps, message",
    [
        ([(0, 0.0)], r"step 1: \(0.0, 0.0\) needs t_s >= 0, cap > 0"),
        ([(0, 40), (5, -1)], r"step 2: \(5.0, -1.0\) needs"),
        ([(0, 40), (-1, 30)], r"step 2: \(-1.0, 30.0\) needs"),
        ([(0, float("nan"))], "step 1: .* needs"),
        ([(0, float("inf"))], "step 1: .* needs"),
        ([(float("inf"), 40)], "step 1: .* needs"),
        ([(5, 40)], "the first step must start at t_s = 0"),
        ([(0.5, 40)], "the first step must start at t_s = 0"),
        ([], "the first step must start at t_s = 0"),
        ([(0, 40), (3, 30), (3, 20)], r"steps 2 and 3 both start at t_s = 3 \(30 W and 20 W\)"),
        ([(0, 40), None], r"step 2: None must be a pair"),
    ],
)
def test_every_malformed_step_is_named(steps, message):
    """_check_steps (**a cap of 0 W, below 0, NaN or infinite taken**; a negative or
    infinite start; no step at 0 s, 40: **one at 0.5 s taken: no cap for the first half
    second**; two caps at one instant; the step's number)."""
    with pytest.raises(DataError, match=f"CapSchedule: {message}"):
        CapSchedule(steps)


def test_steps_are_kept_as_sorted_float_pairs():
    """_check_steps (the steps left unsorted: a later cap applied first; numbers kept as
    text)."""
    assert CapSchedule([(0, 0.5)])(3.0) == 0.5  # _check_steps_19: a cap under 1 W refused
    s = CapSchedule([(20, "15"), (0, 40), (10.0, np.float32(25))])
    assert s.steps == [(0.0, 40.0), (10.0, 25.0), (20.0, 15.0)]
    assert all(type(t) is float and type(w) is float for t, w in s.steps)
    assert s(10.0) == 25.0 and s(25.0) == 15.0


def test_a_cap_schedule_file_names_itself_and_its_rows(tmp_path):
    """from_csv (the file not named, 4, 9, 22; the negative start checked as a step, not as
    the file's row and column, 10, 23, 24; the file's kind in a missing file's message,
    13, 15-17; "step" not turned into "row")."""
    f = tmp_path / "caps.csv"
    f.write_text("t_s,power_cap_w\n5,40\n")
    with pytest.raises(DataError, match=re.escape(f"{f}: CapSchedule: the first row must start")):
        CapSchedule.from_csv(f)
    f.write_text("t_s,power_cap_w\n0,40\n7,30\n7,20\n")
    with pytest.raises(DataError, match=r"rows 2 and 3 both start at t_s = 7"):
        CapSchedule.from_csv(f)
    f.write_text("t_s,cap\n0,40\n")
    with pytest.raises(DataError, match="power_cap_w"):
        CapSchedule.from_csv(f)
    f.write_text("t_s,power_cap_w\n0,40\n-1,30\n")
    with pytest.raises(DataError, match=re.escape(f"{f}: row 2, column 't_s': -1 must be >= 0")):
        CapSchedule.from_csv(f)
    with pytest.raises(DataError, match=re.escape(f"cap schedule {tmp_path / 'no.csv'}: no such")):
        CapSchedule.from_csv(tmp_path / "no.csv")
    f.write_text("t_s,power_cap_w\n0,40\n30,12.5\n")
    s = CapSchedule.from_csv(str(f))
    assert s.steps == [(0.0, 40.0), (30.0, 12.5)] and s(30.0) == 12.5


def test_a_spread_scale_is_the_shrunk_clipped_rms_of_the_errors():
    """posterior.spread_scale (the prior count, the clip at CLIP_Z sigmas on either side,
    NaN errors dropped: **a spread narrowed or widened, an unmeasured pick's chance of
    fitting misstated**)."""
    from powertrain.decisions.posterior import CLIP_Z, PRIOR_N, spread_scale

    assert (PRIOR_N, CLIP_Z) == (3.0, 2.0)  # the tuned defaults the figures below rest on
    assert spread_scale(np.array([])) == 1.0
    assert spread_scale(np.array([0.5, -0.5])) == pytest.approx(np.sqrt(3.5 / 5))
    assert spread_scale([10.0]) == pytest.approx(np.sqrt(7 / 4))  # clipped to 2 sigmas
    assert spread_scale([-10.0]) == pytest.approx(np.sqrt(7 / 4))
    assert spread_scale([1.5, np.nan, np.inf]) == pytest.approx(np.sqrt(5.25 / 4))
    assert spread_scale([1.5], prior_n=1.0) == pytest.approx(np.sqrt(3.25 / 2))
    assert isinstance(spread_scale([1.0]), float)


def test_knob_space_is_standardised_logs_and_a_constant_knob_is_zero():
    """posterior.knob_space (the log, the clip of 0 at 1e-9, the mean, the sd, a constant
    column divided by 0)."""
    from powertrain.decisions.posterior import knob_space

    x = np.array([[1.0, 5.0, 0.0], [np.e, 5.0, 1.0], [np.e**2, 5.0, 1.0]])
    z = knob_space(x)
    assert z[:, 0] == pytest.approx(np.array([-1.0, 0.0, 1.0]) * np.sqrt(1.5))
    assert z[:, 1].tolist() == [0.0, 0.0, 0.0]
    lo = np.log(1e-9)
    col = np.array([lo, 0.0, 0.0])
    assert z[:, 2] == pytest.approx((col - col.mean()) / col.std())
    assert np.isfinite(z).all()


def test_the_kernel_is_the_squared_exponential_of_the_distance():
    """posterior._rbf (the distance, the half, the length squared, the clip of a rounding
    below 0)."""
    from powertrain.decisions.posterior import _rbf

    a = np.array([[0.0, 0.0], [1.0, 2.0]])
    b = np.array([[0.0, 0.0], [3.0, 0.0], [1.0, 2.0]])
    d2 = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
    assert _rbf(a, b, 1.0) == pytest.approx(np.exp(-0.5 * d2))
    assert _rbf(a, b, 2.0) == pytest.approx(np.exp(-0.5 * d2 / 4))
    big = np.array([[1e8, 1e8]])
    assert _rbf(big, big, 1.0)[0, 0] == 1.0  # a rounding below 0 is not a distance


def _correlation(g: np.ndarray, i: int, j: int) -> float:
    return float(np.corrcoef(g[i], g[j])[0, 1])


def test_field_draws_are_standard_normal_and_correlated_by_the_length():
    """posterior.field_draws's prior (the feature scale sqrt(2/f), the phases over a full
    turn, the frequencies divided by the length; length 0: independent draws)."""
    from powertrain.decisions.posterior import Field, field_draws

    x = np.array([[0.0], [0.5], [3.0], [1.0]])
    none = np.array([], dtype=int)
    g = field_draws(x, none, np.array([]), 20000, np.random.default_rng(0))
    assert g.shape == (4, 20000)
    assert g.std(axis=1) == pytest.approx(np.ones(4), abs=0.12)
    assert _correlation(g, 0, 1) == pytest.approx(np.exp(-0.125), abs=0.1)
    assert abs(_correlation(g, 0, 2)) < 0.2
    short = field_draws(x, none, np.array([]), 20000, np.random.default_rng(1), Field(0.5))
    assert _correlation(short, 0, 1) == pytest.approx(np.exp(-0.5), abs=0.12)
    assert _correlation(short, 0, 3) == pytest.approx(np.exp(-2.0), abs=0.12)
    assert Field() == Field(1.0, 256, 0.2)
    flat = field_draws(x, none, np.array([]), 5, np.random.default_rng(2), Field(0.0))
    assert flat == pytest.approx(np.random.default_rng(2).standard_normal((4, 5)))
    flat = field_draws(x, none, np.array([]), 5, np.random.default_rng(2), Field(-1.0))
    assert flat == pytest.approx(np.random.default_rng(2).standard_normal((4, 5)))


def test_field_draws_follow_the_measured_residuals_with_their_sign():
    """posterior.field_draws's conditioning (**the residual's sign turned**: a mode
    measured over its forecast makes its neighbours forecast under; the noise, the
    gram's diagonal, the measured rows)."""
    from powertrain.decisions.posterior import Field, field_draws

    x = np.linspace(0.0, 6.0, 25)[:, None]
    known = np.array([5, 20])
    g = field_draws(x, known, np.array([2.0, -1.0]), 4000, np.random.default_rng(3))
    # at a measured row: the residual, shrunk by the noise (0.2), with spread ~ the noise
    assert g[5].mean() == pytest.approx(2.0 / 1.04, abs=0.12)
    assert g[20].mean() == pytest.approx(-1.0 / 1.04, abs=0.12)
    assert g[5].std() == pytest.approx(0.2 / np.sqrt(1.04), abs=0.06)
    # a neighbour 0.25 units away follows; one 1.5 units away much less
    assert g[6].mean() == pytest.approx(2.0 / 1.04 * np.exp(-0.5 * 0.25**2), abs=0.2)
    assert 0.2 < g[11].mean() < 1.0
    loose = Field(noise=1.0)
    h = field_draws(x, known, np.array([2.0, -1.0]), 4000, np.random.default_rng(4), loose)
    assert h[5].mean() == pytest.approx(1.0, abs=0.15)  # a noisy residual counts half
    half = Field(noise=0.5)  # 42: the noise cubed in the gram (2 / 1.125, not 2 / 1.25)
    h = field_draws(x, known, np.array([2.0, -1.0]), 4000, np.random.default_rng(4), half)
    assert h[5].mean() == pytest.approx(2.0 / 1.25, abs=0.06)


def _table_loss_by_hand(cost, power, best, caps, no_pick, clip):
    """The definition in the module's docstring, one draw and one cap at a time."""
    n, draws = cost.shape
    out = {k: np.zeros((len(caps), n)) for k in ("credit", "wins", "improvement")}
    per_cap, beaten = np.zeros(len(caps)), np.zeros(len(caps))
    limit = clip if len(caps) > 1 else np.inf
    for c, cap in enumerate(caps):
        for d in range(draws):
            fit = [i for i in range(n) if power[i, d] <= cap]
            gains = {
                i: (max(best[c] - cost[i, d], 0) / best[c] if np.isfinite(best[c]) else no_pick)
                for i in fit
            }
            for i, gain in gains.items():
                out["improvement"][c, i] += gain / draws
            if not fit:
                continue
            w = min(fit, key=lambda i: (cost[i, d], i))
            won = cost[w, d] < best[c]
            per_cap[c] += gains[w] / draws
            beaten[c] += won / draws
            out["wins"][c, w] += won / draws
            credited = min(gains[w], limit) if np.isfinite(best[c]) else gains[w]
            out["credit"][c, w] += credited / draws
    return per_cap, beaten, out


@pytest.mark.parametrize("caps", [[20.0, 30.0, 40.0], [30.0]])
def test_table_loss_is_its_definition(caps):
    """loss.table_loss (**the cap compared with `<`: a rival at the cap not counted as
    fitting**; the loss relative to the pick, the clip, no pick's loss, the credit to
    the draw's winner, the wins, the improvement)."""
    from powertrain.decisions.loss import CLIP, NO_PICK, table_loss

    assert (NO_PICK, CLIP) == (1.0, 0.03)
    rng = np.random.default_rng(5)
    cost = rng.uniform(0.8, 1.3, (5, 40))
    power = rng.choice([15.0, 20.0, 25.0, 30.0, 35.0, 45.0], (5, 40))
    best = np.array([1.2, np.inf, 1.0])[: len(caps)] if len(caps) > 1 else np.array([1.1])
    caps_ = np.array(caps)
    got = table_loss(cost, power, best, caps_)
    per_cap, beaten, out = _table_loss_by_hand(cost, power, best, caps_, 1.0, 0.03)
    assert got.per_cap == pytest.approx(per_cap)
    assert got.beaten == pytest.approx(beaten)
    for name, want in out.items():
        assert getattr(got, name) == pytest.approx(want), name
    assert got.total(np.ones(len(caps))) == pytest.approx(per_cap.mean())
    assert got.total(np.arange(1, len(caps) + 1.0)) == pytest.approx(
        np.average(per_cap, weights=np.arange(1, len(caps) + 1.0))
    )
    other = table_loss(cost, power, best, caps_, no_pick=0.5, clip=0.01)
    per_cap, beaten, out = _table_loss_by_hand(cost, power, best, caps_, 0.5, 0.01)
    assert other.per_cap == pytest.approx(per_cap)
    assert other.credit == pytest.approx(out["credit"])


def test_table_loss_of_no_rivals_is_zero_per_cap():
    """loss.table_loss with no rival: zeros shaped by the caps."""
    from powertrain.decisions.loss import table_loss

    got = table_loss(np.zeros((0, 7)), np.zeros((0, 7)), np.array([1.0, 2.0]), np.array([10, 20]))
    assert got.per_cap.tolist() == [0.0, 0.0] and got.credit.shape == (2, 0)
    assert got.wins.shape == got.improvement.shape == (2, 0) and got.beaten.tolist() == [0, 0]
    tie = table_loss(np.array([[1.0]]), np.array([[10.0]]), np.array([1.0]), np.array([20.0]))
    assert tie.beaten.tolist() == [0.0] and tie.wins.tolist() == [[0.0]]  # 67: a tie beats


def test_a_caps_incumbent_is_the_fastest_measured_at_or_under_it():
    """loss._incumbents (**a pick measured over its cap, or one at the cap left out**; the
    cost of none as inf)."""
    from powertrain.decisions.loss import _incumbents

    measured = np.array([True, True, False, True])
    mu_p = np.array([20.0, 30.0, 5.0, 40.0])
    cost = np.array([3.0, 2.0, 1.0, 1.5])
    incumbent, best = _incumbents(measured, mu_p, cost, np.array([10.0, 20.0, 30.0, 40.0]))
    assert incumbent.tolist() == [-1, 0, 1, 3] and incumbent.dtype.kind == "i"
    assert best.tolist() == [np.inf, 3.0, 2.0, 1.5]


def test_a_rival_is_unmeasured_reaches_a_cap_and_could_beat_its_pick(monkeypatch):
    """loss._rivals (31: one that can at best tie its pick; a rival whose low power is
    exactly a cap judged against the next cap's pick or left out; the measured counted
    as rivals; the most promising kept when there are too many)."""
    from powertrain.decisions import loss

    measured = np.array([True, False, False, False, False, False])
    low_cost = np.array([0.1, 0.9, 2.0, 0.5, 0.5, 0.7])
    low_power = np.array([5.0, 20.0, 10.0, 40.0, 50.0, 30.0])
    best = np.array([1.0, 0.8])
    caps = np.array([20.0, 40.0])
    assert loss._rivals(measured, low_cost, low_power, best, caps).tolist() == [1, 3, 5]
    tie = np.array([0.1, 1.0, 2.0, 0.8, 0.5, 0.7])  # 31: at best as fast as the pick
    assert loss._rivals(measured, tie, low_power, best, caps).tolist() == [5]
    monkeypatch.setattr(loss, "MAX_RIVALS", 2)  # ratios: 0.9, 0.625, 0.875: keep 3 and 5
    assert loss._rivals(measured, low_cost, low_power, best, caps).tolist() == [3, 5]
    nopick = np.array([np.inf, 0.8])  # no pick at 20 W: any rival that fits is one
    low_cost[2] = 50.0
    # kept first: a cap without a pick, where every rival that fits removes a whole loss
    assert loss._rivals(measured, low_cost, low_power, nopick, caps).tolist() == [1, 2]
    monkeypatch.setattr(loss, "MAX_RIVALS", 6000)
    assert loss._rivals(measured, low_cost, low_power, nopick, caps).tolist() == [1, 2, 3, 5]


def _assess(
    energy: bool = False,
    draws: int = 3000,
    spreads: tuple = (0.1, 2.0),
    at10: tuple = (1.2, 26.0),
    caps: tuple = (30.0,),
    t0: float = 1.0,
    field=None,
):
    from powertrain.decisions.loss import assess
    from powertrain.decisions.posterior import Field, knob_space

    n = 30
    x = knob_space(np.exp(np.linspace(0.0, 3.0, n))[:, None])  # evenly spaced
    t = np.full(n, 1.0)
    t[0] = t0
    pred = (t, np.full(n, spreads[0]), np.full(n, 20.0), np.full(n, spreads[1]))
    measured = np.zeros(n, bool)
    measured[10] = True
    values = (np.full(n, np.nan), np.full(n, np.nan))
    values[0][10], values[1][10] = at10  # by default slower and hotter than forecast
    factor = np.full(n, 2.0)
    return assess(
        pred,
        measured,
        values,
        x,
        np.array(caps),
        factor,
        energy,
        draws,
        np.random.default_rng(7),
        Field() if field is None else field,
    )


def test_assess_forecasts_neighbours_of_a_measurement_by_its_residuals():
    """loss.assess (**the residuals' sign or scale turned: a neighbour of a mode measured
    hot forecast cool, its chance of fitting overstated**; the measured values in place
    of the forecast, the spread of a measured row 0, the cost's factor, the forecast)."""
    a = _assess()
    assert a.incumbent.tolist() == [10]
    assert a.mu_t[10] == 1.2 and a.mu_p[10] == 26.0 and a.mu_t[0] == 1.0 and a.mu_p[0] == 20.0
    assert a.sd_p[10] == 0.0 and a.sd_p[0] == 2.0
    assert a.cost[10] == pytest.approx(2.4) and a.cost[0] == pytest.approx(2.0)
    assert 10 not in a.rivals and len(a.rivals) == 29
    f = a.forecast
    assert np.isnan(f[:, 10]).all() and f.shape == (4, 30)
    # the neighbour follows the measured residuals (3 sigma of power, +18 % of time)
    assert f[2, 11] == pytest.approx(20 + 2 * 3 / 1.04, abs=0.6)
    assert f[0, 11] == pytest.approx(np.log(1.2) / 1.04, abs=0.03)
    assert f[3, 11] < 0.6 and f[1, 11] < 0.04  # and is sure of it
    # the far end barely: the prior's mean and spread
    assert f[2, 29] == pytest.approx(20.0, abs=0.8) and f[3, 29] == pytest.approx(2.0, abs=0.3)
    assert f[0, 29] == pytest.approx(0.0, abs=0.04) and f[1, 29] == pytest.approx(0.1, abs=0.02)
    # the far rows fit 30 W in almost every draw and beat the pick at 2.4
    assert a.loss.beaten[0] > 0.95
    # and the fastest of them, at about 2.0 of the pick's 2.4, is the loss
    assert 1 - 2.0 / 2.4 - 0.02 < a.loss.per_cap[0] < 0.3


def test_assess_in_energy_counts_the_power_in_the_cost():
    """loss.assess with ``energy``: the cost is time x factor x power, for the measured and
    in the rivals' draws (136, 138: time alone or time / power there, a loss near 1)."""
    a = _assess(energy=True, draws=200)
    assert a.cost[10] == pytest.approx(1.2 * 2 * 26) and a.cost[0] == pytest.approx(40.0)
    # the rivals' energy (about 2 x 20) against the pick's 62.4
    assert 0.25 < a.loss.per_cap[0] < 0.45


def test_assess_keeps_a_spread_of_zero_or_under_a_watt():
    """loss.assess 35, 43 (**a forecast spread of 0 not clipped: 0/0, every forecast
    NaN**), 47 (a power spread under 1 W raised to 1 W: a chance of fitting understated)."""
    # measured as forecast in time (0/0 unclipped), hotter in power: rivals in energy
    a = _assess(energy=True, draws=400, spreads=(0.0, 0.0), at10=(1.0, 25.0))
    assert (
        len(a.rivals) == 29
        and np.isfinite(a.forecast[:, a.rivals]).all()
        and np.isfinite(a.loss.per_cap).all()
    )
    # measured as forecast in power (0/0 unclipped), slower in time: rivals in time
    a = _assess(draws=400, spreads=(0.0, 0.0), at10=(1.2, 20.0))
    assert len(a.rivals) == 29 and np.isfinite(a.forecast[:, a.rivals]).all()
    b = _assess(draws=3000, spreads=(0.1, 0.5), at10=(1.0, 20.0))
    assert b.forecast[3, 29] == pytest.approx(0.5, abs=0.1)


def test_a_rival_is_screened_by_its_optimistic_cost_and_power():
    """loss.assess 59, 62 (the optimistic cost divided by the factor or by the spread:
    every configuration a rival), 65 (the optimistic power ``pp - 3 sd`` as ``pp - 3 / sd``:
    **a configuration that could fit a low cap where nothing is measured is no rival:
    the low cap's table never explores it**)."""
    slow = _assess(draws=50, t0=2.0)  # 2.0 x 0.74 x 2 = 2.96 over the pick's 2.4
    assert 0 not in slow.rivals and len(slow.rivals) == 28
    low = _assess(draws=50, t0=2.0, caps=(15.0, 30.0))  # 20 - 3 x 2 = 14 W: may fit 15 W
    assert 0 in low.rivals and low.incumbent.tolist() == [-1, 10]


@pytest.mark.parametrize("at10, log_t, power", [((3.0, 4.0), 6, -6), ((1 / 3, 34.0), -6, 6)])
def test_a_measured_residual_counts_for_at_most_six_sigmas(at10, log_t, power):
    """loss.assess 77, 78, 87, 88, 91 (the clip of a measured residual at 6 sigmas dropped
    or moved: one odd measurement drags its neighbours' forecasts further)."""
    a = _assess(draws=3000, at10=at10)
    assert a.forecast[0, 11] == pytest.approx(0.1 * log_t / 1.04, abs=0.03)
    assert a.forecast[2, 11] == pytest.approx(20 + 2 * power / 1.04, abs=0.6)


def test_assess_draws_with_the_field_it_is_given():
    """loss.assess 114 (the field dropped for the time draws: correlated where
    independent draws were asked for)."""
    from powertrain.decisions.posterior import Field

    a = _assess(draws=3000, field=Field(0.0))
    assert a.forecast[0, 11] == pytest.approx(0.0, abs=0.01)
    assert a.forecast[2, 11] == pytest.approx(20.0, abs=0.2)
