"""The Pareto plot every report page draws, and PNG rendering without pyplot.

Why: a selection is trusted when the user can see where it sits among all modes and on
the Pareto front; the demo page, a fleet case page, its index thumbnail and a notebook
draw the same plot, so they read alike. This module never switches the matplotlib
backend: in a notebook the figure shows inline; for files it renders through its own
Agg canvas.
"""

from __future__ import annotations

import io
from typing import Sequence

import numpy as np
import pandas as pd


def plot_time_power(
    est: pd.DataFrame | None,
    front: pd.DataFrame | None = None,
    chosen: pd.Series | pd.DataFrame | None = None,
    power_cap_w: float | Sequence[float] | None = None,
    truth: pd.DataFrame | None = None,
    title: str = "",
    ax=None,
    *,
    samples: pd.DataFrame | None = None,
    true_front: pd.DataFrame | None = None,
    time: str | None = None,
    thumbnail: bool = False,
):
    """The Pareto plot (power vs time, log time axis), the one every page draws.

    Layers, each when given: ``truth`` (the true value of every mode, faint grey),
    ``est`` (the prediction for every mode, faint blue), the profiled ``samples``, the
    ``true_front`` (grey line), the predicted ``front`` (orange), the cap(s)
    ``power_cap_w`` (caps beyond every mode's power are left out so they don't squash
    the plot) and the ``chosen`` pick(s) (red stars). ``time`` is the time column
    (default: the table's, ``time_ms`` or ``epoch_s``); a ``thumbnail`` keeps only the
    fronts, picks and small axes.
    """
    from ..decisions.optimise import time_column

    if ax is None:
        import matplotlib.pyplot as plt  # the user's backend: inline in a notebook

        _, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    tables = [t for t in (est, front, truth) if t is not None]
    y = time or (time_column(tables[0]) if tables else "time_ms")
    small = dict(s=2, rasterized=True)
    if truth is not None and not thumbnail:
        ax.scatter(truth["power_w"], truth[y], c="0.8", label="true (all modes)", **small)
    if est is not None and not thumbnail:
        ax.scatter(est["power_w"], est[y], c="tab:blue", alpha=0.25, label="predicted",
                   **small)  # fmt: skip
    if samples is not None and not thumbnail and y in samples.columns:
        ax.scatter(samples["power_w"], samples[y], s=10, c="tab:green", marker="x", lw=0.8,
                   label=f"profiled ({len(samples)} modes)")  # fmt: skip
    if true_front is not None and len(true_front):
        ax.plot(true_front["power_w"], true_front[y], "-", c="0.35", lw=1.2,
                label="true Pareto front")  # fmt: skip
    if front is not None and len(front):
        ax.plot(front["power_w"], front[y], "-o", c="tab:orange", ms=1.5 if thumbnail else 3,
                lw=1.2, label="predicted Pareto front")  # fmt: skip
    caps: list[float] = (
        [] if power_cap_w is None else np.atleast_1d(power_cap_w).astype(float).tolist()
    )
    top = max((float(t["power_w"].max()) for t in tables), default=np.inf) * 1.05
    shown = [c for c in caps if c <= top]
    for i, cap in enumerate(shown):
        label = (f"cap {cap:g} W" if len(caps) == 1 else "power caps") if i == 0 else None
        ax.axvline(cap, c="tab:red", ls="--" if len(caps) == 1 else ":", lw=1, label=label)
    if chosen is not None:
        picks = chosen.to_frame().T if isinstance(chosen, pd.Series) else chosen
        if len(picks):
            ax.scatter(picks["power_w"].astype(float), picks[y].astype(float), marker="*",
                       s=30 if thumbnail else 80, c="tab:red", zorder=5,
                       label="chosen" if len(picks) == 1 else "pick per cap")  # fmt: skip
    plain_log_axis(ax)
    per_epoch = y == "epoch_s"
    if thumbnail:
        ax.tick_params(labelsize=8, length=2, pad=1)
        ax.set_xlabel("power (W)", fontsize=8, labelpad=1)
        ax.set_ylabel("s / epoch" if per_epoch else "ms / minibatch", fontsize=8, labelpad=1)
        from matplotlib.ticker import NullFormatter

        ax.yaxis.set_minor_formatter(NullFormatter())  # minor labels collide when small
    else:
        ax.set_xlabel("power (W)")
        ax.set_ylabel("time per epoch (s)" if per_epoch else "time per minibatch (ms)")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8, markerscale=2, loc="upper right")
    if title and not thumbnail:
        ax.set_title(title, fontsize=10)
    return ax


def plain_log_axis(ax, which: str = "y") -> None:
    """A log scale labelled as a person reads it: ``60``, not ``6×10^1``; minor ticks
    labelled only where the range is under a decade, and then only as many as fit."""
    from matplotlib.ticker import FuncFormatter, LogFormatter

    axis = ax.yaxis if which == "y" else ax.xaxis
    (ax.set_yscale if which == "y" else ax.set_xscale)("log")
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(1, 0.4)))


def new_figure(figsize: tuple[float, float] = (7, 4.5), dpi: int = 110):
    """A figure and axes drawn by Agg alone: no pyplot, no global backend switch, safe in
    worker processes and threads."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, dpi=dpi)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def figure_png(ax) -> bytes:
    """PNG bytes of the figure holding ``ax`` (closed in pyplot if pyplot made it)."""
    import sys

    buf = io.BytesIO()
    ax.figure.tight_layout()
    ax.figure.savefig(buf, format="png")
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close(ax.figure)
    return buf.getvalue()
