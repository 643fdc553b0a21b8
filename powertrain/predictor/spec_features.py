"""Device spec figures as predictor inputs: one reference for a family of devices.

Why: a reference trained on one Jetson learns that board's response to its own clocks;
on another Jetson the same clocks buy a different throughput (half the CUDA cores, half
the memory bus). Trained on the corpora of several Jetsons with each one's datasheet
figures beside its knobs, one network learns how the response scales with them, and a
new device's spec places it in that family, so a user need not know which single-device
reference is closest (issue 40; measured in benchmarks/cross_device.py).

A model with spec features records their names in ``info_["spec_features"]``; the
:class:`~powertrain.predictor.Predictor` fills them from the ``device`` column of what
it is given (or from the one device it was transferred to).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd

from ..devices.device import get_device
from ..errors import DataError, PowerTrainError

#: the spec's ``hardware`` figures a family reference reads (datasheet facts every
#: Jetson spec in the catalog gives): they set the GPU's and the memory's throughput
#: per clock
SPEC_FEATURES: tuple[str, ...] = ("gpu_cuda_cores", "mem_bus_bits")
#: where a model records its spec features
INFO_KEY = "spec_features"
#: the shipped family reference (tools/train_reference.py) and the knobs it reads
FAMILY_REFERENCE = "jetson/resnet18"
FAMILY_KNOBS: tuple[str, ...] = ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz", "batch_size")


def features_of(info: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The spec features a model reads (empty for a single-device model)."""
    return tuple((info or {}).get(INFO_KEY) or ())


def knobs_only(inputs: Sequence[str], info: Mapping[str, Any] | None) -> tuple[str, ...]:
    """A model's inputs without its spec features: what a device's knobs must match."""
    extra = set(features_of(info))
    return tuple(c for c in inputs if c not in extra)


def spec_values(device: Any, features: Sequence[str] = SPEC_FEATURES) -> dict[str, float]:
    """The ``features`` of a device (a name, spec file or spec) from its ``hardware``.

    Raises
    ------
    DataError
        the device is unknown or its spec does not give one of the figures.
    """
    try:
        dev = get_device(device)
    except PowerTrainError as e:
        raise DataError(f"spec features: {e}") from None
    hw = dev.spec.hardware
    missing = [f for f in features if f not in hw]
    if missing:
        raise DataError(
            f"{dev.name}: its spec gives no {', '.join(missing)} under 'hardware', which "
            "this family reference reads; add the datasheet figures to the spec, or "
            "start from a single-device reference"
        )
    return {f: float(hw[f]) for f in features}


def attach(
    frame: pd.DataFrame,
    features: Sequence[str],
    default_device: str | None = None,
    what: str = "predict",
) -> pd.DataFrame:
    """``frame`` with the spec ``features`` filled per row from its ``device`` column,
    or from ``default_device`` where it has none. Columns already present are kept
    (the caller's figures win). Unchanged when there are no features.

    Parameters
    ----------
    frame
        modes or samples in the package schema.
    features
        spec feature names (:data:`SPEC_FEATURES`).
    default_device
        the device rows without a ``device`` column belong to (a transferred model's
        target); None: the column is required.
    what
        the caller, for the error message.

    Returns
    -------
    pandas.DataFrame
        a copy with the feature columns added (``frame`` itself when nothing is added).
    """
    todo = [f for f in features if f not in frame.columns]
    if not todo or not isinstance(frame, pd.DataFrame):
        return frame
    if "device" in frame.columns:
        out = frame.copy()
        devices = frame["device"].astype(str)
        for name in devices.unique():
            vals = spec_values(name, todo)
            rows = devices == name
            for f in todo:
                out.loc[rows, f] = vals[f]
        return out
    if default_device is None:
        raise DataError(
            f"{what}: this model reads the device's spec ({', '.join(todo)}); give the "
            "rows a 'device' column naming their device"
        )
    return frame.assign(**spec_values(default_device, todo))


def family_covers(device: Any) -> bool:
    """Whether the shipped family reference can start a transfer to ``device``: the same
    knobs as the Jetsons it was trained on, and a spec that gives its figures."""
    try:
        dev = get_device(device)
    except PowerTrainError:
        return False
    knobs_match = tuple(dev.config_columns) == FAMILY_KNOBS
    return knobs_match and all(f in dev.spec.hardware for f in SPEC_FEATURES)


def target_device(info: Mapping[str, Any]) -> str | None:
    """The one device a model was trained or transferred on, else None."""
    devices = (info.get("trained_on") or {}).get("device") or []
    return str(devices[0]) if len(devices) == 1 else None
