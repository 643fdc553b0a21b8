"""Argument types and options shared by the command groups (argparse turns their errors
into exit 2). Nothing here imports more than the standard library: the parser must be
built, and a bad argument refused, before pandas or torch are loaded."""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path
from typing import Any


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def positive_int(text: str) -> int:
    """An integer >= 1, with a message that names the bad value."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be >= 1")
    return value


def nonnegative_int(text: str) -> int:
    """An integer >= 0 (a random seed, a worker count), with a message naming the bad value."""
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} must be >= 0")
    return value


def job_count(text: str) -> int:
    """joblib's ``n_jobs``: a count >= 1, or -1 for every core (-2: all but one, ...)."""
    value = _integer(text)
    if value == 0:
        raise argparse.ArgumentTypeError(
            "0 jobs cannot run anything: give >= 1, or -1 for all cores"
        )
    return value


def int_list(text: str, item=positive_int) -> list[int]:
    """Comma-separated integers, e.g. ``8,16,32`` (or one value)."""
    return [item(t.strip()) for t in text.split(",") if t.strip()]


class IntListAction(argparse.Action):
    """Integers given as ``16,32``, ``16 32`` or a mix: one syntax for every option that
    takes several values (batch sizes, threads, workers, power limits, seeds).

    The option reads one comma list; :class:`Parser` first joins ``-b 16 32`` into
    ``-b 16,32``, stopping at the first argument that is not a number, so a CSV named
    after the list (``-b 16 32 modes.csv``) stays the positional argument it is.
    ``item`` checks each value (default: integers >= 1).
    """

    #: every option string that takes a list, across all commands (for Parser)
    option_strings_seen: set[str] = set()

    def __init__(self, option_strings, dest, item=positive_int, **kwargs):
        kwargs.setdefault("metavar", "N[,N...]")
        self.item = item
        IntListAction.option_strings_seen.update(option_strings)
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        try:
            out = int_list(values, self.item)
        except argparse.ArgumentTypeError as e:
            parser.error(f"argument {option_string}: {e}")
        if not out:
            parser.error(f"argument {option_string}: give at least one value")
        setattr(namespace, self.dest, out)


def given(args: argparse.Namespace, **names: str) -> dict[str, Any]:
    """The options the user set, as keyword arguments of a library call:
    ``given(args, n_minibatches="minibatches")`` is ``{"n_minibatches": args.minibatches}``
    when ``--minibatches`` was given, else ``{}``, so the library's default applies and
    is written down once, in the library."""
    values = {kw: getattr(args, dest) for kw, dest in names.items()}
    return {kw: v for kw, v in values.items() if v is not None}


def default_of(target: str, name: str) -> Any:
    """The library default of parameter ``name`` of ``target``
    (``"powertrain.module:function"``, or ``:Class`` for its ``__init__``), for help texts.

    Read from the source with :mod:`ast`, not imported: the parser is built, and a bad
    argument refused, before pandas or torch load. A default that is not a literal is
    given as its source text."""
    module, _, qualname = target.partition(":")
    root = Path(__file__).resolve().parents[1]  # the powertrain package folder
    path = root.joinpath(*module.split(".")[1:])
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    node: Any = ast.parse(path.read_text())
    for part in qualname.split("."):
        node = next(
            n
            for n in node.body
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part
        )
    if isinstance(node, ast.ClassDef):
        node = next(n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    a = node.args
    positional = [*a.posonlyargs, *a.args]
    pairs = list(zip(positional[len(positional) - len(a.defaults) :], a.defaults))
    pairs += [(arg, d) for arg, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
    default = next(d for arg, d in pairs if arg.arg == name)
    try:
        return ast.literal_eval(default)
    except ValueError:
        return ast.unparse(default)


def _is_number_list(text: str) -> bool:
    parts = [t.strip() for t in text.split(",")]
    return bool(text) and all(p.lstrip("-").isdigit() for p in parts if p) and any(parts)


def join_list_values(argv: list[str]) -> list[str]:
    """``[-b, 16, 32, x.csv]`` -> ``[-b, 16,32, x.csv]`` for every list option."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        out.append(argv[i])
        if argv[i] == "--":
            out += argv[i + 1 :]
            break
        if argv[i] in IntListAction.option_strings_seen:
            values = []
            while i + 1 < len(argv) and _is_number_list(argv[i + 1]):
                values.append(argv[i + 1].strip(","))
                i += 1
            if values:
                out.append(",".join(values))
        i += 1
    return out


class Parser(argparse.ArgumentParser):
    """argparse with list options written either way (``16,32`` or ``16 32``)."""

    def parse_known_args(self, args=None, namespace=None):
        args = sys.argv[1:] if args is None else list(args)
        return super().parse_known_args(join_list_values(args), namespace)


#: -q/-v on every command: what they mean is the same everywhere
QUIET_VERBOSE = argparse.ArgumentParser(add_help=False)
QUIET_VERBOSE.add_argument(
    "-q",
    "--quiet",
    action="store_true",
    help="no progress bars or status lines: results, warnings, errors and the closing line "
    "naming what was written",
)
QUIET_VERBOSE.add_argument(
    "-v",
    "--verbose",
    action="store_true",
    help="more detail: progress bars also when stderr is not a terminal, and the full "
    "traceback of an error",
)


def command(sub: argparse._SubParsersAction, name: str, **kwargs) -> argparse.ArgumentParser:
    """A sub-command parser with the options every command shares (-q, -v)."""
    return sub.add_parser(name, parents=[QUIET_VERBOSE], **kwargs)


def progress_flag(args: argparse.Namespace) -> bool | None:
    """-q: no bar; -v (or --progress): a bar; neither: a bar only on a terminal."""
    if getattr(args, "quiet", False):
        return False
    if getattr(args, "verbose", False) or getattr(args, "progress", False):
        return True
    return None


def say(args: argparse.Namespace, message: str) -> None:
    """A status line on stderr (stdout is for results), unless -q."""
    if not getattr(args, "quiet", False):
        print(message, file=sys.stderr, flush=True)


def done(message: str) -> None:
    """The closing line naming what a command wrote: on stderr, also with -q."""
    print(message, file=sys.stderr, flush=True)
