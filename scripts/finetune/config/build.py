"""`finetune config render SPEC` — Phase 2: the validated GRPO config, train.py and launch files.

Everything is checked here, on a CPU box, for the TARGET hardware before a single file is written:
TRL's batch rules for the real number of training processes (server mode takes GPUs away from
training), the num_generations floor, the variants, base-recipe and explicit-fields contracts,
override names against the installed TRL, completion length against the dataset, the vLLM context,
VLM / MoE models, and the gate record of Phase 1. Then :mod:`finetune.config.render` writes ``config/``
atomically from the Jinja templates. The plan's types: :mod:`finetune.config.plan`; the dataset's lengths:
:mod:`finetune.config.dataset`; where the run goes: :mod:`finetune.config.topology`.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from finetune import jsonio, rundir
from finetune.config.dataset import _check_lengths, _dataset_stats
from finetune.config.overrides import check_overrides, licensed_changes
from finetune.config.overrides import trl_version as _trl_version
from finetune.config.plan import DatasetStats, RenderPlan, Setting, Topology
from finetune.config.topology import _check_batch, _check_colocate_tp, _validate_with_vllm
from finetune.errors import CheckFailed, UserError
from finetune.variants import VARIANT_SYMPTOM, Pinned, algorithm_kwargs

if TYPE_CHECKING:

    from finetune.hardware import Hardware
    from finetune.inspect.gaterecord import GateRecord
    from finetune.memory.estimate import Knobs
    from finetune.memory.recommend import Recommendation
    from finetune.memory.result import Estimate
    from finetune.models import ModelInfo
    from finetune.runlength import RunLength
    from finetune.spec import RunSpec

VLLM_SERVER_PORT = 8000
VLM_REFUSAL = (
    "vision-language RL is reference-only in this plugin (the seed's 'VLM RL: reference only'): the tooling "
    "is split across ms-swift and EasyR1-derived forks with no one-line TRL command, and text-only GRPO on a "
    "VLM tends to reward-hack by optimising the text reasoning while ignoring the image"
)
# ----------------------------------------------------------------------------------------------
# the other modules' interfaces (DESIGN.md)


# An ungated render (`config render --no-gate`) is a preview that cannot train: its train.py runs at most a
# CPU smoke test of UNGATED_SMOKE_STEPS steps, and its launch files refuse to start, unless the environment
# variable FINETUNE_UNGATED_OVERRIDE holds exactly UNGATED_OVERRIDE. /finetune pre-approves no launch, so
# the person sees (and types or approves) that phrase: an agent's pre-approved calls never set it.
UNGATED_OVERRIDE_VAR = "FINETUNE_UNGATED_OVERRIDE"
UNGATED_OVERRIDE = "I train on rewards no one read"
UNGATED_SMOKE_STEPS = 2

def _model_info(spec: RunSpec) -> ModelInfo:
    from finetune.models import load_model_info

    base = spec.source.parent if spec.source else None
    return load_model_info(spec.model, spec.model_config_path, base_dir=base)


def _hardware(spec: RunSpec) -> Hardware:
    from finetune.hardware import resolve_hardware

    return resolve_hardware(spec.hardware)


def _recommend(model_info: ModelInfo, hardware: Hardware, spec: RunSpec) -> Recommendation:
    """memory.recommend() for the target, on the layout placement decides (the spec's hardware.vllm_gpus and a
    colocated TP override pin it)."""
    from finetune.memory.estimate import workload_of
    from finetune.memory.recommend import recommend
    from finetune.memory.run import spec_request

    return recommend(model_info, hardware, spec.method, workload_of(spec), spec_request(spec))


def _knobs(spec: RunSpec, kw: dict[str, Setting], topo: Topology) -> Knobs:
    """The estimator's inputs for exactly the values rendered (spec overrides included); the layout is placement's."""
    from finetune.memory.estimate import Knobs, rendered_lm_head

    g = spec.generation

    def value(k: str, default: Any = None) -> Any:
        return kw[k].value if k in kw else default

    return Knobs(method=kw["_method"].value, num_generations=value("num_generations"),
                 per_device_train_batch_size=value("per_device_train_batch_size"),
                 gradient_accumulation_steps=value("gradient_accumulation_steps"),
                 steps_per_generation=value("steps_per_generation"),
                 max_prompt_length=g.max_prompt_length, max_completion_length=g.max_completion_length,
                 beta=value("beta"), use_vllm=topo.use_vllm,
                 vllm_gpu_memory_utilization=None if topo.server else value("vllm_gpu_memory_utilization"),
                 vllm_enable_sleep_mode=bool(value("vllm_enable_sleep_mode", False)),
                 gradient_checkpointing=value("gradient_checkpointing"), optimizer=value("optim"),
                 lora_r=spec.lora.r, lora_target_modules=spec.lora.target_modules,
                 model_dtype=value("model_init_kwargs")["dtype"] if not topo.cpu else None,
                 **rendered_lm_head(spec.overrides))


def _estimate(model_info: ModelInfo, spec: RunSpec, kw: dict[str, Setting], topo: Topology) -> Estimate:
    """The memory estimate for exactly the values rendered (spec overrides included), on placement's layout."""
    from finetune.memory.estimate import estimate_on

    return estimate_on(model_info, topo, _knobs(spec, kw, topo), suggest=True)


def _verify_gate(run_dir: Path, spec: RunSpec, rescore: bool) -> tuple[bool, str, GateRecord | None]:
    """(holds, reason, record): a PASS record holds only while every bound hash still matches (and, with
    ``rescore``, while the bound rewards re-scored on the bound samples give the scores it judged)."""
    from finetune.inspect.gate import verify_gate

    check = verify_gate(run_dir, spec, rescore=rescore)
    return check.ok, check.reason, check.record


# ----------------------------------------------------------------------------------------------
# validation steps

def _check_lora_targets(spec: RunSpec, info: ModelInfo) -> None:
    """lora.target_modules against the model's real linear layers, as PEFT will match them (checked whatever the
    method: a full-fine-tuning spec's LoRA suggestion sizes them too)."""
    from finetune.loratargets import lora_target_problem

    problem = lora_target_problem(info, spec.lora.target_modules)
    if problem:
        raise UserError(problem[0], where="lora.target_modules", fix=problem[1])


def _check_model(spec: RunSpec, info: ModelInfo) -> None:
    if info.is_vlm:
        raise UserError(f"model '{spec.model}' is a vision-language model: {VLM_REFUSAL}", where="model",
                        fix="use a text-only policy model; see skills/grpo-rlvr-training (VLM RL: reference only)")
    if info.is_moe and spec.variant != "gspo":
        raise UserError(f"model '{spec.model}' is a mixture-of-experts model and variant is '{spec.variant}': "
                        "token-level importance ratios are unstable under expert routing, so MoE requires GSPO "
                        "from the start", where="variant", fix="set `variant: gspo`")


def _load_diagnosis(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / rundir.DIAGNOSIS
    if not path.is_file():
        return None
    doc = jsonio.read_json_object(path, what="the diagnosis", fix="re-run `finetune diagnose`")
    # read from a Trackio project: reported, never a licence unless the person approved it
    if (doc.get("run") or {}).get("licenses") is False and not doc.get("approval"):
        return {**doc, "symptoms": [], "verdict": "not a licence"}
    return doc


def _check_variant(spec: RunSpec, info: ModelInfo, diagnosis: dict[str, Any] | None, run_dir: Path) -> str | None:
    """The variants contract. Returns the licence (why this variant) or raises CheckFailed. A symptom licenses only
    from this run's own training, or with the person's approval (:func:`finetune.diagnose.licence.holds`)."""
    from finetune.diagnose.licence import holds

    if spec.variant == "grpo":
        return None
    if spec.variant == "gspo" and info.is_moe:
        return "the model is mixture-of-experts: GSPO from the start (variants contract)"
    symptom = VARIANT_SYMPTOM[spec.variant]
    # a symptom whose variant diagnose held back (reward and length rising with no correctness reward known)
    # licenses nothing until a correctness reward is named
    names = [s.get("name") for s in (diagnosis or {}).get("symptoms", [])
             if isinstance(s, dict) and not s.get("variant_held")]
    licensed, why = holds(diagnosis, run_dir)
    if symptom in names and licensed:
        return f"{run_dir / rundir.DIAGNOSIS} names the symptom '{symptom}' ({why})"
    carried = (diagnosis or {}).get("variant_licence")
    if (isinstance(carried, dict) and carried.get("variant") == spec.variant and carried.get("symptom") == symptom
            and carried.get("licensed") is True):
        when = (carried.get("diagnosed") or {}).get("time") or "an earlier diagnosis"
        return (f"{run_dir / rundir.DIAGNOSIS} carries the licence of {when}, which named the symptom "
                f"'{symptom}' on the base run")
    if symptom in names:
        raise CheckFailed(f"variant '{spec.variant}': {run_dir / rundir.DIAGNOSIS} names the symptom '{symptom}' "
                          f"but licenses nothing: {why}")
    seen = f"it names {names}" if diagnosis else "there is none"
    raise CheckFailed(f"variant '{spec.variant}' is used only against the symptom '{symptom}', shown by a "
                      f"diagnosis of a base GRPO run ({run_dir / rundir.DIAGNOSIS}; {seen}) — never pre-emptively. "
                      "Train the base recipe (variant: grpo), run `finetune diagnose`, then switch")


def _check_lr_beta(spec: RunSpec, diagnosis: dict[str, Any] | None, gate_ok: bool, preview: bool,
                   run_dir: Path) -> list[str]:
    """The base-recipe contract: lr 5e-7 / beta 0.01 move only after a PASS gate and a healthy diagnosis of this
    run's own base training (or one the person approved)."""
    from finetune.diagnose.licence import holds
    from finetune.spec import BASE_BETA, BASE_LEARNING_RATE

    changed = []
    if not math.isclose(spec.training.learning_rate, BASE_LEARNING_RATE, rel_tol=1e-9):
        changed.append(f"training.learning_rate={spec.training.learning_rate:g} (base {BASE_LEARNING_RATE:g})")
    if spec.variant == "grpo" and not math.isclose(spec.training.beta, BASE_BETA, rel_tol=1e-9):
        changed.append(f"training.beta={spec.training.beta:g} (base {BASE_BETA:g})")
    changed.extend(licensed_changes(spec.overrides))
    if not changed:
        return []
    healthy = diagnosis is not None and diagnosis.get("verdict") == "healthy"
    licensed, licence_why = holds(diagnosis, run_dir)
    if gate_ok and healthy and licensed:
        return [f"{'; '.join(changed)}: allowed by a PASS gate and a healthy diagnosis of the base run ({licence_why})"]
    why = ("no PASS gate record for these rewards" if not gate_ok else
           f"the diagnosis verdict is {diagnosis.get('verdict')!r}" if diagnosis and not healthy else
           f"the healthy diagnosis licenses nothing: {licence_why}" if diagnosis else "no diagnosis of a base run")
    msg = (f"{'; '.join(changed)} moves away from the base recipe, which needs a PASS gate and a 'healthy' "
           f"diagnosis of a base run (base-recipe contract); {why}")
    if preview:
        return [f"PREVIEW ONLY — a full render will refuse: {msg}"]
    raise CheckFailed(msg + ". Keep lr 5e-7 / beta 0.01 until the base run is stable and the reward inspected")


# ----------------------------------------------------------------------------------------------
# building the plan

def _pick(spec_value: Any, rec: Recommendation, name: str, what: str) -> Setting:
    """The spec's value when it sets one, else the recommendation's field ``name`` with its reason."""
    if spec_value is not None:
        return Setting(spec_value, f"set in the run spec ({what})", "spec")
    reason = rec.reasons.get(name)
    return Setting(getattr(rec, name), f"memory.recommend(): {reason or 'per-scale default'}", "memory")


def _relative(path: Path, run_dir: Path, given: str | None = None) -> str:
    """A path as written into the rendered files: relative to the run directory when inside it; a path the
    spec gave relative (``given``: `../model`, `../data/train.jsonl`) stays relative to the run directory,
    `..` included, so the run folder copied with its neighbours to another machine still finds them; a path
    the spec gave absolute stays absolute."""
    resolved = path.resolve()
    try:
        return str(resolved.relative_to(run_dir.resolve()))
    except ValueError:
        if given is not None and not Path(given).expanduser().is_absolute() and not given.startswith("~"):
            return os.path.relpath(resolved, run_dir.resolve())
        return str(resolved)


@dataclass
class _Licence:
    """What the run directory licenses: the diagnosis, why this variant, the gate record (the variants and
    base-recipe contracts)."""

    diagnosis: dict[str, Any] | None
    variant_licence: str | None  # why this variant (None: the base recipe)
    gate_record: GateRecord | None  # a PASS record that still holds
    warnings: list[str]


@dataclass
class _Choice:
    """The per-scale values (per-scale contract): memory.recommend()'s, or the spec's where it sets them."""

    recommendation: Recommendation
    topology: Topology
    zero_stage: int
    method: Setting
    batch: Setting
    accumulation: Setting
    checkpointing: Setting
    optimizer: Setting


@dataclass
class _Data:
    """The dataset as measured, and what its lengths mean for the generation settings."""

    stats: DatasetStats
    format: str
    vllm_max_model_length: int
    warnings: list[str]


def build_plan(spec: RunSpec, run_dir: Path, *, preview: bool = False, no_gate: bool = False,
               rescore: bool = False) -> RenderPlan:
    """Validate ``spec`` for its target hardware and compute every rendered value. Writes nothing.

    The steps, in BRIEF.md's order: the target (hardware, model), the licence to train (variant, gate,
    lr / beta), the per-scale values, the dataset's lengths, every GRPOConfig value, TRL's batch rule,
    the run length, the memory fit; then what the launch files name (model, dataset, adapters).
    """
    run_dir = Path(run_dir)
    _check_num_generations(spec)
    info = _model_info(spec)
    _check_model(spec, info)
    _check_lora_targets(spec, info)
    hw = _hardware(spec)
    overrides = check_overrides(spec)
    licence = _licence(spec, info, run_dir, preview=preview, no_gate=no_gate, rescore=rescore)
    choice = _choose_values(spec, info, hw)
    data = _check_data(spec, info, overrides)
    algorithm = _algorithm(spec, choice)
    kw, sections = _assemble_kwargs(spec, licence, choice, data, algorithm, overrides)
    _check_batch(kw, choice.topology, info)
    _check_colocate_tp(kw, choice.topology)
    vllm_warnings = _validate_with_vllm(spec, kw, choice.topology)
    topo = choice.topology
    if topo.idle_gpus:
        vllm_warnings.append(f"{topo.idle_gpus} GPU(s) of the generation node stay idle: {topo.layout_reason}")
    _validate_with_trl(kw, choice.topology)
    length = _run_length(kw, choice.topology, data.stats.rows)
    est, memory_warnings = _check_memory(info, hw, spec, kw, choice, preview)
    model_ref, dataset, peft, launch_warnings = _launch_inputs(spec, run_dir, data.format, choice.method.value)
    warnings = [*licence.warnings, *data.warnings, *length.warnings, *memory_warnings, *launch_warnings, *vllm_warnings,
                *inspection_warnings(spec, length.optimiser_steps, kw["per_device_train_batch_size"].value
                                     * kw["gradient_accumulation_steps"].value)]
    return RenderPlan(spec, run_dir, preview, no_gate, info, hw, choice.topology, choice.recommendation, est,
                      choice.zero_stage, algorithm, kw, sections, model_ref, dataset, peft,
                      choice.method.value == "qlora", data.stats, licence.gate_record, licence.diagnosis, warnings,
                      length)


def _check_num_generations(spec: RunSpec) -> None:
    from finetune.spec import MIN_NUM_GENERATIONS

    t = spec.training
    if t.num_generations < MIN_NUM_GENERATIONS:
        raise UserError(f"num_generations {t.num_generations} is below the floor of {MIN_NUM_GENERATIONS}: GRPO's "
                        "advantage is relative to the group mean, and fewer samples per prompt give a noisy "
                        "baseline that starves the update", where="training.num_generations",
                        fix=f"use at least {MIN_NUM_GENERATIONS}")


def _licence(spec: RunSpec, info: ModelInfo, run_dir: Path, *, preview: bool, no_gate: bool,
             rescore: bool = False) -> _Licence:
    """The variants and base-recipe contracts and the Phase 1 gate: a preview says what a full render would refuse."""
    diagnosis = _load_diagnosis(run_dir)
    try:
        why = _check_variant(spec, info, diagnosis, run_dir)
    except CheckFailed as exc:
        if not preview:
            raise
        why = f"PREVIEW ONLY — a full render will refuse: {exc}"
    gate_ok, gate_reason, gate_record = _verify_gate(run_dir, spec, rescore and not preview and not no_gate)
    if not preview and not no_gate and not gate_ok:
        raise CheckFailed(f"Phase 2 refused: {gate_reason}")
    warnings = _check_lr_beta(spec, diagnosis, gate_ok, preview, run_dir)
    return _Licence(diagnosis, why, gate_record if gate_ok else None, warnings)


def _choose_values(spec: RunSpec, info: ModelInfo, hw: Hardware) -> _Choice:
    """memory.recommend() for the target, where generation runs, and the spec's values over the recommended."""
    t = spec.training
    rec = _recommend(info, hw, spec)
    topo = rec.layout  # placement.decide's, sized by memory.recommend()
    zero_stage = topo.zero_stage
    method = _pick(spec.method, rec, "method", "method")
    pdbs = _pick(t.per_device_train_batch_size, rec, "per_device_train_batch_size",
                 "training.per_device_train_batch_size")
    ga = _pick(t.gradient_accumulation_steps, rec, "gradient_accumulation_steps",
               "training.gradient_accumulation_steps")
    if pdbs.source == "spec" and ga.source == "memory" and pdbs.value != rec.per_device_train_batch_size:
        # the recommended accumulation was sized for the recommended batch: size it for the user's
        from finetune.memory.recommend import accumulation_for

        n = topo.training_processes
        acc = accumulation_for(pdbs.value, n, t.num_generations)
        ga = Setting(acc, f"memory.accumulation_for(): {pdbs.value} × {n} process(es) × {acc} = "
                     f"{pdbs.value * n * acc} completions per generation round, divisible by num_generations", "memory")
    gc = _pick(t.gradient_checkpointing, rec, "gradient_checkpointing", "training.gradient_checkpointing")
    optim = _pick(t.optimizer, rec, "optimizer", "training.optimizer")
    return _Choice(rec, topo, zero_stage, method, pdbs, ga, gc, optim)


def _check_data(spec: RunSpec, info: ModelInfo, overrides: dict[str, Setting]) -> _Data:
    """Measure the dataset's token lengths and hold the generation settings against them."""
    stats, data_format = _dataset_stats(spec)
    vllm_max_len, warnings = _check_lengths(spec, stats, info, overrides)
    return _Data(stats, data_format, vllm_max_len, warnings)


def _algorithm(spec: RunSpec, choice: _Choice) -> dict[str, Pinned]:
    """The variant's algorithm-defining fields, every one pinned (explicit-fields contract); GSPO must be off-policy."""
    from finetune.spec import BASE_BETA

    t, g, ga, gc = spec.training, spec.generation, choice.accumulation, choice.checkpointing
    beta_reason = ("the seed's base recipe: KL coefficient 0.01 vs the reference policy (base-recipe contract)"
                   if math.isclose(t.beta, BASE_BETA) else "training.beta, allowed under the base-recipe contract")
    algorithm = algorithm_kwargs(
        spec.variant, beta=t.beta, beta_reason=beta_reason, num_generations=t.num_generations,
        gradient_accumulation_steps=ga.value, num_iterations=t.num_iterations, temperature=g.temperature,
        top_p=g.top_p, top_k=g.top_k, min_p=g.min_p, repetition_penalty=g.repetition_penalty,
        reward_weights=[r.weight for r in spec.rewards], max_completion_length=g.max_completion_length,
        gradient_checkpointing=bool(gc.value), gradient_checkpointing_reason=gc.reason,
        steps_per_generation=t.steps_per_generation)
    if (spec.variant == "gspo" and algorithm["steps_per_generation"].value <= ga.value
            and algorithm["num_iterations"].value == 1):
        raise UserError("GSPO on-policy changes nothing: the sequence ratio is exactly 1",
                        where="training.steps_per_generation",
                        fix=f"leave it unset (rendered as {2 * ga.value}) or set num_iterations > 1")
    return algorithm


def _assemble_kwargs(spec: RunSpec, licence: _Licence, choice: _Choice, data: _Data, algorithm: dict[str, Pinned],
                     overrides: dict[str, Setting]) -> tuple[dict[str, Setting], list[tuple[str, list[str]]]]:
    """Every GRPOConfig keyword in rendering order, grouped in titled sections; overrides last, moved out of
    the section that would otherwise hold them."""
    why = licence.variant_licence
    variant_note = f"variant '{spec.variant}'" + (f" — {why}" if why else " (the base recipe)")
    use_vllm = choice.topology.use_vllm
    groups: list[tuple[str, dict[str, Setting]]] = [
        (f"algorithm: {variant_note}; every field pinned (explicit-fields contract)",
         {k: Setting(p.value, p.reason, "variant") for k, p in algorithm.items()}),
        ("optimisation", _optimisation_settings(spec, choice)),
        ("batch (validated for the target's training processes)", _batch_settings(spec, choice)),
        ("precision and model loading", _precision_settings(choice)),
        ("generation (vLLM)" if use_vllm else "generation (transformers; no vLLM on a CPU target)",
         _generation_settings(spec, choice, data.vllm_max_model_length)),
        ("logging and checkpoints (diagnose reads trainer_state.json)", _logging_settings(spec)),
        ("stall bounds (config/watchdog.py also times each moment)", _stall_settings()),
    ]
    if spec.environment is not None:
        groups.append(("tools (multi-turn environment: environment_factory)", _tool_settings(spec)))
    kw: dict[str, Setting] = {}
    sections: list[tuple[str, list[str]]] = []
    for title, items in groups:
        kw.update(items)
        sections.append((title, list(items)))
    if overrides:
        for _, keys in sections:
            keys[:] = [k for k in keys if k not in overrides]
        kw.update(overrides)
        sections.append(("overrides (validated against the installed TRL)", list(overrides)))
    kw["_method"] = choice.method  # not a GRPOConfig kwarg; carried for the estimator and templates
    return kw, sections


def _optimisation_settings(spec: RunSpec, choice: _Choice) -> dict[str, Setting]:
    from finetune.runlength import MAX_WARMUP_FRACTION

    t, optim = spec.training, choice.optimizer
    return {
        "learning_rate": Setting(t.learning_rate, "the seed's settled GRPO learning rate (base-recipe contract)"
                                 if math.isclose(t.learning_rate, 5e-7)
                                 else "training.learning_rate, allowed under the base-recipe contract", "spec"),
        "lr_scheduler_type": Setting("constant_with_warmup", "flat after a short warm-up: RL rewards move slowly"),
        "warmup_steps": Setting(t.warmup_steps, "training.warmup_steps: a short warm-up before the flat "
                                f"learning rate (the run-length check keeps it within {MAX_WARMUP_FRACTION:.0%} "
                                "of the steps)", "spec"),
        "weight_decay": Setting(0.0, "no decay: the update is already KL/clip-bounded"),
        "max_grad_norm": Setting(1.0, "clip gradient spikes from rare high-advantage groups"),
        "optim": Setting(optim.value, optim.reason, optim.source),
        "seed": Setting(t.seed, "the seed's reference seed" if t.seed == 3407 else "training.seed", "spec"),
        "disable_dropout": Setting(True, "dropout makes the policy's log-probs disagree with the sampler's"),
    }


def _batch_settings(spec: RunSpec, choice: _Choice) -> dict[str, Setting]:
    t, pdbs, ga = spec.training, choice.batch, choice.accumulation
    return {
        "per_device_train_batch_size": Setting(pdbs.value, pdbs.reason, pdbs.source),
        "gradient_accumulation_steps": Setting(ga.value, ga.reason, ga.source),
        "num_train_epochs": Setting(t.num_train_epochs, "training.num_train_epochs", "spec"),
        "max_steps": Setting(t.max_steps, "training.max_steps (-1: run the epochs)", "spec"),
        "gradient_checkpointing_kwargs": Setting({"use_reentrant": False}, "non-reentrant checkpointing works "
                                                 "with ZeRO-3 and PEFT"),
    }


def _precision_settings(choice: _Choice) -> dict[str, Setting]:
    rec, cpu = choice.recommendation, choice.topology.cpu
    dtype = "float32" if cpu else rec.model_dtype
    bf16 = not cpu and bool(rec.bf16)
    return {
        "bf16": Setting(bf16, "bf16 mixed precision (the seed's recipe)" if bf16 else "no bf16 on this target"),
        "use_cpu": Setting(cpu, "CPU target" if cpu else "GPU target"),
        "model_init_kwargs": Setting({"dtype": dtype}, "memory.recommend(): " + rec.reasons.get("model_dtype", dtype)
                                     if not cpu else "fp32 on CPU", "memory"),
        "remove_unused_columns": Setting(False, "reward functions receive every dataset column (answers, tests)"),
        "shuffle_dataset": Setting(True, "shuffle prompts each epoch"),
    }


def _generation_settings(spec: RunSpec, choice: _Choice, vllm_max_len: int) -> dict[str, Setting]:
    """Where rollouts run: vLLM colocated (memory.recommend()'s share) or `trl vllm-serve`, or transformers."""
    topo, rec, g = choice.topology, choice.recommendation, spec.generation
    vllm: dict[str, Setting] = {"use_vllm": Setting(topo.use_vllm, topo.reason)}
    if not topo.use_vllm:
        return vllm
    vllm["vllm_mode"] = Setting(topo.vllm_mode, topo.reason)
    vllm["vllm_max_model_length"] = Setting(vllm_max_len, "max_prompt_length + max_completion_length "
                                            f"({g.max_prompt_length} + {g.max_completion_length})")
    if topo.vllm_mode == "colocate":
        vllm["vllm_gpu_memory_utilization"] = Setting(rec.vllm_gpu_memory_utilization, "memory.recommend(): " + str(
            rec.reasons.get("vllm_gpu_memory_utilization", "per-scale share")), "memory")
        vllm["vllm_enable_sleep_mode"] = Setting(bool(rec.vllm_enable_sleep_mode), "memory.recommend(): " + str(
            rec.reasons.get("vllm_enable_sleep_mode", "per-scale default")), "memory")
        vllm["vllm_tensor_parallel_size"] = Setting(topo.vllm_tp, topo.reason)
        return vllm
    one_node = topo.nodes == 1
    vllm["vllm_server_host"] = Setting("127.0.0.1" if one_node else "VLLM_HOST",
                                       "the vllm-serve process on this node" if one_node else
                                       "placeholder for node 0's address: launch.sh passes it to train.py "
                                       "(--vllm-server-host); with `trl grpo` pass --vllm_server_host")
    vllm["vllm_server_port"] = Setting(VLLM_SERVER_PORT, "launch.sh starts `trl vllm-serve` on this port")
    vllm["vllm_server_timeout"] = Setting(600.0, "large models take minutes to load in vllm-serve")
    return vllm


def _tool_settings(spec: RunSpec) -> dict[str, Setting]:
    env = spec.environment
    assert env is not None  # only called for a spec with an environment
    g = spec.generation
    return {"max_tool_calling_iterations": Setting(
        env.max_tool_calling_iterations, "environment.max_tool_calling_iterations: generate → run the calls "
        f"rounds per rollout; every turn and tool result shares max_completion_length ({g.max_completion_length}) "
        "— TRL drops a tool result that would pass it — so memory is sized on max_prompt_length (with the tool "
        "schemas the chat template renders) + max_completion_length", "spec")}


def _logging_settings(spec: RunSpec) -> dict[str, Setting]:
    t = spec.training
    return {
        "output_dir": Setting("train", "the run directory's train/ (relative to the run directory)"),
        "logging_steps": Setting(t.logging_steps, "training.logging_steps", "spec"),
        "logging_first_step": Setting(True, "log step 1: a broken reward shows immediately"),
        "save_strategy": Setting("steps", "checkpoints (with trainer_state.json) every save_steps"),
        "save_steps": Setting(t.save_steps, "training.save_steps", "spec"),
        "report_to": Setting("none", "train.py chooses at start: W&B when the person configured it, else Trackio "
                             "when importable, else files only (BRIEF.md: Tracking); trainer_state.json and "
                             "train/metrics.jsonl are what diagnose licenses from"),
        "log_completions": Setting(True, "print sample completions: keep reading outputs during training"),
        "num_completions_to_print": Setting(2, "a couple per logging step"),
    }


def _stall_settings() -> dict[str, Setting]:
    return {"ddp_timeout": Setting(1800, "torch.distributed collectives between training processes abort after this "
                                   "many seconds (NCCL's watchdog); TRL 1.16's weight sync to vLLM has no timeout of "
                                   "its own: config/watchdog.py bounds it")}


def _check_memory(info: ModelInfo, hw: Hardware, spec: RunSpec, kw: dict[str, Setting], choice: _Choice,
                  preview: bool) -> tuple[Estimate, list[str]]:
    """The memory estimate of exactly the rendered values: refused when it does not fit (a warning in a
    preview), a warning when tight."""
    est = _estimate(info, spec, kw, choice.topology)
    if est.verdict == "does not fit":
        b = est.binding
        moment = f"; binding moment: {b.title}, {b.gib:.1f} of {b.limit_gib:.1f} GiB" if b else ""
        detail = "; ".join(list(est.problems) + [s.action for s in est.suggestions[:2] if s.fits_after])
        msg = (f"the memory estimate does not fit the target: peak {est.total_gib:.1f} GiB of "
               f"{est.memory_gib:.1f} GiB per GPU{moment}" + (f" ({detail})" if detail else ""))
        if not preview:
            raise CheckFailed(msg + "; fix: " + _memory_fixes(info, hw, spec) + "; see `finetune memory` for the "
                              "components")
        return est, [msg]
    if est.verdict == "tight":
        return est, [f"memory is tight: peak {est.total_gib:.1f} GiB of {est.memory_gib:.1f} GiB per GPU"]
    return est, []


def _memory_fixes(info: ModelInfo, hw: Hardware, spec: RunSpec) -> str:
    """Spec edits that fit, each re-decided by placement and re-sized (`memory.recommend.fixes_for`)."""
    from finetune.memory.estimate import workload_of
    from finetune.memory.recommend import fix_text, fixes_for
    from finetune.memory.run import spec_request

    pinned = [f"training.{k}" for k in ("per_device_train_batch_size", "gradient_accumulation_steps",
                                        "gradient_checkpointing", "optimizer") if getattr(spec.training, k) is not None]
    found = fixes_for(info, hw, spec.method, workload_of(spec), spec_request(spec))
    fixes = " or ".join(fix_text(f) for f in found)
    if pinned and (recommended := _recommend(info, hw, spec)).fits:
        fixes = " or ".join(filter(None, [f"remove {', '.join(pinned)} (memory.recommend() fits with "
                                          f"{recommended.per_device_train_batch_size} × "
                                          f"{recommended.gradient_accumulation_steps})", fixes]))
    return fixes or "use GPUs with more memory (no change tried here fits)"


def _launch_inputs(spec: RunSpec, run_dir: Path, data_format: str, method: str
                   ) -> tuple[str, dict[str, Any], dict[str, Any] | None, list[str]]:
    """(model reference, dataset, PEFT config, warnings) as the launch files name them."""
    warnings: list[str] = []
    model_path = spec.resolve_path(spec.model)
    model_ref = _relative(model_path, run_dir, spec.model) if model_path.exists() else spec.model
    dpath = spec.training_data_path()
    given = spec.dataset.filter.path if spec.dataset.filter else spec.dataset.path
    dataset = {"format": data_format, "path": _relative(dpath, run_dir, given), "split": spec.dataset.split,
               "prompt_column": spec.dataset.prompt_column}
    if data_format == "hf_disk":  # `trl grpo` reads a save_to_disk folder through its arrow files
        split_dir = dpath / spec.dataset.split
        dataset["arrow_files"] = (f"{dataset['path']}/{spec.dataset.split}/data-*.arrow" if split_dir.is_dir()
                                  else f"{dataset['path']}/data-*.arrow")
    if spec.dataset.prompt_column != "prompt" or spec.dataset.system_prompt:
        warnings.append("`trl grpo --config` uses the dataset as it is: only train.py renames the prompt column "
                        "to 'prompt' and adds the system prompt — launch with train.py (launch.sh does)")
    peft = None
    if method in ("lora", "qlora"):
        lo = spec.lora
        peft = {"r": lo.r, "lora_alpha": lo.alpha, "lora_dropout": lo.dropout, "target_modules": lo.target_modules,
                "task_type": "CAUSAL_LM"}
    return model_ref, dataset, peft, warnings


def _run_length(kw: dict[str, Setting], topo: Topology, rows: int) -> RunLength:
    """Optimiser steps, log points, warm-up and checkpoints of exactly the rendered values."""
    from finetune.runlength import run_length

    def v(k: str) -> Any:
        return kw[k].value

    return run_length(rows=rows, num_generations=v("num_generations"),
                      per_device_train_batch_size=v("per_device_train_batch_size"),
                      processes=topo.training_processes, gradient_accumulation_steps=v("gradient_accumulation_steps"),
                      steps_per_generation=v("steps_per_generation"), num_iterations=v("num_iterations"),
                      num_train_epochs=v("num_train_epochs"), max_steps=v("max_steps"),
                      logging_steps=v("logging_steps"), warmup_steps=v("warmup_steps"), save_steps=v("save_steps"))


def inspection_settings(spec: Any) -> dict[str, Setting]:
    """The rendered values of train.py's inspection callback (finetune.watch), each with its reason."""
    from finetune.watch import CONFIRM, LIVE_WINDOW

    every, logging = spec.inspection.every_steps, spec.training.logging_steps
    rule = (f"the reward-hacking rule runs on the last {LIVE_WINDOW} log points and stops a run when it fires "
            f"on {CONFIRM} inspections in a row")
    return {
        "every_steps": Setting(every, f"inspection.every_steps; {rule}", "spec") if every else
        Setting(5 * logging, f"5 × logging_steps ({logging}): each inspection sees 5 new log points; {rule}"),
        "sample_rows": Setting(spec.inspection.min_read, "inspection.min_read: a step file holds as many "
                               "completions as the gate needs read (the top-reward ones always among them)", "spec"),
    }


def inspection_warnings(spec: Any, optimiser_steps: int, completions_per_step: int) -> list[str]:
    """A run too short for its inspections to judge anything, or step files too small for the gate.

    ``completions_per_step``: what the main process's rewards score per optimiser step (per-device batch ×
    gradient accumulation), which is what its inspection samples from."""
    from finetune.watch import CONFIRM, MIN_POINTS

    every = inspection_settings(spec)["every_steps"].value
    logging, min_read = spec.training.logging_steps, spec.inspection.min_read
    first = max(every, -(-(MIN_POINTS - 1) * logging // every) * every) + (CONFIRM - 1) * every
    out = []
    if optimiser_steps and every > optimiser_steps:
        out.append(f"inspection.every_steps = {every} exceeds the run's {optimiser_steps} optimiser steps: no "
                   "mid-run inspection will run (lower inspection.every_steps)")
    elif optimiser_steps and first > optimiser_steps:
        out.append(f"the reward-hacking stop rule needs {MIN_POINTS} log points and {CONFIRM} inspections: its first "
                   f"possible stop is step {first} of {optimiser_steps} (lower inspection.every_steps or "
                   "training.logging_steps)")
    if every * completions_per_step < min_read:
        out.append(f"a mid-run step file will hold {every * completions_per_step} completions ({every} steps × "
                   f"{completions_per_step}), fewer than inspection.min_read = {min_read}: the gate cannot PASS on "
                   f"one (set inspection.every_steps ≥ {-(-min_read // completions_per_step)})")
    return out


def grpo_kwargs(plan: RenderPlan) -> dict[str, Any]:
    """The GRPOConfig keyword arguments exactly as rendered (no CPU substitutions)."""
    return {k: s.value for k, s in plan.kwargs.items() if not k.startswith("_")}


def cpu_safe(kwargs: dict[str, Any], processes: int) -> dict[str, Any]:
    """The substitutions that let a GPU-targeted config be built on this CPU box (for checking only).

    The batch rule is re-stated for one process with the target's generation batch, so GRPOConfig
    checks the same divisibility it will check on the target.
    """
    out = dict(kwargs, use_cpu=True, bf16=False, use_vllm=False)
    out["model_init_kwargs"] = {"dtype": "float32"}
    for k in ("vllm_server_host", "vllm_server_port", "vllm_server_timeout"):
        out.pop(k, None)
    spg = out.pop("steps_per_generation")
    out["generation_batch_size"] = out["per_device_train_batch_size"] * processes * spg
    return out


def _validate_with_trl(kw: dict[str, Setting], topo: Topology) -> None:
    import tempfile
    import warnings as _w

    from trl.trainer.grpo_config import GRPOConfig

    args = cpu_safe({k: s.value for k, s in kw.items() if not k.startswith("_")}, topo.training_processes)
    with tempfile.TemporaryDirectory() as tmp, _w.catch_warnings():
        _w.simplefilter("ignore")
        args["output_dir"] = tmp
        try:
            GRPOConfig(**args)
        except (ValueError, TypeError) as exc:
            raise UserError(f"TRL {_trl_version()} rejects the rendered config: {exc}", where="spec",
                            fix="adjust the named setting") from None


# ----------------------------------------------------------------------------------------------
# CLI
