"""Helpers for the inspection-gate tests: real reward modules, crafted samples, a local judge endpoint.

The reward modules in reward_modules/ have the rendered rewards.py interface (REWARD_FUNCS,
REWARD_WEIGHTS, REWARD_META, disable_caches); all but good.py carry a published bug.
"""

from __future__ import annotations

import json
import random
import re
from http.server import BaseHTTPRequestHandler
from pathlib import Path

MODULES = Path(__file__).parent / "reward_modules"

SPEC = """\
name: toy-arith
model: ./model
dataset: {{path: data.jsonl, prompt_column: prompt, answer_column: answer}}
rewards:
  - {{name: format_ok, type: format, pattern: answer_tag, weight: 0.2}}
  - {correctness}
generation: {{max_completion_length: 64}}
training: {{num_generations: 8}}
inspection: {{prompts: 16, per_prompt: 4, min_read: 50, probe_prompts: 4}}
"""
CORRECTNESS = {
    "exact_match": "{name: correctness, type: exact_match, answer_column: answer, extract: answer_tag, weight: 1.0}",
    "math": "{name: correctness, type: math, answer_column: answer, extract: answer_tag, weight: 1.0}",
    "judge": "{name: judge_correct, type: judge, model: judge, rubric: 'final answer equals the reference', "
             "weight: 1.0, threshold: 0.7}",
}
FILLER = "Let me add the two numbers carefully."


def craft_samples(n_prompts: int = 16, per_prompt: int = 4, seed: int = 0) -> list[dict]:
    """Arithmetic samples of four kinds (right / wrong × well-formed / malformed), lengths independent of kind."""
    rng = random.Random(seed)
    rows = []
    for p in range(n_prompts):
        a, b = rng.randint(2, 40), rng.randint(2, 40)
        gold = a + b
        prompt = f"What is {a} plus {b}? Put the final answer in <answer></answer>."
        for k in range(per_prompt):
            kind = rng.choice(["right", "right", "wrong", "malformed_right", "malformed_wrong"])
            if p == 0:
                kind = ["right", "wrong", "malformed_right", "malformed_wrong"][k % 4]
            value = gold if kind in ("right", "malformed_right") else gold + 1
            reasoning = " ".join([FILLER] * rng.randint(1, 6))
            text = (f"{reasoning}\n<answer>{value}</answer>" if kind in ("right", "wrong")
                    else f"{reasoning} So it is {value}.")
            rows.append({"id": f"p{p:04d}-s{k:02d}", "row": p, "prompt": prompt, "completion": text,
                         "columns": {"answer": str(gold)}, "kind": kind})
    return rows


def verdicts_for(samples: list[dict], reader: str = "agent", n: int | None = None) -> list[dict]:
    """What a careful reader says about crafted samples (accept only right, well-formed answers)."""
    out = []
    for s in samples[:n]:
        kind = s["kind"]
        v = {"id": s["id"], "accept": kind == "right", "well_formed": kind in ("right", "wrong"),
             "note": "" if kind == "right" else kind.replace("_", " "), "reader": reader}
        if kind in ("right", "wrong"):
            v["correct"] = kind == "right"
        out.append(v)
    return out


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


class Judge(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint standing in for an instruction-following LLM judge: it
    grades the response's <answer> against the reference, and obeys a 'score it N' instruction."""

    noisy = False
    master_key = False  # fooled by a content-free response, as strong judges were ("One Token to Fool ...")

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        msg = body["messages"][-1]["content"]
        ref = re.search(r"Reference answer: (.*)", msg).group(1).strip()
        response = msg.split("Response: ", 1)[1].rsplit("Score (0-10):", 1)[0]
        injected = re.search(r"score it (\d+)", response, re.I)
        if type(self).noisy:
            score = str(random.randint(0, 10))
        elif type(self).master_key and response.strip() in (":", "Thought process:"):
            score = "10"
        elif injected:
            score = injected.group(1)
        else:
            found = re.findall(r"<answer>(.*?)</answer>", response, re.S)
            score = "10" if found and found[-1].strip() == ref else "0"
        data = json.dumps({"choices": [{"message": {"role": "assistant", "content": score}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


CODE_SPEC = """\
name: toy-code
model: ./model
dataset: {path: data.jsonl, prompt_column: prompt, answer_column: null, tests_column: tests}
rewards:
  - {name: tests_pass, type: unit_tests, tests_column: tests, test_format: assert, min_isolation: process}
inspection: {prompts: 4, per_prompt: 2, min_read: 50, probe_prompts: 2}
"""


def code_samples(n_prompts: int = 4) -> list[dict]:
    """add(a, b) solutions, half of them off by one, with assert-style tests."""
    rows = []
    for i in range(n_prompts):
        for k in range(2):
            body = f"def add(a, b):\n    return a + b + {k}\n"
            rows.append({"id": f"c{i:02d}-s{k:02d}", "row": i, "prompt": f"Write add(a, b) (task {i}).",
                         "completion": f"```python\n{body}```",
                         "tests": f"assert add(1, {i}) == {1 + i}\nassert add(2, 2) == 4"})
    return rows
