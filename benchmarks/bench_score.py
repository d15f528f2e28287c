"""Time to score 100 samples with the rendered rewards: format + exact-match vs format + math-verify.

Prints, side by side, the time of one scoring pass over 100 samples (what the gate adds per reward
call) and of a whole `finetune inspect score` (two passes for the determinism check, the hack
probes and the report). Run: `python benchmarks/bench_score.py [--repeat N]`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

SPEC = """\
name: bench-score
model: ./model
dataset: {{path: data.jsonl, prompt_column: prompt, answer_column: answer}}
rewards:
  - {{name: format_ok, type: format, pattern: answer_tag, weight: 0.2}}
  - {{name: correctness, type: {kind}, answer_column: answer, extract: answer_tag, weight: 1.0}}
inspection: {{prompts: 25, per_prompt: 4, min_read: 50, probe_prompts: 4}}
"""


def samples(n: int = 100, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        value = a + b if rng.random() < 0.5 else a + b + rng.randint(1, 9)
        reasoning = " ".join(["Adding the tens and then the units."] * rng.randint(1, 8))
        text = f"{reasoning}\n<answer>{value}</answer>" if rng.random() < 0.8 else f"{reasoning} It is {value}."
        rows.append({"id": f"p{i // 4:04d}-s{i % 4:02d}", "row": i // 4,
                     "prompt": f"What is {a} plus {b}?", "completion": text, "columns": {"answer": str(a + b)}})
    return rows


def bench(kind: str, repeat: int) -> dict[str, float]:
    from finetune.cli import main
    from finetune.inspect.rewardmod import load_rewards
    from finetune.inspect.samplesio import load_samples
    from finetune.inspect.score import score_run
    from finetune.spec import load_spec

    run = Path(tempfile.mkdtemp(prefix=f"bench-{kind}-"))
    (run / "spec.yaml").write_text(SPEC.format(kind=kind))
    (run / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in samples()))
    with contextlib.redirect_stdout(io.StringIO()):
        rendered = main(["rewards", "render", str(run / "spec.yaml")])
    if rendered != 0:
        raise SystemExit(f"could not render rewards for {kind}")
    spec = load_spec(run / "spec.yaml")
    rows = load_samples(run / "samples.jsonl")
    rm = load_rewards(run, [r.name for r in spec.rewards])
    for r in rm.rewards:  # warm-up: imports, worker pools
        rm.score(r, rows[:4])
    one_pass = []
    for _ in range(repeat):
        t = time.perf_counter()
        for r in rm.rewards:
            rm.score(r, rows)
        one_pass.append(time.perf_counter() - t)
    full = []
    for _ in range(repeat):
        t = time.perf_counter()
        score_run(run, spec)
        full.append(time.perf_counter() - t)
    return {"pass": statistics.median(one_pass), "full": statistics.median(full)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    results = {kind: bench(kind, args.repeat) for kind in ("exact_match", "math")}
    em, mv = results["exact_match"], results["math"]
    print(f"{'scoring 100 samples, median of ' + str(args.repeat):40}{'format+exact_match':>17}{'format+math-verify':>21}   ratio")
    print(f"one pass of every reward                {em['pass'] * 1e3:14.1f} ms {mv['pass'] * 1e3:17.1f} ms"
          f"   {mv['pass'] / em['pass']:6.1f}x")
    print(f"finetune inspect score (2 passes+probes){em['full'] * 1e3:14.1f} ms {mv['full'] * 1e3:17.1f} ms"
          f"   {mv['full'] / em['full']:6.1f}x")


if __name__ == "__main__":
    main()
