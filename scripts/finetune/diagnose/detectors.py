"""The diagnose symptoms: one :class:`Detector` entry each in :data:`DETECTORS`, holding the function that
checks the run for it and the change recommended when it is the symptom addressed.

The entries' order is the priority: when several symptoms show, the first one's change is recommended.
Everything else about a symptom (the report, diagnosis.json's checks, references/diagnosis.md) derives
from its entry; the variant a symptom licenses lives once, in finetune.variants.VARIANT_SYMPTOM.

A check is ``def name(run: Run) -> Finding`` (status ``symptom`` / ``clear`` / ``not_evaluated``); the entry's
change is ``advice("what to do")`` for a fixed action, a function ``(finding, config, current) -> Change`` built
with ``health(name, current, action, kwargs)`` when it sets kwargs, or ``switch_variant`` when the symptom licenses
a variant. A constant a check reads is listed in ``thresholds()``.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from types import CodeType
from typing import Any

from finetune import watch
from finetune.diagnose import evidence
from finetune.diagnose.changes import PAPERS, Change, ChangeFn, advice, health, switch_variant, symptom_variant
from finetune.diagnose.evidence import Finding, Run, after_step, correlation, median, second_half, trend, window_points
from finetune.diagnose.logs import K_CLIPPED, K_ENTROPY, K_KL, K_LENGTH, K_REWARD, K_ZERO_STD
from finetune.spec import BASE_LEARNING_RATE
from finetune.watch import FLAT_GAIN, MIN_POINTS, P_SIGNIFICANT, rises

# ----------------------------------------------------------------------------------------------
# names (DESIGN.md's generated symptom list)

ENTROPY_COLLAPSE = "entropy_collapse"
LENGTH_DRIFT = "length_drift"
MOE_WITHOUT_GSPO = "moe_without_gspo"
ZERO_VARIANCE = "zero_variance_groups"
TRUNCATION = "truncation"
FLAT_REWARD = "flat_reward"
KL_BLOWUP = "kl_blowup"
NAN = "nan"
REWARD_HACKING = "reward_hacking"
STALE_WEIGHTS = "stale_vllm_weights"
MISMATCH = "train_inference_mismatch"

# ----------------------------------------------------------------------------------------------
# thresholds (why each value: see the comment beside it)

# MIN_POINTS (fewer logged training steps cannot support a trend test: verdict "insufficient"),
# P_SIGNIFICANT (Spearman's test level for "this series trends"), FLAT_GAIN (reward not rising: no
# significant upward trend, gain under 5% of its scale) and WINDOW_FRACTION (start/end levels are
# medians over the first/last 20% of the points, >= 3) live in finetune.watch with the trend statistics
# and the reward-hacking rule, which the rendered train.py's inspection callback stops a run with.
# Entropy collapse: the token entropy ends at most half its starting level, and once the fall has
# settled the reward does not keep rising (a significant trend that also gains >= FLAT_GAIN): the
# policy stopped exploring without getting better. A fall that comes with a still-rising reward, or
# with the reward at its maximum, is learning / convergence, not collapse.
ENTROPY_DROP = 0.5
# The reward is judged after the fall has settled (entropy within 10% of the way from its final level
# to its start), over at least 5 points.
ENTROPY_SETTLED = 0.1
MIN_PLATEAU_POINTS = 5
# A reward within 5% of its known maximum after the drop is a solved task, not a collapse.
SOLVED_FRACTION = 0.95
# Length drift: mean completion length rises by >= 25% with a significant positive trend, tracks the
# total reward (Spearman rho >= 0.5), and the correctness reward does not rise significantly.
LENGTH_RISE = 0.25
LENGTH_REWARD_RHO = 0.5
# Run health, judged on the second half of the run (the state the run is in, not its warm-up).
ZERO_STD_MAJORITY = 0.5  # median frac_reward_zero_std above this: most groups give no gradient
CLIPPED_MAJORITY = 0.5  # median completions/clipped_ratio above this: most completions truncated
KL_LIMIT = 1.0  # nats per token (TRL logs the mean per-token k3 estimate); healthy runs stay far below
BASELINE_POINTS = 3  # length drift is measured from the median of the first logged steps: a drift in the
#                      first 20% of the run would otherwise hide inside the start window
CAP_REACHED = 0.9  # a mean length at >= 90% of max_completion_length has climbed to the cap
UNKNOWN_SETTING = "unknown (no config found)"
# Train/inference mismatch: vLLM's sampling logprobs disagree with the trainer's for the same weights. TRL 1.16 logs
# sampling/importance_sampling_ratio/{min,mean,max} and sampling/sampling_logp_difference/{mean,max} with
# vllm_importance_sampling_correction on (trl/trainer/grpo_trainer.py, _generate_and_score_completions). The mean
# ratio of matching engines is ~1 (bf16 noise is symmetric); truncated sampling (top_p < 1, top_k > 0, min_p > 0)
# pulls it to the kept probability mass (trl#6789 measured 0.896 at top_p 0.8). Both signals are read from the first
# step on: there vLLM and the trainer hold the same weights, so a gap then is the engines disagreeing, while a gap
# that only grows later is stale weights (stale_vllm_weights).
K_IS_RATIO = "sampling/importance_sampling_ratio/mean"
IS_RATIO_BIAS = 0.05  # |mean ratio - 1| at the first step and (median) over the second half: a biased correction
MISMATCH_MIN_POINTS = 3


# ----------------------------------------------------------------------------------------------
# the checks: each reads the run and returns a Finding — status "symptom" | "clear" | "not_evaluated"


def nan(run: Run) -> Finding:
    bad: dict[str, int] = {}
    for e in run.logs.entries:
        for k, v in e.items():
            if k != "step" and isinstance(v, float) and not math.isfinite(v) and k not in bad:
                bad[k] = e["step"]
    if not bad:
        return Finding(NAN, "clear", "every logged value is finite")
    first = min(bad.values())
    keys = sorted(bad, key=lambda k: (bad[k], k))
    return Finding(NAN, "symptom", f"non-finite values from step {first} ({', '.join(keys[:6])})",
                   {"first_step": first, "first_step_per_key": {k: bad[k] for k in keys}},
                   (first, run.logs.steps[-1]))


def stale_weights(run: Run) -> Finding:
    s = run.logs.get(watch.K_SAMPLING_GAP)
    f = s.finite() if s is not None else None
    d = watch.stale_weights((f.steps, f.values) if f is not None and len(f) else None)
    if d.status == "not_evaluated" and run.ctx.config.get("use_vllm") is False:
        return Finding(STALE_WEIGHTS, "not_evaluated", "the run generates with transformers (use_vllm off)")
    return Finding(STALE_WEIGHTS, d.status, d.why, d.evidence, d.window)


def sampling_filters(config: dict[str, Any]) -> dict[str, Any]:
    """The truncating sampling settings of a config (top_p < 1, top_k > 0, min_p > 0): name → value."""
    def number(key: str) -> float | None:
        value = config.get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    top_p, top_k, min_p = number("top_p"), number("top_k"), number("min_p")
    cuts = {"top_p": top_p is not None and top_p < 1.0, "top_k": top_k is not None and top_k > 0,
            "min_p": min_p is not None and min_p > 0}
    return {k: config[k] for k, cut in cuts.items() if cut}


def mismatch(run: Run) -> Finding:
    ratio, gap = run.logs.get(K_IS_RATIO), run.logs.get(watch.K_SAMPLING_GAP)
    rf = ratio.finite() if ratio is not None else None
    gf = gap.finite() if gap is not None else None
    if (rf is None or len(rf) < MISMATCH_MIN_POINTS) and (gf is None or len(gf) < MISMATCH_MIN_POINTS):
        why = ("the run generates with transformers (use_vllm off)" if run.ctx.config.get("use_vllm") is False else
               f"fewer than {MISMATCH_MIN_POINTS} logged {K_IS_RATIO} / {watch.K_SAMPLING_GAP} values (TRL logs them "
               "with use_vllm and vllm_importance_sampling_correction on)")
        return Finding(MISMATCH, "not_evaluated", why)
    filters = sampling_filters(run.ctx.config)
    ev: dict[str, Any] = {"threshold_ratio_bias": IS_RATIO_BIAS, "threshold_gap": watch.STALE_MIN_GAP,
                          "sampling_filters": filters, "vllm_mode": run.ctx.config.get("vllm_mode")}
    reasons = []
    if rf is not None and len(rf) >= MISMATCH_MIN_POINTS:
        first_bias, bias = abs(rf.values[0] - 1.0), median([abs(v - 1.0) for v in second_half(rf).values])
        ev.update(first_step_ratio=rf.values[0], median_ratio_bias=bias, last_ratio_mean=rf.values[-1])
        if first_bias >= IS_RATIO_BIAS and bias >= IS_RATIO_BIAS:
            reasons.append(f"the mean importance-sampling ratio sits {bias:.1%} from 1 from step {rf.steps[0]} on "
                           f"(first {rf.values[0]:.3g}, last {rf.values[-1]:.3g})")
    if gf is not None and len(gf) >= MISMATCH_MIN_POINTS:
        first, later = gf.values[0], median(gf.values[1:])
        ev.update(first_step_gap=first, later_median_gap=later)
        if first >= watch.STALE_MIN_GAP and later >= watch.STALE_MIN_GAP:
            reasons.append(f"vLLM's logprobs differ from the trainer's by {first:.3g} nats/token already at step "
                           f"{gf.steps[0]}, before any update (median {later:.3g} after)")
    if not reasons:
        return Finding(MISMATCH, "clear", "vLLM's sampling logprobs agree with the trainer's (importance-sampling "
                       "ratio near 1, no gap at the first step)", ev)
    span = rf if rf is not None and len(rf) >= MISMATCH_MIN_POINTS else gf
    assert span is not None
    cause = f"; the run samples with {filters} (trl#6789)" if filters else ""
    return Finding(MISMATCH, "symptom", "; ".join(reasons) + cause, ev, (span.steps[0], span.steps[-1]))


def moe(run: Run) -> Finding:
    info = run.ctx.model_info
    if info is None:
        return Finding(MOE_WITHOUT_GSPO, "not_evaluated", "the model config was not found")
    if not getattr(info, "is_moe", False):
        return Finding(MOE_WITHOUT_GSPO, "clear", f"{info.architecture}: dense (no routed experts)")
    level = run.ctx.config.get("importance_sampling_level")
    ev = {"model": run.ctx.model_source, "architecture": info.architecture, "num_experts": info.num_experts,
          "experts_per_token": info.experts_per_token, "importance_sampling_level": level,
          "config_source": run.ctx.config_source}
    if level == "sequence":
        return Finding(MOE_WITHOUT_GSPO, "clear", "MoE model trained with sequence-level ratios (GSPO)", ev)
    known = "" if level is not None else " (the run's config was not found: assumed token-level)"
    return Finding(MOE_WITHOUT_GSPO, "symptom",
                   f"{info.architecture} routes each token to {info.experts_per_token} of {info.num_experts} "
                   f"experts, and the run uses importance_sampling_level={level or 'token'!r}{known}", ev)


def entropy_collapse(run: Run) -> Finding:
    ent = run.logs.get(K_ENTROPY)
    if not run.enough(ent):
        return Finding(ENTROPY_COLLAPSE, "not_evaluated", f"fewer than {MIN_POINTS} logged entropy values")
    e = ent.finite()
    t = trend(e)
    start = t["start"]
    if not start > 0:
        return Finding(ENTROPY_COLLAPSE, "not_evaluated", "the starting entropy is not positive")
    # first step where a 3-point running median is at or below half the starting level
    halved_at = None
    for i in range(len(e)):
        window = e.values[max(0, i - 1): i + 2]
        if median(window) <= start * (1 - ENTROPY_DROP):
            halved_at = i
            break
    drop = 1 - t["end"] / start
    ev = {"entropy_trend": t, "drop_fraction": drop, "threshold_drop": ENTROPY_DROP}
    if halved_at is None or drop < ENTROPY_DROP:
        moved = f"lost {drop:.0%}" if drop >= 0 else f"rose {-drop:.0%}"
        return Finding(ENTROPY_COLLAPSE, "clear", f"entropy {start:.3g} → {t['end']:.3g} "
                       f"({moved}; a collapse loses ≥ {ENTROPY_DROP:.0%})", ev)
    step_halved = e.steps[halved_at]
    ev["halved_at_step"] = step_halved
    # where the fall settled: the running median within ENTROPY_SETTLED of the final level
    floor = t["end"] + ENTROPY_SETTLED * (start - t["end"])
    settled_at = next((i for i in range(halved_at, len(e))
                       if median(e.values[max(0, i - 1): i + 2]) <= floor), len(e) - 1)
    step_settled = e.steps[settled_at]
    ev["settled_at_step"] = step_settled
    # the reward is judged after the fall settled; when too few points follow it (a fall still
    # going at the end of the log), after the halving; failing that, over the whole run
    judged_from = next(c for c in (settled_at, halved_at, 0) if len(e) - c >= MIN_PLATEAU_POINTS or c == 0)
    ev["reward_judged_from_step"] = e.steps[judged_from]
    reward = run.correctness_series() or run.logs.get(K_REWARD)
    if reward is None:
        return Finding(ENTROPY_COLLAPSE, "not_evaluated", "entropy halved but no reward was logged", ev)
    rt = trend(after_step(reward, e.steps[judged_from]))
    ev["reward_after_fall"] = rt
    name = reward.key.split("/")[1] if reward.key.startswith("rewards/") else None
    metas = run.ctx.rewards
    maximum = (sum(m.weight * m.max for m in metas) if reward.key == K_REWARD
               else next((m.max for m in metas if m.name == name), None))
    if maximum and rt["end"] >= SOLVED_FRACTION * maximum:
        ev["reward_max"] = maximum
        return Finding(ENTROPY_COLLAPSE, "clear", f"entropy fell as the task was solved ({reward.key} "
                       f"{rt['end']:.3g} of max {maximum:.3g}): convergence, not collapse", ev)
    gain = (rt["end"] - rt["start"]) / run.reward_scale(reward.key)
    ev["reward_gain_after_over_scale"] = gain
    if rises(rt) and gain >= FLAT_GAIN:
        return Finding(ENTROPY_COLLAPSE, "clear", f"entropy fell but {reward.key} kept rising after step "
                       f"{e.steps[judged_from]} (rho {rt['spearman_rho']:.2f}, p {rt['p_value']:.2g}): learning",
                       ev)
    return Finding(ENTROPY_COLLAPSE, "symptom",
                   f"entropy fell {drop:.0%} ({start:.3g} → {t['end']:.3g}; halved by step {step_halved}, "
                   f"settled by step {step_settled}) and {reward.key} plateaued after it ({rt['start']:.3g} → "
                   f"{rt['end']:.3g}, rho {rt['spearman_rho']:.2f}, p {rt['p_value']:.2g})", ev,
                   (e.steps[0], step_settled))


def length_drift(run: Run) -> Finding:
    length, reward = run.logs.get(K_LENGTH), run.logs.get(K_REWARD)
    if not (run.enough(length) and run.enough(reward)):
        return Finding(LENGTH_DRIFT, "not_evaluated", f"fewer than {MIN_POINTS} logged lengths / rewards")
    lt = trend(length)
    f = length.finite()
    baseline = median(f.values[:BASELINE_POINTS])
    lt["start"] = baseline  # from the first logged steps: an early drift is still a drift
    rise = lt["end"] / baseline - 1 if baseline > 0 else math.inf
    corr = correlation(length, reward)
    cap: Any = run.ctx.config.get("max_completion_length")
    at_cap = bool(cap) and lt["end"] >= CAP_REACHED * float(cap) and baseline < CAP_REACHED * float(cap)
    ev = {"length_trend": lt, "length_rise": rise, "baseline_points": BASELINE_POINTS,
          "length_vs_reward": corr, "max_completion_length": cap if cap else UNKNOWN_SETTING,
          "climbed_to_cap": at_cap}
    if not (rises(lt) and rise >= LENGTH_RISE):
        return Finding(LENGTH_DRIFT, "clear", f"completion length {baseline:.3g} (first {BASELINE_POINTS} "
                       f"steps) → {lt['end']:.3g} ({rise:+.0%}; drift needs ≥ +{LENGTH_RISE:.0%} with a "
                       "significant trend)", ev)
    correct = run.correctness_series()
    if correct is None:
        run.caveats.append("length rises with the reward, but no reward is known to be the correctness "
                            "reward (spec / REWARD_META roles, or --correctness NAME), so length drift "
                            "could not be told apart from learning")
        return Finding(LENGTH_DRIFT, "not_evaluated", "no correctness reward identified", ev)
    ct = trend(correct)
    ev["correctness_trend"] = ct
    if rises(ct):
        return Finding(LENGTH_DRIFT, "clear", f"length rose with {correct.key}, which rose too "
                       f"(rho {ct['spearman_rho']:.2f}): longer answers are better answers", ev)
    # the window: from the start to where the length reached 90% of its rise
    target = lt["start"] + 0.9 * (lt["end"] - lt["start"])
    reached = next((s for s, v in zip(f.steps, f.values) if v >= target), f.steps[-1])
    ev["reached_step"] = reached
    tracks = (f", tracking the reward (rho {corr['spearman_rho']:.2f})"
              if corr["spearman_rho"] >= LENGTH_REWARD_RHO and corr["p_value"] < P_SIGNIFICANT else "")
    capped = f", up to the cap max_completion_length={cap}" if at_cap else ""
    return Finding(LENGTH_DRIFT, "symptom",
                   f"completion length rose {rise:.0%} ({lt['start']:.3g} tokens over the first "
                   f"{BASELINE_POINTS} steps → {lt['end']:.3g} by step {reached}{capped}, rho "
                   f"{lt['spearman_rho']:.2f}){tracks} while {correct.key} stayed flat ({ct['start']:.3g} → "
                   f"{ct['end']:.3g}, p {ct['p_value']:.2g})", ev, (f.steps[0], reached))


def reward_hacking(run: Run) -> Finding:
    """The total (or a non-correctness) reward rises while every correctness reward is flat or falls:
    finetune.watch.divergence, the rule the rendered train.py's inspection callback stops a run with."""
    series = {k: (f.steps, f.values) for k, s in run.logs.series.items()
              if (k == K_REWARD or watch.reward_name(k)) and len(f := s.finite())}
    d = watch.divergence(series, run.ctx.rewards, run.ctx.named_roles)
    if d.status == "not_evaluated" and d.why == "no correctness reward identified":
        run.caveats.append("no reward is known to be the correctness reward (spec / REWARD_META roles, or "
                            "--correctness NAME), so a reward rising without correctness could not be checked")
    return Finding(REWARD_HACKING, d.status, d.why, d.evidence, d.window)


def zero_variance(run: Run) -> Finding:
    s = run.logs.get(K_ZERO_STD)
    if not run.enough(s):
        return Finding(ZERO_VARIANCE, "not_evaluated", f"fewer than {MIN_POINTS} logged {K_ZERO_STD} values")
    scale = run.ctx.config.get("scale_rewards")
    agg = run.ctx.config.get("multi_objective_aggregation")
    if scale not in (None, "group", "none") or agg not in (None, "sum_then_normalize"):
        return Finding(ZERO_VARIANCE, "not_evaluated",
                       f"{K_ZERO_STD} is per group only under scale_rewards group/none with sum_then_normalize "
                       f"(this run: scale_rewards={scale!r}, multi_objective_aggregation={agg!r}): batch-wide here")
    if scale is None or agg is None:
        run.caveats.append(f"{K_ZERO_STD} read as a per-group fraction, assuming scale_rewards 'group'/'none' "
                            "and sum_then_normalize (the run's config does not say)")
    half = second_half(s)
    level = median(half.values)
    ev = {"median_second_half": level, "threshold": ZERO_STD_MAJORITY, "trend": trend(s),
          "scale_rewards": scale, "multi_objective_aggregation": agg,
          "caveat": "reward_std is batch-wide and cannot show this; frac_reward_zero_std counts groups"}
    if level <= ZERO_STD_MAJORITY:
        return Finding(ZERO_VARIANCE, "clear", f"median {level:.2f} of groups had identical rewards in the "
                       "second half", ev)
    return Finding(ZERO_VARIANCE, "symptom", f"in the second half a median {level:.0%} of groups gave every "
                   "completion the same reward (no advantage, no gradient)", ev, (half.steps[0], half.steps[-1]))


def truncation(run: Run) -> Finding:
    s = run.logs.get(K_CLIPPED)
    if not run.enough(s):
        return Finding(TRUNCATION, "not_evaluated", f"fewer than {MIN_POINTS} logged {K_CLIPPED} values")
    half = second_half(s)
    level = median(half.values)
    cap: Any = run.ctx.config.get("max_completion_length")
    ev = {"median_second_half": level, "threshold": CLIPPED_MAJORITY, "trend": trend(s),
          "max_completion_length": cap if cap else UNKNOWN_SETTING}
    if level <= CLIPPED_MAJORITY:
        return Finding(TRUNCATION, "clear", f"median {level:.0%} of completions hit the length cap in the "
                       "second half", ev)
    climbed = ""
    length = run.logs.get(K_LENGTH)
    if length is not None and len(length.finite()) >= BASELINE_POINTS:
        lf = length.finite()
        first, last = median(lf.values[:BASELINE_POINTS]), median(lf.values[-window_points(len(lf)):])
        if cap and first < CAP_REACHED * float(cap) <= last:
            ev["length_climbed_from"] = first
            climbed = (f"; the length climbed there from {first:.3g} tokens, so this is length drift plus "
                       "truncation, not a cap that is simply too low")
    return Finding(TRUNCATION, "symptom", f"a median {level:.0%} of completions hit max_completion_length="
                   f"{ev['max_completion_length']} in the second half (trl#5697: a too-low cap zeroes the "
                   f"reward){climbed}", ev, (half.steps[0], half.steps[-1]))


def flat_reward(run: Run) -> Finding:
    s = run.logs.get(K_REWARD)
    if not run.enough(s):
        return Finding(FLAT_REWARD, "not_evaluated", f"fewer than {MIN_POINTS} logged rewards")
    t = trend(s)
    scale = run.reward_scale(K_REWARD)
    gain = (t["end"] - t["start"]) / scale
    ev = {"reward_trend": t, "gain_over_scale": gain, "scale": scale, "threshold": FLAT_GAIN}
    if rises(t) or gain >= FLAT_GAIN:
        return Finding(FLAT_REWARD, "clear", f"reward {t['start']:.3g} → {t['end']:.3g} (rho "
                       f"{t['spearman_rho']:.2f}, p {t['p_value']:.2g})", ev)
    how = "fell" if t["spearman_rho"] < 0 and t["p_value"] < P_SIGNIFICANT else "flat"
    return Finding(FLAT_REWARD, "symptom", f"reward {how}: {t['start']:.3g} → {t['end']:.3g} ({gain:+.1%} of its "
                   f"scale, rho {t['spearman_rho']:.2f}, p {t['p_value']:.2g})", ev,
                   (t["first_step"], t["last_step"]))


def kl_blowup(run: Run) -> Finding:
    s = run.logs.get(K_KL)
    if s is None:
        beta = run.ctx.config.get("beta")
        return Finding(KL_BLOWUP, "not_evaluated", "no kl logged (TRL logs it only when beta != 0"
                       + (f"; beta={beta}" if beta is not None else "") + ")")
    f = s.finite()
    smoothed = [median(f.values[max(0, i - 1): i + 2]) for i in range(len(f))]
    over = [i for i, v in enumerate(smoothed) if v > KL_LIMIT]
    ev = {"max": max(f.values) if f.values else None, "max_running_median": max(smoothed) if smoothed else None,
          "limit_nats_per_token": KL_LIMIT, "trend": trend(f) if len(f) else None}
    if not over:
        return Finding(KL_BLOWUP, "clear", f"KL ≤ {KL_LIMIT} nats/token (3-point running median; max "
                       f"{ev['max_running_median']:.3g})" if smoothed else "no finite kl values", ev)
    first = f.steps[over[0]]
    ev["first_step_over"] = first
    return Finding(KL_BLOWUP, "symptom", f"KL to the reference passed {KL_LIMIT} nats/token at step {first} "
                   f"(running-median max {ev['max_running_median']:.3g})", ev, (first, f.steps[-1]))


# ----------------------------------------------------------------------------------------------
# the changes of the symptoms that do not switch the variant


def reward_hacking_change(finding: Finding, config: dict[str, Any], current: str) -> Change:
    """Never a variant: the reward pays for the wrong thing, so it goes back to Phase 1."""
    carrier = finding.evidence.get("carrier")
    target = f"the reward `{carrier}`" if carrier else "the rewards (the total rises without correctness)"
    return {"kind": "reward", "addresses": finding.name, "reward": carrier, "variant": current, "kwargs": {},
            "action": f"fix {target} and take it back through Phase 1 (`finetune inspect sample / "
                      "score / review / gate`) on completions like the ones this run ends with; no "
                      "variant fixes a reward that pays for something other than correctness"}


def mismatch_change(finding: Finding, config: dict[str, Any], current: str) -> Change:
    """The fix of a train/inference mismatch — never a variant: the ratio is biased by sampling filters, by a server
    that returns raw logprobs, or left uncorrected."""
    filters = sampling_filters(config)
    if filters and config.get("vllm_importance_sampling_correction") is not False:
        neutral = {"top_p": 1.0, "top_k": 0, "min_p": 0.0}
        return health(finding.name, current, "sampling filters and the importance-sampling correction together bias "
                      "the ratio by the kept probability mass (trl#6789): sample without the filters (these are gated "
                      "sampling settings: Phase 1 re-samples with them), or keep them and set "
                      "vllm_importance_sampling_correction: false",
                      {k: {"from": v, "to": neutral[k]} for k, v in filters.items()})
    if config.get("vllm_importance_sampling_correction") is False:
        return health(finding.name, current, "correct the mismatch instead of training on it: turn the "
                      "importance-sampling correction on (TRL's sequence_mask drops sequences whose ratio leaves "
                      "[clip_min, clip_max])",
                      {"vllm_importance_sampling_correction": {"from": False, "to": True},
                       "vllm_importance_sampling_mode": {"from": config.get("vllm_importance_sampling_mode"),
                                                         "to": "sequence_mask"}})
    if config.get("vllm_mode") == "server":
        return health(finding.name, current, "start the server with `--logprobs-mode processed_logprobs` (what `trl "
                      "vllm-serve` sets; a plain `vllm serve` returns raw logprobs, before temperature), and keep "
                      "the importance-sampling correction on")
    mode = config.get("vllm_importance_sampling_mode")
    return health(finding.name, current, "the engines disagree numerically (kernels, precision): keep the correction "
                  "on and bound each token's ratio (token_truncate) rather than drop whole sequences",
                  {"vllm_importance_sampling_mode": {"from": mode, "to": "token_truncate"}}
                  if mode != "token_truncate" else None)


def kl_blowup_change(finding: Finding, config: dict[str, Any], current: str) -> Change:
    lr = config.get("learning_rate")
    if lr is not None and lr > BASE_LEARNING_RATE:
        return health(finding.name, current,
                      "return to the base recipe's learning rate: the policy is running away",
                      {"learning_rate": {"from": lr, "to": BASE_LEARNING_RATE}})
    return health(finding.name, current, "the KL blew up at the base learning rate: read the completions near the "
                  "first step over the limit for a reward hack, and fix the reward (Phase 1)")


def truncation_change(finding: Finding, config: dict[str, Any], current: str) -> Change:
    cap = config.get("max_completion_length")
    return health(finding.name, current, "raise the completion cap (check memory with `finetune memory`); if the "
                  "length itself is the problem, read the completions first",
                  {"max_completion_length": {"from": cap, "to": 2 * int(cap)}} if cap else None)


def zero_variance_change(finding: Finding, config: dict[str, Any], current: str) -> Change:
    g = config.get("num_generations")
    return health(finding.name, current, "more completions per prompt give a group a chance to disagree; if base "
                  "success is near 0 or 1, filter the prompts instead (DAPO's dynamic sampling is not in TRL, "
                  "trl#4764)", {"num_generations": {"from": g, "to": 2 * int(g)}} if g else None)


# ----------------------------------------------------------------------------------------------
# the registry


@dataclass(frozen=True)
class Detector:
    """One symptom: the single entry from which its check, its recommended change, the report, the priority
    and the docs derive."""

    name: str
    check: Callable[[Run], Finding]  # reads the run; the Finding it returns carries this name
    change: ChangeFn  # what is recommended when this symptom is the one addressed
    remedy: str  # that change in a few words (the docs and diagnosis.json's checks)
    doc: str  # one line: what the detector reads and when it fires
    colour: str = "tab:red"  # the shade of its window in curves.png
    trend: bool = False  # a trend check: when none of them could be evaluated the run is too short to judge
    required: bool = False  # its change stands even when the rewards cannot be told from a length hack


# In priority order: when several symptoms show, the first one's change is recommended — a structural
# requirement first (MoE), then a broken run (NaN: nothing else can be trusted), then a reward that pays
# for the wrong thing (no variant fixes that: the reward goes back to Phase 1), then the variant
# symptoms, then run health.
DETECTORS: tuple[Detector, ...] = (
    Detector(MOE_WITHOUT_GSPO, moe, switch_variant, "switch the variant (GSPO is required for MoE)",
             "the model routes tokens to experts and the run uses token-level importance ratios",
             colour="tab:cyan", required=True),
    Detector(NAN, nan, advice("find the first non-finite metric (evidence.first_step_per_key): a reward returning "
                              "NaN/inf, or a diverging update; fix it before reading anything else in this run"),
             "find the first non-finite metric and fix it before reading anything else",
             "any logged value is NaN or inf", colour="black"),
    Detector(STALE_WEIGHTS, stale_weights,
             advice("the run trained against completions from stale vLLM weights, so its rewards say little about "
                    "the policy: check that TRL's weight sync reaches vLLM (sleep mode: trl#5312; server mode: the "
                    "NCCL group between trainer and `trl vllm-serve`) and re-run"),
             "fix the weight sync before reading the rest of the run: vLLM samples from weights the policy has left",
             f"TRL's {watch.K_SAMPLING_GAP} (logged with vllm_importance_sampling_correction on) after the first "
             f"step has a median of at least {watch.STALE_MIN_GAP} nats/token and {watch.STALE_RISE:g}x its first "
             "step's level (trl#5312)"),
    Detector(REWARD_HACKING, reward_hacking, reward_hacking_change, "fix the reward that carries the rise and take "
             "it back through Phase 1; never a variant",
             f"the total reward (or a non-correctness reward) rises significantly (p < {P_SIGNIFICANT}, gain ≥ "
             f"{FLAT_GAIN:.0%} of its scale) while every correctness reward stays flat or falls; names the reward "
             "carrying the rise"),
    Detector(MISMATCH, mismatch, mismatch_change, "fix the sampling/training logprob mismatch (sampling filters with "
             "the IS correction, the server's logprobs mode, the IS correction mode); never a variant",
             f"from the first step on (same weights in both engines), TRL's {K_IS_RATIO} sits at least "
             f"{IS_RATIO_BIAS:.0%} from 1 (median of the second half too) or {watch.K_SAMPLING_GAP} is at least "
             f"{watch.STALE_MIN_GAP} nats/token (trl#6789)",
             colour="tab:pink"),
    Detector(ENTROPY_COLLAPSE, entropy_collapse, switch_variant, "switch the variant",
             f"token entropy loses at least {ENTROPY_DROP:.0%} of its starting level and the reward plateaus after "
             "the fall", colour="tab:red", trend=True),
    Detector(LENGTH_DRIFT, length_drift, switch_variant, "switch the variant",
             f"completion length rises by at least {LENGTH_RISE:.0%} from the median of the first "
             f"{BASELINE_POINTS} logged steps (significant trend; a climb to max_completion_length counts) while "
             "correctness does not rise", colour="tab:orange", trend=True),
    Detector(KL_BLOWUP, kl_blowup, kl_blowup_change, "back to the base learning rate, else read completions for a "
             "hack", f"the 3-point running median of the KL to the reference passes {KL_LIMIT:g} nat/token",
             colour="tab:brown"),
    Detector(TRUNCATION, truncation, truncation_change, "raise max_completion_length (after checking memory)",
             f"in the second half a median of more than {CLIPPED_MAJORITY:.0%} of the completions hit the length cap",
             colour="tab:purple"),
    Detector(ZERO_VARIANCE, zero_variance, zero_variance_change, "more completions per prompt, or filter the prompts",
             f"in the second half a median of more than {ZERO_STD_MAJORITY:.0%} of the groups give every completion "
             "the same reward (no gradient)", colour="tab:gray"),
    Detector(FLAT_REWARD, flat_reward, advice("no config change: the reward is not moving. Re-check base success and "
                                              "the reward (`finetune inspect`) before training longer"),
             "no config change: re-check base success and the reward",
             f"the total reward has no significant upward trend and gains under {FLAT_GAIN:.0%} of its scale",
             colour="tab:olive", trend=True),
)


def symptoms() -> tuple[str, ...]:
    """The symptom names in priority order (read at call time: an entry added to DETECTORS is seen)."""
    return tuple(d.name for d in DETECTORS)


def detector(name: str) -> Detector:
    """The entry of a symptom (read at call time, like every lookup here)."""
    return next(d for d in DETECTORS if d.name == name)


def priority(name: str) -> int:
    """1 for the symptom whose change is recommended first."""
    return symptoms().index(name) + 1


def run_all(run: Run) -> list[Finding]:
    """Every detector's finding, in priority order."""
    return [d.check(run) for d in DETECTORS]


def remedy_text(name: str) -> str:
    """The detector's remedy, naming the variant when the symptom licenses one (from finetune.variants)."""
    variant = symptom_variant().get(name)
    remedy = detector(name).remedy
    return f"{remedy}: {variant} ({PAPERS[variant]['paper']}, arXiv {PAPERS[variant]['arxiv']})" if variant else remedy


def thresholds() -> dict[str, Any]:
    """name -> value of every threshold a detector's check reads: the numeric constants its function (and the
    helpers, Run methods and finetune.watch / evidence functions it calls) names, found in their code — derived
    from DETECTORS, so a threshold a new check reads is listed without a second edit."""
    spaces = (globals(), vars(watch), vars(evidence))
    found: dict[str, Any] = {}
    seen: set[Any] = set()
    todo: list[Any] = [d.check for d in DETECTORS]
    while todo:
        code = todo.pop()
        code = getattr(code, "__code__", code)
        if code in seen:
            continue
        seen.add(code)
        todo += [c for c in code.co_consts if isinstance(c, CodeType)]  # lambdas, comprehensions, nested defs
        for name in code.co_names:  # a global, or an attribute (watch.X, run.method): every namespace holding it
            for value in [ns[name] for ns in spaces if name in ns] + [getattr(Run, name, None)]:
                if name.isupper() and isinstance(value, (int, float)) and not isinstance(value, bool):
                    found[name.lower()] = value
                elif inspect.isfunction(value) and value.__module__.startswith("finetune."):
                    todo.append(value)
    return dict(sorted(found.items()))
