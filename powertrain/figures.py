"""Reports people would rather look at than read: the time–power plot, a CSV and an HTML page.

Why: a selection is trusted when the user can see where it sits among all modes and on
the Pareto front; the HTML page is self-contained (plot embedded) so it can be mailed.
Tables print frequencies exactly as the device has them (1036.8 MHz, never 1037): a
rounded frequency is not a setting anyone can apply. This module never switches the
matplotlib backend: in a notebook the figure shows inline; for files it renders through
its own Agg canvas.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import pandas as pd


def plot_time_power(
    est: pd.DataFrame,
    front: pd.DataFrame | None = None,
    chosen: pd.Series | None = None,
    power_cap_w: float | None = None,
    truth: pd.DataFrame | None = None,
    title: str = "",
    ax=None,
):
    """Scatter every configuration (power vs time), the Pareto front, the cap and the pick.

    With ``truth`` (same rows, measured or twin values) the true points are drawn faintly
    behind the predictions so the error is visible at a glance.
    """
    if ax is None:
        import matplotlib.pyplot as plt  # the user's backend: inline in a notebook

        _, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    if truth is not None:
        ax.scatter(
            truth["power_w"],
            truth["time_ms"],
            s=2,
            c="0.8",
            label="true (all modes)",
            rasterized=True,
        )
    ax.scatter(
        est["power_w"],
        est["time_ms"],
        s=2,
        c="tab:blue",
        alpha=0.35,
        label="predicted",
        rasterized=True,
    )
    if front is not None and len(front):
        ax.plot(
            front["power_w"],
            front["time_ms"],
            "-o",
            c="tab:orange",
            ms=3,
            lw=1.2,
            label="Pareto front",
        )
    if power_cap_w is not None:
        ax.axvline(power_cap_w, c="tab:red", ls="--", lw=1, label=f"cap {power_cap_w:g} W")
    if chosen is not None:
        ax.scatter(
            [chosen["power_w"]],
            [chosen["time_ms"]],
            s=80,
            marker="*",
            c="tab:red",
            zorder=5,
            label="chosen",
        )
    ax.set_xlabel("power (W)")
    ax.set_ylabel("time per minibatch (ms)")
    ax.set_yscale("log")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, markerscale=2)
    if title:
        ax.set_title(title, fontsize=10)
    return ax


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


#: columns shown exactly (device settings), not rounded to a few significant digits
EXACT_COLUMNS = ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz", "batch_size")


def format_value(column: str, value: object) -> str:
    """A cell as a person should read it: settings exact, measurements to 4 digits."""
    if isinstance(value, float) and value != value:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.10g}" if column in EXACT_COLUMNS else f"{value:.4g}"
    return str(value)


def table_html(table: pd.DataFrame) -> str:
    """An HTML table with every setting exact and other numbers to 4 significant digits."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in table.columns)
    body = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(format_value(str(c), v))}</td>" for c, v in zip(table.columns, row)
        )
        + "</tr>"
        for row in table.itertuples(index=False)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def write_html(
    path: str | Path, title: str, summary: dict, png: bytes, table: pd.DataFrame
) -> Path:
    """A self-contained HTML page: a key/value summary, the plot and a table."""
    path = Path(path)
    rows = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>"
        for k, v in summary.items()
    )
    img = base64.b64encode(png).decode()
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}
table{{border-collapse:collapse}}
th,td{{border:1px solid #ccc;padding:2px 8px;text-align:left}}</style></head><body>
<h1>{html.escape(title)}</h1><table>{rows}</table>
<p><img alt="time vs power" src="data:image/png;base64,{img}"></p>
<h2>Pareto front</h2>{table_html(table)}
</body></html>"""
    path.write_text(page)
    return path
