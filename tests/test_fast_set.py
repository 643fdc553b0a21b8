"""`make test-fast` must keep checking the Tuner and the training callbacks.

Why: their test files were once marked slow as a whole, so the quick check ran none of
the Tuner's code; nothing but this test stops that from happening again.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).parent

#: the files that check the Tuner and the callbacks, and the fewest fast tests each keeps
GUARDED = {
    "test_tuner.py": 5,
    "test_tuner_background.py": 1,
    "test_integrations.py": 10,
    "test_integrations_profile.py": 2,
}


def test_the_fast_set_runs_the_tuner_and_the_callbacks():
    files = [str(TESTS / name) for name in GUARDED]
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        + ["-m", "not slow and not system", *files],
        capture_output=True,
        text=True,
        cwd=TESTS.parent,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    ids = [line for line in out.stdout.splitlines() if "::" in line]
    fast = Counter(Path(line.split("::")[0]).name for line in ids)
    short = {name: fast[name] for name, least in GUARDED.items() if fast[name] < least}
    assert not short, f"make test-fast keeps too few of these files' tests: {short}"
