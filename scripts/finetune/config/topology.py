"""Where a render's run goes on the target hardware: the generation node, vLLM's TP × DP split of the generation
GPUs, the training topology, TRL's batch rules for the real number of training processes, and vLLM's own check
of the chosen layout."""

from __future__ import annotations

from typing import TYPE_CHECKING

from finetune.config.plan import Setting, Topology
from finetune.errors import UserError

if TYPE_CHECKING:

    from finetune.hardware import Hardware
    from finetune.memory.recommend import Recommendation
    from finetune.models import ModelInfo
    from finetune.spec import RunSpec


def _check_generation_node(info: ModelInfo, spec: RunSpec, hw: Hardware) -> None:
    """Several nodes: generation lives on node 0 alone, so one node's GPUs must hold the model for `trl
    vllm-serve` (which loads the bf16 checkpoint) at some TP vLLM allows for the heads."""
    from finetune.memory.estimate import workload_of
    from finetune.memory.recommend import server_min_tp

    w = workload_of(spec)
    seq = w.max_prompt_length + w.max_completion_length
    if server_min_tp(info, hw.memory_gib, seq, hw.gpus) is not None:
        return
    need = server_min_tp(info, hw.memory_gib, seq, 1024)
    raise UserError(f"the generation node's {hw.gpus} GPU(s) cannot hold {info.name} for `trl vllm-serve` "
                    f"({info.params / 1e9:.1f} B parameters in bf16 at share 0.9 of {hw.memory_gib:.1f} GiB per GPU)"
                    + (f": it needs TP ≥ {need}" if need else ""), where="hardware.gpus",
                    fix=f"set hardware.gpus: {need} (GPUs per node)" if need else "use GPUs with more memory")


def _check_split(vllm_gpus: int, info: ModelInfo, spec: RunSpec, hw: Hardware) -> None:
    """One node: the spec's server GPUs must split into whole TP groups of a TP vLLM allows for the heads (the
    smallest that holds the model), with no GPU idle; a GPU idle there is one that could have trained."""
    from finetune.memory.estimate import workload_of
    from finetune.memory.recommend import server_min_tp
    from finetune.vllm_layout import nearest_generation_gpus, split_generation_gpus, tp_choices

    w = workload_of(spec)
    min_tp = server_min_tp(info, hw.memory_gib, w.max_prompt_length + w.max_completion_length, vllm_gpus) or 1
    layout = split_generation_gpus(vllm_gpus, info.heads, info.kv_heads, min_tp)
    if layout is None or layout.idle == 0:
        return  # None: no TP within them holds the model, which the memory estimate refuses with its numbers
    allowed = [t for t in tp_choices(info.heads, info.kv_heads, vllm_gpus) if t >= min_tp]
    fixes = nearest_generation_gpus(vllm_gpus, info.heads, info.kv_heads, min_tp, hw.total_gpus - 1)
    raise UserError(f"vllm_gpus {vllm_gpus} cannot be split into whole vLLM replicas: the model needs TP ≥ {min_tp} "
                    f"and vLLM allows TP {allowed} for {info.heads} attention / {info.kv_heads} KV heads, so "
                    f"{layout.idle} GPU(s) would idle", where="hardware.vllm_gpus",
                    fix=" or ".join(f"set hardware.vllm_gpus: {n}" for n in fixes) or "set hardware.vllm_gpus: 0")


def _topology(spec: RunSpec, hw: Hardware, rec: Recommendation, info: ModelInfo) -> Topology:
    h = spec.hardware
    profile = hw.profile.name
    if hw.profile.is_cpu:
        if h.nodes > 1:
            raise UserError("a CPU target runs on one node", where="hardware.nodes", fix="set hardware.nodes: 1")
        return Topology(profile, 1, 0, False, None, 0, 1, 1, "CPU target: no vLLM, one process")
    why = rec.reasons.get("use_vllm", "")
    if rec.vllm_mode == "colocate":
        if h.gpus == 1:
            return Topology(profile, 1, 1, True, "colocate", 0, 1, 1,
                            "one GPU: vLLM colocated with training (the seed's single-GPU default)")
        return Topology(profile, 1, h.gpus, True, "colocate", 0, 1, h.gpus,
                        f"{h.gpus} GPUs, vLLM colocated in each training process ({why})")
    from finetune.memory.estimate import workload_of
    from finetune.memory.recommend import server_layout

    vllm_gpus = int(rec.vllm_gpus or 0)
    w = workload_of(spec)
    layout = server_layout(info, hw.with_vllm_gpus(vllm_gpus), w.max_prompt_length + w.max_completion_length)
    assert layout is not None and layout.tp == rec.vllm_tensor_parallel_size  # the layout memory sized
    serve = (f"`trl vllm-serve` on {layout.used} GPU(s) as TP {layout.tp} × DP {layout.dp}"
             + (f" ({layout.idle} idle)" if layout.idle else ""))
    if h.nodes == 1:
        return Topology(profile, 1, h.gpus, True, "server", vllm_gpus, 1, h.gpus - vllm_gpus,
                        f"{h.gpus} GPUs: {serve}, training on {h.gpus - vllm_gpus} "
                        "(server mode: generation and training do not contend for one device)",
                        layout.tp, layout.dp, layout.reason)
    return Topology(profile, h.nodes, h.gpus, True, "server", vllm_gpus, h.nodes - 1, h.gpus,
                    f"{h.nodes} nodes × {h.gpus} GPUs: node 0 serves generation ({serve}), "
                    + (f"nodes 1..{h.nodes - 1}" if h.nodes > 2 else "node 1")
                    + f" train{'s' if h.nodes == 2 else ''} ({(h.nodes - 1) * h.gpus} processes)",
                    layout.tp, layout.dp, layout.reason)


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
            # or give generation a different number of GPUs, which changes the training process count
            from finetune.vllm_layout import split_generation_gpus

            for v in sorted(range(0, topo.gpus_per_node), key=lambda v: abs(v - topo.vllm_gpus)):
                # only counts that split into whole replicas of the rendered TP (what _check_split accepts)
                layout = split_generation_gpus(v, info.heads, info.kv_heads, topo.vllm_tp) if v else None
                if v and (layout is None or layout.idle):
                    continue
                if v != topo.vllm_gpus and (pdbs * (topo.gpus_per_node - v) * spg) % g == 0:
                    fixes.append(f"hardware.vllm_gpus: {v}" + (" (vLLM colocated)" if v == 0 else ""))
                    break
        where = "training.per_device_train_batch_size"
        raise UserError(
            f"generation batch ({pdbs} per device × {n} training processes × {spg} steps per generation = "
            f"{pdbs * n * spg}) must be divisible by num_generations ({g}) — TRL checks this on the target "
            f"with {n} training processes ({topo.reason})", where=where,
            fix="nearest valid settings: " + "; or ".join(fixes))


def _check_colocate_tp(kw: dict[str, Setting], topo: Topology, info: ModelInfo) -> None:
    """An overridden ``vllm_tensor_parallel_size`` in colocate mode must divide the training processes (TRL 1.16's
    VLLMGeneration: "must divide world size", each TP group a block of ranks) and be a TP vLLM allows for the
    heads; in server mode the server's TP comes from `trl vllm-serve`, so the field would do nothing."""
    from finetune.vllm_layout import tp_allowed

    s = kw.get("vllm_tensor_parallel_size")
    if s is None or s.source != "override" or not topo.use_vllm:
        return
    where, tp, n = "overrides.vllm_tensor_parallel_size", int(s.value), topo.training_processes
    if topo.vllm_mode == "server":
        raise UserError(f"vllm_tensor_parallel_size {tp} does nothing in server mode: the server's TP is "
                        f"`trl vllm-serve --tensor-parallel-size` ({topo.vllm_tp}, chosen from the model's heads)",
                        where=where, fix="remove overrides.vllm_tensor_parallel_size (set hardware.vllm_gpus instead)")
    ok = [t for t in range(1, n + 1) if n % t == 0 and tp_allowed(t, info.heads, info.kv_heads)]
    if tp in ok:
        return
    why = (f"TRL needs it to divide the {n} training process(es)" if n % tp else
           f"vLLM needs it to divide the {info.heads} attention heads and divide, or be a multiple of, the "
           f"{info.kv_heads} KV heads")
    raise UserError(f"vllm_tensor_parallel_size {tp} in colocate mode: {why}", where=where,
                    fix=" or ".join(f"set overrides.vllm_tensor_parallel_size: {t}" for t in ok))


def _validate_with_vllm(spec: RunSpec, kw: dict[str, Setting], topo: Topology) -> list[str]:
    """Where vLLM is importable, its own config checks on the rendered TP × DP (as TRL's GRPOConfig checks the
    kwargs): the rule in finetune.vllm_layout is vLLM's, and this catches the day they part. Returns warnings
    (vLLM installed but unable to build its configs here)."""
    from finetune.models import resolve_config_path
    from finetune.vllm_layout import VllmCheckUnavailable, check_with_vllm, vllm_importable, vllm_version

    if not topo.use_vllm or not vllm_importable():
        return []
    server = topo.vllm_mode == "server"
    tp = topo.vllm_tp if server else int(kw["vllm_tensor_parallel_size"].value)
    dp = topo.vllm_dp if server else 1
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
