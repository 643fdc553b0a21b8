"""Suite-wide fixtures."""

from __future__ import annotations

import pytest

from powertrain.backends.nvml_state import STATE_DIR_ENV


@pytest.fixture(autouse=True)
def _own_nvml_state_dir(tmp_path, monkeypatch):
    """No test writes per-GPU state files into the user's home: each gets its own folder
    (child processes inherit it through the environment)."""
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "nvml-state"))
