"""A complete run directory (spec, data, rewards.py, samples, scored, report, verdicts, acks,
confirmation), built once per session by the real commands; each case damages a copy."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "inspect"))


@pytest.fixture(scope="session")
def base_run(tmp_path_factory) -> Path:
    from cases import build_base_run

    return build_base_run(tmp_path_factory.mktemp("hostile-base") / "run")


@pytest.fixture
def damaged(base_run, tmp_path):
    """damaged(case) -> (run dir copy, spec path, folder for side files), with the case's damage applied."""
    from cases import damaged_copy

    return lambda case: damaged_copy(base_run, tmp_path / "side", case)
