"""Jetson module power: jetson-stats (jtop) when its service runs, else the INA3221 files,
read by a background sampler thread at the boards' 1 Hz.

Why: the paper samples the module power every second through jtop (§2.4); boards
without jetson-stats (or with its service stopped) still expose the same INA3221 rails
in sysfs. Which rails add up to the module total is device data from the catalog, so
no rail is counted twice (AGX Orin's VIN_SYS_5V0 already feeds VDDQ_VDD2_1V8AO).
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from functools import partial
from pathlib import Path
from typing import Callable

from ...devices.specs import DeviceSpec
from ...errors import ProfilingError
from .sysfs_knobs import glob_under

#: rails that measure the whole module input; when present they are the total alone
INPUT_RAILS = ("VDD_IN", "POM_5V_IN", "VIN")
#: rails supplied by another listed rail (counting both would double-count)
_DOWNSTREAM = {"VDDQ_VDD2_1V8AO": "VIN_SYS_5V0"}

JTOP_HELP = (
    "the jetson-stats (jtop) service is not running: start it with "
    "`sudo systemctl restart jtop.service` (install: `sudo pip3 install -U jetson-stats`, "
    "then reboot), or use sensor='hwmon' to read the INA3221 files directly"
)


def total_rails(spec: DeviceSpec) -> tuple[str, ...]:
    """Names of the rails whose sum is the module power, from the device's catalog data.

    A spec may list them explicitly (``sysfs.power_rails_sysfs.total_rails``); else a
    module-input rail wins, else every connected rail not fed by another listed one.
    """
    info = spec.sysfs.get("power_rails_sysfs", {}) if isinstance(spec.sysfs, dict) else {}
    if isinstance(info.get("total_rails"), (list, tuple)):
        return tuple(info["total_rails"])
    names: list[str] = []
    for chans in (info.get("channels") or {}).values():
        vals = chans.values() if isinstance(chans, dict) else chans
        names += [str(v) for v in vals if not str(v).upper().startswith("NC")]
    inputs = [n for n in names if n in INPUT_RAILS]
    if inputs:
        return (inputs[0],)
    return tuple(n for n in names if _DOWNSTREAM.get(n) not in names)


def component_rails(spec: DeviceSpec) -> tuple[str, ...]:
    """Rails recorded beside the module total (``sysfs.power_rails_sysfs.component_rails``:
    the Orin Nano/NX's VDD_CPU_GPU_CV and VDD_SOC); none unless the spec lists them, so a
    device's output columns never depend on what one board happens to expose."""
    info = spec.sysfs.get("power_rails_sysfs", {}) if isinstance(spec.sysfs, dict) else {}
    names = info.get("component_rails") if isinstance(info, dict) else None
    return tuple(str(n) for n in names) if isinstance(names, (list, tuple)) else ()


def rail_column(rail: str) -> str:
    """The output column of a component rail: ``VDD_SOC`` -> ``observed_vdd_soc_w``."""
    return f"observed_{rail.lower()}_w"


def _pick_rails(found: dict, wanted: tuple[str, ...], where: str) -> list[str]:
    chosen = [n for n in wanted if n in found]
    if wanted and len(chosen) == len(wanted):
        return chosen
    inputs = [n for n in INPUT_RAILS if n in found]
    fallback = inputs[:1] or [n for n in found if _DOWNSTREAM.get(n) not in found]
    warnings.warn(
        f"{where}: expected rails {', '.join(wanted) or '-'} "
        f"but found {', '.join(found) or 'none'}; "
        f"using {' + '.join(fallback)} as the module power",
        RuntimeWarning,
        stacklevel=3,
    )
    return fallback


def _milli(path: Path) -> float:
    """A sysfs reading in milli-units (mW), in base units."""
    return float(path.read_text()) / 1e3


def _milli_product(volt: Path, curr: Path) -> float:
    """Power in W from a mV and a mA file."""
    return float(volt.read_text()) * float(curr.read_text()) / 1e6


class PowerSensor(ABC):
    """One reading of the module power, in watts, now."""

    name = "sensor"
    #: rails recorded beside the total (:func:`component_rails`), in column order
    components: tuple[str, ...] = ()

    @abstractmethod
    def read_w(self) -> float:
        """Current module power (W)."""

    def read_components(self) -> dict[str, float]:
        """Each component rail's power now (W); NaN for one the board does not expose."""
        return {}

    def close(self) -> None:  # noqa: B027 - most sensors hold nothing
        """Release the sensor (stop a jtop client)."""


class HwmonSensor(PowerSensor):
    """The INA3221 rails in sysfs: hwmon on JetPack 5+ (mV, mA), iio on JetPack 4 (mW).

    The hwmon index differs per boot, so it is globbed.
    """

    name = "hwmon"

    def __init__(self, spec: DeviceSpec, root: str | Path = "/"):
        root = Path(root)
        readers: dict[str, Callable[[], float]] = {}
        for d in glob_under(root, "/sys/bus/i2c/drivers/ina3221/*/hwmon/hwmon*"):
            for n in range(1, 4):
                label, volt, curr = d / f"in{n}_label", d / f"in{n}_input", d / f"curr{n}_input"
                if label.exists() and volt.exists() and curr.exists():
                    readers[label.read_text().strip()] = partial(_milli_product, volt, curr)
        for d in glob_under(root, "/sys/bus/i2c/drivers/ina3221x/*/iio:device*"):
            for n in range(0, 3):
                label, power = d / f"rail_name_{n}", d / f"in_power{n}_input"
                if label.exists() and power.exists():
                    readers[label.read_text().strip()] = partial(_milli, power)
        if not readers:
            raise ProfilingError(
                f"no INA3221 power rails under {root}/sys/bus/i2c/drivers/ina3221*/ "
                "(hwmon or iio); "
                "this board exposes them elsewhere: install jetson-stats and start its service "
                "(sensor='jtop')"
            )
        self.rails = _pick_rails(readers, total_rails(spec), "INA3221")
        self._readers = [readers[n] for n in self.rails]
        self.components = component_rails(spec)
        self._parts = {n: readers.get(n) for n in self.components}

    def read_components(self) -> dict[str, float]:
        try:
            return {n: r() if r else float("nan") for n, r in self._parts.items()}
        except (OSError, ValueError) as e:
            raise ProfilingError(f"reading the INA3221 component rails failed: {e}") from None

    def read_w(self) -> float:
        try:
            return float(sum(r() for r in self._readers))
        except (OSError, ValueError) as e:
            raise ProfilingError(
                f"reading the INA3221 rails {', '.join(self.rails)} failed: {e}"
            ) from None


class JtopSensor(PowerSensor):
    """Module power through a jetson-stats client (as in the paper).

    ``jtop_factory`` replaces ``jtop.jtop`` (tests). jtop's own ``tot`` adds every rail
    when there is no input rail, which double-counts on AGX Orin, so the catalog's rails
    are summed here when jtop reports them.
    """

    name = "jtop"

    def __init__(
        self, spec: DeviceSpec, interval_s: float = 1.0, jtop_factory: Callable | None = None
    ):
        if jtop_factory is None:
            try:
                from jtop import jtop as default_factory
            except ImportError:
                raise ProfilingError(
                    "jetson-stats is not installed: `pip install powertrain[jetson]` "
                    "(or sensor='hwmon')"
                ) from None
            jtop_factory = default_factory
        try:
            self._jetson = jtop_factory(interval=interval_s)
            self._jetson.start()
        except Exception as e:  # jtop raises JtopException when the service is down
            if type(e).__name__ != "JtopException" and not isinstance(
                e, (OSError, ConnectionError)
            ):
                raise
            raise ProfilingError(f"{JTOP_HELP} ({e})".replace("\n", " ")) from None
        self._wanted = total_rails(spec)
        self.rails: list[str] | None = None
        self.components = component_rails(spec)

    def read_components(self) -> dict[str, float]:
        rails = (self._jetson.power or {}).get("rail", {})
        return {
            n: float(rails[n]["power"]) / 1e3 if n in rails else float("nan")
            for n in self.components
        }

    def read_w(self) -> float:
        power = self._jetson.power or {}
        rails = power.get("rail", {})
        if self.rails is None and rails:
            found = {n: None for n in rails}
            self.rails = _pick_rails(found, self._wanted, "jtop") if self._wanted else list(rails)
        if self.rails:
            return float(sum(rails[n]["power"] for n in self.rails if n in rails)) / 1e3
        tot = power.get("tot", {})
        if "power" not in tot:
            raise ProfilingError("jtop reports no power rails on this board")
        return float(tot["power"]) / 1e3

    def close(self) -> None:
        try:
            self._jetson.close()
        except Exception:  # pragma: no cover - closing a dead client
            pass


def open_sensor(
    spec: DeviceSpec,
    root: str | Path = "/",
    kind: str = "auto",
    interval_s: float = 1.0,
    jtop_factory: Callable | None = None,
) -> PowerSensor:
    """The module-power sensor to use: ``jtop``, ``hwmon``, or ``auto`` (jtop when it is
    installed and its service answers, else hwmon, saying why)."""
    if kind == "hwmon":
        return HwmonSensor(spec, root)
    if kind == "jtop":
        return JtopSensor(spec, interval_s, jtop_factory)
    if kind != "auto":
        raise ProfilingError(f"sensor must be auto, jtop or hwmon, not {kind!r}")
    try:
        return JtopSensor(spec, interval_s, jtop_factory)
    except ProfilingError as e:
        warnings.warn(f"{e}; reading the INA3221 files instead", RuntimeWarning, stacklevel=2)
    return HwmonSensor(spec, root)
