"""The memory of a run: the recommendation and the estimate for a run spec (or a model without one), and
RUN/memory.md (`finetune memory`, `finetune config render`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from finetune.errors import UserError
from finetune.hardware import Hardware, resolve_hardware, with_generation_node
from finetune.memory.estimate import Knobs, estimate, workload_of
from finetune.memory.recommend import Recommendation, accumulation_for, recommend
from finetune.memory.result import Estimate
from finetune.models import ModelInfo

if TYPE_CHECKING:
    from finetune.spec import RunSpec


# GRPOConfig names a spec's `overrides:` may carry → Knobs fields.
_OVERRIDE_KEYS = {"use_vllm": "use_vllm", "vllm_mode": "vllm_mode",
                  "vllm_gpu_memory_utilization": "vllm_gpu_memory_utilization",
                  "vllm_enable_sleep_mode": "vllm_enable_sleep_mode",
                  "vllm_tensor_parallel_size": "vllm_tensor_parallel_size", "optim": "optimizer",
                  "gradient_checkpointing": "gradient_checkpointing", "steps_per_generation": "steps_per_generation",
                  "per_device_train_batch_size": "per_device_train_batch_size",
                  "gradient_accumulation_steps": "gradient_accumulation_steps"}
# The workload fields a caller's explicit values may set (the rest of them are chosen).
_WORKLOAD = ("num_generations", "max_prompt_length", "max_completion_length", "beta", "lora_r", "lora_target_modules")


def _with_explicit(workload: Knobs, explicit: dict[str, Any]) -> Knobs:
    """``workload`` with the explicit workload values (popped from ``explicit``; None = not given) applied."""
    given = {k: explicit.pop(k) for k in _WORKLOAD if k in explicit}
    return replace(workload, **{k: v for k, v in given.items() if v is not None})


def estimate_for_spec(spec: RunSpec, **explicit: Any) -> tuple[Recommendation, Estimate]:
    """The recommendation for a RunSpec and the estimate of what the spec (plus ``explicit`` values) runs.

    Values the spec leaves ``None`` come from :func:`recommend`; values it sets (and ``explicit``
    keyword overrides, e.g. from the CLI; None = not given) win. The renderer folds the estimate into BRIEF.md.
    """
    from finetune.loratargets import lora_target_problem
    from finetune.models import load_model_info

    model = load_model_info(spec.model, spec.model_config_path, spec.source.parent if spec.source else None)
    problem = lora_target_problem(model, spec.lora.target_modules)  # whatever the method: a LoRA fix sizes them
    if problem:
        raise UserError(problem[0], where="lora.target_modules", fix=problem[1])
    tr = spec.training
    chosen: dict[str, Any] = {
        "per_device_train_batch_size": tr.per_device_train_batch_size,
        "gradient_accumulation_steps": tr.gradient_accumulation_steps,
        "steps_per_generation": tr.steps_per_generation, "gradient_checkpointing": tr.gradient_checkpointing,
        "optimizer": tr.optimizer,
    }
    for key, target in _OVERRIDE_KEYS.items():
        if key in spec.overrides and spec.overrides[key] is not None:
            chosen[target] = spec.overrides[key]
    method = explicit.pop("method", None) or spec.method
    workload = _with_explicit(workload_of(spec), explicit)
    chosen.update({k: v for k, v in explicit.items() if v is not None})
    return _recommend_and_estimate(model, with_generation_node(resolve_hardware(spec.hardware)), method, workload,
                                   chosen)


def estimate_for_model(model: ModelInfo, hardware: Hardware, **explicit: Any) -> tuple[Recommendation, Estimate]:
    """:func:`estimate_for_spec` without a spec: the seed's workload, with ``explicit`` values (None = not given)."""
    from finetune.loratargets import lora_target_problem

    method = explicit.pop("method", None)
    workload = _with_explicit(Knobs(), explicit)
    problem = lora_target_problem(model, workload.lora_target_modules)
    if problem:
        raise UserError(problem[0], where="--target-modules", fix=problem[1])
    return _recommend_and_estimate(model, with_generation_node(hardware), method, workload, explicit)


def _recommend_and_estimate(model: ModelInfo, hardware: Hardware, method: str | None, workload: Knobs,
                            chosen: dict[str, Any]) -> tuple[Recommendation, Estimate]:
    """recommend() and the estimate of what runs, both on ``workload``'s LoRA targets and LM head."""
    rec = recommend(model, hardware, method, workload)
    fixed = replace(workload, method=rec.method if method is None else method)
    return rec, _estimate_from(model, hardware, rec, fixed, chosen)


def _estimate_from(model: ModelInfo, hardware: Hardware, rec: Recommendation, fixed: Knobs,
                   chosen: dict[str, Any]) -> Estimate:
    """estimate() of ``fixed`` with the recommendation's values where ``chosen`` leaves them None."""
    values = {k: v for k, v in chosen.items() if v is not None}
    base: dict[str, Any] = dict(
        per_device_train_batch_size=rec.per_device_train_batch_size,
        gradient_accumulation_steps=rec.gradient_accumulation_steps, gradient_checkpointing=rec.gradient_checkpointing,
        optimizer=rec.optimizer, zero_stage=rec.zero_stage, use_vllm=rec.use_vllm,
        vllm_mode=rec.vllm_mode or "colocate",
        vllm_gpu_memory_utilization=rec.vllm_gpu_memory_utilization, vllm_enable_sleep_mode=rec.vllm_enable_sleep_mode,
        vllm_tensor_parallel_size=rec.vllm_tensor_parallel_size, vllm_gpus=rec.vllm_gpus)
    if fixed.method != rec.method:
        base.pop("zero_stage")  # recommended for another method; let the dtype/ZeRO defaults follow
    if "per_device_train_batch_size" in values and "gradient_accumulation_steps" not in values:
        processes = hardware.with_vllm_gpus(values.get("vllm_gpus", rec.vllm_gpus)).training_gpus
        values["gradient_accumulation_steps"] = accumulation_for(values["per_device_train_batch_size"], processes,
                                                                 fixed.num_generations)
    if values.get("vllm_mode") == "colocate" or values.get("use_vllm") is False:
        base.pop("vllm_gpus")
    if values.get("vllm_mode") and values.get("vllm_mode") != rec.vllm_mode:
        base.pop("vllm_gpu_memory_utilization")
    base.update(values)
    if "steps_per_generation" not in values:
        base["steps_per_generation"] = None
    return estimate(model, hardware, replace(fixed, **base))


def recommendation_markdown(rec: Recommendation) -> str:
    """The recommended keyword values with their reasons, as a Markdown table."""
    lines = ["## Recommended values (finetune.memory.recommend)", "",
             f"Verdict for these values: **{rec.estimate.verdict}** (peak {rec.estimate.total_gib:.1f} GiB).", "",
             "| keyword | value | why |", "|---|---|---|"]
    values = rec.as_dict()
    for key in ("method", "per_device_train_batch_size", "gradient_accumulation_steps", "gradient_checkpointing",
                "optimizer", "zero_stage", "model_dtype", "use_vllm", "vllm_mode", "vllm_gpus",
                "vllm_gpu_memory_utilization", "vllm_enable_sleep_mode"):
        if key in rec.reasons or key in ("vllm_mode",) and rec.use_vllm:
            lines.append(f"| `{key}` | `{values[key]}` | {rec.reasons.get(key, '')} |")
    if "fits" in rec.reasons:
        lines += ["", f"⚠ {rec.reasons['fits']}"]
    return "\n".join(lines) + "\n"


def write_memory_md(out_dir: str | Path, title: str, est: Estimate, rec: Recommendation) -> Path:
    """RUN/memory.md: the estimate's table and the recommendation with its reasons, written atomically."""
    from finetune import atomic, rundir
    from finetune.models import config_origin

    return atomic.write_text(Path(out_dir) / rundir.MEMORY, est.to_markdown(title) + "\n"
                             + config_origin(est.model).replace("model config:", "Model config:", 1) + "\n\n"
                             + recommendation_markdown(rec))
