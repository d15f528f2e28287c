"""The stale-weights detector (vLLM sampling from weights the policy has left, trl#5312) on REAL logs.

tests/diagnose/data/stale_weights/ holds the trainer_state.json of two runs of the vLLM tier
(tests/vllm_cpu/test_colocate.py: the rendered colocate train.py with real vLLM on CPU, 4 steps, TRL's
importance-sampling correction on so that TRL logs sampling/sampling_logp_difference): `synced`
with TRL's weight sync as shipped, `stale` with the sync skipped. No vLLM is needed to read them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from finetune import watch

DATA = Path(__file__).parent / "data" / "stale_weights"


def _history(name: str) -> list[dict]:
    return json.loads((DATA / name / "trainer_state.json").read_text())["log_history"]


@pytest.fixture
def diagnosed(tmp_path, cli):
    def run(name: str) -> dict:
        state = tmp_path / name / "trainer_state.json"
        state.parent.mkdir()
        shutil.copyfile(DATA / name / "trainer_state.json", state)
        assert cli("diagnose", state, "-o", tmp_path / f"out-{name}").code == 0
        doc = json.loads((tmp_path / f"out-{name}" / "diagnosis" / "diagnosis.json").read_text())
        return {"doc": doc, "check": next(c for c in doc["checks"] if c["name"] == "stale_vllm_weights")}
    return run


def test_the_fixtures_are_the_two_real_runs():
    for name in ("synced", "stale"):
        steps = [e for e in _history(name) if watch.K_SAMPLING_GAP in e]
        assert len(steps) >= watch.STALE_MIN_POINTS and all("completions/mean_length" in e for e in steps)


def test_diagnose_names_stale_weights_on_the_broken_sync_run(diagnosed):
    out = diagnosed("stale")
    assert out["check"]["status"] == "symptom", out["check"]
    assert "stale_vllm_weights" in [s["name"] for s in out["doc"]["symptoms"]]
    change = out["doc"]["recommended_change"]
    assert change["addresses"] == "stale_vllm_weights" and "weight sync" in change["action"]


def test_diagnose_clears_the_synced_run(diagnosed):
    out = diagnosed("synced")
    assert out["check"]["status"] == "clear", out["check"]
    assert "stale_vllm_weights" not in [s["name"] for s in out["doc"]["symptoms"]]


def test_without_the_metric_the_detector_says_why_it_cannot_tell():
    history = [{k: v for k, v in e.items() if not k.startswith("sampling/")} for e in _history("stale")]
    d = watch.stale_weights(watch.gap_from_history(history))
    assert d.status == "not_evaluated" and "vllm_importance_sampling_correction" in d.why
    d = watch.stale_weights(watch.gap_from_history(_history("stale")[:2]))
    assert d.status == "not_evaluated"


def _inspect_every_step(history: list[dict]) -> list[list[dict]]:
    """The in-training rule at every logged step of a real run, as the callback would see the log."""
    from finetune.rewards.lib.rewards_meta import RewardMeta

    meta = [RewardMeta(name=name, type=type_, role=role, weight=weight, threshold=1.0, min=0.0, max=1.0, gated=False,
                       episode=False)
            for name, type_, role, weight in (("format_ok", "format", "format", 0.2),
                                              ("correct", "exact_match", "correctness", 1.0))]
    settings = watch.Settings(every_steps=1, sample_rows=4, max_completion_length=16, meta=meta)
    state, out = watch.WatchState(), []
    logged = [e for e in history if "loss" in e]
    for i, entry in enumerate(logged, 1):
        reasons, metrics = watch.stop_reasons(entry["step"], [], logged[:i], settings, state)
        out.append([r for r in reasons if r["rule"] == "stale_vllm_weights"])
        assert "inspection/stale_weights" in metrics
    return out


def test_the_inspection_callback_stops_the_stale_run_only():
    stale = _inspect_every_step(_history("stale"))
    assert any(stale) and stale[-1][0]["evidence"]["consecutive_inspections"] >= watch.CONFIRM
    assert not any(_inspect_every_step(_history("synced")))
