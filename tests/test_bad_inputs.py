"""Every bad input of ``tools/bad_inputs.py`` ends in a clear error (or a correct result).

Why: the battery counts wrong and unclear outcomes for a report; this keeps the count at
zero. Each case names what its one-line error must mention (file, key, argument).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

import bad_inputs  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("case", bad_inputs.CASES, ids=lambda c: c.name)
def test_bad_input_gets_a_clear_answer(case, tmp_path):
    if case.needs_mount and not bad_inputs.can_mount():
        pytest.skip("needs root to mount a full or read-only tmpfs")
    out = case.run(tmp_path)
    verdict = bad_inputs.classify(case, out)
    assert verdict == "clear", f"{verdict}: {out.error.strip()[-800:]}"
