"""mkdocs hook: Sphinx cross-reference roles (``:meth:`fit```) in docstrings render as
plain code. The package's docstrings use them for readers of the source; the site has
no Sphinx, so the role name would otherwise show as raw text before the code span."""

from __future__ import annotations

import re

#: a role, then its code span's dotted path up to the last name (as Sphinx shows ``~x.y``)
_ROLE = re.compile(r":(?:meth|func|class|attr|mod|data|exc|obj):<code>~?(?:[\w.]+\.)?")


def on_page_content(html: str, **_: object) -> str:
    """Drop the role prefix in front of each code span of a rendered page."""
    return _ROLE.sub("<code>", html)
