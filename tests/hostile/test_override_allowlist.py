"""`overrides:` by allowlist: each field that changes what is optimised, where weights or completions go, what
generates, where the model runs, which rows train, or the environment's gated tool bound is refused in one line
naming where it belongs; the optimiser's shape needs the learning rate's licence; BRIEF.md shows every override
that passes with its effect. Every GRPOConfig field is classified: tests/config/test_overrides.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from render_fixtures import write_run  # noqa: E402

REFUSED = {  # each reproduction: the overrides, a phrase of the one line
    "hub": ({"push_to_hub": True, "hub_model_id": "someone-else/model"}, "where the weights or the completions go"),
    "hub_token": ({"hub_token": "hf_xxx"}, "where the weights or the completions go"),
    "report_to": ({"report_to": ["wandb"]}, "where the run's metrics are reported"),
    "log_completions_hub_repo": ({"log_completions_hub_repo": "x/y"}, "where the weights or the completions go"),
    "vllm_server_base_url": ({"vllm_server_base_url": "http://203.0.113.9:8000"}, "what generates the completions"),
    "deepspeed": ({"deepspeed": "ds.json"}, "where the model is sharded and run"),
    "fsdp": ({"fsdp": "full_shard"}, "where the model is sharded and run"),
    "resume_from_checkpoint": ({"resume_from_checkpoint": "/tmp/other"}, "which weights training starts from"),
    "torch_compile": ({"torch_compile": True}, "how the loss is computed"),
    "max_tool_calling_iterations": ({"max_tool_calling_iterations": 50}, "environment.max_tool_calling_iterations"),
    "shuffle_dataset": ({"shuffle_dataset": False}, "which rows train"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_refused_override_family_fails_closed_in_one_line(tmp_path, tiny_model_dir, cli, case):
    overrides, phrase = REFUSED[case]
    spec = write_run(tmp_path / "r", str(tiny_model_dir), overrides=overrides)
    r = cli("config", "render", spec, "--no-gate")
    lines = [ln for ln in r.err.strip().splitlines() if not ln.startswith("WARNING")]
    assert r.code == 2 and len(lines) == 1 and "overrides." in lines[0] and phrase in lines[0], r.err
    assert "Traceback" not in r.err and not (spec.parent / "config").exists()


@pytest.mark.parametrize("overrides", [
    {"lr_scheduler_type": "cosine_with_min_lr", "lr_scheduler_kwargs": {"min_lr": 0.001}},
    {"max_grad_norm": 1e6},
])
def test_the_optimisers_shape_needs_the_learning_rates_licence(tmp_path, tiny_model_dir, cli, overrides):
    spec = write_run(tmp_path / "r", str(tiny_model_dir), overrides=overrides)
    r = cli("config", "render", spec, "--no-gate")
    assert r.code == 1 and f"overrides.{next(iter(overrides))}" in r.err and "base recipe" in r.err, r.err
    assert not (spec.parent / "config").exists()


def test_brief_shows_every_override_that_passes_with_its_effect(tmp_path, tiny_model_dir, cli):
    spec = write_run(tmp_path / "r", str(tiny_model_dir), overrides={"save_total_limit": 2,
                                                                     "dataloader_num_workers": 0})
    assert cli("config", "render", spec, "--no-gate").code == 0
    brief = (spec.parent / "config" / "BRIEF.md").read_text()
    assert "checkpoint cadence" in brief and "data-loading speed" in brief, brief
