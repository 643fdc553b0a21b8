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
import warnings

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
    from test_mutants import _gpu_reference
    from test_tuner import gpu_reference

    board = _FastSensorBoard([(100.0, 16, 300.0, 40.0), (200.0, 16, 200.0, 45.0)])
    said: list[str] = []
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
