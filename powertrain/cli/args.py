"""Argument types shared by the command groups (argparse turns their errors into exit 2)."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """An integer >= 1, with a message that names the bad value."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be >= 1")
    return value


def int_list(text: str) -> list[int]:
    """Comma-separated positive integers, e.g. ``8,16,32`` (or one value)."""
    return [positive_int(t.strip()) for t in text.split(",") if t.strip()]
