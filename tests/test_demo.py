"""``powertrain demo``: the whole flow end to end on the twin and the shipped reference."""

import pandas as pd

from powertrain.cli import main


def test_demo_writes_report_and_honest_summary(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "-q", "--samples", "30", "--power-cap", "25", "-o", str(out)]) == 0
    for name in (
        "report.html",
        "time_power.png",
        "estimates.csv",
        "pareto_front.csv",
        "samples.csv",
    ):
        assert (out / name).stat().st_size > 0, name
    est = pd.read_csv(out / "estimates.csv")
    assert len(est) == 18096 and {"time_ms", "power_w", "power_w_std"} <= set(est.columns)
    summary = pd.read_csv(out / "summary.csv").iloc[0]
    assert float(summary["time MAPE (all modes vs twin)"].split()[0]) < 25
    assert float(summary["power MAPE (all modes vs twin)"].split()[0]) < 12
    predicted_w = float(summary["chosen: predicted"].split(" at ")[1].split()[0])
    assert predicted_w <= 25.0  # the selection never exceeds the cap in predicted power
    html = (out / "report.html").read_text()
    assert "data:image/png;base64," in html and "Pareto front" in html
