"""A device's power-mode space: enumeration, the profiling grid, presets, samples, sweep order.

Why: every later step (profiling, prediction, selection) works on DataFrames of modes;
this module is the only place that knows how a device's frequency tables become modes.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from .errors import ModeError
from .schema import MODE_COLUMNS, check_modes
from .specs import DeviceSpec, SpecLike, load_device_spec

_TOL = 1e-3  # MHz; tables are given to 0.1 kHz so this only absorbs float noise


def _grid(cores, cpu, gpu, mem) -> pd.DataFrame:
    rows = list(itertools.product(cores, cpu, gpu, mem))
    df = pd.DataFrame(rows, columns=list(MODE_COLUMNS))
    df["cores"] = df["cores"].astype(int)
    return df


class Device:
    """A board model from the catalog (or a user spec) and its power-mode space."""

    def __init__(self, spec: DeviceSpec):
        self.spec = spec

    @property
    def name(self) -> str:
        return self.spec.name

    def __repr__(self) -> str:
        return f"Device({self.name!r}, modes={self.n_modes})"

    @property
    def n_modes(self) -> int:
        s = self.spec
        return (s.cores - s.min_cores + 1) * len(s.cpu_mhz) * len(s.gpu_mhz) * len(s.mem_mhz)

    def power_modes(self) -> pd.DataFrame:
        """Every combination of online cores, CPU, GPU and memory frequency."""
        s = self.spec
        return _grid(range(s.min_cores, s.cores + 1), s.cpu_mhz, s.gpu_mhz, s.mem_mhz)

    def profiling_grid(self) -> pd.DataFrame:
        """The subset a reference corpus profiles (Orin AGX: the paper's 4,368 modes).

        Devices without a published grid fall back to every mode.
        """
        g = self.spec.profiling_grid
        if not g:
            return self.power_modes()
        df = _grid(g["cores"], g["cpu_mhz"], g["gpu_mhz"], g["mem_mhz"])
        return self.validate(df, source=f"{self.name} profiling_grid")

    def presets(self) -> pd.DataFrame:
        """The vendor's nvpmodel modes, caps resolved to table entries, with a ``name`` column."""
        rows = [
            {
                "name": p["name"],
                "budget_w": p.get("budget_w"),
                **{k: p[k] for k in MODE_COLUMNS},
            }
            for p in self.spec.presets
        ]
        df = pd.DataFrame(rows, columns=["name", "budget_w", *MODE_COLUMNS])
        df["cores"] = df["cores"].astype(int)
        return df

    def maxn(self) -> pd.DataFrame:
        """The fastest mode: all cores, every frequency at its maximum (one row)."""
        s = self.spec
        return pd.DataFrame(
            [[s.cores, max(s.cpu_mhz), max(s.gpu_mhz), max(s.mem_mhz)]], columns=list(MODE_COLUMNS)
        )

    def sample(
        self, n: int, seed: int = 0, stratified: bool = False, modes: pd.DataFrame | None = None
    ) -> pd.DataFrame:
        """``n`` distinct modes drawn at random (from ``modes``, default every mode).

        ``stratified`` spreads the draw over GPU x memory frequency cells (the two knobs
        that move time and power most), so small samples still cover the space.
        """
        if modes is None and not stratified:
            # draw positions in the mode space and decode them: the same rows as indexing
            # power_modes(), without building a space that may hold 10^11 modes
            s = self.spec
            axes = [np.arange(s.min_cores, s.cores + 1), s.cpu_mhz, s.gpu_mhz, s.mem_mhz]
            total = int(np.prod([len(a) for a in axes], dtype=object))
            if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 0 < n <= total:
                raise ValueError(f"n must be an integer in 1..{total}, got {n!r}")
            idx = np.sort(np.random.default_rng(seed).choice(total, size=n, replace=False))
            pos = np.unravel_index(idx, [len(a) for a in axes])
            out = pd.DataFrame({c: np.asarray(a)[p] for c, a, p in zip(MODE_COLUMNS, axes, pos)})
            out["cores"] = out["cores"].astype(int)
            return out
        pool = self.power_modes() if modes is None else modes.reset_index(drop=True)
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 0 < n <= len(pool):
            raise ValueError(f"n must be an integer in 1..{len(pool)}, got {n!r}")
        rng = np.random.default_rng(seed)
        if not stratified:
            idx = rng.choice(len(pool), size=n, replace=False)
            return pool.iloc[np.sort(idx)].reset_index(drop=True)
        cells = pool.groupby(["gpu_mhz", "mem_mhz"]).indices
        keys = list(cells)
        rng.shuffle(keys)
        queues = {k: list(rng.permutation(cells[k])) for k in keys}
        chosen: list[int] = []
        while len(chosen) < n:
            for k in keys:
                if queues[k] and len(chosen) < n:
                    chosen.append(int(queues[k].pop()))
        return pool.iloc[np.sort(chosen)].reset_index(drop=True)

    def sweep_order(self, modes: pd.DataFrame) -> pd.DataFrame:
        """Order modes so CPU and GPU frequencies step downward, and mark the resets.

        The boards refuse raising CPU/GPU frequencies without a reboot (PowerTrain paper,
        footnote 8). No single pass through a CPU x GPU product can be non-increasing in
        both, so the sweep is cut into chains: GPU frequency descending outermost, CPU
        frequency descending inside it, memory and cores (not restricted) innermost. That
        needs one reset per GPU step beyond the first, which is the minimum (a 13 x 14
        grid has an antichain of 13). ``reset_before`` is True on the first row of each
        chain: the profiler restores the top settings (or the user reboots) there.
        """
        df = self.validate(modes, source="sweep_order")
        keys = ["gpu_mhz", "cpu_mhz", "mem_mhz", "cores"]
        df = df.sort_values(keys, ascending=False, kind="mergesort").reset_index(drop=True)
        rises = (df["cpu_mhz"].diff() > 0) | (df["gpu_mhz"].diff() > 0)
        df["reset_before"] = rises.to_numpy()
        return df

    def validate(
        self, modes: pd.DataFrame, source: str | None = None, batch_size: bool = False
    ) -> pd.DataFrame:
        """Check every mode uses settings this device has; errors name the row and column."""
        df = check_modes(modes, source=source, batch_size=batch_size)
        s = self.spec
        where = f"{source}: " if source else ""
        bad_cores = (df["cores"] < s.min_cores) | (df["cores"] > s.cores)
        if bad_cores.any():
            i = int(np.flatnonzero(bad_cores.to_numpy())[0])
            raise ModeError(
                f"{where}row {i + 1}, column 'cores': {df['cores'].iloc[i]} is outside "
                f"{s.min_cores}..{s.cores} for {s.name}"
            )
        for col, table in (("cpu_mhz", s.cpu_mhz), ("gpu_mhz", s.gpu_mhz), ("mem_mhz", s.mem_mhz)):
            t = np.asarray(table)
            v = df[col].to_numpy()
            nearest = t[np.abs(v[:, None] - t[None, :]).argmin(axis=1)]
            bad = np.abs(nearest - v) > _TOL
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise ModeError(
                    f"{where}row {i + 1}, column '{col}': {v[i]:g} MHz is not a {s.name} "
                    "frequency; "
                    f"available: {', '.join(f'{x:g}' for x in table)}"
                )
            df[col] = nearest  # snap away float noise so joins on modes are exact
        return df


def get_device(spec: SpecLike | Device) -> Device:
    """A :class:`Device` from a catalog id (``"orin-agx"``), a spec file, a dict or a spec."""
    if isinstance(spec, Device):
        return spec
    return Device(load_device_spec(spec))
