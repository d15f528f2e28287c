"""Throughput of the rule-based rewards on 10k completions, as rendered into a real rewards.py.

Targets: format and exact-match >= 50k completions/s; math-verify bounded by its
per-item timeout, never hanging (a batch with pathological items still ends within the bound).
Run: /work/venv/bin/python benchmarks/bench_rewards.py [--n 10000]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import random
import sys
import tempfile
import time
from pathlib import Path

from pydantic import TypeAdapter

from finetune.rewards.registry import RewardSpec
from finetune.rewards.render import render_sources

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
          "required": ["name", "age"]}
MATH_TIMEOUT_S = 2.0
MATH_WORKERS = 2
HANG = "\\boxed{9^{9^{9^{9}}}+1}"


def load(entries: list[dict], folder: Path):
    adapter = TypeAdapter(RewardSpec)
    folder.mkdir(parents=True)
    for name, text in render_sources([adapter.validate_python(e) for e in entries], max_completion_length=1024).items():
        (folder / name).write_text(text)
    spec = importlib.util.spec_from_file_location(f"bench_{folder.name}", folder / "rewards.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def completions(n: int, rng: random.Random) -> tuple[list[str], list[str]]:
    """~1 KB reasoning completions: 60% correct, 25% wrong, 15% malformed."""
    texts, golds = [], []
    words = "so we add the two numbers then carry the one and check the result again".split()
    for _ in range(n):
        a = rng.randint(1, 10_000)
        reasoning = " ".join(rng.choice(words) for _ in range(180))
        kind = rng.random()
        answer = str(a) if kind < 0.6 else str(a + 1)
        text = f"<think>{reasoning}</think>\n<answer>{answer}</answer>"
        if kind > 0.85:
            text = text.replace("</think>", "")
        texts.append(text)
        golds.append(str(a))
    return texts, golds


def timed(func, **kwargs) -> tuple[float, list]:
    start = time.perf_counter()
    scores = func(**kwargs)
    return time.perf_counter() - start, scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--math-n", type=int, default=None, help="completions for math-verify (default: --n)")
    args = parser.parse_args()
    n, rng = args.n, random.Random(0)
    texts, golds = completions(n, rng)
    prompts = ["What is the sum?"] * n
    rows = []
    tmp = Path(tempfile.mkdtemp(prefix="bench-rewards-"))

    ungated = load([
        {"name": "fmt_answer", "type": "format", "pattern": "answer_tag"},
        {"name": "fmt_think", "type": "format", "pattern": "think_answer"},
        {"name": "fmt_boxed", "type": "format", "pattern": "boxed"},
        {"name": "fmt_json", "type": "format", "pattern": "json_object"},
    ], tmp / "formats")
    for name in ("fmt_answer", "fmt_think", "fmt_boxed", "fmt_json"):
        seconds, _ = timed(getattr(ungated, name), prompts=prompts, completions=texts)
        rows.append((f"format ({name[4:]})", n, seconds, 50_000))

    exact = load([{"name": "em_tag", "type": "exact_match", "extract": "answer_tag"},
                  {"name": "em_last", "type": "exact_match", "extract": "last_number"}], tmp / "exact")
    for name, label in (("em_tag", "exact_match (answer_tag)"), ("em_last", "exact_match (last_number)")):
        seconds, _ = timed(getattr(exact, name), prompts=prompts, completions=texts, answer=golds)
        rows.append((label, n, seconds, 50_000))

    composite = load([{"name": "format", "type": "format", "pattern": "think_answer", "weight": 0.2},
                      {"name": "correctness", "type": "exact_match"}], tmp / "composite")
    seconds, _ = timed(composite.correctness, prompts=prompts, completions=texts, answer=golds)
    rows.append(("exact_match gated, format not cached", n, seconds, None))
    kwargs = {"prompts": prompts, "completions": texts, "answer": golds}
    composite.format(**kwargs)  # what TRL does: format first, same batch objects
    seconds, _ = timed(composite.correctness, **kwargs)
    rows.append(("exact_match gated, after format (TRL)", n, seconds, None))

    json_texts = [json.dumps({"name": "x" * rng.randint(1, 50), "age": rng.randint(-5, 90)}) for _ in range(n)]
    js = load([{"name": "schema", "type": "json_schema", "schema": SCHEMA},
               {"name": "schema_partial", "type": "json_schema", "schema": SCHEMA, "partial_credit": True}],
              tmp / "json")
    for name in ("schema", "schema_partial"):
        seconds, _ = timed(getattr(js, name), prompts=prompts, completions=json_texts)
        rows.append((f"json_schema ({'partial' if 'partial' in name else 'strict'})", n, seconds, None))

    lp = load([{"name": "overlong", "type": "length_penalty", "overlong_buffer": 64}], tmp / "length")
    lp.overlong(prompts=prompts[:1], completions=texts[:1], completion_ids=[[0]])  # import trl once, not timed
    ids = [[0] * rng.randint(100, 1100) for _ in range(n)]
    seconds, _ = timed(lp.overlong, prompts=prompts, completions=texts, completion_ids=ids)
    rows.append(("length_penalty (soft_overlong)", n, seconds, None))

    math_n = args.math_n or n
    mv = load([{"name": "math_ok", "type": "math", "extract": "answer_tag", "timeout_s": MATH_TIMEOUT_S,
                "workers": MATH_WORKERS}], tmp / "math")
    mv.math_ok(prompts=prompts[:2], completions=texts[:2], answer=golds[:2])  # start the workers, not timed
    seconds, _ = timed(mv.math_ok, prompts=prompts[:math_n], completions=texts[:math_n], answer=golds[:math_n])
    rows.append((f"math (math-verify, {MATH_WORKERS} workers)", math_n, seconds, None))
    boxed = load([{"name": "math_boxed", "type": "math", "extract": "boxed", "timeout_s": MATH_TIMEOUT_S,
                   "workers": MATH_WORKERS}], tmp / "math_boxed")
    hard = [HANG] * 4 + [f"so \\boxed{{{g}}}" for g in golds[4:20]]
    seconds, scores = timed(boxed.math_boxed, prompts=prompts[:20], completions=hard, answer=golds[:20])
    bound = math.ceil(len(hard) / MATH_WORKERS) * MATH_TIMEOUT_S
    rows.append(("math, 4 hanging items in 20", 20, seconds, None))

    print(f"{'reward':40} {'n':>6} {'seconds':>9} {'completions/s':>14} {'target':>9}  verdict")
    for label, count, secs, target in rows:
        rate = count / secs if secs > 0 else float("inf")
        verdict = "" if target is None else ("ok" if rate >= target else "MISS")
        shown = f"{target:,}" if target else "-"
        print(f"{label:40} {count:>6} {secs:>9.3f} {rate:>14,.0f} {shown:>9}  {verdict}")
    hung = scores[:4]
    assert scores[4:] == [1.0] * 16, scores
    print(f"\nmath deadline: 4 pathological items scored {hung} (None = timed out, counted as errors); batch took "
          f"{rows[-1][2]:.1f} s, bound ceil(20/{MATH_WORKERS}) x {MATH_TIMEOUT_S} s = {bound:.0f} s plus worker "
          f"restarts -> {'ok' if rows[-1][2] <= bound + 10 else 'MISS'}")


if __name__ == "__main__":
    sys.exit(main())
