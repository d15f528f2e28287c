"""The estimate: every component a TRL 1.16 GRPO run holds on one training GPU — policy and reference
weights, gradients, optimizer states, activations, the LM head's log-prob tiles, the colocated vLLM engine,
DeepSpeed ZeRO sharding, CUDA context — over the two phases of a step (generation and training), whether it
fits and what would make it fit (each suggestion re-estimated alone).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypedDict

from finetune.errors import UserError
from finetune.hardware import Hardware
from finetune.loratargets import is_all_linear
from finetune.memory.formulas import (
    CUDA_CONTEXT_GIB,
    GIB,
    METHODS,
    OPTIMIZERS,
    QLORA_BYTES_PER_PARAM,
    TRL_HEAD_TOKEN_TILE,
    TRL_HEAD_VOCAB_TILE,
    TRL_SERVER_DEFAULT_UTIL,
    VLLM_COLOCATE_BATCHED_TOKENS,
    VLLM_MODES,
    VLLM_OVERHEAD_GIB,
    VLLM_SERVER_BATCHED_TOKENS,
    VLLM_SLEEP_RESIDUAL_GIB,
    _b,
    _g,
    activation_bytes,
    decode_bound_tokens_per_s,
    fused_head_bytes,
    gib,
    kv_cache_bytes,
    layer_activation_bytes_per_token,
    logits_bytes,
    vllm_activation_bytes,
)
from finetune.memory.result import Component, Estimate, Phase, Suggestion, VllmBudget
from finetune.models import ModelInfo

if TYPE_CHECKING:
    from finetune.spec import RunSpec



def _check_choice(value: Any, allowed: Iterable[str], where: str) -> None:
    if value not in allowed:
        raise UserError(f"{where} '{value}' is not one of {', '.join(allowed)}", where=where,
                        fix="use one of: " + ", ".join(allowed))


def default_model_dtype(method: str, zero_stage: int, hardware: Hardware) -> str:
    """Dtype the policy is loaded in (GRPOConfig.model_init_kwargs["dtype"]).

    TRL 1.16 loads float32 unless told otherwise. LoRA / QLoRA train only fp32 adapters, so bf16 base
    weights halve memory at no cost. Full fine-tuning under DeepSpeed keeps fp32 master weights in the
    optimizer, so bf16 is right there too; plain DDP full fine-tuning needs fp32 weights (bf16 autocast
    for compute): at lr 5e-7 an AdamW step (≈ lr) is far below bf16's resolution (2^-8 relative), so a
    bf16-weight model would silently not learn.
    """
    if hardware.profile.is_cpu:
        return "float32"
    if method == "full" and zero_stage == 0:
        return "float32"
    return "bfloat16"


@dataclass(frozen=True)
class Knobs:
    """What :func:`estimate` sizes besides the model and the hardware: one GRPO configuration.

    Names are GRPOConfig's (``optimizer`` is its ``optim``, ``zero_stage`` the DeepSpeed stage, ``method``
    full / lora / qlora); ``per_device_train_batch_size`` counts completions per micro-batch (TRL ≥ 0.18).
    ``None`` leaves a value to the estimator: ``steps_per_generation`` → gradient_accumulation_steps,
    ``use_vllm`` → on for a GPU target, ``vllm_gpu_memory_utilization`` → TRL's 0.3 (colocate) / `trl
    vllm-serve`'s 0.9 (server), ``vllm_gpus`` (server) → ``hardware.vllm_gpus`` or the tensor-parallel
    size, ``model_dtype`` → :func:`default_model_dtype`. ``fused_lm_head=False`` sizes a trainer that
    materialises the completion logits (TRL before 1.x, other frameworks) instead of TRL 1.16's chunked head;
    ``cast_lm_head_to_fp32`` is GRPOConfig's (the head's weight and tiles in fp32). A rendered run's head is
    :func:`rendered_lm_head`'s. ``lora_target_modules`` is PEFT's ``target_modules``
    (:meth:`ModelInfo.lora_targets`).
    """

    method: str = "lora"
    num_generations: int = 8
    per_device_train_batch_size: int = 8
    gradient_accumulation_steps: int = 4
    steps_per_generation: int | None = None
    max_prompt_length: int = 512
    max_completion_length: int = 1024
    beta: float = 0.01
    use_vllm: bool | None = None
    vllm_mode: str = "colocate"
    vllm_gpu_memory_utilization: float | None = None
    vllm_enable_sleep_mode: bool = False
    vllm_tensor_parallel_size: int = 1
    vllm_gpus: int | None = None
    gradient_checkpointing: bool = True
    optimizer: str = "adamw_torch"
    zero_stage: int = 0
    lora_r: int = 16
    lora_target_modules: str | list[str] | tuple[str, ...] = "all-linear"
    model_dtype: str | None = None
    fused_lm_head: bool = True
    cast_lm_head_to_fp32: bool = False


class LmHead(TypedDict):
    """The :class:`Knobs` fields that decide the LM head's memory."""

    fused_lm_head: bool
    cast_lm_head_to_fp32: bool


def rendered_lm_head(overrides: Mapping[str, Any]) -> LmHead:
    """The LM head a rendered run computes its log-probs with, as :class:`Knobs` values: the one source that
    config render's estimate, :func:`recommend`'s candidates and every suggestion size.

    TRL 1.16's GRPOTrainer patches its fused, chunked head onto every policy (grpo_trainer.py calls
    ``add_fused_lm_head`` unconditionally; ``use_liger_kernel`` keeps it, refusing Liger's fused cross-entropy),
    so ``fused_lm_head`` is always True; ``cast_lm_head_to_fp32`` is the spec's override (GRPOConfig default False).
    """
    return {"fused_lm_head": True, "cast_lm_head_to_fp32": overrides.get("cast_lm_head_to_fp32") is True}


def workload_of(spec: RunSpec) -> Knobs:
    """The part of a spec :func:`recommend` keeps fixed (completions per prompt, lengths, KL, the LoRA rank and
    target modules, the LM head the rendered run uses)."""
    g, t = spec.generation, spec.training
    return Knobs(num_generations=t.num_generations, max_prompt_length=g.max_prompt_length,
                 max_completion_length=g.max_completion_length, beta=t.beta, lora_r=spec.lora.r,
                 lora_target_modules=spec.lora.target_modules, **rendered_lm_head(spec.overrides))


@dataclass(frozen=True)
class _Sizing:
    """estimate()'s inputs with the estimator's defaults filled in: what every component function reads."""

    model: ModelInfo
    hardware: Hardware  # with the `trl vllm-serve` GPUs taken out in server mode
    k: Knobs  # as given
    use_vllm: bool
    spg: int  # steps_per_generation
    util: float  # vllm_gpu_memory_utilization
    dtype: str  # model_dtype: what the policy is loaded in
    vllm_gpus: int | None  # the server's GPUs (server mode)

    @property
    def cpu(self) -> bool:
        return self.hardware.profile.is_cpu

    @property
    def server(self) -> bool:
        return self.use_vllm and self.k.vllm_mode == "server"

    @property
    def n_train(self) -> int:
        return self.hardware.training_gpus

    @property
    def shards(self) -> int:
        """N: the training GPUs DeepSpeed partitions over (1 without ZeRO)."""
        return self.n_train if self.k.zero_stage else 1

    @property
    def zero3(self) -> bool:
        """ZeRO-3 over several GPUs: the weights themselves are partitioned."""
        return self.k.zero_stage == 3 and self.shards > 1

    @property
    def shard_note(self) -> str:
        return f" / {self.shards} GPUs" if self.zero3 else ""

    @property
    def wbytes(self) -> int:
        return 2 if self.dtype == "bfloat16" else 4

    @property
    def seq_len(self) -> int:
        return self.k.max_prompt_length + self.k.max_completion_length

    @property
    def round_seqs(self) -> int:
        """Completions one training process generates per round."""
        return self.k.per_device_train_batch_size * self.spg


def _check_knobs(k: Knobs) -> None:
    _check_choice(k.method, METHODS, "method")
    _check_choice(k.optimizer, OPTIMIZERS, "optimizer")
    if k.zero_stage not in (0, 2, 3):
        raise UserError(f"zero_stage {k.zero_stage}", where="zero_stage", fix="use 0 (none), 2 or 3")
    for name in ("per_device_train_batch_size", "gradient_accumulation_steps", "num_generations", "max_prompt_length",
                 "max_completion_length", "vllm_tensor_parallel_size", "lora_r"):
        v = getattr(k, name)
        if int(v) < 1:
            raise UserError(f"{name} must be ≥ 1 (got {v})", where=name, fix="use a positive value")


def _resolve(model: ModelInfo, hardware: Hardware, k: Knobs) -> _Sizing:
    """Check ``k`` and fill in what it leaves to the estimator (see :class:`Knobs`)."""
    _check_knobs(k)
    cpu = hardware.profile.is_cpu
    use_vllm = (not cpu) if k.use_vllm is None else k.use_vllm
    if cpu and use_vllm:
        raise UserError("vLLM needs a GPU", where="use_vllm", fix="set use_vllm false with the cpu profile")
    if use_vllm:
        _check_choice(k.vllm_mode, VLLM_MODES, "vllm_mode")
    server = use_vllm and k.vllm_mode == "server"
    vllm_gpus = (k.vllm_gpus or hardware.vllm_gpus or k.vllm_tensor_parallel_size) if server else k.vllm_gpus
    hardware = hardware.with_vllm_gpus(vllm_gpus if server else None)
    if hardware.training_gpus < 1:
        raise UserError(f"no GPU left to train on ({hardware.total_gpus} GPUs, {vllm_gpus} for vLLM)",
                        where="hardware.vllm_gpus", fix="give vLLM fewer GPUs or add GPUs")
    util = k.vllm_gpu_memory_utilization
    if util is None:
        util = TRL_SERVER_DEFAULT_UTIL if server else 0.3
    if not 0 < util <= 1:
        raise UserError(f"vllm_gpu_memory_utilization {util}", where="vllm_gpu_memory_utilization",
                        fix="a fraction in (0, 1]")
    dtype = k.model_dtype or default_model_dtype(k.method, k.zero_stage, hardware)
    _check_choice(dtype, ("bfloat16", "float32"), "model_dtype")
    return _Sizing(model, hardware, k, use_vllm, k.steps_per_generation or k.gradient_accumulation_steps, util,
                   dtype, vllm_gpus)


@dataclass
class _Parts:
    """What the component functions find: the estimate's lines, warnings, problems and vLLM budget."""

    components: list[Component] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    vllm: VllmBudget | None = None

    def add(self, key: str, label: str, n_bytes: float, formula: str, phase: Phase) -> None:
        self.components.append(Component(key, label, gib(n_bytes), formula, phase))


def _policy_weights(s: _Sizing, out: _Parts) -> None:
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
    elif k.method == "full" and k.zero_stage:
        out.add("policy_weights", "policy weights (bf16)", 2 * P / div, f"{_b(P)} × 2 B{s.shard_note}", "resident")
    else:
        out.add("policy_weights", f"policy weights ({s.dtype})", s.wbytes * P / div,
                f"{_b(P)} × {s.wbytes} B{s.shard_note}", "resident")
        if k.method == "full" and s.dtype == "bfloat16":
            out.warnings.append("full fine-tuning with bf16 weights and no fp32 master copy: at lr 5e-7 most AdamW "
                                "updates round away (bf16 resolution 2^-8 relative); load float32 or use DeepSpeed")


def _reference_model(s: _Sizing, out: _Parts) -> None:
    """A frozen copy when beta > 0 under full fine-tuning (PEFT disables the adapters instead)."""
    k, P = s.k, s.model.params
    if k.beta > 0 and k.method == "full":
        wb = 2 if k.zero_stage else s.wbytes
        out.add("reference_model", "reference model (frozen copy)", wb * P / (s.shards if s.zero3 else 1),
                f"beta {k.beta} > 0: {_b(P)} × {wb} B{s.shard_note}", "resident")


def _optimizer_bytes(optimizer: str) -> tuple[int, str]:
    """(bytes per trainable parameter, label) of the optimizer's states."""
    name = "AdamW m, v fp32" if optimizer == "adamw_torch" else "8-bit AdamW m, v"
    if optimizer == "paged_adamw_8bit":
        name += " (paged: may spill to CPU under pressure)"
    return (8 if optimizer == "adamw_torch" else 2), name


def _trainable_states(s: _Sizing, out: _Parts) -> None:
    """Gradients, optimizer states (and fp32 master weights) of what trains: adapters, or the whole model."""
    if s.k.method in ("lora", "qlora"):
        _adapter_states(s, out)
    elif s.k.zero_stage:
        _zero_states(s, out)
    else:
        _unsharded_states(s, out)


def _adapter_states(s: _Sizing, out: _Parts) -> None:
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


def _zero_states(s: _Sizing, out: _Parts) -> None:
    P, N, m = s.model.params, s.shards, s.model
    opt_bytes, opt_name = _optimizer_bytes(s.k.optimizer)
    dp = f" / {N} GPUs" if N > 1 else ""
    if s.k.zero_stage == 3:
        out.add("gradients", "gradients (fp32 partitions)", 4 * P / N, f"{_b(P)} × 4 B{dp}", "training")
    else:
        out.add("gradients", "gradients (bf16 buckets + fp32 partitions)", 2 * P + 4 * P / N,
                f"{_b(P)} × 2 B + {_b(P)} × 4 B{dp}", "training")
    out.add("master_weights", "fp32 master weights", 4 * P / N, f"{_b(P)} × 4 B{dp}", "resident")
    out.add("optimizer", f"optimizer states ({opt_name})", opt_bytes * P / N, f"{_b(P)} × {opt_bytes} B{dp}",
            "resident")
    if s.k.zero_stage == 3:
        out.add("zero3_gather", "ZeRO-3 gathered-parameter buffers", 4 * m.largest_layer_params,
                f"4 B × largest layer {_b(m.largest_layer_params)} (deepspeed memory.rst)", "training")


def _unsharded_states(s: _Sizing, out: _Parts) -> None:
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


def _activations(s: _Sizing, out: _Parts) -> None:
    """What the training forward saves for backward (fp32 on CPU: no bf16 autocast there)."""
    m, k = s.model, s.k
    B, T, gc = k.per_device_train_batch_size, s.seq_len, k.gradient_checkpointing
    out.add("activations", "activations" + (" (gradient checkpointing)" if gc else "") + (" fp32" if s.cpu else ""),
            (2 if s.cpu else 1) * activation_bytes(m, B, T, gc),
            (f"B {B} × T {T} × (layers {m.layers} × 2h + one layer {layer_activation_bytes_per_token(m)} B)" if gc else
             f"B {B} × T {T} × layers {m.layers} × {layer_activation_bytes_per_token(m)} B"), "training")
    if m.is_vlm:
        out.warnings.append("vision-language model: image tokens and the vision tower's activations are not sized "
                            "here (text tokens only); VLM RL is reference-only in this plugin")


def _lm_head(s: _Sizing, out: _Parts) -> None:
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


def _generation(s: _Sizing, out: _Parts) -> None:
    """The rollouts: a vLLM engine (colocated on this GPU, or a server's own GPUs), else generate's KV cache."""
    if s.use_vllm:
        _vllm_engine(s, out)
    else:
        _generate_kv(s, out)


def _vllm_engine(s: _Sizing, out: _Parts) -> None:
    v = out.vllm = _vllm_budget(s)
    if not s.server:
        out.components.append(Component(
            "vllm", f"vLLM engine (colocate, {s.util:.2f} of memory)", v.share_gib,
            f"{s.util} × {s.hardware.memory_gib:.1f} GiB = weights {_g(v.weights_gib)} + "
            f"act. {_g(v.activation_gib)} + overhead {_g(v.overhead_gib)} + KV {_g(v.kv_available_gib)}"
            + (f"; asleep during training: {_g(v.during_training_gib)}" if s.k.vllm_enable_sleep_mode else ""),
            "generation"))
    if v.kv_available_gib <= 0 or v.concurrent_seqs < 1:
        out.problems.append(f"vLLM share {v.utilization} ({v.share_gib:.1f} GiB) cannot hold its weights "
                            f"({v.weights_gib:.1f} GiB) + overhead and one {s.seq_len}-token sequence: raise "
                            "vllm_gpu_memory_utilization" + (" or use more vLLM GPUs (TP)" if s.server else ""))
    elif v.concurrent_seqs < v.max_num_seqs:
        out.warnings.append(f"vLLM KV space ({v.kv_available_gib:.1f} GiB) holds {v.concurrent_seqs} of "
                            f"{v.max_num_seqs} full-length sequences: generation runs in waves (slower, not OOM)")
    if s.k.zero_stage == 3 and s.n_train > 1 and not s.server:
        out.warnings.append("ZeRO-3 + vLLM colocate: weights are gathered parameter by parameter for each sync")


def _vllm_budget(s: _Sizing) -> VllmBudget:
    """The engine's share: weights, profile-run activations, overhead, and the KV space left for sequences."""
    m, k, P = s.model, s.k, s.model.params
    tp = k.vllm_tensor_parallel_size
    # TRL starts a colocated vLLM with bitsandbytes for 4-bit policies (VLLMGeneration); `trl vllm-serve` as
    # launch.sh runs it loads the bf16 checkpoint whatever the policy's method
    weight_bytes = (m.quantizable_params * QLORA_BYTES_PER_PARAM + (P - m.quantizable_params) * 2
                    if k.method == "qlora" and not s.server else 2 * P)
    if s.server:
        # the server serves every training process; data-parallel replicas (vllm_gpus / TP) split them
        gpus = s.vllm_gpus or tp
        max_num_seqs = math.ceil(k.per_device_train_batch_size * s.n_train * s.spg / max(1, gpus // tp))
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


def _generate_kv(s: _Sizing, out: _Parts) -> None:
    m, k, T, N = s.model, s.k, s.seq_len, s.shards
    kv_bytes = 2 if s.dtype == "bfloat16" or not s.cpu else 4
    out.add("generate_kv", "KV cache (transformers generate)", kv_cache_bytes(m, s.round_seqs * T, kv_bytes),
            f"{s.round_seqs} sequences × {T} tokens × {m.kv_bytes_per_token(kv_bytes) // 1024} KiB", "generation")
    if s.zero3 and k.method == "full":
        out.add("zero3_generation_gather", "full weights gathered for generate (ZeRO-3)", 2 * m.params * (1 - 1 / N),
                f"ds3_gather_for_generation: {_b(m.params)} × 2 B × (1 − 1/{N})", "generation")


def _cuda_context(s: _Sizing, out: _Parts) -> None:
    if not s.cpu:
        out.add("cuda_context", "CUDA context, cuBLAS / NCCL workspaces", CUDA_CONTEXT_GIB * GIB,
                f"{CUDA_CONTEXT_GIB:.1f} GiB per process (outside torch's allocator)", "context")


# Every component of the estimate, in the order its table lists them: each function adds its lines (and the
# warnings or problems it finds) for one resolved configuration.
COMPONENTS: tuple[Callable[[_Sizing, _Parts], None], ...] = (
    _policy_weights, _reference_model, _trainable_states, _activations, _lm_head, _generation, _cuda_context)


def _peaks(parts: _Parts) -> tuple[float, float]:
    """(training, generation) peak: what is always held plus each phase's own components."""
    comps = parts.components
    resident = sum(c.gib for c in comps if c.phase in ("resident", "context"))
    training_extra = sum(c.gib for c in comps if c.phase == "training")
    generation_extra = sum(c.gib for c in comps if c.phase == "generation")
    v = parts.vllm
    vllm_during_training = v.during_training_gib if v and v.mode == "colocate" else 0.0
    return resident + training_extra + vllm_during_training, resident + generation_extra


def _check_fit(s: _Sizing, out: _Parts) -> None:
    """Failures and warnings beyond the total: vLLM's start-up check, unified memory, a CPU target."""
    v, mem, profile = out.vllm, s.hardware.memory_gib, s.hardware.profile
    if v and v.mode == "colocate":
        # vLLM checks at start-up that util × total is still free; the policy (and reference) are already loaded.
        loaded = sum(c.gib for c in out.components
                     if c.key in ("policy_weights", "reference_model", "cuda_context", "adapters"))
        if v.share_gib + loaded > mem:
            out.problems.append(f"vLLM start-up check fails: {v.utilization} × {mem:.1f} GiB = "
                                f"{v.share_gib:.1f} GiB is not free after loading the policy ({loaded:.1f} GiB)")
    if v and v.mode == "server" and v.share_gib > mem:
        out.problems.append("vLLM server share exceeds a GPU's memory")
    if profile.unified and s.k.optimizer == "paged_adamw_8bit":
        out.warnings.append("paged optimizer on unified memory: paging 'to CPU' stays in the same pool and frees "
                            "nothing")
    if profile.unified:
        out.warnings.append("DGX Spark: GPU and CPU share one 128 GB pool; a GPU out-of-memory there can freeze the "
                            "whole machine (not just the process) — keep ≥ 15% free and watch `free -g`, "
                            "not nvidia-smi")
    if s.cpu:
        out.warnings.append("CPU profile: fp32 training in host RAM; fine for smoke tests and tiny models only")


def _decode_bound(s: _Sizing, out: _Parts) -> tuple[float, float]:
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


def _settings(s: _Sizing) -> dict[str, Any]:
    """The configuration as estimated (defaults resolved): Estimate.settings."""
    k = s.k
    return dict(method=k.method, num_generations=k.num_generations,
                per_device_train_batch_size=k.per_device_train_batch_size,
                gradient_accumulation_steps=k.gradient_accumulation_steps, steps_per_generation=s.spg,
                max_prompt_length=k.max_prompt_length, max_completion_length=k.max_completion_length, beta=k.beta,
                use_vllm=s.use_vllm, vllm_mode=k.vllm_mode if s.use_vllm else None,
                vllm_gpu_memory_utilization=s.util if s.use_vllm else None,
                vllm_enable_sleep_mode=bool(k.vllm_enable_sleep_mode and s.use_vllm and not s.server),
                vllm_tensor_parallel_size=k.vllm_tensor_parallel_size, vllm_gpus=s.vllm_gpus if s.server else None,
                gradient_checkpointing=k.gradient_checkpointing, optimizer=k.optimizer, zero_stage=k.zero_stage,
                # the adapters' rank and targets under full fine-tuning too: the LoRA suggestion sizes the spec's
                lora_r=k.lora_r, lora_target_modules=k.lora_target_modules,
                fused_lm_head=k.fused_lm_head, cast_lm_head_to_fp32=k.cast_lm_head_to_fp32,
                model_dtype=s.dtype, round_sequences=s.round_seqs)


def estimate(model: ModelInfo, hardware: Hardware, knobs: Knobs, *, suggest: bool = True) -> Estimate:
    """Per-GPU memory of a TRL 1.16 GRPO run of ``knobs`` on ``hardware``; see the module docstring and
    memory-figures.md. Each component is sized by one function of :data:`COMPONENTS`; with ``suggest``, an
    estimate that does not fit comfortably lists fixes, each re-estimated."""
    s = _resolve(model, hardware, knobs)
    parts = _Parts()
    for component in COMPONENTS:
        component(s, parts)
    training_peak, generation_peak = _peaks(parts)
    _check_fit(s, parts)
    decode, single = _decode_bound(s, parts)
    est = Estimate(model=model, hardware=s.hardware, settings=_settings(s), components=tuple(parts.components),
                   vllm=parts.vllm, training_peak_gib=training_peak, generation_peak_gib=generation_peak,
                   warnings=tuple(parts.warnings), problems=tuple(parts.problems), decode_tokens_per_s=decode,
                   decode_single_stream_tokens_per_s=single)
    if suggest and est.verdict != "fits":
        est = replace(est, suggestions=tuple(_suggestions(est)))
    return est


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
    if k.method != "qlora":
        options.append(("QLoRA (4-bit base weights)", {"method": "qlora", "model_dtype": None}, hw))
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
    if hw.training_gpus > 1 and k.zero_stage != 3:
        options.append(("DeepSpeed ZeRO-3 over the training GPUs", {"zero_stage": 3, "model_dtype": None}, hw))
    if not hw.profile.is_cpu and not hw.profile.unified:
        more = hw.with_gpus(hw.gpus * 2)
        options.append((f"twice the GPUs ({more.total_gpus}) with ZeRO-3", {"zero_stage": 3, "model_dtype": None},
                        more))
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
