"""Fixtures for the renderer's tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from render_fixtures import write_run


@pytest.fixture
def tiny_run(tmp_path, tiny_model_dir) -> Path:
    """spec.yaml for the tiny local model (1 × h100 target, small batch), in a fresh run directory."""
    return write_run(tmp_path / "run", str(tiny_model_dir))
