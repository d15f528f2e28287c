"""What a spec's ``overrides:`` may set: every GRPOConfig field of the installed TRL, classified.

An override passes only when it cannot change what is optimised, where weights or data go, or what
generates (logging and save cadence, dataloader workers, evaluation, memory and speed knobs). The
optimiser's own shape (scheduler, gradient clipping, Adam's moments, ...) moves only with the licence
that moves the learning rate (a PASS gate and a healthy diagnosis of the base run). Everything else is
refused in one line naming where it belongs in the spec. A TRL upgrade that adds a field fails
``tests/config/test_overrides.py`` until the field is classified here: nothing passes by default.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from typing import TYPE_CHECKING, Any

from finetune.config.plan import Setting
from finetune.errors import UserError
from finetune.variants import ALGORITHM_FIELDS

if TYPE_CHECKING:
    from finetune.spec import RunSpec

TRL_VERSION_PIN = "1.16.0"

# GRPOConfig fields the renderer owns; an override may not set them (they have their own spec field,
# or are pinned per variant under the explicit-fields contract).
SPEC_OWNED = {
    "learning_rate": "training.learning_rate", "per_device_train_batch_size": "training.per_device_train_batch_size",
    "gradient_accumulation_steps": "training.gradient_accumulation_steps", "seed": "training.seed",
    "max_steps": "training.max_steps", "num_train_epochs": "training.num_train_epochs",
    "warmup_steps": "training.warmup_steps",
    "logging_steps": "training.logging_steps", "save_steps": "training.save_steps",
    "optim": "training.optimizer", "output_dir": "(the run directory's train/)",
    "use_vllm": "hardware", "vllm_mode": "hardware.gpus / hardware.vllm_gpus", "generation_batch_size":
    "training.steps_per_generation", "use_cpu": "hardware.profile", "bf16": "hardware.profile",
}

# GRPOConfig fields `overrides` may never set: what the gate judged was sampled with the spec's generation
# settings and scored against this policy and reference; TRL applies generation_kwargs last, over the pinned
# temperature. Each: (what it changes, where it belongs instead).
GATED_OVERRIDES: dict[str, tuple[str, str]] = {
    **{k: ("sampling, which the gate's samples were drawn with", "generation.* (then repeat Phase 1)")
       for k in ("generation_kwargs", "chat_template_kwargs", "cache_implementation", "vllm_structured_outputs_regex",
                 "vllm_model_impl", "train_sampling_strategy")},
    **{k: ("the reference model the KL term holds the policy to", "nothing: the recipe pins it")
       for k in ("sync_ref_model", "ref_model_mixup_alpha", "ref_model_sync_steps", "disable_dropout")},
    "trust_remote_code": ("whether remote code shipped with the model runs", "nothing: remote code never runs"),
    "model_init_kwargs": ("how the policy is loaded (dtype, remote code)", "model / hardware (chosen per scale)"),
}


def _family(what: str, where: str, *names: str) -> dict[str, tuple[str, str]]:
    return {n: (what, where) for n in names}


# Refused outright: (what it changes, where it belongs instead).
REFUSED: dict[str, tuple[str, str]] = {
    **_family("where the weights or the completions go (off this machine, with the user's token)",
              "nothing in a gated run: the person publishes the trained run afterwards (`finetune publish`)",
              "push_to_hub", "hub_token", "hub_private_repo", "hub_model_id", "hub_strategy", "hub_always_push",
              "hub_revision", "log_completions_hub_repo"),
    **_family("where the run's metrics are reported (a tracker off this machine, with the user's token)",
              "the person's own setting: train.py picks the tracker (`finetune.tracking`: the plugin's wandb_project "
              "userConfig or FINETUNE_WANDB_PROJECT in their shell, else Trackio, else files)",
              "report_to", "project", "trackio_space_id", "trackio_bucket_id", "trackio_static_space_id"),
    **_family("which weights training starts from or ends with", "nothing: train.py starts from the gated model",
              "resume_from_checkpoint", "ignore_data_skip", "restore_callback_states_from_checkpoint",
              "load_best_model_at_end", "metric_for_best_model", "greater_is_better"),
    **_family("what generates the completions", "hardware.* (the launch files start and name the vLLM server)",
              "vllm_server_base_url", "vllm_server_host", "vllm_server_port", "vllm_group_port",
              "use_transformers_continuous_batching", "transformers_continuous_batching_config"),
    **_family("where the model is sharded and run", "hardware.* (placement decides the layout)",
              "deepspeed", "fsdp", "fsdp_config", "parallelism_config", "accelerator_config", "local_rank", "fp16"),
    **_family("how the loss is computed (compiled or fused kernels, an automatic batch size)",
              "nothing: the recipe pins it", "torch_compile", "torch_compile_backend", "torch_compile_mode",
              "use_liger_kernel", "liger_kernel_config", "auto_find_batch_size"),
    **_family("which rows train and in what order", "dataset.* / training.seed",
              "shuffle_dataset", "data_seed", "dataloader_drop_last", "dataloader_in_order", "remove_unused_columns"),
    **_family("the loss of a variant", "variant (after a diagnosis)", "sapo_temperature_neg", "sapo_temperature_pos",
              "vespo_k_pos", "vespo_lambda_pos", "vespo_k_neg", "vespo_lambda_neg", "entropy_coef_min",
              "entropy_coef_max", "entropy_coef_delta", "entropy_target"),
    "max_tool_calling_iterations": ("the environment's tool-call bound the gate's rollouts ran under",
                                    "environment.max_tool_calling_iterations (then repeat Phase 1)"),
    "logging_strategy": ("which steps are logged (diagnose and the inspection callback read every one)",
                         "training.logging_steps"),
}

# The optimiser's shape: moves only with the licence that moves the learning rate.
LICENSED: dict[str, str] = {
    **{n: "the learning-rate schedule" for n in ("lr_scheduler_type", "lr_scheduler_kwargs")},
    **{n: "the optimiser's update" for n in ("max_grad_norm", "weight_decay", "adam_beta1", "adam_beta2",
                                             "adam_epsilon", "optim_args", "optim_target_modules")},
    **{n: "the loss" for n in ("label_smoothing_factor", "neftune_noise_alpha", "router_aux_loss_coef",
                               "average_tokens_across_devices")},
}

# Passed: each changes nothing optimised, no destination, nothing that generates. Field -> its effect.
PASSES: dict[str, str] = {
    **{n: "what is logged, nothing optimised" for n in (
        "logging_first_step", "log_on_each_node", "logging_nan_inf_filter", "include_num_input_tokens_seen",
        "log_level", "log_level_replica", "disable_tqdm", "run_name", "log_completions", "num_completions_to_print",
        "log_unique_prompts", "log_multimodal", "skip_memory_metrics", "debug")},
    **{n: "checkpoint cadence and contents, nothing optimised" for n in (
        "save_strategy", "save_total_limit", "save_only_model", "save_on_each_node", "enable_jit_checkpoint")},
    **{n: "data-loading speed, the same rows" for n in (
        "dataloader_num_workers", "dataloader_pin_memory", "dataloader_persistent_workers",
        "dataloader_prefetch_factor", "dataloader_multiprocessing_context")},
    **{n: "evaluation only (the recipe trains on the gated data; nothing optimised)" for n in (
        "eval_strategy", "eval_steps", "eval_delay", "per_device_eval_batch_size", "prediction_loss_only",
        "eval_on_start", "eval_do_concat_batches", "eval_use_gather_object", "eval_accumulation_steps",
        "include_for_metrics", "batch_eval_metrics", "bf16_full_eval", "fp16_full_eval", "num_generations_eval",
        "do_train", "do_eval", "do_predict", "label_names", "length_column_name")},
    **{n: "memory and speed, the same computation (the memory check sees it)" for n in (
        "torch_empty_cache_steps", "activation_checkpointing",
        "activation_checkpointing_kwargs", "vllm_gpu_memory_utilization", "vllm_enable_sleep_mode",
        "vllm_max_model_length", "vllm_tensor_parallel_size", "vllm_server_timeout", "ds3_gather_for_generation",
        "cast_lm_head_to_fp32", "pad_to_multiple_of", "use_cache", "tf32", "full_determinism")},
    **{n: "distributed plumbing, the same computation" for n in (
        "ddp_find_unused_parameters", "ddp_bucket_cap_mb", "ddp_broadcast_buffers", "ddp_static_graph",
        "ddp_timeout", "ddp_backend")},
}


def trl_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("trl")
    except metadata.PackageNotFoundError:  # pragma: no cover - trl is a hard dependency
        return TRL_VERSION_PIN


def grpo_fields() -> list[str]:
    """The installed TRL's GRPOConfig field names."""
    from trl.trainer.grpo_config import GRPOConfig

    return [f.name for f in dataclasses.fields(GRPOConfig)]


_DEPRECATED_ALIAS = re.compile(r"^Deprecated(?: alias of|, use|\. Use) `(\w+)`")


def deprecated_aliases() -> dict[str, str]:
    """GRPOConfig fields the installed TRL marks as a deprecated alias of another field: alias -> field.

    TRL copies an alias over its field in ``__post_init__`` (``vllm_importance_sampling_cap`` becomes
    ``vllm_importance_sampling_clip_max``), so an override of the alias would set the field behind every check
    that names the field. Read from the installed TRL's own field help, not kept by hand.

    >>> deprecated_aliases()["vllm_importance_sampling_cap"]
    'vllm_importance_sampling_clip_max'
    """
    from trl.trainer.grpo_config import GRPOConfig

    out: dict[str, str] = {}
    for f in dataclasses.fields(GRPOConfig):
        match = _DEPRECATED_ALIAS.match(str(f.metadata.get("help", "")))
        if match:
            out[f.name] = match.group(1)
    return out


def classified() -> dict[str, str]:
    """Every field this module classifies -> its class (pass, licensed, refused, gated, algorithm, spec, alias)."""
    out: dict[str, str] = {}
    for cls, names in (("pass", PASSES), ("licensed", LICENSED), ("refused", REFUSED), ("gated", GATED_OVERRIDES),
                       ("algorithm", ALGORITHM_FIELDS), ("spec", SPEC_OWNED), ("alias", deprecated_aliases())):
        for name in names:
            out.setdefault(name, cls)
    return out


def _remote_code(value: Any) -> bool:
    """Does an override value carry trust_remote_code anywhere inside it?"""
    if isinstance(value, dict):
        return any(k == "trust_remote_code" or _remote_code(v) for k, v in value.items())
    return isinstance(value, (list, tuple)) and any(_remote_code(v) for v in value)


def _refuse(key: str, value: Any, version: str, fields: list[str], aliases: dict[str, str]) -> None:
    """Raise the one-line refusal for ``key`` unless it may be overridden at all."""
    where = f"overrides.{key}"
    if key not in fields:
        close = difflib.get_close_matches(key, sorted(fields), n=1, cutoff=0.5)
        raise UserError(f"'{key}' is not a GRPOConfig field in TRL {version}", where=where,
                        fix=f"did you mean '{close[0]}'?" if close else "see TRL's GRPOConfig reference")
    if key in aliases:
        raise UserError(f"'{key}' is a deprecated alias of '{aliases[key]}' in TRL {version}, which copies it "
                        f"over that field", where=where, fix=f"remove it; the field itself is '{aliases[key]}'")
    if key in ALGORITHM_FIELDS:
        raise UserError(f"'{key}' is algorithm-defining and pinned per variant (explicit-fields contract)",
                        where=where, fix="set `variant` (after a diagnosis) or the matching generation/training field")
    if key in GATED_OVERRIDES or _remote_code(value):
        what, instead = GATED_OVERRIDES.get(key, GATED_OVERRIDES["trust_remote_code"])
        raise UserError(f"'{key}' cannot be overridden: it changes {what}", where=where,
                        fix=f"remove it from overrides; set {instead}" if not instead.startswith("nothing")
                        else f"remove it from overrides ({instead})")
    if key in SPEC_OWNED:
        raise UserError(f"'{key}' has its own place in the spec", where=where, fix=f"set {SPEC_OWNED[key]} instead")
    if key in REFUSED:
        what, instead = REFUSED[key]
        raise UserError(f"'{key}' cannot be overridden: it changes {what}", where=where,
                        fix=f"remove it from overrides; {instead}")
    if key not in PASSES and key not in LICENSED:
        raise UserError(f"'{key}' is a GRPOConfig field of TRL {version} that no one has classified as safe to "
                        "override", where=where,
                        fix="remove it from overrides; classify it in finetune.config.overrides")


def check_overrides(spec: RunSpec) -> dict[str, Setting]:
    """The spec's overrides, each with its effect for BRIEF.md; the first one not allowed raises UserError."""
    version, fields, aliases = trl_version(), grpo_fields(), deprecated_aliases()
    out: dict[str, Setting] = {}
    for key, value in spec.overrides.items():
        _refuse(key, value, version, fields, aliases)
        effect = (PASSES[key] if key in PASSES else
                  f"moves {LICENSED[key]}: allowed only with the learning rate's licence")
        out[key] = Setting(value, f"set in the spec's overrides — {effect}", "override")
    return out


def licensed_changes(overrides: dict[str, Any]) -> list[str]:
    """The overrides that move the optimisation, for the base-recipe licence check beside the learning rate."""
    return [f"overrides.{k}={v!r} ({LICENSED[k]})" for k, v in overrides.items() if k in LICENSED]
