"""An environment file's own modules (env.py's `from env_utils import matches`) are copied beside rewards.py as
rewards_lib_NAME.py (transitively), bound by the gate like every rewards_*.py and imported by exact name and path:
a same-named module elsewhere on sys.path stands in for nothing, and an edit of the copy changes the bound hashes.
A `type: python` verifier that runs code through `rewards_sandbox` gets the runner rendered beside it, as an
env.py does. Rendered and scored without a model (rollouts built by hand)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from finetune.demo import tools as demo_tools
from finetune.errors import UserError
from finetune.hashing import reward_files
from finetune.inspect.rewardmod import load_rewards
from finetune.inspect.samplesio import normalise_row
from finetune.rewards.render import render_sources
from finetune.sandbox import runner_source
from finetune.sandbox.runner import detect_isolation
from finetune.spec import load_spec

ENV = demo_tools.ENV_SOURCE.replace(
    '"""A calculator', 'from env_utils import matches\n\n"""A calculator').replace(
    "return 1.0 if sorted([self.a, self.b]) in [sorted(c) for c in self.calls] else 0.0",
    "return 1.0 if matches(self.a, self.b, self.calls) else 0.0")
ENV_UTILS = "from env_rules import same_pair\n\n\ndef matches(a, b, calls):\n" \
            "    return any(same_pair((a, b), c) for c in calls)\n"
ENV_RULES = "def same_pair(x, y):\n    return sorted(x) == sorted(y)\n"
DECOY = "def matches(a, b, calls):\n    return True\n"  # a same-named module on the training box's path


def _render(folder: Path, rewards: list[dict[str, Any]], files: dict[str, str],
            environment: bool = True) -> tuple[Any, dict[str, str]]:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    rows = demo_tools.rows(4, seed=1)
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = {"name": "p", "model": "Qwen/Qwen2.5-0.5B-Instruct",
            "dataset": {"path": "train.jsonl", "prompt_column": "prompt"}, "rewards": rewards,
            "hardware": {"profile": "h100-80gb", "gpus": 1, "nodes": 1}}
    if environment:
        data["environment"] = {"file": "envs/env.py", "class": "Calculator"}
    (folder / "spec.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    spec = load_spec(folder / "spec.yaml")
    return spec, render_sources(spec.rewards, source_path=folder / "spec.yaml", tool_env=spec.environment)


def _episode(a: int, b: int, x: int, y: int) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "add", "arguments": {"a": x, "b": y}}}]},
        {"role": "tool", "name": "add", "content": str(x + y)}, {"role": "assistant", "content": str(x + y)}]


def test_the_environments_own_modules_are_copied_bound_and_imported_by_path(tmp_path, monkeypatch):
    spec_dir, run = tmp_path / "spec", tmp_path / "run"
    spec_dir.mkdir()
    run.mkdir()
    _, files = _render(spec_dir, [{"name": "solved", "type": "environment"}],
                       {"envs/env.py": ENV, "envs/env_utils.py": ENV_UTILS, "envs/env_rules.py": ENV_RULES})
    assert files["rewards_lib_env_utils.py"] == ENV_UTILS and files["rewards_lib_env_rules.py"] == ENV_RULES
    for name, text in files.items():
        (run / name).write_text(text)
    bound = {p.name for p in reward_files(run)}  # what the gate hashes
    assert {"rewards_lib_env_utils.py", "rewards_lib_env_rules.py", "rewards_env.py"} <= bound

    decoys = tmp_path / "site"  # the training box's sys.path holds another env_utils: it must not be imported
    decoys.mkdir()
    (decoys / "env_utils.py").write_text(DECOY)
    monkeypatch.syspath_prepend(str(decoys))
    for name in ("env_utils", "env_rules"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    rm = load_rewards(run)
    solved = next(r for r in rm.rewards if r.name == "solved")
    rows = demo_tools.rows(2, seed=1)
    items = [normalise_row({"id": f"s{i}", "row": 0, "prompt": rows[0]["prompt"], "completion": episode,
                            "columns": {"a": rows[0]["a"], "b": rows[0]["b"]}}, "t", i)
             for i, episode in enumerate([_episode(rows[0]["a"], rows[0]["b"], rows[0]["a"], rows[0]["b"]),
                                          _episode(rows[0]["a"], rows[0]["b"], rows[0]["a"] + 1, 0)])]
    values, errors = rm.score(solved, items)
    assert errors == [None, None] and values == [1.0, 0.0]  # the decoy would credit the wrong call too
    assert "env_utils" not in sys.modules  # imported only in the sandbox's agent host, never in this process

    # an edit of the copy after the gate's PASS changes what the gate bound
    before = {p.name: p.read_bytes() for p in reward_files(run)}
    (run / "rewards_lib_env_utils.py").write_text(DECOY)
    after = {p.name: p.read_bytes() for p in reward_files(run)}
    assert [n for n in before if before[n] != after[n]] == ["rewards_lib_env_utils.py"]


def test_config_render_reads_the_tools_of_an_environment_with_its_own_modules(tmp_path, monkeypatch):
    from finetune.config.dataset import _environment_tools

    spec, _ = _render(tmp_path, [{"name": "solved", "type": "environment"}],
                      {"envs/env.py": ENV, "envs/env_utils.py": ENV_UTILS, "envs/env_rules.py": ENV_RULES})
    for name in ("env_utils", "env_rules"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    tools = _environment_tools(spec, None)  # the spec folder is not on sys.path: found by name and path
    assert [t.__name__ for t in tools or []] == ["add"]
    assert "env_utils" not in sys.modules and "env_rules" not in sys.modules  # dropped again


def test_an_environment_module_named_like_a_verifiers_other_module_is_refused(tmp_path):
    files = {"envs/env.py": ENV, "envs/env_utils.py": ENV_UTILS, "envs/env_rules.py": ENV_RULES,
             "check/checker.py": "from env_rules import same_pair\n\n\ndef ok(completion, **_):\n    return 1.0\n",
             "check/env_rules.py": "def same_pair(x, y):\n    return True\n"}
    rewards = [{"name": "solved", "type": "environment"},
               {"name": "mine", "type": "python", "file": "check/checker.py", "function": "ok", "role": "format",
                "weight": 0.1}]
    with pytest.raises(UserError, match="env_rules"):
        _render(tmp_path, rewards, files)


CODE_VERIFIER = '''from rewards_sandbox import run_python


def prints_sum(completion, **_):
    """Run the completion's program in the sandbox: 1.0 when it prints 7."""
    return 1.0 if run_python(completion).strip() == "7" else 0.0
'''


def test_a_verifier_that_runs_code_gets_the_sandbox_beside_it(tmp_path):
    rewards = [{"name": "runs", "type": "python", "file": "check.py", "function": "prints_sum"}]
    _, files = _render(tmp_path, rewards, {"check.py": CODE_VERIFIER}, environment=False)
    assert files["rewards_sandbox.py"] == runner_source()
    order = [line.split(" = ")[0] for line in files["rewards.py"].splitlines() if " = _helper(" in line]
    assert "rewards_sandbox" in order and "rewards_user_runs" not in order, order  # the verifier runs in the host
    if detect_isolation().at_least("namespaces"):  # the program runs in the rendered copy of the sandbox
        run = tmp_path / "run"
        run.mkdir()
        for name, text in files.items():
            (run / name).write_text(text)
        rm = load_rewards(run)
        runs = next(r for r in rm.rewards if r.name == "runs")
        items = [normalise_row({"id": f"s{i}", "prompt": "p", "completion": code}, "t", i)
                 for i, code in enumerate(["print(3 + 4)", "print(3 + 5)"])]
        assert rm.score(runs, items) == ([1.0, 0.0], [None, None])
    _, plain = _render(tmp_path, rewards, {"check.py": CODE_VERIFIER.replace("from rewards_sandbox import run_python",
                                                                             "run_python = print")},
                       environment=False)
    assert plain["rewards_sandbox.py"] == runner_source()  # every verifier runs in the sandbox's agent host
