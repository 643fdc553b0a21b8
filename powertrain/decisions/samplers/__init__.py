"""The strategies a study may use to choose what to measure, one file each.

A new strategy is one file here, a subclass of :class:`~.base.Sampler` (``assess``:
where the study stands under each cap; ``choose``: what to measure next; optionally
``start``), and one line in :data:`SAMPLERS`. Every driver (``decide``'s ``method``, the
Tuner's, the benchmarks) finds it by its name; the stop rule, the candidates, the cost,
the measurements and the picks are the study's and need nothing from it.
"""

from __future__ import annotations

from ...errors import DataError
from .base import Sampler
from .contest import ContestSampler
from .random import RandomSampler
from .table import TableSampler

#: the registry: name (decide's ``method``) -> sampler class
SAMPLERS: dict[str, type[Sampler]] = {
    "table": TableSampler,
    "contest": ContestSampler,
    "random": RandomSampler,
}


def make_sampler(method: str) -> Sampler:
    """The sampler registered as ``method``, else an error naming the choices."""
    if not isinstance(method, str) or method not in SAMPLERS:
        raise DataError(f"method must be one of {', '.join(SAMPLERS)}, got {method!r}")
    return SAMPLERS[method]()


__all__ = ["SAMPLERS", "Sampler", "make_sampler"]
