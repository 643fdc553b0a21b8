"""``powertrain demo``: the whole flow end to end, checked against an in-process rerun."""

import re
import warnings

import pandas as pd
import pytest

import powertrain as pt
from powertrain.cli import main
from powertrain.decisions.evaluate import cap_sweep

pytestmark = pytest.mark.slow

MODE = ["cores", "cpu_mhz", "gpu_mhz", "mem_mhz"]
pytestmark = pytest.mark.slow  # every test here runs the whole flow


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "demo"
    args = [
        "demo",
        "-q",
        "--samples",
        "30",
        "--refine",
        "10",
        "--power-cap",
        "25",
        "--confirm",
        "8",
    ]
    assert main([*args, "-o", str(out)]) == 0
    return out


def test_demo_pick_matches_an_independent_rerun_of_the_flow(demo):
    samples = pd.read_csv(demo / "samples.csv")
    est = pd.read_csv(demo / "estimates.csv")
    summary = pd.read_csv(demo / "summary.csv").iloc[0]
    picks = pd.read_csv(demo / "picks.csv").set_index("name")
    assert len(est) == 18096 and len(samples) == 30
    assert not samples.duplicated(MODE).any()
    dev = pt.get_device("orin-agx")
    # the random part of the samples is the documented draw, measured on the twin
    drawn = dev.sample(20, seed=0)
    assert samples[MODE].head(20).reset_index(drop=True).equals(drawn[MODE])

    # transfer and predict again here, from the same samples: the same predictions
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = pt.Predictor.from_pretrained("orin-agx/resnet18").transfer(samples)
        mine = pt.with_observed(model.predict(dev.power_modes(), batch_size=16), samples)
    assert mine["power_w"].to_numpy() == pytest.approx(est["power_w"].to_numpy(), rel=1e-6)
    assert mine["time_ms"].to_numpy() == pytest.approx(est["time_ms"].to_numpy(), rel=1e-6)

    # the plain pick the demo wrote is exactly the mode picked here (settings unrounded),
    # the margin pick is the one with SAFE_K_SIGMA sigmas
    for name, k in (
        ("predicted (the paper's plain pick)", 0),
        ("predicted with a margin (3 sigma)", 3),
    ):
        pick = pt.fastest_under(mine, power_cap_w=25, k_sigma=k)
        assert {c: picks.loc[name, c] for c in MODE} == {c: float(pick[c]) for c in MODE}
        # and its "true" figures are the twin's for that mode
        truth = pt.Twin("orin-agx", "mobilenetv3", seed=0).expected(pick[MODE].to_frame().T, 16)
        assert picks.loc[name, "true_time_ms"] == pytest.approx(truth["time_ms"].iloc[0])
        assert picks.loc[name, "true_power_w"] == pytest.approx(truth["power_w"].iloc[0])
    # the confirmed pick comes first and is measured under the cap
    assert picks.index[0].startswith("confirmed on the board")
    assert picks.iloc[0]["power_w"] <= 25
    # the plain pick by brute force in pandas, not through the library's pick: the fastest
    # predicted row whose predicted power is within the cap (exactly at the cap counts)
    within = est[est["power_w"] <= 25]
    brute = within.loc[within["time_ms"].idxmin()]
    plain = picks.loc["predicted (the paper's plain pick)"]
    assert {c: float(brute[c]) for c in MODE} == {c: plain[c] for c in MODE}
    # each pick's penalty is against the twin's true optimum, by brute force over every mode
    truth_all = pt.Twin("orin-agx", "mobilenetv3", seed=0).expected(dev.power_modes(), 16)
    best = truth_all[truth_all["power_w"] <= 25]["time_ms"].min()
    for _, row in picks.iterrows():
        if row["true_time_ms"] == row["true_time_ms"]:  # not NaN
            assert row["penalty_pct"] == pytest.approx((row["true_time_ms"] / best - 1) * 100)

    # the sweep summary agrees with one computed here against the twin's truth
    truth_all = pt.Twin("orin-agx", "mobilenetv3", seed=0).expected(mine[MODE], 16)
    _, sweep = cap_sweep(mine, truth_all.set_index(mine.index), range(17, 51))
    line = summary["prediction-only over 17-50 W (plain)"]
    assert f"median time penalty {sweep['penalty_median_pct']:.1f} %" in line
    assert f"{sweep['above_limit_1w_pct']:.0f} % of 34 caps more than 1 W over" in line


def test_demo_page_shows_exact_frequencies_batch_size_and_spread(demo):
    html = (demo / "report.html").read_text()
    front = pd.read_csv(demo / "pareto_front.csv")
    assert "data:image/png;base64," in html and "Pareto front" in html
    # the answer first: the picks side by side, then the plot, then the details
    order = [html.index(h) for h in ("The pick under 25 W", "<h2>Pareto front", "<h2>Details")]
    assert order == sorted(order)
    assert "confirmed on the board" in html and "predicted with a margin" in html
    for note in re.findall(r"transfer samples:[^<]*", html):
        assert "What to do:" in note  # every note says what to do
    for col in ("batch size", "± time (ms)", "± power (W)", "CPU (MHz)"):
        assert f"<th>{col}</th>" in html  # columns named for people
    for value in set(front["cpu_mhz"]) | set(front["mem_mhz"]):
        assert f'<td class="num">{value:.10g}</td>' in html  # e.g. 1036.8, never 1037
    assert any(v != round(v) for v in front["cpu_mhz"])  # the check above had teeth


def test_demo_under_a_cap_nothing_fits_says_so_in_one_line(tmp_path, capsys):
    out = tmp_path / "d"
    assert main(["demo", "--power-cap", "5", "-o", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no configuration fits under 5 W" in err
    assert not out.exists()  # refused before any work or any file


def test_demo_says_every_file_it_wrote(tmp_path, capsys):
    out = tmp_path / "d"
    argv = ["demo", "--samples", "15", "--refine", "0", "--confirm", "0", "-o", str(out)]
    assert main(argv) == 0
    line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("wrote ")][-1]
    for f in out.iterdir():
        assert f.name in line, f"{f.name} written but not listed: {line}"
