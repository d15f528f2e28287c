"""finetune.memory: the formula checks of memory-figures.md, the estimate's components and verdicts,
recommend() (contract 8), the CLI and the generated reference doc."""

from __future__ import annotations

import pytest

from finetune.errors import UserError
from finetune.hardware import PROFILES, resolve_hardware
from finetune.memory import (GIB, accumulation_for, estimate, kv_cache_bytes, logits_bytes, recommend)
from finetune.models import load_model_info


@pytest.fixture(scope="module")
def llama8b():
    return load_model_info("meta-llama/Llama-3.1-8B")


@pytest.fixture(scope="module")
def qwen7b():
    return load_model_info("Qwen/Qwen2.5-7B")


def test_unsloth_logits_and_kv_figures(llama8b):
    # Unsloth GRPO blog: 8 generations × 20,480 tokens → logits 78.3 GiB, KV 2.5 GiB (their GB are GiB).
    assert round(logits_bytes(8, 20_480, llama8b.vocab) / GIB, 1) == 78.3
    assert kv_cache_bytes(llama8b, 20_480) / GIB == 2.5
    est = estimate(llama8b, resolve_hardware("h200-141gb"), "lora", per_device_train_batch_size=8,
                   max_prompt_length=1, max_completion_length=20_480)
    assert round(est.gib_of("logits"), 1) == 78.3


def test_hardware_profiles_and_resolution():
    assert {"h100-80gb", "a100-80gb", "a100-40gb", "rtx-4090-24gb", "l40s-48gb", "h200-141gb", "dgx-spark",
            "cpu"} <= set(PROFILES)
    spark = PROFILES["dgx-spark"]
    assert spark.unified and spark.memory_gib == 119.7 and spark.bandwidth_gbs == 273
    hw = resolve_hardware({"profile": "a100-40gb", "gpus": 4, "nodes": 2, "gpu_memory_gib": 38, "vllm_gpus": 2})
    assert (hw.total_gpus, hw.training_gpus, hw.memory_gib) == (8, 6, 38)
    with pytest.raises(UserError) as err:
        resolve_hardware({"profile": "tpu-v5"})
    assert err.value.where == "hardware.profile"
    with pytest.raises(UserError):
        resolve_hardware({"profile": "h100-80gb", "gpus": 2, "vllm_gpus": 2})
