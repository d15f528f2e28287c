"""Per-variant values of every algorithm-defining GRPOConfig field (DESIGN.md's explicit-fields contract).

TRL's defaults moved under users' feet (loss_type 'grpo' → 'bnpo' → 'dapo', beta 0.04 → 0.0,
scale_rewards True → 'group', vLLM importance-sampling correction on), so a config that leaves any of
these to the installed TRL may train a different algorithm than the one its name says. Every field in
:data:`ALGORITHM_FIELDS` is therefore written explicitly in every rendered config, with the reason
shown in BRIEF.md; a test builds the real GRPOConfig from the rendered YAML and checks each one.

Values that depend on the run (beta and steps_per_generation for grpo, sampling settings, reward
weights, gradient checkpointing) are filled by :func:`algorithm_kwargs`; the rest are fixed per variant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The explicit-fields contract's list, plus the importance-sampling and KL-estimator fields whose TRL defaults would
# otherwise change what "GRPO" computes in 1.16 (clip bounds of the vLLM correction, off-policy mask,
# bias-corrected KL, entropy bonus).
ALGORITHM_FIELDS: tuple[str, ...] = (
    "loss_type", "scale_rewards", "beta", "epsilon", "epsilon_high", "delta", "importance_sampling_level",
    "num_iterations", "steps_per_generation", "num_generations", "temperature", "top_p", "top_k", "min_p",
    "repetition_penalty", "mask_truncated_completions", "top_entropy_quantile", "multi_objective_aggregation",
    "reward_weights", "vllm_importance_sampling_correction", "vllm_importance_sampling_mode",
    "vllm_importance_sampling_clip_min", "vllm_importance_sampling_clip_max", "off_policy_mask_threshold",
    "use_bias_correction_kl", "entropy_coef", "use_adaptive_entropy", "max_completion_length",
    "gradient_checkpointing",
)

# The diagnosis symptom that licenses each non-default variant (variants contract).
VARIANT_SYMPTOM: dict[str, str] = {"dapo": "entropy_collapse", "dr_grpo": "length_drift", "gspo": "moe_without_gspo"}


@dataclass(frozen=True)
class Pinned:
    """A variant's value for one field and why it has that value (shown in BRIEF.md)."""

    value: Any
    reason: str


_COMMON: dict[str, Pinned] = {
    "delta": Pinned(None, "no two-sided (INTELLECT-2) clipping: none of these recipes uses it"),
    "top_entropy_quantile": Pinned(1.0, "train on every token, not only the high-entropy ones"),
    "multi_objective_aggregation": Pinned("sum_then_normalize", "weighted sum of the rewards, then "
                                          "group-normalised: the composite format + correctness reward"),
    "vllm_importance_sampling_correction": Pinned(False, "the recipe's loss has no vLLM/trainer "
                                                  "importance-sampling correction (TRL 1.16 turns it on by default)"),
    "vllm_importance_sampling_mode": Pinned("sequence_mask", "written so the field is not inherited; "
                                            "inactive while the correction is off"),
    "vllm_importance_sampling_clip_min": Pinned(None, "inactive while the correction is off"),
    "vllm_importance_sampling_clip_max": Pinned(3.0, "inactive while the correction is off"),
    "off_policy_mask_threshold": Pinned(None, "no off-policy sequence masking in these recipes"),
    "use_bias_correction_kl": Pinned(False, "the k3 KL estimator of the GRPO paper, without TRL 1.16's "
                                     "importance-weighted correction"),
    "entropy_coef": Pinned(0.0, "no entropy bonus in the loss"),
    "use_adaptive_entropy": Pinned(False, "no adaptive entropy bonus"),
}

VARIANTS: dict[str, dict[str, Pinned]] = {
    "grpo": {
        **_COMMON,
        "loss_type": Pinned("grpo", "sequence-mean GRPO loss (TRL 1.16's default is 'dapo')"),
        "scale_rewards": Pinned("group", "advantages scaled by the group's reward std, as in the GRPO paper"),
        "epsilon": Pinned(0.2, "PPO clip range of the GRPO paper"),
        "epsilon_high": Pinned(0.2, "symmetric clipping (decoupled clipping is DAPO)"),
        "importance_sampling_level": Pinned("token", "token-level ratios (sequence level is GSPO)"),
        "mask_truncated_completions": Pinned(False, "truncated completions still get their reward"),
    },
    "dapo": {
        **_COMMON,
        "loss_type": Pinned("dapo", "token-level loss over the whole batch (DAPO)"),
        "scale_rewards": Pinned("group", "group-std scaling as in DAPO"),
        "epsilon": Pinned(0.2, "DAPO's lower clip bound"),
        "epsilon_high": Pinned(0.28, "DAPO's decoupled upper clip bound (clip-higher against entropy collapse)"),
        "importance_sampling_level": Pinned("token", "token-level ratios"),
        "mask_truncated_completions": Pinned(True, "DAPO drops truncated completions from the loss "
                                             "(overlong filtering)"),
    },
    "dr_grpo": {
        **_COMMON,
        "loss_type": Pinned("dr_grpo", "no per-sequence length normalisation (Dr.GRPO)"),
        "scale_rewards": Pinned("none", "Dr.GRPO also removes the group-std scaling"),
        "epsilon": Pinned(0.2, "PPO clip range"),
        "epsilon_high": Pinned(0.2, "symmetric clipping"),
        "importance_sampling_level": Pinned("token", "token-level ratios"),
        "mask_truncated_completions": Pinned(False, "truncated completions still get their reward"),
    },
    "gspo": {
        **_COMMON,
        "loss_type": Pinned("grpo", "GSPO keeps the sequence-mean loss"),
        "scale_rewards": Pinned("group", "group-std scaling"),
        "epsilon": Pinned(3e-4, "GSPO's clip range for sequence-level ratios"),
        "epsilon_high": Pinned(4e-4, "GSPO's upper clip bound"),
        "importance_sampling_level": Pinned("sequence", "sequence-level ratios: token-level ones are "
                                            "unstable under MoE expert routing"),
        "mask_truncated_completions": Pinned(False, "truncated completions still get their reward"),
    },
}

# beta per variant: grpo uses the spec's (base-recipe contract base recipe 0.01); the others drop the KL term.
VARIANT_BETA: dict[str, float | None] = {"grpo": None, "dapo": 0.0, "dr_grpo": 0.0, "gspo": 0.0}


def algorithm_kwargs(variant: str, *, beta: float, beta_reason: str, num_generations: int,
                     gradient_accumulation_steps: int, num_iterations: int, temperature: float,
                     top_p: float, top_k: int, min_p: float | None, repetition_penalty: float,
                     reward_weights: list[float], max_completion_length: int,
                     gradient_checkpointing: bool, gradient_checkpointing_reason: str,
                     steps_per_generation: int | None = None) -> dict[str, Pinned]:
    """Every field of :data:`ALGORITHM_FIELDS` for this variant and run, each with its reason."""
    if variant not in VARIANTS:
        raise KeyError(variant)
    out: dict[str, Pinned] = dict(VARIANTS[variant])
    fixed_beta = VARIANT_BETA[variant]
    out["beta"] = (Pinned(beta, beta_reason) if fixed_beta is None
                   else Pinned(fixed_beta, f"{variant} drops the KL term (beta 0, no reference model)"))
    if steps_per_generation is not None:
        out["steps_per_generation"] = Pinned(steps_per_generation, "set in the run spec")
    elif variant == "gspo" and num_iterations == 1:
        # GSPO only changes anything off-policy: with one optimiser step per generation the sequence
        # ratio is exactly 1 and the update equals GRPO's.
        out["steps_per_generation"] = Pinned(2 * gradient_accumulation_steps,
                                             "GSPO rendered off-policy: two optimiser steps per generation "
                                             "(on-policy the sequence ratio is 1 and GSPO changes nothing)")
    else:
        out["steps_per_generation"] = Pinned(gradient_accumulation_steps,
                                             "one generation per optimiser step (on-policy)")
    out["num_iterations"] = Pinned(num_iterations, "policy updates per generation batch")
    out["num_generations"] = Pinned(num_generations, "completions per prompt; 8 is the floor "
                                    "(fewer starves the group-relative baseline)")
    out["temperature"] = Pinned(temperature, "generation.temperature (same as Phase 1 sampling)")
    out["top_p"] = Pinned(top_p, "generation.top_p (same as Phase 1 sampling)")
    out["top_k"] = Pinned(top_k, "generation.top_k (0 = off; same as Phase 1 sampling)")
    out["min_p"] = Pinned(min_p, "generation.min_p (same as Phase 1 sampling)")
    out["repetition_penalty"] = Pinned(repetition_penalty, "generation.repetition_penalty")
    out["reward_weights"] = Pinned(list(reward_weights), "the spec's reward weights, in reward order")
    out["max_completion_length"] = Pinned(max_completion_length, "generation.max_completion_length, "
                                          "checked against the dataset's answers")
    out["gradient_checkpointing"] = Pinned(gradient_checkpointing, gradient_checkpointing_reason)
    missing = [f for f in ALGORITHM_FIELDS if f not in out]
    assert not missing, f"variant table incomplete: {missing}"
    return {f: out[f] for f in ALGORITHM_FIELDS}
