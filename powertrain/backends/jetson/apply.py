"""Put a picked configuration on the Jetson now, and take it off again.

Why: once the package has chosen, the user wants the pick on the board. Setting it
through sysfs is the profiler's own path (every write read back, the board's own tables
checked), with the profiler's safety: what was there is snapshot first and restored on
:meth:`Applied.restore`, on Ctrl-C, SIGTERM/SIGHUP and at interpreter exit, unless the
caller asks to keep it. A pick that must survive a reboot is an nvpmodel custom mode
(:mod:`.nvpmodel`).
"""

from __future__ import annotations

import atexit
import os
from pathlib import Path
from typing import Any

from ...errors import ProfilingError
from ..stop_signals import StopSignals, blocked
from .board_id import Recognition, recognise
from .nvpmodel import as_config
from .sysfs_knobs import SysfsKnobs, Writer, write_sysfs


class Applied:
    """A configuration set on a board; :meth:`restore` puts back what was there.

    A context manager: leaving the ``with`` block restores (unless ``keep``).
    """

    def __init__(
        self,
        knobs: SysfsKnobs,
        recognition: Recognition,
        config: dict,
        keep: bool,
        handle_signals: bool,
    ):
        self.knobs, self.recognition, self.config, self.keep = knobs, recognition, config, keep
        self.original = knobs.snapshot()  # before the first write
        self.restored = False
        self._signals = StopSignals()
        if not keep:
            if handle_signals:
                self._signals.install()
            atexit.register(self.restore)
        try:
            knobs.apply(
                int(config["cores"]),
                config["cpu_mhz"],
                config["gpu_mhz"],
                config["mem_mhz"],
                recognition.tables,
            )
        except BaseException:
            self.restore()  # a refused setting leaves the board as it was
            raise

    @property
    def state(self) -> dict:
        """The mode the board runs now (cores and MHz, read from sysfs)."""
        return self.knobs.state()

    def restore(self) -> None:
        """Write the snapshot back (idempotent); stop signals wait until it is done."""
        if self.restored:
            return
        self.restored = True
        try:
            with blocked():
                self.knobs.restore(self.original)
        finally:
            self._signals.uninstall()
            atexit.unregister(self.restore)
        if self.knobs.snapshot() != self.original:
            raise ProfilingError("the board did not return to its previous mode; reboot it")

    def __enter__(self) -> Applied:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.keep:
            self.restore()


def apply(
    board: Any = "auto",
    config: Any = None,
    *,
    keep: bool = False,
    root: str | Path = "/",
    write: Writer | None = None,
    check_root: bool = True,
    handle_signals: bool = True,
    **knobs: Any,
) -> Applied:
    """Set ``config`` on the Jetson now.

    Parameters
    ----------
    board : ``"auto"`` (recognise the module from the device tree and the nvpmodel
        file), or a catalog id / spec of the board
    config : mapping, Series or one-row DataFrame with ``cores, cpu_mhz, gpu_mhz,
        mem_mhz`` (a pick of ``pt.select``), checked against the board's own tables
    keep : leave the configuration on after this process ends; by default it is
        restored on :meth:`Applied.restore`, leaving a ``with`` block, a stop signal or
        interpreter exit
    root, write, check_root : for tests and chroots (``write`` replaces the sysfs writer)
    handle_signals : restore on SIGINT/SIGTERM/SIGHUP (main thread only)
    **knobs : ``emc``, ``gpu_devfreq``, ``allow_unlisted_emc`` as for the profiler

    Returns
    -------
    Applied
        Holds the snapshot; ``.recognition`` says which board and which warnings.
    """
    if check_root and not (hasattr(os, "geteuid") and os.geteuid() == 0):
        raise ProfilingError(
            "setting clocks through sysfs needs root: run `sudo -E $(which powertrain) apply ...`"
        )
    if config is None:
        raise ProfilingError("apply needs a configuration (cores, cpu_mhz, gpu_mhz, mem_mhz)")
    cfg = as_config(config)
    allow = bool(knobs.pop("allow_unlisted_emc", False))
    rec = recognise(root, None if board == "auto" else board, **knobs)
    sysfs = SysfsKnobs(rec.spec, root, write or write_sysfs, allow_unlisted_emc=allow, **knobs)
    return Applied(sysfs, rec, cfg, keep, handle_signals)
