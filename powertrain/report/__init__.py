"""The fleet report: a TOML spec of devices x workloads x batch sizes x caps, run case by
case through :func:`powertrain.workflow.run_case`, written as an HTML folder.

- :mod:`~powertrain.report.spec`: the spec file, validated with the key and line named;
- :mod:`~powertrain.report.cases`: one case's samples (checked against its device),
  per-epoch costs and picks per objective;
- :mod:`~powertrain.report.pages`: the one page template, the index, number formatting;
- :mod:`~powertrain.report.figures`: the one Pareto plot;
- :mod:`~powertrain.report.folder`: :func:`report`, which writes (and resumes) a folder.

``powertrain.report(spec, out)`` calls :func:`report`: this package is callable, so the
short spelling of the public API and ``from powertrain.report import pages`` both work.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from .folder import ReportError, ReportResult, report
from .spec import FleetSpec, load_spec, parse_spec


class _CallablePackage(types.ModuleType):
    """``powertrain.report(...)`` runs :func:`report` (the package keeps its modules)."""

    def __call__(self, *args: Any, **kwargs: Any) -> ReportResult:
        return report(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage

__all__ = ["FleetSpec", "ReportError", "ReportResult", "load_spec", "parse_spec", "report"]
