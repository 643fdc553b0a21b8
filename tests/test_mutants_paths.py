"""Tests written for run H's survivors (docs/method-notes.md, "Run H"): the functions of
the mutated modules that no earlier run named, on the data, restore and cap paths (a cap
table saved, a decision's size checked, a study's measured-only estimates, the Tuner's
start, the candidates, the distributed world).

Why: each names the mutants it kills (mutmut's name, module.x_function__mutmut_N), so a
later run can tell a new survivor from an old one.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from powertrain.errors import DataError


def test_a_saved_cap_table_has_the_tables_columns_and_no_index(tmp_path):
    """Decision.save_table_6 (``index=True``: the table saved with an extra unnamed first
    column, which ``load_table`` hands back as a column of its own)."""
    from test_mutants import _study

    from powertrain.decisions.decide import load_table, result

    study, _ = _study(measured=3)
    assert study.ask() is None
    decision = result(study)
    path = decision.save_table(tmp_path / "caps.csv")
    assert path == tmp_path / "caps.csv"
    header = path.read_text().splitlines()[0].split(",")
    assert header == list(decision.table().columns)
    back = load_table(path)
    assert list(back.columns) == list(decision.table().columns)
    assert back["power_cap_w"].tolist() == [20.0, 30.0]


def test_a_decision_counts_as_measured_its_own_rounds_only():
    """Decision.n_measured (a property: mutmut leaves it alone; ``>= 0`` as ``> 0`` checked
    by hand): the given samples (round -1) are not measured by this call, round 0 is."""
    import dataclasses

    from test_mutants import _study

    from powertrain.decisions.decide import result

    study, _ = _study(measured=3)
    assert study.ask() is None
    decision = result(study)
    assert decision.n_measured == 0  # all three were given
    rounds = decision.measurements.assign(round=[-1, 0, 1])
    assert dataclasses.replace(decision, measurements=rounds).n_measured == 2
    assert dataclasses.replace(decision, measurements=pd.DataFrame()).n_measured == 0


def test_a_decision_needs_a_candidate_and_at_most_the_cell_limit():
    """check_size_2 (an empty candidates table let through, one candidate refused), _7
    (caps / candidates: no decision too big for memory refused), _8 (``>=``: exactly the
    cell limit refused), _3-_5, _10-_12, _14-_16 (the messages)."""
    from powertrain.decisions.decide import MAX_CELLS, check_size

    with pytest.raises(DataError, match=r"^candidates: no configurations to choose among"):
        check_size(1, 0)
    check_size(1, 1)
    check_size(1, MAX_CELLS)
    check_size(2, MAX_CELLS // 2)
    with pytest.raises(DataError) as refused:
        check_size(3, 10_000_000)
    assert str(refused.value) == (
        "power_cap_w (--power-cap): 3 caps x 10,000,000 candidates = 30,000,000 cells "
        "(about 0.2 GB a table; at most 10,000,000): decide for fewer caps (17-50 W in "
        "1 W steps is 34) or fewer candidates"
    )


def test_a_study_of_measurements_alone_gives_them_without_spread():
    """Study._measured_table_3, _8 (every candidate measured, too few for a transfer: the
    estimates are the measurements, with a spread of 0, not 1)."""
    from test_mutants import _study

    study, _ = _study(measured=3)
    model, est = study.predict()
    assert model is None
    assert est["time_ms"].tolist() == [100.0, 200.0, 300.0]
    assert est["power_w"].tolist() == [45.0, 30.0, 20.0]
    assert est["time_ms_std"].tolist() == [0.0] * 3
    assert est["power_w_std"].tolist() == [0.0] * 3


# --------------------------------------------------------------- the cap path --
def _replayed_gpu():
    from powertrain.backends.replay import ReplayBackend

    df = pd.DataFrame(
        {
            "power_limit_w": [100.0, 200.0, 300.0] * 2,
            "batch_size": [16] * 3 + [32] * 3,
            "time_ms": [300.0, 200.0, 100.0, 500.0, 400.0, 300.0],
            "power_w": [20.0, 30.0, 45.0, 25.0, 35.0, 50.0],
        }
    )
    return ReplayBackend(df, config_columns=["power_limit_w", "batch_size"])


def test_a_study_is_opened_with_the_weights_of_its_caps_and_the_settings_checked():
    """open_study_20, _21, _23 (the caps' weights dropped, or read without the caps as
    given or without the settings' weights: the weight of 20 W put on 40 W), _59, _70 (the
    weights not given to the study), _31, _35 (the job's batch size dropped: candidates
    at every batch size), _61, _62, _72, _73 (the transfer options or the progress
    dropped), _1 (the default caller's name not empty), _11 (no
    samples counted as one: a start of 4 taken, too few for a transfer), _17, _19 (the
    caller's name left out of an error)."""
    from test_mutants import _NoTransfer

    from powertrain.decisions.decide import open_study
    from powertrain.decisions.settings import Settings

    board = _replayed_gpu()
    none = (None,) * 6
    _, study = open_study(board, _NoTransfer(), [40.0, 20.0], Settings(cap_weights=[1, 3]), *none)
    assert study.caps.tolist() == [20.0, 40.0]
    assert np.asarray(study.weights).tolist() == [0.75, 0.25]  # weight 3 stays with 20 W
    assert len(study.cands) == 6
    said: list[str] = []
    options = {"epochs": 3}
    _, study = open_study(
        board, _NoTransfer(), 30.0, Settings(), None, 16, None, None, said.append, options
    )
    assert study.cands["batch_size"].tolist() == [16] * 3  # the job's batch size only
    assert study.transfer_options == options
    study.say("hello")
    assert said == ["hello"]
    with pytest.raises(DataError, match="start must be an integer >= 5"):
        open_study(board, _NoTransfer(), 30.0, Settings(start=4), *none)
    with pytest.raises(DataError, match="^Tuner: reference must be a fitted"):
        open_study(board, object(), 30.0, Settings(), *none, who="Tuner: ")
    with pytest.raises(DataError, match="^reference must be a fitted"):
        open_study(board, object(), 30.0, Settings(), *none)


def test_drive_measures_each_round_into_out_by_the_protocol(monkeypatch):
    """drive_8 (**``out`` dropped: no measurement saved, nothing to resume from**), _10,
    _15 (the protocol dropped: the settled one used for the paper's fixed one)."""
    from types import SimpleNamespace

    import powertrain.decisions.decide as dd
    from powertrain.decisions.settings import Settings

    seen = []

    def measure(board, configs, out, n_minibatches, protocol):
        seen.append((out, n_minibatches, protocol))
        return configs

    asks = [SimpleNamespace(configs=pd.DataFrame({"a": [1]})), None]
    told = []
    study = SimpleNamespace(ask=lambda: asks.pop(0), tell=lambda *a: told.append(a))
    monkeypatch.setattr(dd, "measure", measure)
    monkeypatch.setattr(dd, "result", lambda study, board: "decided")
    s = Settings(protocol="fixed", n_minibatches=12)
    assert dd.drive(object(), study, s, out="m.csv") == "decided"  # type: ignore[arg-type]
    assert seen == [("m.csv", 12, "fixed")] and len(told) == 1


def test_require_pick_returns_the_pick_under_the_cap_or_says_why_there_is_none():
    """require_pick_1-4 (no fast test ran it: the pick of another cap, a missing pick
    returned, a pick refused, the reason lost)."""
    from types import SimpleNamespace

    from powertrain.decisions.decide import require_pick
    from powertrain.errors import NoFeasibleModeError

    picks = {
        30.0: SimpleNamespace(config={"power_limit_w": 100.0}, reason="measured"),
        10.0: SimpleNamespace(config=None, reason="nothing measured fits under 10 W"),
    }
    decision = SimpleNamespace(pick=lambda cap: picks[cap])
    assert require_pick(decision, 30.0) is picks[30.0]  # type: ignore[arg-type]
    with pytest.raises(NoFeasibleModeError, match="^nothing measured fits under 10 W$"):
        require_pick(decision, 10.0)  # type: ignore[arg-type]


def test_a_controller_from_a_decision_keeps_its_margin_and_study():
    """CapController.from_decision_19 (**the k_sigma given dropped: an unmeasured pick
    guarded by 1 sigma where 2.5 were asked for**), _1 (the default margin not 1 sigma),
    _16, _26 (the decision's study dropped: a new cap judged by cached spreads), _4-_6
    (the message)."""
    from types import SimpleNamespace

    from powertrain.decisions.cap_following import CapController

    est = pd.DataFrame(
        {"power_limit_w": [100.0], "cost": [1.0], "power_w": [20.0], "measured": [True]}
    )
    study = object()
    decision = SimpleNamespace(
        estimates=est, model=SimpleNamespace(inputs_=("power_limit_w",)),
        measurements=pd.DataFrame(), study=study,
    )  # fmt: skip
    assert CapController.from_decision(decision, k_sigma=2.5).k_sigma == 2.5  # type: ignore[arg-type]
    ctl = CapController.from_decision(decision)  # type: ignore[arg-type]
    assert ctl.k_sigma == 1.0 and ctl.study is study
    with pytest.raises(DataError, match="^this decision carries no estimates to control from$"):
        CapController.from_decision(SimpleNamespace(estimates=None))  # type: ignore[arg-type]


def test_a_start_is_spread_over_the_devices_strata_and_batch_sizes():
    """strata_2, _4, _8-_16, _19-_23 (the device's ``stratify_by`` ignored, the first
    three columns taken, the batch size added when there is one or left out when there
    are several), stratified_14, _15, _18 (more than ``n`` chosen, or a loop without an
    end), _22, _24 (no choice as floats: no index)."""
    from types import SimpleNamespace

    from powertrain.decisions.samplers.base import strata, stratified

    cands = pd.DataFrame(
        {"a": [1, 1, 2, 2] * 2, "b": [1, 2] * 4, "c": [0.0] * 8, "batch_size": [8] * 4 + [16] * 4}
    )
    device = SimpleNamespace(spec=SimpleNamespace(stratify_by=("c", "zz")))
    assert strata(device, cands) == ["c", "batch_size"]
    assert strata(None, cands) == ["a", "b", "batch_size"]
    nothing = SimpleNamespace(spec=SimpleNamespace(stratify_by=("zz",)))
    assert strata(nothing, cands) == ["a", "b", "batch_size"]
    one = cands[cands.batch_size == 8]
    assert strata(None, one) == ["a", "b"]
    assert strata(None, one.drop(columns="batch_size")) == ["a", "b"]
    assert strata(None, cands[["batch_size", "a", "b", "c"]]) == ["a", "b", "batch_size"]
    rng = np.random.default_rng(0)
    for n in (0, 3, 8, 20):
        got = stratified(cands, ["a", "b"], n, rng)
        assert got.dtype.kind == "i" and len(got) == min(n, 8) and len(set(got)) == len(got)
    first = stratified(cands, ["a", "b"], 4, rng)  # four cells: one from each
    assert sorted(cands.iloc[first][["a", "b"]].itertuples(index=False)) == [
        (1, 1), (1, 2), (2, 1), (2, 2)
    ]  # fmt: skip


def test_the_default_batch_size_is_the_twins_and_none_for_any_other_board():
    """_default_batch_size_6, _9 (a board without a twin: a raw AttributeError)."""
    from types import SimpleNamespace

    from powertrain.decisions.candidates import _default_batch_size

    assert _default_batch_size(object()) is None
    assert _default_batch_size(SimpleNamespace(twin=None)) is None
    twin = SimpleNamespace(workload=SimpleNamespace(default_batch_size=24.0))
    assert _default_batch_size(SimpleNamespace(twin=twin)) == 24


def test_a_board_without_a_gpu_index_is_one_per_host():
    """board_identity_9 (``getattr`` without its default: a Jetson, which has no GPU
    index, raises)."""
    import socket

    from powertrain.backends import StepBackend
    from powertrain.integrations.distributed import board_identity

    class Jetson(StepBackend):
        def __init__(self):
            pass

        def configure(self, config):  # the abstract method; never called here
            raise AssertionError

    assert board_identity(Jetson()) == f"{socket.gethostname()}:Jetson"


def test_a_tuner_and_a_transformers_callback_enter_as_themselves():
    """Tuner.__enter__ and the transformers callback's ``__enter__`` (no mutmut mutants:
    ``return self`` as ``return None`` checked by hand): ``with ... as x`` gives the
    object itself."""
    import warnings

    from test_mutants import _NoTransfer

    import powertrain as pt
    from powertrain.integrations.transformers import PowerTrainCallback

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no board: inert, with a warning
        tuner = pt.Tuner(None, _NoTransfer(), 30.0, batch_size=16)
    with tuner as entered:
        assert entered is tuner
    assert tuner.summary().decide_s == 0.0  # _init_loop_19: nothing decided yet
    callback = PowerTrainCallback(None, _NoTransfer(), 30.0)
    with callback as entered_cb:
        assert entered_cb is callback


# --------------------------------------------------------------- the data path --
def test_a_measurement_must_be_a_positive_number_and_the_error_says_whose():
    """check_measured_20 (**a power of 0 W taken as a measurement**), _12 (a text cell:
    a raw ValueError), _2-_6, _32, _36, _37 (the messages: the board or the given
    samples, the configuration)."""
    from powertrain.decisions.study import check_measured

    inputs, targets = ("power_limit_w", "batch_size"), ("time_ms", "power_w")
    rows = pd.DataFrame(
        {"power_limit_w": [100.0, 200.0], "batch_size": [16, 16], "time_ms": [10.0, 9.0]}
    )
    check_measured(rows.assign(power_w=[20.0, 0.5]), inputs, targets, "the board", False)
    with pytest.raises(DataError) as zero:
        check_measured(rows.assign(power_w=[20.0, 0.0]), inputs, targets, "the board", False)
    assert str(zero.value) == (
        "the board returned power_w=0.0 for power_limit_w=200 batch_size=16: a "
        "measurement must be a finite positive number"
    )
    with pytest.raises(DataError, match="^the given samples returned power_w=nan for"):
        check_measured(rows.assign(power_w=[20.0, "x"]), inputs, targets, "the board", True)
    with pytest.raises(DataError, match="^samples: no 'power_w' column$"):
        check_measured(rows, inputs, targets, "the board", True)
    with pytest.raises(DataError, match="^the board: no 'power_w' column$"):
        check_measured(rows, inputs, targets, "the board", False)


def test_the_surprise_of_a_forecast_with_no_spread_is_finite():
    """Study.surprise_10, _19 (a forecast spread of 0 not clipped: a measurement that
    met its forecast exactly is 0/0, NaN)."""
    from test_mutants import _study

    study, _ = _study(measured=3)
    exact = (np.log([100.0, 200.0, 300.0]), np.zeros(3), np.array([45.0, 30.0, 20.0]), np.zeros(3))
    study.ahead = exact
    z_t, z_p = study.surprise()
    assert z_t.tolist() == [0.0] * 3 and z_p.tolist() == [0.0] * 3


class _Board:
    """A board that takes every mode (the candidates' own checks are what is tested)."""

    config_columns = ("power_limit_w", "batch_size")
    device = None

    def __init__(self):
        self.checked: list[str] = []

    def complete_modes(self, df):
        return df

    def check_modes(self, df, source="modes"):
        self.checked.append(source)
        return df


def test_given_candidates_are_kept_to_the_batch_size_checked_and_made_unique():
    """candidates_for_13-22 (**the job's batch size ignored: a pick at another batch
    size**), _45-_59 (**a power limit of 0 W or below taken as a candidate**; a
    ``num_workers`` of 0 refused), _73 (rows with the same knobs kept twice), _33, _37-_39
    (a column the model reads missing, and its message), _42, _67-_71, _9 (messages)."""
    from powertrain.decisions.candidates import candidates_for

    inputs = ("power_limit_w", "batch_size", "num_workers")
    cands = pd.DataFrame(
        {
            "power_limit_w": [100.0, 200.0, 100.0, 100.0],
            "batch_size": [16, 16, 32, 16],
            "num_workers": [0, 2, 2, 0],
            "note": ["a", "b", "c", "d"],  # differs on the repeated row
        }
    )
    board = _Board()
    got = candidates_for(board, inputs, cands, 16)
    assert got[list(inputs)].values.tolist() == [[100.0, 16, 0], [200.0, 16, 2]]
    assert board.checked == ["candidates"]
    assert len(candidates_for(board, inputs, cands, None)) == 3
    for bad in (0.0, -5.0):
        with pytest.raises(DataError, match="power_limit_w"):
            candidates_for(board, inputs, cands.assign(power_limit_w=bad), None)
    with pytest.raises(DataError, match="num_workers"):
        candidates_for(board, inputs, cands.assign(num_workers=-1), None)
    with pytest.raises(DataError) as missing:
        candidates_for(board, (*inputs, "gpu_clock", "mem_clock"), cands, None)
    assert str(missing.value) == (
        "candidates: missing column(s) gpu_clock, mem_clock the model reads (neither a knob of the "
        "board nor a figure under its device spec's 'hardware')"
    )
    with pytest.raises(DataError, match=r"^candidates: no configurations to choose among"):
        candidates_for(board, inputs, cands, 64)
    with pytest.raises(DataError, match="got list$"):
        candidates_for(board, inputs, [], None)  # type: ignore[arg-type]


def test_a_gpus_power_limits_never_go_under_its_minimum():
    """candidate_configurations_60 (the grid's end tolerance at 1 W: a limit under the
    GPU's minimum), _66, _73 (the old index kept as a column), _31, _32, _39-_41 (the
    messages)."""
    from types import SimpleNamespace

    from powertrain.decisions.candidates import candidate_configurations

    gpu = SimpleNamespace(device=None, power_limit_range_w=(100.5, 300.0))
    got = candidate_configurations(gpu, 16)
    assert list(got.columns) == ["power_limit_w", "batch_size"]
    assert got["power_limit_w"].min() == 100.5
    with pytest.raises(DataError, match="^batch_size: name the batch size"):
        candidate_configurations(gpu)  # not a twin: no default batch size
    with pytest.raises(DataError, match="^SimpleNamespace has no device table of modes"):
        candidate_configurations(SimpleNamespace(device=None))
    assert got["power_limit_w"].tolist() == [100.5, 125.0, 150.0, 175.0, 200.0, 225.0] + [
        250.0, 275.0, 300.0
    ]  # fmt: skip


def test_the_small_helpers_of_the_start_and_the_settings():
    """own_turn_2 (the portfolio's turns every third round), power_spread_1 (no start
    asked: a raw ValueError), trained_on_7 (a reference without ``info_``: a raw
    AttributeError), _probability_2 (a text probability: a raw TypeError), plain_3 (a
    text value made a float)."""
    from types import SimpleNamespace

    from powertrain.decisions.candidates import plain, power_spread
    from powertrain.decisions.samplers.base import trained_on
    from powertrain.decisions.samplers.table import own_turn
    from powertrain.decisions.settings import _probability

    assert [own_turn(i) for i in range(5)] == [False, True, False, True, False]
    assert power_spread(np.array([1.0, 2.0]), 0, np.random.default_rng(0)).tolist() == []
    device = SimpleNamespace(spec=SimpleNamespace(name="orin_agx"))
    assert not trained_on(object(), device)
    with pytest.raises(DataError, match="confidence must be a probability"):
        _probability("confidence", "0.9")
    assert plain("MAXN") == "MAXN" and plain(None) is None
    assert type(plain(np.float32(0.5))) is float and type(plain(np.int64(3))) is int


def test_a_tuners_candidates_take_the_devices_figures_and_count_the_given_rows():
    """Tuner._make_candidates_5-_28 (the device spec's ``hardware`` figures ignored: a
    tuner left inert over an input the device gives), _35-_39 (the inert reason), _49-_53
    (a board column missing from the candidates not named: found only mid-training), _56
    (the given rows not counted against the budget's least)."""
    from types import SimpleNamespace

    import powertrain as pt
    from powertrain.decisions.settings import Settings

    board = _Board()
    board.device = SimpleNamespace(spec=SimpleNamespace(hardware={"gpu_cuda_cores": 1024.0}))
    reasons: list[str] = []
    cands = pd.DataFrame({"power_limit_w": [100.0, 200.0], "batch_size": [16, 16]})

    def tuner(board, budget=10, samples=None):
        return SimpleNamespace(
            board=board, inputs=("power_limit_w", "batch_size", "gpu_cuda_cores"),
            _inert=reasons.append, _batch_size=None, _samples=samples,
            settings=Settings(budget=budget), time_column="time_ms",
        )  # fmt: skip

    t = tuner(board)
    pt.Tuner._make_candidates(t, cands, None)  # type: ignore[arg-type]
    assert reasons == [] and t.candidates_["gpu_cuda_cores"].tolist() == [1024.0] * 2
    bare = _Board()
    pt.Tuner._make_candidates(tuner(bare), cands, None)  # type: ignore[arg-type]
    assert reasons == [
        "_Board cannot set gpu_cuda_cores (its settings: power_limit_w, batch_size); for "
        "NVML pass allow_power_limit=True (needs root)"
    ]
    fan = _Board()
    fan.device = board.device
    fan.config_columns = ("power_limit_w", "batch_size", "fan")  # type: ignore[assignment]
    with pytest.raises(DataError, match="^candidates: missing column[(]s[)] fan$"):
        pt.Tuner._make_candidates(tuner(fan), cands, None)  # type: ignore[arg-type]
    rows = pd.DataFrame({"power_limit_w": [100.0] * 9})
    pt.Tuner._make_candidates(tuner(board, 1, rows), cands, None)  # type: ignore[arg-type]
    with pytest.raises(DataError, match="budget"):
        pt.Tuner._make_candidates(tuner(board, 1), cands, None)  # type: ignore[arg-type]


# ------------------------------------------------------------------ reporting --
def test_the_logged_numbers_keep_their_names():
    """decision_metrics_14, _15, summary_metrics_1, _2, _7, _8 (a logged number's name
    changed: a dashboard that reads ``powertrain/measured`` finds nothing)."""
    from types import SimpleNamespace

    from powertrain.integrations import decision_metrics, summary_metrics

    d = {"power_cap_w": 30.0, "time_ms": 100.0, "power_w": 25.0, "measured": True}
    assert decision_metrics(d, "time_ms") == {
        "powertrain/power_cap_w": 30.0,
        "powertrain/time_ms": 100.0,
        "powertrain/power_w": 25.0,
        "powertrain/measured": 1.0,
    }
    s = SimpleNamespace(n_measured=5, minibatches_to_pick=40, explore_min=1.5)
    assert summary_metrics(s) == {
        "powertrain/n_measured": 5.0,
        "powertrain/minibatches_to_pick": 40.0,
        "powertrain/explore_min": 1.5,
    }
