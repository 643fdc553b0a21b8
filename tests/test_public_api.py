"""The package root: every public name listed and reachable, torch loaded only on demand."""

from __future__ import annotations

import subprocess
import sys

import pytest

import powertrain as pt


def test_every_public_name_is_in_dir_and_reachable():
    names = dir(pt)
    assert "Predictor" in names  # a lazy name, served by the module __getattr__
    for name in pt.__all__:
        assert name in names, name
        assert getattr(pt, name) is not None, name


@pytest.mark.system
def test_importing_the_package_and_listing_it_leaves_torch_unloaded():
    script = (
        "import sys, powertrain as pt\n"
        "names = dir(pt)\n"
        "print('Predictor' in names, 'torch' in sys.modules)\n"
        "pt.Predictor\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "False", "True"]
