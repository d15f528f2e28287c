"""The one recommended change: the highest-priority symptom's (its Detector's change), held back while the
reward and the length rise together with no correctness reward to tell learning from a length hack;
the verdict and the headline that say it."""

from __future__ import annotations

from typing import Any

from finetune import watch
from finetune.diagnose.changes import Change
from finetune.diagnose.detectors import detector, priority
from finetune.diagnose.evidence import Finding, Run, trend
from finetune.diagnose.logs import K_LENGTH, K_REWARD
from finetune.spec import RunSpec
from finetune.watch import FLAT_GAIN, MIN_POINTS, rises


def current_variant(config: dict[str, Any], spec: RunSpec | None = None) -> str:
    """The variant the run trained with: the spec's, else read off its config (grpo when unknown)."""
    if spec is not None:
        variant: str = spec.variant
        return variant
    if config.get("importance_sampling_level") == "sequence":
        return "gspo"
    if config.get("loss_type") == "dr_grpo":
        return "dr_grpo"
    if config.get("loss_type") == "dapo" and (config.get("epsilon_high") or 0) > (config.get("epsilon") or 0.2):
        return "dapo"
    return "grpo"


def recommended_change(findings: list[Finding], config: dict[str, Any],
                       current: str = "grpo") -> tuple[str, Change | None]:
    """(recommended_variant, recommended_change) for the highest-priority symptom; none → stay on ``current``."""
    shown = [f for f in findings if f.status == "symptom"]
    if not shown:
        return current, None
    first = min(shown, key=lambda f: priority(f.name))
    change = detector(first.name).change(first, config, current)
    return change["variant"], change


def unexplained_rise(run: Run) -> dict[str, Any] | None:
    """The total reward and the completion length both rising significantly while no reward is known to
    be the correctness reward: learning and a length-paying reward look alike there, so no variant may
    be recommended. None when a correctness reward is known or the two do not rise together."""
    if run.correctness_keys():
        return None
    reward, length = run.logs.get(K_REWARD), run.logs.get(K_LENGTH)
    if not (run.enough(reward) and run.enough(length)):
        return None
    rt, lt = trend(reward), trend(length)
    gain = (rt["end"] - rt["start"]) / run.reward_scale(K_REWARD)
    if not (rises(rt) and gain >= FLAT_GAIN and rises(lt)):
        return None
    names = sorted(n for n in (watch.reward_name(k) for k in run.logs.series) if n)
    which = f" (logged: {', '.join(names)})" if names else ""
    return {"evidence": {"reward_trend": rt, "reward_gain_over_scale": gain, "length_trend": lt},
            "why": (f"the total reward ({rt['start']:.3g} → {rt['end']:.3g}) and the completion length "
                    f"({lt['start']:.3g} → {lt['end']:.3g}) rise together and no reward is known to check "
                    "correctness, so a length-paying reward cannot be told from learning"),
            "decide": (f"to decide, pass --correctness NAME for the reward that checks the answer{which}, or "
                       "--spec SPEC; no variant is recommended until then"),
            "caveat": ("the total reward and the completion length rise together with no correctness reward "
                       "identified: any variant a symptom would license is held back (a variant never fixes "
                       "a reward that pays for length)")}


def held_variant(change: Change, co_rise: dict[str, Any], current: str) -> Change:
    """The change that replaces a variant while reward and length rise together with no correctness reward
    to tell learning from a length-paying reward: no variant fixes a hacked reward, so none is recommended
    until a correctness reward is named."""
    return {"kind": "undecided", "addresses": change["addresses"], "variant": current, "kwargs": {},
            "held_variant": change["variant"], "evidence": co_rise["evidence"], "why": co_rise["why"],
            "action": co_rise["decide"]}


def mark_held(symptom: dict[str, Any], change: Change | None) -> dict[str, Any]:
    """A symptom whose variant is held back says so: it licenses no variant (config render reads this)."""
    if change is not None and change["kind"] == "undecided" and symptom["name"] == change["addresses"]:
        symptom["variant_held"] = change["why"]
    return symptom


def verdict(findings: list[Finding], logged_steps: int) -> str:
    """symptom; insufficient (too few steps, or no trend check could be evaluated); else healthy."""
    if any(f.status == "symptom" for f in findings):
        return "symptom"
    if logged_steps < MIN_POINTS or all(f.status == "not_evaluated" for f in findings if detector(f.name).trend):
        return "insufficient"
    return "healthy"


def decide(run: Run, findings: list[Finding], current: str) -> tuple[str, str, Change | None, dict[str, Any] | None]:
    """(verdict, recommended variant, recommended change, the unexplained co-rise of reward and length)."""
    state = verdict(findings, len(run.logs.entries))
    variant, change = recommended_change(findings, run.ctx.config, current)
    if state != "symptom":
        variant, change = current, None
    co_rise = unexplained_rise(run)
    if change is not None and change["kind"] == "variant" and co_rise is not None \
            and not detector(change["addresses"]).required:
        variant, change = current, held_variant(change, co_rise, current)
    return state, variant, change, co_rise


def headline(state: str, variant: str, change: Change | None, current: str, co_rise: dict[str, Any] | None,
             logged_steps: int) -> str:
    """The diagnosis in one line: the change and the symptom it addresses, or why the run stays as it is."""
    stay = "GRPO" if current == "grpo" else current
    if change is not None and change["kind"] == "undecided":
        text = (f"stay on {stay}: {change['addresses']} shows, but {change['why']}; "
                f"{change['action']}")
    elif change is None:
        text = (f"stay on {stay}: no symptom in the logs, so no variant is warranted (never pre-emptively)"
                if state == "healthy" else
                f"stay on {stay}: too little to judge ({logged_steps} logged steps; "
                f"{MIN_POINTS} needed for the trend tests)")
    elif change["kind"] == "variant":
        text = f"switch to {variant}: {change['addresses']} (arXiv {change['arxiv']})"
    elif change["kind"] == "reward":
        fix = f"the reward {change['reward']}" if change["reward"] else "the rewards"
        text = f"stay on {stay}; reward_hacking: fix {fix} (back to Phase 1), no variant"
    else:
        text = f"stay on {stay}; fix {change['addresses']} first"
    if co_rise is not None and (change is None or change["kind"] != "undecided"):
        text += f" — but {co_rise['why']}: {co_rise['decide']}"
    return text
