"""``slow`` marks what is slow: a test without the mark that costs more than ``slow_budget_seconds`` seconds
(pyproject.toml, default 5) fails, naming its cost and the fix (``@pytest.mark.slow``).

The cost of a test is the smaller of its CPU time and its wall time, over its call plus the setup of its
function-scoped fixtures (which run again for every test that uses them). CPU time counts this process (all its
threads) and the child processes it waited for (``finetune`` subprocesses, training children). Either measure
alone flakes: on a loaded machine wall time grows while the test waits for a core (CPU time does not), and on a
machine with many cores torch's worker threads add CPU time (wall time does not); the smaller of the two grows
with neither. The tests are marked with a margin: ``slow`` goes on every test whose cost reaches half the
budget on a loaded 2-core machine, so load never pushes an unmarked test over it.

Shared costs are charged to no test, since which test pays them depends on the order and the xdist worker:
session- and module-scoped fixtures, and the first import of the ML stack (torch alone is seconds of CPU) — a
test that imported one of :data:`HEAVY` for this process is logged but not judged. Tests marked ``browser`` or ``vllm`` run in their own tiers,
never in the fast loop (``make test-fast``), and are not checked.

``--cpu-log PATH`` appends one JSON line per test ({"nodeid", "cost_s", "cpu_s", "wall_s", "marked_slow"}) for finding the
tests worth marking (``pytest -m "not slow" --cpu-log /tmp/cpu.jsonl`` on a folder; sort by ``cost_s``).
Loaded from tests/conftest.py (``pytest_plugins``); ``-o slow_budget_seconds=0`` turns the check off (a
profiler or coverage run multiplies CPU time).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections.abc import Generator
from typing import Any

import pytest

_FIXTURE_COST = pytest.StashKey[tuple[float, float]]()  # (CPU, wall) seconds
_CALL_COST = pytest.StashKey[tuple[float, float]]()
_EXEMPT_MARKS = ("slow", "browser", "vllm")
_BEFORE = pytest.StashKey[frozenset[str]]()
HEAVY = ("torch", "transformers", "trl", "datasets", "peft", "accelerate", "scipy", "sympy", "math_verify",
         "matplotlib", "vllm", "playwright")
_depth = 0  # fixture setups nest when a fixture calls request.getfixturevalue: charge the outermost only


def cpu_seconds() -> float:
    """User + system CPU of this process (every thread) and of the children it has waited for."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("slow_budget_seconds", "seconds (min of CPU and wall) a test without @pytest.mark.slow may cost "
                  "(0: no check)",
                  default="5")
    parser.addoption("--cpu-log", default=None, metavar="PATH",
                     help="append each test's CPU seconds as a JSON line to PATH (finding tests to mark slow)")


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: Any, request: pytest.FixtureRequest) -> Generator[None, None, None]:
    global _depth
    start, wall, outermost = cpu_seconds(), time.perf_counter(), _depth == 0
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
    if outermost and fixturedef.scope == "function":
        stash = request.node.stash
        cpu, elapsed = stash.get(_FIXTURE_COST, (0.0, 0.0))
        stash[_FIXTURE_COST] = (cpu + cpu_seconds() - start, elapsed + time.perf_counter() - wall)


def _heavy_loaded() -> frozenset[str]:
    return frozenset(m for m in HEAVY if m in sys.modules)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    item.stash[_BEFORE] = _heavy_loaded()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    start, wall = cpu_seconds(), time.perf_counter()
    yield
    item.stash[_CALL_COST] = (cpu_seconds() - start, time.perf_counter() - wall)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    if call.when != "call" or _CALL_COST not in item.stash:
        return
    report: pytest.TestReport = outcome.get_result()
    (cpu, wall), (fixture_cpu, fixture_wall) = item.stash[_CALL_COST], item.stash.get(_FIXTURE_COST, (0.0, 0.0))
    cpu, wall = cpu + fixture_cpu, wall + fixture_wall
    cost = min(cpu, wall)
    first_imports = sorted(_heavy_loaded() - item.stash.get(_BEFORE, frozenset()))
    exempt = any(item.get_closest_marker(m) for m in _EXEMPT_MARKS)
    log = item.config.getoption("--cpu-log")
    if log:
        line = json.dumps({"nodeid": item.nodeid, "cost_s": round(cost, 3), "cpu_s": round(cpu, 3),
                           "wall_s": round(wall, 3),
                           "marked_slow": bool(item.get_closest_marker("slow")), "first_imports": first_imports})
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)  # one write: xdist workers share it
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)
    budget = float(item.config.getini("slow_budget_seconds"))
    if report.passed and not exempt and not first_imports and budget > 0 and cost > budget:
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} cost {cost:.1f} s ({cpu:.1f} s CPU, {wall:.1f} s wall; call + "
                           f"function-scoped fixtures), over the {budget:g} s an unmarked test may spend: mark it "
                           f"@pytest.mark.slow (the fast loop, make test-fast, skips it) or make it cheaper")
