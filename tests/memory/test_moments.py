"""The moments a run dies at (finetune.memory.moments): each sized from what TRL 1.16 / transformers do at that
moment, every rule tied to the installed source by a digest, and a layout that fits only when every moment fits."""

from __future__ import annotations

import pytest

from finetune.hardware import resolve_hardware
from finetune.memory.estimate import Knobs, estimate
from finetune.memory.formulas import GIB, QLORA_BYTES_PER_PARAM
from finetune.memory.moments import SOURCES, source_digest, source_drift
from finetune.models import load_model_info


@pytest.fixture(scope="module")
def qwen72():
    return load_model_info("Qwen/Qwen2.5-72B")


@pytest.fixture(scope="module")
def qwen32():
    return load_model_info("Qwen/Qwen2.5-32B")


def _moment(est, key):
    return next(m for m in est.moments if m.key == key)


def test_the_rules_rest_on_the_installed_source():
    """Every function the moments read hashes as it did when the rules were checked (TRL 1.16 and transformers)."""
    assert source_drift() == []
    assert {"trl==1.16.0", "transformers==5.24.0"} <= set(SOURCES)


def test_a_changed_or_unlisted_source_fails_the_check():
    target = "trl.generation.vllm_generation:VLLMGeneration._iter_named_params"
    changed = source_drift({"trl==1.16.0": {target: "0" * 64}})
    assert changed == [f"trl==1.16.0: {target} changed since the moments were checked against it"]
    unlisted = source_drift({"trl==0.0.1": {target: source_digest(target)}})
    assert unlisted and "trl==1.16.0" in unlisted[0] and "not this version" in unlisted[0]


def test_peft_under_zero3_gathers_the_whole_policy_at_the_weight_sync(qwen72, qwen32):
    """TRL 1.16's PEFT branch gathers every parameter at once: ~135 GiB for Qwen2.5-72B LoRA on any H100 count,
    61 GiB for Qwen2.5-32B on A100-40GB — never 'gathered parameter by parameter'."""
    lora72 = estimate(qwen72, resolve_hardware({"profile": "h100-80gb", "gpus": 8}),
                      Knobs("lora", zero_stage=3, vllm_mode="server", vllm_gpus=4, vllm_tensor_parallel_size=4))
    sync = _moment(lora72, "sync")
    assert sync.gib > 2 * qwen72.params / GIB > 135 and "every parameter at once" in sync.detail
    assert "twice" in sync.detail  # server mode walks the parameters twice on the first sync
    assert lora72.verdict == "does not fit" and lora72.binding is sync
    lora32 = estimate(qwen32, resolve_hardware({"profile": "a100-40gb", "gpus": 8}),
                      Knobs("lora", zero_stage=3, vllm_mode="server", vllm_gpus=2, vllm_tensor_parallel_size=2))
    assert _moment(lora32, "sync").gib > 61 > lora32.step_gib  # the step alone would have fitted
    assert lora32.verdict == "does not fit"
    full = estimate(qwen32, resolve_hardware({"profile": "h100-80gb", "gpus": 8}),
                    Knobs("full", zero_stage=3, vllm_mode="server", vllm_gpus=1))
    assert "one parameter at a time" in _moment(full, "sync").detail


def test_qlora_under_zero3_loads_whole_on_every_rank_and_gathers_whole_to_generate(qwen32):
    """transformers skips zero.Init for a quantized model: the 4-bit policy is whole on each rank at load, however
    DeepSpeed shards it afterwards (through bnb_4bit_quant_storage); QLoRA generates with transformers (vLLM 0.30 has
    no bitsandbytes), and TRL's unwrap_model_for_generation gathers every parameter under ZeRO-3."""
    hw = resolve_hardware({"profile": "a100-40gb", "gpus": 4})
    est = estimate(qwen32, hw, Knobs("qlora", zero_stage=3, per_device_train_batch_size=1,
                                     gradient_accumulation_steps=8))
    q = qwen32.quantizable_params
    whole = (q * QLORA_BYTES_PER_PARAM + (qwen32.params - q) * 2) / GIB
    load = _moment(est, "load")
    assert est.gib_of("policy_weights") == pytest.approx(whole / 4)  # sharded once DeepSpeed runs
    assert load.gib == pytest.approx(whole + est.gib_of("adapters") + 1.0)  # + the CUDA context
    assert "loaded whole on every rank (no zero.Init" in load.detail and est.layout.quant_storage == "bfloat16"
    assert est.gib_of("zero3_generation_gather") == pytest.approx(whole * 3 / 4)
    assert {m.key for m in est.moments} == {"load", "step"}  # no engine, no weight sync without vLLM


def test_zero2_leaves_the_policy_on_the_cpu_until_deepspeed_starts():
    qwen7 = load_model_info("Qwen/Qwen2.5-7B")
    hw = resolve_hardware({"profile": "h100-80gb", "gpus": 4})
    z2 = _moment(estimate(qwen7, hw, Knobs("full", zero_stage=2, vllm_gpu_memory_utilization=0.3)), "load")
    ddp = _moment(estimate(qwen7, hw, Knobs("lora", zero_stage=0, vllm_gpu_memory_utilization=0.3)), "load")
    assert "on the CPU" in z2.detail and z2.gib < ddp.gib
    assert "loaded whole" in ddp.detail and ddp.gib > 2 * qwen7.params / GIB


def test_a_colocated_share_that_cannot_both_hold_the_engine_and_be_free_says_so(qwen32):
    """Qwen2.5-32B LoRA on one A100-40GB: the bf16 policy leaves too little free for any share that holds the
    engine, so the problem says no share fits — never 'raise' beside a start-up check that fails for the opposite
    reason."""
    est = estimate(qwen32, resolve_hardware("a100-40gb"), Knobs("lora", vllm_gpu_memory_utilization=0.85))
    assert est.verdict == "does not fit"
    assert all("no share fits on this GPU" in p for p in est.problems if "vLLM" in p)
    for sug in est.suggestions:  # a suggestion claims to fit only when its re-estimate does
        assert not sug.fits_after or sug.total_after_gib <= est.memory_gib


def test_a_layout_fits_only_when_every_moment_does(qwen72):
    """The issue's Qwen2.5-72B LoRA on 8 × H100 under ZeRO-3 (server on 4): its step fits the card — the estimate
    used to say "fits" here — but the first weight sync gathers the whole policy: it does not fit, the sync binds."""
    est = estimate(qwen72, resolve_hardware({"profile": "h100-80gb", "gpus": 8}),
                   Knobs("lora", zero_stage=3, vllm_mode="server", vllm_gpus=4, vllm_tensor_parallel_size=4,
                         per_device_train_batch_size=1, gradient_accumulation_steps=8))
    assert est.step_gib < est.fit_limit_gib and est.verdict == "does not fit"
    assert est.binding.key == "sync" and est.binding.gib > est.binding.limit_gib
    assert est.to_dict()["binding_moment"] == "sync" and "Binding moment: **weight sync" in est.to_markdown()
