"""Sampling for real on the tiny local model, and importing completions produced elsewhere."""

from __future__ import annotations

import json
import shutil

import pytest
from inspect_helpers import MODULES

SPEC = """\
name: tiny-sample
model: {model}
dataset: {{path: data.jsonl, prompt_column: prompt, answer_column: answer{system}}}
rewards:
  - {{name: format_ok, type: format, pattern: answer_tag, weight: 0.2}}
  - {{name: correctness, type: exact_match, answer_column: answer, extract: answer_tag, weight: 1.0}}
generation: {{max_completion_length: 6, temperature: 1.0}}
training: {{num_generations: 8, seed: 11}}
inspection: {{prompts: 3, per_prompt: 2, min_read: 50, probe_prompts: 2,
             base_success: {{prompts: 2, samples_per_prompt: 3, temperature: 0.3}}}}
"""


def _run(tmp_path, model, system=""):
    run = tmp_path / "run"
    run.mkdir()
    rows = [{"prompt": f"What is {a} plus {a}?", "answer": str(2 * a)} for a in range(1, 6)]
    (run / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "spec.yaml").write_text(SPEC.format(model=model, system=system))
    return run


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_sample_tiny_model_then_score(cli, tiny_model_dir, tmp_path):
    run = _run(tmp_path, tiny_model_dir, system=", system_prompt: 'Answer in <answer></answer>.'")
    r = cli("inspect", "sample", run / "spec.yaml")
    assert r.code == 0, r
    samples = _lines(run / "samples.jsonl")
    base = _lines(run / "base_samples.jsonl")
    assert len(samples) == 6 and len(base) == 6
    assert len({s["row"] for s in samples}) == 3 and len({s["row"] for s in base}) == 2
    first = samples[0]
    assert first["id"] == f"p{first['row']:05d}-s00" and first["conversational"]
    assert first["prompt"][0] == {"role": "system", "content": "Answer in <answer></answer>."}
    assert first["columns"]["answer"] and 1 <= first["completion_tokens"] <= 6
    info = json.loads((run / "sample_info.json").read_text())
    assert info["backend"] == "transformers" and info["seed"] == 11 and info["generation"]["max_completion_length"] == 6
    assert info["base_success"]["temperature"] == 0.3
    # same spec, same seed: the same samples (stable ids and texts)
    again = tmp_path / "again"
    shutil.copytree(run, again)
    assert cli("inspect", "sample", again).code == 0
    assert _lines(again / "samples.jsonl") == samples

    shutil.copy(MODULES / "good.py", run / "rewards.py")
    r = cli("inspect", "score", run)
    assert r.code == 0, r
    report = json.loads((run / "score_report.json").read_text())
    b = report["base_success"]
    assert b["source"] == "base_samples.jsonl" and b["samples"] == 6 and b["prompts"] == 2
    # a randomly initialised model never answers: the report routes back to SFT
    assert b["verdict"] == "never_succeeds" and "lora-qlora-recipes" in b["message"]
    assert "base_never_succeeds" in {f["id"] for f in report["flags"]}
    assert b["predicted_frac_reward_zero_std"] == 1.0
    # no written reason clears it: the route is SFT, not an acknowledged GRPO run
    r = cli("inspect", "ack", run, "base_never_succeeds", "--reason", "we want to try GRPO on it anyway, really")
    assert r.code == 2 and "cannot be acknowledged" in r.err and "lora-qlora-recipes" in r.err
    # a hand-written acks.json is bad input; even a well-formed, bound one cannot waive it
    (run / "acks.json").write_text(json.dumps({"base_never_succeeds": {"reason": "hand-edited", "by": "x"}}))
    r = cli("inspect", "gate", run)
    assert r.code == 2 and "acks.json" in r.err
    from finetune.inspect.verdicts import flag_digest

    flag = next(f for f in report["flags"] if f["id"] == "base_never_succeeds")
    (run / "acks.json").write_text(json.dumps({"base_never_succeeds": {
        "reason": "we want to try GRPO on it anyway, really", "by": "x", "time": "t", "flag_sha256": flag_digest(flag)}}))
    cli("inspect", "gate", run)
    gate = json.loads((run / "gate.json").read_text())
    assert gate["status"] == "FAIL" and "base_never_succeeds" in " ".join(gate["reasons"])
    cut = sum(s["truncated"] for s in samples)
    assert ("truncated" in {f["id"] for f in report["flags"]}) == (cut >= len(samples) / 2)


def test_plain_prompts_are_not_templated(cli, tiny_model_dir, tmp_path):
    run = _run(tmp_path, tiny_model_dir)
    assert cli("inspect", "sample", run, "--no-base").code == 0
    samples = _lines(run / "samples.jsonl")
    assert isinstance(samples[0]["prompt"], str) and not samples[0]["conversational"]
    assert not (run / "base_samples.jsonl").exists()


def test_import_validates_each_line(cli, tmp_path):
    run = _run(tmp_path, "./absent-model")
    good = tmp_path / "good.jsonl"
    good.write_text('{"prompt": "What is 1 plus 1?", "completion": "<answer>2</answer>", "answer": "2"}\n'
                    '{"prompt": [{"role": "user", "content": "hi"}], '
                    '"completion": [{"role": "assistant", "content": "yo"}], "answer": "x"}\n')
    r = cli("inspect", "sample", run, "--import", good)
    assert r.code == 0, r
    rows = _lines(run / "samples.jsonl")
    assert rows[0]["columns"] == {"answer": "2"} and rows[0]["source"] == "import"
    assert rows[1]["conversational"] and rows[1]["completion"] == "yo"
    assert rows[0]["id"].endswith("-s00") and rows[0]["row"] != rows[1]["row"]
    before = (run / "samples.jsonl").read_bytes()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "p", "completion": "c"}\n\n{"prompt": "p", "completion": 3}\n')
    r = cli("inspect", "sample", run, "--import", bad)
    assert r.code == 2 and f"{bad}:3" in r.err and "completion" in r.err
    assert (run / "samples.jsonl").read_bytes() == before  # nothing half-written


def test_missing_model_is_bad_input(cli, tmp_path):
    run = _run(tmp_path, "./absent-model")
    r = cli("inspect", "sample", run)
    assert r.code == 2 and "model not found" in r.err and "--import" in r.err
