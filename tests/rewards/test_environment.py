"""The `environment` reward and the spec's environment section without a model: the user's env.py copied as
rewards_env.py, its get_reward hidden from TRL's probe, episodes replayed from a completion's calls (text or
TRL messages), bad files refused with one line, trajectories kept whole in samples."""

from __future__ import annotations

import importlib.util
import inspect
import json
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from finetune.demo import tools as demo_tools
from finetune.errors import UserError
from finetune.inspect.samplesio import normalise_row
from finetune.rewards.registry import RewardSpec
from finetune.rewards.render import render_sources
from finetune.spec import EnvironmentSpec

REWARD = [TypeAdapter(RewardSpec).validate_python({"name": "solved", "type": "environment"})]


def _render(tmp_path: Path, source: str = demo_tools.ENV_SOURCE, cls: str = "Calculator"):
    (tmp_path / "env.py").write_text(source)
    env = EnvironmentSpec.model_validate({"file": "env.py", "class": cls})
    files = render_sources(REWARD, source_path=tmp_path / "spec.yaml", tool_env=env)
    out = tmp_path / "run"
    out.mkdir()
    for name, text in files.items():
        (out / name).write_text(text)
    spec = importlib.util.spec_from_file_location(f"rw_{id(out)}", out / "rewards.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return files, module


def _call(a: int, b: int) -> str:
    return "<tool_call>\n" + json.dumps({"name": "add", "arguments": {"a": a, "b": b}}) + "\n</tool_call>"


def test_replay_scores_the_episode_and_hides_get_reward_from_trl(tmp_path):
    files, module = _render(tmp_path)
    assert files["rewards_env.py"] == demo_tools.ENV_SOURCE
    completions = [_call(3, 4), _call(4, 3), _call(3, 5), "7", f"<think>{_call(3, 4)}</think>7",
                   [{"role": "assistant", "content": "", "tool_calls": [
                       {"type": "function", "function": {"name": "add", "arguments": {"a": 3, "b": 4}}}]},
                    {"role": "tool", "name": "add", "content": "7"}, {"role": "assistant", "content": "7"}]]
    n = len(completions)
    scores = module.solved(prompts=["What is 3 plus 4?"] * n, completions=completions, a=[3] * n, b=[4] * n)
    assert scores == [1.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    # TRL lists the environment's functions on the class: get_reward must not be one (no second reward)
    members = {name for name, _ in inspect.getmembers(type(module.environment_factory()), inspect.isfunction)}
    assert "get_reward" not in members and {"add", "reset"} <= members
    # in training the reward reads TRL's own rollout instances
    env = module.environment_factory()
    env.reset(a=2, b=2)
    env.add(2, 2)
    assert module.solved(prompts=["p"], completions=["4"], environments=[env], a=[2], b=[2]) == [1.0]


def test_reward_meta_marks_the_episode_reward_for_training_checks(tmp_path):
    """REWARD_META carries the kind's `episode` mark, which the live length check in train.py skips."""
    _, module = _render(tmp_path)
    assert [m.episode for m in module.REWARD_META] == [True]


def test_out_of_range_environment_reward_is_none(tmp_path):
    _, module = _render(tmp_path, demo_tools.ENV_SOURCE.replace("return 1.0 if", "return 3.0 if"))
    assert module.solved(prompts=["p"], completions=[_call(3, 4)], a=[3], b=[4]) == [None]


@pytest.mark.parametrize("source, cls, message", [
    ("class Other:\n    def reset(self, **row): pass\n", "Calculator", "defines no class 'Calculator'"),
    ("class Calculator:\n    def add(self, a: int) -> int:\n        return a\n", "Calculator", "no reset()"),
    ("class Calculator:\n    def reset(self, **row): pass\n", "Calculator", "no public method"),
    ("class Calculator(:\n", "Calculator", "fix the syntax error"),
])
def test_bad_environment_files_are_refused(tmp_path, source, cls, message):
    with pytest.raises(UserError, match=message):
        _render(tmp_path, source, cls)


def test_samples_keep_a_trajectory_whole_and_show_every_turn():
    messages = [{"role": "assistant", "content": "Let me add.", "tool_calls": [
        {"type": "function", "function": {"name": "add", "arguments": {"a": 3, "b": 4}}}]},
        {"role": "tool", "name": "add", "content": "7"}, {"role": "assistant", "content": "It is 7."}]
    row = normalise_row({"prompt": "What is 3 plus 4?", "completion": messages}, "x", 0)
    assert row["trajectory"] == messages
    assert row["completion"] == ('Let me add.\n<tool_call>\n{"name": "add", "arguments": {"a": 3, "b": 4}}\n'
                                 "</tool_call>\n<tool_response> add\n7\n</tool_response>\nIt is 7.")
    with pytest.raises(UserError, match="trajectory"):
        normalise_row({"prompt": "p", "completion": "x", "trajectory": [{"role": "user", "content": "hi"}]}, "x", 0)


def test_warmup_schema_is_what_trl_shows_the_model():
    """The warm-up renders the prompt TRL renders: TOOL_SCHEMA is transformers' schema of Calculator.add."""
    from transformers.utils import get_json_schema

    namespace: dict = {}
    exec(compile(demo_tools.ENV_SOURCE, "env.py", "exec"), namespace)
    assert get_json_schema(namespace[demo_tools.ENV_CLASS]().add) == demo_tools.TOOL_SCHEMA


def _hostile_run(tmp_path: Path, env: dict, layout) -> Path:
    run = tmp_path / "run"
    (run / "data").mkdir(parents=True)
    (run / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in demo_tools.rows(4, seed=1)))
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "env.py").write_text(demo_tools.ENV_SOURCE)
    layout(run, tmp_path / "elsewhere" / "env.py")
    spec = {"name": "h", "model": "Qwen/Qwen2.5-0.5B-Instruct",
            "dataset": {"path": "data/train.jsonl", "prompt_column": "prompt"},
            "environment": {"class": demo_tools.ENV_CLASS, **env}, "rewards": [{"name": "solved", "type": "environment"}],
            "hardware": {"profile": "h100-80gb", "gpus": 1, "nodes": 1}}
    import yaml

    (run / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return run


def _copy(run: Path, outside: Path) -> None:
    (run / "env.py").write_text(outside.read_text())


@pytest.mark.parametrize("env, layout, message", [
    ({"file": "../elsewhere/env.py"}, lambda run, out: None, "outside the spec's folder"),
    ({"file": "ABSOLUTE"}, lambda run, out: None, "outside the spec's folder"),
    ({"file": "env.py"}, lambda run, out: (run / "env.py").symlink_to(out), "outside the spec's folder"),
    ({"file": "env.py", "class": "NoSuchClass"}, _copy, "defines no class 'NoSuchClass'"),
    ({"file": "env.py", "max_tool_calling_iterations": 0}, _copy, "greater than or equal to 1"),
    ({"file": "env.py", "max_tool_calling_iterations": 10**9}, _copy, "less than or equal to 64"),
    ({"file": "env.py", "max_tool_calling_iterations": True}, _copy, "valid integer"),
    ({"file": "env.py", "max_tool_calling_iterations": "4"}, _copy, "valid integer"),
    ({"file": "env.py", "max_tool_calling_iterations": 2.5}, _copy, "valid integer"),
])
def test_hostile_environment_section_is_one_line_exit_2_nothing_written(cli, tmp_path, env, layout, message):
    if env["file"] == "ABSOLUTE":
        env = {**env, "file": str(tmp_path / "elsewhere" / "env.py")}
    run = _hostile_run(tmp_path, env, layout)
    before = sorted(p.name for p in run.iterdir())
    result = cli("rewards", "render", run / "spec.yaml")
    assert result.code == 2 and message in result.err and len(result.err.strip().splitlines()) == 1, result
    assert "Traceback" not in result.err and sorted(p.name for p in run.iterdir()) == before


def test_a_symlink_inside_the_spec_folder_is_fine(cli, tmp_path):
    def layout(run: Path, out: Path) -> None:
        (run / "envs").mkdir()
        _copy(run / "envs", out)
        (run / "env.py").symlink_to(run / "envs" / "env.py")

    run = _hostile_run(tmp_path, {"file": "env.py"}, layout)
    assert cli("rewards", "render", run / "spec.yaml").code == 0
    assert (run / "rewards_env.py").read_text() == demo_tools.ENV_SOURCE


def test_replay_runs_only_the_calls_trl_ran(tmp_path):
    """At max_tool_calling_iterations TRL stops without running the last turn's calls: the replay must not
    run them either (it would credit an episode training scored 0); below the cap a last turn's calls ran
    (their results were dropped for the length budget) and are replayed."""
    def rollout(*pairs, answered_last=True):
        messages = []
        for n, (x, y) in enumerate(pairs):
            messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": "add", "arguments": {"a": x, "b": y}}}]})
            if answered_last or n < len(pairs) - 1:
                messages.append({"role": "tool", "name": "add", "content": str(x + y)})
        return messages

    (tmp_path / "env.py").write_text(demo_tools.ENV_SOURCE)
    results = {}
    for cap in (1, 2):
        env = EnvironmentSpec.model_validate({"file": "env.py", "class": "Calculator", "max_tool_calling_iterations": cap})
        out = tmp_path / f"cap{cap}"
        out.mkdir()
        for name, text in render_sources(REWARD, source_path=tmp_path / "spec.yaml", tool_env=env).items():
            (out / name).write_text(text)
        spec = importlib.util.spec_from_file_location(f"rw_cap{cap}", out / "rewards.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        completions = [rollout((3, 5), (3, 4), answered_last=False), rollout((3, 5), (3, 4)), rollout((3, 4))]
        results[cap] = module.solved(prompts=["p"] * 3, completions=completions, a=[3] * 3, b=[4] * 3)
    assert results == {1: [0.0, 1.0, 1.0], 2: [1.0, 1.0, 1.0]}
