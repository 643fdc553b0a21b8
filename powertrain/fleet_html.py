"""The fleet report's pages: one page per case and the index that links them.

Why: a fleet is judged by scanning one table (what each device/workload should run at
each cap, and what an epoch then costs) and drilling into a case only where something
looks off. Plain HTML and PNG files, so the folder opens from disk, a web server or a CI
artifact alike. Figures are drawn on their own Agg canvas; the global backend is never
touched.
"""

from __future__ import annotations

import html
import io
import json

import pandas as pd

from .figures import figure_png, format_value, new_figure, table_html
from .fleet_cases import CaseResult
from .fleet_spec import OBJECTIVES, FleetSpec
from .schema import MODE_COLUMNS

STYLE = """body{font-family:sans-serif;margin:1.5em auto;max-width:80em;padding:0 1em}
table{border-collapse:collapse;margin:0.5em 0}
th,td{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top;font-size:90%}
th{background:#f3f3f3} td.none{color:#a00} img.thumb{width:180px}"""

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


def _page(title: str, body: str) -> str:
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}'
        f"</title><style>{STYLE}</style></head><body>{body}</body></html>"
    )


def mode_text(row: dict | pd.Series) -> str:
    """A configuration exactly as the device has it, e.g. ``8 cores, CPU 2201.6, ...``."""
    return (
        f"{format_value('cores', row['cores'])} cores, "
        f"CPU {format_value('cpu_mhz', row['cpu_mhz'])} / "
        f"GPU {format_value('gpu_mhz', row['gpu_mhz'])} / "
        f"mem {format_value('mem_mhz', row['mem_mhz'])} MHz, "
        f"batch {format_value('batch_size', row['batch_size'])}"
    )


def pareto_png(result: CaseResult, thumbnail: bool = False) -> bytes:
    """The Pareto front predicted over every mode, the observed (twin) one where known,
    the profiled modes, the caps and the pick under each (epoch time vs power)."""
    fig, ax = new_figure((2.4, 1.6) if thumbnail else (7.5, 4.6), dpi=75 if thumbnail else 100)
    aim = OBJECTIVES[result.case.objective]
    y = "epoch_s"
    if not thumbnail:
        steps = result.steps_per_epoch
        seen = result.samples.assign(epoch_s=result.samples["time_ms"] * steps / 1e3)
        ax.scatter(seen["power_w"], seen["epoch_s"], s=8, c="tab:blue", alpha=0.6,
                   label=f"profiled ({len(seen)} modes)")  # fmt: skip
    if result.true_front is not None:
        ax.plot(result.true_front["power_w"], result.true_front[y], "-", c="0.35", lw=1.2,
                label="observed front (twin)")  # fmt: skip
    ax.plot(result.front["power_w"], result.front[y], "-o", c="tab:orange",
            ms=1.5 if thumbnail else 3, lw=1.2, label="predicted front")  # fmt: skip
    picks = result.picks[result.picks["feasible"]]
    top = float(result.estimates["power_w"].max()) * 1.05
    for cap in result.case.power_caps:
        if cap <= top:  # caps above every mode's power would only squash the plot
            ax.axvline(cap, c="tab:red", ls=":", lw=0.8)
    if len(picks):
        ax.scatter(picks["power_w"], picks[y], marker="*", s=30 if thumbnail else 90,
                   c="tab:red", zorder=5, label=f"pick per cap ({aim})")  # fmt: skip
    ax.set_yscale("log")
    if thumbnail:
        ax.set_xticks([])
        ax.set_yticks([], minor=True)
        ax.set_yticks([])
    else:
        c = result.case
        ax.set_title(f"{c.device} / {c.workload}, batch {c.batch_size}, "
                     f"objective {c.objective}", fontsize=10)  # fmt: skip
        ax.set_xlabel("power (W)")
        ax.set_ylabel("time per epoch (s)")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8, markerscale=2)
    return figure_png(ax)


def _picks_table(result: CaseResult) -> pd.DataFrame:
    cols = ["power_cap_w", *MODE_COLUMNS, "batch_size", "time_ms", "time_ms_std", "power_w",
            "power_w_std", "epoch_s", "epoch_kj", "true_epoch_s", "true_epoch_kj",
            "true_power_w", f"penalty_{result.case.objective}_pct"]  # fmt: skip
    return result.picks[[c for c in cols if c in result.picks.columns]]


def case_summary(result: CaseResult) -> dict:
    """What the index shows of a case (kept as case.json beside its page)."""
    c = result.case
    picks = []
    for row in result.picks.to_dict("records"):
        if not row["feasible"]:
            picks.append({"power_cap_w": row["power_cap_w"], "feasible": False})
            continue
        picks.append(
            {
                "power_cap_w": row["power_cap_w"],
                "feasible": True,
                "mode": mode_text(row),
                "epoch_s": float(row["epoch_s"]),
                "epoch_kj": float(row["epoch_kj"]),
                "power_w": float(row["power_w"]),
            }
        )
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
        "minibatches per epoch": result.steps_per_epoch,
        "Pareto front": f"{len(result.front)} modes predicted"
        + (f", {len(result.true_front)} observed" if result.true_front is not None else ""),
    }
    rows = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
        for k, v in facts.items()
    )
    links = " · ".join(f'<a href="{f}">{f}</a>' for f in CSV_FILES)
    picks = _picks_table(result)
    observed = (
        "the grey line is the front the twin truly has"
        if result.true_front is not None
        else "no observed front: the true values of unprofiled modes are not known"
    )
    body = (
        f'<p><a href="../../index.html">&larr; all cases</a></p>'
        f"<h1>{html.escape(c.case_id)}</h1><table>{rows}</table>"
        f'<h2>Pareto front</h2><p><img alt="Pareto front of {html.escape(c.case_id)}" '
        f'src="pareto.png" width="750"></p><p>Predicted for every mode; {observed}.</p>'
        f"<h2>Chosen configuration per power cap</h2>{table_html(picks)}"
        f"<p>{sum(not p['feasible'] for p in summary['picks'])} cap(s) with no feasible "
        f"configuration.</p><h2>Data</h2><p>{links}</p>"
    )
    return _page(c.case_id, body)


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


def index_page(spec: FleetSpec, summaries: list[dict]) -> str:
    """One row per case: thumbnail, and per cap the pick with its time and energy per epoch."""
    caps = spec.power_caps
    head = "<tr><th>case</th><th>Pareto front</th>" + "".join(
        f"<th>under {cap:g} W</th>" for cap in caps
    )
    rows = []
    for s in summaries:
        link = f"cases/{html.escape(s['case_id'])}/index.html"
        cells = []
        by_cap = {p["power_cap_w"]: p for p in s["picks"]}
        for cap in caps:
            p = by_cap.get(cap)
            if p is None or not p["feasible"]:
                cells.append('<td class="none">nothing fits</td>')
                continue
            cells.append(
                f"<td>{html.escape(p['mode'])}<br><b>{p['epoch_s']:.4g} s</b> and "
                f"<b>{p['epoch_kj']:.4g} kJ</b> per epoch at {p['power_w']:.3g} W</td>"
            )
        rows.append(
            f'<tr><td><a href="{link}">{html.escape(s["device"])} / '
            f"{html.escape(s['workload'])}</a><br>batch {s['batch_size']}, "
            f"{html.escape(s['objective'])}<br>{s['samples']} samples ({s['source']}), "
            f"from {html.escape(s['reference'])}</td>"
            f'<td><a href="{link}"><img class="thumb" src="cases/{html.escape(s["case_id"])}'
            f'/thumb.png" alt="front of {html.escape(s["case_id"])}"></a></td>'
            + "".join(cells)
            + "</tr>"
        )
    body = (
        f"<h1>{html.escape(spec.title)}</h1><p>{len(summaries)} cases: the configuration "
        "each one should run under each power cap (fastest for objective <i>time</i>, least "
        "energy for <i>energy</i>), predicted by transferring a shipped reference model. "
        f"Click a case for its Pareto front and data.</p><table>{head}</tr>"
        + "".join(rows)
        + "</table>"
    )
    return _page(spec.title, body)
