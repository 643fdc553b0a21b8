"""The command line as a newcomer meets it: cheap commands stay cheap, one option style,
numbers as a person reads them, quiet output when redirected, shipped examples reachable."""

from __future__ import annotations

import io
import signal
import subprocess
import sys
from argparse import _SubParsersAction

import pandas as pd
import pytest

from powertrain.cli import build_parser, main
from powertrain.cli.args import join_list_values
from powertrain.decisions.optimise import SAFE_K_SIGMA

HEAVY = ("torch", "sklearn", "scipy")


def _modules_after(code: str) -> set[str]:
    """Top-level modules loaded by ``code`` in a fresh interpreter."""
    probe = f"{code}\nimport sys\nprint(' '.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return set(out.stdout.split())


def test_building_the_parser_imports_no_heavy_library():
    loaded = _modules_after("from powertrain.cli import build_parser; build_parser()")
    assert not loaded & {*HEAVY, "pandas", "matplotlib"}, sorted(loaded & {*HEAVY, "pandas"})


def test_an_argument_error_exits_before_pandas_is_imported():
    code = (
        "from powertrain.cli import main\n"
        "try:\n    main(['select', 'x.csv', '--bogus'])\n"
        "except SystemExit as e:\n    assert e.code == 2, e.code"
    )
    assert "pandas" not in _modules_after(code)


def test_select_never_imports_torch(tmp_path):
    est = tmp_path / "est.csv"
    pd.DataFrame({"cores": [2, 4], "time_ms": [10.0, 5.0], "power_w": [10.0, 20.0]}).to_csv(
        est, index=False
    )
    argv = ["select", str(est), "--power-cap", "15"]
    code = f"from powertrain.cli import main\nassert main({argv!r}) == 0"
    assert not _modules_after(code) & set(HEAVY)


def _subcommands():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, _SubParsersAction))
    return sub.choices


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_every_command_has_quiet_and_verbose(name):
    options = {s for a in _subcommands()[name]._actions for s in a.option_strings}
    assert {"-q", "--quiet", "-v", "--verbose"} <= options, name


def test_list_options_take_commas_or_spaces_and_stop_before_a_file():
    assert join_list_values(["-b", "16", "32", "modes.csv"]) == ["-b", "16,32", "modes.csv"]
    assert join_list_values(["-b", "16,", "32"]) == ["-b", "16,32"]
    argv = ["x.csv", "-b", "8,16", "--no-std"]
    assert join_list_values(argv) == argv
    args = build_parser().parse_args(["predict", "-m", "m", "-b", "16", "32", "modes.csv"])
    assert args.batch_size == [16, 32] and args.modes == "modes.csv"
    args = build_parser().parse_args(["profile", "--workload", "w", "--threads", "2", "4,8"])
    assert args.threads == [2, 4, 8]
    args = build_parser().parse_args(["profile", "--workload", "w", "--num-workers", "0", "4"])
    assert args.num_workers == [0, 4]


def test_batch_r_seeds_is_a_list_as_in_python(tmp_path, monkeypatch, capsys):
    import powertrain.data.batch_efficiency as be

    seen = []

    def fake_r_vector(sizes, seeds, **kw):
        seen.append(list(seeds))
        return pd.DataFrame({"batch_size": sizes, "samples": [100] * len(sizes), "r": 1.0})

    monkeypatch.setattr(be, "r_vector", fake_r_vector)
    out = str(tmp_path / "r.csv")
    assert main(["batch-r", "--batch-sizes", "8", "16", "--seeds", "0", "1", "2", "-o", out]) == 0
    assert main(["batch-r", "--batch-sizes", "8", "--n-seeds", "2", "-o", out]) == 0
    assert main(["batch-r", "--batch-sizes", "8", "--seeds", "5", "-o", out]) == 0
    assert seen == [[0, 1, 2], [0, 1], [5]]
    assert "--n-seeds 5" in capsys.readouterr().err  # the old count spelling is explained
    assert main(["batch-r", "--seeds", "1", "--n-seeds", "2", "-o", out]) == 1


def test_report_prints_its_status_to_stderr(tmp_path, monkeypatch, capsys):
    import powertrain.report as fr

    class Result:
        index, out, files, computed, reused = tmp_path / "index.html", tmp_path, [], [1], []

    def fake_report(spec, out, log, **kw):
        log("case 1 of 1")
        return Result()

    monkeypatch.setattr(fr, "report", fake_report)
    before = signal.getsignal(signal.SIGTERM)
    assert main(["report", "spec.toml", "-o", str(tmp_path)]) == 0
    assert signal.getsignal(signal.SIGTERM) is before  # the caller's handler is back
    captured = capsys.readouterr()
    assert captured.out == "" and "case 1 of 1" in captured.err and "wrote" in captured.err
    assert main(["report", "spec.toml", "-o", str(tmp_path), "-q"]) == 0
    err = capsys.readouterr().err  # -q: only the line saying what was written
    assert "case 1 of 1" not in err and err.startswith("wrote")


@pytest.fixture(scope="module")
def v100_model(tmp_path_factory):
    """A small model of a real GPU trace, fitted from the shipped corpus id."""
    d = tmp_path_factory.mktemp("v100")
    assert main(["fit", "v100_bert-squad", "-o", str(d / "m"), "--epochs", "3", "-q"]) == 0
    return d / "m"


def test_fit_takes_a_shipped_corpus_id_and_its_time_target(v100_model):
    import json

    meta = json.loads((v100_model / "model.json").read_text())
    assert "epoch_s" in json.dumps(meta)  # no --targets needed for a table without time_ms


def test_select_picks_on_a_gpu_models_own_time_target(v100_model, tmp_path, capsys):
    est = tmp_path / "est.csv"
    argv = ["predict", "-m", str(v100_model), "--device", "v100", "-b", "16", "32"]
    assert main([*argv, "-o", str(est)]) == 0
    capsys.readouterr()
    assert main(["select", str(est), "--power-cap", "200", "--plain"]) == 0
    out = capsys.readouterr()
    best = pd.read_csv(io.StringIO(out.out))
    table = pd.read_csv(est)
    ok = table[table.power_w <= 200]
    assert best.epoch_s.iloc[0] == pytest.approx(ok.epoch_s.min(), rel=1e-5)
    assert "pick under 200 W: predicted\n" in out.err
    # by default a prediction keeps SAFE_K_SIGMA sigmas below the cap (or the power guard)
    assert main(["select", str(est), "--power-cap", "200"]) == 0
    out = capsys.readouterr()
    safe = pd.read_csv(io.StringIO(out.out)).iloc[0]
    guarded = min(safe.power_w + SAFE_K_SIGMA * safe.power_w_std, safe.power_w_max)
    assert guarded <= 200
    assert f"predicted with a margin ({SAFE_K_SIGMA:g} sigma)" in out.err
    assert main(["select", str(est), "--power-cap", "200", "--plain", "--k-sigma", "1"]) == 1
    assert main(["select", str(est), "--power-cap", "200", "--time", "power_w_std"]) == 0
    assert main(["select", str(est), "--power-cap", "200", "--time", "nope"]) == 1
    assert "--time nope: no such column" in capsys.readouterr().err


def test_printed_numbers_are_readable(tmp_path, capsys):
    est = tmp_path / "est.csv"
    pd.DataFrame(
        {
            "cores": [2.0, 4.0],
            "gpu_mhz": [1300.5, 624.75],
            "batch_size": [64.0, 64.0],
            "time_ms": [132.15420469909958, 90.0],
            "power_w": [10.123456789, 30.0],
        }
    ).to_csv(est, index=False)
    assert main(["select", str(est), "--power-cap", "15", "--front", str(tmp_path / "f.csv")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1] == "2,1300.5,64,132.154,10.1235", out
    front = (tmp_path / "f.csv").read_text().splitlines()
    assert front[1].startswith("2,1300.5,64,132.15420469909958,"), front  # files keep digits
    assert main(["select", str(est), "--power-cap", "15", "--full-precision"]) == 0
    assert "132.15420469909958" in capsys.readouterr().out


def test_modes_are_written_with_integer_counts(capsys):
    assert main(["modes", "orin-agx", "--which", "sample", "-n", "3"]) == 0
    table = pd.read_csv(io.StringIO(capsys.readouterr().out), dtype=str)
    assert table.cores.str.isdigit().all(), table


@pytest.mark.slow  # a fit in a subprocess: ~30 s under load
def test_fit_writes_no_progress_bar_into_a_redirected_stderr(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "powertrain", "fit", "v100_bert-squad", "-o", str(tmp_path / "m")]
        + ["--epochs", "2"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "\r" not in out.stderr and "epoch" not in out.stderr.lower().replace("epoch_s", "")
    assert "wrote" in out.stderr


def test_progress_bars_show_only_where_someone_looks():
    from powertrain.utils.progress import should_show

    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert should_show(None, io.StringIO()) is False
    assert should_show(None, Tty()) is True
    assert should_show(True, io.StringIO()) is True
    assert should_show(False, Tty()) is False


def test_examples_lists_and_copies_what_ships(tmp_path, capsys):
    assert main(["examples"]) == 0
    listing = capsys.readouterr().out
    assert "orin-agx_mobilenetv3_bs16" in listing and "v100_bert-squad" in listing
    assert "quickstart.ipynb" in listing and "fleet.toml" in listing
    assert main(["examples", "-o", str(tmp_path / "ex")]) == 0
    assert (tmp_path / "ex" / "fleet.toml").is_file()
    assert (tmp_path / "ex" / "real_gpus.ipynb").is_file()
    assert main(["examples", "-o", str(tmp_path / "ex")]) == 1  # nothing overwritten silently
    assert "--overwrite" in capsys.readouterr().err


def test_select_objectives_match_the_library():
    from powertrain.cli.select import OBJECTIVES as CLI
    from powertrain.decisions.selection import OBJECTIVES

    assert CLI == OBJECTIVES


def test_a_notebook_without_ipywidgets_gets_the_text_bar(monkeypatch):
    """tqdm.auto there would print 'TqdmWarning: IProgress not found'."""
    import importlib.util

    import tqdm

    from powertrain.utils import progress

    monkeypatch.setattr(progress, "_in_notebook", lambda: True)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "ipywidgets" else real_find_spec(name, *a),
    )
    assert progress._bar_class() is tqdm.tqdm
    assert progress.should_show(None) is True  # a notebook shows its bars


def test_help_defaults_read_from_the_source_match_the_library():
    """default_of reads defaults without importing the library: check each one it reads
    against inspect on the imported function."""
    import importlib
    import inspect
    import re
    from pathlib import Path

    from powertrain.cli import args as cli_args

    cli = Path(cli_args.__file__).parent
    seen = 0
    for path in cli.glob("*.py"):
        module = importlib.import_module(f"powertrain.cli.{path.stem}")
        for const, name in re.findall(r"default_of\((\w+), '(\w+)'\)", path.read_text()):
            target = getattr(module, const)
            mod, _, qualname = target.partition(":")
            func = importlib.import_module(mod)
            for part in qualname.split("."):
                func = getattr(func, part)
            expected = inspect.signature(func).parameters[name].default
            assert cli_args.default_of(target, name) == expected, (target, name)
            seen += 1
    assert seen >= 8


@pytest.mark.slow  # imports every module in a subprocess: ~17 s under load
def test_the_lazy_package_root_gives_every_public_name():
    """Each name of powertrain.__all__ resolves; decide and follow stay the functions after
    the modules defining them are imported."""
    code = (
        "import powertrain as pt\n"
        "import powertrain.decisions.decide, powertrain.decisions.cap_following\n"
        "assert callable(pt.decide) and pt.decide.__name__ == 'decide'\n"
        "assert callable(pt.follow) and pt.follow.__name__ == 'follow'\n"
        "assert all(getattr(pt, n) is not None for n in pt.__all__)\n"
        "assert 'decide' in dir(pt)"
    )
    loaded = _modules_after(code)
    assert "torch" in loaded  # pt.Predictor was resolved too


def test_importing_the_package_loads_no_heavy_library():
    assert not _modules_after("import powertrain") & {*HEAVY, "pandas"}
