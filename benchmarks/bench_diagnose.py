"""How long the diagnosis suite's real GRPO runs take to train, and how long `finetune diagnose` takes.

Trains the four scenarios of tests/diagnose/make_runs.py (collapse, length, healthy, moe) on CPU and
prints, per scenario and in total: wall seconds, this process's CPU seconds, steps per second, and
the machine's load (a shared box stretches wall time, not CPU time), against the suite's target of
60 s of training; then the wall time of `finetune diagnose` on each run and its verdict.

    /work/venv/bin/python benchmarks/bench_diagnose.py [--seed N]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "diagnose"))
TARGET_TRAIN_S = 60.0


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import make_runs  # noqa: E402  (tests/diagnose on sys.path)

    from finetune.cli import main as cli
    from finetune.tinymodel import build_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        raw = build_tiny_model(out / "raw", seed=args.seed)
        moe = build_tiny_model(out / "moe", moe=True, seed=args.seed)
        rows = []
        for scenario in make_runs.SCENARIOS:
            load = os.getloadavg()[0]
            t0, c0 = time.perf_counter(), _cpu()
            run = make_runs.make_runs(out / "runs", [scenario], seed=args.seed, raw_model=raw, moe_model=moe)[scenario]
            wall, cpu = time.perf_counter() - t0, _cpu() - c0
            steps = sum(1 for e in json.loads((run / "train" / "trainer_state.json").read_text())["log_history"]
                        if "loss" in e)
            t1 = time.perf_counter()
            cli(["diagnose", str(run)])
            diag_s = time.perf_counter() - t1
            verdict = json.loads((run / "diagnosis" / "diagnosis.json").read_text())
            rows.append((scenario, steps, wall, cpu, load, diag_s, verdict["verdict"],
                         verdict["recommended_variant"]))
    print(f"\n{'scenario':<10}{'steps':>6}{'train s':>9}{'cpu s':>8}{'steps/s':>9}{'load':>6}{'diagnose s':>11}"
          f"  verdict -> variant")
    for scenario, steps, wall, cpu, load, diag_s, verdict, variant in rows:
        print(f"{scenario:<10}{steps:>6}{wall:>9.1f}{cpu:>8.1f}{steps / wall:>9.2f}{load:>6.1f}{diag_s:>11.2f}"
              f"  {verdict} -> {variant}")
    total = sum(r[2] for r in rows)
    print(f"{'total':<10}{sum(r[1] for r in rows):>6}{total:>9.1f}{sum(r[3] for r in rows):>8.1f}"
          f"   target {TARGET_TRAIN_S:.0f} s of training: {'met' if total <= TARGET_TRAIN_S else 'MISSED'} "
          f"on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
