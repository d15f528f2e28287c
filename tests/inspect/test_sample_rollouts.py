"""`inspect sample` on a spec with an `environment` generates whole rollouts on the tool-calling tiny model:
every turn, tool call and tool result recorded in samples.jsonl, in the shape `--import` takes, the calls
executed by the run's own (rendered) environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from finetune.demo import tools as demo_tools
from finetune.inspect.samplesio import load_samples, trajectory_text

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def small_tool_model(tmp_path_factory):
    # a short warm-up: it writes calls (often with wrong numbers), which is all sampling needs here
    recipe = demo_tools.ToolWarmup(steps=80, hidden=64, intermediate=128)
    return demo_tools.build_model(tmp_path_factory.mktemp("tool-model") / "model", recipe)


def _spec(run: Path, model: Path) -> Path:
    run.mkdir(parents=True)
    rows = demo_tools.rows(8, seed=3)
    (run / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "env.py").write_text(demo_tools.ENV_SOURCE)
    spec = {"name": "rollouts", "model": str(model), "dataset": {"path": "train.jsonl", "prompt_column": "prompt"},
            "environment": {"file": "env.py", "class": demo_tools.ENV_CLASS, "max_tool_calling_iterations": 2},
            "rewards": [{"name": "solved", "type": "environment"}],
            "hardware": {"profile": "h100-80gb", "gpus": 1, "nodes": 1},
            "generation": {"max_prompt_length": 128, "max_completion_length": 64},
            "inspection": {"prompts": 4, "per_prompt": 4, "min_read": 50, "probe_prompts": 2,
                           "base_success": {"prompts": 2, "samples_per_prompt": 4, "temperature": 0.3}}}
    path = run / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_sample_generates_trajectories_with_executed_tool_calls(cli, tmp_path, small_tool_model):
    spec = _spec(tmp_path / "run", small_tool_model)
    assert cli("rewards", "render", spec).code == 0
    result = cli("inspect", "sample", spec)
    assert result.code == 0, result.err
    run = spec.parent
    stored = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert len(stored) == 16
    with_calls = [s for s in stored if any(m.get("tool_calls") for m in s.get("trajectory") or [])]
    assert with_calls, [s["completion"] for s in stored]
    for s in with_calls:
        traj = s["trajectory"]
        assert s["completion"] == trajectory_text(traj)  # what the review shows and the rewards read
        for turn, after in zip(traj, traj[1:]):
            for call in turn.get("tool_calls") or []:
                args = call["function"]["arguments"]
                if after["role"] == "tool" and set(args) == {"a", "b"}:
                    # the environment ran the call: its result, not the model's text, follows the call
                    assert after["content"] == str(args["a"] + args["b"])
    # the import reads the generated file back unchanged: one shape for generated and imported rollouts
    reread = load_samples(run / "samples.jsonl")
    assert [r["trajectory"] for r in reread if "trajectory" in r] == [s["trajectory"] for s in stored
                                                                       if "trajectory" in s]
    info = json.loads((run / "sample_info.json").read_text())
    assert info["samples"] == 16 and info["base_samples"] == 8
    assert cli("inspect", "score", run).code == 0
    scored = [json.loads(line) for line in (run / "scored.jsonl").read_text().splitlines()]
    assert {type(r["rewards"]["solved"]) for r in scored} <= {float}
