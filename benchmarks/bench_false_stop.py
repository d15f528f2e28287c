"""False stops and true stops of train.py's inspection callback, side by side in one run.

Trains, through the rendered config/launch.sh on CPU (tests/watch/watch_runs.py), the healthy fixture
(a format reward and a dense correctness reward, 80 steps) over N seeds and the hacking fixture (a
correctness reward the tiny model never earns plus a shaping reward paying per character, 30 steps)
over the same seeds, and prints per seed whether the callback stopped each run, at which step, on
which rule and reward, and on how many of its inspections the divergence rule fired (a stop needs it
on two in a row); then the healthy runs' false-stop count and rate (target 0) beside the hacking runs'
stop rate and stop steps.

    .venv/bin/python benchmarks/bench_false_stop.py [--seeds 8] [--first-seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "watch"))


def _one(scenario: str, out: Path, warm: Path, seed: int) -> dict[str, Any]:
    import watch_runs

    t0 = time.perf_counter()
    run = watch_runs.write_inspected_run(out / f"{scenario}-{seed}", warm, scenario, seed=seed)
    res = watch_runs.launch(run, timeout=1800)
    if res.returncode not in (0, 3):
        raise SystemExit(f"{scenario} seed {seed}: launch.sh exited {res.returncode}\n{res.stderr[-3000:]}")
    o = watch_runs.outcome(run)
    why = o["stopped"] or {}
    index = [json.loads(x) for x in (run / "train" / "inspections" / "index.jsonl").read_text().splitlines()]
    # inspections on which the divergence rule fired (a stop needs it on CONFIRM in a row): the margin
    fired = sum(i["metrics"].get("inspection/divergence") == 1.0 for i in index)
    return {"scenario": scenario, "seed": seed, "rc": res.returncode, "stopped": bool(o["stopped"]),
            "step": o["global_step"], "max_steps": o["max_steps"], "rule": why.get("rule", "-"),
            "reward": why.get("reward") or "-", "wall_s": time.perf_counter() - t0, "inspections": len(index),
            "fired": fired}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--first-seed", type=int, default=0)
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import watch_runs

    from finetune.tinymodel import build_tiny_model

    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        raw = build_tiny_model(out / "raw", seed=0)
        warm = watch_runs.make_runs.warm_start(raw, out / "warm", seed=0)
        rows = []
        for seed in seeds:
            for scenario in ("healthy", "length"):
                rows.append(_one(scenario, out, warm, seed))
                r = rows[-1]
                print(f"  {r['scenario']:<8} seed {seed}: {'STOPPED' if r['stopped'] else 'ran'} "
                      f"{r['step']}/{r['max_steps']} ({r['rule']}, {r['reward']}) rc {r['rc']} in {r['wall_s']:.0f}s",
                      flush=True)
    healthy = [r for r in rows if r["scenario"] == "healthy"]
    hacks = [r for r in rows if r["scenario"] == "length"]
    print(f"\n{'seed':>4}  {'healthy (80 steps)':<28}{'fired':>7}  {'hacking (30 steps)':<46}{'fired':>7}")
    for h, k in zip(healthy, hacks):
        left = f"STOPPED at {h['step']} ({h['rule']})" if h["stopped"] else f"ran to {h['step']}"
        right = f"stopped at {k['step']} ({k['rule']}, {k['reward']})" if k["stopped"] else f"NOT stopped ({k['step']})"
        print(f"{h['seed']:>4}  {left:<28}{h['fired']:>3}/{h['inspections']:<3}  {right:<46}{k['fired']:>3}/"
              f"{k['inspections']:<3}")
    false_stops = sum(r["stopped"] for r in healthy)
    caught = [r for r in hacks if r["stopped"]]
    steps = [r["step"] for r in caught]
    print(f"\nhealthy: false stops {false_stops}/{len(healthy)} = {false_stops / len(healthy):.0%} (target 0); "
          f"the divergence rule fired (unconfirmed) on {sum(r['fired'] for r in healthy)} of "
          f"{sum(r['inspections'] for r in healthy)} inspections")
    print(f"hacking: stopped {len(caught)}/{len(hacks)} = {len(caught) / len(hacks):.0%}; stop step "
          + (f"median {statistics.median(steps):g}, range {min(steps)}-{max(steps)} of 30 (the earliest a "
             f"confirmed stop can come with every_steps 5: {watch_runs.earliest_stop()}); "
             f"naming {sorted({r['reward'] for r in caught})}" if steps else "-"))
    print(f"wall: healthy {statistics.mean(r['wall_s'] for r in healthy):.0f}s, hacking "
          f"{statistics.mean(r['wall_s'] for r in hacks):.0f}s per run (mean)")
    return 0 if false_stops == 0 and len(caught) == len(hacks) else 1


if __name__ == "__main__":
    sys.exit(main())
