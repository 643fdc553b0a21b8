"""The report's HTML: one page template for a case (the demo's and each fleet case's),
the fleet index that links the cases, and numbers written as a person reads them.

Why: a fleet is judged by scanning one table (what each device/workload should run at
each cap, and what an epoch then costs) and drilling into a case only where something
looks off; the demo's page is the same kind of case page, so one template serves both.
Plain HTML and PNG files, so a folder opens from disk, a web server or a CI artifact
alike. Settings are printed exactly as the device has them (1036.8 MHz, never 1037): a
rounded frequency is not a setting anyone can apply.
"""

from __future__ import annotations

import html
import io
import json
import math
from string import Template
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from .cases import CaseResult
from .figures import figure_png, new_figure, plot_time_power
from .spec import OBJECTIVES, FleetSpec

#: the one page template; ``$body`` is built by the functions below
PAGE = Template(
    """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>$title</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.2em auto;max-width:84em;padding:0 1em;
  color:#222}
table{border-collapse:collapse;margin:0.5em 0}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top;
  font-size:88%}
th{background:#f3f3f3;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
table.grid{table-layout:fixed;width:100%}
table.grid td{overflow-wrap:anywhere}
.none{color:#a00} .same{color:#777} .over{color:#b00;font-weight:600}
img.thumb{width:200px;display:block}
p.note{color:#555;font-size:90%}
</style></head>
<body>$back<h1>$heading</h1>
$body
</body></html>
"""
)

#: how the pages name a table's columns
HUMAN_NAMES = {
    "power_cap_w": "power cap (W)",
    "cores": "CPU cores",
    "cpu_mhz": "CPU (MHz)",
    "gpu_mhz": "GPU (MHz)",
    "mem_mhz": "memory (MHz)",
    "power_limit_w": "power limit (W)",
    "batch_size": "batch size",
    "time_ms": "time per minibatch (ms)",
    "time_ms_std": "± time (ms)",
    "power_w": "power (W)",
    "power_w_std": "± power (W)",
    "epoch_s": "time per epoch (s)",
    "epoch_s_std": "± time (s)",
    "epoch_kj": "energy per epoch (kJ)",
    "true_time_ms": "true time per minibatch (ms)",
    "true_epoch_s": "true time per epoch (s)",
    "true_epoch_kj": "true energy per epoch (kJ)",
    "true_power_w": "true power (W)",
    "penalty_pct": "penalty vs true best (%)",
    "over_cap_w": "true power − cap (W)",
    "feasible": "fits",
}

#: columns that are device settings: printed exactly, never rounded
EXACT_COLUMNS = {"cores", "cpu_mhz", "gpu_mhz", "mem_mhz", "batch_size", "power_limit_w",
                 "power_cap_w"}  # fmt: skip


def number(value: float) -> str:
    """A measurement as a person reads it: 16,990 and 7,402 (never 1.699e+04), 740, 74.0,
    7.40, 0.740 — whole numbers from 100, else three significant digits; no exponent."""
    v = float(value)
    if not math.isfinite(v):
        return "" if math.isnan(v) else str(v)
    rounded = float(f"{v:.3g}")  # 9.998 reads 10.0, not 10.00
    a = abs(rounded)
    v = v if a >= 100 else rounded
    if a >= 100 or a == 0:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:#.3g}"


def format_value(column: str, value: object) -> str:
    """A cell: settings exact (1036.8, 16), measurements by :func:`number`."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        if column in EXACT_COLUMNS:
            return f"{float(value):.10g}"
        return number(value)
    return str(value)


def table_html(table: pd.DataFrame, css: str = "") -> str:
    """An HTML table with human column names, settings exact and numbers by :func:`number`."""
    head = "".join(f"<th>{html.escape(HUMAN_NAMES.get(str(c), str(c)))}</th>"
                   for c in table.columns)  # fmt: skip
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{html.escape(format_value(str(c), v))}</td>'
            if isinstance(v, (int, float)) and not isinstance(v, bool)
            else f"<td>{html.escape(format_value(str(c), v))}</td>"
            for c, v in zip(table.columns, row)
        )
        + "</tr>"
        for row in table.itertuples(index=False)
    )
    cls = f' class="{css}"' if css else ""
    return f"<table{cls}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def facts_html(facts: Mapping[str, object]) -> str:
    rows = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>"
        for k, v in facts.items()
    )
    return f"<table>{rows}</table>"


def render_page(title: str, body: str, back: str | None = None, heading: str | None = None) -> str:
    """The one page template around ``body`` (HTML), with an optional link ``back``."""
    link = f'<p><a href="{html.escape(back)}">&larr; all cases</a></p>' if back else ""
    return PAGE.substitute(
        title=html.escape(title), heading=html.escape(heading or title), back=link, body=body
    )


def case_page_html(
    title: str,
    facts: Mapping[str, object],
    image_src: str,
    caption: str,
    picks: pd.DataFrame,
    sections: Sequence[tuple[str, str]] = (),
    back: str | None = None,
) -> str:
    """A case page: its facts, the Pareto plot, the pick per cap, then ``sections``
    (heading, HTML). The demo and every fleet case render through this."""
    body = (
        f"{facts_html(facts)}<h2>Pareto front</h2>"
        f'<p><img alt="Pareto front: {html.escape(title)}" src="{image_src}" '
        f'style="max-width:100%;width:750px"></p><p class="note">{html.escape(caption)}</p>'
        f"<h2>Chosen configuration per power cap</h2>{table_html(picks)}"
        + "".join(f"<h2>{html.escape(h)}</h2>{s}" for h, s in sections)
    )
    return render_page(title, body, back=back)


# ------------------------------------------------------------------ fleet pages --
#: the files a case folder holds, in the order the page lists them
CASE_FILES = (
    "index.html",
    "pareto.png",
    "thumb.png",
    "picks.csv",
    "pareto_front.csv",
    "samples.csv",
    "estimates.csv.gz",
    "case.json",
)
CSV_FILES = ("picks.csv", "pareto_front.csv", "samples.csv", "estimates.csv.gz")


def mode_text(row: Mapping[Any, Any], config: Iterable[str]) -> str:
    """A configuration exactly as the device has it, e.g. ``8 cores, CPU 2201.6 / GPU
    1300.5 / mem 3199 MHz, batch 16`` or ``limit 250 W, batch 64`` (knobs from the device)."""
    named = {"cores": "{} cores", "cpu_mhz": "CPU {}", "gpu_mhz": "GPU {}", "mem_mhz": "mem {}",
             "batch_size": "batch {}", "power_limit_w": "limit {} W"}  # fmt: skip
    clocks: list[str] = []
    parts: list[str] = []
    for c in config:
        if c not in row or row[c] != row[c]:
            continue
        text = named.get(c, f"{c} {{}}").format(f"{float(row[c]):.10g}")
        text = "1 core" if text == "1 cores" else text
        if c.endswith("_mhz"):  # frequencies together, one unit: "CPU 2201.6 / ... MHz"
            if not clocks:
                parts.append("")  # the group's place: where its first clock is
            clocks.append(text)
        else:
            parts.append(text)
    if clocks:
        parts[parts.index("")] = " / ".join(clocks) + " MHz"
    return ", ".join(parts)


def pareto_png(result: CaseResult, thumbnail: bool = False) -> bytes:
    """The case's Pareto plot (time per epoch vs power): every mode predicted, the true
    values and front where the twin knows them, the profiled modes, the caps and the
    pick under each."""
    fig, ax = new_figure((3.0, 2.0) if thumbnail else (7.5, 4.6), dpi=80 if thumbnail else 100)
    c = result.case
    picks = result.picks[result.picks["feasible"]] if len(result.picks) else result.picks
    seen = result.samples
    if "epoch_s" not in seen.columns and "time_ms" in seen.columns:
        seen = seen.assign(epoch_s=seen["time_ms"] * result.steps_per_epoch / 1e3)
    plot_time_power(
        result.estimates,
        front=result.front,
        chosen=picks if len(picks) else None,
        power_cap_w=c.power_caps,
        truth=result.truth,
        samples=seen,
        true_front=result.true_front,
        time="epoch_s",
        thumbnail=thumbnail,
        ax=ax,
        title=f"{c.device} / {c.workload}, batch {c.batch_size}, objective {c.objective}",
    )
    return figure_png(ax)


def _picks_table(result: CaseResult) -> pd.DataFrame:
    cols = ["power_cap_w", "feasible", *result.config, "batch_size", "epoch_s", "epoch_kj",
            "power_w", "power_w_std", "time_ms", "time_ms_std", "true_epoch_s",
            "true_epoch_kj", "true_power_w", "over_cap_w", "penalty_pct", "how"]  # fmt: skip
    cols = list(dict.fromkeys(cols))
    return result.picks[[c for c in cols if c in result.picks.columns]]


def case_summary(result: CaseResult) -> dict:
    """What the index shows of a case (kept as case.json beside its page)."""
    c = result.case
    picks = []
    for row in result.picks.to_dict("records"):
        if not row["feasible"]:
            picks.append({"power_cap_w": row["power_cap_w"], "feasible": False})
            continue
        pick = {
            "power_cap_w": row["power_cap_w"],
            "feasible": True,
            "mode": mode_text(row, result.config),
            "epoch_s": float(row["epoch_s"]),
            "epoch_kj": float(row["epoch_kj"]),
            "power_w": float(row["power_w"]),
            "how": str(row.get("how", "predicted")),
        }
        if "true_power_w" in row and row["true_power_w"] == row["true_power_w"]:
            pick["true_power_w"] = float(row["true_power_w"])
            pick["over_cap_w"] = float(row["over_cap_w"])
        picks.append(pick)
    return {
        "case_id": c.case_id,
        "device": c.device,
        "workload": c.workload,
        "batch_size": c.batch_size,
        "objective": c.objective,
        "source": c.source.kind,
        "reference": result.reference,
        "samples": len(result.samples),
        "steps_per_epoch": result.steps_per_epoch,
        "max_power_w": result.max_power_w,
        "picks": picks,
    }


def case_page(result: CaseResult) -> str:
    c = result.case
    summary = case_summary(result)
    facts = {
        "device / workload": f"{c.device} / {c.workload}",
        "batch size": c.batch_size,
        "objective": f"{c.objective} ({OBJECTIVES[c.objective]})",
        "samples": f"{len(result.samples)} profiled modes ({c.source.kind})",
        "transferred from": result.reference,
        "minibatches per epoch": f"{result.steps_per_epoch:,}",
        "highest predicted power": f"{number(result.max_power_w)} W",
        "Pareto front": f"{len(result.front)} modes predicted"
        + (f", {len(result.true_front)} true" if result.true_front is not None else ""),
    }
    from ..devices.presets import preset_note

    note = preset_note(c.device)
    if note:
        facts["vendor presets"] = note
    observed = (
        "grey: what the twin truly does (every mode, and its true front)"
        if result.true_front is not None
        else "no true front: the true values of unprofiled modes are not known"
    )
    none = sum(not p["feasible"] for p in summary["picks"])
    links = " · ".join(f'<a href="{f}">{f}</a>' for f in CSV_FILES)
    return case_page_html(
        c.case_id,
        facts,
        "pareto.png",
        f"Blue: predicted for every mode; green: the profiled modes; {observed}; red: the "
        "caps and the pick under each.",
        _picks_table(result),
        sections=[("Data", f"<p>{none} cap(s) with no feasible configuration.</p><p>{links}</p>")],
        back="../../index.html",
    )


def case_files(result: CaseResult) -> dict[str, bytes]:
    """Every file of a case folder, by name."""
    est = io.BytesIO()
    gz = {"method": "gzip", "mtime": 0, "compresslevel": 1}  # speed over size
    result.estimates.to_csv(est, index=False, compression=gz)
    files = {
        "index.html": case_page(result).encode(),
        "pareto.png": pareto_png(result),
        "thumb.png": pareto_png(result, thumbnail=True),
        "picks.csv": _picks_table(result).to_csv(index=False).encode(),
        "pareto_front.csv": result.front.to_csv(index=False).encode(),
        "samples.csv": result.samples.to_csv(index=False).encode(),
        "estimates.csv.gz": est.getvalue(),
        "case.json": json.dumps(case_summary(result), indent=1).encode(),
    }
    assert set(files) == set(CASE_FILES)
    return files


def _cap_cell(pick: dict | None, cap: float, prev_cap: float | None, top: float | None) -> str:
    """One index cell: the pick, its epoch time and energy, and what a reader must know
    (nothing fits; every mode already fits a lower cap; the twin shows it over the cap)."""
    if pick is None or not pick["feasible"]:
        return '<td class="none">nothing fits</td>'
    if top is not None and prev_cap is not None and prev_cap >= top:
        why = f"every mode draws at most {number(top)} W"
        return f'<td class="same" title="{why}">same as under {prev_cap:g} W</td>'
    over = pick.get("over_cap_w")
    measured = pick.get("how") == "confirmed"
    if over is None or over <= 0:
        flag = ""
    elif measured:  # measured within the cap; the twin's noise-free power is a little over
        flag = (
            f'<br><span class="same">{number(over)} W over in the twin\'s noise-free power '
            f"({number(pick['true_power_w'])} W); measured within the cap</span>"
        )
    else:
        flag = (
            f'<br><span class="over">&#9888; {number(over)} W over on the twin '
            f"({number(pick['true_power_w'])} W)</span>"
        )
    fits_all = (
        f'<br><span class="same">no limit: every mode draws &le; {number(top)} W</span>'
        if top is not None and cap >= top
        else ""
    )
    mode = "<br>".join(html.escape(part) for part in pick["mode"].split(", "))
    return (
        f"<td>{mode}<br><b>{number(pick['epoch_s'])} s</b> · "
        f"<b>{number(pick['epoch_kj'])} kJ</b> per epoch at {number(pick['power_w'])} W, "
        f"{'measured' if measured else 'predicted'}"
        f'<br><span class="how">{html.escape(pick.get("how", "predicted"))}</span>'
        f"{flag}{fits_all}</td>"
    )


def index_page(spec: FleetSpec, summaries: list[dict]) -> str:
    """One row per case: thumbnail, and per cap the pick with its time and energy per epoch."""
    caps = spec.power_caps
    widths = '<col style="width:12em"><col style="width:212px">' + "".join("<col>" for _ in caps)
    head = "<tr><th>case</th><th>Pareto front</th>" + "".join(
        f"<th>under {cap:g} W</th>" for cap in caps
    )
    rows, flagged, close = [], 0, []
    for s in summaries:
        link = f"cases/{html.escape(s['case_id'])}/index.html"
        by_cap = {p["power_cap_w"]: p for p in s["picks"]}
        top = s.get("max_power_w")
        cells = []
        for i, cap in enumerate(caps):
            pick = by_cap.get(cap)
            over = (pick or {}).get("over_cap_w") or 0.0
            if over > 0 and pick and pick.get("how") == "confirmed":
                close.append(over)  # measured within the cap: the reading's noise
            else:
                flagged += over > 0
            cells.append(_cap_cell(pick, cap, caps[i - 1] if i else None, top))
        rows.append(
            f'<tr><td><a href="{link}">{html.escape(s["device"])} / '
            f"{html.escape(s['workload'])}</a><br>batch {s['batch_size']}, "
            f"objective {html.escape(s['objective'])}<br>{s['samples']} samples "
            f"({s['source']}), from {html.escape(s['reference'])}</td>"
            f'<td><a href="{link}"><img class="thumb" src="cases/{html.escape(s["case_id"])}'
            f'/thumb.png" alt="front of {html.escape(s["case_id"])}"></a></td>'
            + "".join(cells)
            + "</tr>"
        )
    warn = (
        f'<p class="over">&#9888; {flagged} predicted pick(s) draw more than their cap on the '
        'twin: confirm them on the board (strategy = "active") or raise margin_sigma in the '
        "spec.</p>"
        if flagged
        else ""
    )
    if close:
        warn += (
            f"<p>{len(close)} confirmed pick(s) fit their cap as measured (mean power plus one "
            "standard deviation of the readings) but lie up to "
            f"{number(max(close))} W over it in the twin's noise-free power: the measurement's "
            "noise, not a prediction's error.</p>"
        )
    body = (
        f"<p>{len(summaries)} cases: the configuration each one should run under each power "
        "cap (fastest for objective <i>time</i>, least energy for <i>energy</i>). Each pick "
        "says how it was made: <i>confirmed</i> picks were measured on the board (here the "
        "twin) and show measured time, energy and power; the others are <i>predicted</i> by "
        "transferring a shipped reference model, with the margin named. Click a case for its "
        f'Pareto front and data.</p>{warn}<table class="grid"><colgroup>{widths}</colgroup>'
        f"<thead>{head}</tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )
    return render_page(spec.title, body)
