"""`finetune route` — Phase 0: decide which fine-tuning method a task needs.

The decision is a small deterministic function of five answers (:class:`Answers`) over an ordered list of
rules (:data:`RULES`); the first rule that matches decides. The finetuning-method-selection skill shows
the same rules as a table generated from :data:`RULES` (`finetune docs`), so text and code cannot drift.

Answers come from flags or a YAML/JSON file (``--answers``); flags override the file. With ``-o DIR``
the decision is written to ``DIR/route.json`` atomically.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from finetune import __version__, jsonio, rundir
from finetune.errors import UserError

ROUTE_FILE = rundir.ROUTE

GRPO = "grpo-rlvr-training"
SFT = "lora-qlora-recipes"
DPO = "preference-optimization"
EVAL = "eval-harness-first"
ROUTES = (GRPO, SFT, DPO, EVAL)

# Kinds of signal that an algorithm can check. A rubric or an LLM judge is NOT one of them: scoring with it
# is an eval-harness / judge-calibration problem first (the seed's "When RL fits").
SIGNAL_KINDS = ("unit_tests", "parser", "json_schema", "tool_call", "math_answer", "exact_match", "other_code_check")
BaseSuccess = Literal["never", "sometimes", "always", "unknown"]


class Answers(BaseModel):
    """The questions that decide the route. Only ``verifiable`` has no default."""

    model_config = ConfigDict(extra="forbid")

    verifiable: bool = Field(description="Can an algorithm check pass/fail for an output (tests, parser, schema, "
                             "tool-call pattern, math answer key)?")
    signal_kind: Literal[SIGNAL_KINDS] | None = Field(  # type: ignore[valid-type]
        None, description="What checks it, when verifiable.")
    demonstrations: bool = Field(False, description="Are there good example outputs (prompt → ideal completion)?")
    preference_pairs: bool = Field(False, description="Are there pairs of outputs with the preferred one marked?")
    human_judged: bool = Field(False, description="Is quality judged by people or a subjective rubric?")
    base_success: BaseSuccess = Field("unknown", description="Does the current model ever pass the check when "
                                      "sampled many times at low temperature?")

    @model_validator(mode="after")
    def _consistent(self) -> Answers:
        if self.signal_kind is not None and not self.verifiable:
            raise ValueError(f"signal_kind '{self.signal_kind}' names a check, but verifiable is no; answer "
                             "verifiable yes, or drop signal_kind")
        return self


@dataclass(frozen=True)
class Rule:
    """One row of the decision table: when it applies, where it routes, why, and what must exist first."""

    id: str
    condition: str
    route: str
    why: str
    needs: tuple[str, ...]
    applies: Callable[[Answers], bool]
    example: dict[str, Any]
    provisional: bool = False


RULES: tuple[Rule, ...] = (
    Rule(
        id="rlvr-never-succeeds",
        condition="verifiable signal, but the model never succeeds",
        route=SFT,
        why="RL re-weights samples that already work; with zero base success every group scores the same and "
            "there is nothing to sharpen. The gap is format or task understanding: teach it with SFT, then come "
            "back to GRPO once base success is non-zero.",
        needs=("demonstrations of the target behaviour (if there are none, sample a stronger model and keep only "
               "the outputs the verifier passes)",
               "the verifier, kept to measure base success again after SFT"),
        applies=lambda a: a.verifiable and a.base_success == "never",
        example={"verifiable": True, "signal_kind": "unit_tests", "demonstrations": True, "base_success": "never"},
    ),
    Rule(
        id="rlvr-always-succeeds",
        condition="verifiable signal, and the model already always succeeds",
        route=EVAL,
        why="When every sample in a group passes, every advantage is zero and GRPO learns nothing; the task set "
            "or the check is too easy to measure improvement.",
        needs=("harder or held-out prompts on which the model sometimes fails",
               "a check that separates good from merely acceptable outputs"),
        applies=lambda a: a.verifiable and a.base_success == "always",
        example={"verifiable": True, "signal_kind": "exact_match", "base_success": "always"},
    ),
    Rule(
        id="rlvr-tool-use",
        condition="verifiable tool-call signal (single call or multi-turn tools), the model sometimes calls right",
        route=GRPO,
        why="A tool call is checkable by name, JSON Schema and argument values, and a tool environment can "
            "check the task's end state: GRPO with the `tool_call` reward, or TRL's environment_factory with a "
            "gated `type: environment` reward for multi-turn use (agentic RL).",
        needs=("a `type: tool_call` reward with the expected call per row, or the spec's `environment: {file, "
               "class}` with a `type: environment` reward (references/reward-functions.md)",
               "a model whose chat template renders tools and whose calls TRL can parse (Qwen2.5 / 3 / 3.5, Llama "
               "3.1 / 3.2, GLM-4, GPT-OSS, Gemma 4; the `tool_call` reward alone also reads Mistral's [TOOL_CALLS])",
               "whole trajectories read before training: every turn, call and result (the agent hack probes "
               "must all fail)"),
        applies=lambda a: a.verifiable and a.signal_kind == "tool_call" and a.base_success in ("sometimes", "unknown"),
        example={"verifiable": True, "signal_kind": "tool_call", "base_success": "sometimes"},
    ),
    Rule(
        id="rlvr",
        condition="verifiable signal, and the model sometimes succeeds",
        route=GRPO,
        why="Success is algorithmically checkable and the model sometimes succeeds but unreliably: exactly where "
            "GRPO with verifiable rewards fits (reasoning → GRPO).",
        needs=("a verifier that becomes the correctness reward, plus a format reward (composite reward)",
               "a prompt-only dataset, with a gold answer or test column for the verifier",
               "a starting policy that sometimes succeeds: the SFT checkpoint, or an instruct model as released",
               "50-100 sampled outputs read by a person before training (the Inspection Rule gate)"),
        applies=lambda a: a.verifiable and a.base_success == "sometimes",
        example={"verifiable": True, "signal_kind": "math_answer", "base_success": "sometimes"},
    ),
    Rule(
        id="rlvr-unmeasured",
        condition="verifiable signal, base success not measured yet",
        route=GRPO,
        why="Success is algorithmically checkable, so GRPO is the candidate - provisionally: RL only sharpens an "
            "ability the model already has, so base success must be measured before any training.",
        needs=("base success measured first (`finetune inspect score` reports it); if it is zero, go to "
               "lora-qlora-recipes instead",
               "a verifier that becomes the correctness reward, plus a format reward (composite reward)",
               "a prompt-only dataset, with a gold answer or test column for the verifier",
               "50-100 sampled outputs read by a person before training (the Inspection Rule gate)"),
        applies=lambda a: a.verifiable and a.base_success == "unknown",
        example={"verifiable": True, "signal_kind": "parser"},
        provisional=True,
    ),
    Rule(
        id="preference",
        condition="no verifiable signal; preference pairs exist",
        route=DPO,
        why="The signal is a preference between two acceptable outputs - taste, not correctness: taste → DPO.",
        needs=("preference pairs (prompt, chosen, rejected), checked for label noise on a sample",
               "a starting policy and reference: an SFT checkpoint, or an instruct model as released",
               "an eval (win rate against the starting model) to tell whether it helped"),
        applies=lambda a: not a.verifiable and a.preference_pairs,
        example={"verifiable": False, "preference_pairs": True, "human_judged": True},
    ),
    Rule(
        id="demonstrations-judged",
        condition="no verifiable signal, no preference pairs; demonstrations exist; quality is human-judged",
        route=SFT,
        why="Example outputs are the signal: supervised fine-tuning (LoRA / QLoRA) imitates them directly. "
            "Because quality is judged by people, whether it helped can only be measured with a calibrated judge.",
        needs=("demonstrations in the model's chat format, deduplicated, with a held-out split",
               "an eval harness with a judge calibrated against human labels (eval-harness-first), built before "
               "training so the base model can be scored too"),
        applies=lambda a: not a.verifiable and not a.preference_pairs and a.demonstrations and a.human_judged,
        example={"verifiable": False, "demonstrations": True, "human_judged": True},
    ),
    Rule(
        id="demonstrations",
        condition="no verifiable signal, no preference pairs; demonstrations exist",
        route=SFT,
        why="Example outputs are the signal: supervised fine-tuning (LoRA / QLoRA) imitates them directly.",
        needs=("demonstrations in the model's chat format, deduplicated, with a held-out split",
               "an automatic metric on the held-out split (loss alone does not say the behaviour improved)"),
        applies=lambda a: not a.verifiable and not a.preference_pairs and a.demonstrations,
        example={"verifiable": False, "demonstrations": True},
    ),
    Rule(
        id="judged-only",
        condition="no verifiable signal, no pairs, no demonstrations",
        route=EVAL,
        why="Nothing yet says what a good output is in a form a trainer can use. Scoring needs human judgement "
            "or a rubric, which is an eval-harness and judge-calibration problem first - not a reason to jump "
            "to RL.",
        needs=("a fixed eval set with human labels on a sample",
               "a judge (rubric or model) calibrated against those labels",
               "then: preference pairs or demonstrations collected with the harness, and route again"),
        applies=lambda a: not a.verifiable and not a.preference_pairs and not a.demonstrations,
        example={"verifiable": False, "human_judged": True},
    ),
)


@dataclass(frozen=True)
class Decision:
    """The route for a set of answers, with the rule that decided it."""

    rule: Rule
    answers: Answers

    @property
    def route(self) -> str:
        return self.rule.route

    def to_json(self) -> dict[str, Any]:
        return {
            "route": self.rule.route,
            "skill": f"skills/{self.rule.route}/SKILL.md",
            "rule": self.rule.id,
            "provisional": self.rule.provisional,
            "why": self.rule.why,
            "needs": list(self.rule.needs),
            "alternatives": alternatives(self),
            "answers": self.answers.model_dump(mode="json"),
            "plugin_version": __version__,
        }


def alternatives(decision: Decision) -> list[str]:
    """What else to offer beside the route: with demonstrations at hand and a GRPO route, SFT on them (alone,
    or before GRPO) is the cheaper first step the user should hear about."""
    if decision.route == GRPO and decision.answers.demonstrations:
        return [f"{SFT}: supervised fine-tuning on the demonstrations alone may already reach the target "
                "(gold outputs are the most direct signal; measure it with the verifier)",
                f"{SFT} then {GRPO}: SFT on the demonstrations first, then GRPO from that checkpoint to sharpen "
                "what the verifier checks (the SFT-then-RL recipe; base success rises, so groups carry signal)"]
    return []


def decide(answers: Answers) -> Decision:
    """The first rule of :data:`RULES` that applies. The rules cover every combination of answers."""
    for rule in RULES:
        if rule.applies(answers):
            return Decision(rule, answers)
    raise AssertionError(f"no routing rule applies to {answers!r}")  # the rules are exhaustive (tested)


def skill_table() -> str:
    """The decision table shown in skills/finetuning-method-selection/SKILL.md (generated; `finetune docs`)."""
    lines = [
        "Rules are tried in order; the first that matches decides. Generated from `finetune.route.RULES` - the "
        "same rules `finetune route` runs.",
        "",
        "| # | answers | route | why | needs before it can start |",
        "|---|---|---|---|---|",
    ]
    for i, rule in enumerate(RULES, start=1):
        route = f"[{rule.route}](../{rule.route}/SKILL.md)" + (" (provisional)" if rule.provisional else "")
        needs = "; ".join(rule.needs)
        lines.append(f"| {i} | {rule.condition} | {route} | {rule.why} | {needs} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- answers (the command line is cli/route.py)

QUESTIONS = tuple(Answers.model_fields)  # each question is a flag (--signal-kind) and a key of the answers file
_YES_NO_FIELDS = frozenset(name for name, f in Answers.model_fields.items() if f.annotation is bool)


def _yes_no(value: str) -> bool:
    v = value.strip().lower()
    if v in {"yes", "y", "true", "1"}:
        return True
    if v in {"no", "n", "false", "0"}:
        return False
    raise UserError(f"expected yes or no, got '{value}'", fix="answer yes or no")


def _load_answers_file(path: Path) -> tuple[dict[str, Any], dict[tuple[Any, ...], int]]:
    if path.suffix.lower() == ".json":
        data = jsonio.read_json(path, fix="fix the JSON")
        lines: dict[tuple[Any, ...], int] = {}
    else:
        from finetune.yamlio import load_with_lines

        data, lines = load_with_lines(path)
    if not isinstance(data, dict):
        raise UserError("the answers file must be a mapping of question → answer", where=str(path),
                        fix=f"use the keys: {', '.join(QUESTIONS)}")
    return data, lines


def answers_from(answers_file: str | None, given: Mapping[str, str | None]) -> Answers:
    """Merge the answers file (if any) with the answers given as text (a flag each: yes/no, or a choice;
    None = not given, and it overrides the file); validate; bad input → UserError naming the field."""
    data: dict[str, Any] = {}
    lines: dict[tuple[Any, ...], int] = {}
    source = "flags"
    if answers_file:
        data, lines = _load_answers_file(Path(answers_file))
        source = str(answers_file)
    for field in QUESTIONS:
        value = given.get(field)
        if value is None:
            continue
        data[field] = _yes_no(value) if field in _YES_NO_FIELDS else value
    try:
        return Answers.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(x) for x in err["loc"]) or "answers"
        line = lines.get(tuple(err["loc"][:1])) if err["loc"] else None
        where = f"{source}:{line}" if line else source
        if err["type"] == "missing":
            fix = f"answer it (--{field.replace('_', '-')} yes|no, or '{field}:' in the answers file)"
        elif err["type"] == "extra_forbidden":
            fix = f"known questions: {', '.join(QUESTIONS)}"
        elif err["type"] == "value_error":
            fix = "make the answers agree"
        else:
            fix = "correct the value"
        msg = err["msg"].removeprefix("Value error, ")
        raise UserError(f"{field}: {msg}", where=where, fix=fix) from None


def render_text(decision: Decision) -> str:
    rule = decision.rule
    lines = [f"route: {rule.route}" + ("  (provisional)" if rule.provisional else ""),
             f"skill: skills/{rule.route}/SKILL.md",
             f"why:   {rule.why}",
             "needs before it can start:"]
    lines += [f"  {i}. {need}" for i, need in enumerate(rule.needs, start=1)]
    offered = alternatives(decision)
    if offered:
        lines.append("also offer the user (demonstrations exist):")
        lines += [f"  - {alt}" for alt in offered]
    return "\n".join(lines)


def record(decision: Decision, out_dir: Path) -> Path:
    """Write ``out_dir/route.json`` atomically; a file where the run directory should be → UserError."""
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"not a directory: {out_dir}", where="-o", fix="name a run directory")
    return jsonio.write_json(out_dir / ROUTE_FILE, decision.to_json())
