"""How long `finetune demo` takes, as a newcomer runs it: a fresh process, after install.

Runs `finetune demo -o <tmp> --reader checker` in a new interpreter (imports included: the digit task, then
the tool task into <tmp>/tools) and prints, side by side: wall time against the 3-minute target, the process's
CPU time, the machine's CPU count and load (other work on a shared box stretches wall time, not CPU time), each
task's own wall time and each phase's seconds from the demo's own records (demo.json, tools/demo.json). The
README's "Demo wall time on 2 cores" comes from here. ``--no-tools`` / ``--tools`` time one task alone.

    .venv/bin/python benchmarks/bench_demo.py [--runs N] [--no-tools | --tools]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 180.0


def one_run(task: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "demo"
        load_before = os.getloadavg()[0]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "finetune", "demo", "-o", str(out), "--reader", "checker",
                               *task],
                              capture_output=True, text=True)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"demo failed (exit {done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        records = [json.loads((d / "demo.json").read_text()) for d in (out, out / "tools")
                   if (d / "demo.json").is_file()]
        return {"wall": wall, "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
                "load": (load_before + os.getloadavg()[0]) / 2, "phases": [p for r in records for p in r["phases"]],
                "inner_wall": [r["facts"]["wall_seconds"] for r in records]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--no-tools", action="store_true", help="the digit task alone")
    which.add_argument("--tools", action="store_true", help="the tool task alone")
    args = parser.parse_args()
    task = ["--no-tools"] if args.no_tools else ["--tools"] if args.tools else []
    runs = [one_run(task) for _ in range(args.runs)]
    print(f"finetune demo {' '.join(task) or '(both tasks)'} on {os.cpu_count()} CPU(s); target ≤ {TARGET_S:.0f} s "
          "wall after install\n")
    print(f"{'run':>3}  {'wall s':>7}  {'target':>7}  {'ratio':>6}  {'CPU s':>6}  {'load avg':>8}  in-process s per task")
    for i, r in enumerate(runs, 1):
        print(f"{i:>3}  {r['wall']:7.1f}  {TARGET_S:7.0f}  {r['wall'] / TARGET_S:6.2f}  {r['cpu']:6.1f}  "
              f"{r['load']:8.2f}  {' + '.join(f'{s:.1f}' for s in r['inner_wall'])}")
    print("\nphase seconds (last run):")
    for p in runs[-1]["phases"]:
        print(f"  {p['seconds']:6.1f}  {p['status']:<17}  {p['name']}")
    worst = max(r["wall"] for r in runs)
    print(f"\n{'MEETS' if worst <= TARGET_S else 'MISSES'} the target: worst wall {worst:.1f} s vs {TARGET_S:.0f} s")


if __name__ == "__main__":
    main()
