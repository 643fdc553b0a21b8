"""Tests written for run G's survivors (docs/method-notes.md, "Run G"): the hard cap, the
safe set, the contest and random samplers, ``redecide``, ``load_table`` and the Tuner's
step back.

Why: these are the paths where one flipped comparison explores over the cap, runs a pick
over it, or tells the study a wrong measurement. Each test names the mutants it kills
(mutmut's name, module.x_function__mutmut_N), so a later run can tell a new survivor
from an old one.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import powertrain as pt
from powertrain.backends.replay import ReplayBackend

GPU = ["power_limit_w", "batch_size"]


class _FastSensorBoard(ReplayBackend):
    """A replayed GPU whose sensor reads eight times per ~half-second minibatch, with
    readings that differ per reading and minibatch times that differ per minibatch, and
    whose clock starts at 100 s: none of what the step back tells is equal by chance.
    The sensor lags: its first two readings after a change still show the idle board."""

    IDLE_W, STEP_W = 5.0, 0.5
    TIMES_MS = (500.0, 375.0, 625.0, 250.0)  # the warm-up, then the timed minibatches

    def __init__(self, rows: list[tuple[float, int, float, float]]):
        df = pd.DataFrame(rows, columns=[*GPU, "time_ms", "power_w"])
        super().__init__(df, config_columns=GPU, seconds_per_config=10.0, sample_period_s=0.0625)
        self._t = 100.0
        self._k = 0  # minibatches since the last change

    def configure(self, config) -> None:
        super().configure(config)
        self._k = 0

    def run_minibatch(self) -> float:
        super().run_minibatch()
        self._t -= float(self.table["time_ms"].iloc[self._current]) / 1e3  # undo its time
        ms = self.TIMES_MS[self._k % len(self.TIMES_MS)]
        self._k += 1
        self._t += ms / 1e3
        return ms

    def power_samples(self, start: float, end: float) -> np.ndarray:
        period, end = self.sample_period_s, min(end, self._t)
        k0, k1 = math.ceil(start / period - 1e-12), math.ceil(end / period - 1e-12)
        out = []
        for k in range(k0, k1):
            t = k * period
            seg = [(s, w) for s, w in self._segments if s <= t]
            if not seg:
                continue
            s, w = seg[-1]
            since = round((t - s) / period)
            out.append((t, self.IDLE_W if since < 2 else w + self.STEP_W * since))
        return np.array(out, float).reshape(-1, 2)


def test_a_step_back_tells_the_timed_minibatches_and_the_readings_after_the_sensors_lag():
    """TunerLoop._step_back_11, _12 (the warm-up guard at 2 or 3 minibatches: the hit
    left a minibatch later), _47 (the told time without the first timed minibatch), _32-35
    (the sensor's lag: readings of the idle board counted, or the reading at the lag
    dropped), _71 (the board seconds as ``now + t_mode``), _63 (the told row without its
    cap). Run D's _step_back 11, 12, 40, 63, 66 (not killed: its replayed board read one
    constant power at 1 Hz) are these. A sensor faster than the minibatches, readings that
    differ and a clock not at 0 tell them apart."""
    from test_mutants import _hard_cap_tuner_until_hit

    board = _FastSensorBoard([(100.0, 16, 300.0, 40.0), (200.0, 16, 200.0, 45.0)])
    said: list[str] = []
    tuner = _hard_cap_tuner_until_hit(board, said)
    assert tuner.hits == [0] and tuner.minibatch == 2  # the warm-up and one timed minibatch
    row = tuner.measurements().iloc[0]
    # set at 100 s; 14 readings, every 1/16 s, in the 0.875 s of the two minibatches; the
    # first two show the idle board, the 12 after the lag 40 W + 0.5 W x (2..13)
    assert row["power_limit_w"] == 100.0 and row["index"] == 0 and row["cap"] == 30.0
    assert row["time_ms"] == 375.0 and row["n_minibatches"] == 1
    assert row["power_w"] == pytest.approx(40.0 + 0.5 * 7.5) and row["n_power_samples"] == 12
    assert row["profile_s"] == pytest.approx(0.875) and row["stable"] in (False,)
    assert said[-1] == "cap hit at power_limit_w=100 batch_size=16 (43.8 W): stepping back"
    tuner.close()


# ---------------------------------------------------------------- the contest --
def _contest(rows: list[tuple], caps=(30.0,), objective="time", rng=None, **kw):
    """contest over rows of (ms, W, measured, factor), spreads 1 % of time and 0.5 W."""
    from powertrain.decisions.samplers.contest import contest

    mu_t, mu_p, measured, factor = (np.array(c) for c in zip(*rows))
    return contest(mu_t, 0.01 * mu_t, mu_p.astype(float), np.full(len(rows), 0.5),
                   measured.astype(bool), np.array(caps), factor.astype(float), objective,
                   rng=np.random.default_rng(7) if rng is None else rng, **kw)  # fmt: skip


#: measured 10 ms at 20 W and 8 ms at 28 W; unmeasured 9 ms at 15 W (cheapest in energy)
#: and 10.5 ms at 19.5 W (near the measured pick in energy: its 3-sigma bound is under it)
ROWS = [(10.0, 20.0, 1, 1.0), (8.0, 28.0, 1, 1.0), (9.0, 15.0, 0, 1.0), (10.5, 19.5, 0, 1.0)]
#: none of these can win under 30 W: measured over it, 3 sigma over it (33 W), 3 sigma
#: slower than the pick in time (20 ms), in energy (12 ms at 21 W: 3 sigma above 200 mJ)
HOPELESS = [(5.0, 40.0, 1, 1.0), (6.0, 33.0, 0, 1.0), (20.0, 22.0, 0, 1.0), (12.0, 21.0, 0, 1.0)]


@pytest.mark.parametrize("objective", ["time", "energy"])
def test_the_contest_weighs_time_or_energy_and_ignores_what_cannot_win(objective):
    """contest_21-27, _78-88, _129-134 (energy ignored, divided, or its 3-sigma bound
    wrong), _75, _109, _110, _113 (the screen of what cannot win: a measured
    configuration over the cap, one 3 sigma over the cap or 3 sigma slower taken as a
    rival), _153 (a last rival that never wins given the chance of the one before). What
    cannot win changes nothing: the draws of the others are the same."""
    c = _contest(ROWS + HOPELESS, objective=objective)
    alone = _contest(ROWS, objective=objective)
    n = len(ROWS)
    assert c.incumbent.tolist() == alone.incumbent.tolist() == [1 if objective == "time" else 0]
    np.testing.assert_array_equal(c.probs[:, :n], alone.probs)
    np.testing.assert_array_equal(c.improvement[:, :n], alone.improvement)
    assert c.beaten.tolist() == alone.beaten.tolist()
    assert not c.probs[:, n:].any() and not c.improvement[:, n:].any()
    if objective == "time":  # 8 ms measured: nothing unmeasured is faster
        assert c.beaten[0] == 0.0 and c.probs[0].tolist() == [0, 1, 0, 0, 0, 0, 0, 0]
    else:  # 200 mJ measured; 9 ms at 15 W is 135 mJ, 10.5 ms at 19.5 W about 205 mJ
        assert c.probs[0, 2] > 0.99 and c.beaten[0] == pytest.approx(c.probs[0, 2])
        assert c.improvement[0, 2] == pytest.approx(1 - 135 / 200, abs=0.01)
        assert 0 < c.improvement[0, 3] < 0.02 and c.probs[0, 3] < 0.01


def test_the_contest_costs_include_the_factor_and_each_cap_gets_its_pick():
    """contest_13, _16, _18, _22, _72, _130 (the factor, epochs to accuracy, ignored or
    divided: here a configuration twice as slow per minibatch but needing half the
    minibatches), _174 (without a measured pick, a rival's improvement is its chance),
    _105, _106 (the measured pick's chance with no rival: 1), _118 (a cap
    without rivals ended the loop: the next cap got no pick)."""
    rows = [(10.0, 20.0, 1, 1.0), (9.0, 25.0, 1, 2.0), (12.0, 20.0, 0, 0.5)]
    c = _contest(rows)
    assert c.incumbent.tolist() == [0] and c.beaten[0] > 0.99 and c.probs[0, 2] > 0.99
    assert c.improvement[0, 2] == pytest.approx(0.4, abs=0.01)  # 6 against 10
    c = _contest([(5.0, 40.0, 1, 1.0), *ROWS], caps=(40.0, 30.0))  # nothing beats 5 ms
    assert c.incumbent.tolist() == [0, 2] and c.beaten[0] == 0.0
    assert c.probs[0, 0] == 1.0 and c.probs[1, 2] == 1.0
    c = _contest([(10.0, 20.0, 1, 1.0), (12.0, 15.0, 0, 1.0)], caps=(17.0,))  # nothing fits
    assert c.incumbent.tolist() == [-1] and c.improvement[0, 1] == c.probs[0, 1] > 0.99


def test_the_contest_draws_from_the_studys_generator_or_a_fixed_one():
    """contest_6 (the study's generator ignored: every seed the same draws), _7, _8 (no
    generator given: not the fixed seed 0, so a decision is not repeatable)."""
    from powertrain.decisions.samplers.contest import contest

    args = (np.array([10.0, 10.2]), np.array([0.0, 0.3]), np.array([20.0, 20.0]),
            np.array([0.0, 0.5]), np.array([True, False]), np.array([30.0]))  # fmt: skip
    fixed = contest(*args).probs
    assert contest(*args, rng=np.random.default_rng(0)).probs.tolist() == fixed.tolist()
    assert contest(*args, rng=np.random.default_rng(1)).probs.tolist() != fixed.tolist()


def _contest_study(acquisition: str = "improvement"):
    """A study over ROWS and HOPELESS under 30 W, in energy; what the contest sampler
    reads of it, and the model's estimates (the measured rows' predictions off)."""
    from types import SimpleNamespace

    t, p, m, f = (np.array(c, float) for c in zip(*(ROWS + HOPELESS)))
    m, f[3] = m.astype(bool), 0.9  # 10.5 ms at 19.5 W in 0.9 of the minibatches: 184 mJ
    study = SimpleNamespace(
        settings=SimpleNamespace(objective="energy", draws=256, acquisition=acquisition),
        time_col="time_ms", measured=m, m_time=np.where(m, t, np.nan),
        m_power=np.where(m, p, np.nan), caps=np.array([30.0]), factor=f,
        rng=np.random.default_rng(7),
    )  # fmt: skip
    est = pd.DataFrame({"time_ms": np.where(m, 3 * t, t), "time_ms_std": 0.01 * t,
                        "power_w": np.where(m, p / 2, p), "power_w_std": 0.5})  # fmt: skip
    return study, est


@pytest.mark.parametrize("acquisition", ["improvement", "probability"])
def test_the_contest_sampler_judges_by_the_measurements_and_chooses_what_may_win(acquisition):
    """ContestSampler.assess (no fast test ran it: the measured rows' values, the spreads,
    the objective, the factor (_32), the study's generator and draws passed on), .choose (the
    acquisition, nothing measured or hopeless chosen, the best first, at most n) and _why
    (what a choice is said to be)."""
    from powertrain.decisions.samplers.contest import ContestSampler, contest

    study, est = _contest_study(acquisition)
    sampler = ContestSampler()
    standing = sampler.assess(study, est)
    t, p, m, f = (np.array(c, float) for c in zip(*(ROWS + HOPELESS)))
    f[3] = 0.9
    want = contest(t, 0.01 * t, p, np.full(len(t), 0.5), m.astype(bool), np.array([30.0]), f,
                   "energy", 256, np.random.default_rng(7))  # fmt: skip
    assert standing.incumbent.tolist() == [0] and standing.incumbent.dtype.kind == "i"
    assert standing.beaten.tolist() == want.beaten.tolist()
    assert standing.improvement.tolist() == want.improvement.max(axis=1).tolist()
    assert standing.detail[1] is est
    np.testing.assert_array_equal(standing.detail[0].improvement, want.improvement)
    np.testing.assert_array_equal(standing.detail[0].probs, want.probs)
    take, why = sampler.choose(study, standing, 3)
    gain = want.improvement if acquisition == "improvement" else want.probs
    assert take.tolist() == [2, 3][: int((gain[0, 2:4] > 0).sum())] and take[0] == 2
    assert why[0] == (
        f"candidate under 30 W, {100 * want.probs[0, 2]:.0f} % chance of being fastest "
        "(predicted 9 ms, 15.0 W)"
    )
    assert sampler.choose(study, standing, 1)[0].tolist() == [2]


def test_the_contest_sampler_skips_the_measured_and_breaks_ties_in_table_order():
    """ContestSampler.choose_9 (a measured configuration's chance counted: measured
    again), _20, _22, _25 (ties not in table order: which of equal configurations is
    measured depends on the sort)."""
    from types import SimpleNamespace

    from powertrain.decisions.samplers.contest import Contest, ContestSampler
    from powertrain.decisions.terminator import Standing

    probs = np.tile([0.5, 0.2, 0.5, 0.1], 20)[None, :] / 20
    measured = np.arange(80) == 0
    study = SimpleNamespace(measured=measured, caps=np.array([30.0]), time_col="time_ms",
                            settings=SimpleNamespace(acquisition="probability"))  # fmt: skip
    est = pd.DataFrame({"time_ms": np.ones(80), "power_w": np.ones(80)})
    c = Contest(probs, np.array([0]), np.array([0.5]), np.zeros((1, 80)))
    take, _ = ContestSampler().choose(study, Standing(c.incumbent, c.beaten, detail=(c, est)), 6)
    assert take.tolist() == [2, 4, 6, 8, 10, 12]


def test_a_contest_choice_says_each_cap_it_may_win_under():
    """_why_1-18: the caps where the configuration has a chance (all caps if none), its
    best chance, its predicted time in the time column's unit and its power."""
    from powertrain.decisions.samplers.contest import _why

    row = pd.Series({"epoch_s": 12.345, "power_w": 19.96})
    caps = np.array([20.0, 30.0, 40.0])
    assert _why(np.array([0.0, 0.25, 0.5]), caps, row, "epoch_s") == (
        "candidate under 30-40 W (2 caps), 50 % chance of being fastest (predicted 12.35 s, 20.0 W)"
    )
    assert _why(np.array([0.0, 0.0, 0.0]), caps, row, "epoch_s").startswith(
        "candidate under 20-40 W (3 caps), 0 % chance"
    )
    assert _why(np.array([0.0, 0.4, 0.0]), caps, row, "epoch_s").startswith(
        "candidate under 30 W, 40 % chance"
    )


# ---------------------------------------------------------- the random sampler --
def _random_study(measured: list[bool], objective: str = "time"):
    from types import SimpleNamespace

    m = np.array(measured)
    t = np.where(m, np.linspace(10.0, 5.0, len(m)), np.nan)
    p = np.where(m, np.linspace(15.0, 40.0, len(m)), np.nan)
    return SimpleNamespace(
        measured=m, m_time=t, m_power=p, factor=np.ones(len(m)), caps=np.array([30.0, 20.0]),
        settings=SimpleNamespace(objective=objective), rng=np.random.default_rng(3),
    )  # fmt: skip


def test_the_random_sampler_never_draws_a_configuration_twice_or_a_measured_one():
    """RandomSampler.start_8, _11, _12 and .choose_7, _10, _15 (drawn with replacement:
    a configuration measured twice in one round), .choose_3 (drawn among the measured
    ones: measured again, the rest never)."""
    from powertrain.decisions.samplers.random import RandomSampler

    sampler = RandomSampler()
    study = _random_study([False] * 30)
    first, why = sampler.start(study, np.arange(30), 30)
    assert sorted(first.tolist()) == list(range(30)) and why == "random start"
    study = _random_study([i % 3 == 0 for i in range(40)])
    take, why = sampler.choose(study, sampler.assess(study, None), 40)
    assert sorted(take.tolist()) == [i for i in range(40) if i % 3] and why == ["random"] * 26


def test_the_random_samplers_measured_pick_is_the_cheapest_under_each_cap_by_the_objective():
    """RandomSampler.assess_3, _5, _9 (the objective, or the power, not passed on: the
    fastest taken for the least energy)."""
    from powertrain.decisions.samplers.random import RandomSampler

    sampler = RandomSampler()
    measured = [True] * 6  # 10 ms at 15 W ... 5 ms at 40 W
    study = _random_study(measured)
    assert sampler.assess(study, None).incumbent.tolist() == [3, 1]  # 7 ms at 30 W, 9 at 20
    study = _random_study(measured, "energy")
    assert sampler.assess(study, None).incumbent.tolist() == [0, 0]  # 150 mJ


# ------------------------------------------------------------------- redecide --
def test_each_redecision_keeps_to_the_candidates_and_options_and_adds_up():
    """CapController.redecide_9, _16 (the controller's candidates not passed: a re-decision
    over every configuration the board has, outside those the decision was given), _19
    (its tolerance and decide options dropped), _30 (the new study not kept: later caps
    judged by the old one), _36, _38 (a second re-decision's configurations and board
    seconds counted instead of added)."""
    from test_decide import KEYS, QUICK

    from powertrain.data.corpora import load_corpus

    table = load_corpus("orin-agx_mobilenetv3_bs16").sample(300, random_state=0)
    reference = pt.Predictor.from_pretrained("orin-agx/resnet18")
    some = table[KEYS].iloc[:150]
    d = pt.decide(ReplayBackend(table), reference, 40.0, budget=6, seed=0, candidates=some,
                  transfer_options=QUICK)  # fmt: skip
    board = ReplayBackend(table)
    ctl = pt.CapController.from_decision(d, board=board, reference=reference, budget=3,
                                         tolerance=0.2, transfer_options=QUICK, seed=5)  # fmt: skip
    first = ctl.redecide(18.0)
    ctl.redecide(15.0)
    assert first >= 1 and ctl.n_measured == sum(n for _, n in ctl.redecided) == board.n_measured
    assert ctl.board_s == pytest.approx(board.now()) and len(ctl.measured()) == ctl.n_measured
    assert len(ctl.estimates) == 150 and ctl.study is not d.study
    assert ctl.study.caps.tolist() == [15.0] and len(ctl.study.cands) == 150
    assert (ctl.study.settings.tolerance, ctl.study.settings.seed) == (0.2, 5)


# ----------------------------------------------------------------- load_table --
def test_a_cap_table_is_checked_cell_by_cell_and_a_pick_at_its_cap_fits(tmp_path):
    """load_table_54 (``>`` -> ``>=``: a pick exactly at its cap refused), _8, _14-16 (a
    table without ``measured`` or ``reason`` taken, or not named), _19, _23, _24, _27-29
    (a cap of 0 W taken, or the file not named), _32-38 (the cap that has two rows), _3,
    _5-7 (what the file was read as), _47 and the defect it showed: a power that is not a
    number ("99 W") was read as no power and passed the cap check."""
    from powertrain.decisions.decide import load_table
    from powertrain.errors import DataError

    path = tmp_path / "caps.csv"
    good = pd.DataFrame({"power_cap_w": [20.0, 30.0, 40.0], "power_limit_w": [100.0, 150, 200],
                         "power_w": [20.0, 29.5, None], "measured": [True, True, False],
                         "reason": ["measured", "measured", "nothing fits"]})  # fmt: skip

    def refused(df: pd.DataFrame, match: str) -> None:
        df.to_csv(path, index=False)
        with pytest.raises(DataError, match=match):
            load_table(path)

    good.to_csv(path, index=False)
    assert load_table(path)["power_w"].tolist()[:2] == [20.0, 29.5]  # 20 W under 20 W fits
    refused(good.drop(columns="reason"), rf"^{path}: not a cap table: missing column\(s\) reason$")
    refused(good.drop(columns=["measured", "reason"]), r"missing column\(s\) measured, reason$")
    refused(good.assign(power_cap_w=[20.0, 0.0, 40.0]),
            rf"^{path}: row 2, column 'power_cap_w': 0 must be > 0")  # fmt: skip
    refused(good.assign(power_cap_w=[20.0, 30.0, 20.0]).iloc[[0, 1, 2, 1]],
            rf"^{path}: the cap 20 W has two rows$")  # fmt: skip
    refused(good.assign(power_w=["20", "99 W", None]),
            rf"^{path}: row 2, column 'power_w': not a number of watts$")  # fmt: skip
    refused(good.assign(power_w=[20.0, 30.5, None]), rf"^{path}: row 2: the pick draws 30.5 W")
    path.write_text("")
    with pytest.raises(DataError, match=rf"^cap table {path}: the file is empty"):
        load_table(path)


# ------------------------------------------------------------------- hard cap --
def _hard_study(device, cap: float = 30.0, log: list | None = None, history=None):
    """What HardCap reads of a study: 36 Orin AGX modes at batch size 16, none measured."""
    from itertools import product
    from types import SimpleNamespace

    grid = product([4, 8, 12], [1113.6, 1728.0], [408.0, 612.0, 816.0], [2133.0, 3199.0])
    cands = pd.DataFrame(list(grid), columns=["cores", "cpu_mhz", "gpu_mhz", "mem_mhz"])
    cands["batch_size"] = 16
    n = len(cands)
    return SimpleNamespace(caps=np.array([cap]), device=device, cands=cands,
                           measured=np.zeros(n, bool), m_power=np.full(n, np.nan),
                           log=log or [], history=lambda: history)  # fmt: skip


def test_the_hard_caps_known_safe_start_is_what_the_presets_within_the_cap_vouch_for():
    """HardCap.__init___9-25, _30, _35 (the spec's monotone knobs not passed: a preset
    vouches only for itself), _44, _46-51, _53-61, _63-65 and _presets_1, _2 (the presets
    within the cap not seeded: nothing known safe, the start from the model alone), _36,
    _37 (the confidence and reach asked for dropped)."""
    from powertrain.decisions.hard_cap import HardCap

    study = _hard_study(pt.get_device("orin-agx"))
    hard = HardCap(study, confidence=0.9, reach=0.1)
    c = study.cands
    # MODE_15W and MODE_30W fit 30 W; MODE_30W is 8 cores, 1728 MHz CPU, 612 MHz GPU
    vouched = (c.cores <= 8) & (c.cpu_mhz <= 1728) & (c.gpu_mhz <= 612)
    assert hard.set.known().tolist() == vouched.tolist() and vouched.sum() == 16
    assert (hard.set.confidence, hard.set.reach) == (0.9, 0.1)
    assert not HardCap(_hard_study(pt.get_device("orin-agx"), cap=10.0)).set.known().any()


def test_a_device_without_a_presets_table_seeds_nothing():
    """_presets_3 (what a device returns that is not a table taken as its presets), and
    HardCap.__init___62 (presets that lack a candidate column, here a spec figure the
    family reference reads, seeded anyway: the hard cap refused to start)."""
    from types import SimpleNamespace

    from powertrain.decisions.hard_cap import HardCap

    for device in (None, SimpleNamespace(presets=lambda: None)):
        assert not HardCap(_hard_study(device)).set.known().any()
    study = _hard_study(pt.get_device("orin-agx"))
    study.cands["gpu_cuda_cores"] = 2048
    HardCap(study)  # the presets name no CUDA core count: they vouch for nothing here


def test_the_first_step_back_after_one_window_weighs_that_windows_noise():
    """HardCap.__init___39 (the noise cache starting at one window: after the first
    measured window, its readings' noise not read and three readings 1 W over a 30 W cap
    that agree taken as a hit). With that window's 10 % spread they are within the noise."""
    from powertrain.decisions.hard_cap import HardCap

    window = pd.DataFrame({"power_w": [28.0], "power_w_std": [2.8], "n_power_samples": [100]})
    hard = HardCap(_hard_study(None, log=[object()], history=window))
    assert not hard.step_back(0, np.array([31.0, 31.0, 31.0])) and hard.hits == []
    hard = HardCap(_hard_study(None, log=[object()], history=None))  # no spread known
    assert hard.step_back(0, np.array([31.0, 31.0, 31.0])) and hard.hits == [0]


# ------------------------------------------------------------------- safe set --
def test_the_step_back_weighs_the_standard_error_of_the_mean_not_one_readings_spread():
    """over_beyond_noise_29 (the standard error times sqrt(n), not over it: 16 readings
    averaging 1 W over a 30 W cap with a 2 % spread never a hit, the board left over the
    cap)."""
    from powertrain.decisions.safe_set import SafeSet

    s = SafeSet(pd.DataFrame({"gpu_mhz": [100.0, 200.0]}), 30.0, confidence=0.99)
    readings = np.tile([30.38, 31.62], 8)  # mean 31 W, sd 0.64 W: standard error 0.16 W
    assert s.step_back(1, readings) and s.hits == [1]


def test_seeds_and_presets_vouch_for_what_each_one_covers():
    """SafeSet.seed_8 (a second seed replaced what the first vouched for), preset_seeds_4
    (presets without a power budget: one of them taken as safe), _11 (a preset budgeted
    at the cap itself left out), _25, _26 (the presets' own batch size kept: no seed has
    the batch sizes asked for)."""
    from powertrain.decisions.safe_set import SafeSet, preset_seeds

    cands = pd.DataFrame({"gpu_mhz": [100.0, 200.0, 100.0, 200.0], "cores": [2, 2, 4, 4],
                          "batch_size": 16})  # fmt: skip
    s = SafeSet(cands, 30.0, monotone={"gpu_mhz": 1, "cores": 1})
    s.seed([{"gpu_mhz": 200.0, "cores": 2, "batch_size": 16},
            {"gpu_mhz": 100.0, "cores": 4, "batch_size": 16}])  # fmt: skip
    assert s.known().tolist() == [True, True, True, False]
    presets = pd.DataFrame({"name": ["low", "mid", "top"], "budget_w": [15.0, 30.0, None],
                            "gpu_mhz": [100.0, 200.0, 300.0], "batch_size": [1, 1, 1]})  # fmt: skip
    seeds = preset_seeds(presets, 30.0, [8, 16])
    assert seeds[["name", "batch_size"]].values.tolist() == [
        ["low", 8], ["low", 16], ["mid", 8], ["mid", 16]]  # fmt: skip
    assert preset_seeds(presets.drop(columns="budget_w"), 30.0, [16]).empty


def test_the_set_grows_to_a_configuration_predicted_at_the_cap():
    """SafeSet.grow_19 (``<=`` -> ``<``: a configuration whose predicted power is the cap
    itself not grown to, the study stopped "exhausted")."""
    from powertrain.decisions.safe_set import SafeSet

    s = SafeSet(pd.DataFrame({"gpu_mhz": [100.0, 200.0, 300.0]}), 30.0)
    s.tell(0, 20.0)
    assert s.grow(np.array([20.0, 30.0, 31.0]), np.array([True, False, False])) == 1


def test_a_windows_noise_counts_from_two_readings_and_a_count_that_is_text_is_left_out():
    """reading_noise_44, _45 (a window of two readings, one degree of freedom, left out),
    _35 (a reading count that is not a number raised mid-training instead of being left
    out)."""
    from powertrain.decisions.safe_set import reading_noise

    rows = pd.DataFrame({"power_w": [20.0, 30.0], "power_w_std": [2.0, 3.0],
                         "n_power_samples": [2, "many"]})  # fmt: skip
    assert reading_noise(rows) == (pytest.approx(0.1**2), 1)


def test_a_decisions_over_cap_columns_name_both_shares_or_nan():
    """over_cap_columns_2, _3, _8-12 (the two columns of a decision row: their names, and
    nan without measured rows)."""
    from powertrain.decisions.safe_set import over_cap_columns

    rows = pd.DataFrame({"time_ms": [10.0, 30.0], "power_w": [20.0, 40.0]})
    got = over_cap_columns(rows, 30.0)
    assert got == {"over_cap_time_share": 0.75, "over_cap_energy_share": pytest.approx(1200 / 1400)}
    got = over_cap_columns(None, 30.0)
    assert list(got) == ["over_cap_time_share", "over_cap_energy_share"]
    assert all(math.isnan(v) for v in got.values())


def test_a_safe_set_takes_its_arguments_edges_and_a_knob_whose_power_falls():
    """SafeSet.__init___6, _10, _15 (a cap under 1 W, a confidence of 0.5 or a reach of 0
    refused), _25, _26 (a knob whose power falls as it rises, -1, refused), _55 (a knob
    whose range is under 1 not scaled: trusted four times as far from what is known)."""
    from powertrain.decisions.safe_set import SafeSet

    cands = pd.DataFrame({"gpu_ghz": [0.0, 0.1, 0.2, 0.3, 0.4, 0.5], "idle": 1.0})
    s = SafeSet(cands, 0.5, monotone={"idle": -1}, confidence=0.5, reach=0.0)
    assert (s.cap, s.confidence, s.reach) == (0.5, 0.5, 0.0)
    s = SafeSet(cands, 30.0, monotone={"gpu_ghz": -1})  # power falls as it rises
    s.tell(2, 20.0)  # 0.2 GHz measured under the cap: so is everything above it
    assert s.known().tolist() == [False, False, True, True, True, True]
    s = SafeSet(cands, 30.0, reach=0.25)  # no physics: the model trusted near 0.2 GHz
    s.tell(2, 20.0)
    near = s.safe(np.full(6, 10.0), np.zeros(6))
    assert near.tolist() == [False, True, True, True, False, False]  # 0.1 GHz of 0.5 apart


def test_the_share_over_the_cap_counts_minibatches_or_board_seconds():
    """over_cap_share_12, _16, _21 (a row without a minibatch count counted as two, or its
    text count raising), _40 (a row exactly at the cap counted as over it), _27-30 (rows
    without minibatch times weighed by their board seconds)."""
    from powertrain.decisions.safe_set import over_cap_share

    rows = pd.DataFrame({"time_ms": [10.0, 30.0, 20.0], "power_w": [30.0, 40.0, 25.0],
                         "n_minibatches": [2, None, "n/a"]})  # fmt: skip
    time_share, energy_share = over_cap_share(rows, 30.0)  # 20, 30 and 20 ms timed
    assert time_share == pytest.approx(30 / 70) and energy_share == pytest.approx(1200 / 2300)
    rows = pd.DataFrame({"profile_s": [60.0, 30.0], "power_w": [20.0, 40.0]})
    assert over_cap_share(rows, 30.0) == (pytest.approx(1 / 3), pytest.approx(0.5))
