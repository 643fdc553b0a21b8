"""Progress bars that stay out of logs: shown on a terminal or a notebook, silent otherwise.

Why: a training or profiling run redirected to a file should not fill it with carriage
returns, and a notebook without ipywidgets should not print ``TqdmWarning: IProgress not
found``. ``show=None`` decides from where the bar would go; True/False force it.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any


def _in_notebook() -> bool:
    """True inside a Jupyter kernel (an IPython shell other than the terminal one)."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def _bar_class():
    """tqdm's notebook widget where a notebook can show it, else the plain text bar."""
    if _in_notebook() and importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.notebook import tqdm
    else:
        from tqdm import tqdm
    return tqdm


def should_show(show: bool | None, stream=None) -> bool:
    """``show`` when given; else True on a terminal or in a notebook, False otherwise."""
    if show is not None:
        return bool(show)
    if _in_notebook():
        return True
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def progress_bar(iterable: Any = None, *, show: bool | None = None, **kwargs: Any):
    """A tqdm bar (``tqdm(iterable, **kwargs)``), disabled where nobody would see it."""
    return _bar_class()(iterable, disable=not should_show(show, kwargs.get("file")), **kwargs)
