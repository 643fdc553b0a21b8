"""Run bad inputs through the CLI and the API and count wrong and unclear results.

Why: every bad input must end in a one-line error that names what is wrong (the file,
row, column, key or argument), or in a correct result; a silent exit 0 with a wrong
answer is the worst outcome, a traceback the next worst. Each case here says what a
clear answer must name; the run classifies every outcome:

* ``clear``   - the expected one-line error naming every expected token (or a correct result)
* ``unclear`` - a traceback, or an error that does not name what is wrong
* ``wrong``   - exit 0 / no exception where an error (or another result) was due

    python tools/bad_inputs.py            # table + counts
    python tools/bad_inputs.py --only model-

``tests/test_bad_inputs.py`` runs the same cases and asserts every one is clear.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

REPO = Path(__import__("powertrain").__file__).resolve().parents[1]  # the code under test


@dataclass
class Outcome:
    rc: int | None  # CLI exit status (None: an API call)
    error: str  # the error text (CLI stderr, or "ExceptionType: message")
    traceback: bool  # an exception escaped (CLI) / one that is not PowerTrainError (API)
    value: object = None  # what an API call returned


@dataclass
class Case:
    name: str
    run: Callable[[Path], Outcome]
    names: tuple[str, ...] = ()  # what a clear error must name (case-insensitive)
    #: for cases whose right answer is a result, not an error: True if it is correct
    correct: Callable[[Outcome], bool] | None = None
    #: the case mounts a small tmpfs (a full or read-only folder): needs root
    needs_mount: bool = False


def classify(case: Case, out: Outcome) -> str:
    if case.correct is not None:
        if out.traceback:
            return "unclear"
        return "clear" if case.correct(out) else "wrong"
    if out.traceback:
        return "unclear"
    if out.rc == 0 or (out.rc is None and not out.error):
        return "wrong"
    lines = [  # argparse's usage lines come before its one-line error
        ln
        for ln in out.error.strip().splitlines()
        if ln.strip() and not ln.startswith(("warning:", "usage:", " "))
    ]
    text = " ".join(lines).lower()
    if len(lines) > 2 or not all(t.lower() in text for t in case.names):
        return "unclear"
    return "clear"


# -- running ------------------------------------------------------------------------------


def cli(*argv: str) -> Outcome:
    """``powertrain ARGV`` in this process; an exception escaping ``main`` is a traceback."""
    from powertrain.cli import main

    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                rc = main([str(a) for a in argv])
            except SystemExit as e:  # argparse errors
                rc = e.code if isinstance(e.code, int) else 1
            except BaseException:  # noqa: BLE001 - the point is to count them
                return Outcome(1, traceback.format_exc(), True)
    return Outcome(rc, err.getvalue(), False, out.getvalue())


def api(fn: Callable[[], object]) -> Outcome:
    from powertrain.errors import PowerTrainError

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            value = fn()
        except PowerTrainError as e:
            return Outcome(None, f"{type(e).__name__}: {e}", False)
        except BaseException as e:  # noqa: BLE001
            return Outcome(None, f"{type(e).__name__}: {e}", True)
    return Outcome(None, "", False, value)


def in_subprocess(code: str, limit_mb: int = 1500, timeout: float = 120) -> Outcome:
    """Python ``code`` in a child with an address-space limit (a case that may grab memory)."""
    import resource

    def cap() -> None:
        b = limit_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (b, b))

    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        preexec_fn=cap,
        timeout=timeout,
        cwd=REPO,
    )
    return Outcome(run.returncode, run.stderr, "Traceback" in run.stderr, run.stdout)


# -- fixtures -------------------------------------------------------------------------------


def _model(tmp: Path, edit: Callable[[dict], None]) -> Path:
    """A copy of the shipped resnet18 reference with ``model.json`` edited."""
    src = REPO / "reference_models" / "orin-agx" / "resnet18"
    d = tmp / "model"
    shutil.copytree(src, d)
    meta = json.loads((d / "model.json").read_text())
    edit(meta)
    (d / "model.json").write_text(json.dumps(meta, indent=2))
    return d


def _modes_csv(tmp: Path) -> Path:
    p = tmp / "modes.csv"
    p.write_text(
        "cores,cpu_mhz,gpu_mhz,mem_mhz,batch_size\n12,2201.6,1300.5,3199,16\n4,1190.4,612,2133,16\n"
    )
    return p


def _predict_model(edit: Callable[[dict], None]) -> Callable[[Path], Outcome]:
    def run(tmp: Path) -> Outcome:
        return cli("predict", _modes_csv(tmp), "-m", _model(tmp, edit), "-o", tmp / "p.csv")

    return run


def _swap_heads(meta: dict) -> None:
    h = meta["heads"]
    h["time_ms"], h["power_w"] = h["power_w"], h["time_ms"]


def _reorder_inputs(meta: dict) -> None:
    meta["inputs"] = meta["inputs"][1:4][::-1] + [meta["inputs"][0], meta["inputs"][4]]


def _head(key: str, value: Callable[[float], float]) -> Callable[[dict], None]:
    def edit(meta: dict) -> None:
        meta["heads"]["power_w"][key] = value(meta["heads"]["power_w"][key])

    return edit


_JETSON = {
    "name": "myboard",
    "cores": 4,
    "cpu_mhz": [1000, 2000],
    "gpu_mhz": [500, 1000],
    "mem_mhz": [1600, 3200],
}


def _knob_spec(knob: str) -> Callable[[Path], Outcome]:
    def run(tmp: Path) -> Outcome:
        p = tmp / "dev.json"
        p.write_text(json.dumps({"name": "gpu-x", "knobs": {knob: [100, 200, 300]}}))
        return cli("modes", p)

    return run


def _fleet(tmp: Path, body: str) -> Path:
    p = tmp / "fleet.toml"
    p.write_text(
        'devices = ["orin-nano"]\nworkloads = ["resnet18"]\nbatch_sizes = [16]\n'
        "power_caps = [15]\n" + body
    )
    return p


def _parse_fleet(body: str) -> Callable[[Path], Outcome]:
    def run(tmp: Path) -> Outcome:
        load_spec = _fleet_loader()
        return api(lambda: load_spec(_fleet(tmp, body)))

    return run


def _fit_targets(targets: str) -> Callable[[Path], Outcome]:
    def run(tmp: Path) -> Outcome:
        from powertrain.corpora import load_corpus

        corpus = load_corpus("orin-agx_resnet18_bs16").head(60)
        corpus.to_csv(tmp / "c.csv", index=False)
        return cli("fit", tmp / "c.csv", "-o", tmp / "m", "--targets", targets, "--epochs", "1")

    return run


def _fit_api_targets(tmp: Path) -> Outcome:
    from powertrain.corpora import load_corpus
    from powertrain.predictor import PowerTrainMLP, Predictor

    corpus = load_corpus("orin-agx_resnet18_bs16").head(60)
    model = Predictor(PowerTrainMLP(epochs=1), targets=("time_ms", "batch_size"), progress=False)
    return api(lambda: model.fit(corpus))


def _estimates(tmp: Path) -> Path:
    p = tmp / "est.csv"
    p.write_text("cores,batch_size,time_ms,power_w\n4,16,100,10\n8,16,60,14\n")
    return p


def _cache(tmp: Path, edit: Callable[[list], None]) -> Outcome:
    """A batch-r cache for sizes 8,16 x seed 0 (fake proxy), edited, then read back."""
    from powertrain.batch_efficiency import r_vector

    def train(b: int, s: int, target: float) -> int:
        return 1000 + b

    r_vector([8, 16], seeds=[0], train_fn=train, cache_dir=tmp, name="fake")
    path = next(tmp.glob("r_*.json"))
    data = json.loads(path.read_text())
    edit(data["runs"])
    path.write_text(json.dumps(data))
    return api(lambda: r_vector([8, 16], seeds=[0], train_fn=train, cache_dir=tmp, name="fake"))


def _cache_ok(out: Outcome) -> bool:
    """A cache edited to nonsense must not reach the answer: recomputed (1008, 1016)."""
    if out.error:  # refusing with a clear error is also right
        return "cache" in out.error
    table = out.value
    return list(table["samples"]) == [1008, 1016]


def _header_only(cmd: str) -> Callable[[Path], Outcome]:
    def run(tmp: Path) -> Outcome:
        p = tmp / "h.csv"
        p.write_text("cores,cpu_mhz,gpu_mhz,mem_mhz,batch_size,time_ms,power_w\n")
        if cmd == "predict":
            return cli("predict", p, "-m", "orin-agx/resnet18")
        if cmd == "select":
            return cli("select", p, "--power-cap", "20")
        if cmd == "transfer":
            return cli("transfer", p, "-o", tmp / "m")
        return cli("fit", p, "-o", tmp / "m")

    return run


def _binary(tmp: Path, name: str) -> Path:
    p = tmp / name
    p.write_bytes(bytes(range(256)) * 4)
    return p


def _full_disk_predict(tmp: Path) -> Outcome:
    return cli("predict", _modes_csv(tmp), "-m", "orin-agx/resnet18", "-o", "/dev/full")


def _mount(path: Path, options: str) -> bool:
    return (
        shutil.which("mount") is not None
        and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True
        ).returncode
        == 0
    )


def can_mount() -> bool:
    """Whether this process may mount a tmpfs (root in a container that allows it)."""
    with tempfile.TemporaryDirectory() as d:
        if not _mount(Path(d), "size=64k"):
            return False
        subprocess.run(["umount", d], capture_output=True)
        return True


@contextlib.contextmanager
def _small_mount(path: Path, options: str):
    """A small tmpfs mounted at ``path`` for the duration (see :func:`can_mount`)."""
    path.mkdir()
    if not _mount(path, options):
        raise RuntimeError(f"cannot mount a tmpfs at {path} (needs root)")
    try:
        yield
    finally:
        subprocess.run(["umount", str(path)], capture_output=True)


def _fit_into(tmp: Path, options: str) -> Outcome:
    """``fit`` into a full or read-only folder (read-only: refused before training)."""
    from powertrain.corpora import load_corpus
    from powertrain.predictor import Predictor

    load_corpus("orin-agx_resnet18_bs16").head(60).to_csv(tmp / "c.csv", index=False)
    fit, trained = Predictor.fit, []

    def spy(self, *a, **k):
        trained.append(1)
        return fit(self, *a, **k)

    Predictor.fit = spy
    try:
        with _small_mount(tmp / "out", options):
            if "size" in options:  # fill it
                with contextlib.suppress(OSError), open(tmp / "out" / "fill", "wb") as f:
                    f.write(b"x" * 2**20)
            out = cli("fit", tmp / "c.csv", "-o", tmp / "out" / "m", "--epochs", "1")
    finally:
        Predictor.fit = fit
    if "ro" in options.split(",") and trained and not out.traceback and out.rc:
        out.error += "\n(the refusal came after training)\n(x)"
    return out


CASES: list[Case] = [
    # a tampered model.json must not load
    Case("model-inputs-reordered", _predict_model(_reorder_inputs), ("model.json",)),
    Case(
        "model-y_mean-shifted",
        _predict_model(_head("y_mean", lambda v: v + 1.0)),
        ("model.json",),
    ),
    Case("model-heads-swapped", _predict_model(_swap_heads), ("model.json",)),
    Case(
        "model-y_scale-nan", _predict_model(_head("y_scale", lambda v: math.nan)), ("model.json",)
    ),
    Case("model-y_scale-zero", _predict_model(_head("y_scale", lambda v: 0.0)), ("model.json",)),
    # reserved column names
    *[
        Case(f"knob-{k}", _knob_spec(k), (k, "reserved"))
        for k in ("power_w", "time_ms", "device", "workload", "power_w_std")
    ],  # fmt: skip
    Case("fit-targets-input", _fit_targets("cores,power_w"), ("'cores'", "target")),
    Case("fit-targets-device", _fit_targets("time_ms,device"), ("'device'", "target")),
    Case("api-targets-input", _fit_api_targets, ("batch_size", "target")),
    # unclear -> clear
    Case("fleet-seed-negative", _parse_fleet("seed = -1\n"), ("seed", ">= 0")),
    Case(
        "modes-seed-negative",
        lambda t: cli("modes", "orin-nano", "--which", "sample", "--seed", "-1"),
        ("--seed",),
    ),  # fmt: skip
    Case("api-sample-seed-negative", lambda t: _api_sample(5, -1), ("seed",)),
    Case("fleet-samples-above-modes", _parse_fleet("samples = 100000\n"), ("samples", "orin-nano")),
    Case(
        "modes-sample-above-count",
        lambda t: cli("modes", "orin-nano", "--which", "sample", "-n", "10000000"),
        ("-n", "modes"),
    ),  # fmt: skip
    Case("device-spec-binary", lambda t: cli("modes", _binary(t, "dev.json")), ("dev.json",)),
    Case("fleet-spec-binary", lambda t: _parse_fleet_file(_binary(t, "f.toml")), ("f.toml",)),
    Case("dask-address-no-host", lambda t: _dask("tcp://"), ("scheduler", "host:port")),
    Case("dask-address-no-port", lambda t: _dask("localhost"), ("scheduler", "host:port")),
    Case("dask-address-bad-port", lambda t: _dask("tcp://h:99999"), ("scheduler", "host:port")),
    Case(
        "batch-r-jobs-0", lambda t: cli("batch-r", "--jobs", "0", "-o", t / "r.csv"), ("--jobs",)
    ),  # fmt: skip
    Case("batch-r-cache-is-file", lambda t: _cache_file(t), ("--cache",)),
    Case(
        "select-front-missing-folder",
        lambda t: cli(
            "select", _estimates(t), "--power-cap", "20", "--front", t / "nope" / "f.csv"
        ),
        ("--front", "nope"),
    ),  # fmt: skip
    Case("predict-enospc", _full_disk_predict, ("/dev/full", "disk is full")),
    Case(
        "fit-readonly-folder",
        lambda t: _fit_into(t, "ro,size=1m"),
        ("read-only",),
        needs_mount=True,
    ),
    Case("fit-full-disk", lambda t: _fit_into(t, "size=64k"), ("disk is full",), needs_mount=True),
    Case(
        "batch-r-cache-negative",
        lambda t: _cache(t, lambda runs: runs[0].update(samples=-5)),
        correct=_cache_ok,
    ),  # fmt: skip
    Case(
        "batch-r-cache-missing-seed",
        lambda t: _cache(t, lambda runs: runs.pop()),
        correct=_cache_ok,
    ),  # fmt: skip
    Case("header-only-predict", _header_only("predict"), ("h.csv", "no rows")),
    Case("header-only-select", _header_only("select"), ("h.csv", "no rows")),
    Case("header-only-fit", _header_only("fit"), ("h.csv", "no rows")),
    Case("header-only-transfer", _header_only("transfer"), ("h.csv", "no rows")),
    # a mode space too big to hold
    Case(
        "power-modes-huge",
        lambda t: in_subprocess(
            "import powertrain as pt\n"
            "from powertrain.errors import PowerTrainError\n"
            "t = list(range(1, 401))\n"
            "d = pt.get_device({'name': 'huge', 'knobs': {f'k{i}': t for i in range(6)}})\n"
            "try:\n    d.power_modes()\n"
            "except PowerTrainError as e:\n    raise SystemExit(f'error: {e}')\n"
        ),
        ("4,096,000,000,000,000",),
    ),
]


def _api_sample(n: int, seed: int) -> Outcome:
    import powertrain as pt

    return api(lambda: pt.get_device("orin-nano").sample(n, seed=seed))


def _fleet_loader() -> Callable:
    try:
        from powertrain.report.spec import load_spec
    except ImportError:  # the layout before the report package (to count "before")
        from powertrain.fleet_spec import load_spec  # type: ignore[no-redef]
    return load_spec


def _parse_fleet_file(path: Path) -> Outcome:
    load_spec = _fleet_loader()
    return api(lambda: load_spec(path))


def _dask(address: str) -> Outcome:
    try:
        from powertrain.report.folder import connect
    except ImportError:  # the layout before the report package
        from powertrain.fleet_report import connect  # type: ignore[no-redef]
    return api(lambda: connect(address, timeout_s=2))


def _cache_file(tmp: Path) -> Outcome:
    f = tmp / "cachefile"
    f.write_text("not a folder")
    # one fast batch size: a clear refusal comes before any training
    return cli("batch-r", "--batch-sizes", "64", "--seeds", "1", "--target", "0.5",
               "--cache", f, "-o", tmp / "r.csv")  # fmt: skip


# -- the decision wing (issue 27): caps, decide's arguments, boards, cap schedules ----------
def _decide(power_cap_w: object = 30.0, board: str = "replay", **kw: object) -> Outcome:
    """``pt.decide`` on 300 recorded MobileNetV3 configurations (a quick transfer)."""
    import numpy as np

    import powertrain as pt
    from powertrain.backends import ReplayBackend
    from powertrain.corpora import load_corpus

    table = load_corpus("orin-agx_mobilenetv3_bs16").sample(300, random_state=0)

    class NanBoard(ReplayBackend):
        def measure(self, configs):  # a sensor that fails: power comes back NaN
            return super().measure(configs).assign(power_w=np.nan)

    b = (NanBoard if board == "nan" else ReplayBackend)(table.reset_index(drop=True))
    ref = pt.Predictor.from_pretrained("orin-agx/resnet18")
    quick = {"transfer_epochs": 10, "transfer_cv_folds": 2}
    return api(lambda: pt.decide(b, ref, power_cap_w, transfer_options=quick, **kw))  # type: ignore[arg-type]


def _schedule(steps: object) -> Outcome:
    import powertrain as pt

    return api(lambda: pt.CapSchedule(steps))  # type: ignore[arg-type]


def _follow_negative(tmp: Path) -> Outcome:
    import powertrain as pt
    from powertrain.backends import TwinBackend

    class Never:
        def config_for(self, cap: float) -> None:
            raise AssertionError(f"the controller was asked for {cap!r} W")

    board = TwinBackend(pt.Twin("orin-agx", "mobilenetv3", seed=0))
    return api(lambda: pt.follow(board, Never(), lambda t, n: -5.0, minibatches=3))


def _schedule_csv_same_instant(tmp: Path) -> Outcome:
    import powertrain as pt

    f = tmp / "caps.csv"
    f.write_text("t_s,power_cap_w\n0,40\n0,20\n")
    return api(lambda: pt.CapSchedule.from_csv(f))


CASES += [
    Case("decide-caps-text", lambda t: _decide("30"), ("power_cap_w", "'30'")),
    Case("decide-caps-huge", lambda t: _decide(range(1, 100001)), ("100,000 caps", "fewer caps")),
    Case(
        "profile-active-caps-huge",
        lambda t: cli(
            "profile",
            "--workload",
            "mobilenetv3",
            "--device",
            "orin-agx",
            "--quiet",
            "--strategy",
            "active",
            "--power-cap",
            "1-100000",
            "--budget",
            "5",
        ),
        ("100,000 caps", "fewer caps"),
    ),  # fmt: skip
    Case("decide-board-nan", lambda t: _decide(board="nan"), ("NanBoard", "power_w", "cores=")),
    Case(
        "decide-candidates-empty",
        lambda t: _decide(
            candidates=pd.DataFrame(
                columns=["cores", "cpu_mhz", "gpu_mhz", "mem_mhz", "batch_size"]
            )
        ),
        ("candidates",),
    ),  # fmt: skip
    Case("decide-seed-negative", lambda t: _decide(seed=-1), ("seed",)),
    Case("decide-draws-0", lambda t: _decide(draws=0), ("draws",)),
    Case("decide-patience-negative", lambda t: _decide(patience=-1), ("patience",)),
    Case("schedule-same-instant", lambda t: _schedule([(0, 40), (0, 20)]), ("steps 1 and 2",)),
    Case("schedule-csv-same-instant", _schedule_csv_same_instant, ("caps.csv", "rows 1 and 2")),
    Case("schedule-step-text", lambda t: _schedule([(0, "abc")]), ("step 1",)),
    Case("schedule-step-triple", lambda t: _schedule([(0, 30, 99)]), ("step 1",)),
    Case("follow-callable-negative", _follow_negative, ("-5", "cap")),
]


def run_all(only: str = "") -> dict[str, tuple[str, Outcome]]:
    results = {}
    mount = can_mount()
    for case in CASES:
        if (only and not case.name.startswith(only)) or (case.needs_mount and not mount):
            continue
        with tempfile.TemporaryDirectory() as d:
            cwd = os.getcwd()
            try:
                out = case.run(Path(d))
            finally:
                os.chdir(cwd)
        results[case.name] = (classify(case, out), out)
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="run the cases whose name starts with this")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each error")
    args = ap.parse_args()
    results = run_all(args.only)
    for name, (verdict, out) in results.items():
        first = (out.error.strip().splitlines() or ["(no error)"])[-1][:150]
        print(f"{verdict:<8} {name:<30} {first}")
        if args.verbose and verdict != "clear":
            print("    " + out.error.strip().replace("\n", "\n    ")[-1500:])
    counts = pd.Series([v for v, _ in results.values()]).value_counts()
    print(
        f"\n{len(results)} cases: "
        + ", ".join(f"{k} {int(counts.get(k, 0))}" for k in ("clear", "unclear", "wrong"))
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
