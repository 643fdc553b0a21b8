"""A per-minibatch Jetson table and a per-epoch GPU table go through the same decision
functions: the configuration columns come from the device (or the model), the time and
power columns from the table (or the model)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

import powertrain as pt
from powertrain.data.real_data import load_real_corpus, load_real_r
from powertrain.decisions.evaluate import cap_sweep
from powertrain.decisions.optimise import columns_of
from powertrain.errors import DataError
from powertrain.workflow import pick_per_cap


def jetson_table() -> pd.DataFrame:
    """Eight Orin AGX configurations, two batch sizes, per-minibatch time."""
    dev = pt.get_device("orin-agx")
    modes = dev.sample(4, seed=1).reset_index(drop=True)
    twin = pt.Twin("orin-agx", "mobilenetv3", seed=0)
    return pd.concat([twin.expected(modes, b) for b in (8, 16)], ignore_index=True)


def gpu_table() -> pd.DataFrame:
    """A measured V100 corpus: knob power_limit_w, per-epoch time."""
    return load_real_corpus("v100_resnet50-imagenet")


TABLES = {"jetson": jetson_table, "gpu": gpu_table}


@pytest.fixture(params=list(TABLES))
def table(request) -> tuple[str, pd.DataFrame]:
    return request.param, TABLES[request.param]()


def test_columns_come_from_the_device(table):
    kind, df = table
    cols = columns_of(df)
    if kind == "jetson":
        assert cols.knobs == ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz")
        assert cols.time == "time_ms"
    else:
        assert cols.knobs == ("power_limit_w",)
        assert cols.time == "epoch_s"
    assert cols.config == (*cols.knobs, "batch_size") and cols.power == "power_w"


def test_front_pick_and_cap_sweep_use_the_tables_own_time(table):
    kind, df = table
    cols = columns_of(df)
    cap = float(df["power_w"].median())
    pick = pt.fastest_under(df, cap)
    under = df[df["power_w"] <= cap]
    assert pick[cols.time] == under[cols.time].min()
    front = pt.pareto_front(df)
    assert front[cols.time].is_monotonic_decreasing
    picks = pick_per_cap(df, [cap], truth=df)
    assert picks.loc[0, "penalty_pct"] == pytest.approx(0.0)  # the truth is the table
    assert set(cols.knobs) <= set(picks.columns)
    table_, summary = cap_sweep(df, df, [cap, float(df["power_w"].max())])
    assert f"true_{cols.time}" in table_.columns and summary["penalty_median_pct"] == 0.0


def test_refine_and_with_observed_take_the_devices_knobs(table):
    kind, df = table
    cols = columns_of(df)
    lo, hi = float(df["power_w"].min()), float(df["power_w"].max())
    picked = pt.refine_modes(df, 2, (lo, hi))
    assert 1 <= len(picked) <= 2
    off = df.assign(**{cols.time: df[cols.time] * 2, cols.power: df[cols.power] * 2})
    seen = pt.with_observed(off, df.iloc[:3])
    np.testing.assert_allclose(seen[cols.time].iloc[:3], df[cols.time].iloc[:3])
    np.testing.assert_allclose(seen[cols.time].iloc[3:], 2 * df[cols.time].iloc[3:])


def test_select_picks_by_time_to_accuracy_on_both_tables(table):
    kind, df = table
    if kind == "jetson":
        r = pd.DataFrame({"batch_size": [8, 16], "samples": [4000.0, 5000.0]})
        tt = df["time_ms"] / 1e3 / df["batch_size"] * df["batch_size"].map({8: 4000, 16: 5000})
    else:
        r = load_real_r("resnet50-imagenet")
        df = df[df["batch_size"].isin(r["batch_size"])].reset_index(drop=True)
        tt = df["epoch_s"] * df["batch_size"].map(r.set_index("batch_size")["epochs"])
    cap = float(df["power_w"].median())
    pick = pt.select(df, r, power_cap_w=cap)
    ok = df["power_w"] <= cap
    assert pick["tt_acc"] == pytest.approx(tt[ok].min())  # seconds, on both tables
    assert pick["power_w"] <= cap
    # a deadline needs r in the table's own unit of time
    assert pt.select(df, r, power_cap_w=cap, deadline_s=float(tt.max()) + 1)["tt_acc"] > 0


def test_a_table_without_a_time_column_names_the_expected_one():
    df = gpu_table().drop(columns="epoch_s")
    with pytest.raises(DataError, match="time_ms"):
        pt.fastest_under(df, 300)


def test_an_r_in_epochs_needs_per_epoch_times():
    df = jetson_table()
    r = pd.DataFrame({"batch_size": [8, 16], "epochs": [10.0, 12.0]})
    with pytest.raises(DataError, match="r in epochs needs per-epoch times"):
        pt.select(df, r, power_cap_w=40)


def test_the_select_command_picks_on_a_per_epoch_gpu_table(tmp_path, capsys):
    from powertrain.cli import main

    r = load_real_r("resnet50-imagenet")
    df = gpu_table()
    df = df[df["batch_size"].isin(r["batch_size"])]  # the sizes the training trace covers
    path = tmp_path / "v100.csv"
    df.to_csv(path, index=False)
    r.to_csv(tmp_path / "r.csv", index=False)
    assert main(["select", str(path), "--power-cap", "200"]) == 0
    pick = pd.read_csv(io.StringIO(capsys.readouterr().out))
    under = df[df["power_w"] <= 200]
    assert pick.loc[0, "epoch_s"] == pytest.approx(under["epoch_s"].min())
    assert main(["select", str(path), "--power-cap", "200", "--r", str(tmp_path / "r.csv")]) == 0
    joint = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert {"power_limit_w", "batch_size", "tt_acc"} <= set(joint.columns)
