"""What a benchmark's ``--json`` file holds: the tables the results page shows, not every draw.

A run records one row per draw, cap and configuration; kept whole, a few of these files
grew to megabytes each in a repository that only grows. So the file a benchmark writes
keeps each long list of records as its summary tables (``tools/results_page.compact``:
the same tables docs/results.md shows), and the records go to ``detail/NAME`` beside it,
which git ignores: ``--show`` and ``--merge`` read them from there.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from results_page import compact, is_summary  # noqa: E402


def detail_path(path: str | Path) -> Path:
    """Where the records of the results file ``path`` go: ``detail/`` beside it."""
    path = Path(path)
    return path.parent / "detail" / path.name


def write(path: str | Path, data: dict, keep: tuple[str, ...] = ()) -> Path:
    """Write ``data``'s summary to ``path`` and, where it left records out, all of
    ``data`` to :func:`detail_path` (lists named in ``keep`` stay whole in ``path``,
    for a reader that needs those records). Returns ``path``."""
    path = Path(path)
    small = compact(path.stem, data, keep)
    if any(is_summary(v) for v in small.values()):
        detail = detail_path(path)
        detail.parent.mkdir(parents=True, exist_ok=True)
        detail.write_text(json.dumps(data, indent=1, default=float))
    path.write_text(json.dumps(small, indent=1, default=float))
    return path


def data_args(doc: str, data: Path, argv: list[str] | None) -> tuple[argparse.Namespace, Path]:
    """A small benchmark's command line (``--data`` folder, default ``data``; ``--json``)
    and the folder as the results file shows it: relative to the checkout when inside."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--data", type=Path, default=data)
    ap.add_argument("--json", type=Path, default=None, help="also write the result here")
    args = ap.parse_args(argv)
    root = Path(__file__).resolve().parents[1]
    return args, args.data.relative_to(root) if args.data.is_relative_to(root) else args.data


def publish(result: dict, text: str, path: Path | None) -> None:
    """Print a small benchmark's table ``text``; with ``path``, also write ``result`` there
    whole (no records to leave out) and ``text`` to the ``.txt`` beside it."""
    print(text)
    if path is not None:
        path.write_text(json.dumps(result, indent=1) + "\n")
        path.with_suffix(".txt").write_text(text + "\n")


def load(path: str | Path) -> dict:
    """A saved run with its records: the detail file where ``path`` keeps summaries only.

    Raises SystemExit naming the detail file when it is missing (the committed results
    keep summaries; a full run of the benchmark writes the records)."""
    path = Path(path)
    data = json.loads(path.read_text())
    if not any(is_summary(v) for v in data.values()):
        return data
    detail = detail_path(path)
    if not detail.exists():
        raise SystemExit(
            f"{path} keeps summary tables only; its per-draw records would be in {detail}, "
            "which a run of the benchmark with --json writes"
        )
    return json.loads(detail.read_text())
