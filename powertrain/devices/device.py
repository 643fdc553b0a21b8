"""A device's power-mode space: enumeration, the profiling grid, presets, samples, sweep order.

Why: every later step (profiling, prediction, selection) works on DataFrames of modes;
this module is the only place that knows how a device's knobs (a Jetson's cores and
frequency tables, a datacenter GPU's power limits) become modes.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pandas as pd

from ..errors import DataError, ModeError, PowerTrainError
from ..schema import INTEGER_COLUMNS, check_columns
from .specs import DeviceSpec, SpecLike, load_device_spec

_TOL = 1e-3  # MHz; tables are given to 0.1 kHz so this only absorbs float noise


#: the most modes :meth:`Device.power_modes` builds as one table (5 columns of float64:
#: about 0.4 GB at the limit); larger spaces are read in chunks with ``iter_power_modes``
MAX_MODES = 10_000_000
#: rows per chunk of :meth:`Device.iter_power_modes`
CHUNK_MODES = 100_000


def _size(tables: dict) -> int:
    return int(np.prod([len(t) for t in tables.values()], dtype=object))


def _decode(tables: dict, start: int, stop: int) -> pd.DataFrame:
    """Rows ``start:stop`` of the knob tables' product (the last knob varying fastest, as
    ``itertools.product`` orders it), decoded from their positions: no tuples built."""
    axes = [np.asarray(t, dtype=float) for t in tables.values()]
    pos = np.unravel_index(np.arange(start, stop, dtype=np.int64), [len(a) for a in axes])
    return _integers(pd.DataFrame({c: a[p] for c, a, p in zip(tables, axes, pos)}))


def _grid(tables: dict, what: str = "this mode space") -> pd.DataFrame:
    n = _size(tables)
    if n > MAX_MODES:
        raise ModeError(
            f"{what} has {n:,} modes, more than the {MAX_MODES:,} one table can hold; "
            "read it in chunks (Device.iter_power_modes) or draw a sample (Device.sample)"
        )
    return _decode(tables, 0, n)


def _integers(df: pd.DataFrame) -> pd.DataFrame:
    for c in INTEGER_COLUMNS:
        if c in df.columns:
            df[c] = df[c].astype(int)
    return df


class Device:
    """A board model from the catalog (or a user spec) and its power-mode space: every
    mode, the profiling grid, the vendor's presets and seeded samples, as tables.

    Parameters
    ----------
    spec : DeviceSpec
        What the package knows of the board (:func:`get_device` builds one from an id,
        file or dict).
    """

    def __init__(self, spec: DeviceSpec):
        self.spec = spec

    @property
    def name(self) -> str:
        return self.spec.name

    def __repr__(self) -> str:
        return f"Device({self.name!r}, modes={self.n_modes})"

    @property
    def knobs(self) -> tuple[str, ...]:
        """The device's knob columns (Jetson: ``cores, cpu_mhz, gpu_mhz, mem_mhz``)."""
        return tuple(self.spec.knob_tables())

    @property
    def config_columns(self) -> tuple[str, ...]:
        """What one training configuration is: the knobs plus ``batch_size`` (the inputs
        of a predictor for this device)."""
        return (*self.knobs, "batch_size")

    @property
    def n_modes(self) -> int:
        return int(np.prod([len(t) for t in self.spec.knob_tables().values()], dtype=object))

    def power_modes(self) -> pd.DataFrame:
        """Every combination of the knobs' values (Jetson: cores x CPU x GPU x memory).

        Refuses (:class:`ModeError`, naming the size) a space of more than
        :data:`MAX_MODES` modes: use :meth:`iter_power_modes` for those.

        Returns
        -------
        DataFrame
            One row per mode, one column per knob (Orin AGX: 18,096 rows).
        """
        return _grid(self.spec.knob_tables(), f"{self.name}'s power-mode space")

    def iter_power_modes(self, chunk: int = CHUNK_MODES) -> Iterator[pd.DataFrame]:
        """The rows of :meth:`power_modes`, in the same order, ``chunk`` at a time: bounded
        memory at any size.

        Parameters
        ----------
        chunk : int
            Rows per chunk.

        Returns
        -------
        iterator of DataFrame
            The chunks; each one's index continues the previous one's.
        """
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
            raise DataError(f"chunk must be an integer >= 1, got {chunk!r}")
        tables = self.spec.knob_tables()
        n = _size(tables)
        for start in range(0, n, chunk):
            df = _decode(tables, start, min(start + chunk, n))
            df.index = pd.RangeIndex(start, start + len(df))
            yield df

    def profiling_grid(self) -> pd.DataFrame:
        """The subset a reference corpus profiles (Orin AGX: the paper's 4,368 modes).

        Devices without a published grid fall back to every mode.

        Returns
        -------
        DataFrame
            One row per mode of the grid, one column per knob.
        """
        g = self.spec.profiling_grid
        if not g:
            return self.power_modes()
        df = _grid({k: g[k] for k in self.knobs}, f"{self.name}'s profiling grid")
        return self.validate(df, source=f"{self.name} profiling_grid")

    def presets(self) -> pd.DataFrame:
        """The vendor's nvpmodel modes as the board runs them, with ``name`` and
        ``budget_w`` columns, and ``gpu_tpcs`` (the TPCs left on) when the spec gives
        the TPC count. A preset may use clocks outside the custom-mode tables and gate
        TPCs, which no custom mode does; ``validate(..., presets=True)`` accepts them.

        Returns
        -------
        DataFrame
            One row per preset: ``name``, ``budget_w``, the knobs (and ``gpu_tpcs``).
        """
        tpcs = "gpu_tpcs" in self.spec.hardware
        cols = ["name", "budget_w", *self.knobs, *(["gpu_tpcs"] if tpcs else [])]
        rows = []
        for p in self.spec.presets:
            row = {"name": p["name"], "budget_w": p.get("budget_w")}
            row.update({k: p[k] for k in self.knobs})
            if tpcs:
                row["gpu_tpcs"] = self.spec.gpu_tpcs_on(p)
            rows.append(row)
        return _integers(pd.DataFrame(rows, columns=cols))

    def maxn(self) -> pd.DataFrame:
        """The fastest mode: every knob at its largest value (Jetson: all cores, every
        frequency at its maximum; a GPU: the largest power limit).

        Returns
        -------
        DataFrame
            One row.
        """
        tables = self.spec.knob_tables()
        return _grid({k: [max(v)] for k, v in tables.items()})

    def sample(
        self, n: int, seed: int = 0, stratified: bool = False, modes: pd.DataFrame | None = None
    ) -> pd.DataFrame:
        """``n`` distinct modes drawn at random (from ``modes``, default every mode).

        Parameters
        ----------
        n : int
            How many modes.
        seed : int
            The draw's seed: the same seed gives the same modes.
        stratified : bool
            Spread the draw over cells of the spec's ``stratify_by`` knobs (Jetson: GPU x
            memory frequency, the two that move time and power most), so small samples
            still cover the space.
        modes : DataFrame, optional
            The modes to draw from (e.g. :meth:`profiling_grid`); default every mode.

        Returns
        -------
        DataFrame
            ``n`` distinct modes.
        """
        if modes is None and not stratified:
            # draw positions in the mode space and decode them: the same rows as indexing
            # power_modes(), without building a space that may hold 10^11 modes
            tables = self.spec.knob_tables()
            axes = [np.asarray(t, dtype=float) for t in tables.values()]
            total = int(np.prod([len(a) for a in axes], dtype=object))
            self._check_draw(n, seed, total)
            idx = np.sort(np.random.default_rng(seed).choice(total, size=n, replace=False))
            pos = np.unravel_index(idx, [len(a) for a in axes])
            out = pd.DataFrame({c: a[p] for c, a, p in zip(tables, axes, pos)})
            return _integers(out)
        pool = self.power_modes() if modes is None else modes.reset_index(drop=True)
        self._check_draw(n, seed, len(pool))
        rng = np.random.default_rng(seed)
        if not stratified:
            idx = rng.choice(len(pool), size=n, replace=False)
            return pool.iloc[np.sort(idx)].reset_index(drop=True)
        cells = pool.groupby(list(self.spec.stratify_by or self.knobs)).indices
        keys = list(cells)
        rng.shuffle(keys)
        queues = {k: list(rng.permutation(cells[k])) for k in keys}
        chosen: list[int] = []
        while len(chosen) < n:
            for k in keys:
                if queues[k] and len(chosen) < n:
                    chosen.append(int(queues[k].pop()))
        return pool.iloc[np.sort(chosen)].reset_index(drop=True)

    def _check_draw(self, n: object, seed: object, total: int) -> None:
        """A draw of ``n`` distinct modes out of ``total`` with a usable ``seed``."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 0 < n <= total:
            raise DataError(
                f"n={n!r}: a sample needs 1..{total:,} distinct modes ({self.name} has "
                f"{total:,} power modes{'' if total == self.n_modes else ' to draw from'})"
            )
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise DataError(f"seed={seed!r}: a seed must be an integer >= 0")

    def sweep_order(self, modes: pd.DataFrame) -> pd.DataFrame:
        """Order modes so the ``step_down`` knobs only step downward; mark the resets.

        Jetsons refuse raising CPU/GPU frequencies without a reboot (PowerTrain paper,
        footnote 8). No single pass through a CPU x GPU product can be non-increasing in
        both, so the sweep is cut into chains: GPU frequency descending outermost, CPU
        frequency descending inside it, memory and cores (not restricted) innermost. That
        needs one reset per GPU step beyond the first, which is the minimum (a 13 x 14
        grid has an antichain of 13). ``reset_before`` is True on the first row of each
        chain: the profiler restores the top settings (or the user reboots) there. A
        device without such knobs is swept high to low with no reset.

        Parameters
        ----------
        modes : DataFrame
            The modes to sweep.

        Returns
        -------
        DataFrame
            The same modes in sweep order, with a ``reset_before`` column.
        """
        df = self.validate(modes, source="sweep_order")
        down = list(self.spec.step_down)
        keys = down + [k for k in reversed(self.knobs) if k not in down]
        df = df.sort_values(keys, ascending=False, kind="mergesort").reset_index(drop=True)
        rises = np.zeros(len(df), dtype=bool)
        for k in down:
            rises |= (df[k].diff() > 0).to_numpy()
        df["reset_before"] = rises
        return df

    def _preset_rows(self, df: pd.DataFrame) -> np.ndarray:
        """Rows whose knobs (and ``gpu_tpcs``, if given) are exactly one preset's."""
        hit = np.zeros(len(df), dtype=bool)
        pre = self.presets()
        for _, p in pre.iterrows():
            same = np.ones(len(df), dtype=bool)
            for k in self.knobs:
                same &= np.abs(df[k].to_numpy(dtype=float) - float(p[k])) <= _TOL
            if "gpu_tpcs" in df.columns and "gpu_tpcs" in pre.columns:
                same &= df["gpu_tpcs"].to_numpy(dtype=float) == float(p["gpu_tpcs"])
            hit |= same
        return hit

    def validate(
        self,
        modes: pd.DataFrame,
        source: str | None = None,
        batch_size: bool = False,
        presets: bool = False,
    ) -> pd.DataFrame:
        """Check every mode uses settings this device has; errors name the row and column.

        With ``presets`` a row that is exactly one of the vendor's presets passes too
        (its clocks may lie outside the custom-mode tables). A ``gpu_tpcs`` column, when
        present, must be a whole number of TPCs the device has, fewer only in a preset.

        Parameters
        ----------
        modes : DataFrame
            The modes to check.
        source : str, optional
            What to call the table in errors (its file).
        batch_size : bool
            Also check a ``batch_size`` column (numbers > 0).
        presets : bool
            Accept the vendor's presets as they are.

        Returns
        -------
        DataFrame
            The modes, frequencies snapped to the device's exact table values.

        Raises
        ------
        ModeError
            For a setting the device does not have, naming the row and column.
        """
        cols = self.config_columns if batch_size else self.knobs
        df = check_columns(modes, cols, source=source, positive=cols)
        s = self.spec
        where = f"{source}: " if source else ""
        preset = self._preset_rows(df) if presets and s.presets else np.zeros(len(df), bool)
        if "gpu_tpcs" in df.columns:
            n = s.hardware.get("gpu_tpcs")
            v = df["gpu_tpcs"].to_numpy(dtype=float)
            bad = (v != n) & ~preset if n else np.ones(len(df), dtype=bool)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise ModeError(
                    f"{where}row {i + 1}, column 'gpu_tpcs': {v[i]:g} is not a TPC count of "
                    f"{s.name}" + (f" outside its presets (all {n} on)" if n else "")
                )
        for col, table in s.knob_tables().items():
            t = np.asarray(table, dtype=float)
            v = df[col].to_numpy(dtype=float)
            if col in INTEGER_COLUMNS and np.array_equal(t, np.arange(t.min(), t.max() + 1)):
                # a count over a whole range (online cores): say the range
                bad = ((v < t.min()) | (v > t.max())) & ~preset
                if bad.any():
                    i = int(np.flatnonzero(bad)[0])
                    raise ModeError(
                        f"{where}row {i + 1}, column '{col}': {df[col].iloc[i]} is outside "
                        f"{t.min():g}..{t.max():g} for {s.name}"
                    )
                continue
            nearest = t[np.abs(v[:, None] - t[None, :]).argmin(axis=1)]
            bad = (np.abs(nearest - v) > _TOL) & ~preset
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                unit = " MHz" if col.endswith("_mhz") else ""
                what = "frequency" if col.endswith("_mhz") else f"{col} setting"
                raise ModeError(
                    f"{where}row {i + 1}, column '{col}': {v[i]:g}{unit} is not a {s.name} "
                    f"{what}; available: {', '.join(f'{x:g}' for x in table)}"
                )
            # snap away float noise so joins on modes are exact (a preset keeps its value)
            df[col] = np.where(preset, v, nearest) if preset.any() else nearest
        return df


def get_device(spec: SpecLike | Device) -> Device:
    """A device by catalog id, spec file, dict or spec: one way in for all of them.

    Parameters
    ----------
    spec : str, Path, dict, DeviceSpec or Device
        A catalog id (``"orin-agx"``, see :func:`device_names`), a registered id, a JSON
        spec file, a dict with the spec's fields, a spec, or a device (returned as is).

    Returns
    -------
    Device
        The device: its power modes, profiling grid, presets and samples.

    Raises
    ------
    SpecError
        For an unknown id or a malformed spec, naming the field.
    """
    if isinstance(spec, Device):
        return spec
    return Device(load_device_spec(spec))


def table_device(df: pd.DataFrame, source: str | None = None) -> Device | None:
    """The one known device a ``device`` column names (None without the column)."""
    if "device" not in df.columns:
        return None
    where = f"{source}: " if source else ""
    names = df["device"].dropna().astype(str).unique()
    if len(names) != 1 or df["device"].isna().any():
        raise DataError(
            f"{where}column 'device' must hold one device for every row, found "
            f"{sorted(names) or 'none'}{' and empty cells' if df['device'].isna().any() else ''}"
        )
    try:
        return get_device(names[0])
    except PowerTrainError as e:
        raise DataError(f"{where}column 'device': {e}") from None


def check_device(df: pd.DataFrame, source: str | None = None) -> pd.DataFrame:
    """With a ``device`` column: one known device, and every row one of its modes.

    Why: a 999.9 MHz GPU clock or 64 cores on an Orin is a typo or another board's data,
    and a model trained on it predicts a board that does not exist.
    """
    dev = table_device(df, source)
    if dev is not None:
        dev.validate(df, source=source or "samples", batch_size=True)
    return df
