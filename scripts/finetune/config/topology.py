"""The checks a render makes of the layout :func:`finetune.placement.decide` chose (it decides; nothing here
re-derives it): TRL's batch rule for the real number of training processes, a TP override that would do nothing,
and vLLM's own check of the chosen TP × DP."""

from __future__ import annotations

from typing import TYPE_CHECKING

from finetune.config.plan import Setting, Topology
from finetune.errors import UserError

if TYPE_CHECKING:

    from finetune.models import ModelInfo
    from finetune.spec import RunSpec


def nearest_valid_batches(pdbs: int, ga: int, spg: int, processes: int, num_generations: int,
                          spg_is_ga: bool) -> list[str]:
    """Settings closest to the given ones that satisfy TRL's rule for ``processes`` training processes."""

    def ok(p: int, s: int, g: int) -> bool:
        return (p * processes * s) % g == 0

    out: list[str] = []
    for p in sorted(range(1, 4 * pdbs + 9), key=lambda p: (abs(p - pdbs), -p)):
        if ok(p, spg, num_generations):
            out.append(f"training.per_device_train_batch_size: {p}")
            break
    for g2 in sorted(range(1, 4 * ga + 9), key=lambda x: (abs(x - ga), -x)):
        if spg_is_ga and ok(pdbs, g2, num_generations):
            out.append(f"training.gradient_accumulation_steps: {g2}")
            break
        if not spg_is_ga and ok(pdbs, g2, num_generations):
            out.append(f"training.steps_per_generation: {g2}")
            break
    total = pdbs * processes * spg
    for n in range(num_generations + 1, min(total, 64) + 1):
        if total % n == 0:
            out.append(f"training.num_generations: {n}")
            break
    return out


def _check_batch(plan_kwargs: dict[str, Setting], topo: Topology, info: ModelInfo) -> None:
    pdbs = plan_kwargs["per_device_train_batch_size"].value
    ga = plan_kwargs["gradient_accumulation_steps"].value
    spg = plan_kwargs["steps_per_generation"].value
    g = plan_kwargs["num_generations"].value
    n = topo.training_processes
    if (pdbs * n * spg) % g:
        fixes = nearest_valid_batches(pdbs, ga, spg, n, g, spg_is_ga=spg == ga)
        if topo.nodes == 1 and topo.vllm_mode == "server":
            # or give generation another number of GPUs (placement's: whole TP replicas), which changes the
            # training processes
            from finetune.placement import generation_gpu_alternatives

            for other in generation_gpu_alternatives(info, topo):
                if (pdbs * other.training_processes * spg) % g == 0:
                    fixes.append(f"hardware.vllm_gpus: {other.vllm_gpus}"
                                 + ("" if other.server else " (vLLM colocated)"))
                    break
        where = "training.per_device_train_batch_size"
        raise UserError(
            f"generation batch ({pdbs} per device × {n} training processes × {spg} steps per generation = "
            f"{pdbs * n * spg}) must be divisible by num_generations ({g}) — TRL checks this on the target "
            f"with {n} training processes ({topo.reason})", where=where,
            fix="nearest valid settings: " + "; or ".join(fixes))


def _check_colocate_tp(kw: dict[str, Setting], topo: Topology) -> None:
    """An overridden ``vllm_tensor_parallel_size`` does nothing in server mode: the server's TP comes from `trl
    vllm-serve` (in colocate mode placement laid the engines out with it, checked against TRL and vLLM)."""
    s = kw.get("vllm_tensor_parallel_size")
    if s is None or s.source != "override" or topo.vllm_mode != "server":
        return
    raise UserError(f"vllm_tensor_parallel_size {s.value} does nothing in server mode: the server's TP is "
                    f"`trl vllm-serve --tensor-parallel-size` ({topo.vllm_tp}, chosen from the model's shapes)",
                    where="overrides.vllm_tensor_parallel_size",
                    fix="remove overrides.vllm_tensor_parallel_size (set hardware.vllm_gpus instead)")


def _validate_with_vllm(spec: RunSpec, kw: dict[str, Setting], topo: Topology) -> list[str]:
    """Where vLLM is importable, its own config checks on the rendered TP × DP (as TRL's GRPOConfig checks the
    kwargs): the rule in finetune.vllm_layout is vLLM's, and this catches the day they part. Returns warnings
    (vLLM installed but unable to build its configs here)."""
    from finetune.models import resolve_config_path
    from finetune.vllm_layout import VllmCheckUnavailable, check_with_vllm, vllm_importable, vllm_version

    if not topo.use_vllm or not vllm_importable():
        return []
    server = topo.vllm_mode == "server"
    tp, dp = topo.vllm_tp, topo.vllm_dp
    base = spec.source.parent if spec.source else None
    try:
        refusal = check_with_vllm(resolve_config_path(spec.model, spec.model_config_path, base), tp, dp)
    except VllmCheckUnavailable as exc:
        return [f"vLLM {vllm_version()} is installed but could not check TP {tp} × DP {dp} here ({exc})"]
    if refusal:
        raise UserError(f"the installed vLLM {vllm_version()} refuses TP {tp} × DP {dp}: {refusal}",
                        where="hardware.vllm_gpus" if server else "overrides.vllm_tensor_parallel_size",
                        fix="report it: finetune.vllm_layout's rule and vLLM's disagree")
    return []
