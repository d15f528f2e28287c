"""Published memory figures beside what :mod:`finetune.memory` computes for the same setup."""

from __future__ import annotations

from dataclasses import dataclass

from finetune.hardware import resolve_hardware
from finetune.memory.estimate import Knobs, estimate
from finetune.memory.formulas import (
    GIB,
    VLLM_OVERHEAD_GIB,
    decode_bound_tokens_per_s,
    gib,
    kv_cache_bytes,
    logits_bytes,
)
from finetune.memory.result import Estimate


@dataclass(frozen=True)
class FigureCheck:
    """A published figure beside what this module computes for the same setup.

    ``scored``: the setup is known well enough that the difference is the estimator's error. Unscored
    figures (setup partly unknown, another framework's kernels, SFT not GRPO) are shown as reported.
    """

    key: str
    source: str
    what: str
    setup: str
    published: float
    unit: str
    ours: float
    scored: bool
    note: str = ""
    kind: str = "measurement"  # or "formula": a published computation, exact once the formula is right

    @property
    def error(self) -> float:
        """Relative error of ours against the published figure."""
        return (self.ours - self.published) / self.published


def published_checks() -> list[FigureCheck]:
    """Every published memory figure (references/sources.md says where each comes from) with this module's value
    for its setup."""
    return [*_formula_checks(), *_trl3162_checks(), *_engine_checks(), *_unsloth_checks(), *_spark_checks()]


def _formula_checks() -> list[FigureCheck]:
    """Published computations: Unsloth's logits / KV figures, LoRA parameter counts."""
    from finetune.models import load_model_info

    llama8 = load_model_info("meta-llama/Llama-3.1-8B")
    qwen7 = load_model_info("Qwen/Qwen2.5-7B")
    return [
        FigureCheck("unsloth-logits", "Unsloth GRPO blog (Feb 2025)", "completion logits, Llama-3.1-8B",
                    "8 generations × 20,480 tokens (materialised)", 78.3, "GiB",
                    gib(logits_bytes(8, 20_480, llama8.vocab)),
                    True, kind="formula"),
        FigureCheck("unsloth-kv", "Unsloth GRPO blog (Feb 2025)", "KV cache, Llama-3.1-8B, one 20K sequence",
                    "20,480 tokens × 128 KiB", 2.5, "GiB", gib(kv_cache_bytes(llama8, 20_480)), True, kind="formula"),
        FigureCheck("lora-qwen7b", "memory-figures.md", "LoRA trainable params, Qwen2.5-7B",
                    "r=16 on q,k,v,o,gate,up,down", 40.4, "M", qwen7.lora_params(16) / 1e6, True, kind="formula"),
        FigureCheck("lora-llama8b", "memory-figures.md", "LoRA trainable params, Llama-3.1-8B",
                    "r=16 on q,k,v,o,gate,up,down", 41.9, "M", llama8.lora_params(16) / 1e6, True, kind="formula"),
    ]


def _trl3162_checks() -> list[FigureCheck]:
    """TRL PR #3162 / vllm #17117: 72B colocated on 32 H100s, util 0.25, TP 16, sleep mode, ZeRO-3."""
    from finetune.models import load_model_info

    big = estimate(load_model_info("Qwen/Qwen2.5-72B"),
                   resolve_hardware({"profile": "h100-80gb", "gpus": 8, "nodes": 4}),
                   Knobs("full", zero_stage=3, vllm_mode="colocate", vllm_tensor_parallel_size=16,
                         vllm_gpu_memory_utilization=0.25, vllm_enable_sleep_mode=True, per_device_train_batch_size=1,
                         gradient_accumulation_steps=8), suggest=False)
    v = big.vllm
    assert v is not None
    setup72 = "Qwen2.5-72B (assumed), 32 × H100, gpu_memory_utilization 0.25, TP 16"
    return [
        FigureCheck("trl3162-vllm-total", "TRL PR #3162 / vllm #17117", "vLLM memory per GPU", setup72, 19.78, "GiB",
                    v.share_gib, True, "follows from the share's definition (util × total memory)", kind="formula"),
        FigureCheck("trl3162-vllm-weights", "TRL PR #3162 / vllm #17117", "vLLM weights per GPU", setup72, 8.64, "GiB",
                    v.weights_gib, True),
        FigureCheck("trl3162-vllm-kv", "TRL PR #3162 / vllm #17117", "vLLM KV cache per GPU", setup72, 10.74, "GiB",
                    v.kv_available_gib, True),
        FigureCheck("trl3162-sleep-freed", "TRL PR #3162 / vllm #17117", "freed by sleep mode per GPU", setup72, 19.51,
                    "GiB", v.share_gib - v.during_training_gib, True),
        FigureCheck("trl3162-zero3", "TRL PR #3162 / vllm #17117", "DeepSpeed ZeRO-3 max allocated (GB)",
                    setup72 + "; batch, lengths and beta unknown", 46.2, "GB",
                    sum(c.gib for c in big.components if c.key in ("policy_weights", "reference_model", "gradients",
                                                                    "master_weights", "optimizer", "zero3_gather"))
                    * GIB / 1e9, False, "ours: ZeRO-3 model states with a reference copy (activations unknown)"),
    ]


def _engine_checks() -> list[FigureCheck]:
    """ms-swift #3848 (training GPU beside a server), vllm #11743 (KV space), vllm #48337 (sleep)."""
    from finetune.models import load_model_info

    # ms-swift #3848: rollouts on another GPU, so the training GPU holds no vLLM share.
    swift = estimate(load_model_info("Qwen/Qwen2.5-3B"), resolve_hardware({"profile": "a100-80gb", "gpus": 2}),
                     Knobs("lora", lora_r=64, per_device_train_batch_size=1, gradient_accumulation_steps=8,
                           max_prompt_length=512, max_completion_length=1024, vllm_mode="server", vllm_gpus=1,
                           beta=0.04,
                           fused_lm_head=False), suggest=False)
    h100 = resolve_hardware("h100-80gb")
    # vllm PR #11743: the engine's budget on an H100 at util 0.9 (model not stated).
    kv_11743 = 0.9 * h100.memory_gib - 9.69 - 2.95 - VLLM_OVERHEAD_GIB
    qwen3_8 = load_model_info("Qwen/Qwen3-8B")
    return [
        FigureCheck("msswift3848", "ms-swift #3848", "training-GPU peak, Qwen2.5-3B LoRA r64",
                    "completion 1024, batch 1, rollouts on another GPU (prompt 512 assumed)", 12.0, "GB",
                    swift.total_gib * GIB / 1e9, True, "published '~12 GB' (nvidia-smi; allocator cache "
                    "included); sized with materialised logits, as the TRL of that time computed them"),
        FigureCheck("vllm11743-kv", "vllm PR #11743", "KV cache at util 0.9 on an H100",
                    "model unknown; its weights 9.69 and activation peak 2.95 GiB taken as given", 57.48, "GiB",
                    kv_11743, False, f"ours: 0.9 × {h100.memory_gib} − weights − activations − "
                                     f"overhead {VLLM_OVERHEAD_GIB} (vLLM reports non-torch 1.27)"),
        FigureCheck("vllm48337-sleep", "vllm PR #48337", "freed by sleep mode, Qwen3-8B",
                    "gpu_memory_utilization and GPU unknown", 47.4, "GiB", gib(qwen3_8.params * 2), False,
                    "ours: its bf16 weights only (the rest is KV, sized by the unknown share)"),
    ]


def _model_states(e: Estimate) -> float:
    return sum(e.gib_of(k) for k in ("policy_weights", "adapters", "optimizer"))


def _unsloth_checks() -> list[FigureCheck]:
    """Unsloth #1840 and Unsloth's SFT minimums (their kernels, SFT, context unknown): model states only."""
    from finetune.models import load_model_info

    h100 = resolve_hardware("h100-80gb")
    qwen3_06 = load_model_info("Qwen/Qwen3-0.6B")
    out = [
        FigureCheck("unsloth1840-4bit", "Unsloth #1840", "max allocated, 0.6B model in 4-bit",
                    "Unsloth kernels, context unknown", 0.92, "GiB",
                    _model_states(estimate(qwen3_06, h100, Knobs("qlora"), suggest=False)), False,
                    "ours: model states only"),
        FigureCheck("unsloth1840-16bit", "Unsloth #1840", "max allocated, 0.6B model in 16-bit",
                    "Unsloth kernels, context unknown", 1.81, "GiB",
                    _model_states(estimate(qwen3_06, h100, Knobs("lora"), suggest=False)), False,
                    "ours: model states only"),
    ]
    sft = {"3B": ("Qwen/Qwen2.5-3B", 3.5, 8), "7B": ("Qwen/Qwen2.5-7B", 5, 19),
           "8B": ("meta-llama/Llama-3.1-8B", 6, 22),
           "14B": ("Qwen/Qwen2.5-14B", 8.5, 33), "32B": ("Qwen/Qwen2.5-32B", 26, 76),
           "70B": ("meta-llama/Llama-3.1-70B", 41, 164)}
    for size, (hub, q_gb, l_gb) in sft.items():
        m = load_model_info(hub)
        for method, value in (("qlora", q_gb), ("lora", l_gb)):
            e = estimate(m, h100, Knobs(method), suggest=False)
            out.append(FigureCheck(f"unsloth-sft-{size}-{method}", "Unsloth SFT minimums", f"{size} {method} minimum",
                                   "SFT (not GRPO), sequence and batch unknown", value, "GB",
                                   _model_states(e) * GIB / 1e9,
                                   False, f"ours: {hub} weights + adapter states"))
    return out


def _spark_checks() -> list[FigureCheck]:
    """DGX Spark decode: the bandwidth bound against memory-figures.md's computed and measured tokens/s."""
    from finetune.models import load_model_info

    bandwidth = resolve_hardware("dgx-spark").bandwidth_gbs
    qwen3_8 = load_model_info("Qwen/Qwen3-8B")
    qwen3_32 = load_model_info("Qwen/Qwen3-32B")
    return [
        FigureCheck("spark-bound-qwen3-8b", "memory-figures.md (DGX Spark)", "decode bound, Qwen3-8B bf16",
                    "273 GB/s ÷ bytes per token, one stream", 17.0, "tok/s",
                    decode_bound_tokens_per_s(qwen3_8, bandwidth, context_tokens=512), True, kind="formula"),
        FigureCheck("spark-measured-qwen3-8b", "memory-figures.md (DGX Spark)", "measured decode, Qwen3-8B bf16",
                    "one stream", 13.1, "tok/s", decode_bound_tokens_per_s(qwen3_8, bandwidth, context_tokens=512),
                    False, "ours is an upper bound, not an estimate"),
        FigureCheck("spark-measured-qwen3-32b", "memory-figures.md (DGX Spark)", "measured decode, Qwen3-32B bf16",
                    "one stream", 3.7, "tok/s", decode_bound_tokens_per_s(qwen3_32, bandwidth, context_tokens=512),
                    False, "ours is an upper bound, not an estimate"),
    ]
