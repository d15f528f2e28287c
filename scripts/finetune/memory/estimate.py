"""The estimate: every component a TRL 1.16 GRPO run holds on one training GPU — policy and reference
weights, gradients, optimizer states, activations, the LM head's log-prob tiles, the colocated vLLM engine,
DeepSpeed ZeRO sharding, CUDA context — over the two phases of a step (generation and training), whether it
fits and what would make it fit (each suggestion re-estimated alone).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from finetune.errors import UserError
from finetune.hardware import Hardware
from finetune.loratargets import is_all_linear
from finetune.memory.formulas import (
    CUDA_CONTEXT_GIB,
    GIB,
    QLORA_BYTES_PER_PARAM,
    TRL_HEAD_TOKEN_TILE,
    TRL_HEAD_VOCAB_TILE,
    VLLM_COLOCATE_BATCHED_TOKENS,
    VLLM_OVERHEAD_GIB,
    VLLM_SERVER_BATCHED_TOKENS,
    VLLM_SLEEP_RESIDUAL_GIB,
    _b,
    _g,
    activation_bytes,
    decode_bound_tokens_per_s,
    eager_attention_bytes,
    fused_head_bytes,
    gib,
    kv_cache_bytes,
    layer_activation_bytes_per_token,
    logits_bytes,
    vllm_activation_bytes,
)
from finetune.memory.moments import moments, policy_bytes, problems
from finetune.memory.result import Component, Estimate, Suggestion, VllmBudget
from finetune.memory.sizing import Knobs as Knobs
from finetune.memory.sizing import LmHead as LmHead
from finetune.memory.sizing import Parts, Sizing, request_of, resolve
from finetune.memory.sizing import _check_choice as _check_choice
from finetune.memory.sizing import default_model_dtype as default_model_dtype
from finetune.memory.sizing import rendered_lm_head as rendered_lm_head
from finetune.memory.sizing import workload_of as workload_of
from finetune.models import ModelInfo
from finetune.placement import Layout, arrange


def _policy_weights(s: Sizing, out: Parts) -> None:
    """The policy: its load dtype; 4-bit NF4 linears under QLoRA; bf16 under ZeRO (fp32 master in the optimizer)."""
    m, k, P = s.model, s.k, s.model.params
    div = s.shards if s.zero3 else 1
    if k.method == "qlora":
        q = m.quantizable_params
        rest = P - q
        out.add("policy_weights", "policy weights (4-bit NF4 + bf16 rest)",
                (q * QLORA_BYTES_PER_PARAM + rest * 2) / div,
                f"{_b(q)} linear × {QLORA_BYTES_PER_PARAM:.3f} B + {_b(rest)} other × 2 B{s.shard_note}", "resident")
        if m.is_moe and m.expert_params:
            out.warnings.append(f"{_b(m.expert_params)} fused MoE expert weights are not nn.Linear: bitsandbytes "
                                "leaves them in bf16, so QLoRA saves little on this model")
    elif k.method == "full" and s.layout.zero_stage:
        out.add("policy_weights", "policy weights (bf16)", 2 * P / div, f"{_b(P)} × 2 B{s.shard_note}", "resident")
    else:
        out.add("policy_weights", f"policy weights ({s.dtype})", s.wbytes * P / div,
                f"{_b(P)} × {s.wbytes} B{s.shard_note}", "resident")
        if k.method == "full" and s.dtype == "bfloat16":
            out.warnings.append("full fine-tuning with bf16 weights and no fp32 master copy: at lr 5e-7 most AdamW "
                                "updates round away (bf16 resolution 2^-8 relative); load float32 or use DeepSpeed")


def _reference_model(s: Sizing, out: Parts) -> None:
    """A frozen copy when beta > 0 under full fine-tuning (PEFT disables the adapters instead)."""
    k, P = s.k, s.model.params
    if k.beta > 0 and k.method == "full":
        wb = 2 if s.layout.zero_stage else s.wbytes
        out.add("reference_model", "reference model (frozen copy)", wb * P / (s.shards if s.zero3 else 1),
                f"beta {k.beta} > 0: {_b(P)} × {wb} B{s.shard_note}", "resident")


def _optimizer_bytes(optimizer: str) -> tuple[int, str]:
    """(bytes per trainable parameter, label) of the optimizer's states."""
    name = "AdamW m, v fp32" if optimizer == "adamw_torch" else "8-bit AdamW m, v"
    if optimizer == "paged_adamw_8bit":
        name += " (paged: may spill to CPU under pressure)"
    return (8 if optimizer == "adamw_torch" else 2), name


def _trainable_states(s: Sizing, out: Parts) -> None:
    """Gradients, optimizer states (and fp32 master weights) of what trains: adapters, or the whole model."""
    if s.k.method in ("lora", "qlora"):
        _adapter_states(s, out)
    elif s.layout.zero_stage:
        _zero_states(s, out)
    else:
        _unsharded_states(s, out)


def _adapter_states(s: Sizing, out: Parts) -> None:
    k = s.k
    opt_bytes, opt_name = _optimizer_bytes(k.optimizer)
    L = s.model.lora_params(k.lora_r, k.lora_target_modules)
    on = "" if is_all_linear(k.lora_target_modules) else f" on {lora_targets_text(s.model, k.lora_target_modules)}"
    out.add("adapters", f"LoRA adapters r={k.lora_r}{on} (fp32)", 4 * L,
            f"{_b(L)} = Σ r·(d_in + d_out) over adapted projections × 4 B", "resident")
    out.add("gradients", "adapter gradients (fp32)", 4 * L, f"{_b(L)} × 4 B", "training")
    out.add("optimizer", f"optimizer states ({opt_name})", opt_bytes * L, f"{_b(L)} × {opt_bytes} B", "resident")


def lora_targets_text(model: ModelInfo, target_modules: str | list[str] | tuple[str, ...]) -> str:
    """The layers ``target_modules`` adapts, in words from the model's own module names (never the spec's
    strings, which reach documents only through the escaping helpers): "all linear layers", "q_proj, v_proj",
    "q_proj, k_proj (28 of 56 such layers)", "experts.gate_up_proj, experts.down_proj" (fused MoE tensors)."""
    from finetune.loratargets import adapted

    if is_all_linear(target_modules):
        return "all linear layers" + (" and the fused experts" if model.fused_params else "")
    model.lora_targets(target_modules)  # a UserError when PEFT would refuse them
    found = adapted(model, target_modules)
    names = list(dict.fromkeys(g.name for g in found.groups))
    count = sum(g.count for g in found.groups)
    total = sum(g.count for g in model.linear_groups if g.name in names)
    fused = list(dict.fromkeys(".".join(p.path.split(".")[-2:]) for p, _ in found.params))
    return ", ".join(names + fused) + (f" ({count} of {total} such layers)" if count < total else "")


def _zero_states(s: Sizing, out: Parts) -> None:
    P, N, m = s.model.params, s.shards, s.model
    opt_bytes, opt_name = _optimizer_bytes(s.k.optimizer)
    per = f" / {N} GPUs" if N > 1 else ""
    if s.layout.zero_stage == 3:
        out.add("gradients", "gradients (fp32 partitions)", 4 * P / N, f"{_b(P)} × 4 B{per}", "training")
    else:
        out.add("gradients", "gradients (bf16 buckets + fp32 partitions)", 2 * P + 4 * P / N,
                f"{_b(P)} × 2 B + {_b(P)} × 4 B{per}", "training")
    out.add("master_weights", "fp32 master weights", 4 * P / N, f"{_b(P)} × 4 B{per}", "resident")
    out.add("optimizer", f"optimizer states ({opt_name})", opt_bytes * P / N, f"{_b(P)} × {opt_bytes} B{per}",
            "resident")
    if s.layout.zero_stage == 3:
        out.add("zero3_gather", "ZeRO-3 gathered-parameter buffers", 4 * m.largest_layer_params,
                f"4 B × largest layer {_b(m.largest_layer_params)} (deepspeed memory.rst)", "training")


def _unsharded_states(s: Sizing, out: Parts) -> None:
    P, wbytes, optimizer = s.model.params, s.wbytes, s.k.optimizer
    opt_bytes, opt_name = _optimizer_bytes(optimizer)
    out.add("gradients", f"gradients ({s.dtype})", wbytes * P, f"{_b(P)} × {wbytes} B", "training")
    # AdamW keeps its states in the weights' dtype: bf16 weights halve them
    per = opt_bytes if wbytes == 4 or optimizer != "adamw_torch" else 4
    bf16_states = ", bf16" if wbytes == 2 and optimizer == "adamw_torch" else ""
    out.add("optimizer", f"optimizer states ({opt_name}{bf16_states})",
            per * P, f"{_b(P)} × {per} B", "resident")
    if s.n_train > 1:
        out.add("ddp_buckets", "DDP gradient buckets", wbytes * P, f"{_b(P)} × {wbytes} B (flat all-reduce copy)",
                "training")


def _activations(s: Sizing, out: Parts) -> None:
    """What the training forward saves for backward (fp32 on CPU: no bf16 autocast there)."""
    m, k = s.model, s.k
    B, T, gc = k.per_device_train_batch_size, s.seq_len, k.gradient_checkpointing
    out.add("activations", "activations" + (" (gradient checkpointing)" if gc else "") + (" fp32" if s.cpu else ""),
            (2 if s.cpu else 1) * activation_bytes(m, B, T, gc),
            (f"B {B} × T {T} × (layers {m.layers} × 2h + one layer {layer_activation_bytes_per_token(m)} B)" if gc else
             f"B {B} × T {T} × layers {m.layers} × {layer_activation_bytes_per_token(m)} B"), "training")
    eager = eager_attention_bytes(m, B, T, gc)
    if eager:
        out.add("attention_scores", "attention scores (eager attention: no SDPA for this model)",
                (2 if s.cpu else 1) * eager,
                f"B {B} × heads {m.heads} × T² {T}² × {8 if m.attn_softcapping else 6} B × "
                + ("one layer (recomputed)" if gc else f"{m.layers} layers") + " + 2 masks", "training")
    if m.is_vlm:
        out.warnings.append("vision-language model: image tokens and the vision tower's activations are not sized "
                            "here (text tokens only); VLM RL is reference-only in this plugin")


def _lm_head(s: Sizing, out: Parts) -> None:
    """TRL 1.16's fused log-prob head, or (``fused_lm_head=False``) materialised completion logits."""
    m, k = s.model, s.k
    B, Tc = k.per_device_train_batch_size, k.max_completion_length
    if not k.fused_lm_head:
        act_scale = 2 if s.cpu else 1
        out.add("lm_head", "completion logits + their gradient (materialised)",
                act_scale * logits_bytes(B, Tc, m.vocab),
                f"B {B} × T_completion {Tc} × V {m.vocab} × {4 * act_scale} B", "training")
        return
    # on a GPU only completion positions are projected; TRL's CPU path scores every position
    scored = B * (s.seq_len if s.cpu else Tc)
    head_trainable = k.method == "full"
    compute = 4 if s.cpu or k.cast_lm_head_to_fp32 else 2
    weight = 4 if k.cast_lm_head_to_fp32 else s.wbytes
    out.add("lm_head", "LM head, fused log-prob tiles (TRL 1.16" + (", fp32)" if k.cast_lm_head_to_fp32 else ")"),
            fused_head_bytes(m, scored, head_trainable=head_trainable, compute_bytes=compute, weight_bytes=weight),
            f"tile {min(scored, TRL_HEAD_TOKEN_TILE)}×{min(m.vocab, TRL_HEAD_VOCAB_TILE)}×{compute} B + ∇hidden "
            f"N {scored} × h {m.hidden} × 4 B" + (f" + ∇W V {m.vocab} × h × 4 B" if head_trainable else "")
            + " (full B×T×V logits never exist)", "training")
    if k.cast_lm_head_to_fp32 and s.wbytes == 2:
        copies = 2 if k.beta > 0 and k.method == "full" else 1  # TRL casts the reference model's head too
        out.add("lm_head_fp32", "LM head weight cast to fp32 (cast_lm_head_to_fp32)",
                copies * m.vocab * m.hidden * 2,
                f"{copies} × V {m.vocab} × h {m.hidden} × (4 − 2) B" + (" (tied: the embedding is cast with it)"
                                                                         if m.tied else ""), "resident")


def _generation(s: Sizing, out: Parts) -> None:
    """The rollouts: a vLLM engine (colocated on this GPU, or a server's own GPUs), else generate's KV cache."""
    if s.use_vllm:
        _vllm_engine(s, out)
    else:
        _generate_kv(s, out)


def _vllm_engine(s: Sizing, out: Parts) -> None:
    v = out.vllm = _vllm_budget(s)
    if not s.server:
        out.components.append(Component(
            "vllm", f"vLLM engine (colocate, {s.util:.2f} of memory)", v.share_gib,
            f"{s.util} × {s.hardware.memory_gib:.1f} GiB = weights {_g(v.weights_gib)} + "
            f"act. {_g(v.activation_gib)} + overhead {_g(v.overhead_gib)} + KV {_g(v.kv_available_gib)}"
            + (f"; asleep during training: {_g(v.during_training_gib)}" if s.k.vllm_enable_sleep_mode else ""),
            "generation"))
    if 1 <= v.concurrent_seqs < v.max_num_seqs:  # fewer than one: the engine moment fails (memory.moments)
        out.warnings.append(f"vLLM KV space ({v.kv_available_gib:.1f} GiB) holds {v.concurrent_seqs} of "
                            f"{v.max_num_seqs} full-length sequences: generation runs in waves (slower, not OOM)")


def _vllm_budget(s: Sizing) -> VllmBudget:
    """The engine's share: weights, profile-run activations, overhead, and the KV space left for sequences."""
    m, k, P, lay = s.model, s.k, s.model.params, s.layout
    tp = lay.vllm_tp
    # TRL starts a colocated vLLM with bitsandbytes for 4-bit policies (VLLMGeneration); `trl vllm-serve` as
    # launch.sh runs it loads the bf16 checkpoint whatever the policy's method
    weight_bytes = (m.quantizable_params * QLORA_BYTES_PER_PARAM + (P - m.quantizable_params) * 2
                    if k.method == "qlora" and not s.server else 2 * P)
    if s.server:
        # the server serves every training process; its data-parallel replicas split them
        gpus = lay.vllm_serving_gpus
        max_num_seqs = math.ceil(k.per_device_train_batch_size * s.n_train * s.spg / lay.vllm_dp)
        mode, batched_tokens, sleep = "server", VLLM_SERVER_BATCHED_TOKENS, False
    else:
        gpus = tp
        max_num_seqs = k.per_device_train_batch_size * tp * s.spg  # what TRL 1.16 passes to vLLM
        mode, batched_tokens, sleep = "colocate", VLLM_COLOCATE_BATCHED_TOKENS, k.vllm_enable_sleep_mode
    share = s.util * s.hardware.memory_gib
    weights = gib(weight_bytes / tp)
    act = gib(vllm_activation_bytes(m, batched_tokens, max_num_seqs, tp))
    kv_per_seq = gib(kv_cache_bytes(m, s.seq_len) / tp)
    kv_available = share - weights - act - VLLM_OVERHEAD_GIB
    return VllmBudget(mode=mode, gpus=gpus, tensor_parallel_size=tp, utilization=s.util, share_gib=share,
                      weights_gib=weights, activation_gib=act, overhead_gib=VLLM_OVERHEAD_GIB,
                      kv_available_gib=kv_available, kv_needed_gib=max_num_seqs * kv_per_seq,
                      max_num_seqs=max_num_seqs, seq_len=s.seq_len,
                      concurrent_seqs=int(kv_available // kv_per_seq) if kv_available > 0 else 0, sleep_mode=sleep,
                      during_training_gib=VLLM_SLEEP_RESIDUAL_GIB if sleep else share)


def _generate_kv(s: Sizing, out: Parts) -> None:
    m, T, N = s.model, s.seq_len, s.shards
    kv_bytes = 2 if s.dtype == "bfloat16" or not s.cpu else 4
    out.add("generate_kv", "KV cache (transformers generate)", kv_cache_bytes(m, s.round_seqs * T, kv_bytes),
            f"{s.round_seqs} sequences × {T} tokens × {m.kv_bytes_per_token(kv_bytes) // 1024} KiB", "generation")
    if s.zero3:  # TRL's unwrap_model_for_generation gathers every parameter (ds3_gather_for_generation), PEFT too
        whole = policy_bytes(s)
        out.add("zero3_generation_gather", "whole policy gathered for generate (ZeRO-3)", whole * (1 - 1 / N),
                f"ds3_gather_for_generation: {whole / GIB:.1f} GiB × (1 − 1/{N})", "generation")


def _cuda_context(s: Sizing, out: Parts) -> None:
    if not s.cpu:
        out.add("cuda_context", "CUDA context, cuBLAS / NCCL workspaces", CUDA_CONTEXT_GIB * GIB,
                f"{CUDA_CONTEXT_GIB:.1f} GiB per process (outside torch's allocator)", "context")


# Every component of the estimate, in the order its table lists them: each function adds its lines (and the
# warnings or problems it finds) for one resolved configuration.
COMPONENTS: tuple[Callable[[Sizing, Parts], None], ...] = (
    _policy_weights, _reference_model, _trainable_states, _activations, _lm_head, _generation, _cuda_context)


def _peaks(parts: Parts) -> tuple[float, float]:
    """(training, generation) peak: what is always held plus each phase's own components."""
    comps = parts.components
    resident = sum(c.gib for c in comps if c.phase in ("resident", "context"))
    training_extra = sum(c.gib for c in comps if c.phase == "training")
    generation_extra = sum(c.gib for c in comps if c.phase == "generation")
    v = parts.vllm
    vllm_during_training = v.during_training_gib if v and v.mode == "colocate" else 0.0
    return resident + training_extra + vllm_during_training, resident + generation_extra


def _check_fit(s: Sizing, out: Parts) -> None:
    """Warnings beyond the moments: unified memory, a CPU target."""
    profile = s.hardware.profile
    if profile.unified and s.k.optimizer == "paged_adamw_8bit":
        out.warnings.append("paged optimizer on unified memory: paging 'to CPU' stays in the same pool and frees "
                            "nothing")
    if profile.unified:
        out.warnings.append("DGX Spark: GPU and CPU share one 128 GB pool; a GPU out-of-memory there can freeze the "
                            "whole machine (not just the process) — keep ≥ 15% free and watch `free -g`, "
                            "not nvidia-smi")
    if s.cpu:
        out.warnings.append("CPU profile: fp32 training in host RAM; fine for smoke tests and tiny models only")


def _decode_bound(s: Sizing, out: Parts) -> tuple[float, float]:
    """(one round's streams, one stream) decode tokens/s bound on this hardware's bandwidth."""
    bw = s.hardware.bandwidth_gbs
    if not bw:
        return 0.0, 0.0
    m, Tc = s.model, s.k.max_completion_length
    ctx = s.k.max_prompt_length + Tc // 2
    wpp = QLORA_BYTES_PER_PARAM if s.k.method == "qlora" else 2.0
    single = decode_bound_tokens_per_s(m, bw, context_tokens=ctx, weight_bytes_per_param=wpp)
    decode = decode_bound_tokens_per_s(m, bw, context_tokens=ctx, streams=s.round_seqs, weight_bytes_per_param=wpp)
    if s.hardware.profile.unified:
        secs = Tc * (m.active_params * wpp + s.round_seqs * kv_cache_bytes(m, ctx)) / (bw * 1e9)
        out.warnings.append(f"rollouts are bandwidth-bound here: ≥ {secs:.0f} s to decode one round of "
                            f"{s.round_seqs} × {Tc} tokens (≤ {single:.1f} tokens/s for a single stream)")
    return decode, single


def _settings(s: Sizing) -> dict[str, Any]:
    """The configuration as estimated (defaults resolved): Estimate.settings."""
    k = s.k
    return dict(method=k.method, num_generations=k.num_generations,
                per_device_train_batch_size=k.per_device_train_batch_size,
                gradient_accumulation_steps=k.gradient_accumulation_steps, steps_per_generation=s.spg,
                max_prompt_length=k.max_prompt_length, max_completion_length=k.max_completion_length, beta=k.beta,
                use_vllm=s.use_vllm, vllm_mode=s.layout.vllm_mode,
                vllm_gpu_memory_utilization=s.util if s.use_vllm else None,
                vllm_enable_sleep_mode=bool(k.vllm_enable_sleep_mode and s.use_vllm and not s.server),
                vllm_tensor_parallel_size=s.layout.vllm_tp, vllm_gpus=s.layout.server_gpus,
                gradient_checkpointing=k.gradient_checkpointing, optimizer=k.optimizer,
                zero_stage=s.layout.zero_stage,
                # the adapters' rank and targets under full fine-tuning too: the LoRA suggestion sizes the spec's
                lora_r=k.lora_r, lora_target_modules=k.lora_target_modules,
                fused_lm_head=k.fused_lm_head, cast_lm_head_to_fp32=k.cast_lm_head_to_fp32,
                model_dtype=s.dtype, round_sequences=s.round_seqs)


def estimate(model: ModelInfo, hardware: Hardware, knobs: Knobs, *, suggest: bool = True) -> Estimate:
    """Per-GPU memory of a TRL 1.16 GRPO run of ``knobs`` on ``hardware``, laid out as ``knobs`` requests
    (:func:`finetune.placement.arrange`); see :func:`estimate_on`."""
    from finetune.memory.sizing import check_knobs

    check_knobs(knobs)
    layout = arrange(model, hardware, knobs.method, request_of(knobs, hardware))
    return estimate_on(model, layout, knobs, suggest=suggest)


def estimate_on(model: ModelInfo, layout: Layout, knobs: Knobs, *, suggest: bool = True) -> Estimate:
    """Per-GPU memory of a TRL 1.16 GRPO run of ``knobs`` on a decided ``layout`` (its mode, TP × DP, training
    processes and ZeRO stage are the layout's, whatever ``knobs`` asks); see the module docstring and
    memory-figures.md. Each component is sized by one function of :data:`COMPONENTS`, each moment of start-up and
    the step by :mod:`finetune.memory.moments`; with ``suggest``, an estimate that does not fit comfortably lists
    fixes, each re-estimated."""
    s = resolve(model, layout, knobs)
    parts = Parts()
    for component in COMPONENTS:
        component(s, parts)
    training_peak, generation_peak = _peaks(parts)
    found = moments(s, parts, max(training_peak, generation_peak))
    parts.problems.extend(problems(s, parts, found))
    _check_fit(s, parts)
    decode, single = _decode_bound(s, parts)
    est = Estimate(model=model, hardware=s.hardware, settings=_settings(s), components=tuple(parts.components),
                   vllm=parts.vllm, training_peak_gib=training_peak, generation_peak_gib=generation_peak,
                   warnings=tuple(parts.warnings), problems=tuple(parts.problems), decode_tokens_per_s=decode,
                   decode_single_stream_tokens_per_s=single, moments=found, layout=layout)
    if suggest and est.verdict != "fits":
        est = replace(est, suggestions=tuple(_suggestions(est)))
    return est


MAX_NODE_GPUS = 8  # GPUs of the largest common node (HGX / DGX): more GPUs come as more nodes


def _round_up(x: float, step: float = 0.05) -> float:
    return round(math.ceil(x / step - 1e-9) * step, 2)


def _knobs_of(est: Estimate) -> Knobs:
    """The knobs ``est`` was sized with, defaults resolved: the base each suggestion changes one thing of."""
    s = {k: v for k, v in est.settings.items() if k != "round_sequences"}
    s["vllm_mode"] = s["vllm_mode"] or "colocate"
    return Knobs(**s)


def _fix_options(est: Estimate, k: Knobs) -> list[tuple[str, dict[str, Any], Hardware]]:
    """(what to do, the knobs it changes, the hardware) for every fix that applies, cheapest first."""
    hw = est.hardware
    colocate = bool(k.use_vllm) and k.vllm_mode == "colocate"
    options: list[tuple[str, dict[str, Any], Hardware]] = []
    if colocate and not k.vllm_enable_sleep_mode:
        options.append(("vLLM sleep mode (vllm_enable_sleep_mode=True; level 2, wake costs seconds per step)",
                        {"vllm_enable_sleep_mode": True}, hw))
    if k.method == "full":
        targets = lora_targets_text(est.model, k.lora_target_modules)
        options.append((f"LoRA r={k.lora_r} on {targets} (no reference copy, tiny optimizer)",
                        {"method": "lora", "model_dtype": None}, hw))
    if k.method != "qlora":  # generating with transformers: vLLM 0.30 cannot take a 4-bit policy (placement)
        options.append(("QLoRA (4-bit base weights; generation with transformers, as vLLM 0.30 cannot load them)",
                        {"method": "qlora", "model_dtype": None, "use_vllm": False, "vllm_mode": "colocate",
                         "vllm_gpus": None}, hw))
    if k.optimizer == "adamw_torch":
        options.append(("8-bit AdamW (optim=adamw_8bit)", {"optimizer": "adamw_8bit"}, hw))
    if est.vllm and est.vllm.mode == "colocate":
        smaller = max(0.05, _round_up(est.vllm.min_utilization))
        if k.vllm_gpu_memory_utilization is not None and smaller < k.vllm_gpu_memory_utilization:
            options.append((f"smaller vLLM share (vllm_gpu_memory_utilization={smaller})",
                            {"vllm_gpu_memory_utilization": smaller}, hw))
    if k.per_device_train_batch_size > 1:
        b, acc = k.per_device_train_batch_size // 2, k.gradient_accumulation_steps
        spg = k.steps_per_generation or acc
        options.append((f"smaller micro-batch ({b}) × {2 * acc} accumulation (same completions per step)",
                        {"per_device_train_batch_size": b, "gradient_accumulation_steps": 2 * acc,
                         "steps_per_generation": 2 * spg}, hw))
    if not k.gradient_checkpointing:
        options.append(("gradient checkpointing", {"gradient_checkpointing": True}, hw))
    if est.layout is not None and est.layout.training_processes > 1 and k.zero_stage != 3:
        options.append(("DeepSpeed ZeRO-3 over the training GPUs", {"zero_stage": 3, "model_dtype": None}, hw))
    if not hw.profile.is_cpu and not hw.profile.unified:
        more = hw.with_gpus(hw.gpus * 2) if hw.gpus * 2 <= MAX_NODE_GPUS else hw.with_nodes(hw.nodes * 2)
        what = f"{more.gpus} GPUs" if more.nodes == hw.nodes else f"{more.nodes} nodes"
        options.append((f"twice the GPUs ({what}) with ZeRO-3", {"zero_stage": 3, "model_dtype": None}, more))
    if colocate:
        options.append(("generate with transformers instead of vLLM (use_vllm=False): no second copy of the "
                        "weights, but generation is several times slower", {"use_vllm": False}, hw))
    if k.max_completion_length > 256:
        half = k.max_completion_length // 2
        options.append((f"shorter completions (max_completion_length={half}; check truncation first)",
                        {"max_completion_length": half}, hw))
    return options


def _suggestions(est: Estimate) -> list[Suggestion]:
    """Cheapest fixes first, each re-estimated alone from the current settings."""
    base = _knobs_of(est)
    out = []
    for action, change, hardware in _fix_options(est, base):
        try:
            after = estimate(est.model, hardware, replace(base, **change), suggest=False)
        except UserError:
            continue
        saves = est.total_gib - after.total_gib
        if saves > 0.05 or (after.fits and not est.fits):
            out.append(Suggestion(action, {k: v for k, v in change.items() if v is not None}, saves,
                                  after.total_gib, after.fits))
    return out
