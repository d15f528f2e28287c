"""The text-only flags (length_correlated, gold_answer_fails, format_blind) on an environment reward: its score is
the episode the environment ran, which the text-only controls (no tool call) never start, so those flags are
listed as not applicable with the reason and a correct environment has no flag to acknowledge; a broken one still
fails (an agent probe passes), and a reward that reads the text still gets them. Scored without a model: rollouts
built by hand, through the rendered rewards.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from finetune.demo import tools as demo_tools
from finetune.inspect import flags
from finetune.inspect.probes import run_probes
from finetune.inspect.rewardmod import load_rewards
from finetune.inspect.samplesio import normalise_row
from finetune.rewards.render import render_sources
from finetune.spec import load_spec

TEXT_ONLY = {"length_correlated", "gold_answer_fails", "format_blind"}
# reads the completion's text (credits the word "sum", whatever the numbers): the flags read from text apply to it
NAME_ONLY = '''def says_sum(completion: str, **_: object) -> float:
    return 1.0 if "sum" in str(completion) else 0.0
'''


def _rollout(a: int, b: int, call: bool) -> list[dict[str, Any]]:
    if not call:  # answered without calling the tool: no episode step ran
        return [{"role": "assistant", "content": str(a + b)}]
    return [{"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "add", "arguments": {"a": a, "b": b}}}]},
        {"role": "tool", "name": "add", "content": str(a + b)},
        {"role": "assistant", "content": f"The sum of {a} and {b} is {a + b}."}]


def _score(tmp_path: Path, env_source: str, rewards: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(flags by name, the probe report) for rollouts that call add() right (credited) or answer without a call."""
    (tmp_path / "env.py").write_text(env_source)
    (tmp_path / "name_only.py").write_text(NAME_ONLY)
    rows = [{**r, "answer": str(r["a"] + r["b"])} for r in demo_tools.rows(12, seed=5)]
    spec_data = {"name": "p", "model": "Qwen/Qwen2.5-0.5B-Instruct",
                 "dataset": {"path": "train.jsonl", "prompt_column": "prompt", "answer_column": "answer"},
                 "environment": {"file": "env.py", "class": "Calculator"}, "rewards": rewards,
                 "hardware": {"profile": "h100-80gb", "gpus": 1, "nodes": 1},
                 "inspection": {"prompts": 12, "per_prompt": 2, "min_read": 50, "probe_prompts": 3}}
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec_data, sort_keys=False))
    spec = load_spec(tmp_path / "spec.yaml")
    for name, text in render_sources(spec.rewards, source_path=tmp_path / "spec.yaml",
                                     tool_env=spec.environment).items():
        (tmp_path / name).write_text(text)
    samples = [normalise_row({"id": f"s{i}-{call}", "row": i, "prompt": r["prompt"],
                              "completion": _rollout(r["a"], r["b"], call),
                              "columns": {k: r[k] for k in ("a", "b", "expected_call", "answer")}}, "t", i)
               for i, r in enumerate(rows) for call in (True, False)]
    rm = load_rewards(tmp_path)
    scored = [{**s, "rewards": {}, "errors": {}} for s in samples]
    for r in rm.rewards:
        values, errors = rm.score(r, samples)
        for row, v, e in zip(scored, values, errors):
            row["rewards"][r.name] = v
            if e:
                row["errors"][r.name] = e
    rescored = {r.name: [row["rewards"][r.name] for row in scored] for r in rm.rewards}
    probe_result = run_probes(rm, spec, samples)
    found = flags.detect(rm, spec, scored, rescored, probe_result, None)
    assert [row["rewards"]["solved"] for row in scored if "solved" in row["rewards"]][:2] in ([1.0, 0.0], [])
    return {f["name"]: f for f in found}, {"probes": probe_result["probes"], "skipped": flags.not_applicable(rm.rewards)}


ENV = [{"name": "solved", "type": "environment"}]
LENIENT = [{"name": "named", "type": "python", "file": "name_only.py", "function": "says_sum"}]


def test_a_correct_environment_raises_no_text_only_flag_and_says_why(tmp_path):
    found, report = _score(tmp_path, demo_tools.ENV_SOURCE, ENV)
    assert not found, found  # nothing to acknowledge: the gate PASSes on a person's reading alone
    assert not [p["id"] for p in report["probes"] if p["passing"]]
    skipped = {(n["check"], n["reward"]): n["reason"] for n in report["skipped"]}
    assert set(skipped) == {("length_correlated", "solved"), ("gold_answer_fails", "solved"), ("format_blind", None)}
    assert all("tool call" in reason or "agent probes" in reason for reason in skipped.values())


def test_a_broken_environment_still_fails(tmp_path):
    found, report = _score(tmp_path, demo_tools.BROKEN_ENV_SOURCE, ENV)
    passing = {p["probe"] for p in report["probes"] if p["passing"]}
    assert "junk_arguments:add" in passing, passing  # any call of add() is credited: the gate FAILs on it
    assert not (TEXT_ONLY & set(found)), found


def test_a_reward_that_reads_the_text_still_gets_the_text_only_flags(tmp_path):
    # the same rollouts, scored by a check of the completion's text: the controls are evidence against it
    found, report = _score(tmp_path, demo_tools.ENV_SOURCE, LENIENT)
    assert {"length_correlated", "gold_answer_fails", "format_blind"} <= set(found), sorted(found)
    assert report["skipped"] == []
