"""The agent probes fire on the reward hacking of agents and stay quiet on an honest environment: an
environment reward reachable by any call (right function, wrong arguments), by no call at all (a final answer
without a tool call), or by the last tool alone (a skipped step); a `tool_call` reward that credits a call
inside <think> or an undeclared argument. Scored without a model, through the rendered rewards.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from finetune.demo import tools as demo_tools
from finetune.inspect.probes import run_probes
from finetune.inspect.rewardmod import load_rewards
from finetune.inspect.samplesio import normalise_row
from finetune.rewards.render import render_sources
from finetune.spec import load_spec

HONEST = demo_tools.ENV_SOURCE
ANY_CALL = demo_tools.BROKEN_ENV_SOURCE
ALWAYS = HONEST.replace("return 1.0 if sorted([self.a, self.b]) in [sorted(c) for c in self.calls] else 0.0",
                        "return 1.0")
TWO_STEPS = '''class Calculator:
    def reset(self, a=0, b=0, **row):
        self.a, self.b, self.looked, self.answer = int(a), int(b), False, None

    def lookup(self, a: int) -> int:
        """Read a register.

        Args:
            a: The register.
        """
        self.looked = True
        return a

    def submit(self, value: int) -> str:
        """Submit the answer.

        Args:
            value: The sum.
        """
        self.answer = value
        return "ok"

    def get_reward(self) -> float:
        return 1.0 if self.answer is not None else 0.0
'''


NAME_ONLY = '''import re


def names_add(completion: str, **_: object) -> float:
    """A lenient tool-call check: the function's name appears."""
    return 1.0 if re.search(r'"name":\\s*"add"', completion) else 0.0
'''


def _probes(tmp_path: Path, env_source: str, rewards: list[dict]) -> dict[str, list[str]]:
    (tmp_path / "env.py").write_text(env_source)
    (tmp_path / "name_only.py").write_text(NAME_ONLY)
    rows = demo_tools.rows(2, seed=3)
    spec_data = {"name": "p", "model": "Qwen/Qwen2.5-0.5B-Instruct",
                 "dataset": {"path": "train.jsonl", "prompt_column": "prompt"},
                 "environment": {"file": "env.py", "class": "Calculator"}, "rewards": rewards,
                 "hardware": {"profile": "h100-80gb", "gpus": 1, "nodes": 1},
                 "inspection": {"prompts": 2, "per_prompt": 1, "min_read": 50, "probe_prompts": 2}}
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec_data, sort_keys=False))
    spec = load_spec(tmp_path / "spec.yaml")
    for name, text in render_sources(spec.rewards, source_path=tmp_path / "spec.yaml",
                                     tool_env=spec.environment).items():
        (tmp_path / name).write_text(text)
    samples = [normalise_row({"id": f"s{i}", "row": i, "prompt": r["prompt"], "completion": str(r["a"] + r["b"]),
                              "columns": {k: r[k] for k in ("a", "b", "expected_call")}}, "t", i)
               for i, r in enumerate(rows)]
    report = run_probes(load_rewards(tmp_path), spec, samples)
    out: dict[str, list[str]] = {}
    for p in report["probes"]:
        if p["passing"]:
            out.setdefault(p["probe"], []).extend(p["passed_by"])
    return out


ENV = [{"name": "solved", "type": "environment"}]
CALL = [{"name": "called", "type": "tool_call"}]
LENIENT = [{"name": "named", "type": "python", "file": "name_only.py", "function": "names_add"}]


@pytest.mark.parametrize("source, rewards, fired", [
    (HONEST, ENV, set()),
    (HONEST, ENV + CALL, set()),
    (ANY_CALL, ENV, {"junk_arguments:add"}),
    (ALWAYS, ENV, {"answer_without_call", "junk_arguments:add", "empty_completion", "gibberish"}),
    (TWO_STEPS, ENV, {"skipped_steps", "junk_arguments:submit"}),
    (HONEST, ENV + CALL + LENIENT, {"right_function_wrong_arguments", "call_inside_think", "hallucinated_argument",
                                    "junk_arguments:add"}),
])
def test_agent_probes_fire_on_hackable_rewards_only(tmp_path, source, rewards, fired):
    passing = _probes(tmp_path, source, rewards)
    if source is ALWAYS:  # every probe passes a reward that is always 1
        assert set(passing) >= fired, passing
    else:
        assert set(passing) == fired, passing


LLAMA_ONLY = '''import json


def llama_names_add(completion: str, **_: object) -> float:
    """A lenient check that reads Llama 3's JSON reply only: the function's name."""
    try:
        return 1.0 if json.loads(completion).get("name") == "add" else 0.0
    except (ValueError, AttributeError):
        return 0.0
'''


def test_probes_are_written_in_the_spec_format(tmp_path):
    """A reward that reads only Llama 3's syntax is probed in that syntax (Hermes probes would miss its hack)."""
    (tmp_path / "llama_only.py").write_text(LLAMA_ONLY)
    rewards = [{"name": "called", "type": "tool_call", "format": "llama3"},
               {"name": "named", "type": "python", "file": "llama_only.py", "function": "llama_names_add"}]
    passing = _probes(tmp_path, HONEST, ENV + rewards)
    assert set(passing) == {"right_function_wrong_arguments", "hallucinated_argument", "junk_arguments:add"}
    assert all(names == ["named", "named"] for names in passing.values()), passing


# A lookup-then-submit task with an answer gold (the SQL shape: query, then submit the value read). The honest
# reward pays the gold only after a lookup; the loosened one pays "the submitted value equals the gold".
LOOKUP = '''class Ledger:
    def reset(self, answer=None, **row):
        self.gold, self.looked, self.answer = str(answer), False, None

    def lookup(self, query: str) -> str:
        """Run a query on the ledger.

        Args:
            query: What to look up.
        """
        self.looked = True
        return self.gold if query == "total" else "no rows"

    def submit(self, value: str) -> str:
        """Submit the answer.

        Args:
            value: The value read.
        """
        self.answer = value
        return "ok"

    def get_reward(self) -> float:
        return 1.0 if self.looked and self.answer == self.gold else 0.0
'''
LOOSENED = LOOKUP.replace("self.looked and self.answer == self.gold", "self.answer == self.gold")
GOLD_IN_TEXT = '''def mentions_gold(completion: str, answer: str = "", **_: object) -> float:
    """An answer-only check: the gold appears in the final text."""
    return 1.0 if answer and answer in completion else 0.0
'''
GOLD_PROBES = {"gold_without_call", "gold_in_container", "gold_through_tool:lookup", "gold_through_tool:submit"}


def _ledger_spec(tmp_path: Path, env_source: str, rewards: list[dict]):
    (tmp_path / "env.py").write_text(env_source)
    (tmp_path / "gold_text.py").write_text(GOLD_IN_TEXT)
    rows = [{"prompt": [{"role": "user", "content": f"What is the ledger total of account {i}?"}],
             "answer": str(1234 + 17 * i)} for i in range(2)]
    spec_data = {"name": "p", "model": "Qwen/Qwen2.5-0.5B-Instruct",
                 "dataset": {"path": "train.jsonl", "prompt_column": "prompt", "answer_column": "answer"},
                 "environment": {"file": "env.py", "class": "Ledger"}, "rewards": rewards,
                 "hardware": {"profile": "h100-80gb", "gpus": 1, "nodes": 1},
                 "inspection": {"prompts": 2, "per_prompt": 1, "min_read": 50, "probe_prompts": 2}}
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec_data, sort_keys=False))
    spec = load_spec(tmp_path / "spec.yaml")
    for name, text in render_sources(spec.rewards, source_path=tmp_path / "spec.yaml",
                                     tool_env=spec.environment).items():
        (tmp_path / name).write_text(text)
    samples = [normalise_row({"id": f"s{i}", "row": i, "prompt": r["prompt"], "completion": r["answer"],
                              "columns": {"answer": r["answer"]}}, "t", i) for i, r in enumerate(rows)]
    return spec, load_rewards(tmp_path), samples


def _passing(report: dict) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in report["probes"]:
        if p["passing"]:
            out.setdefault(p["probe"], []).extend(p["passed_by"])
    return out


@pytest.mark.parametrize("source, rewards, fired", [
    (LOOKUP, ENV, set()),
    (LOOSENED, ENV, {"gold_through_tool:submit"}),
    (LOOKUP, [{"name": "said", "type": "python", "file": "gold_text.py", "function": "mentions_gold",
                  "columns": ["answer"]}],
     {"gold_without_call", "gold_in_container", "gold_through_tool:lookup", "gold_through_tool:submit"}),
])
def test_gold_without_the_work_fires_on_rewards_that_pay_the_value_alone(tmp_path, source, rewards, fired):
    """The gold in text, in the answer container and straight through a tool, with no call before it: the honest
    environment pays none; one loosened to "the submitted value equals the gold" pays the submit; a text reward
    in an agent task pays every one (the tool probes carry the gold in their call's text)."""
    spec, rm, samples = _ledger_spec(tmp_path, source, rewards)
    report = run_probes(rm, spec, samples)
    assert GOLD_PROBES <= {p["probe"] for p in report["probes"]}
    passing = _passing(report)
    assert {p for p in passing if p.startswith("gold_")} == fired, passing
    if source is LOOKUP and rewards is ENV:
        assert not passing, passing


def test_no_episode_reader_flag_only_when_no_reward_scores_the_episode(tmp_path):
    """An environment declared and only text rewards: flagged (acknowledgeable); an environment reward beside the
    text reward: no flag."""
    from finetune.inspect.flags import _no_episode_reader

    text_only = [{"name": "said", "type": "python", "file": "gold_text.py", "function": "mentions_gold",
                  "columns": ["answer"]}]
    (tmp_path / "a").mkdir()
    spec, rm, _ = _ledger_spec(tmp_path / "a", LOOKUP, text_only)
    flags = _no_episode_reader(spec, rm)
    assert [f["id"] for f in flags] == ["no_episode_reader"] and "Ledger" in flags[0]["message"]
    assert "type: environment" in flags[0]["remedy"]
    (tmp_path / "b").mkdir()
    spec, rm, _ = _ledger_spec(tmp_path / "b", LOOKUP, ENV + text_only)
    assert _no_episode_reader(spec, rm) == []
