"""``powertrain report`` / ``pt.report``: the fleet report, its spec errors, resume and Dask."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

import powertrain as pt
from powertrain.cli import main
from powertrain.decisions.optimise import SAFE_K_SIGMA
from powertrain.errors import PowerTrainError, SpecError
from powertrain.report.cases import steps_per_epoch
from powertrain.report.folder import ReportError, connect
from powertrain.report.spec import load_spec, parse_spec

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "fleet.toml"

SMALL = """title = "small fleet"
devices = ["orin-agx"]
batch_sizes = [16]
power_caps = [12, 25, 40]
objectives = ["time", "energy"]
samples = 20
seed = 1

[workloads.mobilenetv3]
source = "twin"
"""


@pytest.fixture(scope="module")
def small_report(tmp_path_factory):
    root = tmp_path_factory.mktemp("fleet")
    spec = root / "small.toml"
    spec.write_text(SMALL)
    out = root / "out"
    result = pt.report(spec, out, n_jobs=1)
    return spec, out, result


def test_example_spec_has_20_cases_on_the_twin():
    spec = load_spec(EXAMPLE)
    cases = spec.cases()
    assert len(cases) >= 20 and {c.source.kind for c in cases} == {"twin"}
    assert len({c.case_id for c in cases}) == len(cases)


@pytest.mark.slow
def test_report_pages_and_picks_agree_with_the_estimates(small_report):
    _, out, result = small_report
    assert sorted(result.computed) == [
        "orin-agx_mobilenetv3_bs16_energy",
        "orin-agx_mobilenetv3_bs16_time",
    ]
    index = (out / "index.html").read_text()
    for case_id in result.computed:
        folder = out / "cases" / case_id
        assert f'href="cases/{case_id}/index.html"' in index
        assert f'src="cases/{case_id}/thumb.png"' in index
        page = (folder / "index.html").read_text()
        for name in ("pareto.png", "picks.csv", "pareto_front.csv", "samples.csv"):
            assert name in page and (folder / name).stat().st_size > 0
        assert (folder / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        # the pick under each cap, recomputed here from the written estimates
        est = pd.read_csv(folder / "estimates.csv.gz")
        picks = pd.read_csv(folder / "picks.csv")
        objective = "time" if case_id.endswith("_time") else "energy"
        col = {"time": "epoch_s", "energy": "epoch_kj"}[objective]
        steps = steps_per_epoch("mobilenetv3", 16)
        assert est["epoch_s"].to_numpy() == pytest.approx(est["time_ms"] * steps / 1000)
        assert {"time_ms_std", "power_w_std", "batch_size"} <= set(picks.columns)
        samples = pd.read_csv(folder / "samples.csv")
        samples["epoch_s"] = samples["time_ms"] * steps / 1000
        samples["epoch_kj"] = samples["power_w"] * samples["epoch_s"] / 1000
        for cap, row in zip([12, 25, 40], picks.itertuples()):
            assert row.power_cap_w == cap
            if row.how == "confirmed":  # the best measured whose power + its spread fits
                pool = samples[samples["power_w"] + samples["power_w_std"] <= cap]
            else:  # predicted with the default margin of SAFE_K_SIGMA sigmas
                assert row.how == f"predicted with a margin ({SAFE_K_SIGMA:g} sigma)"
                pool = est[est["power_w"] + SAFE_K_SIGMA * est["power_w_std"] <= cap]
            if pool.empty:
                assert pd.isna(row.cores)
                continue
            best = pool.loc[pool[col].idxmin()]
            assert (row.cores, row.cpu_mhz, row.gpu_mhz, row.mem_mhz) == (
                best.cores,
                best.cpu_mhz,
                best.gpu_mhz,
                best.mem_mhz,
            )
            assert row.power_w <= cap
            # the index shows that configuration exactly as the device has it, and how
            assert f"CPU {best.cpu_mhz:.10g} / GPU {best.gpu_mhz:.10g}" in index
        assert (picks["how"] == "confirmed").any()  # the twin is a board: picks confirmed
        summary = json.loads((folder / "case.json").read_text())
        assert summary["samples"] == 20 and summary["source"] == "twin"
    assert any(p.name == "index.html" for p in result.files)
    assert all(p.exists() for p in result.files)


@pytest.mark.slow
def test_energy_objective_never_costs_more_energy_than_time_objective(small_report):
    _, out, _ = small_report
    t = pd.read_csv(out / "cases" / "orin-agx_mobilenetv3_bs16_time" / "picks.csv")
    e = pd.read_csv(out / "cases" / "orin-agx_mobilenetv3_bs16_energy" / "picks.csv")
    ok = t["epoch_kj"].notna() & e["epoch_kj"].notna()
    assert ok.any()
    assert (e.loc[ok, "epoch_kj"] <= t.loc[ok, "epoch_kj"] + 1e-9).all()
    assert (t.loc[ok, "epoch_s"] <= e.loc[ok, "epoch_s"] + 1e-9).all()


@pytest.mark.slow
def test_existing_folder_refused_then_overwritten(small_report, tmp_path):
    spec, out, _ = small_report
    with pytest.raises(ReportError, match="exists.*--overwrite"):
        pt.report(spec, out, n_jobs=1)
    other = tmp_path / "someone-elses"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(ReportError, match="not empty"):
        pt.report(spec, other, n_jobs=1)
    assert (other / "notes.txt").read_text() == "keep me"


@pytest.mark.slow
def test_interrupted_report_resumes_without_redoing_finished_cases(small_report, tmp_path):
    spec, out, _ = small_report
    copy = tmp_path / "copy"
    import shutil

    shutil.copytree(out, copy)
    # an interrupted run: one case never finished (a half-written temp folder is left),
    # no index yet, and the state says unfinished
    shutil.rmtree(copy / "cases" / "orin-agx_mobilenetv3_bs16_energy")
    (copy / "cases" / ".tmp-orin-agx_mobilenetv3_bs16_energy-dead").mkdir()
    (copy / "index.html").unlink()
    state = json.loads((copy / "report.json").read_text())
    (copy / "report.json").write_text(json.dumps({**state, "complete": False}))
    kept = (copy / "cases" / "orin-agx_mobilenetv3_bs16_time" / "pareto.png").stat().st_mtime_ns
    result = pt.report(spec, copy, n_jobs=1)
    assert result.reused == ["orin-agx_mobilenetv3_bs16_time"]
    assert result.computed == ["orin-agx_mobilenetv3_bs16_energy"]
    assert (copy / "cases" / "orin-agx_mobilenetv3_bs16_time" / "pareto.png").stat(
    ).st_mtime_ns == kept  # fmt: skip
    assert (copy / "index.html").exists()


@pytest.mark.slow
def test_cli_report_lists_every_file_it_wrote(tmp_path, capsys):
    spec = tmp_path / "one.toml"
    spec.write_text(SMALL.replace('["time", "energy"]', '["time"]'))
    out = tmp_path / "out"
    assert main(["report", str(spec), "-o", str(out), "-j", "1"]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""  # status and the 'wrote' line go to stderr
    line = captured.err.strip().splitlines()[-1]
    assert line.startswith("wrote ")
    written = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    # the resume and ownership markers
    written -= {"cases/orin-agx_mobilenetv3_bs16_time/.done", ".powertrain-report"}
    for rel in written:
        name = rel.rsplit("/", 1)[-1]
        assert name in line, f"{rel} written but not listed: {line}"
    # an existing folder is refused with a one-line error, accepted with --overwrite
    assert main(["report", str(spec), "-o", str(out), "-j", "1"]) == 1
    assert "--overwrite" in capsys.readouterr().err
    assert main(["report", str(spec), "-o", str(out), "-j", "1", "--overwrite", "-q"]) == 0


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("samples = 20", "sampels = 20"), r"line 6: 'sampels' is not a known key"),
        (('devices = ["orin-agx"]', 'devices = ["orin-agz"]'), r"line 2: .*'orin-agz'"),
        (("objectives = [", 'objectives = ["speed", '), r"line 5: .*objective 'speed'"),
        (("power_caps = [12,", "power_caps = [0,"), r"line 4: 'power_caps' .*positive.*0"),
        (("power_caps = [12,", "power_caps = [-3,"), r"line 4: 'power_caps'"),
        (("[workloads.mobilenetv3]", "[workloads.mobilenet]"), r"line 9: .*'mobilenet'"),
        (('source = "twin"', 'sauce = "twin"'), r"line 10: 'workloads.mobilenetv3.sauce'"),
        (('source = "twin"', 'samples_csv = "nope.csv"'), r"line 10: .*cannot be read.*nope"),
        (("seed = 1", "seed = "), r"not valid TOML.*line 7"),
    ],
)
def test_spec_mistakes_name_the_key_and_the_line(tmp_path, edit, message):
    spec = tmp_path / "bad.toml"
    spec.write_text(SMALL.replace(*edit))
    with pytest.raises(SpecError, match=message) as err:
        load_spec(spec)
    assert str(spec) in str(err.value) and "\n" not in str(err.value)


@pytest.mark.slow
def test_samples_csv_source_and_unreadable_output_folder(tmp_path):
    dev = pt.get_device("orin-agx")
    twin = pt.Twin("orin-agx", "resnet18", seed=0)
    pt.profile(twin, dev.sample(15, seed=3), batch_size=16, progress=False).to_csv(
        tmp_path / "s.csv", index=False
    )
    text = SMALL.replace("[workloads.mobilenetv3]", "[workloads.resnet18]").replace(
        'source = "twin"', 'samples_csv = "s.csv"'
    )
    spec = parse_spec(text, source="x.toml", base=tmp_path)
    assert spec.workloads["resnet18"].path == tmp_path / "s.csv"
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(ReportError, match="cannot write report folder .*a-file"):
        pt.report(spec, blocker / "out", n_jobs=1)
    with pytest.raises(PowerTrainError, match="cannot write report folder"):
        pt.report(spec, "/proc/powertrain-report", n_jobs=1)


@pytest.mark.slow
def test_dead_dask_address_fails_fast_with_a_clear_error():
    pytest.importorskip("distributed")
    # the timeout given is the one used (no wall clock here: tests must not time)
    with pytest.raises(ReportError, match="Dask scheduler at 'tcp://127.0.0.1:9' within 2 s"):
        connect("tcp://127.0.0.1:9", timeout_s=2)


@pytest.mark.slow
def test_report_runs_on_a_dask_local_cluster(tmp_path):
    distributed = pytest.importorskip("distributed")
    spec = tmp_path / "one.toml"
    spec.write_text(SMALL.replace('["time", "energy"]', '["energy"]'))
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        result = pt.report(spec, tmp_path / "out", scheduler=cluster.scheduler_address)
    assert result.computed == ["orin-agx_mobilenetv3_bs16_energy"]
    assert (tmp_path / "out" / "cases" / result.computed[0] / ".done").exists()
    assert "orin-agx / mobilenetv3" in (tmp_path / "out" / "index.html").read_text()


def _samples_csv(tmp_path: Path, device: str = "orin-agx", **edit) -> Path:
    dev = pt.get_device(device)
    twin = pt.Twin(device, "resnet18", seed=0)
    df = pt.profile(twin, dev.sample(12, seed=3), batch_size=16, progress=False)
    for column, value in edit.items():
        df.loc[0, column] = value
    path = tmp_path / "s.csv"
    df.to_csv(path, index=False)
    return path


def _csv_spec(tmp_path: Path) -> Path:
    spec = tmp_path / "csv.toml"
    spec.write_text(
        SMALL.replace('["time", "energy"]', '["time"]')
        .replace("[workloads.mobilenetv3]", "[workloads.resnet18]")
        .replace('source = "twin"', 'samples_csv = "s.csv"')
    )
    return spec


@pytest.mark.slow
@pytest.mark.parametrize(
    ("device", "edit", "message"),
    [
        ("orin-nano", {}, r"column 'device' holds orin-nano, not the case's device 'orin-agx'"),
        ("orin-agx", {"gpu_mhz": 999.9}, r"gpu_mhz.*999.9"),
    ],
)
def test_samples_of_another_device_are_refused_naming_case_and_file(
    tmp_path, device, edit, message
):
    csv = _samples_csv(tmp_path, device, **edit)
    spec = _csv_spec(tmp_path)
    with pytest.raises(PowerTrainError, match=message) as err:
        pt.report(spec, tmp_path / "out", n_jobs=1)
    text = str(err.value)
    assert "case orin-agx_resnet18_bs16_time" in text and str(csv) in text and "\n" not in text
    assert not (tmp_path / "out" / "index.html").exists()  # no silent page


def test_overwrite_never_deletes_a_folder_this_package_did_not_write(tmp_path, capsys):
    spec = tmp_path / "one.toml"
    spec.write_text(SMALL)
    out = tmp_path / "theirs"
    (out / "cases" / "run1").mkdir(parents=True)
    (out / "cases" / "run1" / "data.csv").write_text("keep,me\n1,2\n")
    (out / "report.json").write_text(json.dumps({"spec_sha256": "x", "complete": True}))
    assert main(["report", str(spec), "-o", str(out), "--overwrite", "-j", "1"]) == 1
    err = capsys.readouterr().err
    assert "not written by powertrain" in err and len(err.strip().splitlines()) == 1
    assert (out / "cases" / "run1" / "data.csv").read_text() == "keep,me\n1,2\n"
    assert (out / "report.json").exists()


@pytest.mark.slow
def test_overwrite_of_our_report_keeps_files_it_did_not_write(small_report, tmp_path):
    import shutil

    spec, out, _ = small_report
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    (copy / "cases" / "mine").mkdir()
    (copy / "cases" / "mine" / "notes.txt").write_text("keep")
    (copy / "notes.txt").write_text("keep")
    case = copy / "cases" / "orin-agx_mobilenetv3_bs16_time"
    (case / ".done").write_text("from the copied report\n")  # the copy already had one
    result = pt.report(spec, copy, overwrite=True, n_jobs=1)
    assert (copy / "cases" / "mine" / "notes.txt").read_text() == "keep"
    assert (copy / "notes.txt").read_text() == "keep"
    # the case was computed again and its folder written anew, not reused from the copy
    assert case.name in result.computed and result.reused == []
    assert (case / ".done").read_text() == "done\n"


@pytest.mark.system  # runs a subprocess
def test_a_hanging_profiling_command_times_out_naming_the_case(tmp_path):
    spec = tmp_path / "hang.toml"
    spec.write_text(
        SMALL.replace('["time", "energy"]', '["time"]').replace(
            'source = "twin"',
            f"command = \"sh -c 'echo $$ > {tmp_path}/pid; exec sleep 30'\"\ntimeout_s = 1",
        )
    )
    with pytest.raises(PowerTrainError, match=r"case orin-agx_mobilenetv3_bs16_time.*within 1 s"):
        pt.report(spec, tmp_path / "out", n_jobs=1)
    pid = int((tmp_path / "pid").read_text())
    with pytest.raises(ProcessLookupError):  # the hanging command was killed, not left behind
        os.kill(pid, 0)
    assert load_spec(EXAMPLE).workloads["mobilenetv3"].timeout_s == 7200  # the default


def test_a_huge_spec_is_refused_with_an_estimate_unless_confirmed(tmp_path, capsys):
    spec = tmp_path / "huge.toml"
    sizes = ", ".join(str(b) for b in range(1, 2501))
    spec.write_text(SMALL.replace("batch_sizes = [16]", f"batch_sizes = [{sizes}]"))
    assert load_spec(spec).n_cases == 5000
    assert main(["report", str(spec), "-o", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "5,000 cases" in err and " h with " in err and "--max-cases 5000" in err
    assert not (tmp_path / "out").exists()  # refused before touching the folder


@pytest.mark.slow
def test_reference_and_samples_csv_resolve_against_the_spec_folder(tmp_path, monkeypatch):
    (tmp_path / "models" / "mine").mkdir(parents=True)
    _samples_csv(tmp_path)
    text = (
        _csv_spec(tmp_path).read_text().replace("seed = 1", 'seed = 1\nreference = "models/mine"')
    )
    (tmp_path / "csv.toml").write_text(text)
    monkeypatch.chdir(tmp_path / "models")  # somewhere else: neither resolves against it
    spec = load_spec(tmp_path / "csv.toml")
    assert spec.reference == str(tmp_path / "models" / "mine")
    assert spec.workloads["resnet18"].path == tmp_path / "s.csv"
    # a name that is no folder beside the spec stays a shipped model's name
    text = SMALL.replace("seed = 1", 'seed = 1\nreference = "orin-agx/resnet18"')
    assert parse_spec(text, base=tmp_path).reference == "orin-agx/resnet18"


def test_numbers_read_as_a_person_reads_them():
    from powertrain.report.pages import format_value, number

    assert [number(v) for v in (16990.4, 7402.2, 131.4, 12.94, 9.998, 0.2361)] == [
        "16,990", "7,402", "131", "12.9", "10.0", "0.236",
    ]  # fmt: skip
    assert "e+" not in number(1.699e4)
    assert format_value("cpu_mhz", 1036.8) == "1036.8"  # settings exact, never rounded
    assert format_value("epoch_s", float("nan")) == ""


def test_index_says_when_a_cap_is_above_every_mode_and_flags_over_cap_picks():
    from powertrain.report.pages import index_page

    spec = parse_spec(SMALL.replace("[12, 25, 40]", "[10, 20, 40, 60]"))
    pick = {"feasible": True, "mode": "4 cores, CPU 1190.4 / GPU 624.75 / mem 2133 MHz",
            "epoch_s": 16990.4, "epoch_kj": 7.3, "power_w": 12.0}  # fmt: skip
    summary = {
        "case_id": "c", "device": "orin-nano", "workload": "mobilenetv3", "batch_size": 16,
        "objective": "time", "samples": 20, "source": "twin", "reference": "r",
        "max_power_w": 15.0,
        "picks": [
            {"power_cap_w": 10.0, "feasible": True, **{**pick, "power_w": 9.9},
             "true_power_w": 10.4, "over_cap_w": 0.4},
            {"power_cap_w": 20.0, **pick, "true_power_w": 12.1, "over_cap_w": -7.9},
            {"power_cap_w": 40.0, **pick},
            {"power_cap_w": 60.0, **pick},
        ],
    }  # fmt: skip
    page = index_page(spec, [summary])
    assert "0.400 W over on the twin" in page
    assert "1 predicted pick(s) draw more than their cap" in page
    assert "W, predicted" in page and "W, measured" not in page  # none confirmed here
    # a confirmed pick: measured within its cap, a little over in the twin's noise-free
    # power; the page says so and does not ask to confirm it on the board
    summary["picks"][0].update(how="confirmed", true_power_w=10.027, over_cap_w=0.027)
    page = index_page(spec, [summary])
    assert "confirm them on the board" not in page and "W, measured" in page
    assert "1 confirmed pick(s) fit their cap as measured" in page and "0.0270 W" in page
    assert "predicted by transferring a shipped reference model" not in page
    assert "no limit: every mode draws &le; 15.0 W" in page  # the 20 W cap
    assert page.count("same as under 20 W") == 1 and "same as under 40 W" in page
    assert "16,990 s" in page and "e+" not in page


def _our_report(folder: Path, cases: list[str], complete: bool = True) -> None:
    """A folder as this package leaves it: its marker, its state, its finished cases."""
    folder.mkdir(parents=True)
    (folder / ".powertrain-report").write_text("written by powertrain report\n")
    state = {"spec_sha256": "another spec", "cases": cases, "complete": complete}
    (folder / "report.json").write_text(json.dumps(state))
    for name in cases:
        (folder / "cases" / name).mkdir(parents=True)
        (folder / "cases" / name / ".done").write_text("done\n")


def test_overwrite_never_deletes_another_report_through_a_symlink(tmp_path, capsys):
    spec = tmp_path / "one.toml"
    spec.write_text(SMALL)
    case = "orin-agx_mobilenetv3_bs16_time"
    a, b = tmp_path / "A", tmp_path / "B"
    _our_report(a, [case])
    _our_report(b, [])
    (b / "cases").symlink_to(a / "cases")  # B's cases are A's
    assert main(["report", str(spec), "-o", str(b), "--overwrite", "-j", "1"]) == 1
    err = capsys.readouterr().err
    assert "leads out of the folder" in err and len(err.strip().splitlines()) == 1
    assert (a / "cases" / case / ".done").exists() and (b / "report.json").exists()
    (b / "cases").unlink()
    (b / "cases").mkdir()
    (b / "cases" / case).symlink_to(a / "cases" / case)  # one case folder is A's
    assert main(["report", str(spec), "-o", str(b), "--overwrite", "-j", "1"]) == 1
    assert "leads out of the folder" in capsys.readouterr().err
    assert (a / "cases" / case / ".done").exists()


def test_overwrite_never_replaces_its_own_spec(tmp_path):
    out = tmp_path / "out"
    _our_report(out, [])
    spec = out / "index.html"  # the spec where the report writes its index
    spec.write_text(SMALL)
    with pytest.raises(ReportError, match="index.html: is or holds the input"):
        pt.report(spec, out, overwrite=True, n_jobs=1)
    assert spec.read_text() == SMALL


def test_a_killed_unfinished_report_is_not_called_finished(tmp_path):
    spec = tmp_path / "one.toml"
    spec.write_text(SMALL)
    out = tmp_path / "out"
    _our_report(out, ["x"], complete=False)  # killed before it finished, another spec
    with pytest.raises(ReportError, match="holds an unfinished report of another spec"):
        pt.report(spec, out, n_jobs=1)
