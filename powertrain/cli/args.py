"""Argument types shared by the command groups (argparse turns their errors into exit 2)."""

from __future__ import annotations

import argparse
import inspect
from typing import Any, Callable


def positive_int(text: str) -> int:
    """An integer >= 1, with a message that names the bad value."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be >= 1")
    return value


def nonnegative_int(text: str) -> int:
    """An integer >= 0 (a random seed), with a message that names the bad value."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} must be >= 0")
    return value


def job_count(text: str) -> int:
    """joblib's ``n_jobs``: a count >= 1, or -1 for every core (-2: all but one, ...)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value == 0:
        raise argparse.ArgumentTypeError(
            "0 jobs cannot run anything: give >= 1, or -1 for all cores"
        )
    return value


def int_list(text: str) -> list[int]:
    """Comma-separated positive integers, e.g. ``8,16,32`` (or one value)."""
    return [positive_int(t.strip()) for t in text.split(",") if t.strip()]


class IntListAction(argparse.Action):
    """Positive integers given as ``16,32``, ``16 32`` or a mix: one syntax for every
    option that takes several batch sizes (or counts)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        kwargs.setdefault("nargs", "+")
        kwargs.setdefault("metavar", "N")
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        out: list[int] = []
        for text in values if isinstance(values, list) else [values]:
            try:
                out += int_list(text)
            except argparse.ArgumentTypeError as e:
                parser.error(f"argument {option_string}: {e}")
        if not out:
            parser.error(f"argument {option_string}: give at least one positive integer")
        setattr(namespace, self.dest, out)


def given(args: argparse.Namespace, **names: str) -> dict[str, Any]:
    """The options the user set, as keyword arguments of a library call:
    ``given(args, n_minibatches="minibatches")`` is ``{"n_minibatches": args.minibatches}``
    when ``--minibatches`` was given, else ``{}``, so the library's default applies and
    is written down once, in the library."""
    values = {kw: getattr(args, dest) for kw, dest in names.items()}
    return {kw: v for kw, v in values.items() if v is not None}


def default_of(func: Callable[..., Any], name: str) -> Any:
    """The library default of ``func``'s parameter ``name`` (for help texts)."""
    return inspect.signature(func).parameters[name].default
