"""Deciding with the board in the loop: the replay board, the confirmation contract, the
stopping rule, and following a cap that changes mid-run."""

import numpy as np
import pandas as pd
import pytest

import powertrain as pt
from powertrain.backends import ReplayBackend
from powertrain.data.corpora import load_corpus
from powertrain.decisions.samplers.contest import contest
from powertrain.errors import DataError, ProfilingError

# slow tests are marked one by one: the rest are part of `make test-fast`

KEYS = ["cores", "cpu_mhz", "gpu_mhz", "mem_mhz", "batch_size"]
#: a quick transfer: these tests check the loop's contract, not the model's accuracy
QUICK = {"transfer_epochs": 30, "transfer_cv_folds": 2}


@pytest.fixture(scope="module")
def table():
    """300 recorded configurations of the twin's MobileNetV3 corpus."""
    corpus = load_corpus("orin-agx_mobilenetv3_bs16")
    return corpus.sample(300, random_state=0).reset_index(drop=True)


@pytest.fixture(scope="module")
def reference():
    return pt.Predictor.from_pretrained("orin-agx/resnet18")


# ------------------------------------------------------------------------ replay --
def test_replay_answers_from_the_table_and_counts_board_time(table):
    board = ReplayBackend(table)
    got = board.measure(table.iloc[[3, 7]][KEYS])
    assert got["time_ms"].tolist() == table["time_ms"].iloc[[3, 7]].tolist()
    assert got["power_w"].tolist() == table["power_w"].iloc[[3, 7]].tolist()
    assert board.now() == pytest.approx(table["profile_s"].iloc[[3, 7]].sum())
    assert board.n_measured == 2


def test_replay_refuses_a_configuration_it_has_no_record_of(table):
    board = ReplayBackend(table)
    corpus = load_corpus("orin-agx_mobilenetv3_bs16")
    unseen = corpus.merge(table[KEYS], how="left", on=KEYS, indicator=True)
    unseen = unseen[unseen["_merge"] == "left_only"].iloc[[0]][KEYS]
    with pytest.raises(ProfilingError, match="has no record of cores="):
        board.measure(unseen)
    assert board.now() == 0.0 and board.n_measured == 0  # nothing charged
    with pytest.raises(ProfilingError, match="no record"):
        board.configure(unseen.iloc[0].to_dict())
    with pytest.raises(ProfilingError, match="no record"):
        pt.profile(board, unseen, progress=False)


def test_replay_drives_the_ordinary_sweep(table):
    """A per-minibatch table goes through the profiler as a board would."""
    board = ReplayBackend(table)
    out = pt.profile(board, table.iloc[:3][KEYS], n_minibatches=5, progress=False)
    want = table.iloc[:3].merge(out[KEYS], on=KEYS)
    assert np.allclose(out.sort_values(KEYS).time_ms, want.sort_values(KEYS).time_ms)
    assert np.allclose(out.sort_values(KEYS).power_w, want.sort_values(KEYS).power_w)


def test_replay_of_a_per_epoch_trace_uses_the_device_columns():
    from powertrain.data.real_data import load_real_corpus

    trace = load_real_corpus("a40_resnet50-imagenet")
    board = ReplayBackend(trace, seconds_per_config=30)
    assert board.config_columns == ("power_limit_w", "batch_size")
    assert board.targets == ("epoch_s", "power_w")
    got = board.measure(trace.iloc[[0]][["power_limit_w", "batch_size"]])
    assert got["epoch_s"].iloc[0] == trace["epoch_s"].iloc[0]
    assert board.now() == 30
    with pytest.raises(ProfilingError, match="measure"):  # no minibatches to replay
        board.configure(trace.iloc[0].to_dict())
    with pytest.raises(ProfilingError, match="power_limit_w=123"):
        board.measure(pd.DataFrame({"power_limit_w": [123], "batch_size": [32]}))


# ------------------------------------------------------------- chance of winning --
def test_win_probability_favours_the_rival_likely_faster_and_within_the_cap():
    mu_t = np.array([100.0, 90.0, 80.0, 95.0])
    sd_t = np.array([0.0, 5.0, 5.0, 1.0])
    mu_p = np.array([29.0, 29.0, 35.0, 29.5])
    sd_p = np.array([0.0, 0.5, 0.5, 0.1])
    measured = np.array([True, False, False, False])
    c = contest(mu_t, sd_t, mu_p, sd_p, measured, np.array([30.0]))
    probs, inc, beaten = c.probs, c.incumbent, c.beaten
    assert inc[0] == 0
    assert probs[0, 2] == 0  # 5 W over the cap: never the pick
    assert probs[0, 1] > probs[0, 3] > 0  # faster and sure to fit beats slower
    assert beaten[0] == pytest.approx(probs[0, 1:].sum())
    assert probs[0].sum() == pytest.approx(1.0)


# ------------------------------------------------------------------- the contract --
@pytest.mark.slow  # a decision on the twin from a fresh reference transfer: ~10 s
def test_the_pick_is_measured_under_the_cap_with_its_measured_values(table, reference):
    board = ReplayBackend(table)
    caps = [20.0, 30.0, 3.0]
    d = pt.decide(board, reference, caps, budget=14, seed=0, transfer_options=QUICK)
    assert d.n_measured <= 14
    assert d.board_s == pytest.approx(board.now())
    seen = d.measurements.set_index(KEYS)
    for cap in (20.0, 30.0):
        p = d.pick(cap)
        assert p.measured and p.config is not None
        row = seen.loc[tuple(p.config[k] for k in KEYS)]
        assert p.power_w == row["power_w"] <= cap
        assert p.time == row["time_ms"]
        # and nothing measured under the cap was faster
        under = d.measurements[d.measurements.power_w <= cap]
        assert p.time == under["time_ms"].min()
    none = d.pick(3.0)  # below every configuration: no pick, and it says why
    assert none.config is None and "no measured configuration fits under 3 W" in none.reason
    with pytest.raises(pt.NoFeasibleModeError, match="3 W"):
        from powertrain.decisions.decide import require_pick

        require_pick(d, 3.0)


def test_an_unmeasured_pick_only_when_accepted_and_marked(table, reference):
    board = ReplayBackend(table)
    d = pt.decide(
        board,
        reference,
        30.0,
        budget=6,
        start=6,
        accept_unmeasured=0.6,
        seed=0,
        transfer_options=QUICK,
    )
    p = d.pick()
    # six measurements leave faster configurations unmeasured: one is accepted, marked
    assert not p.measured and p.config is not None
    assert p.confidence >= 0.6 and "unmeasured" in p.reason
    measured_best = d.measurements[d.measurements.power_w <= 30].time_ms.min()
    assert p.cost < measured_best
    key = tuple(p.config[k] for k in KEYS)
    assert key not in set(map(tuple, d.measurements[KEYS].to_numpy()))
    # the same decision without accepting: the measured pick, confirmed
    kept = pt.decide(
        ReplayBackend(table), reference, 30.0, budget=6, start=6, seed=0, transfer_options=QUICK
    ).pick()
    assert kept.measured and kept.time == measured_best


# ------------------------------------------------------------------ stopping rule --
def test_a_cap_table_settles_on_its_expected_loss_and_reports_it(table, reference, tmp_path):
    """One budget for 18-40 W: every cap under which something was recorded gets a
    measured pick, the decision reports its expected loss and board minutes, and a
    looser tolerance stops no later than a strict one (same seed, same start)."""
    caps = np.arange(18.0, 41.0, 2.0)
    loose = pt.decide(ReplayBackend(table), reference, caps, budget=30, tolerance=0.05,
                      transfer_options=QUICK)  # fmt: skip
    strict = pt.decide(ReplayBackend(table), reference, caps, budget=30, tolerance=0.0,
                       transfer_options=QUICK)  # fmt: skip
    assert strict.stop_reason in ("budget", "exhausted", "confident")
    assert loose.n_measured <= strict.n_measured
    assert 0 <= loose.expected_loss and np.isfinite(strict.expected_loss)
    if loose.stop_reason == "settled":
        assert loose.expected_loss <= 0.05
    assert loose.board_minutes == pytest.approx(loose.board_s / 60)
    for d in (loose, strict):
        for p in d.picks:
            if (table.power_w <= p.power_cap_w).any():
                assert p.measured and p.power_w <= p.power_cap_w
    assert "expected_loss" in loose.table().columns
    from powertrain.decisions.decide import load_table

    back = load_table(loose.save_table(tmp_path / "caps.csv"))
    assert back.power_cap_w.tolist() == caps.tolist()
    assert back.measured.tolist() == [p.measured for p in loose.picks]


def test_the_start_is_the_fewest_a_transfer_takes_then_two_a_round(table, reference):
    """By default 5 start configurations, then 2 a round."""
    d = pt.decide(ReplayBackend(table), reference, 30.0, budget=9, tolerance=0.0,
                  transfer_options=QUICK)  # fmt: skip
    rounds = d.measurements["round"].value_counts().sort_index()
    assert rounds.iloc[0] == 5 and (rounds.iloc[1:] <= 2).all()
    assert d.n_measured == 9


def test_on_the_reference_s_own_device_the_start_spans_its_predicted_power(table, reference):
    """The reference was trained on this board's device (an Orin AGX): one start
    configuration from each fifth of the candidates ordered by its predicted power.
    On another device the start stays stratified over the device's knobs."""
    from powertrain.decisions.samplers.base import trained_on

    d = pt.decide(ReplayBackend(table), reference, 30.0, budget=5, transfer_options=QUICK)
    start = d.measurements[d.measurements["round"] == 0]
    assert (start.why == "start spread over the reference's predicted power").all()
    p = reference.predict(table[KEYS])["power_w"].to_numpy()
    fifths = np.searchsorted(np.sort(p), reference.predict(start[KEYS])["power_w"], "left")
    assert sorted(fifths * 5 // len(p)) == [0, 1, 2, 3, 4]  # one from each fifth
    nano = pt.backends.TwinBackend(pt.Twin("orin-nano", "resnet18-cifar", seed=0))
    assert trained_on(reference, ReplayBackend(table).device)
    assert not trained_on(reference, nano.device)


def test_the_lowest_cap_is_reached_first(table, reference):
    """A cap under which nothing is measured yet weighs a whole pick: the first two
    rounds after the start measure for the lowest caps without one (a round's second
    measurement goes by its own expected improvement, which spreads that weight over
    every rival that may fit, so it can reach the low end a round later)."""
    caps = np.arange(16.0, 46.0, 1.0)
    d = pt.decide(ReplayBackend(table), reference, caps, budget=9, start=5,
                  transfer_options=QUICK)  # fmt: skip
    first = d.measurements[d.measurements["round"].isin([1, 2])]
    start = d.measurements[d.measurements["round"] == 0]
    no_pick = [c for c in caps if not (start.power_w <= c).any() and (table.power_w <= c).any()]
    if no_pick:  # the start left low caps without a pick: round 1 goes there
        lowest = f"a first pick under {no_pick[0]:g} W"  # "... 16 W" or "... 16-17 W (2 caps)"
        assert first.why.str.contains(f"a first pick under {no_pick[0]:g}[ -]").any(), lowest


def test_the_loop_stops_when_the_budget_is_spent(table, reference):
    board = ReplayBackend(table)
    d = pt.decide(
        board,
        reference,
        [18.0, 25.0, 33.0, 40.0],
        budget=9,
        start=5,
        per_round=2,
        confidence=0.999999,
        patience=100,
        tolerance=0.0,
        seed=1,
        transfer_options=QUICK,
    )
    assert d.stop_reason == "budget"
    assert d.n_measured == 9 == board.n_measured


def test_the_loop_stops_early_once_no_unmeasured_configuration_can_win(table, reference):
    """Eight candidates, one cap: after measuring the few that could win, it stops
    (confident or nothing left) well before the budget."""
    board = ReplayBackend(table)
    cands = table.nsmallest(8, "power_w")[KEYS]
    cap = float(table.nsmallest(8, "power_w").power_w.max()) + 0.5
    d = pt.decide(
        board, reference, cap, budget=50, candidates=cands, start=5, seed=0, transfer_options=QUICK
    )
    assert d.stop_reason in ("confident", "exhausted", "settled")
    assert d.n_measured <= 8
    best = table.merge(cands, on=KEYS).time_ms.min()
    assert d.pick().time == best  # every configuration fits: the fastest was measured


@pytest.mark.slow  # many rounds of transfers: ~4 s
def test_a_stable_pick_stops_the_loop(table, reference):
    """With confidence out of reach the loop still stops once the picks stop changing and
    no challenger is expected to improve on them by more than the tolerance."""
    board = ReplayBackend(table)
    kw = dict(start=6, per_round=1, patience=2, confidence=0.999999, seed=0, method="contest")
    d = pt.decide(board, reference, 30.0, budget=60, tolerance=0.05, transfer_options=QUICK, **kw)
    assert d.stop_reason in ("stable", "exhausted")
    assert d.n_measured < 60
    # a tolerance no challenger gets under: the same picks stand, yet it goes on measuring
    strict = pt.decide(
        ReplayBackend(table), reference, 30.0, budget=d.n_measured + 3, tolerance=0.0,
        transfer_options=QUICK, **kw,
    )  # fmt: skip
    assert strict.stop_reason == "budget" and strict.n_measured == d.n_measured + 3


def test_bad_arguments_are_named(table, reference):
    board = ReplayBackend(table)
    with pytest.raises(DataError, match="budget"):
        pt.decide(board, reference, 30.0, budget=0)
    with pytest.raises(DataError, match="power_cap_w.*text '30'"):
        pt.decide(board, reference, "30")
    for name, bad in (("seed", -1), ("draws", 0), ("patience", -1), ("per_round", 0)):
        with pytest.raises(DataError, match=f"{name} must be"):
            pt.decide(board, reference, 30.0, **{name: bad})
    with pytest.raises(DataError, match="candidates: no configurations"):
        pt.decide(board, reference, 30.0, candidates=table.iloc[:0][KEYS])
    assert board.n_measured == 0  # refused before measuring anything
    with pytest.raises(DataError, match="power_cap_w"):
        pt.decide(board, reference, -5.0)
    with pytest.raises(DataError, match="objective"):
        pt.decide(board, reference, 30.0, objective="speed")


def test_a_cap_range_too_big_to_hold_is_refused_before_any_allocation(table, reference):
    board = ReplayBackend(table)
    with pytest.raises(DataError, match=r"100,000 caps x 300 candidates.*fewer caps"):
        pt.decide(board, reference, range(1, 100001), candidates=table[KEYS])
    assert board.n_measured == 0


def test_a_board_returning_nan_is_named_with_the_measurement_and_configuration(table, reference):
    class Broken(ReplayBackend):
        """A board whose sensor fails: one target comes back as ``value``."""

        def __init__(self, df, column, value):
            super().__init__(df)
            self.column, self.value = column, value

        def measure(self, configs):
            return super().measure(configs).assign(**{self.column: self.value})

    with pytest.raises(DataError, match=r"board \(Broken\) returned power_w=nan for cores="):
        pt.decide(Broken(table, "power_w", np.nan), reference, 30.0, transfer_options=QUICK)
    with pytest.raises(DataError, match=r"board \(Broken\) returned time_ms=inf for cores="):
        pt.decide(Broken(table, "time_ms", np.inf), reference, 30.0, transfer_options=QUICK)


def test_power_exactly_at_the_cap_fits(table, reference):
    """Five candidates, all measured by the start: the fastest one's recorded power is the
    cap itself, and it is the pick (a cap allows power up to and including it)."""
    cands = table.nsmallest(5, "time_ms")
    cap = float(cands.power_w.iloc[0])  # the fastest of the five
    d = pt.decide(
        ReplayBackend(table), reference, cap, candidates=cands[KEYS], start=5, budget=5,
        transfer_options=QUICK,
    )  # fmt: skip
    p = d.pick()
    assert p.measured and p.power_w == cap and p.time == cands.time_ms.iloc[0]


# ---------------------------------------------------------------- caps that change --
def test_the_controller_switches_configuration_mid_run_on_a_twin_board():
    twin = pt.Twin("orin-agx", "mobilenetv3", seed=0)
    grid = twin.device.profiling_grid().sample(200, random_state=0)
    est = twin.expected(grid, 16)
    est = est.assign(cost=est.time_ms, measured=True, power_w_std=0.0)
    ctl = pt.CapController(est, KEYS)
    hi, lo = ctl.config_for(45.0), ctl.config_for(18.0)
    assert hi.config != lo.config
    configured = []
    board = pt.backends.TwinBackend(twin)
    original = board.configure
    board.configure = lambda c: (configured.append(dict(c)), original(c))[1]
    switch_at = 20.0  # seconds into the run the cap drops
    sched = pt.CapSchedule([(0, 45.0), (switch_at, 18.0)])
    out = pt.follow(board, ctl, sched, minibatches=400)
    assert configured == [hi.config, lo.config]  # applied through the backend, once each
    seg = out.segments
    assert seg.power_cap_w.tolist() == [45.0, 18.0]
    assert seg.minibatches.sum() == out.minibatches == 400  # no minibatch lost or repeated
    assert seg.start_s.iloc[1] >= switch_at
    assert (est.set_index(KEYS).loc[tuple(lo.config[k] for k in KEYS)].power_w) <= 18.0


def test_the_controller_takes_a_measured_configuration_exactly_at_the_cap():
    est = pd.DataFrame(
        {"power_limit_w": [100.0, 150.0], "cost": [90.0, 60.0], "power_w": [25.0, 30.0],
         "power_w_std": [0.0, 0.0], "measured": [True, True]}
    )  # fmt: skip
    ctl = pt.CapController(est, ["power_limit_w"])
    assert ctl.config_for(30.0).config == {"power_limit_w": 150.0}
    assert ctl.config_for(29.999).config == {"power_limit_w": 100.0}


def test_an_unsure_new_cap_is_re_decided_with_a_few_measurements(table, reference):
    """A decision made for 40 W measured little at 18 W: the controller measures up to
    its budget there, answers with a configuration measured under 18 W, and does not
    measure again for the same cap."""
    d = pt.decide(ReplayBackend(table), reference, 40.0, budget=6, seed=0, transfer_options=QUICK)
    board = ReplayBackend(table)
    ctl = pt.CapController.from_decision(
        d, board=board, reference=reference, budget=4, transfer_options=QUICK
    )
    assert ctl.unsure(18.0)
    p = ctl.config_for(18.0)
    assert 1 <= ctl.n_measured <= 4 and ctl.n_measured == board.n_measured
    assert ctl.redecided == [(18.0, ctl.n_measured)] and ctl.board_s == board.now()
    assert p.measured and p.power_w <= 18.0
    seen = ctl.measurements.set_index(KEYS)
    assert seen.loc[tuple(p.config[k] for k in KEYS)].power_w <= 18.0
    assert len(ctl.measured()) == ctl.n_measured
    before = board.n_measured
    assert ctl.config_for(18.0).config == p.config and board.n_measured == before
    cached = pt.CapController.from_decision(d)  # no board: answers from the cache only
    cached.config_for(18.0)
    assert cached.n_measured == 0 and cached.redecided == []


def test_a_cap_schedule_file_is_checked(tmp_path):
    f = tmp_path / "caps.csv"
    f.write_text("t_s,power_cap_w\n0,50\n600,30\n1200,15\n")
    s = pt.CapSchedule.from_csv(f)
    assert [s(0), s(599), s(600), s(5000)] == [50, 50, 30, 15]
    f.write_text("t_s,power_cap_w\n0,50\n600,-3\n")
    with pytest.raises(DataError, match="row 2, column 'power_cap_w'"):
        pt.CapSchedule.from_csv(f)
    f.write_text("t_s,power_cap_w\n0,40\n0,20\n")  # two caps at one instant: ambiguous
    with pytest.raises(DataError, match="rows 1 and 2 both start at t_s = 0.*40 W and 20 W"):
        pt.CapSchedule.from_csv(f)


def test_a_malformed_cap_schedule_names_the_step():
    with pytest.raises(DataError, match="steps 1 and 2 both start at t_s = 0"):
        pt.CapSchedule([(0, 40), (0, 20)])
    with pytest.raises(DataError, match="step 1: \\(0, 'abc'\\) must be a pair"):
        pt.CapSchedule([(0, "abc")])
    with pytest.raises(DataError, match="step 2: \\(5, 30, 99\\) must be a pair"):
        pt.CapSchedule([(0, 40), (5, 30, 99)])
    assert pt.CapSchedule([(10, 20), (0, 40)]).steps == [(0.0, 40.0), (10.0, 20.0)]


def test_a_plain_callable_schedule_is_checked_before_the_controller_sees_it():
    twin = pt.Twin("orin-agx", "mobilenetv3", seed=0)
    seen = []

    class Spy:
        def config_for(self, cap):
            seen.append(cap)

    with pytest.raises(DataError, match="returned -5 at 0 s"):
        pt.follow(pt.backends.TwinBackend(twin), Spy(), lambda t, n: -5, minibatches=3)
    assert seen == []


# ---------------------------------------------------------------- command and spec --
def test_profile_strategy_active_measures_and_reports_the_pick(tmp_path, capsys):
    from powertrain.cli import main

    out = tmp_path / "active.csv"
    argv = ["profile", "--workload", "mobilenetv3", "--device", "orin-agx", "--quiet"]
    rc = main(
        [*argv, "--strategy", "active", "--power-cap", "30", "--budget", "5", "--out", str(out)]
    )
    assert rc == 0
    got = pd.read_csv(out)
    assert len(got) == 5  # the budget, written as each finished
    err = capsys.readouterr().err
    assert "5 configurations measured" in err and "stopped: budget" in err
    assert main([*argv, "--power-cap", "30"]) == 1  # a cap without the active strategy
    assert "only --strategy active uses them" in capsys.readouterr().err
    assert main([*argv, "--strategy", "active"]) == 1
    assert "needs --power-cap" in capsys.readouterr().err


def test_caps_on_the_command_line():
    from powertrain.cli.profile import caps_arg

    assert caps_arg("30") == [30.0]
    assert caps_arg("20,30") == [20.0, 30.0]
    assert caps_arg("17-20") == [17.0, 18.0, 19.0, 20.0]
    with pytest.raises(Exception, match="17-50"):
        caps_arg("thirty")


def test_the_fleet_spec_names_a_strategy():
    from powertrain.errors import SpecError
    from powertrain.report.spec import parse_spec

    text = (
        'devices = ["orin-agx"]\nbatch_sizes = [16]\npower_caps = [25]\n'
        'strategy = "{}"\n[workloads.mobilenetv3]\nsource = "twin"\n'
    )
    spec = parse_spec(text.format("active"), source="x.toml")
    assert spec.strategy == "active" and spec.cases()[0].strategy == "active"
    # by default a twin case decides with the board in the loop; plain = true: the paper's
    # plain picks (random samples, no margin)
    default = parse_spec(text.replace('strategy = "{}"\n', ""), "x.toml")
    assert (default.strategy, default.margin_sigma) == ("active", None)
    plain = parse_spec(text.replace('strategy = "{}"', "plain = true"), "x.toml")
    assert (plain.strategy, plain.margin_sigma) == ("random", 0.0)
    with pytest.raises(SpecError, match="strategy.*must be one of random, stratified, active"):
        parse_spec(text.format("greedy"), source="x.toml")


def test_follow_command_decides_once_then_switches_between_minibatches(tmp_path, capsys):
    from powertrain.cli import main

    sched = tmp_path / "caps.csv"
    sched.write_text("t_s,power_cap_w\n0,45\n5,18\n")
    argv = ["follow", "--schedule", str(sched), "--device", "orin-agx"]
    argv += ["--workload", "mobilenetv3", "--minibatches", "300", "--budget", "5", "--quiet"]
    assert main(argv) == 0
    cap = capsys.readouterr()
    seg = pd.read_csv(__import__("io").StringIO(cap.out))
    assert seg.power_cap_w.tolist() == [45.0, 18.0] and seg.minibatches.sum() == 300
    assert "300 minibatches" in cap.err and "5 configurations" in cap.err


def test_an_unmeasured_configuration_is_returned_only_when_accepted():
    """Hand-built state: a measured configuration under the cap, and an unmeasured one
    predicted 20 % faster at 25 +- 1 W under a 30 W cap (a 99.9 % chance of fitting)."""
    from powertrain.decisions.candidates import make_pick as _pick

    cands = pd.DataFrame({"power_limit_w": [100.0, 150.0], "batch_size": [32, 32]})
    state = dict(
        cands=cands,
        inputs=["power_limit_w", "batch_size"],
        measured=np.array([True, False]),
        mu_t=np.array([100.0, 80.0]),
        mu_p=np.array([28.0, 25.0]),
        sd_p=np.array([0.0, 1.0]),
        cost=np.array([100.0, 80.0]),
        incumbent=0,
        beaten=0.4,
    )
    confirmed = _pick(30.0, accept_unmeasured=None, **state)
    assert confirmed.measured and confirmed.config == {"power_limit_w": 100.0, "batch_size": 32}
    assert confirmed.confidence == pytest.approx(0.6)
    taken = _pick(30.0, accept_unmeasured=0.99, **state)
    assert not taken.measured and taken.config["power_limit_w"] == 150.0
    assert taken.confidence > 0.99 and "unmeasured" in taken.reason
    # 26 W: nothing measured fits, and the unmeasured one is only 84 % sure to fit
    refused = _pick(26.0, accept_unmeasured=0.99, **{**state, "incumbent": -1})
    assert refused.measured is False and refused.config is None
    assert "no measured configuration fits under 26 W" in refused.reason


def test_the_cost_is_time_or_energy_to_accuracy_with_an_r_vector():
    from powertrain.decisions.decide import cost_factor

    cfg = pd.DataFrame({"batch_size": [8, 16]})
    epochs = pd.DataFrame({"batch_size": [8, 16], "epochs": [5.0, 7.0]})
    assert cost_factor(cfg, epochs, "epoch_s").tolist() == [5.0, 7.0]
    # samples to target: time to accuracy = time per minibatch (ms) / 1000 x N(b) / b
    samples = pd.DataFrame({"batch_size": [8, 16], "samples": [800.0, 1600.0]})
    assert cost_factor(cfg, samples, "time_ms").tolist() == pytest.approx([0.1, 0.1])
    with pytest.raises(DataError, match="no entry for batch size"):
        cost_factor(pd.DataFrame({"batch_size": [64]}), epochs, "epoch_s")
