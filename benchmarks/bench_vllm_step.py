"""Seconds per GRPO optimiser step: vLLM generation (colocate) vs transformers generation, side by side.

The same rendered run (the vLLM tier's head-size-32 tiny model, 1-GPU render, 8 prompts x 8 completions
of <= 16 tokens per step) trained twice on CPU: `config/train.py` with vLLM colocated (under the tier's
CPU shim, tests/vllm_cpu/cpu_shim) and `config/train.py --cpu` (TRL generating with transformers). Reads
TRL's per-step `step_time` from trainer_state.json; the first step (engine warm-up) is reported apart.
Needs the tier's environment:

    .venv-vllm/bin/python benchmarks/bench_vllm_step.py [--steps 4]

On a tiny model generation is a small share of a step, so this measures the cost of the vLLM path's
machinery on CPU (sync + engine calls), not the speed-up vLLM gives a real model on a GPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "vllm_cpu"), str(ROOT / "tests")]


def step_times(run: Path) -> list[float]:
    state = json.loads((run / "train" / "trainer_state.json").read_text())
    return [float(e["step_time"]) for e in state["log_history"] if "step_time" in e]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    from vllm_tier import build_vllm_tiny_model, render_run, run_train, tail

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        model = build_vllm_tiny_model(Path(tmp) / "model")
        for label, extra in (("vLLM colocate", []), ("transformers (--cpu)", ["--cpu"])):
            run = render_run(Path(tmp) / label.split()[0], model,
                             hardware={"profile": "h100-80gb", "gpus": 1, "nodes": 1})
            start = time.monotonic()
            res = run_train(run, "--max-steps", str(args.steps), *extra)
            wall = time.monotonic() - start
            if res.returncode != 0:
                print(tail(res))
                return 1
            times = step_times(run)
            rows.append((label, times[0], statistics.median(times[1:]) if len(times) > 1 else float("nan"), wall))
    print(f"{'generation':<22} {'first step s':>13} {'median later step s':>20} {'process wall s':>15}")
    for label, first, later, wall in rows:
        print(f"{label:<22} {first:>13.2f} {later:>20.2f} {wall:>15.1f}")
    print(f"ratio vLLM / transformers, median later step: {rows[0][2] / rows[1][2]:.2f}x; "
          f"process wall (start-up included): {rows[0][3] / rows[1][3]:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
