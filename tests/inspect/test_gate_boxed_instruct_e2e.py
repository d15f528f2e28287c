"""Boxed math with instruct-style completions, read honestly, reaches gate PASS
with the default spec; with `trailing_text: forbid` the gate FAILs and its report names the cause
(prose after the final box) and the spec field that fixes it."""

from __future__ import annotations

import json
import random

import pytest
from inspect_helpers import write_jsonl
from person_helpers import person_verdicts

SPEC = """name: gsm-boxed
model: ./model
dataset: {{path: data.jsonl, prompt_column: question, answer_column: answer}}
rewards:
  - {{name: format_ok, type: format, pattern: boxed, weight: 0.2{extra}}}
  - {{name: correct, type: math, answer_column: answer, extract: boxed, workers: 2}}
generation: {{max_completion_length: 256}}
training: {{num_generations: 8}}
inspection: {{prompts: 16, per_prompt: 4, min_read: 50, probe_prompts: 3}}
"""

# How Qwen2.5-Instruct-style models close a solution (value placeholder {v}); all well formed.
RIGHT_STYLES = [
    "Therefore, Natalia sold \\(\\boxed{{{v}}}\\) clips in April and May.",
    "So the total is $\\boxed{{{v}}}$.",
    "**\\boxed{{{v}}}**\n\nI hope it is correct.",
    "\\[\n\\boxed{{{v}}}\n\\]\nCheck: the sum matches.",
    "The final answer is $\\boxed{{{v}}}$. I hope it is correct.",
]


def _samples(seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for p in range(16):
        a, b = rng.randint(100, 900), rng.randint(1000, 4000)
        gold = a + b
        for k in range(4):
            kind = ["right", "wrong", "hedge", "no_box"][k] if p == 0 else rng.choice(
                ["right", "right", "wrong", "hedge", "no_box"])
            filler = " ".join(["Let me line up the digits and add column by column."] * rng.randint(1, 6))
            steps = f"{filler} We add {a} and {b}: {a} + {b} = {gold if kind != 'wrong' else gold + 10}."
            shown = f"{gold:,}".replace(",", "\\,") if rng.random() < 0.3 else str(gold)
            if kind == "right":
                text = steps + "\n" + rng.choice(RIGHT_STYLES).format(v=shown)
            elif kind == "wrong":
                text = steps + "\n" + rng.choice(RIGHT_STYLES).format(v=gold + 10)
            elif kind == "hedge":
                text = steps + f"\nSo the answer is $\\boxed{{{gold} \\text{{ or }} {gold + 1}}}$."
            else:
                text = steps + f"\nSo the answer is {gold}."
            rows.append({"id": f"q{p:02d}-s{k}", "row": p, "prompt": f"What is {a} plus {b}?", "completion": text,
                         "columns": {"answer": str(gold)}, "kind": kind})
    return rows


def _verdicts(samples: list[dict], n: int) -> list[dict]:
    """An honest reading: a boxed right value is correct and well formed whatever prose follows it."""
    out = []
    for s in samples[:n]:
        kind = s["kind"]
        out.append({"id": s["id"], "accept": kind == "right", "correct": kind == "right",
                    "well_formed": kind != "no_box", "note": kind, "reader": "human"})
    return out


def _gate(cli, tmp_path, extra: str):
    run = tmp_path / ("strict" if extra else "default")
    run.mkdir()
    (run / "spec.yaml").write_text(SPEC.format(extra=extra))
    samples = _samples()
    (run / "data.jsonl").write_text("".join(json.dumps({"question": s["prompt"], "answer": s["columns"]["answer"]})
                                            + "\n" for s in samples[::4]))
    write_jsonl(run / "import.jsonl", [{"prompt": s["prompt"], "completion": s["completion"], "id": s["id"],
                                        "row": s["row"], "answer": s["columns"]["answer"]} for s in samples])
    assert cli("rewards", "render", run / "spec.yaml").code == 0
    assert cli("inspect", "sample", run / "spec.yaml", "--import", run / "import.jsonl").code == 0
    r = cli("inspect", "score", run)
    assert r.code == 0, r
    write_jsonl(run / "mine.jsonl", _verdicts(samples, 56))
    assert person_verdicts(cli, run, run / "mine.jsonl").code == 0
    result = cli("inspect", "gate", run)
    return result, json.loads((run / "gate.json").read_text())


@pytest.mark.slow
def test_default_spec_passes_an_honest_reading(cli, tmp_path):
    result, gate = _gate(cli, tmp_path, "")
    assert result.code == 0, (result, gate["reasons"])
    assert gate["status"] == "PASS" and gate["counts"]["disagreements"] == 0 and gate["causes"] == []


@pytest.mark.slow
def test_a_fail_names_its_cause_and_the_fixing_field(cli, tmp_path):
    result, gate = _gate(cli, tmp_path, ", trailing_text: forbid")
    assert result.code == 1 and gate["status"] == "FAIL"
    top = gate["causes"][0]
    assert top["kind"] == "false_negative" and top["reward"] == "format_ok" and top["reason"] == "trailing_text"
    assert top["fix"].strip("`") == "trailing_text: allow" and top["examples"]  # the kind's reason names the field
    assert any("trailing_text: allow" in line and "false negative" in line for line in gate["reasons"])
