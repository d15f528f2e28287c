"""The formulas of GPU memory for a GRPO run, and the constants they use: logits and TRL's fused LM head, KV
cache, activations per layer (checked against what autograd saves), the vLLM engine, the decode bound.

Every formula and the published figure it is checked against: :mod:`finetune.memory.published`,
benchmarks/bench_memory.py, references/grpo-memory.md.
"""

from __future__ import annotations

from pathlib import Path

from finetune.models import ModelInfo

GIB = 2**30
METHODS = ("full", "lora", "qlora")
OPTIMIZERS = ("adamw_torch", "adamw_8bit", "paged_adamw_8bit")
VLLM_MODES = ("colocate", "server")

# Held by every CUDA process outside torch's allocator (context, cuBLAS / NCCL workspaces); not seen by
# torch.cuda.max_memory_allocated.
CUDA_CONTEXT_GIB = 1.0
# vLLM engine memory outside its weights/KV/activations ("non-torch" in vLLM's start-up log: 1.27 GiB
# on an H100, vllm PR #11743) plus its CUDA graphs.
VLLM_OVERHEAD_GIB = 1.5
# What a sleeping (level 2) vLLM engine still holds at TP 1 (vllm PR #48337).
VLLM_SLEEP_RESIDUAL_GIB = 0.8
# TRL 1.16 colocate passes max_num_batched_tokens=4096 to vLLM (vllm_generation.py): the profile run's size.
VLLM_COLOCATE_BATCHED_TOKENS = 4096
VLLM_SERVER_BATCHED_TOKENS = 8192
TRL_SERVER_DEFAULT_UTIL = 0.9  # `trl vllm-serve --gpu_memory_utilization` default
# A `trl vllm-serve` GPU must hold this many full-length sequences besides its weights: a server answering every
# training process with fewer runs each round in many waves (the placement takes a larger TP instead).
SERVER_MIN_SEQS = 16
# NF4 with double quantization: 4 bits + an 8-bit absmax per 64 weights + an fp32 constant per 256 blocks.
QLORA_BYTES_PER_PARAM = (4 + 8 / 64 + 32 / (64 * 256)) / 8
# Headroom for allocator fragmentation: above this share of memory a run is "tight".
FIT_FRACTION = 0.92
FIT_FRACTION_UNIFIED = 0.85  # the CPU side (OS, Python, reward functions) shares a unified pool
PROMPTS_PER_STEP = 4  # the seed's recipe: 8 × 4 = 32 completions per step = 4 prompts × 8 generations


# ----------------------------------------------------------------------------------- basic formulas

def logits_bytes(batch: int, completion_tokens: int, vocab: int) -> int:
    """Materialised completion logits of one micro-batch with their gradient: B × T_completion × V × 4 bytes.

    bf16 logits (2 B) plus their bf16 gradient (2 B) — Unsloth's "2 × 2 B × B × T × V". What a trainer
    that materialises logits needs (TRL before its fused head, ms-swift 3.x); TRL 1.16 does not, see
    :func:`fused_head_bytes`.
    """
    return batch * completion_tokens * vocab * 4


# TRL 1.16's GRPOTrainer patches a fused, chunked LM head (trl.trainer.utils.add_fused_lm_head →
# trl/kernels/chunked_logprob.py ChunkedLogProbFunction): logits exist one tile at a time.
TRL_HEAD_TOKEN_TILE = 4096  # trl.kernels.chunked_logprob.TOKEN_CHUNK_SIZE
TRL_HEAD_VOCAB_TILE = 32768  # trl.trainer.utils._CHUNKED_LOGPROB_CHUNK_SIZE


def fused_head_bytes(model: ModelInfo, scored_tokens: int, *, head_trainable: bool, compute_bytes: int = 2,
                     weight_bytes: int = 2) -> int:
    """Backward-pass peak of TRL 1.16's fused LM head for ``scored_tokens`` tokens of one micro-batch.

    One [min(N, 4096) × min(V, 32768)] logit tile in the compute dtype, the fp32 gradient of the head's
    input (N × h × 4), the head's fp32 weight gradient (V × h × 4) when it trains (full fine-tuning), a
    compute-dtype copy of one weight slice when the weights are stored in another dtype, and eight fp32
    per-token statistics. The full [N × V] logits never exist.
    """
    tile = min(scored_tokens, TRL_HEAD_TOKEN_TILE) * min(model.vocab, TRL_HEAD_VOCAB_TILE) * compute_bytes
    grad_hidden = scored_tokens * model.hidden * 4
    grad_weight = model.vocab * model.hidden * 4 if head_trainable else 0
    cast = min(model.vocab, TRL_HEAD_VOCAB_TILE) * model.hidden * compute_bytes if weight_bytes != compute_bytes else 0
    return tile + grad_hidden + grad_weight + cast + 8 * 4 * scored_tokens


def kv_cache_bytes(model: ModelInfo, tokens: int, dtype_bytes: int = 2) -> int:
    """KV cache for ``tokens`` tokens: tokens × 2 × layers × kv_heads × head_dim × dtype bytes."""
    return tokens * model.kv_bytes_per_token(dtype_bytes)


def layer_activation_bytes_per_token(model: ModelInfo) -> int:
    """Activations one decoder layer saves for backward per token (bf16 autocast, O(s) attention).

    2 B × (8h + 4q + 4kv + MLP): two RMSNorm inputs kept in fp32 (4h) and their bf16 outputs and the
    residual (4h), q/k/v before and after rotary (4q + 4kv, counting the attention output); a SwiGLU MLP
    keeps gate, up, act(gate) and their product (4I). An MoE layer keeps those for each of the k
    routed experts plus each token's k copies in and out (2kh) and the router logits (2E). Per-head
    q/k norms (Qwen3) keep another q + kv; gemma-2's sandwich norms (after attention and after the MLP) another
    12h bytes. Checked against the bytes autograd actually saves
    (tests/memory/test_memory.py, benchmarks/bench_memory.py).
    """
    h, q, kv = model.hidden, model.q_dim, model.kv_dim
    if model.is_moe:
        mlp = model.experts_per_token * (4 * model.moe_intermediate + 2 * h) + 2 * model.num_experts
    else:
        mlp = 4 * model.intermediate
    qk_norm = q + kv if model.qk_norm else 0
    sandwich = 6 * h if model.sandwich_norm else 0  # two more RMSNorms: fp32 input (4h) + bf16 output (2h) each
    return 2 * (8 * h + 4 * q + 4 * kv + qk_norm + mlp + sandwich)


def activation_bytes(model: ModelInfo, batch: int, seq_len: int, checkpointing: bool) -> int:
    """Training-forward activations for a micro-batch of ``batch`` sequences of ``seq_len`` tokens.

    With full gradient checkpointing each layer keeps only its bf16 input (2·s·b·h bytes, Korthikanti
    et al. 2205.05198) and one layer is recomputed at a time; without it every layer keeps everything.
    The final norm keeps 6h bytes per token either way.
    """
    tokens = batch * seq_len
    per_layer = layer_activation_bytes_per_token(model)
    if checkpointing:
        per_token = model.layers * 2 * model.hidden + per_layer
    else:
        per_token = model.layers * per_layer
    return tokens * (per_token + 6 * model.hidden)


def eager_attention_bytes(model: ModelInfo, batch: int, seq_len: int, checkpointing: bool) -> int:
    """The T² tensors eager attention keeps for backward, when transformers runs the model with eager attention
    (``ModelInfo.attn_implementation``: a class without SDPA support, e.g. gemma-2's soft-capped attention).

    transformers' ``eager_attention_forward`` (models/gemma2/modeling_gemma2.py) keeps per layer and head the fp32
    softmax output and its bf16 copy that multiplies V (6 B per score), and with soft-capping the tanh output too
    (2 B more); the two masks (sliding and full, bf16) are built once per forward. With gradient checkpointing one
    layer's scores exist at a time. Checked against what autograd saves (tests/memory/test_memory.py)."""
    if model.attn_implementation != "eager":
        return 0
    per_layer = batch * model.heads * seq_len * seq_len * (8 if model.attn_softcapping else 6)
    masks = 2 * batch * seq_len * seq_len * 2
    return per_layer * (1 if checkpointing else model.layers) + masks


def measure_saved_activation_bytes(config_path: str, *, layers: int = 2, tokens: int = 128,
                                   vocab: int = 1024, narrow: int = 1) -> tuple[int, ModelInfo]:
    """Bytes autograd saves for backward in one bf16 forward of a real (random) model on this machine.

    The config at ``config_path`` is cut to ``layers`` layers and a ``vocab``-token vocabulary (the head is
    skipped with logits_to_keep=1) so it runs on a CPU in seconds; ``narrow`` divides hidden_size, intermediate_size
    and head_dim too (the heads stay: attention's T² terms scale with them). Parameters are not counted. Returns
    (measured bytes, the cut model's ModelInfo) to compare with :func:`activation_bytes` (no checkpointing).
    """
    import json
    import tempfile

    import torch
    from transformers import AutoModelForCausalLM

    from finetune.models import load_model_info

    raw = json.loads(Path(config_path).read_text(encoding="utf-8"))
    raw.update(num_hidden_layers=layers, vocab_size=vocab, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    for key in ("hidden_size", "intermediate_size", "head_dim", "query_pre_attn_scalar"):
        if narrow > 1 and raw.get(key):
            raw[key] = int(raw[key]) // narrow
    with tempfile.TemporaryDirectory() as tmp:
        cut = Path(tmp) / "config.json"
        cut.write_text(json.dumps(raw), encoding="utf-8")
        info = load_model_info(str(cut))
        from transformers import AutoConfig

        config = AutoConfig.for_model(**raw)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.train()
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:  # weights saved by matmuls are not activations
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    ids = torch.randint(0, vocab, (1, tokens))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=ids, logits_to_keep=1)
    return sum(saved.values()), info


def vllm_activation_bytes(model: ModelInfo, batched_tokens: int, max_num_seqs: int, tp: int) -> int:
    """vLLM's profile-run peak: one batch of ``batched_tokens`` through a layer plus sampler logits."""
    h = model.hidden
    inter = model.experts_per_token * model.moe_intermediate if model.is_moe else model.intermediate
    layer = batched_tokens * (4 * inter + 8 * h) * 2 // tp
    sampler = max_num_seqs * model.vocab * 4 * 2 // tp  # fp32 logits + probabilities
    return layer + sampler


def decode_bound_tokens_per_s(model: ModelInfo, bandwidth_gbs: float, *, context_tokens: int, streams: int = 1,
                              weight_bytes_per_param: float = 2.0) -> float:
    """Upper bound on decode tokens/s: bandwidth ÷ bytes read per step, × streams decoded per step.

    Each step reads every active weight once (shared by the batch) and each stream's KV cache.
    """
    if bandwidth_gbs <= 0:
        return 0.0
    weights = model.active_params * weight_bytes_per_param
    kv = streams * kv_cache_bytes(model, context_tokens)
    return streams * bandwidth_gbs * 1e9 / (weights + kv)


def gib(n_bytes: float) -> float:
    return n_bytes / GIB


def _g(x: float) -> str:
    return f"{x:.2f}"


def _b(n: float) -> str:
    """Parameter counts for formula strings: 7.62B / 40.4M."""
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"
