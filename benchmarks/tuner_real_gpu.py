"""The Tuner inside a real training job on a real GPU: our H200 runs.

Measured by ``tools/tune_on_gpu.py`` on a lent NVIDIA H200 (datasets/measured/h200/
tuner-l4/, -l5/ and -l6/, one device call each, hands-off: the card's 700 W limit and own
clocks, read before and after by ``nvidia-smi``): the GPT-style decoder of the corpus
trained in real torch while ``pt.Tuner`` chose CPU threads x batch size (24 configurations) under a
500 W cap, cost per sample (r = 1 epoch at every size), budget 20, with a reference
fitted on the card's ResNet-18 corpus (another workload). Three sessions of the same
script, on two versions of ``hard_cap`` (:data:`SESSIONS`). Per run it prints:

* what the tuner measured and picked, and why it stopped;
* the measured share of exploring time and energy over the cap (the Tuner's own rows,
  mean power per configuration, ``over_cap_share``);
* the training thread's wait inside the tuner's hooks while exploring (total, and the
  longest single wait) beside the job's median step;
* the pick's time per sample against the best under the cap, both read from the card's
  corpus of the same job (datasets/measured/h200, every instantaneous-power run of the
  decoder, averaged per configuration): an independent judge, whose own repeat spread
  is 1-2 % in time and 2-3 % in power (benchmarks/results/real_gpu.txt). A pick the
  corpus puts over the cap is flagged.

    python benchmarks/tuner_real_gpu.py [--data datasets/measured/h200] [--json PATH]
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from results_file import data_args, publish

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "datasets" / "measured" / "h200"
#: run folder -> the package version that ran there (``hard_cap`` changed between them)
SESSIONS = {
    "tuner-l4": "1507e16: hard_cap with a 95 % bound, unsafe choices masked",
    "tuner-l5": "5f55281: hard_cap with a 99 % bound and expanders",
    "tuner-l6": "1584ba3: as tuner-l5 (hard_cap unchanged), seeds 2 and 3",
}
KEY = ["threads", "batch_size"]
WORKLOAD = "gpt-small"
CAP_W = 500.0  # the runs' cap (tools/tune_on_gpu.py's default)


def judge(data: Path) -> pd.DataFrame:
    """The decoder's corpus, every instantaneous-power run pooled: mean time per sample
    and power per configuration."""
    runs = [pd.read_csv(f) for f in sorted(data.glob(f"instant-*/*_{WORKLOAD}.csv"))]
    if not runs:
        raise SystemExit(f"{data}: no instant-power corpus of {WORKLOAD}")
    df = pd.concat(runs)
    df["ms_per_sample"] = df.time_ms / df.batch_size
    return df.groupby(KEY)[["ms_per_sample", "power_w"]].mean()


def rows(data: Path) -> tuple[list[dict], dict]:
    """One row per run of every session folder, and the judge's best under the cap."""
    table = judge(data)
    under = table[table.power_w <= CAP_W]
    best_key = under.ms_per_sample.idxmin()
    best = {"threads": int(best_key[0]), "batch_size": int(best_key[1]),
            "ms_per_sample": round(float(under.ms_per_sample.min()), 3),
            "power_w": round(float(under.power_w[best_key]), 1)}  # fmt: skip
    out = []
    for session in SESSIONS:
        for r in json.loads((data / session / "runs.json").read_text())["runs"]:
            out.append(_row(session, r, table, best))
    return out, best


def _row(session: str, r: dict, table: pd.DataFrame, best: dict) -> dict:
    """A run's row: its pick judged by the corpus, the over-cap shares, the waits."""
    key = (int(r["config"]["threads"]), int(r["config"]["batch_size"]))
    pick = table.loc[key]
    return {
        "session": session, "run": r["run"], "hard_cap": r.get("hard_cap", "False") == "True",
        "background": r["background"] == "True", "measured": r["n_measured"],
        "stop": r["stop_reason"], "pick": f"t{key[0]} b{key[1]}",
        "pick_w_measured": round(float(r["power_w"]), 1),
        "pick_w_corpus": round(float(pick.power_w), 1),
        "penalty_pct": round(100 * (float(pick.ms_per_sample) / best["ms_per_sample"] - 1), 1),
        "over_cap_time_pct": round(100 * float(r["over_cap_time_share"]), 1),
        "over_cap_energy_pct": round(100 * float(r["over_cap_energy_share"]), 1),
        "wait_s_exploring": round(float(r["wait_s_exploring"]), 3),
        "wait_ms_max": round(float(r["wait_ms_max"]), 1),
        "step_ms_median": round(float(r["step_ms_median"]), 1),
    }  # fmt: skip


def show(result: dict) -> str:
    b = result["judge_best"]
    out = [
        f"# pt.Tuner in a real job ({result['data']}): GPT decoder, threads x batch size,",
        *(f"# {k}: {v}" for k, v in SESSIONS.items()),
        f"# cap {CAP_W:g} W, budget 20; judge: the card's corpus of the same job, whose best "
        f"under the cap is t{b['threads']} b{b['batch_size']} ({b['ms_per_sample']} ms/sample, "
        f"{b['power_w']} W)",
    ]
    df = pd.DataFrame(result["runs"]).set_index(["session", "run"])
    out.append(df.to_string())
    over = df[df.pick_w_corpus > CAP_W]
    if len(over):
        named = [f"{a}/{b}" for a, b in over.index]
        out.append(f"picks the corpus puts over the cap: {', '.join(named)}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args, shown = data_args(__doc__, DATA, argv)
    runs, best = rows(args.data)
    result = {"data": str(shown), "sessions": SESSIONS, "judge_best": best, "runs": runs}
    publish(result, show(result), args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
