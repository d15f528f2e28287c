"""Colocate mode on CPU: the rendered config/train.py (1-GPU target: vLLM inside the training process)
trains >= 3 optimiser steps with real vLLM generation, and TRL's per-step weight sync really reaches vLLM.

The sync check is shown to fail on a run whose sync is deliberately skipped (trl#5312's symptom), so it
cannot pass by construction. Both runs have TRL's importance-sampling correction on (the shim sets it; the
rendered recipe has it off) so that TRL logs sampling/sampling_logp_difference: the stale-weights
detector (finetune.watch.stale_weights, `finetune diagnose`) is checked on them here, and their
trainer_state.json logs are the committed fixtures tests/diagnose/data/stale_weights/ (FINETUNE_VLLM_FIXTURES=tests/diagnose/data/stale_weights make test-vllm refreshes them).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

pytest.importorskip("vllm")

from vllm_tier import log_history, read_probe, render_run, run_train, sync_problems, tail  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.vllm]
ONE_GPU = {"profile": "h100-80gb", "gpus": 1, "nodes": 1}
STEPS = 4  # the first step is the detector's baseline; 3 more after it


@pytest.fixture(scope="module")
def colocate_runs(tmp_path_factory, vllm_model_dir):
    """The same rendered run twice: TRL's weight sync as shipped, and with the sync skipped."""
    out = {}
    for name, broken in (("synced", "0"), ("stale", "1")):
        run = render_run(tmp_path_factory.mktemp("colocate") / name, vllm_model_dir, hardware=ONE_GPU)
        probe = run / "probe.jsonl"
        res = run_train(run, "--max-steps", str(STEPS), FINETUNE_VLLM_PROBE=str(probe),
                        FINETUNE_VLLM_BREAK_SYNC=broken, FINETUNE_VLLM_IS_CORRECTION="1")
        assert res.returncode == 0, tail(res)
        out[name] = (run, read_probe(probe))
        if os.environ.get("FINETUNE_VLLM_FIXTURES"):  # refresh tests/diagnose/data/stale_weights/ from these runs
            target = Path(os.environ["FINETUNE_VLLM_FIXTURES"]) / name
            target.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(run / "train" / "trainer_state.json", target / "trainer_state.json")
    return out


def test_rendered_colocate_config_trains_with_vllm(colocate_runs):
    run, _ = colocate_runs["synced"]
    text = (run / "config" / "grpo_config.yaml").read_text()
    assert "use_vllm: true" in text and "vllm_mode: colocate" in text  # rendered for the GPU, not --cpu
    steps = log_history(run)
    assert [e["step"] for e in steps] == list(range(1, STEPS + 1))
    assert all(e["completions/mean_length"] > 0 for e in steps)  # vLLM generated every step
    assert any(e.get("grad_norm", 0) > 0 for e in steps)  # the graded rewards gave a gradient


def test_vllm_follows_the_policy_after_each_sync(colocate_runs):
    _, rows = colocate_runs["synced"]
    assert len(rows) >= STEPS  # one sync per optimiser step (the first at step 0)
    assert sync_problems(rows) == []


def test_the_sync_check_fails_when_the_sync_is_skipped(colocate_runs):
    _, rows = colocate_runs["stale"]
    problems = sync_problems(rows)
    assert any("differs from the policy" in p for p in problems), problems
    assert any("no sync changed" in p for p in problems), problems


def test_stale_weights_detector_on_the_real_runs(colocate_runs):
    from finetune.watch import gap_from_history, stale_weights

    outcome = {name: stale_weights(gap_from_history(log_history(run))) for name, (run, _) in colocate_runs.items()}
    assert outcome["synced"].status == "clear", outcome["synced"].why
    assert outcome["stale"].status == "symptom", outcome["stale"].why
