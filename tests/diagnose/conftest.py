"""Session fixtures for the diagnosis tests: real short GRPO runs of the tiny model on CPU.

The runs are trained once per test session by ``make_runs.py`` (which also ships as a script). Set
DIAGNOSE_SEED to train them with another seed (the classification must not depend on one seed), or
DIAGNOSE_RUNS_DIR to a folder written by ``python tests/diagnose/make_runs.py DIR --seed N`` (its
``seedN/`` subfolder) to reuse runs trained by the script instead of training them again.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import make_runs
import pytest


@pytest.fixture(scope="session")
def diagnose_seed() -> int:
    return int(os.environ.get("DIAGNOSE_SEED", "0"))


@pytest.fixture(scope="session")
def grpo_runs(tmp_path_factory, tiny_model_dir, tiny_moe_model_dir, diagnose_seed) -> dict[str, Path]:
    """{scenario: run directory} for collapse / length / healthy / moe, trained in this session."""
    prebuilt = os.environ.get("DIAGNOSE_RUNS_DIR")
    if prebuilt:
        root = Path(prebuilt) / f"seed{diagnose_seed}"
        runs = {s: root / s for s in make_runs.SCENARIOS}
        missing = [s for s, p in runs.items() if not (p / "train" / "trainer_state.json").is_file()]
        if missing:
            pytest.fail(f"DIAGNOSE_RUNS_DIR={prebuilt}: no trained {missing} under {root} "
                        f"(run: python tests/diagnose/make_runs.py {prebuilt} --seed {diagnose_seed})")
        return runs
    out = tmp_path_factory.mktemp("grpo-runs")
    t0 = time.perf_counter()
    runs = make_runs.make_runs(out, make_runs.SCENARIOS, seed=diagnose_seed, raw_model=tiny_model_dir,
                               moe_model=tiny_moe_model_dir)
    print(f"\n[diagnose] trained {len(runs)} GRPO runs (seed {diagnose_seed}) in {time.perf_counter() - t0:.1f}s")
    return runs


@pytest.fixture
def run_copy(tmp_path, grpo_runs):
    """A private copy of one scenario's run directory (tests that write into it must not share)."""

    def copy(scenario: str) -> Path:
        dst = tmp_path / scenario
        shutil.copytree(grpo_runs[scenario], dst)
        return dst

    return copy
