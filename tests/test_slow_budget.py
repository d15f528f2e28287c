"""The `slow` marker check (tests/slow_budget.py): an unmarked test that burns CPU fails, naming the fix; one that
only waits, one that is marked, and a shared fixture's cost do not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

SUITE = '''
import time

import pytest


def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


@pytest.fixture(scope="session")
def shared():
    burn(0.4)  # built once and shared: not charged to the test that happens to build it first


@pytest.fixture
def per_test():
    burn(0.4)


def test_burns(): burn(0.4)
def test_burns_in_its_fixture(per_test): pass
def test_waits(): time.sleep(0.4)
def test_uses_the_shared_fixture(shared): pass
def test_cheap(): pass
def test_first_import_of_the_ml_stack(monkeypatch):  # a shared cost: logged, not judged
    import sys, types
    monkeypatch.setitem(sys.modules, "scipy", types.ModuleType("scipy"))
    burn(0.4)
@pytest.mark.slow
def test_burns_marked(): burn(0.4)
'''


def _run(tmp_path: Path, *options: str, suite: str = SUITE) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_suite.py").write_text(suite)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # no xdist / hypothesis / playwright: a lean child
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "slow_budget", "-p", "no:cacheprovider", "-q",
                           "-rf", "-o", "markers=slow: x", *options, "test_suite.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow  # runs an inner pytest whose tests burn CPU on purpose (2.4 s CPU)
def test_unmarked_cpu_burners_fail_and_waiting_or_marked_tests_pass(tmp_path):
    r = _run(tmp_path, "-o", "slow_budget_seconds=0.2", "--cpu-log", str(tmp_path / "cpu.jsonl"))
    failed = sorted(line.split("::")[1].split()[0] for line in r.stdout.splitlines() if line.startswith("FAILED"))
    assert failed == ["test_burns", "test_burns_in_its_fixture"], r.stdout
    assert "mark it @pytest.mark.slow" in r.stdout and "5 passed" in r.stdout, r.stdout
    logged = (tmp_path / "cpu.jsonl").read_text().splitlines()
    assert len(logged) == 7 and all('"cost_s"' in line for line in logged)


def test_a_zero_budget_turns_the_check_off(tmp_path):
    r = _run(tmp_path, "-o", "slow_budget_seconds=0", suite=SUITE.split("@pytest.fixture(")[0] + "def test_burns(): burn(0.4)\n")
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout
