"""``powertrain examples``: what ships with the package, and a copy of the examples.

Why: after ``pip install powertrain`` a newcomer has no checkout: this names the corpora
(usable as ``powertrain fit ID``), the reference models (``transfer -r NAME``), and copies
the fleet spec and the notebooks to a folder of their choice.
"""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path

from ..errors import DataError
from ..utils.files import atomic_write, inside
from .args import command, done

#: package -> the shipped files of the repository's examples/ (report and device specs)
#: and notebooks/ (pyproject.toml's package-data ships the same patterns)
SHIPPED = {
    "powertrain._examples": ("*.toml", "*.json"),
    "powertrain._notebooks": ("*.ipynb",),
}


def shipped_examples() -> list[Path]:
    """The example specs and notebooks inside the installed package."""
    files: list[Path] = []
    for package, patterns in SHIPPED.items():
        for pattern in patterns:
            files += sorted(Path(str(resources.files(package))).glob(pattern))
    return files


def cmd_examples(args: argparse.Namespace) -> int:
    if args.out:
        out = Path(args.out)
        if out.exists() and not out.is_dir():
            raise DataError(f"--out {out}: exists and is not a folder")
        out.mkdir(parents=True, exist_ok=True)
        copied = []
        for src in shipped_examples():
            dst = out / src.name
            if dst.exists() and not args.overwrite:
                raise DataError(f"{dst}: exists; add --overwrite to replace it")
            # a rename replaces a symlink at dst; it never writes through it to elsewhere
            atomic_write(inside(out, dst), src.read_bytes())
            copied.append(dst.name)
        done(f"copied {', '.join(copied)} to {out}")
        return 0

    from ..data.corpora import corpus_names
    from ..data.real_data import real_corpus_names
    from ..predictor import pretrained_names

    print("corpora on the digital twin (powertrain fit ID, powertrain transfer ID):")
    print("  " + "\n  ".join(corpus_names()))
    print("real GPU traces, Zeus NSDI '23 (powertrain fit ID):")
    print("  " + "\n  ".join(real_corpus_names()))
    print("reference models (powertrain transfer SAMPLES -r NAME):")
    print("  " + "\n  ".join(pretrained_names()))
    print("example spec and notebooks (powertrain examples -o DIR copies them):")
    print("  " + "\n  ".join(p.name for p in shipped_examples()))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "examples",
        help="list the shipped corpora, reference models, example spec and notebooks; "
        "-o DIR copies the examples",
        description="List what ships with the package: the profiled corpora, the reference "
        "models, the example specs and the notebooks. With -o DIR, copy the notebooks and "
        "specs there to edit and run.",
    )
    p.add_argument(
        "-o",
        "--out",
        help="copy the fleet spec, the example device spec and the notebooks into this folder",
    )
    p.add_argument("--overwrite", action="store_true", help="replace files already in --out")
    p.set_defaults(func=cmd_examples)
