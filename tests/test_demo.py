"""``powertrain demo``: the whole flow end to end on the twin and the shipped reference."""

import pandas as pd

import powertrain as pt
from powertrain.cli import main
from powertrain.evaluate import cap_sweep


def test_demo_report_matches_an_independent_recomputation(tmp_path):
    out = tmp_path / "demo"
    args = ["demo", "-q", "--samples", "30", "--refine", "10", "--power-cap", "25"]
    assert main([*args, "-o", str(out)]) == 0
    for name in ("report.html", "time_power.png", "estimates.csv", "pareto_front.csv"):
        assert (out / name).stat().st_size > 0, name
    est = pd.read_csv(out / "estimates.csv")
    samples = pd.read_csv(out / "samples.csv")
    assert len(est) == 18096 and {"time_ms", "power_w", "power_w_std"} <= set(est.columns)
    assert (
        len(samples) == 30
        and not samples.duplicated(["cores", "cpu_mhz", "gpu_mhz", "mem_mhz"]).any()
    )
    summary = pd.read_csv(out / "summary.csv").iloc[0]

    # the pick, recomputed from the written estimates, is the mode the demo reports
    pick = pt.fastest_under(est, power_cap_w=25)
    assert pick.power_w <= 25
    reported = dict(kv.split("=") for kv in summary["chosen"].split(", "))
    for col in ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz"):
        assert float(reported[col]) == float(pick[col])

    # the sweep summary agrees with one computed here against the twin's truth
    truth = pt.Twin("orin-agx", "mobilenetv3", seed=0).expected(
        est[["cores", "cpu_mhz", "gpu_mhz", "mem_mhz"]], 16
    )
    _, sweep = cap_sweep(est, truth.set_index(est.index), range(17, 51))
    line = summary["cap sweep 17-50 W (plain)"]
    assert f"median time penalty {sweep['penalty_median_pct']:.1f} %" in line
    assert f"A/L+1 {sweep['above_limit_1w_pct']:.0f} %" in line
    html = (out / "report.html").read_text()
    assert "data:image/png;base64," in html and "Pareto front" in html
