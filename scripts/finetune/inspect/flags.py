"""Automatic red flags: what a reward does wrong that a reader might not see in 50 samples.

Each flag has an id (``name`` or ``name:reward``) that ``finetune inspect ack`` can acknowledge with
a written reason; the gate FAILs while any flag is neither fixed (gone after a re-score) nor
acknowledged.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from finetune.inspect.probes import prompt_text
from finetune.inspect.rewardmod import RewardModule
from finetune.rewards.kind import kind_of, reading_of
from finetune.rewards.lib.rewards_answers import final_answer
from finetune.rewards.lib.rewards_meta import RewardMeta

if TYPE_CHECKING:
    from finetune.spec import RunSpec

# LENGTH_CORRELATION (|Spearman rho| between reward and completion length that is flagged),
# MIN_FOR_CORRELATION, TRUNCATED_SHARE (share of samples cut at max_completion_length that is flagged),
# spearman() and the length rule are finetune.watch's: the rendered train.py flags training completions
# with the same definitions.
from finetune.watch import LENGTH_CORRELATION, MIN_FOR_CORRELATION, TRUNCATED_SHARE, length_flagged, spearman

SHOWN_IDS = 20




@dataclass(frozen=True)
class RedFlag:
    """One Phase 1 red flag: what it catches (doc) and how to get rid of it (remedy). The generated
    reference (finetune.diagnose.reference.diagnosis_doc) and each flag's ``remedy`` come from this table."""

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
    "no_hidden_tests": RedFlag("a unit-test reward scores only tests the prompt quotes verbatim (no "
                               "hidden_tests_column): code that hard-codes those examples passes",
                               "keep some of each row's tests out of the prompt in another column and name it "
                               "hidden_tests_column, or acknowledge why (e.g. the tests are generic properties)"),
    "no_episode_reader": RedFlag("the spec declares an environment but no reward scores the episode it ran: "
                                 "every reward reads the final text, so an answer given without the tools is paid "
                                 "like one obtained through them",
                                 "add a `type: environment` reward (the environment's `get_reward()` sees the calls "
                                 "made), or acknowledge why the answer alone is the task"),
}


# A flag's fix for THAT reward kind (the spec field; type: python only when no field can) is the kind entry's
# `remedies` (rewards/specs.py); these are the format_blind remedies, by the task's answer shape.
FORMAT_REMEDIES = {
    "json": "add a format reward in the answer's shape: `type: json_match` with `role: format` (a JSON Schema "
    "derived from the gold)",
    "text": "add a format reward (`type: format` with the answer container's `pattern`)",
    "present": "the format reward(s) {names} score the malformed answer like the well-formed one: tighten the "
    "format reward (`pattern` / `schema` / `fields`)",
}


# Flags read from the text-only controls, which carry no tool call: for a reward that scores the episode an
# environment ran (its kind's Reading.episode), they say nothing about the reward, so they are listed in the
# score report as not applicable, with the reason. What such a reward reads is tested by the agent probes
# (inspect.probes.tool_probes: an answer with no call, junk arguments, a skipped step) and by the per-sample
# flags on the rollouts themselves (exceptions, constant, nondeterministic, out_of_range, empty_rewarded).
TEXT_ONLY: dict[str, str] = {
    "length_correlated": "a rollout that calls the tools is longer than an answer that calls none, so a correct "
    "episode reward rises with the completion's length; the agent probes test reward without the task",
    "gold_answer_fails": "the gold-answer control is text with no tool call: no episode ran, so a correct "
    "environment gives it no credit",
    "format_blind": "the well-formed and malformed controls are text with no tool call: every reward scores the "
    "episode, so both score 0 whatever the reward; the agent probes test what it reads",
}


def not_applicable(rewards: list[RewardMeta]) -> list[dict[str, Any]]:
    """The checks that do not apply to these rewards (rewards.py's REWARD_META: the ``episode`` mark training's
    live checks read too): ``{check, reward, reason}`` each (the score report's ``not_applicable``); a
    reward-less ``reward`` (None) is a check on the whole spec."""
    episode = [r.name for r in rewards if r.episode]
    out: list[dict[str, Any]] = [{"check": check, "reward": name, "reason": TEXT_ONLY[check]}
                                 for name in episode for check in ("length_correlated", "gold_answer_fails")]
    if rewards and len(episode) == len(rewards):
        out.append({"check": "format_blind", "reward": None, "reason": TEXT_ONLY["format_blind"]})
    return out


def _flag(name: str, reward: str | None, message: str, sample_ids: list[str] | None = None,
          remedy_text: str | None = None, **evidence: Any) -> dict[str, Any]:
    remedy = {"remedy": remedy_text or RED_FLAGS[name].remedy} if name in RED_FLAGS else {}
    return {"id": f"{name}:{reward}" if reward else name, "name": name, "reward": reward, "message": message,
            "sample_ids": (sample_ids or [])[:SHOWN_IDS], **remedy, **({"evidence": evidence} if evidence else {})}


def _length(row: dict[str, Any], use_tokens: bool) -> int:
    return row["completion_tokens"] if use_tokens else len(row["completion"])


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    if math.isnan(a) and math.isnan(b):
        return True
    return a == b or abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


Flag = dict[str, Any]
Row = dict[str, Any]


@dataclass(frozen=True)
class _Evidence:
    """What every per-reward detector reads: the scored rows, the caches-off re-score, the probes."""

    rows: list[Row]
    rescored: dict[str, list[float | None]]
    probes: list[dict[str, Any]]
    controls: list[dict[str, Any]]
    use_tokens: bool  # token counts when the sampler recorded them (what GRPO's length bias acts on)
    spec_by_name: dict[str, Any]

    @property
    def ids(self) -> list[str]:
        return [row["id"] for row in self.rows]

    def values(self, name: str) -> list[float | None]:
        return [row["rewards"].get(name) for row in self.rows]

    def finite(self, name: str) -> list[tuple[str, float]]:
        return [(i, v) for i, v in zip(self.ids, self.values(name)) if v is not None and math.isfinite(v)]


def _exceptions(r: RewardMeta, ev: _Evidence) -> list[Flag]:
    errs = [row["id"] for row in ev.rows if row["errors"].get(r.name)]
    probe_errs = [p["id"] for p in ev.probes + ev.controls if p["errors"].get(r.name)]
    if not (errs or probe_errs):
        return []
    first = next((row["errors"][r.name] for row in ev.rows if row["errors"].get(r.name)), None) or \
        next(p["errors"][r.name] for p in ev.probes + ev.controls if p["errors"].get(r.name))
    return [_flag("exceptions", r.name, f"raised on {len(errs)} sample(s) and {len(probe_errs)} "
                  f"probe(s) — in training an exception stops the run; first: {first}", errs + probe_errs)]


def _non_finite(r: RewardMeta, ev: _Evidence) -> list[Flag]:
    nonfinite = [i for i, v in zip(ev.ids, ev.values(r.name)) if v is not None and not math.isfinite(v)]
    if not nonfinite:
        return []
    return [_flag("non_finite", r.name, f"returned NaN/inf for {len(nonfinite)} sample(s)", nonfinite)]


def _all_none(r: RewardMeta, ev: _Evidence) -> list[Flag]:
    errs = any(row["errors"].get(r.name) for row in ev.rows)
    if ev.rows and all(v is None for v in ev.values(r.name)) and not errs:
        return [_flag("all_none", r.name, "returned None for every sample: it never gives a signal")]
    return []


def _out_of_range(r: RewardMeta, ev: _Evidence) -> list[Flag]:
    lo, hi = r.min, r.max
    seen = ev.finite(r.name) + [(p["id"], v) for p in ev.probes + ev.controls
                                if (v := p["scores"].get(r.name)) is not None and math.isfinite(v)]
    outside = [i for i, v in seen if (lo is not None and v < lo - 1e-9) or (hi is not None and v > hi + 1e-9)]
    if not outside:
        return []
    return [_flag("out_of_range", r.name, f"{len(outside)} score(s) outside the declared range [{lo}, {hi}]",
                  outside)]


def _constant(r: RewardMeta, ev: _Evidence) -> list[Flag]:
    finite = ev.finite(r.name)
    if r.role != "shaping" and len(finite) >= 2 and len({v for _, v in finite}) == 1:
        return [_flag("constant_reward", r.name, f"every sample scored {finite[0][1]:g}: the reward gives GRPO "
                      "no signal on these samples (zero advantage)", value=finite[0][1])]
    return []


def _nondeterministic(r: RewardMeta, ev: _Evidence) -> list[Flag]:
    again = ev.rescored.get(r.name, [])
    differ = [i for i, a, b in zip(ev.ids, ev.values(r.name), again) if not _same(a, b)]
    if not differ:
        return []
    return [_flag("nondeterministic", r.name, f"scoring twice (caches disabled) changed {len(differ)} "
                  "score(s): the same completion must get the same reward", differ)]


def _length_correlated(r: RewardMeta, ev: _Evidence) -> list[Flag]:
    pairs = [(_length(row, ev.use_tokens), row["rewards"][r.name]) for row in ev.rows
             if row["rewards"].get(r.name) is not None and math.isfinite(row["rewards"][r.name])]
    if len(pairs) < MIN_FOR_CORRELATION:
        return []
    rho = spearman([float(a) for a, _ in pairs], [b for _, b in pairs])
    # a shaping reward may fall with length (a length penalty); only rising with it is flagged
    if rho is None or not length_flagged(r.role, rho):
        return []
    return [_flag("length_correlated", r.name, f"reward {'rises' if rho > 0 else 'falls'} with completion "
                  f"length (Spearman rho={rho:.2f}): the policy can learn length instead of the task",
                  rho=round(rho, 3))]


def _empty_rewarded(r: RewardMeta, ev: _Evidence) -> list[Flag]:
    if r.role == "shaping":
        return []
    floor = (r.min if r.min is not None else 0.0) + 1e-9
    empty = [row["id"] for row in ev.rows if not row["completion"].strip()
             and (v := row["rewards"].get(r.name)) is not None and math.isfinite(v) and v > floor]
    if not empty:
        return []
    return [_flag("empty_rewarded", r.name, f"{len(empty)} empty/whitespace completion(s) got credit", empty)]


def _correct_without_answer(r: RewardMeta, ev: _Evidence) -> list[Flag]:
    if r.role != "correctness":
        return []
    style = reading_of(ev.spec_by_name[r.name]).extract if r.name in ev.spec_by_name else None
    if not style:
        return []
    # the rewards' own reader (rewards_answers), asked only whether there is an answer at all
    no_answer = [row["id"] for row in ev.rows if r.passes(row["rewards"].get(r.name))
                 and final_answer(row["completion"], style) is None]
    if not no_answer:
        return []
    return [_flag("correct_without_answer", r.name, f"{len(no_answer)} sample(s) pass correctness with no "
                  f"extractable answer ({style})", no_answer)]


def _gold_answer_fails(r: RewardMeta, ev: _Evidence) -> list[Flag]:
    golds = [c for c in ev.controls if c["probe"] == "gold_answer"]
    failing = [c["id"] for c in golds if not r.passes(c["scores"].get(r.name))]
    if r.role != "correctness" or not golds or len(failing) != len(golds):
        return []
    entry = ev.spec_by_name.get(r.name)
    shape = golds[0]["completion"]
    shown = shape if len(shape) <= 160 else shape[:157] + "..."
    return [_flag("gold_answer_fails", r.name, "a well-formed completion carrying the gold answer does not "
                  f"pass: the reward cannot be satisfied (lost signal); the completion tried: {shown!r}", failing,
                  remedy_text=kind_of(entry).remedies.get("gold_answer_fails") if entry is not None else None)]


# per-reward detectors, in the order their flags are reported
_PER_REWARD: tuple[Callable[[RewardMeta, _Evidence], list[Flag]], ...] = (
    _exceptions, _non_finite, _all_none, _out_of_range, _constant, _nondeterministic, _length_correlated,
    _empty_rewarded, _correct_without_answer, _gold_answer_fails)


def _lost_signal(r: RewardMeta, controls: list[dict[str, Any]]) -> list[Flag]:
    lost = [c for c in controls if c.get("expect_pass") and r.name in c.get("failed_by", [])]
    if not lost:
        return []
    kinds = sorted({c["probe"] for c in lost})
    return [_flag("lost_signal", r.name, f"fails {len(lost)} correct answer(s) written the way instruct models "
                  f"write them ({', '.join(kinds)}): GRPO would push the model away from a correct, normal style; "
                  "fix the reward (trailing_text, extract) or acknowledge why", [c["id"] for c in lost],
                  controls=kinds)]


def _truncated(rows: list[Row]) -> list[Flag]:
    cut = [row["id"] for row in rows if row.get("truncated")]
    if not rows or len(cut) < TRUNCATED_SHARE * len(rows):
        return []
    return [_flag("truncated", None, f"{len(cut)} of {len(rows)} completions stopped at max_completion_length: "
                  "the rewards judged cut-off outputs (trl#5697: a 256-token cap truncated 97-99% and every "
                  "reward was 0); raise generation.max_completion_length", cut)]


def _format_blind(controls: list[dict[str, Any]], spec: RunSpec, rm: RewardModule) -> list[Flag]:
    wf = {c["row"]: c for c in controls if c["probe"] == "wellformed_wrong"}
    mf = {c["row"]: c["total"] for c in controls if c["probe"] == "malformed_wrong"}
    if not wf or not all(_same(wf[k]["total"], mf.get(k)) for k in wf):
        return []
    formats = [r.name for r in rm.by_role("format")]
    json_task = any(c.get("json_gold") for c in controls) or any(
        reading_of(r).style == "json_object" for r in spec.rewards)
    remedy = FORMAT_REMEDIES["present"].format(names=", ".join(formats)) if formats else \
        FORMAT_REMEDIES["json" if json_task else "text"]
    example = next(iter(wf.values()))
    shown = example["completion"] if len(example["completion"]) <= 160 else example["completion"][:157] + "..."
    return [_flag("format_blind", None, "a well-formatted wrong answer scores the same total as a malformed one "
                  f"({example['total']:g}): the format carries no signal; the well-formed answer tried: {shown!r}",
                  [f"wellformed_wrong@{k}" for k in wf], remedy_text=remedy)]


def _shown_tests(cell: Any, test_format: str) -> list[str]:
    """The pieces of a tests cell that a prompt quoting the tests would contain verbatim."""
    if isinstance(cell, str):
        try:
            cell = json.loads(cell)
        except ValueError:
            return [line.strip() for line in cell.splitlines() if line.strip().startswith("assert")]
    if test_format == "assert" and isinstance(cell, list):
        return [t.strip() for t in cell if isinstance(t, str) and t.strip()]
    if test_format == "stdin_stdout":
        pairs = (list(zip(cell["inputs"], cell["outputs"])) if isinstance(cell, dict) and "inputs" in cell else
                 [(t.get("input"), t.get("output")) for t in cell if isinstance(t, dict)]
                 if isinstance(cell, list) else [])
        return [f"{i.strip()}\x00{o.strip()}" for i, o in pairs if isinstance(i, str) and isinstance(o, str)]
    return []


def _no_hidden_tests(spec: RunSpec, rows: list[Row]) -> list[Flag]:
    """A unit_tests reward without hidden tests whose prompts quote the visible tests verbatim."""
    flags = []
    for r in spec.rewards:
        tests = reading_of(r).tests
        if tests is None or tests.hidden:
            continue
        quoted: dict[Any, str] = {}
        for row in rows:
            prompt = prompt_text(row.get("prompt"))
            cells = row.get("columns") or {}
            shown = _shown_tests(cells.get(tests.column), tests.format_of(cells))
            if shown and all(all(part in prompt for part in t.split("\x00")) for t in shown):
                quoted.setdefault(row.get("row", row["id"]), row["id"])
        if quoted:
            flags.append(_flag("no_hidden_tests", r.name, f"the prompts of {len(quoted)} row(s) quote every test "
                               f"of '{tests.column}' verbatim and there is no hidden_tests_column: code that "
                               "hard-codes the shown examples scores as a solution (the classic code-RL hack); add "
                               "hidden tests or acknowledge why", list(quoted.values())))
    return flags


def _no_episode_reader(spec: RunSpec, rm: RewardModule) -> list[Flag]:
    if spec.environment is None or not rm.rewards or any(r.episode for r in rm.rewards):
        return []
    return [_flag("no_episode_reader", None, f"the spec declares the environment '{spec.environment.class_}' but "
                  f"none of {', '.join(r.name for r in rm.rewards)} scores its episode (the calls made and their "
                  "results): the agent probes that deliver the gold without a call test what they pay")]


def _base_flags(base: dict[str, Any] | None) -> list[Flag]:
    if base and base.get("verdict") == "never_succeeds":
        return [_flag("base_never_succeeds", None, base["message"])]
    if base and base.get("verdict") == "saturated":
        return [_flag("base_saturated", None, base["message"])]
    return []


def detect(rm: RewardModule, spec: RunSpec, rows: list[Row], rescored: dict[str, list[float | None]],
           probe_result: dict[str, Any], base: dict[str, Any] | None) -> list[Flag]:
    """All red flags for the scored ``rows`` (each with rewards / errors / passes / completion)."""
    use_tokens = bool(rows) and all(isinstance(row.get("completion_tokens"), int) for row in rows)
    ev = _Evidence(rows, rescored, probe_result["probes"], probe_result["controls"], use_tokens,
                   {r.name: r for r in spec.rewards})
    flags = [f for r in rm.rewards for check in _PER_REWARD for f in check(r, ev)]
    flags += [f for r in rm.rewards for f in _lost_signal(r, ev.controls)]
    flags += _truncated(rows) + _format_blind(ev.controls, spec, rm) + _no_hidden_tests(spec, rows) + _base_flags(base)
    flags += _no_episode_reader(spec, rm)
    skipped = {(n["check"], n["reward"]) for n in not_applicable(rm.rewards)}
    return [f for f in flags if (f["name"], f["reward"]) not in skipped]
