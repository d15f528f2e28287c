"""Sandbox cost and parallel speed-up, measured side by side in one run.

1. Per-execution overhead: the caller-visible latency of one sandboxed execution of a trivial program
   (``pool.run``: zygote fork, fresh namespaces, uid switch, limits, tmpfs, teardown, verdict) against
   spawning a bare ``python3 -I -c pass`` (same interpreter). Target: ratio ≤ 1.3.
2. A code-running tool's call: ``run_python("print(6 * 7)")`` (the shared tool pool, output returned as the
   tool's text) against ``python3 -I -c "print(6 * 7)"`` with its stdout captured. Target: ratio <= 1.3.
3. Throughput: a batch of CPU-bound executions with N workers (default: CPU count) against 1 worker.
   Target on a 2-core machine: ≥ 1.7×.

    /work/venv/bin/python benchmarks/bench_sandbox.py [--runs 40] [--jobs 24] [--workers N]

Other processes on the machine share the cores; medians are used for latencies, and a run is repeated
``--rounds`` times for throughput (best round reported, all rounds printed).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from finetune.sandbox.runner import (
    ISOLATION_LEVELS,
    CallJob,
    CallTest,
    SandboxPool,
    StdioJob,
    StdioTest,
    run_python,
    tool_pool,
)

TRIVIAL = StdioJob("pass", [StdioTest("", "")])
# ~80 ms of pure-Python CPU work per execution: long enough that scheduling dominates nothing.
CPU_BOUND = CallJob("def work(n):\n    return sum(i * i % 7 for i in range(n))\n", "work",
                    [CallTest([600_000], sum(i * i % 7 for i in range(600_000)))])


# Sleep-bound: shows the pool's concurrency itself, whatever else competes for the cores.
SLEEP_BOUND = StdioJob("import time\ntime.sleep(0.2)\nprint('ok')", [StdioTest("", "ok\n")])


def bare_spawn_s(runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-I", "-c", "pass"], check=True)
        times.append(time.perf_counter() - started)
    return times


def sandbox_exec_s(pool: SandboxPool, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        result = pool.run(TRIVIAL)
        times.append(time.perf_counter() - started)
        assert result.passed, result
    return times


def tool_call_s(runs: int) -> tuple[list[float], list[float]]:
    """(bare captured spawns, run_python calls), interleaved so load from other processes hits both alike."""
    bare, tool = [], []
    for _ in range(runs):
        started = time.perf_counter()
        out = subprocess.run([sys.executable, "-I", "-c", "print(6 * 7)"], capture_output=True, text=True)
        bare.append(time.perf_counter() - started)
        started = time.perf_counter()
        text = run_python("print(6 * 7)")
        tool.append(time.perf_counter() - started)
        assert text == out.stdout == "42\n", text
    return bare, tool


def batch_s(pool: SandboxPool, jobs: int, job=CPU_BOUND) -> float:
    started = time.perf_counter()
    results = pool.run_batch([job] * jobs)
    elapsed = time.perf_counter() - started
    assert all(r.passed for r in results), [r for r in results if not r.passed][:1]
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()

    with SandboxPool(workers=1, timeout_s=20, min_isolation="process") as one, \
            SandboxPool(workers=args.workers, timeout_s=20, min_isolation="process") as many:
        print(one.isolation.describe())
        sandbox_exec_s(one, 5)  # warm-up: page cache, zygote first fork
        bare_spawn_s(5)
        # Interleave the two measurements so load from other processes hits both alike.
        bare, boxed = [], []
        for _ in range(args.runs // 5):
            bare += bare_spawn_s(5)
            boxed += sandbox_exec_s(one, 5)
        bare_ms, boxed_ms = statistics.median(bare) * 1000, statistics.median(boxed) * 1000
        ratio = boxed_ms / bare_ms

        one_rounds, many_rounds = [], []
        for _ in range(args.rounds):
            one_rounds.append(batch_s(one, args.jobs))
            many_rounds.append(batch_s(many, args.jobs))
        speedup = min(one_rounds) / min(many_rounds)
        sleep_one, sleep_many = batch_s(one, 12, SLEEP_BOUND), batch_s(many, 12, SLEEP_BOUND)
        granted = one.isolation
    tool_pool(min_isolation="process")  # the best level the host grants, as the pools above
    tool_call_s(3)
    tool_bare, tool_boxed = (statistics.median(t) * 1000 for t in tool_call_s(args.runs))
    # What each isolation layer costs (the overhead above is at the best level the host grants).
    per_level = {}
    for level in ISOLATION_LEVELS:
        if granted.at_least(level):
            with SandboxPool(workers=1, timeout_s=20, min_isolation="process", isolation=level) as pool:
                sandbox_exec_s(pool, 3)
                per_level[level] = statistics.median(sandbox_exec_s(pool, args.runs)) * 1000
    load = os.getloadavg()[0]

    print(f"\n{'measure':<44}{'value':>12}{'target':>10}{'met':>6}")
    print(f"{'bare `python -I -c pass` spawn (median)':<44}{bare_ms:>10.1f}ms")
    print(f"{'sandboxed trivial execution (median)':<44}{boxed_ms:>10.1f}ms")
    print(f"{'overhead ratio sandbox / bare spawn':<44}{ratio:>11.2f}x{'<= 1.3':>10}{'yes' if ratio <= 1.3 else 'NO':>6}")
    print(f"{'bare `python -I -c print(6 * 7)`, captured':<44}{tool_bare:>10.1f}ms")
    print(f"{'run_python tool call (median)':<44}{tool_boxed:>10.1f}ms")
    tool_ratio = tool_boxed / tool_bare
    print(f"{'tool call ratio run_python / bare spawn':<44}{tool_ratio:>11.2f}x{'<= 1.3':>10}"
          f"{'yes' if tool_ratio <= 1.3 else 'NO':>6}")
    print(f"{f'{args.jobs} CPU-bound jobs, 1 worker (best of {args.rounds})':<44}{min(one_rounds):>11.2f}s"
          f"   rounds: {', '.join(f'{t:.2f}' for t in one_rounds)}")
    print(f"{f'{args.jobs} CPU-bound jobs, {args.workers} workers (best of {args.rounds})':<44}"
          f"{min(many_rounds):>11.2f}s   rounds: {', '.join(f'{t:.2f}' for t in many_rounds)}")
    print(f"{f'throughput {args.workers} workers / 1 worker':<44}{speedup:>11.2f}x{'>= 1.7':>10}"
          f"{'yes' if speedup >= 1.7 else 'NO':>6}")
    print(f"{f'12 sleep-bound jobs: 1 / {args.workers} workers':<44}{sleep_one:>7.2f}s / {sleep_many:.2f}s"
          f"   concurrency {sleep_one / sleep_many:.2f}x (ideal {args.workers})")
    for level, ms in per_level.items():
        print(f"{f'  trivial execution at level {level!r}':<44}{ms:>10.1f}ms   {ms / bare_ms:.2f}x bare spawn")
    print(f"\n1-minute load average during the run: {load:.1f} on {os.cpu_count()} cores "
          f"(other processes compete for the cores the CPU-bound throughput needs)")


if __name__ == "__main__":
    main()
