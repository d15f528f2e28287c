"""Fixtures for the inspection tests: the warm-started tiny model the GRPO runs train (built once)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def warm_model_dir(tmp_path_factory, tiny_model_dir) -> Path:
    """tests/diagnose/make_runs.py's warm start: the tiny model ends its completions."""
    import watch_runs

    return watch_runs.make_runs.warm_start(tiny_model_dir, tmp_path_factory.mktemp("warm") / "model")
