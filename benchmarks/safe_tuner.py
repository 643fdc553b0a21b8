"""The ``tuner-safe`` strategy of benchmarks/tuning_regret.py: :class:`pt.Tuner` with
``hard_cap=True``, exploring only inside a :class:`~powertrain.decisions.safe_set.SafeSet`.

This was a prototype wiring the safe set into the Tuner's private steps; it now lives in
the engine (:mod:`powertrain.decisions.hard_cap`), and the strategy is the Tuner's own
option. What the prototype's runs taught, kept there:

* the start is drawn from what is known safe without a model (presets within their
  budget, what the spec's physics says draws no more than they or than a configuration
  measured under the cap), spread over predicted times. The untransferred reference is
  not trusted there: a first version that was (its upper bound near the known set) ran
  5-18 % of some BERT-base runs over the cap before the first transfer;
* an unmeasured configuration outside the safe set gets no chance of fitting, and is
  never asked for;
* the step back: once a probe's last 3 power readings average over the cap, the
  configuration is marked unsafe and left at the next step, and what it showed joins
  the measurements, so the next transfer learns that its neighbours draw more too. (A
  first version that did not add it hit the cap 6 times a median BERT-base run.)

benchmarks/results/tuning_regret_hardcap.txt measures the engine's own (a 99 %
bound and expanders; docs/method-notes.md has the variants tried).
"""

from __future__ import annotations

from typing import Any

import powertrain as pt


class SafeTuner(pt.Tuner):
    """``pt.Tuner(..., hard_cap=True)``; :attr:`hits`: where the cap was hit."""

    def __init__(self, *args: Any, **kw: Any):
        super().__init__(*args, hard_cap=True, **kw)
