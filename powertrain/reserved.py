"""Column names the package writes itself, so no knob or predicted target may take them.

Why: a device knob called ``power_w`` or a target called ``cores`` would be overwritten
by a prediction or a measurement in the same table, and the pick would no longer say
which setting to use. Kept free of imports so spec parsing stays cheap.
"""

from __future__ import annotations

#: identity, measurements, estimates and picks written beside a configuration
RESERVED_COLUMNS = (
    "device",
    "workload",
    "batch_size",
    "name",
    "budget_w",
    "reset_before",
    "time_ms",
    "power_w",
    "epoch_s",
    "epoch_kj",
    "tt_acc",
    "energy_acc",
    "n_minibatches",
    "n_power_samples",
    "stable",
    "profile_s",
)
#: ...and names ending in ``_std`` (spreads) or starting ``observed_`` / ``true_``
RESERVED_SUFFIXES = ("_std",)
RESERVED_PREFIXES = ("observed_", "true_")


def reserved_column(name: str) -> bool:
    """True if the package writes a column ``name`` itself (see :data:`RESERVED_COLUMNS`)."""
    return (
        name in RESERVED_COLUMNS
        or name.endswith(RESERVED_SUFFIXES)
        or name.startswith(RESERVED_PREFIXES)
    )
