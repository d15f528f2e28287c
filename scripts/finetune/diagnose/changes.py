"""What a detector's recommended change is, and the one several detectors share: switching the variant
their symptom licenses (finetune.variants.VARIANT_SYMPTOM), with the paper behind it.

A change is a dict written into diagnosis.json as ``recommended_change``: ``kind`` ("variant", "reward",
"health"; "undecided" when a variant is held back), ``addresses`` (the symptom), ``variant`` (the one
recommended), ``kwargs`` (``{name: {"from", "to"}}``) and either the paper fields of a variant
(``paper``, ``arxiv``, ``reason``, ``apply``) or the ``action`` a reader takes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from finetune.diagnose.evidence import Finding
from finetune.variants import VARIANT_BETA, VARIANT_SYMPTOM, VARIANTS

Change = dict[str, Any]
# What a detector recommends when its symptom is the one addressed: (the finding that fired, the run's
# GRPOConfig kwargs as far as known, the variant it trains with) -> the change.
ChangeFn = Callable[[Finding, dict[str, Any], str], Change]

PAPERS: dict[str, dict[str, str]] = {
    "dapo": {
        "paper": "DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
        "arxiv": "2503.14476",
        "reason": "Clip-Higher decouples the clip bounds (epsilon_high 0.28 > epsilon 0.2) so low-probability "
                  "tokens can still be raised: with a symmetric clip the policy's entropy collapses and "
                  "exploration stops. The token-level loss keeps long responses from being under-weighted, "
                  "overlong filtering masks truncated completions, and the KL term is dropped (beta 0).",
    },
    "dr_grpo": {
        "paper": "Understanding R1-Zero-Like Training: A Critical Perspective (Dr. GRPO)",
        "arxiv": "2503.20783",
        "reason": "GRPO divides each sequence's loss by its length and the advantages by the group's reward "
                  "std; the length normalisation favours long wrong answers (their per-token penalty "
                  "shrinks), so length grows while correctness does not. Dr. GRPO removes both "
                  "normalisations (loss_type 'dr_grpo', scale_rewards 'none').",
    },
    "gspo": {
        "paper": "Group Sequence Policy Optimization",
        "arxiv": "2507.18071",
        "reason": "Token-level importance ratios are unstable under mixture-of-experts routing (the experts "
                  "a token uses change between the rollout and the update), which collapses MoE training. "
                  "GSPO clips one length-normalised sequence-level ratio instead; it is required for MoE, "
                  "and only acts off-policy (more than one optimiser step per generation).",
    },
}


def symptom_variant() -> dict[str, str]:
    """symptom → the variant it licenses, inverted from finetune.variants.VARIANT_SYMPTOM (kept once there)."""
    return {symptom: variant for variant, symptom in VARIANT_SYMPTOM.items()}


def _current(config: dict[str, Any], name: str, fallback: Any) -> tuple[Any, bool]:
    return (config[name], True) if name in config else (fallback, False)


def variant_delta(config: dict[str, Any], variant: str) -> dict[str, dict[str, Any]]:
    """The kwargs that change from the run's config to ``variant`` (finetune.variants is the recipe)."""
    base = {f: p.value for f, p in VARIANTS["grpo"].items()}
    target = {f: p.value for f, p in VARIANTS[variant].items()}
    if VARIANT_BETA[variant] is not None:
        target["beta"] = VARIANT_BETA[variant]
    ga = config.get("gradient_accumulation_steps")
    if variant == "gspo" and int(config.get("num_iterations") or 1) == 1:
        spg = config.get("steps_per_generation") or ga
        if ga is not None and (spg is None or spg <= ga):
            target["steps_per_generation"] = 2 * int(ga)
        elif ga is None:
            target["num_iterations"] = 2  # off-policy without knowing the accumulation
    delta: dict[str, dict[str, Any]] = {}
    for name, new in target.items():
        old, known = _current(config, name, base.get(name))
        if old != new or not known and name not in base:
            delta[name] = {"from": old, "to": new, **({} if known else {"from_assumed": "base GRPO recipe"})}
    return delta


def switch_variant(finding: Finding, config: dict[str, Any], current: str) -> Change:
    """The change of a symptom that licenses a variant: that variant's kwargs and its paper; on a run
    already training with them, a reading of its completions instead (switching again changes nothing)."""
    name = finding.name
    variant = symptom_variant().get(name)
    if variant is None:
        raise LookupError(f"{name} licenses no variant: add it to finetune.variants.VARIANT_SYMPTOM, or give its "
                          "Detector a change of its own")
    delta = variant_delta(config, variant)
    if variant != current or delta:
        return {"kind": "variant", "addresses": name, "variant": variant, "kwargs": delta, **PAPERS[variant],
                "apply": "finetune diagnose RUN --apply (sets `variant` in the spec and re-renders config/)"}
    return {"kind": "health", "addresses": name, "variant": current, "kwargs": {},
            "action": f"the run already trains with {variant}'s settings and still shows {name}: read "
                      "its completions around the marked window and fix the reward or the data"}


def health(name: str, current: str, action: str, kwargs: dict[str, Any] | None = None) -> Change:
    """A change that keeps the variant: the ``action`` to take, with the kwargs it sets (if any)."""
    return {"kind": "health", "addresses": name, "kwargs": kwargs or {}, "action": action, "variant": current}


def advice(action: str) -> ChangeFn:
    """The change of a symptom whose remedy is always the same action and no kwarg."""

    def change(finding: Finding, config: dict[str, Any], current: str) -> Change:
        return health(finding.name, current, action)

    return change
