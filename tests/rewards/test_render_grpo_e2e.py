"""End to end: a rendered rewards.py, imported from its folder, drives a real GRPOTrainer on CPU."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from reward_helpers import reward_specs

from finetune.rewards.render import render_sources


@pytest.mark.slow
def test_rendered_rewards_train_with_grpo(tiny_model_dir, tmp_path, judge_server):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    url, _ = judge_server
    entries = [
        {"name": "format", "type": "format", "pattern": "answer_tag", "weight": 0.2},
        {"name": "correctness", "type": "exact_match", "answer_column": "answer"},
        {"name": "math_ok", "type": "math", "answer_column": "answer", "extract": "answer_tag", "timeout_s": 5.0},
        {"name": "schema_ok", "type": "json_schema", "schema": {"type": "object"}, "extract": "answer_tag"},
        {"name": "tests_ok", "type": "unit_tests", "tests_column": "tests", "extract": "answer_tag",
         "min_isolation": "process", "workers": 2},
        {"name": "rubric", "type": "judge", "endpoint": url, "model": "judge", "rubric": "GOOD is right",
         "timeout_s": 5.0},
        {"name": "overlong", "type": "length_penalty", "overlong_buffer": 8},
    ]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for name, text in render_sources(reward_specs(entries), run_name="e2e", max_completion_length=16).items():
        (run_dir / name).write_text(text)
    # Import as the rendered train.py does: `from rewards import REWARD_FUNCS, REWARD_WEIGHTS` with the
    # run directory on sys.path.
    sys.path.insert(0, str(run_dir))
    try:
        for stale in ("rewards", "rewards_mathpool", "rewards_sandbox"):
            sys.modules.pop(stale, None)
        rewards = importlib.import_module("rewards")
        assert rewards.__file__ == str(run_dir / "rewards.py")
        dataset = Dataset.from_dict({
            "prompt": [f"What is {a} plus {a}?" for a in range(8)],
            "answer": [str(2 * a) for a in range(8)],
            "tests": [[f"assert double({a}) == {2 * a}"] for a in range(8)],
        })
        args = GRPOConfig(output_dir=str(tmp_path / "train"), use_cpu=True, bf16=False, report_to="none",
                          max_steps=2, per_device_train_batch_size=4, num_generations=4, max_completion_length=16,
                          logging_steps=1, save_strategy="no", disable_tqdm=True, learning_rate=5e-7, beta=0.0,
                          loss_type="dapo", scale_rewards="group", temperature=1.0, seed=3407,
                          reward_weights=list(rewards.REWARD_WEIGHTS))
        trainer = GRPOTrainer(model=str(tiny_model_dir), reward_funcs=list(rewards.REWARD_FUNCS), args=args,
                              train_dataset=dataset)
        trainer.train()
    finally:
        sys.path.remove(str(run_dir))
        for name in ("rewards", "rewards_mathpool", "rewards_sandbox"):
            sys.modules.pop(name, None)
    logged = {key for entry in trainer.state.log_history for key in entry}
    for entry in entries:
        assert f"rewards/{entry['name']}/mean" in logged, sorted(logged)
        assert f"rewards/{entry['name']}/errors" in logged, sorted(logged)  # through TRL's log_metric
    errors = [e[f"rewards/{n['name']}/errors"] for e in trainer.state.log_history for n in entries
              if f"rewards/{n['name']}/errors" in e]
    assert all(value == 0.0 for value in errors)
