"""The train/inference mismatch detector: vLLM's sampling logprobs disagree with the trainer's for the same weights.

Read on the REAL vLLM-tier logs of tests/diagnose/data/stale_weights/ (TRL's importance-sampling metrics logged by
the rendered colocate train.py with real vLLM on CPU): the synced run is clear, and so is the stale run (its gap
only grows after the first step: stale_vllm_weights names it). A run sampled with top_p 0.8 is that synced log with
the bias TRL #6789 measured for those filters — a mean ratio at the kept probability mass, 0.896, from the first
step on; the detector names the sampling filters and the correction as the fix, never a variant."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from finetune.diagnose import detectors, recommend
from finetune.diagnose.context import RunContext
from finetune.diagnose.evidence import Run
from finetune.diagnose.logs import load_logs

DATA = Path(__file__).parent / "data" / "stale_weights"
KEPT_MASS = 0.896  # trl#6789: mean ratio at top_p 0.8, top_k 1024 (Qwen2.5-1.5B-Instruct, vLLM 0.28)


def _run(tmp: Path, history: list[dict], config: dict) -> Run:
    (tmp / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in history))
    run = Run(load_logs(tmp / "metrics.jsonl"), RunContext(tmp, named_roles={}))
    run.ctx.config = config
    return run


def _history(name: str) -> list[dict]:
    return [e for e in json.loads((DATA / name / "trainer_state.json").read_text())["log_history"]
            if "sampling/importance_sampling_ratio/mean" in e]


def _filtered(history: list[dict]) -> list[dict]:
    """The synced run as if sampled with truncating filters: every ratio scaled by the kept mass, every logp
    difference shifted by -log of it (TRL's ratio is exp(trainer - vLLM) and vLLM renormalised over the kept set)."""
    out = []
    for e in history:
        e = dict(e)
        for k in ("min", "mean", "max"):
            e[f"sampling/importance_sampling_ratio/{k}"] *= KEPT_MASS
        e["sampling/sampling_logp_difference/mean"] += -math.log(KEPT_MASS)
        out.append(e)
    return out


@pytest.mark.parametrize("name", ["synced", "stale"])
def test_real_runs_show_no_mismatch(tmp_path, name):
    finding = detectors.mismatch(_run(tmp_path, _history(name), {"use_vllm": True, "top_p": 1.0}))
    assert finding.status == "clear", finding.why


def test_filters_with_the_correction_are_named_not_a_variant(tmp_path):
    config = {"use_vllm": True, "vllm_mode": "colocate", "top_p": 0.8, "top_k": 0, "min_p": 0.0,
              "vllm_importance_sampling_correction": True, "vllm_importance_sampling_mode": "sequence_mask"}
    finding = detectors.mismatch(_run(tmp_path, _filtered(_history("synced")), config))
    assert finding.status == "symptom" and "trl#6789" in finding.why and "'top_p': 0.8" in finding.why
    variant, change = recommend.recommended_change([finding], config, "grpo")
    assert variant == "grpo" and change["kind"] == "health"
    assert change["kwargs"] == {"top_p": {"from": 0.8, "to": 1.0}} and "trl#6789" in change["action"]


@pytest.mark.parametrize(("config", "says", "kwargs"), [
    ({"vllm_importance_sampling_correction": False, "vllm_importance_sampling_mode": "sequence_mask"},
     "turn the importance-sampling correction on", {"vllm_importance_sampling_correction"}),
    ({"vllm_mode": "server", "vllm_importance_sampling_correction": True}, "--logprobs-mode processed_logprobs",
     set()),
    ({"vllm_mode": "colocate", "vllm_importance_sampling_mode": "sequence_mask"}, "token_truncate",
     {"vllm_importance_sampling_mode"})])
def test_the_fix_follows_the_config(tmp_path, config, says, kwargs):
    finding = detectors.mismatch(_run(tmp_path, _filtered(_history("synced")), {"use_vllm": True, **config}))
    change = detectors.mismatch_change(finding, {"use_vllm": True, **config}, "dapo")
    assert finding.status == "symptom" and says in change["action"] and set(change["kwargs"]) >= kwargs
    assert change["variant"] == "dapo"  # the variant is kept


def test_without_the_metrics_it_says_why(tmp_path):
    history = [{k: v for k, v in e.items() if not k.startswith("sampling/")} | {"loss": 0.1}
               for e in _history("synced")]
    assert detectors.mismatch(_run(tmp_path, history, {"use_vllm": False})).why.startswith("the run generates with")
    assert detectors.mismatch(_run(tmp_path, history, {})).status == "not_evaluated"


def test_diagnose_names_it_on_a_logged_run(tmp_path, cli):
    state = tmp_path / "run" / "trainer_state.json"
    state.parent.mkdir()
    shutil.copyfile(DATA / "synced" / "trainer_state.json", state)
    doc = json.loads(state.read_text())
    doc["log_history"] = _filtered(_history("synced")) + [{"step": 4}]
    state.write_text(json.dumps(doc))
    assert cli("diagnose", state, "-o", tmp_path / "out").code == 0
    out = json.loads((tmp_path / "out" / "diagnosis" / "diagnosis.json").read_text())
    check = next(c for c in out["checks"] if c["name"] == detectors.MISMATCH)
    assert check["status"] == "symptom", check
