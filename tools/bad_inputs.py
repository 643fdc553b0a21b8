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
        from powertrain.data.corpora import load_corpus

        corpus = load_corpus("orin-agx_resnet18_bs16").head(60)
        corpus.to_csv(tmp / "c.csv", index=False)
        return cli("fit", tmp / "c.csv", "-o", tmp / "m", "--targets", targets, "--epochs", "1")

    return run


def _fit_api_targets(tmp: Path) -> Outcome:
    from powertrain.data.corpora import load_corpus
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
    from powertrain.data.batch_efficiency import r_vector

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
    from powertrain.data.corpora import load_corpus
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


# -- issue 26: files, devices and sizes -----------------------------------------------------

_ROW = "12,2201.6,1300.5,3199,16\n"


def _stream_bad_row(bad: bytes) -> Callable[[Path], Outcome]:
    """predict -o of a CSV whose 13th row is bad, read in chunks of 5: the error must
    leave no output file (a truncated one looks whole to the next command)."""

    def run(tmp: Path) -> Outcome:
        from powertrain.predictor import streaming

        src = tmp / "big.csv"
        head = "cores,cpu_mhz,gpu_mhz,mem_mhz,batch_size\n" + _ROW * 12
        src.write_bytes(head.encode() + bad + (_ROW * 3).encode())
        defaults = streaming.read_csv_chunks.__defaults__
        streaming.read_csv_chunks.__defaults__ = (5, "")
        try:
            out = cli("predict", "-m", "orin-agx/resnet18", src, "-b", "16", "-o", tmp / "o.csv")
        finally:
            streaming.read_csv_chunks.__defaults__ = defaults
        if (tmp / "o.csv").exists():  # a partial file that looks whole: wrong
            return Outcome(0, out.error, out.traceback)
        return out

    return run


def _predict_into_input(tmp: Path) -> Outcome:
    src = _modes_csv(tmp)
    before = src.read_bytes()
    out = cli("predict", src, "-m", "orin-agx/resnet18", "-o", tmp / "." / "modes.csv")
    return out if src.read_bytes() == before else Outcome(0, out.error, out.traceback)


def _examples_through_symlink(tmp: Path) -> Outcome:
    outside = tmp / "outside.txt"
    outside.write_text("keep\n")
    (tmp / "ex").mkdir()
    (tmp / "ex" / "fleet.toml").symlink_to(outside)
    out = cli("examples", "-o", tmp / "ex", "--overwrite")
    out.value = outside.read_text() == "keep\n" and not (tmp / "ex" / "fleet.toml").is_symlink()
    return out


def _cross_device(tmp: Path) -> Outcome:
    spec = REPO / "examples" / "orin-nx-16gb.json"
    return cli("--device-spec", spec, "predict", "-m", "orin-agx/resnet18",
               "--device", "orin-nx-16gb", "-b", "16", "-o", tmp / "nx.csv")  # fmt: skip


def _replay(edit: Callable[[pd.DataFrame], pd.DataFrame], device: str | None) -> Outcome:
    from powertrain.backends.replay import ReplayBackend
    from powertrain.data.corpora import load_corpus

    table = edit(load_corpus("orin-agx_resnet18_bs16"))
    return api(lambda: ReplayBackend(table, device=device))


def _twice_10x(df: pd.DataFrame) -> pd.DataFrame:
    return pd.concat([df, df.head(1).assign(time_ms=df.time_ms.iloc[0] * 10)])


def _huge_modes(tmp: Path) -> Outcome:
    p = tmp / "huge.json"
    p.write_text(
        json.dumps({"name": "huge", "knobs": {f"k{i}": list(range(1, 401)) for i in range(6)}})
    )
    return cli("modes", p, "--which", "all", "-o", tmp / "h.csv")


def _weights_1e30(tmp: Path) -> Outcome:
    import copy

    import torch

    import powertrain as pt

    model = copy.deepcopy(pt.Predictor.from_pretrained("orin-agx/resnet18"))
    with torch.no_grad():
        for p in model.heads_["time_ms"].net_.parameters():
            p.mul_(1e30)
    modes = pt.get_device("orin-agx").power_modes().head(20)
    return api(lambda: model.predict(modes, batch_size=16))


def _one_batch_size_list(tmp: Path) -> Outcome:
    return cli("predict", _modes_csv(tmp), "-m", "orin-agx/resnet18", "-b", "16", "32",
               "-o", tmp / "p.csv")  # fmt: skip


def _api_predict(**kw: object) -> Outcome:
    import powertrain as pt

    model = pt.Predictor.from_pretrained("orin-agx/resnet18")
    modes = pt.get_device("orin-agx").power_modes().head(3)
    return api(lambda: model.predict(modes, **kw))


def _fit_no_targets(tmp: Path) -> Outcome:
    from powertrain.data.corpora import load_corpus
    from powertrain.predictor import Predictor

    corpus = load_corpus("orin-agx_resnet18_bs16").head(30)
    return api(lambda: Predictor(targets=(), progress=False).fit(corpus))


def _sidecar_no_digest(tmp: Path) -> Outcome:
    from powertrain.data.real_data import load_real_corpus, real_corpus_names

    name = real_corpus_names()[0]
    for suffix in (".csv", ".provenance.json"):
        shutil.copyfile(REPO / "datasets" / "real" / f"{name}{suffix}", tmp / f"{name}{suffix}")
    side = tmp / f"{name}.provenance.json"
    meta = json.loads(side.read_text())
    meta.pop("csv_sha256")
    side.write_text(json.dumps(meta))
    return api(lambda: load_real_corpus(name, tmp))


def _report_while_running(tmp: Path) -> Outcome:
    import fcntl

    import powertrain as pt

    out = tmp / "r"
    out.mkdir()
    fd = os.open(out, os.O_RDONLY)  # what the first, still running report holds
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return api(lambda: pt.report(REPO / "examples" / "fleet.toml", out))
    finally:
        os.close(fd)


def _garbage_scheduler(tmp: Path) -> Outcome:
    import socket
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)

    def answer() -> None:
        with contextlib.suppress(OSError):
            for _ in range(4):
                conn, _ = srv.accept()
                conn.sendall(b"HTTP/1.0 200 OK\r\n\r\n" + bytes(range(256)) * 8)
                conn.close()

    threading.Thread(target=answer, daemon=True).start()
    try:
        return _dask(f"tcp://127.0.0.1:{srv.getsockname()[1]}")
    finally:
        srv.close()


def _refine_on_size_list(tmp: Path) -> Outcome:
    import powertrain as pt

    model = pt.Predictor.from_pretrained("orin-agx/resnet18")
    est = model.predict(pt.get_device("orin-agx").profiling_grid().head(40), batch_size=[16, 32])
    return api(lambda: pt.refine_modes(est, 3, (15, 40)))


CASES += [
    *[
        Case(f"predict-stream-{name}", _stream_bad_row(bad), ("big.csv", "row 13"))
        for name, bad in (
            ("abc", b"12,2201.6,abc,3199,16\n"),
            ("empty-cell", b"12,2201.6,,3199,16\n"),
            ("latin1", b"12,2201.6,1300.5,3199,16\xe9\n"),
        )
    ],
    Case(
        "predict-stream-ragged",
        _stream_bad_row(b"12,2201.6,1300.5,3199,16,7\n"),
        ("big.csv", "line 14"),
    ),
    Case("predict-into-its-input", _predict_into_input, ("--out", "destroy the input")),
    Case(
        "examples-overwrite-symlink",
        _examples_through_symlink,
        correct=lambda o: o.rc == 0 and o.value is True,
    ),
    Case("predict-other-device", _cross_device, ("orin-agx", "orin-nx-16gb", "--cross-device")),
    Case(
        "replay-other-device",
        lambda t: _replay(lambda d: d, "orin-nano"),
        ("orin-agx", "orin-nano"),
    ),
    Case(
        "replay-other-device-no-column",
        lambda t: _replay(lambda d: d.drop(columns="device"), "orin-nano"),
        ("cores", "orin-nano"),
    ),
    Case("replay-duplicates-10x", lambda t: _replay(_twice_10x, None), ("rows 1, 4369", "10.0x")),
    Case("modes-all-huge-spec", _huge_modes, ("4,096,000,000,000,000 rows", "--max-rows")),
    Case("model-weights-1e30", _weights_1e30, ("time_ms", "not a finite number")),
    Case(
        "predict-one-batch-size-model",
        _one_batch_size_list,
        correct=lambda o: o.rc == 0 and "trained at batch size 16 only" in o.error,
    ),
    Case("api-batch-size-true", lambda t: _api_predict(batch_size=True), ("batch_size", "True")),
    Case("api-targets-empty", _fit_no_targets, ("targets",)),
    Case("sidecar-without-digest", _sidecar_no_digest, ("provenance.json", "csv_sha256")),
    Case("report-two-at-once", _report_while_running, ("still running",)),
    Case("dask-address-garbage", _garbage_scheduler, ("scheduler", "not a dask scheduler")),
    Case(
        "refine-on-batch-size-list",
        _refine_on_size_list,
        correct=lambda o: o.value is not None and 1 <= len(o.value) <= 3,
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
    from powertrain.data.corpora import load_corpus

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
