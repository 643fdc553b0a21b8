"""A tiny simulated board for the sweep tests (and the SIGKILL child process).

Why: the sweep's guarantees (stabilisation, sparse sensors, resume) must be tested on a
backend whose every number is known, independent of the digital twin's physics.
"""

from __future__ import annotations

import math
import time

import numpy as np

from powertrain.backends import Backend
from powertrain.errors import ProfilingError


class SimBoard(Backend):
    """Minibatch time 2e4/gpu_mhz ms (or ``fixed_ms``); power settles from idle towards
    ``10 + gpu_mhz/100`` W with a 0.8 s time constant; a 1 Hz sensor on a simulated clock.

    ``fail_after``: raise in configure of that many-th configuration; ``sleep_s``: real
    seconds per minibatch (so a subprocess can be killed mid-sweep); ``sensor_until``:
    the sensor goes silent this long after each mode change.
    """

    device_name = "sim-board"
    workload_name = "sim-wl"
    sample_period_s = 1.0

    def __init__(
        self,
        fixed_ms=None,
        fail_after=None,
        sleep_s=0.0,
        sensor_until=None,
        dead=False,
        knobs=(),
        observed=(),
    ):
        self.t = 0.0
        self.fixed_ms, self.fail_after, self.sleep_s = fixed_ms, fail_after, sleep_s
        self.sensor_until, self.dead = sensor_until, dead
        self.knob_columns = tuple(knobs)
        self.observed_columns = tuple(observed)
        self.segments: list[tuple[float, float]] = []  # (t0, target W)
        self.configured: list[dict] = []
        self.errors = 0
        self.resets = 0
        self.ms = None

    @staticmethod
    def target_w(config) -> float:
        return 10.0 + float(config["gpu_mhz"]) / 100

    def configure(self, config):
        if self.fail_after is not None and len(self.configured) >= self.fail_after:
            raise ProfilingError("simulated failure")
        self.configured.append(dict(config))
        self.t += 0.3
        self.segments.append((self.t, self.target_w(config)))
        self.ms = self.fixed_ms or 2e4 / float(config["gpu_mhz"])

    def run_minibatch(self):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        self.t += self.ms / 1e3
        return self.ms

    def now(self):
        return self.t

    def _power(self, t):
        t0, target = [s for s in self.segments if s[0] <= t][-1]
        return target - 0.5 * target * math.exp(-(t - t0) / 0.8)

    def power_samples(self, start, end):
        if self.dead:
            return np.empty((0, 2))
        end = min(end, self.t)
        ks = np.arange(math.ceil(start), math.ceil(end)) if end > start else np.array([])
        rows = []
        for k in ks:
            t = float(k)
            if not self.segments or t < self.segments[0][0]:
                continue
            t0 = [s for s in self.segments if s[0] <= t][-1][0]
            if self.sensor_until is not None and t - t0 > self.sensor_until:
                continue
            rows.append((t, self._power(t)))
        return np.array(rows).reshape(-1, 2)

    def observed(self, start, end):
        return {c: 999.0 for c in self.observed_columns}

    def on_error(self):
        self.errors += 1

    def reset(self):
        self.resets += 1
