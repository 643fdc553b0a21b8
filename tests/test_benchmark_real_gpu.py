"""benchmarks/real_gpu.py on the stored H200 runs: every comparison it names is made over
configurations both runs measured, and the card table covers each workload's batch sizes."""

import json
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tools"))
import real_gpu  # noqa: E402
from collect_gpu_corpus import HANDS_OFF_BATCH_SIZES  # noqa: E402


def test_the_stored_h200_runs_are_compared_pairwise_and_the_text_says_what_was_read(tmp_path):
    out = tmp_path / "r.json"
    assert real_gpu.main(["--json", str(out)]) == 0
    text = out.with_suffix(".txt").read_text()
    assert "NVIDIA H200" in text and "datasets/measured/h200" in text
    rows = json.loads(out.read_text())["compare"]
    assert {(r["source"], r["workload"]) for r in rows} == {
        (s, w) for s in real_gpu.SOURCES for w in real_gpu.WORKLOADS
    }
    assert all(0 < r["n"] <= 24 and r["board_s_a"] > 0 for r in rows)
    card = json.loads(out.read_text())["card"]
    for wl in real_gpu.WORKLOADS:
        sizes = [r["batch_size"] for r in card if r["workload"] == wl]
        assert sizes == list(HANDS_OFF_BATCH_SIZES[wl])  # every batch size of the grid
    # the card table reads the first CARD_RUNS pair that holds the workload: the third
    # session's complete ResNet-18 runs; the decoder, which that session ran settled only,
    # from the second session's fixed runs
    read = {c["workload"]: c["runs"] for c in json.loads(out.read_text())["clocks"]}
    assert read["resnet18"] == " + ".join(real_gpu.CARD_RUNS[0])
    assert read["gpt-small"] == " + ".join(real_gpu.CARD_RUNS[1])


def test_spread_uses_only_shared_configurations():
    idx = pd.MultiIndex.from_tuples([(1, 8), (1, 16)], names=real_gpu.KEY)
    a = pd.DataFrame({"time_ms": [10.0, 20.0], "power_w": [100.0, 200.0],
                      "profile_s": [1.0, 2.0]}, index=idx)  # fmt: skip
    b = a.iloc[:1] * [1.1, 0.5, 1.0]
    r = real_gpu.spread(a, b)
    assert r["n"] == 1 and abs(r["time_median_pct"] - 9.09) < 0.01
    assert r["power_median_pct"] == 100.0 and r["board_s_a"] == 1.0


def test_the_stored_tuner_runs_are_judged_by_the_cards_own_corpus(tmp_path):
    import tuner_real_gpu

    out = tmp_path / "t.json"
    assert tuner_real_gpu.main(["--json", str(out)]) == 0
    result = json.loads(out.read_text())
    best = result["judge_best"]
    assert best["power_w"] <= tuner_real_gpu.CAP_W
    runs = {(r["session"], r["run"]): r for r in result["runs"]}
    for session in tuner_real_gpu.SESSIONS:  # per seed plain and safe, then one in-thread
        names = sorted(n for s, n in runs if s == session)
        a, b = sorted({n.split("-")[0] for n in names})
        assert names == sorted([f"{a}-plain-bg", f"{a}-safe-bg", f"{b}-plain-bg",
                                f"{b}-safe-bg", f"{a}-plain-fg"])  # fmt: skip
    for r in runs.values():
        if r["pick_w_corpus"] <= tuner_real_gpu.CAP_W:  # nothing under it beats the best
            assert r["penalty_pct"] >= 0
        assert 0 <= r["over_cap_time_pct"] <= r["over_cap_energy_pct"] <= 100
        assert r["hard_cap"] == ("safe" in r["run"]) and r["background"] == r["run"].endswith("bg")
    text = out.with_suffix(".txt").read_text()
    assert all(s in text for s in tuner_real_gpu.SESSIONS)
    assert f"t{best['threads']} b{best['batch_size']}" in text
