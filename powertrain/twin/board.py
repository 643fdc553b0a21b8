"""``Twin``: a simulated Jetson running one training workload, driven like a real board.

Why: we have no Jetson, so the profiler, the corpora and every accuracy figure run on
this. It offers what a board offers (set a mode, run a minibatch, read the power
sensor) on a simulated clock -- :class:`powertrain.backends.TwinBackend` adapts it to the
profiler -- with the measurement effects the
PowerTrain paper reports (§2.5): a slow first minibatch after a mode change, power
that takes 2-3 s to settle, a 1 Hz power sensor, small minibatch-to-minibatch jitter.
``expected`` gives what such a board measures on average in each configuration
(physics + both deviations, no measurement noise), fast enough for whole mode spaces.
"""

from __future__ import annotations

import bisect
import math
from typing import Mapping

import numpy as np
import pandas as pd

from ..devices.device import Device, get_device
from ..devices.specs import SpecLike, WorkloadSpec
from ..devices.workloads import get_workload
from ..errors import ModeError, ProfilingError
from ..schema import MODE_COLUMNS
from . import deviations, physics
from .params import device_params, workload_params

#: each configuration starts its simulated clock at the next multiple of _SLOT_S after
#: _SLOT_BASE: every start then lies in one floating-point binade (up to 2**31 s), so
#: the clock arithmetic inside a configuration gives the same bits whatever ran before
#: it -- a resumed sweep reproduces an uninterrupted one exactly
_SLOT_BASE = 2.0**30
_SLOT_S = 4096.0


class Twin:
    """A digital twin of ``device`` training ``workload``.

    Parameters
    ----------
    device, workload
        catalog name, JSON spec file, dict or spec object
    seed
        seeds both deviations from the physics and the measurement noise
    num_workers
        DataLoader workers (default: the workload's); 0 = no pipelining
    """

    def __init__(
        self,
        device: SpecLike | Device,
        workload: SpecLike,
        seed: int = 0,
        num_workers: int | None = None,
    ):
        self.device: Device = get_device(device)
        self.workload: WorkloadSpec = get_workload(workload)
        self.seed = int(seed)
        self.dev = device_params(self.device.spec)
        self.wl = workload_params(self.workload, num_workers)
        self.device_name = self.device.name
        self.workload_name = self.workload.name
        self.sample_period_s = 1.0
        base = deviations.stable_seed(
            "powertrain.twin", self.seed, self.device_name, self.workload_name
        )
        self._seeds = {
            k: deviations.stable_seed(base, k)
            for k in ("smooth_time", "smooth_power", "rough_time", "rough_power", "sensor", "noise")
        }
        self._tables = {c: np.asarray(getattr(self.device.spec, c)) for c in MODE_COLUMNS[1:]}
        self._phase = (self._seeds["sensor"] % 1000) / 1000.0  # sensor clock offset, s
        self._reset_state()

    def __enter__(self) -> Twin:
        return self

    def __exit__(self, *exc) -> None:
        """Nothing to restore on a simulated board."""

    def __repr__(self) -> str:
        return f"Twin({self.device_name!r}, {self.workload_name!r}, seed={self.seed})"

    # ------------------------------------------------------------------ expectations --
    def _frame(self, modes: pd.DataFrame, batch_size: int | None) -> pd.DataFrame:
        if not isinstance(modes, pd.DataFrame):
            raise ModeError(f"modes must be a pandas DataFrame, got {type(modes).__name__}")
        df = modes.copy()
        if batch_size is not None:
            if (
                isinstance(batch_size, bool)
                or not isinstance(batch_size, (int, np.integer))
                or batch_size < 1
            ):
                raise ModeError(f"batch_size must be a positive integer, got {batch_size!r}")
            df["batch_size"] = int(batch_size)
        elif "batch_size" not in df.columns:
            df["batch_size"] = self.workload.default_batch_size
        checked = self.device.validate(df, source="modes", batch_size=True, presets=True)
        out = modes.copy() if batch_size is None and "batch_size" in modes.columns else df
        for c in (*MODE_COLUMNS, "batch_size"):
            out[c] = checked[c].to_numpy()
        return out.reset_index(drop=True) if out.index.has_duplicates else out

    def _arrays(self, df: pd.DataFrame) -> list[np.ndarray]:
        return [df[c].to_numpy(dtype=float) for c in (*MODE_COLUMNS, "batch_size")]

    def _tpc_frac(self, df: pd.DataFrame | Mapping) -> np.ndarray | float:
        """Share of the GPU's TPCs on: 1 unless a ``gpu_tpcs`` column (a preset) says."""
        n = self.device.spec.hardware.get("gpu_tpcs")
        if "gpu_tpcs" not in df or not n:
            return 1.0
        return np.asarray(df["gpu_tpcs"], dtype=float) / float(n)

    def _coords(self, cols: list[np.ndarray]) -> np.ndarray:
        """Configuration scaled to about [0, 1] per axis (log for frequencies and batch)."""
        d = self.dev
        lo_c = self.device.spec.min_cores

        def lin(v, lo, hi):
            return (v - lo) / (hi - lo) if hi > lo else np.zeros_like(v)

        def log(v, lo, hi):
            return np.log(v / lo) / math.log(hi / lo) if hi > lo else np.zeros_like(v)

        return np.column_stack(
            [
                lin(cols[0], lo_c, d.cores),
                log(cols[1], *d.cpu_range),
                log(cols[2], *d.gpu_range),
                log(cols[3], *d.mem_range),
                np.log2(cols[4]) / 7.0,
            ]
        )

    def _expected_arrays(
        self, cols: list[np.ndarray], tpc: np.ndarray | float = 1.0
    ) -> tuple[np.ndarray, np.ndarray]:
        phys = physics.minibatch(self.dev, self.wl, *cols, tpc_frac=tpc)
        starved = deviations.board_starvation(self.dev, self.wl, cols, phys)
        x = self._coords(cols)
        dt, dp = deviations.log_deviations(self.dev, self.wl, self._seeds, cols, x, starved)
        return phys["time_ms"] * np.exp(dt), phys["power_w"] * np.exp(dp)

    def physics(self, modes: pd.DataFrame, batch_size: int | None = None) -> pd.DataFrame:
        """The physics alone (no deviations, no noise), with the components behind it:
        compute/memory/GPU/launch/load times, GPU busy fraction and power per rail."""
        df = self._frame(modes, batch_size)
        comp = physics.minibatch(self.dev, self.wl, *self._arrays(df), tpc_frac=self._tpc_frac(df))
        return df.assign(**comp)

    def expected(self, modes: pd.DataFrame, batch_size: int | None = None) -> pd.DataFrame:
        """What the board measures on average in each row of ``modes``: ``modes`` plus
        ``batch_size``, ``time_ms`` (per minibatch) and ``power_w`` (mean module power).

        Parameters
        ----------
        modes : DataFrame
            One row per mode (the device's knob columns).
        batch_size : int, optional
            The batch size of every row; else a ``batch_size`` column, else the
            workload's default.

        Returns
        -------
        DataFrame
            ``modes`` with ``batch_size``, ``time_ms`` and ``power_w``: the physics and the
            board's deviations from it, without measurement noise.

        Raises
        ------
        ModeError
            For a mode the device does not have.
        """
        df = self._frame(modes, batch_size)
        t, p = self._expected_arrays(self._arrays(df), self._tpc_frac(df))
        return df.assign(time_ms=t, power_w=p)

    # ------------------------------------------------------------- backend interface --
    def _reset_state(self) -> None:
        self._t = 0.0
        self._seg_t0: list[float] = []
        self._seg_start: list[float] = []
        self._seg_target: list[float] = []
        self._seg_k0: list[int] = []  # index of the segment's first sensor reading
        self._seg_sensor: list[int] = []  # the segment's sensor-noise seed
        self._reps: dict[tuple, int] = {}  # times each configuration was set
        self._time_ms: float | None = None
        self._warm = False
        self._rng = np.random.default_rng(self._seeds["noise"])

    def restart(self) -> None:
        """Back to the state just after construction: clock 0, unconfigured, noise
        stream rewound (so a repeated sweep reproduces its numbers exactly)."""
        self._reset_state()

    def _power_at(self, t: np.ndarray) -> np.ndarray:
        m = self.dev
        tau = m["measurement.settle_tau_s"]
        out = np.empty(len(t))
        for i, ti in enumerate(t):
            j = bisect.bisect_right(self._seg_t0, ti) - 1
            if j < 0:
                out[i] = m["measurement.idle_w"]
                continue
            target, start = self._seg_target[j], self._seg_start[j]
            out[i] = target + (start - target) * math.exp(-(ti - self._seg_t0[j]) / tau)
        return out

    def _check_config(self, config: Mapping[str, float]) -> list[np.ndarray]:
        missing = [c for c in MODE_COLUMNS if c not in config]
        if missing:
            raise ModeError(
                f"Twin.configure: configuration {dict(config)} lacks {', '.join(missing)}"
            )
        row = {c: float(config[c]) for c in MODE_COLUMNS}
        bs = config.get("batch_size", self.workload.default_batch_size)
        ok = self.device.spec.min_cores <= row["cores"] <= self.dev.cores and row["cores"] == int(
            row["cores"]
        )
        for c, table in self._tables.items():
            ok = ok and bool(np.abs(table - row[c]).min() <= 1e-3)
        tpcs = {"gpu_tpcs": config["gpu_tpcs"]} if "gpu_tpcs" in config else {}
        if not ok or tpcs or float(bs) != int(bs) or bs < 1:
            # slow path, for bad input and presets: the device's own check names the column
            self.device.validate(
                pd.DataFrame([{**row, **tpcs, "batch_size": bs}]),
                source=f"Twin.configure({row})",
                batch_size=True,
                presets=True,
            )
        return [np.array([row[c]]) for c in MODE_COLUMNS] + [np.array([float(bs)])]

    def _seg_seed(self, key: tuple, repeat: int) -> int:
        return deviations.stable_seed(self._seeds["noise"], "offset", *key, repeat)

    def configure(self, config: Mapping[str, float]) -> None:
        """Switch to a mode and batch size: takes ``switch_s`` of simulated time, starts
        the power moving towards the new level, and makes the next minibatch slow.

        Why the configuration is measured as if it were the first: its noise depends only
        on (seed, configuration, how often it was set before), the power settles from
        idle and its clock starts on a fixed grid, so a sweep killed and resumed writes
        the same numbers as one that ran through."""
        cols = self._check_config(config)
        tpc = self._tpc_frac(config)
        t, p = self._expected_arrays(cols, tpc)
        key = tuple(round(float(c[0]), 3) for c in cols)
        if np.any(np.asarray(tpc) != 1.0):  # a preset with TPCs gated: its own noise
            key = (*key, round(float(np.asarray(tpc).ravel()[0]), 3))
        repeat = self._reps.get(key, 0)
        self._reps[key] = repeat + 1
        self._rng = np.random.default_rng(
            deviations.stable_seed(self._seeds["noise"], *key, repeat)
        )
        period = self.sample_period_s
        # where in the sensor's period the change falls differs between configurations
        # (as on a board) but is fixed per configuration; 1/1024 s steps keep it exact
        u = deviations.uniform_from_hash(deviations.hash_rows(self._seg_seed(key, repeat), [0.0]))
        offset = math.floor(float(u[0]) * 1024.0) / 1024.0 * period
        slots = math.ceil(max(self._t - _SLOT_BASE, 0.0) / _SLOT_S + 1e-12)
        self._t = _SLOT_BASE + slots * _SLOT_S + offset
        self._seg_t0.append(self._t)
        self._seg_start.append(float(self.dev["measurement.idle_w"]))
        self._seg_target.append(float(p[0]))
        self._seg_k0.append(math.ceil((self._t - self._phase) / period - 1e-12))
        self._seg_sensor.append(deviations.stable_seed(self._seeds["sensor"], *key, repeat))
        self._time_ms = float(t[0])
        self._warm = True
        self._t += self.dev["measurement.switch_s"]

    def run_minibatch(self) -> float:
        """One minibatch on the simulated clock: expected time x log-normal jitter, an
        occasional hiccup, and the warm-up cost on the first one after a mode change."""
        if self._time_ms is None:
            raise ProfilingError("Twin.run_minibatch: call configure() first")
        m = self.dev
        ms = self._time_ms * math.exp(m["measurement.jitter"] * float(self._rng.standard_normal()))
        if self._rng.random() < m["measurement.spike_prob"]:
            ms *= 1.0 + float(self._rng.exponential(m["measurement.spike_scale"]))
        if self._warm:
            ms = ms * m["measurement.warmup_factor"] + 1e3 * m["measurement.warmup_s"]
            self._warm = False
        self._t += ms / 1e3
        return ms

    def now(self) -> float:
        return self._t

    def power_samples(self, start: float, end: float) -> np.ndarray:
        """Readings of the 1 Hz module power sensor in ``[start, end)`` (up to now):
        the settling power curve x (1 + relative noise), in whole milliwatts. A reading
        is a function of its sample index, so repeated queries agree."""
        period = self.sample_period_s
        end = min(end, self._t)
        k0 = math.ceil((start - self._phase) / period - 1e-12)
        k1 = math.ceil((end - self._phase) / period - 1e-12)
        if k1 <= k0:
            return np.empty((0, 2))
        k = np.arange(max(k0, 0), k1)
        t = self._phase + k * period
        seg = np.searchsorted(np.asarray(self._seg_t0), t, side="right") - 1
        z = np.empty(len(k))
        for j in np.unique(seg):  # noise by the reading's index within its segment
            sel = seg == j
            if j < 0:
                z[sel] = deviations.normal_from_hash(
                    deviations.hash_rows(self._seeds["sensor"], k[sel].astype(float))
                )
            else:
                rel = (k[sel] - self._seg_k0[j]).astype(float)
                z[sel] = deviations.normal_from_hash(deviations.hash_rows(self._seg_sensor[j], rel))
        w = self._power_at(t) * (1.0 + self.dev["measurement.sensor_rel"] * z)
        res = self.dev["measurement.sensor_resolution_w"]
        if res > 0:
            w = np.round(w / res) * res
        return np.column_stack([t, w])

    def reset(self) -> None:
        """Return to the top settings (the profiler asks between downward chains)."""
        self._t += self.dev["measurement.reset_s"]

    def describe(self) -> dict:
        from .._version import __version__

        return {
            "backend": "Twin",
            "device": self.device_name,
            "workload": self.workload_name,
            "seed": self.seed,
            "num_workers": self.wl.num_workers,
            "powertrain": __version__,
        }
