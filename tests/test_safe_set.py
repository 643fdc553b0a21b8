"""SafeSet: what may be measured under a hard cap starts from what is known safe, grows
as measurements arrive, never contains what was measured over the cap, and steps back
when the cap is hit."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import powertrain as pt
from powertrain.decisions.safe_set import SafeSet, over_cap_share, preset_seeds
from powertrain.errors import DataError

CAP = 22.0


@pytest.fixture(scope="module")
def setting():
    dev = pt.get_device("orin-agx")
    cands = dev.profiling_grid().assign(batch_size=16)
    truth = pt.Twin("orin-agx", "mobilenetv3", seed=0).expected(cands, batch_size=16)
    return dev, cands, truth["power_w"].to_numpy(float), truth["time_ms"].to_numpy(float)


def fresh(dev, cands, **kw):
    s = SafeSet(cands, CAP, monotone=dev.spec.monotone["power_w"], **kw)
    return s.seed(preset_seeds(dev.presets(), CAP, [16]))


def test_the_start_is_what_the_presets_vouch_for_and_it_is_under_the_cap(setting):
    dev, cands, power, _ = setting
    s = fresh(dev, cands)
    known = s.known()
    assert known.sum() > 10  # MODE_15W and everything at or below it in every knob
    assert power[known].max() <= CAP
    assert not SafeSet(cands, CAP, monotone=dev.spec.monotone["power_w"]).known().any()


def test_without_anything_known_the_model_alone_proposes_nothing(setting):
    dev, cands, power, _ = setting
    s = SafeSet(cands, CAP, monotone=dev.spec.monotone["power_w"])
    assert not s.safe(power * 0.5, power * 0.01).any()  # SafeOpt: trust grows from the known


def test_exploring_the_safe_set_stays_under_the_cap_and_grows_it(setting):
    dev, cands, power, time_ms = setting
    rng = np.random.default_rng(0)
    # a model that errs by up to 10 % with a spread that covers it (2 sd at 95 %)
    mu = power * rng.uniform(0.9, 1.1, len(power))
    sd = 0.06 * power
    s = fresh(dev, cands)
    sizes, known, measured = [], [], []
    for _ in range(25):
        safe = s.safe(mu, sd)
        sizes.append(int(safe.sum()))
        known.append(int(s.known().sum()))
        open_ = np.flatnonzero(safe & ~s.measured_safe)
        i = int(open_[np.argmin(time_ms[open_])])  # the fastest safe one not yet measured
        measured.append(i)
        s.tell(i, power[i])
    assert power[measured].max() <= CAP  # never over the cap while exploring
    assert sizes[-1] > 2 * sizes[0]  # the set grew as measurements arrived
    assert np.all(np.diff(known) >= 0) and known[-1] > known[0]  # what is known only grows
    fastest = time_ms[power <= CAP].min()
    assert time_ms[measured].min() <= 1.5 * fastest  # and it reached the fast end


def test_a_configuration_measured_over_the_cap_is_never_proposed(setting):
    dev, cands, power, _ = setting
    s = fresh(dev, cands)
    hot = int(np.argmax(power))
    s.tell(hot, power[hot])
    assert s.unsafe[hot]
    assert not s.safe(power * 0, power * 0)[hot]


def test_hitting_the_cap_steps_back_at_once_to_a_measured_safe_one(setting):
    dev, cands, power, time_ms = setting
    s = fresh(dev, cands)
    cool = np.flatnonzero(s.known())[:3]
    for i in cool:
        s.tell(int(i), power[i])
    assert s.fallback(time_ms) == int(cool[np.argmin(time_ms[cool])])
    assert s.fallback() == int(cool[np.argmax(power[cool])])
    assert not s.step_back(7, [CAP - 1, CAP - 0.5, CAP - 0.2])
    assert not s.step_back(7, [CAP + 5])  # one reading: a transient, not yet a hit
    assert s.step_back(7, [CAP - 1, CAP + 1, CAP + 2, CAP + 3])
    assert s.unsafe[7] and s.hits == [7]
    assert not s.safe(power, 0 * power)[7]


def test_bad_arguments_are_refused(setting):
    dev, cands, _, _ = setting
    with pytest.raises(DataError, match="power_cap_w must be positive"):
        SafeSet(cands, 0)
    with pytest.raises(DataError, match="confidence must be in"):
        SafeSet(cands, CAP, confidence=1.0)
    with pytest.raises(DataError, match=r"monotone must map knobs to \+1 or -1"):
        SafeSet(cands, CAP, monotone={"gpu_mhz": 2})
    with pytest.raises(DataError, match="SafeSet.seed: missing column"):
        SafeSet(cands, CAP).seed([{"gpu_mhz": 300.0}])


def test_the_share_over_the_cap_weighs_time_and_energy():
    rows = pd.DataFrame(
        {"time_ms": [10.0, 10.0], "power_w": [10.0, 30.0], "n_minibatches": [30, 10]}
    )
    time_share, energy_share = over_cap_share(rows, 20.0)
    assert time_share == pytest.approx(100 / 400)
    assert energy_share == pytest.approx(3000 / 6000)
    assert all(math.isnan(x) for x in over_cap_share(rows.iloc[:0], 20.0))
