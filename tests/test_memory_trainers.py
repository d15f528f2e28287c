"""`finetune memory --trainer sft|dpo`: SFT / DPO steps sized without generation, checked against a real
SFTTrainer step's peak (torch profiler, CPU) within the GRPO estimator's tolerance (15% median target)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from finetune.memory_trainers import estimate_step, measure_sft_step_peak
from finetune.models import load_model_info

TOLERANCE = 0.15  # the GRPO estimator's median target (benchmarks/bench_memory.py)


def test_components_follow_the_trainer_and_method(cli):
    info = load_model_info("meta-llama/Llama-3.1-8B")
    full = estimate_step(info, "sft", "full", seq_len=1024)
    lora = estimate_step(info, "sft", "lora", seq_len=1024)
    qlora = estimate_step(info, "sft", "qlora", seq_len=1024)
    dpo_full = estimate_step(info, "dpo", "full", seq_len=1024)
    dpo_lora = estimate_step(info, "dpo", "lora", seq_len=1024)
    assert qlora.components["weights"] < lora.components["weights"] == full.components["weights"]
    assert lora.components["optimizer"] < full.components["optimizer"] / 100
    assert dpo_full.components["reference"] == full.components["weights"] and dpo_lora.components["reference"] == 0
    assert dpo_lora.components["activations"] == 2 * lora.components["activations"]  # chosen + rejected
    r = cli("memory", "--model", "Qwen/Qwen2.5-7B", "--trainer", "sft", "--method", "qlora", "--json")
    assert r.code == 0, r.err
    out = json.loads(r.out)
    assert out["trainer"] == "sft" and not any("vllm" in k or "kv" in k for k in out["components"])
    r = cli("memory", "examples/spec.yaml", "--trainer", "sft")
    assert r.code == 2 and "--model" in r.err


@pytest.mark.slow
def test_sft_estimate_matches_a_real_sft_step_peak(tmp_path):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from finetune.models import resolve_config_path
    from finetune.tinymodel import build_tiny_model

    tiny = build_tiny_model(tmp_path / "tiny")  # its WordLevel tokenizer
    raw = json.loads(resolve_config_path("Qwen/Qwen2.5-0.5B").read_text())
    raw.update(num_hidden_layers=2, vocab_size=8192, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    model_dir = tmp_path / "cut"
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(AutoConfig.for_model(**raw), dtype=torch.float32).save_pretrained(model_dir)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(Path(tiny) / name, model_dir / name)
    measured = measure_sft_step_peak(str(model_dir), seq_len=512, batch=2)
    est = estimate_step(load_model_info(str(model_dir)), "sft", "full", seq_len=512, batch=2, checkpointing=False,
                        param_bytes=4, mixed_precision=False)
    assert abs(est.above_weights / measured - 1) <= TOLERANCE, (est.above_weights / 2**20, measured / 2**20)
