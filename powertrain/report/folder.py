"""``pt.report(spec, out)``: run every case of a fleet spec and write the report folder.

Why: a fleet report takes minutes to hours, so it must survive interruption (each case
folder appears atomically with a done marker; a rerun skips finished cases), must not
clobber someone's folder by accident (an existing folder is refused unless it is this
spec's unfinished report, or ``overwrite`` of a folder this package wrote, recognised by
its marker file; even then only the files it wrote are removed), must not start a week
of work by a typo (a spec over ``max_cases`` is refused with an estimate), and must
scale past one machine (the same cases run on a Dask cluster with ``scheduler=``).
Workers only compute; this process writes, so a remote cluster needs no shared disk.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ..errors import DataError, PowerTrainError
from ..utils.files import atomic_write, check_output_tree, inside, put, replace_dir
from .cases import CaseResult, run_group
from .pages import CASE_FILES, case_files, index_page
from .spec import Case, FleetSpec, load_spec

STATE_FILE = "report.json"
DONE_MARKER = ".done"
#: written first into every report folder this package makes; --overwrite needs it
OWNER_MARKER = ".powertrain-report"
#: a spec with more cases than this needs ``max_cases`` (``--max-cases``) raised
MAX_CASES = 500
#: core-seconds one case group takes on the twin, for the size estimate (the example spec:
#: 12 groups in 46 s on 2 cores, README); a profiling command takes longer
SECONDS_PER_GROUP = 8.0


class ReportError(PowerTrainError, RuntimeError):
    """The report folder or the cluster cannot be used."""


@dataclass
class ReportResult:
    """What :func:`report` did: the folder, the cases computed now and those reused.

    Parameters
    ----------
    out : Path
        The report folder.
    index : Path
        Its ``index.html``.
    computed, reused : list of str
        Case ids run now, and those an interrupted run had finished.
    files : list of Path
        Every file written.
    """

    out: Path
    index: Path
    computed: list[str]
    reused: list[str]
    files: list[Path]


def _spec_digest(spec: FleetSpec) -> str:
    return hashlib.sha256(spec.text.encode()).hexdigest()[:16]


@contextlib.contextmanager
def _exclusive(out: Path) -> Iterator[None]:
    """Hold ``out`` for one report at a time: a second report into a folder that one is
    still writing is refused as such (an advisory lock on the folder, freed when this
    process ends however it ends)."""
    if out.exists() and not out.is_dir():
        raise ReportError(f"report folder {out} exists and is not a folder")
    try:
        import fcntl
    except ImportError:  # pragma: no cover - no advisory locks here (Windows)
        yield
        return
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd = os.open(out, os.O_RDONLY)
    except OSError as e:
        raise ReportError(f"cannot write report folder {out}: {e.strerror or e}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ReportError(
                f"report folder {out} is being written by another report that is still "
                "running; wait for it to end, or choose another folder"
            ) from None
        yield
    finally:
        os.close(fd)


def _check_paths(out: Path, spec: FleetSpec) -> None:
    """utils.files.check_output_tree before anything is deleted or written: what the
    report writes or replaces in ``out`` (its files, cases/, each case folder there) stays
    in ``out`` through every symlink and is never the spec or a samples file it reads."""
    inputs = [spec.path, *(w.path for w in spec.workloads.values())]
    try:
        check_output_tree(out, ("cases", "index.html", STATE_FILE, OWNER_MARKER), inputs)
        cases = out / "cases"
        if cases.is_dir():
            check_output_tree(out, (Path("cases") / p.name for p in cases.iterdir()), inputs)
    except DataError as e:
        raise ReportError(f"report folder {out}: {e}") from None


def _prepare_folder(out: Path, spec: FleetSpec, overwrite: bool) -> None:
    """Create ``out``, resume it, or refuse it (see the module docstring)."""
    state = out / STATE_FILE
    if out.exists() and not out.is_dir():
        raise ReportError(f"report folder {out} exists and is not a folder")
    _check_paths(out, spec)
    if out.is_dir() and any(out.iterdir()):
        ours = (out / OWNER_MARKER).is_file()
        try:
            prior = json.loads(state.read_text()) if ours and state.exists() else None
        except (OSError, ValueError):
            prior = None
        resumable = (
            prior is not None
            and prior.get("spec_sha256") == _spec_digest(spec)
            and not prior.get("complete")
        )
        if overwrite and not ours:
            raise ReportError(
                f"report folder {out} was not written by powertrain (no {OWNER_MARKER} "
                "marker); --overwrite only replaces its own reports: choose another folder"
            )
        if overwrite:
            _remove_own_files(out, prior)
        elif not resumable:
            why = (
                "is not empty"
                if prior is None
                else "holds a finished report"
                if prior.get("complete")
                else "holds an unfinished report of another spec"
            )
            raise ReportError(
                f"report folder {out} exists and {why}; pass --overwrite "
                "(overwrite=True) to replace it"
            )
    try:
        (out / "cases").mkdir(parents=True, exist_ok=True)
        put(out, OWNER_MARKER, "written by powertrain report; do not edit\n")
        inside(out, out / "cases" / "x")  # a symlinked cases/ would lead writes elsewhere
        probe = out / f".write-test-{uuid.uuid4().hex}"
        probe.write_bytes(b"")
        probe.unlink()
        if not state.exists():
            _write_state(out, spec, complete=False)
    except OSError as e:
        raise ReportError(f"cannot write report folder {out}: {e.strerror or e}") from None


def _remove_own_files(out: Path, prior: dict | None) -> None:
    """Remove what an earlier report wrote here: its index, state, and the case folders it
    names that carry the done marker (or its own unfinished temporary folders)."""
    cases = out / "cases"
    names = set((prior or {}).get("cases", []))
    if cases.is_dir():
        for folder in cases.iterdir():
            done = folder.name in names and (folder / DONE_MARKER).exists()
            if folder.is_symlink() or not folder.is_dir():  # never deleted through
                continue
            if done or folder.name.startswith(".tmp-"):
                shutil.rmtree(folder)
    for name in ("index.html", STATE_FILE):
        (out / name).unlink(missing_ok=True)


def check_size(spec: FleetSpec, max_cases: int | None, n_jobs: int | None) -> None:
    """Refuse a spec over ``max_cases`` cases, saying how long it would take here."""
    limit = MAX_CASES if max_cases is None else max_cases
    n = spec.n_cases
    if n <= limit:
        return
    groups = n // max(len(spec.objectives), 1)
    cores = n_jobs if n_jobs and n_jobs > 0 else (os.cpu_count() or 1)
    hours = groups * SECONDS_PER_GROUP / cores / 3600
    where = spec.path or "the spec"
    raise ReportError(
        f"{where}: {n:,} cases is more than {limit:,}; on the twin that is about "
        f"{hours:,.1f} h with {cores} core(s) (more with a profiling command). "
        f"Pass --max-cases {n} (max_cases={n}) to run it"
    )


def _write_state(out: Path, spec: FleetSpec, complete: bool) -> None:
    state = {
        "spec": str(spec.path) if spec.path else None,
        "spec_sha256": _spec_digest(spec),
        "cases": [c.case_id for c in spec.cases()],
        "complete": complete,
    }
    atomic_write(out / STATE_FILE, json.dumps(state, indent=1).encode())


def is_done(out: Path, case: Case) -> bool:
    return (out / "cases" / case.case_id / DONE_MARKER).exists()


def write_case(out: Path, result: CaseResult) -> list[Path]:
    """Write a case folder atomically: into a hidden temporary folder, then renamed."""
    final = out / "cases" / result.case.case_id
    tmp = out / "cases" / f".tmp-{result.case.case_id}-{uuid.uuid4().hex}"
    tmp.mkdir(parents=True)
    for name, data in case_files(result).items():
        (tmp / name).write_bytes(data)
    (tmp / DONE_MARKER).write_text("done\n")
    replace_dir(tmp, final)  # over a stale folder without its marker, if any
    return [final / name for name in CASE_FILES]


def _groups(cases: Iterable[Case]) -> list[list[Case]]:
    """Cases that share samples and a transfer (they differ only in objective)."""
    groups: dict[tuple, list[Case]] = {}
    for c in cases:
        groups.setdefault((c.device, c.workload, c.batch_size), []).append(c)
    return list(groups.values())


def _run_local(groups: list[list[Case]], n_jobs: int | None) -> Iterator[list[CaseResult]]:
    if n_jobs == 1 or len(groups) <= 1:
        yield from map(run_group, groups)
        return
    from joblib import Parallel, delayed

    parallel = Parallel(n_jobs=n_jobs or -1, return_as="generator_unordered")
    yield from parallel(delayed(run_group)(g) for g in groups)


#: a scheduler address: [scheme://]host:port, the host a name, an IPv4 or a bracketed IPv6
_ADDRESS = re.compile(
    r"^(?:(?:tcp|tls|ws|wss|ucx)://)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$"
)


def check_address(address: object) -> str:
    """``address`` if it has the form of a Dask scheduler address, else a ReportError."""
    if isinstance(address, str) and re.match(r"^inproc://\S+$", address):
        return address  # an in-process cluster (LocalCluster(processes=False))
    m = _ADDRESS.match(address) if isinstance(address, str) else None
    if m is None or not 0 < int(m.group(1)) < 65536:
        raise ReportError(
            f"--scheduler {address!r}: not a Dask scheduler address; give "
            "[tcp://]HOST:PORT, e.g. tcp://10.0.0.5:8786"
        )
    return str(address)


def connect(address: str, timeout_s: float = 5.0):
    """A Dask client for ``address``, or a clear error within ``timeout_s`` seconds."""
    check_address(address)
    try:
        from distributed import Client
    except ImportError:
        raise ReportError(
            "--scheduler needs dask.distributed: pip install 'powertrain[dask]'"
        ) from None
    try:
        return Client(address, timeout=f"{timeout_s}s", set_as_default=False)
    except (OSError, TimeoutError, ValueError, AssertionError) as e:
        raise ReportError(
            f"cannot reach the Dask scheduler at {address!r} within {timeout_s:g} s: {e}"
        ) from None
    except Exception as e:  # noqa: BLE001 - something answered, but not a Dask scheduler
        raise ReportError(
            f"--scheduler {address!r}: what answers there is not a Dask scheduler "
            f"({type(e).__name__}: {' '.join(str(e).split())[:200]})"
        ) from None


def _run_dask(groups: list[list[Case]], address: str) -> Iterator[list[CaseResult]]:
    from distributed import as_completed

    client = connect(address)
    try:
        with client.as_current():
            futures = [client.submit(run_group, g, pure=False) for g in groups]
            for future in as_completed(futures):
                yield future.result()
    finally:
        client.close()


def report(
    spec: str | Path | FleetSpec,
    out: str | Path,
    *,
    overwrite: bool = False,
    scheduler: str | None = None,
    n_jobs: int | None = None,
    log: Callable[[str], None] | None = None,
    max_cases: int | None = None,
) -> ReportResult:
    """Run every case of ``spec`` (a TOML file) and write the report folder ``out``.

    ``index.html`` holds one row per case; ``cases/CASE/`` its page, plots and CSVs.
    Finished cases of an interrupted run of the same spec are kept, not redone. With
    ``scheduler`` (a Dask address) the cases run on that cluster, else with joblib here
    (``n_jobs``, default every core). A spec of more than ``max_cases`` cases (default
    :data:`MAX_CASES`) is refused with an estimate of its run time. ``overwrite``
    replaces only a report this package wrote (its marker file is there), and removes
    only the files it wrote.

    Parameters
    ----------
    spec : str, Path or FleetSpec
        The TOML spec (devices, workloads, batch sizes, caps; examples/fleet.toml).
    out : str or Path
        The report folder.
    overwrite : bool
        Replace a finished report this package wrote.
    scheduler : str, optional
        A Dask scheduler address (``tcp://HOST:8786``) to run the cases on.
    n_jobs : int, optional
        Cases run at once here (joblib); default every core.
    log : callable, optional
        Told one line per case as it starts and ends.
    max_cases : int, optional
        The most cases a spec may have without this being raised.

    Returns
    -------
    ReportResult
        The folder, its index page, the cases computed now and those reused, and the
        files written.
    """
    spec = load_spec(spec)
    if scheduler:
        check_address(scheduler)  # before the folder is touched
    out = Path(out)
    say = log or (lambda msg: None)
    check_size(spec, max_cases, n_jobs)
    with _exclusive(out):
        return _report(spec, out, overwrite, scheduler, n_jobs, say)


def _report(
    spec: FleetSpec,
    out: Path,
    overwrite: bool,
    scheduler: str | None,
    n_jobs: int | None,
    say: Callable[[str], None],
) -> ReportResult:
    _prepare_folder(out, spec, overwrite)
    cases = spec.cases()
    reused = [c.case_id for c in cases if is_done(out, c)]
    todo = _groups(c for c in cases if not is_done(out, c))
    if reused:
        say(f"resuming: {len(reused)} of {len(cases)} cases already done")
    runner = _run_dask(todo, scheduler) if scheduler else _run_local(todo, n_jobs)
    computed, files = [], []
    for results in runner:
        for result in results:
            files += write_case(out, result)
            computed.append(result.case.case_id)
            say(f"  [{len(reused) + len(computed)}/{len(cases)}] {result.case.case_id}")
    summaries = [json.loads((out / "cases" / c.case_id / "case.json").read_text()) for c in cases]
    index = out / "index.html"
    atomic_write(index, index_page(spec, summaries).encode())
    _write_state(out, spec, complete=True)
    return ReportResult(out, index, computed, reused, [index, out / STATE_FILE, *files])
