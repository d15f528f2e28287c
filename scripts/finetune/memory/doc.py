"""references/grpo-memory.md, generated from :func:`~finetune.memory.recommend.recommend`,
:func:`~finetune.memory.estimate.estimate` and :func:`~finetune.memory.published.published_checks`
(`finetune docs --check` fails when the committed file differs).
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from finetune.hardware import resolve_hardware
from finetune.memory.formulas import (
    CUDA_CONTEXT_GIB,
    FIT_FRACTION,
    FIT_FRACTION_UNIFIED,
    METHODS,
    QLORA_BYTES_PER_PARAM,
    TRL_HEAD_TOKEN_TILE,
    TRL_HEAD_VOCAB_TILE,
    TRL_SERVER_DEFAULT_UTIL,
    VLLM_OVERHEAD_GIB,
    VLLM_SLEEP_RESIDUAL_GIB,
    decode_bound_tokens_per_s,
    fused_head_bytes,
    gib,
    logits_bytes,
)
from finetune.memory.published import published_checks
from finetune.memory.recommend import Recommendation, recommend
from finetune.memory.run import recommendation_markdown
from finetune.models import ModelInfo

# The representative model of each scale class in the doc's tables (the larger of each class's bundled
# configs, so a table row is on the safe side for the class).
DOC_MODELS: dict[str, str] = {
    "≤3B": "Qwen/Qwen2.5-3B", "7-8B": "Qwen/Qwen3-8B", "14B": "Qwen/Qwen2.5-14B", "32B": "Qwen/Qwen2.5-32B",
    "70B": "Qwen/Qwen2.5-72B", "MoE": "Qwen/Qwen3-30B-A3B",
}


def doc_hardware() -> list[tuple[str, int]]:
    """The per-scale tables' hardware, from the profile registry: every GPU profile on one GPU, smallest memory
    first, then each on a typical node of it (``GpuProfile.node_gpus``) — a profile added to
    :mod:`finetune.hardware` gets its tables with no edit here."""
    from finetune.hardware import PROFILES

    gpus = sorted((p for p in PROFILES.values() if not p.is_cpu), key=lambda p: (p.memory_gib, p.name))
    return [(p.name, 1) for p in gpus] + [(p.name, p.node_gpus) for p in gpus if p.node_gpus > 1]


def _vllm_cell(rec: Recommendation) -> str:
    lay = rec.layout
    if not rec.use_vllm:
        return "off"
    if lay.server:
        return f"server, {lay.vllm_gpus} GPU(s), TP {lay.vllm_tp} × DP {lay.vllm_dp}"
    return f"colocate {rec.vllm_gpu_memory_utilization}" + (f", TP {lay.vllm_tp}" if lay.vllm_tp > 1 else "")


def _doc_row(label: str, rec: Recommendation, chosen: bool) -> dict[str, Any]:
    """One row of a recommendation table (the template adds the bold and the ← mark)."""
    e = rec.estimate
    return {"method": label, "chosen": chosen, "batch": f"{rec.per_device_train_batch_size} × "
            f"{rec.gradient_accumulation_steps}", "checkpointing": "on" if rec.gradient_checkpointing else "off",
            "optimizer": rec.optimizer, "zero": str(rec.zero_stage or "–"), "vllm": _vllm_cell(rec),
            "sleep": "on" if rec.vllm_enable_sleep_mode else "off", "dtype": rec.model_dtype,
            "peak": f"{e.total_gib:.1f} / {e.memory_gib:.0f}", "fits": rec.fits, "verdict": e.verdict,
            "binding": e.binding.key if e.binding else "–"}


def _doc_llama8() -> ModelInfo:
    from finetune.models import load_model_info

    return load_model_info("meta-llama/Llama-3.1-8B")


def _doc_scale_rows(infos: dict[str, ModelInfo]) -> list[dict[str, str]]:
    rows = []
    for cls, hub in DOC_MODELS.items():
        members = ", ".join(f"{h.split('/')[1]} ({i.params / 1e9:.2f} B)" for h, i in infos.items()
                            if i.scale_class == cls)
        m = infos[hub]
        rows.append({"cls": cls, "members": members, "row_model": hub.split("/")[1],
                     "kv": f"{m.kv_bytes_per_token() // 1024} KiB", "lora": f"{m.lora_params(16) / 1e6:.1f} M"})
    return rows


def _doc_profile_rows() -> list[dict[str, str]]:
    from finetune.hardware import PROFILES

    return [{"name": p.name, "label": p.label, "memory": "host RAM" if p.is_cpu else f"{p.memory_gib} GiB",
             "bandwidth": "–" if p.is_cpu else f"{p.bandwidth_gbs:.0f} GB/s", "bf16": "yes" if p.bf16 else "no",
             "cc": ".".join(map(str, p.compute_capability)) if p.compute_capability else "–",
             "cuda": p.min_cuda or "–", "note": p.note} for p in PROFILES.values()]


def _doc_scale_sections(infos: dict[str, ModelInfo]) -> list[dict[str, Any]]:
    """Per scale class, per DOC_HARDWARE entry: every method's recommendation (← the automatic choice)."""
    sections = []
    for cls, hub in DOC_MODELS.items():
        model = infos[hub]
        tables = []
        for profile, gpus in doc_hardware():
            hw = resolve_hardware({"profile": profile, "gpus": gpus})
            auto = recommend(model, hw)
            rows = [_doc_row(method, auto if auto.method == method else recommend(model, hw, method),
                             chosen=auto.method == method and auto.fits) for method in METHODS]
            tables.append({"title": hw.describe(), "rows": rows})
        sections.append({"title": f"{cls} — {hub} ({model.params / 1e9:.2f} B)", "hardware": tables})
    return sections


def _doc_checks() -> tuple[list[dict[str, str]], dict[str, str]]:
    """The published-figure rows and the scored summary."""
    checks = published_checks()
    rows = [{"what": c.what, "source": c.source, "setup": c.setup + ("; " + c.note if c.note else ""),
             "published": f"{c.published:g} {c.unit}", "ours": f"{c.ours:.2f} {c.unit}",
             "error": f"{100 * c.error:+.1f}%", "scored": "yes" if c.scored else "no"} for c in checks]
    scored = sorted(abs(c.error) for c in checks if c.scored)
    measured = sorted(abs(c.error) for c in checks if c.scored and c.kind == "measurement")
    summary = {"count": str(len(scored)), "median": f"{100 * statistics.median(scored):.1f}",
               "largest": f"{100 * scored[-1]:.1f}", "measured": str(len(measured)),
               "measured_median": f"{100 * statistics.median(measured):.1f}",
               "measured_largest": f"{100 * measured[-1]:.1f}"}
    return rows, summary


def _doc_spark(infos: dict[str, ModelInfo]) -> dict[str, Any]:
    from finetune.hardware import PROFILES

    spark = PROFILES["dgx-spark"]
    rows = []
    for hub in ("Qwen/Qwen3-0.6B", "Qwen/Qwen2.5-3B", "Qwen/Qwen3-8B", "Qwen/Qwen2.5-14B", "Qwen/Qwen3-32B",
                "Qwen/Qwen3-30B-A3B", "meta-llama/Llama-3.1-70B"):
        m = infos[hub]
        one = decode_bound_tokens_per_s(m, spark.bandwidth_gbs, context_tokens=512)
        many = decode_bound_tokens_per_s(m, spark.bandwidth_gbs, context_tokens=1024, streams=32)
        rows.append({"model": hub, "one": f"{one:.1f}", "many": f"{many:.0f}"})
    return {"label": spark.label, "memory": str(spark.memory_gib), "bandwidth": f"{spark.bandwidth_gbs:.0f}",
            "rows": rows}


def _doc_unsloth() -> dict[str, str]:
    """Long-context figures: materialised logits against TRL's fused head (Llama-3.1-8B, 8 × 20,480 tokens)."""
    return {"logits": f"{gib(logits_bytes(8, 20_480, 128_256)):.1f}", "kv": f"{gib(20_480 * 128 * 1024):.1f}",
            "token_tile": f"{TRL_HEAD_TOKEN_TILE:,}", "vocab_tile": f"{TRL_HEAD_VOCAB_TILE:,}",
            "fused": f"{gib(fused_head_bytes(_doc_llama8(), 8 * 20_480, head_trainable=False)):.1f}"}


def grpo_memory_doc() -> str:
    """The whole of references/grpo-memory.md (templates/grpo-memory.md.j2), generated from
    :func:`recommend`, :func:`estimate` and :func:`published_checks` (CI fails when the committed file differs)."""
    from finetune import literals
    from finetune.models import bundled_models, load_model_info

    infos = {hub: load_model_info(hub) for hub in bundled_models()}
    example = recommend(infos["Qwen/Qwen3-8B"], resolve_hardware("h100-80gb"), "lora")
    checks, scored = _doc_checks()
    env = literals.environment(Path(__file__).resolve().parents[1] / "templates")
    return env.get_template("grpo-memory.md.j2").render(
        fit_margin=f"{100 * (1 - FIT_FRACTION):.0f}", fit_margin_unified=f"{100 * (1 - FIT_FRACTION_UNIFIED):.0f}",
        scale_rows=_doc_scale_rows(infos), profile_rows=_doc_profile_rows(), scale_sections=_doc_scale_sections(infos),
        worked_example=example.estimate.to_markdown().split("\n", 2)[2].rstrip(),
        worked_recommendation=recommendation_markdown(example).replace(
            "## Recommended values", "### Recommended values").rstrip(),
        qlora_bytes=f"{QLORA_BYTES_PER_PARAM:.4f}", vllm_overhead=str(VLLM_OVERHEAD_GIB),
        sleep_residual=str(VLLM_SLEEP_RESIDUAL_GIB), cuda_context=str(CUDA_CONTEXT_GIB),
        server_share=str(TRL_SERVER_DEFAULT_UTIL), checks=checks, scored=scored, unsloth=_doc_unsloth(),
        spark=_doc_spark(infos), **_doc_lora(infos["Qwen/Qwen2.5-7B"]))


def _doc_lora(qwen7: ModelInfo) -> dict[str, str]:
    """LoRA r=16 parameters on q_proj + v_proj against all linear layers (the target_modules row)."""
    return {"lora_qv": f"{qwen7.lora_params(16, ['q_proj', 'v_proj']) / 1e6:.1f}",
            "lora_all": f"{qwen7.lora_params(16) / 1e6:.1f}"}
