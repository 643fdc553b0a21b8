"""Exceptions users can catch; each message names the file, row, column or argument at fault."""

from __future__ import annotations


class PowerTrainError(Exception):
    """Base class for every error this package raises on purpose."""


class SpecError(PowerTrainError, ValueError):
    """A device or workload spec (name, object or file) is unknown or malformed."""


class ModeError(PowerTrainError, ValueError):
    """A power mode names a setting the device does not have."""


class DataError(PowerTrainError, ValueError):
    """A corpus / samples table is missing columns or holds invalid values."""


class ModelFileError(PowerTrainError, ValueError):
    """A model directory is incomplete, tampered with, or from an incompatible version."""


class NoFeasibleModeError(PowerTrainError, ValueError):
    """No configuration satisfies the requested power cap."""


class ProfilingError(PowerTrainError, RuntimeError):
    """Profiling could not proceed (hardware refused a setting, step raised, ...)."""
