"""The hostile-input families, counted and run: invocations per family and their outcomes.

    .venv/bin/python benchmarks/bench_hostile.py [--family 7]

Builds one complete run directory with the real commands, then runs every case of
tests/hostile/cases.py on a fresh damaged copy and prints, per family, how many invocations ran,
how many behaved (expected exit code, no traceback, one line, nothing written, no command executed)
and the first problem of any that did not. Exit 1 if any case misbehaved.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "hostile"))

from cases import build_base_run, cases, check, damaged_copy  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", help="only the families whose name starts with this (e.g. 7)")
    args = ap.parse_args()
    todo = [c for c in cases() if not args.family or c.family.startswith(args.family)]
    runs, ok, codes, problems = Counter(), Counter(), defaultdict(Counter), defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp:
        base = build_base_run(Path(tmp) / "base" / "run")
        start = time.perf_counter()
        for i, case in enumerate(todo):
            run, spec, side = damaged_copy(base, Path(tmp) / f"case{i}", case)
            problem = check(case, run, spec, side)
            runs[case.family] += 1
            codes[case.family]["any" if case.code is None else case.code] += 1
            if problem:
                problems[case.family].append(f"{case.id}: {problem.splitlines()[0][:160]}")
            else:
                ok[case.family] += 1
        elapsed = time.perf_counter() - start
    print(f"{'family':<24} {'invocations':>11} {'behaved':>8}  expected exit codes")
    for family in sorted(runs, key=lambda f: int(f.split("-")[0])):
        exits = ", ".join(f"{k}×{v}" for k, v in sorted(codes[family].items(), key=str))
        print(f"{family:<24} {runs[family]:>11} {ok[family]:>8}  {exits}")
        for p in problems[family][:3]:
            print(f"    ! {p}")
    total, good = sum(runs.values()), sum(ok.values())
    print(f"{'all':<24} {total:>11} {good:>8}  ({elapsed:.1f} s, {elapsed / max(total, 1) * 1000:.0f} ms per invocation)")
    print("families 5 (concurrent writers) and 10 (crash injection) run as tests/inspect/test_verdicts_locks.py and "
          "tests/test_commit.py + tests/hostile/test_hostile.py::test_family_10_*")
    return 0 if good == total else 1


if __name__ == "__main__":
    raise SystemExit(main())
