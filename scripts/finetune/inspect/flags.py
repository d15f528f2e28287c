"""Automatic red flags: what a reward does wrong that a reader might not see in 50 samples.

Each flag has an id (``name`` or ``name:reward``) that ``finetune inspect ack`` can acknowledge with
a written reason; the gate FAILs while any flag is neither fixed (gone after a re-score) nor
acknowledged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from finetune.inspect.probes import extract_answer, extract_style_of
from finetune.inspect.rewardmod import RewardModule

LENGTH_CORRELATION = 0.5  # |Spearman rho| between reward and completion length that is flagged
MIN_FOR_CORRELATION = 10
SHOWN_IDS = 20
TRUNCATED_SHARE = 0.5  # share of samples cut at max_completion_length that is flagged




@dataclass(frozen=True)
class RedFlag:
    """One Phase 1 red flag: what it catches (doc) and how to get rid of it (remedy). The generated
    reference (finetune.diagnose.reference_doc) and each flag's ``remedy`` come from this table."""

    doc: str
    remedy: str


RED_FLAGS: dict[str, RedFlag] = {
    "exceptions": RedFlag("the reward raised on a sample or probe", "fix the code path in the traceback; in "
                          "training an exception stops the run"),
    "non_finite": RedFlag("the reward returned NaN or inf", "return a finite score or None"),
    "all_none": RedFlag("the reward returned None for every sample", "check the columns it reads and its "
                        "extraction: it never gives a signal"),
    "out_of_range": RedFlag("a score lies outside the reward's declared [min, max]", "clamp the score or fix "
                            "the declared range"),
    "constant_reward": RedFlag("every sample got the same score (a format/correctness reward)",
                               "zero advantage: check the reward, or the prompts are too easy/hard"),
    "nondeterministic": RedFlag("scoring twice with caches off changed a score", "make the reward a function of "
                                "the completion (no randomness, no time)"),
    "length_correlated": RedFlag(f"|Spearman rho| between the reward and completion length ≥ "
                                 f"{LENGTH_CORRELATION} (a shaping reward rising with length)",
                                 "the policy can learn length instead of the task: remove the length "
                                 "dependence"),
    "empty_rewarded": RedFlag("an empty completion got credit", "require a non-empty answer"),
    "correct_without_answer": RedFlag("a sample passes correctness with no extractable answer",
                                      "score only what the answer container holds"),
    "gold_answer_fails": RedFlag("a well-formed completion carrying the gold answer does not pass",
                                 "the reward cannot be satisfied: fix extraction or the gold column"),
    "lost_signal": RedFlag("the reward fails a correct answer written the way instruct models write it (prose "
                           "after the box, bold box, \\( \\) / $ $ / \\[ \\] delimiters, thin-space thousands)",
                           "allow that style (trailing_text: allow, extract) or acknowledge why the task needs "
                           "the bare format"),
    "truncated": RedFlag(f"≥ {TRUNCATED_SHARE:.0%} of the samples stopped at max_completion_length",
                         "raise generation.max_completion_length"),
    "format_blind": RedFlag("a well-formatted wrong answer scores the same total as a malformed one",
                            "add a format reward"),
    "base_never_succeeds": RedFlag("the base model never passes the correctness rewards",
                                   "GRPO has no signal: go back to SFT (or an easier curriculum)"),
    "base_saturated": RedFlag("the base model almost always passes", "harder prompts: nothing left to learn"),
}


def _flag(name: str, reward: str | None, message: str, sample_ids: list[str] | None = None,
          **evidence: Any) -> dict[str, Any]:
    remedy = {"remedy": RED_FLAGS[name].remedy} if name in RED_FLAGS else {}
    return {"id": f"{name}:{reward}" if reward else name, "name": name, "reward": reward, "message": message,
            "sample_ids": (sample_ids or [])[:SHOWN_IDS], **remedy, **({"evidence": evidence} if evidence else {})}


def _ranks(xs: list[float]) -> list[float]:
    order = sorted(range(len(xs)), key=xs.__getitem__)
    ranks = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2.0
        i = j + 1
    return ranks


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Spearman rank correlation (average ranks for ties); None when either side is constant."""
    rx, ry = _ranks(xs), _ranks(ys)
    n = len(xs)
    mx, my = sum(rx) / n, sum(ry) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def _length(row: dict[str, Any], use_tokens: bool) -> int:
    return row["completion_tokens"] if use_tokens else len(row["completion"])


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    if math.isnan(a) and math.isnan(b):
        return True
    return a == b or abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def detect(rm: RewardModule, spec, rows: list[dict[str, Any]], rescored: dict[str, list[float | None]],
           probe_result: dict[str, Any], base: dict[str, Any] | None) -> list[dict[str, Any]]:
    """All red flags for the scored ``rows`` (each with rewards / errors / passes / completion)."""
    flags: list[dict[str, Any]] = []
    spec_by_name = {r.name: r for r in spec.rewards}
    probes, controls = probe_result["probes"], probe_result["controls"]
    # token counts when the sampler recorded them (what GRPO's length bias acts on), else characters
    use_tokens = bool(rows) and all(isinstance(row.get("completion_tokens"), int) for row in rows)
    for r in rm.rewards:
        values = [row["rewards"].get(r.name) for row in rows]
        ids = [row["id"] for row in rows]
        finite = [(i, v) for i, v in zip(ids, values) if v is not None and math.isfinite(v)]
        errs = [row["id"] for row in rows if row["errors"].get(r.name)]
        probe_errs = [p["id"] for p in probes + controls if p["errors"].get(r.name)]
        if errs or probe_errs:
            first = next((row["errors"][r.name] for row in rows if row["errors"].get(r.name)), None) or \
                next(p["errors"][r.name] for p in probes + controls if p["errors"].get(r.name))
            flags.append(_flag("exceptions", r.name, f"raised on {len(errs)} sample(s) and {len(probe_errs)} "
                               f"probe(s) — in training an exception stops the run; first: {first}",
                               errs + probe_errs))
        nonfinite = [i for i, v in zip(ids, values) if v is not None and not math.isfinite(v)]
        if nonfinite:
            flags.append(_flag("non_finite", r.name, f"returned NaN/inf for {len(nonfinite)} sample(s)", nonfinite))
        if rows and all(v is None for v in values) and not errs:
            flags.append(_flag("all_none", r.name, "returned None for every sample: it never gives a signal"))
        lo, hi = r.min, r.max
        seen = finite + [(p["id"], v) for p in probes + controls
                         if (v := p["scores"].get(r.name)) is not None and math.isfinite(v)]
        outside = [i for i, v in seen if (lo is not None and v < lo - 1e-9) or (hi is not None and v > hi + 1e-9)]
        if outside:
            flags.append(_flag("out_of_range", r.name, f"{len(outside)} score(s) outside the declared range "
                               f"[{lo}, {hi}]", outside))
        if r.role != "shaping" and len(finite) >= 2 and len({v for _, v in finite}) == 1:
            flags.append(_flag("constant_reward", r.name, f"every sample scored {finite[0][1]:g}: the reward "
                               "gives GRPO no signal on these samples (zero advantage)", value=finite[0][1]))
        again = rescored.get(r.name, [])
        differ = [i for i, a, b in zip(ids, values, again) if not _same(a, b)]
        if differ:
            flags.append(_flag("nondeterministic", r.name, f"scoring twice (caches disabled) changed {len(differ)} "
                               "score(s): the same completion must get the same reward", differ))
        pairs = [(_length(row, use_tokens), row["rewards"][r.name]) for row in rows
                 if row["rewards"].get(r.name) is not None and math.isfinite(row["rewards"][r.name])]
        if len(pairs) >= MIN_FOR_CORRELATION:
            rho = spearman([float(a) for a, _ in pairs], [b for _, b in pairs])
            wrong_sign = r.role == "shaping" and rho is not None and rho >= LENGTH_CORRELATION
            if rho is not None and ((r.role != "shaping" and abs(rho) >= LENGTH_CORRELATION) or wrong_sign):
                flags.append(_flag("length_correlated", r.name, f"reward {'rises' if rho > 0 else 'falls'} with "
                                   f"completion length (Spearman rho={rho:.2f}): the policy can learn length "
                                   "instead of the task", rho=round(rho, 3)))
        if r.role != "shaping":
            empty = [row["id"] for row in rows if not row["completion"].strip()
                     and (v := row["rewards"].get(r.name)) is not None and math.isfinite(v)
                     and v > (r.min if r.min is not None else 0.0) + 1e-9]
            if empty:
                flags.append(_flag("empty_rewarded", r.name, f"{len(empty)} empty/whitespace completion(s) got "
                                   "credit", empty))
        if r.role == "correctness":
            style = extract_style_of(spec_by_name[r.name]) if r.name in spec_by_name else None
            if style:
                no_answer = [row["id"] for row in rows if r.passes(row["rewards"].get(r.name))
                             and extract_answer(row["completion"], style) is None]
                if no_answer:
                    flags.append(_flag("correct_without_answer", r.name, f"{len(no_answer)} sample(s) pass "
                                       f"correctness with no extractable answer ({style})", no_answer))
            golds = [c for c in controls if c["probe"] == "gold_answer"]
            failing = [c["id"] for c in golds if not r.passes(c["scores"].get(r.name))]
            if golds and len(failing) == len(golds):
                flags.append(_flag("gold_answer_fails", r.name, "a well-formed completion carrying the gold answer "
                                   "does not pass: the reward cannot be satisfied (lost signal)", failing))
    for r in rm.rewards:
        lost = [c for c in controls if c.get("expect_pass") and r.name in c.get("failed_by", [])]
        if lost:
            kinds = sorted({c["probe"] for c in lost})
            flags.append(_flag("lost_signal", r.name, f"fails {len(lost)} correct answer(s) written the way instruct "
                               f"models write them ({', '.join(kinds)}): GRPO would push the model away from a correct, "
                               "normal style; fix the reward (trailing_text, extract) or acknowledge why",
                               [c["id"] for c in lost], controls=kinds))
    cut = [row["id"] for row in rows if row.get("truncated")]
    if rows and len(cut) >= TRUNCATED_SHARE * len(rows):
        flags.append(_flag("truncated", None, f"{len(cut)} of {len(rows)} completions stopped at "
                           "max_completion_length: the rewards judged cut-off outputs (trl#5697: a 256-token cap "
                           "truncated 97-99% and every reward was 0); raise generation.max_completion_length", cut))
    wf = {c["row"]: c["total"] for c in controls if c["probe"] == "wellformed_wrong"}
    mf = {c["row"]: c["total"] for c in controls if c["probe"] == "malformed_wrong"}
    if wf and all(_same(wf[k], mf.get(k)) for k in wf):
        flags.append(_flag("format_blind", None, "a well-formatted wrong answer scores the same total as a malformed "
                           f"one ({next(iter(wf.values())):g}): the format carries no signal; add a format reward",
                           [f"wellformed_wrong@{k}" for k in wf]))
    if base and base.get("verdict") == "never_succeeds":
        flags.append(_flag("base_never_succeeds", None, base["message"]))
    elif base and base.get("verdict") == "saturated":
        flags.append(_flag("base_saturated", None, base["message"]))
    return flags
