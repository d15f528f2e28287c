"""The memory of a run: the recommendation and the estimate for a run spec (or a model without one), and
RUN/memory.md (`finetune memory`, `finetune config render`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from finetune.errors import UserError
from finetune.hardware import Hardware, resolve_hardware
from finetune.memory.estimate import Knobs, estimate_on, workload_of
from finetune.memory.recommend import Recommendation, accumulation_for, recommend
from finetune.memory.result import Estimate
from finetune.models import ModelInfo
from finetune.placement import Request

if TYPE_CHECKING:
    from finetune.spec import RunSpec


# GRPOConfig names a spec's `overrides:` may carry → Knobs fields.
_OVERRIDE_KEYS = {"vllm_gpu_memory_utilization": "vllm_gpu_memory_utilization",
                  "vllm_enable_sleep_mode": "vllm_enable_sleep_mode", "optim": "optimizer",
                  "gradient_checkpointing": "gradient_checkpointing", "steps_per_generation": "steps_per_generation",
                  "per_device_train_batch_size": "per_device_train_batch_size",
                  "gradient_accumulation_steps": "gradient_accumulation_steps"}
# What a caller may pin of the layout: a request to finetune.placement, never a value sized here.
_PLACEMENT = ("use_vllm", "vllm_mode", "vllm_tensor_parallel_size", "zero_stage")
# The workload fields a caller's explicit values may set (the rest of them are chosen).
_WORKLOAD = ("num_generations", "max_prompt_length", "max_completion_length", "beta", "lora_r", "lora_target_modules")


def _with_explicit(workload: Knobs, explicit: dict[str, Any]) -> Knobs:
    """``workload`` with the explicit workload values (popped from ``explicit``; None = not given) applied."""
    given = {k: explicit.pop(k) for k in _WORKLOAD if k in explicit}
    return replace(workload, **{k: v for k, v in given.items() if v is not None})


def request_of_values(values: dict[str, Any]) -> Request:
    """The layout request among explicit values (popped from ``values``; None = not given)."""
    pinned = {k: values.pop(k) for k in _PLACEMENT if k in values}
    return Request(**{k: v for k, v in pinned.items() if v is not None})


def spec_request(spec: RunSpec) -> Request:
    """What a spec pins of the layout besides ``hardware.vllm_gpus``: a colocated engine's TP override."""
    tp = spec.overrides.get("vllm_tensor_parallel_size")
    if not isinstance(tp, int) or isinstance(tp, bool):
        tp = None  # not a count: TRL's GRPOConfig refuses it when the render validates the overrides
    return Request(vllm_tensor_parallel_size=tp)


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
    request = spec_request(spec).pinned(**vars(request_of_values(explicit)))
    chosen.update({k: v for k, v in explicit.items() if v is not None})
    return _recommend_and_estimate(model, resolve_hardware(spec.hardware), method, workload, request, chosen)


def estimate_for_model(model: ModelInfo, hardware: Hardware, **explicit: Any) -> tuple[Recommendation, Estimate]:
    """:func:`estimate_for_spec` without a spec: the seed's workload, with ``explicit`` values (None = not given)."""
    from finetune.loratargets import lora_target_problem

    method = explicit.pop("method", None)
    workload = _with_explicit(Knobs(), explicit)
    problem = lora_target_problem(model, workload.lora_target_modules)
    if problem:
        raise UserError(problem[0], where="--target-modules", fix=problem[1])
    request = request_of_values(explicit)
    return _recommend_and_estimate(model, hardware, method, workload, request, explicit)


def _recommend_and_estimate(model: ModelInfo, hardware: Hardware, method: str | None, workload: Knobs,
                            request: Request, chosen: dict[str, Any]) -> tuple[Recommendation, Estimate]:
    """recommend() — with the layout placement decides for it — and the estimate of what runs on that layout."""
    rec = recommend(model, hardware, method, workload, request)
    fixed = replace(workload, method=rec.method if method is None else method)
    return rec, _estimate_from(model, rec, fixed, chosen)


def _estimate_from(model: ModelInfo, rec: Recommendation, fixed: Knobs, chosen: dict[str, Any]) -> Estimate:
    """The estimate of ``fixed`` on the recommendation's layout, with its values where ``chosen`` leaves them None."""
    values = {k: v for k, v in chosen.items() if v is not None}
    base: dict[str, Any] = dict(
        per_device_train_batch_size=rec.per_device_train_batch_size,
        gradient_accumulation_steps=rec.gradient_accumulation_steps, gradient_checkpointing=rec.gradient_checkpointing,
        optimizer=rec.optimizer, vllm_gpu_memory_utilization=rec.vllm_gpu_memory_utilization,
        vllm_enable_sleep_mode=rec.vllm_enable_sleep_mode)
    if "per_device_train_batch_size" in values and "gradient_accumulation_steps" not in values:
        values["gradient_accumulation_steps"] = accumulation_for(values["per_device_train_batch_size"],
                                                                 rec.layout.training_processes, fixed.num_generations)
    base.update(values)
    if "steps_per_generation" not in values:
        base["steps_per_generation"] = None
    return estimate_on(model, rec.layout, replace(fixed, **base))


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
