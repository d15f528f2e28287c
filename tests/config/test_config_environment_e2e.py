"""A spec with a multi-turn tool `environment`: the user's env.py copied beside rewards.py and bound by the
gate; Phase 1 scores whole trajectories with the environment's own reward (replayed); the agent probes make
a broken environment reward (reachable by calling the tool with any arguments) FAIL the gate; the rendered
train.py trains with TRL's `environment_factory` on CPU with the tool-calling tiny model, tool calls executed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from finetune.demo import tools as demo_tools

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tool_model(tmp_path_factory):
    out = tmp_path_factory.mktemp("tool-model") / "model"
    return demo_tools.build_model(out)


def _run(run: Path, model: str, env_source: str = demo_tools.ENV_SOURCE) -> Path:
    run.mkdir(parents=True)
    (run / "data").mkdir()
    rows = demo_tools.rows(16, seed=1)
    (run / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "env.py").write_text(env_source)
    spec = {
        "name": "tools-e2e", "model": model,
        "dataset": {"path": "data/train.jsonl", "prompt_column": "prompt"},
        "environment": {"file": "env.py", "class": demo_tools.ENV_CLASS, "max_tool_calling_iterations": 2},
        "rewards": [{"name": "solved", "type": "environment"}],
        "hardware": {"profile": "h100-80gb", "gpus": 1, "nodes": 1},
        "generation": {"max_prompt_length": 512, "max_completion_length": 96},
        "training": {"per_device_train_batch_size": 4, "gradient_accumulation_steps": 2, "logging_steps": 1},
        "inspection": {"prompts": 4, "per_prompt": 2, "min_read": 50, "probe_prompts": 2},
    }
    path = run / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _trajectory(a: int, b: int, x: int, y: int) -> list[dict]:
    return [{"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "add", "arguments": {"a": x, "b": y}}}]},
        {"role": "tool", "name": "add", "content": str(x + y)},
        {"role": "assistant", "content": str(x + y)}]


def _score_trajectories(cli, spec: Path) -> dict:
    run = spec.parent
    samples = []
    for i, r in enumerate(demo_tools.rows(4, seed=1)):
        for k, (x, y) in enumerate([(r["a"], r["b"]), (r["a"], r["b"] + 1)]):
            samples.append({"id": f"p{i}-s{k}", "row": i, "prompt": r["prompt"],
                            "completion": _trajectory(r["a"], r["b"], x, y),
                            "columns": {"a": r["a"], "b": r["b"], "expected_call": r["expected_call"]}})
    (run / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    assert cli("inspect", "score", run).code == 0
    scored = [json.loads(line) for line in (run / "scored.jsonl").read_text().splitlines()]
    return {"scored": scored, "report": json.loads((run / "score_report.json").read_text())}


def test_environment_reward_replays_trajectories_and_probes_catch_a_broken_one(cli, tmp_path, tool_model):
    good = _run(tmp_path / "good", str(tool_model))
    assert cli("rewards", "render", good).code == 0
    assert (good.parent / "rewards_env.py").read_text() == demo_tools.ENV_SOURCE
    result = _score_trajectories(cli, good)
    by_id = {s["id"]: s for s in result["scored"]}
    assert all(by_id[f"p{i}-s0"]["rewards"]["solved"] == 1.0 for i in range(4))  # the right call
    assert all(by_id[f"p{i}-s1"]["rewards"]["solved"] == 0.0 for i in range(4))  # a wrong argument
    assert "<tool_response> add" in by_id["p0-s0"]["completion"]  # the review reads every turn and result
    assert not [p for p in result["report"]["probes"] if p["passing"]]

    bad = _run(tmp_path / "bad", str(tool_model), demo_tools.BROKEN_ENV_SOURCE)
    assert cli("rewards", "render", bad).code == 0
    report = _score_trajectories(cli, bad)["report"]
    passing = {p["probe"] for p in report["probes"] if p["passing"]}
    assert "junk_arguments:add" in passing, passing
    cli("inspect", "gate", bad.parent)
    gate = json.loads((bad.parent / "gate.json").read_text())
    assert gate["status"] == "FAIL"


def test_rendered_train_py_trains_with_environment_factory(cli, tmp_path, tool_model):
    spec = _run(tmp_path / "run", str(tool_model))
    run = spec.parent
    assert cli("rewards", "render", spec).code == 0
    assert cli("config", "render", spec, "--no-gate").code == 0
    train_py = (run / "config" / "train.py").read_text()
    assert "environment_factory=rewards.environment_factory" in train_py
    assert "max_tool_calling_iterations=2" in train_py
    # tool results escaped for the very tokenizer that tokenizes the turns, before the first rollout
    assert train_py.index("trainer = GRPOTrainer(") < train_py.index(
        "rewards.environment_tokenizer(trainer.processing_class)") < train_py.index("trainer.train()")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               OMP_NUM_THREADS="1", TRL_EXPERIMENTAL_SILENCE="1")
    proc = subprocess.run([sys.executable, "config/train.py", "--cpu", "--max-steps", "2"], cwd=run, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    log = json.loads(next(run.rglob("trainer_state.json")).read_text())["log_history"]
    steps = [e for e in log if "rewards/solved/mean" in e]
    assert steps, log
    # the tiny model called the tool and TRL executed it; no second, ungated reward column for the env
    assert max(e.get("tools/call_frequency", 0.0) for e in steps) > 0, steps
    assert not any("rewards/Calculator/mean" in e for e in log)
