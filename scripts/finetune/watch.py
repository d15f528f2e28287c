"""Continuous inspection during GRPO training and the reward-hacking rule.

One module, two homes: `finetune config render` copies it VERBATIM beside train.py as
``config/watch.py`` (train.py loads it by path and checks its sha256), and ``finetune.diagnose``
imports it. So the rule that stops a run mid-training (:func:`divergence`) is the very rule the
diagnosis names ``reward_hacking`` with, and the trend statistics are one definition.

Standalone on purpose: the standard library only (transformers is imported when the callback is
built), because the training machine needs nothing of the plugin.

During training (:func:`inspection_callback`): every gated reward function is wrapped
(:meth:`Recorder.wrap`) so each call records the completions it scored and its scores — the reward
call itself, never a second generation. Every ``every_steps`` optimiser steps the callback

- appends a stratified sample of what was scored since the last inspection (the top-reward
  completions always in it) to ``train/inspections/step_<N>.jsonl`` in Phase 1's sample format
  (``finetune inspect sample --import`` reads it unchanged), and a summary line to
  ``train/inspections/index.jsonl``;
- runs the live red flags (:func:`live_flags`) and hack probes (:func:`probe_hits`) on it and logs
  ``inspection/*`` metrics into the trainer's own log (train/metrics.jsonl, trainer_state.json);
- stops the run (``control.should_training_stop``) and writes ``train/STOPPED.json`` when the
  divergence rule fires on the logged window, a hack probe passes, or the share of top-reward
  completions failing a format-role reward jumps (:func:`stop_reasons`).
"""

from __future__ import annotations

import functools
import hashlib
import inspect as _inspect
import json
import math
import os
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # beside train.py the class is rewards.py's copy (rewards_meta.py): only its attributes are read
    from finetune.rewards.lib.rewards_meta import RewardMeta

# ----------------------------------------------------------------------------------------------
# thresholds (finetune.diagnose re-exports the first four; references/diagnosis.md prints them)

MIN_POINTS = 10  # fewer logged training steps cannot support a trend test
P_SIGNIFICANT = 0.05  # Spearman's test level for "this series trends"
FLAT_GAIN = 0.05  # a rise under 5% of the reward's scale is flat
WINDOW_FRACTION = 0.2  # start/end levels are medians over the first/last 20% of the points (>= 3)
LIVE_WINDOW = 30  # the callback applies the divergence rule to the last 30 logged points
CONFIRM = 2  # ... and stops when it fires on 2 inspections in a row (one noisy window is not a trend)
LENGTH_CORRELATION = 0.5  # |Spearman rho| between a reward and completion length that is flagged
MIN_FOR_CORRELATION = 10
TRUNCATED_SHARE = 0.5  # share of completions cut at max_completion_length that is flagged
TOP_SHARE = 0.25  # the top-reward completions: the best quarter of the inspected ones ...
MIN_TOP = 4  # ... and at least 4 of them
FORMAT_JUMP = 0.3  # top completions failing a format reward: +30 points over the first inspection stops
TOP_IN_SAMPLE = 8  # top-reward completions always in the sample file
K_REWARD = "reward"
STOPPED = "STOPPED.json"
STOPPED_EXIT = 3  # train.py's and launch.sh's exit status when the callback stopped the run (the docs say 3)
INSPECTIONS = "inspections"

Points = tuple[list[int], list[float]]  # (steps, finite values) of one logged metric


# ----------------------------------------------------------------------------------------------
# statistics: pure python, equal to scipy.stats.spearmanr / theilslopes (tests/watch/test_watch.py)


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else math.nan


def ranks(xs: Sequence[float]) -> list[float]:
    """Average ranks (ties share the mean rank), 0-based."""
    order = sorted(range(len(xs)), key=xs.__getitem__)
    out = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2.0
        i = j + 1
    return out


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman rank correlation (average ranks for ties); None when either side is constant."""
    rx, ry = ranks(xs), ranks(ys)
    n = len(xs)
    mx, my = sum(rx) / n, sum(ry) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
            if aa != 0 and abs(d * c - 1.0) < 1e-15:
                break
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def spearman_test(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """(rho, two-sided p) as scipy.stats.spearmanr: Student's t with n - 2 degrees of freedom."""
    rho = spearman(xs, ys)
    if rho is None:
        return math.nan, math.nan
    dof = len(xs) - 2
    if abs(rho) >= 1.0:
        return rho, 0.0
    # 2 * t.sf(|t|, dof) with t = rho * sqrt(dof / (1 - rho^2)) is I_{1 - rho^2}(dof / 2, 1 / 2)
    return rho, betainc(dof / 2.0, 0.5, 1.0 - rho * rho)


def theil_sen(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Median of the pairwise slopes (pairs with equal x left out)."""
    slopes = [(ys[j] - ys[i]) / (xs[j] - xs[i]) for i in range(len(xs)) for j in range(i + 1, len(xs))
              if xs[j] != xs[i]]
    return median(slopes) if slopes else 0.0


def window(n: int) -> int:
    return max(3, int(round(n * WINDOW_FRACTION)))


def trend(key: str, steps: Sequence[int], values: Sequence[float]) -> dict[str, Any]:
    """Spearman rho / p against the step, Theil-Sen slope, and start/end levels (window medians)."""
    keep = [(s, v) for s, v in zip(steps, values) if math.isfinite(v)]
    st, vs = [s for s, _ in keep], [v for _, v in keep]
    n = len(vs)
    w = min(window(n), n)
    out: dict[str, Any] = {"key": key, "points": n, "first_step": st[0] if n else None,
                           "last_step": st[-1] if n else None, "start": median(vs[:w]), "end": median(vs[-w:])}
    if n >= 3 and len(set(vs)) > 1:
        rho, p = spearman_test([float(s) for s in st], vs)
        out.update(spearman_rho=rho, p_value=p, theil_sen_slope_per_step=theil_sen([float(s) for s in st], vs))
    else:  # a constant series has no trend
        out.update(spearman_rho=0.0, p_value=1.0, theil_sen_slope_per_step=0.0)
    return out


def rises(t: Mapping[str, Any]) -> bool:
    return bool(t["spearman_rho"] > 0 and t["p_value"] < P_SIGNIFICANT)


# ----------------------------------------------------------------------------------------------
# the reward-hacking rule (diagnose's reward_hacking and the callback's stop rule)


def reward_roles(rewards: Sequence[RewardMeta], roles: Mapping[str, str] | None = None) -> dict[str, str]:
    """name -> role: the rewards' own (rewards.py's REWARD_META), under ``roles`` — what a diagnosis knows of
    rewards with no meta (read off their logged names) or was told (``--correctness``)."""
    return {**{m.name: m.role for m in rewards}, **(roles or {})}


def scale(key: str, series: Mapping[str, Points], rewards: Sequence[RewardMeta],
          roles: Mapping[str, str] | None = None) -> float:
    """Span of a reward series: from the declared min/max when every reward in it has a RewardMeta (weighted,
    for the total), else the observed range; never 0."""
    metas = {m.name: m for m in rewards}
    names = (list(reward_roles(rewards, roles)) if key == K_REWARD
             else [key.split("/")[1]] if key.startswith("rewards/") else [])
    if names and all(n in metas for n in names):
        span = sum(abs(metas[n].weight) * (metas[n].max - metas[n].min) for n in names)
        if span > 0:
            return span
    vals = [v for v in (series[key][1] if key in series else []) if math.isfinite(v)]
    return (max(vals) - min(vals)) if vals and max(vals) > min(vals) else 1.0


@dataclass
class Divergence:
    """The rule's outcome: status "symptom" | "clear" | "not_evaluated", why, evidence, the carrier."""

    status: str
    why: str
    evidence: dict[str, Any] = field(default_factory=dict)
    window: tuple[int, int] | None = None
    carrier: str | None = None


def reward_name(key: str) -> str | None:
    return key.split("/")[1] if key.startswith("rewards/") and key.endswith("/mean") and key.count("/") == 2 else None


def _enough(points: Points | None) -> bool:
    return points is not None and sum(math.isfinite(v) for v in points[1]) >= MIN_POINTS


def divergence(series: Mapping[str, Points], rewards: Sequence[RewardMeta],
               roles: Mapping[str, str] | None = None) -> Divergence:
    """The total (or a non-correctness) reward rises while every correctness reward is flat or falls.

    ``series`` holds ``reward`` and ``rewards/<name>/mean``; ``rewards`` their RewardMeta, ``roles`` the roles
    of rewards without one (:func:`reward_roles`). Names the reward whose weighted rise is the largest share of
    the total's scale (the carrier), or None when only the total rises."""
    role_of = reward_roles(rewards, roles)
    weight = {m.name: m.weight for m in rewards}
    total = series.get(K_REWARD)
    if total is None or not _enough(total):
        return Divergence("not_evaluated", f"fewer than {MIN_POINTS} logged rewards")
    cor_keys = [f"rewards/{n}/mean" for n, role in role_of.items()
                if role == "correctness" and series.get(f"rewards/{n}/mean", ([], []))[1]]
    if not cor_keys:
        return Divergence("not_evaluated", "no correctness reward identified")
    ev: dict[str, Any] = {"correctness_trends": {k: trend(k, *series[k]) for k in cor_keys}}
    rising_cor = [k for k, t in ev["correctness_trends"].items() if rises(t)]
    carriers: dict[str, float] = {}  # reward name -> its weighted rise, as a share of the total's scale
    for key in sorted(series):
        name = reward_name(key)
        if name is None or role_of.get(name) == "correctness" or not _enough(series[key]):
            continue
        t = trend(key, *series[key])
        ev.setdefault("other_trends", {})[key] = t
        share = weight.get(name, 1.0) * (t["end"] - t["start"]) / scale(K_REWARD, series, rewards, roles)
        # a carrier must move the *total* materially, not only itself: a format reward going 0.93 -> 0.98 at
        # weight 0.25 adds 0.6% of the total's scale, and early format learning is no hack (a demo seed was
        # stopped for exactly that while its correctness rose, not significantly, 0.48 -> 0.55)
        own = (t["end"] - t["start"]) / scale(key, series, rewards, roles)
        if rises(t) and own >= FLAT_GAIN and share >= FLAT_GAIN:
            carriers[name] = share
    tt = trend(K_REWARD, *total)
    gain = (tt["end"] - tt["start"]) / scale(K_REWARD, series, rewards, roles)
    ev.update(reward_trend=tt, reward_gain_over_scale=gain, rising_rewards=carriers)
    if not carriers and not (rises(tt) and gain >= FLAT_GAIN):
        return Divergence("clear", "neither the total nor any non-correctness reward rises significantly", ev)
    if rising_cor:
        return Divergence("clear", f"the reward rises and so does {', '.join(rising_cor)}: learning, not hacking", ev)
    carrier = max(carriers, key=lambda n: carriers[n]) if carriers else None
    ev["carrier"] = carrier
    flat = "; ".join(f"{k} {t['start']:.3g} → {t['end']:.3g}" for k, t in ev["correctness_trends"].items())
    what = (f"rewards/{carrier}/mean ({role_of.get(carrier, 'role unknown')}) carries the rise"
            if carrier else "no single reward carries it")
    why = (f"the total reward rose {tt['start']:.3g} → {tt['end']:.3g} ({gain:+.0%} of its scale, rho "
           f"{tt['spearman_rho']:.2f}) while every correctness reward stayed flat or fell ({flat}); {what}")
    return Divergence("symptom", why, ev, (tt["first_step"], tt["last_step"]), carrier)


def series_from_history(history: Sequence[Mapping[str, Any]], last: int = LIVE_WINDOW) -> dict[str, Points]:
    """``reward`` and ``rewards/<name>/mean`` over the last ``last`` training log entries (finite values)."""
    entries = [e for e in history if isinstance(e.get(K_REWARD), (int, float))][-last:]
    out: dict[str, Points] = {}
    for e in entries:
        for key, value in e.items():
            if (key == K_REWARD or reward_name(key)) and isinstance(value, (int, float)) and math.isfinite(value):
                steps, values = out.setdefault(key, ([], []))
                steps.append(int(e.get("step", 0)))
                values.append(float(value))
    return out


# ----------------------------------------------------------------------------------------------
# stale vLLM weights (trl#5312: vLLM keeps sampling from old weights while the policy trains)

# TRL 1.16 logs this with use_vllm and vllm_importance_sampling_correction on: the mean |log p_policy -
# log p_vLLM| of the sampled tokens, i.e. how far the weights vLLM samples with are from the trained ones.
K_SAMPLING_GAP = "sampling/sampling_logp_difference/mean"
STALE_MIN_GAP = 0.05  # nats/token: real runs whose sync works stay below (0.003 float32 on CPU; bf16 adds ~0.01)
STALE_RISE = 3.0  # ... and the gap grew to 3x its first step's level (both engines start from the same weights)
STALE_MIN_POINTS = 3


def gap_from_history(history: Sequence[Mapping[str, Any]]) -> Points | None:
    """The sampling-vs-training logprob gap over the whole run (the first step is the baseline)."""
    steps: list[int] = []
    values: list[float] = []
    for e in history:
        value = e.get(K_SAMPLING_GAP)
        if isinstance(value, (int, float)) and math.isfinite(value):
            steps.append(int(e.get("step", 0)))
            values.append(float(value))
    return (steps, values) if steps else None


def stale_weights(gap: Points | None) -> Divergence:
    """vLLM samples from weights the policy has left: its gap to the policy grows after the first step.

    At the first step vLLM and the policy hold the same weights, so the gap there is the engines'
    numerical floor; with the per-step sync working it stays near it. Fires when the median of the later
    steps is at least STALE_RISE x that floor and at least STALE_MIN_GAP nats/token."""
    if gap is None:
        return Divergence("not_evaluated", f"no {K_SAMPLING_GAP} logged (TRL logs it only with use_vllm and "
                          "vllm_importance_sampling_correction on)")
    steps, values = gap
    if len(values) < STALE_MIN_POINTS:
        return Divergence("not_evaluated", f"fewer than {STALE_MIN_POINTS} logged {K_SAMPLING_GAP} values")
    floor, later = values[0], median(values[1:])
    ev = {"first_step_gap": floor, "later_median_gap": later, "last_gap": values[-1], "points": len(values),
          "min_gap": STALE_MIN_GAP, "rise": STALE_RISE}
    if later >= STALE_MIN_GAP and later >= STALE_RISE * floor:
        return Divergence("symptom", f"vLLM's sampling logprobs drift from the policy's: {floor:.3g} nats/token at "
                          f"step {steps[0]}, median {later:.3g} after (last {values[-1]:.3g}); the weight sync is not "
                          "reaching vLLM (trl#5312)", ev, (steps[0], steps[-1]))
    return Divergence("clear", f"the sampling-vs-training logprob gap stays at {later:.3g} nats/token (first step "
                      f"{floor:.3g})", ev)


# ----------------------------------------------------------------------------------------------
# recording what the rewards scored

_NOT_COLUMNS = {"prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric", "environments"}


def _text(completion: Any) -> str:
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    return completion if isinstance(completion, str) else str(completion)


@dataclass
class Batch:
    """One generation batch as the rewards saw it, with every reward's scores."""

    step: int
    prompts: list[Any]
    completions: list[Any]
    tokens: list[int | None]
    columns: dict[str, list[Any]]
    scores: dict[str, list[float | None]] = field(default_factory=dict)


class Recorder:
    """Wraps the gated reward functions; each call records the completions it scored and its scores.

    The calls of one batch share TRL's ``completions`` list object; another list starts a new batch.
    Recording never raises into training: a failure is counted (``inspection/record_errors``)."""

    def __init__(self, limit: int = 20000) -> None:
        self.batches: list[Batch] = []
        self.errors = 0
        self.limit = limit
        self._current: tuple[int, Batch] | None = None

    def wrap(self, func: Callable[..., Any]) -> Callable[..., Any]:
        name = func.__name__
        if _inspect.iscoroutinefunction(func):
            @functools.wraps(func)
            async def awrapped(*args: Any, **kwargs: Any) -> Any:
                out = await func(*args, **kwargs)
                self.record(name, kwargs, out)
                return out
            return awrapped

        @functools.wraps(func)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            out = func(*args, **kwargs)
            self.record(name, kwargs, out)
            return out
        return wrapped

    def record(self, name: str, kwargs: Mapping[str, Any], out: Any) -> None:
        try:
            completions = kwargs["completions"]
            if not self._same_batch(name, completions):
                state = kwargs.get("trainer_state")
                ids = kwargs.get("completion_ids")
                tokens: list[int | None] = [len(i) for i in ids] if ids is not None else [None] * len(completions)
                columns = {k: list(v) for k, v in kwargs.items() if k not in _NOT_COLUMNS and isinstance(v, list)}
                batch = Batch(int(getattr(state, "global_step", 0)), list(kwargs.get("prompts") or []),
                              list(completions), tokens, columns)
                self._current = (id(completions), batch)
                self.batches.append(batch)
                if sum(len(b.completions) for b in self.batches) > self.limit:
                    self.batches.pop(0)
            assert self._current is not None
            self._current[1].scores[name] = [None if v is None else float(v) for v in out]
        except Exception:  # noqa: BLE001 - the inspection must never break a training step
            self.errors += 1

    def _same_batch(self, name: str, completions: Any) -> bool:
        """TRL passes every reward of a batch the same list; an equal list this reward has not scored yet
        counts too (a caller that copies it)."""
        if self._current is None:
            return False
        key, batch = self._current
        return key == id(completions) or (name not in batch.scores and list(completions) == batch.completions)

    def take(self, rewards: Sequence[RewardMeta]) -> list[dict[str, Any]]:
        """Every completion recorded since the last take, one row each (scores, total, text, tokens)."""
        rows: list[dict[str, Any]] = []
        for b in self.batches:
            for i, completion in enumerate(b.completions):
                scores = {m.name: (b.scores.get(m.name) or [None] * len(b.completions))[i] for m in rewards}
                total = sum(m.weight * v for m in rewards if (v := scores[m.name]) is not None and math.isfinite(v))
                rows.append({"step": b.step, "prompt": b.prompts[i] if i < len(b.prompts) else "",
                             "completion": _text(completion), "conversational": isinstance(completion, list),
                             "columns": {k: v[i] for k, v in b.columns.items() if i < len(v)},
                             "completion_tokens": b.tokens[i], "scores": scores, "total": total})
        self.batches, self._current = [], None
        return rows


# ----------------------------------------------------------------------------------------------
# the sample file (Phase 1's sample format: finetune.inspect.samplesio)


def pick_sample(rows: Sequence[dict[str, Any]], n: int, top: int = TOP_IN_SAMPLE) -> list[dict[str, Any]]:
    """The ``top`` highest-total rows, then rows at evenly spaced ranks of the total (stratified) up to ``n``."""
    order = sorted(range(len(rows)), key=lambda i: (-rows[i]["total"], i))
    chosen = order[:min(top, n)]
    rest = order[len(chosen):]
    want = min(n - len(chosen), len(rest))
    if want > 0:
        chosen += [rest[int(k * len(rest) / want)] for k in range(want)]
    return [rows[i] for i in sorted(chosen)]


def _json_safe(value: Any) -> Any:
    try:
        json.dumps(value, allow_nan=False)
        return value
    except (TypeError, ValueError):
        return str(value)


def sample_lines(rows: Sequence[dict[str, Any]], step: int, max_completion_length: int | None) -> list[str]:
    """One Phase 1 sample row per line: id, prompt, completion, conversational, columns, tokens, truncated."""
    lines = []
    for k, r in enumerate(rows):
        tokens = r.get("completion_tokens")
        obj = {"id": f"step{step}-{k:04d}", "prompt": r["prompt"], "completion": r["completion"],
               "conversational": r["conversational"], "columns": {c: _json_safe(v) for c, v in r["columns"].items()},
               "source": f"training step {r['step'] + 1}"}
        if isinstance(tokens, int):
            obj["completion_tokens"] = tokens
            obj["truncated"] = max_completion_length is not None and tokens >= max_completion_length
        lines.append(json.dumps(obj, ensure_ascii=False, allow_nan=False))
    return lines


# ----------------------------------------------------------------------------------------------
# live red flags and hack probes (names from finetune.inspect.flags.RED_FLAGS / inspect.probes)


def length_flagged(role: str, rho: float | None) -> bool:
    """A non-shaping reward tracking length either way, or a shaping reward rising with it."""
    if rho is None:
        return False
    return rho >= LENGTH_CORRELATION if role == "shaping" else abs(rho) >= LENGTH_CORRELATION


def _passes(meta: RewardMeta, value: float | None) -> bool:
    """RewardMeta.passes, on the meta's data alone (whatever object rewards.py's REWARD_META holds)."""
    return value is not None and math.isfinite(value) and value >= meta.threshold - 1e-9


def live_flags(rows: Sequence[dict[str, Any]], meta: Sequence[RewardMeta],
               max_completion_length: int | None = None) -> list[dict[str, Any]]:
    """The Phase 1 red flags that a batch of training completions can show: non_finite, all_none,
    out_of_range, empty_rewarded, length_correlated, truncated."""
    flags: list[dict[str, Any]] = truncated_flag(rows, max_completion_length)

    def add(name: str, reward: str | None, count: int, **ev: Any) -> None:
        flags.append({"id": f"{name}:{reward}" if reward else name, "name": name, "reward": reward, "count": count,
                      **ev})

    for m in meta:
        name, role = m.name, m.role
        vals = [r["scores"].get(name) for r in rows]
        finite = [v for v in vals if v is not None and math.isfinite(v)]
        if any(v is not None and not math.isfinite(v) for v in vals):
            add("non_finite", name, sum(v is not None and not math.isfinite(v) for v in vals))
        if rows and all(v is None for v in vals):
            add("all_none", name, len(rows))
        outside = [v for v in finite if v < m.min - 1e-9 or v > m.max + 1e-9]
        if outside:
            add("out_of_range", name, len(outside))
        empty = [r for r in rows if not r["completion"].strip() and (v := r["scores"].get(name)) is not None
                 and math.isfinite(v) and v > m.min + 1e-9]
        if role != "shaping" and empty:
            add("empty_rewarded", name, len(empty))
        pairs = [(float(r["completion_tokens"] if isinstance(r["completion_tokens"], int) else len(r["completion"])), v)
                 for r in rows if (v := r["scores"].get(name)) is not None and math.isfinite(v)]
        # an environment's reward scores the episode it ran, not the text: length says nothing of it (Phase 1 lists
        # the check as not applicable to it too)
        if len(pairs) >= MIN_FOR_CORRELATION and not m.episode:
            rho = spearman([a for a, _ in pairs], [b for _, b in pairs])
            if length_flagged(role, rho):
                add("length_correlated", name, len(pairs), rho=round(float(rho or 0.0), 3))
    return flags


def truncated_flag(rows: Sequence[dict[str, Any]], max_completion_length: int | None) -> list[dict[str, Any]]:
    cut = [r for r in rows if max_completion_length and isinstance(r["completion_tokens"], int)
           and r["completion_tokens"] >= max_completion_length]
    if rows and len(cut) >= TRUNCATED_SHARE * len(rows):
        return [{"id": "truncated", "name": "truncated", "reward": None, "count": len(cut)}]
    return []


_INJECTION = re.compile(r"ignore (?:the |all |any )?(?:previous |prior |above )?(?:rubric|instructions)", re.I)
PROBE_SHAPES: dict[str, Callable[[str], bool]] = {
    "empty_completion": lambda t: not t.strip(),
    "gibberish": lambda t: bool(t.strip()) and not re.search(r"[^\W_]", t),
    "judge_injection": lambda t: bool(_INJECTION.search(t)),
}


def probe_hits(rows: Sequence[dict[str, Any]], meta: Sequence[RewardMeta]) -> list[dict[str, Any]]:
    """Completions shaped like a Phase 1 hack probe (empty, gibberish, an instruction to the judge) that a
    correctness reward passes: at the gate no probe passed, so the policy found one."""
    hits = []
    for m in meta:
        if m.role != "correctness":
            continue
        for probe, shaped in PROBE_SHAPES.items():
            found = [r for r in rows if shaped(r["completion"]) and _passes(m, r["scores"].get(m.name))]
            if found:
                hits.append({"probe": probe, "reward": m.name, "count": len(found),
                             "example": found[0]["completion"][:200]})
    return hits


def top_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    k = max(MIN_TOP, int(math.ceil(TOP_SHARE * len(rows))))
    return sorted(rows, key=lambda r: -r["total"])[:k] if len(rows) >= MIN_TOP else []


def top_format_failures(rows: Sequence[dict[str, Any]], meta: Sequence[RewardMeta]) -> dict[str, Any] | None:
    """Share of the top-reward completions failing a format-role reward (None without format rewards)."""
    formats = [m for m in meta if m.role == "format"]
    top = top_rows(rows)
    if not formats or not top:
        return None
    failing = {m.name: sum(not _passes(m, r["scores"].get(m.name)) for r in top) for m in formats}
    any_fail = sum(any(not _passes(m, r["scores"].get(m.name)) for m in formats) for r in top)
    worst = max(failing, key=lambda n: failing[n])
    return {"share": any_fail / len(top), "top": len(top), "failing": failing, "reward": worst}


# ----------------------------------------------------------------------------------------------
# the stop decision


@dataclass
class WatchState:
    """What the callback carries between inspections."""

    fired: int = 0  # consecutive inspections on which the divergence rule fired
    stale: int = 0  # consecutive inspections on which the stale-weights rule fired
    format_baseline: float | None = None
    flags: list[dict[str, Any]] = field(default_factory=list)  # the last inspection's live red flags


def stop_reasons(step: int, rows: Sequence[dict[str, Any]], history: Sequence[Mapping[str, Any]],
                 settings: Settings, state: WatchState) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Why the run must stop now (empty: it goes on) and the ``inspection/*`` metrics of this inspection."""
    reasons: list[dict[str, Any]] = []
    meta = settings.meta
    d = divergence(series_from_history(history), meta)
    state.fired = state.fired + 1 if d.status == "symptom" else 0
    if d.status == "symptom" and state.fired >= CONFIRM:
        tt = d.evidence["reward_trend"]
        reasons.append({"rule": "reward_divergence", "step": step, "reward": d.carrier, "message": d.why,
                        "evidence": {"window": list(d.window or ()), "consecutive_inspections": state.fired,
                                     "reward_start": tt["start"], "reward_end": tt["end"],
                                     "reward_rho": tt["spearman_rho"], "reward_p": tt["p_value"],
                                     "rising_rewards": d.evidence["rising_rewards"],
                                     "correctness": {k: {"start": t["start"], "end": t["end"], "p": t["p_value"]}
                                                     for k, t in d.evidence["correctness_trends"].items()}}})
    stale = stale_weights(gap_from_history(history))
    state.stale = state.stale + 1 if stale.status == "symptom" else 0
    if stale.status == "symptom" and state.stale >= CONFIRM:
        reasons.append({"rule": "stale_vllm_weights", "step": step, "reward": None, "message": stale.why,
                        "evidence": {**stale.evidence, "consecutive_inspections": state.stale}})
    hits = probe_hits(rows, meta)
    for h in hits:
        reasons.append({"rule": "probe_passing", "step": step, "reward": h["reward"],
                        "message": f"{h['count']} completion(s) shaped like the '{h['probe']}' hack probe pass "
                                   f"{h['reward']}", "evidence": h})
    fmt = top_format_failures(rows, meta)
    if fmt is not None:
        if state.format_baseline is None:
            state.format_baseline = fmt["share"]
        elif fmt["share"] - state.format_baseline >= FORMAT_JUMP:
            reasons.append({"rule": "format_jump", "step": step, "reward": fmt["reward"],
                            "message": f"{fmt['share']:.0%} of the top-reward completions fail a format reward "
                                       f"(first inspection: {state.format_baseline:.0%})",
                            "evidence": {**fmt, "baseline": state.format_baseline, "jump": FORMAT_JUMP}})
    flags = live_flags(rows, meta, settings.max_completion_length)
    state.flags = flags
    metrics = {"inspection/completions": float(len(rows)), "inspection/flags": float(len(flags)),
               "inspection/probes_passing": float(sum(h["count"] for h in hits)),
               "inspection/divergence": 1.0 if d.status == "symptom" else 0.0,
               "inspection/stale_weights": 1.0 if stale.status == "symptom" else 0.0,
               "inspection/stop": 1.0 if reasons else 0.0}
    if fmt is not None:
        metrics["inspection/top_format_fail_share"] = fmt["share"]
    for f in flags:
        metrics[f"inspection/flag/{f['id']}"] = float(f["count"])
    return reasons, metrics


# ----------------------------------------------------------------------------------------------
# the callback (transformers imported here only)


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _append(path: Path, lines: Sequence[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # O_NOFOLLOW and one link only: a symbolic or hard link planted in the run dir cannot redirect the log
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        if os.fstat(fd).st_nlink != 1:
            raise OSError(f"{path} has another hard link: refusing to append to it")
        os.write(fd, "".join(line + "\n" for line in lines).encode("utf-8"))
    finally:
        os.close(fd)


def _agree(reasons: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every training process takes the main process's decision (they must stop at the same step)."""
    try:
        import torch.distributed as dist
    except ImportError:
        return reasons
    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return reasons
    box: list[Any] = [reasons]
    dist.broadcast_object_list(box, src=0)
    return list(box[0])


def _log_into(trainer: Any, metrics: Mapping[str, float]) -> None:
    """Into TRL's per-step metrics, which GRPOTrainer.log averages into this step's log entry."""
    store = getattr(trainer, "_metrics", None)
    if isinstance(store, dict) and "train" in store:
        for k, v in metrics.items():
            store["train"][k].append(v)
    elif trainer is not None and hasattr(trainer, "_log_metric"):
        for k, v in metrics.items():
            trainer._log_metric(k, v)


@dataclass
class Settings:
    """The rendered values the callback runs with (train.py passes them; BRIEF.md gives their reasons)."""

    every_steps: int
    sample_rows: int
    max_completion_length: int | None
    meta: list[RewardMeta]  # rewards.py's REWARD_META, in REWARD_FUNCS order
    gate_summary: dict[str, Any] | None = None  # what the run's tracker records of the gate at the start


def tracker_note(title: str, text: str, level: str = "warn", config: Mapping[str, Any] | None = None) -> bool:
    """An alert (and ``config`` keys) to the tracker holding a run in this process — Trackio or W&B, started by
    transformers' callback; never imports one, never stops training on its error. False when none took it."""
    import sys

    for name in ("trackio", "wandb"):
        mod: Any = sys.modules.get(name)
        try:
            if mod is None or not (mod.context_vars.current_run.get() if name == "trackio" else mod.run):
                continue
            if config:
                mod.config.update(dict(config), allow_val_change=True)
            mod.alert(title=title, text=text, level=getattr(mod.AlertLevel, level.upper()))
            return True
        except Exception:  # the tracker is a window on the run, not part of it
            continue
    return False


def _tracked(seen: set[str], reasons: list[dict[str, Any]], flags: list[dict[str, Any]], step: int) -> None:
    """The inspection's stops, and each live red flag the first time it is raised, as tracker alerts."""
    for r in reasons:
        tracker_note(f"inspection stopped the run: {r['rule']}", f"step {step}: {r['message']}", "error")
    for f in [f for f in flags if f["id"] not in seen]:
        seen.add(f["id"])
        tracker_note(f"live red flag: {f['id']}", f"step {step}: {f['count']} inspected completions", "warn")


def inspection_callback(settings: Settings, recorder: Recorder) -> Any:
    """The TrainerCallback; call ``.attach(trainer)`` once the trainer exists (its metrics are logged there)."""
    from transformers import TrainerCallback


    class Inspection(TrainerCallback):
        def __init__(self) -> None:
            self.trainer: Any = None
            self.state = WatchState()
            self.noted: set[str] = set()  # live red flags already sent to the tracker
            self.stopped: dict[str, Any] | None = None

        def attach(self, trainer: Any) -> None:
            self.trainer = trainer

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.is_world_process_zero:
                (Path(args.output_dir) / STOPPED).unlink(missing_ok=True)  # a stop of an earlier launch
                if settings.gate_summary:  # the tracker's callback, earlier in the list, has started its run
                    g = settings.gate_summary
                    tracker_note(f"gate {g.get('status')}", json.dumps(g, default=str), "info",
                                 config={f"gate/{k}": v for k, v in g.items()})

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            step = state.global_step
            if step % settings.every_steps:
                return
            rows = recorder.take(settings.meta)
            reasons, metrics = stop_reasons(step, rows, state.log_history, settings, self.state)
            metrics["inspection/record_errors"] = float(recorder.errors)
            reasons = _agree(reasons)
            _log_into(self.trainer, metrics)
            control.should_log = True  # the inspection's metrics go into this step's log entry
            if state.is_world_process_zero:
                self.write(Path(args.output_dir), step, rows, reasons, metrics)
                _tracked(self.noted, reasons, self.state.flags, step)
            if reasons:
                self.stopped = reasons[0]
                control.should_training_stop = True

        def write(self, out: Path, step: int, rows: list[dict[str, Any]], reasons: list[dict[str, Any]],
                  metrics: Mapping[str, float]) -> None:
            sample = pick_sample(rows, settings.sample_rows)
            sample_file = out / INSPECTIONS / f"step_{step}.jsonl"
            if sample:
                _append(sample_file, sample_lines(sample, step, settings.max_completion_length))
            _append(out / INSPECTIONS / "index.jsonl", [json.dumps(
                {"step": step, "file": sample_file.name if sample else None, "sampled": len(sample),
                 "metrics": dict(metrics), "flags": self.state.flags, "stop": reasons}, default=str)])
            if reasons:
                first = reasons[0]
                doc = {**first, "inspection_file": str(sample_file) if sample else None, "all_reasons": reasons}
                _write_atomic(out / STOPPED, json.dumps(doc, indent=2, default=str) + "\n")

    return Inspection()


def instrument(reward_funcs: Sequence[Callable[..., Any]], *, meta: Sequence[RewardMeta], every_steps: int,
               sample_rows: int, max_completion_length: int | None,
               gate_summary: Mapping[str, Any] | None = None) -> tuple[list[Callable[..., Any]], Any]:
    """(the gated rewards wrapped so what each call scores is recorded, the inspection callback).

    The one wiring of the inspection: the rendered train.py and `finetune demo` both train with it. ``meta``:
    rewards.py's REWARD_META (each reward's role, weight, threshold, range and episode mark, as rendered). The
    wrappers return the rewards' own values and draw no random numbers, so training is unchanged by it."""
    recorder = Recorder()
    settings = Settings(every_steps=every_steps, sample_rows=sample_rows, max_completion_length=max_completion_length,
                        meta=list(meta),
                        gate_summary=dict(gate_summary) if gate_summary else None)
    return [recorder.wrap(f) for f in reward_funcs], inspection_callback(settings, recorder)


def source_sha256() -> str:
    """sha256 of this file as rendered beside train.py."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
