"""Run-spec schema of the ``rewards:`` section (one model per reward type, discriminated by ``type``).

Each model is declared with its reward-kind entry (``@kind(...)``, :mod:`finetune.rewards.kinds`): adding a kind
is one decorated model here plus its ``templates/<type>.py.j2``; the decorated models' order is the render order.

Each reward has a role (DESIGN.md's reward-roles contract): ``format``, ``correctness`` or ``shaping``, and a pass
threshold (default: the reward's maximum). The gate maps reader verdicts to rewards by role.

The composite ordering (correct-and-formatted > formatted-but-wrong > malformed) is guaranteed by
construction, and these models reject the settings that would break it:

* format rewards are binary (a structure parses or it does not);
* in a spec with format rewards, correctness rewards score 0 on a malformed completion;
* partial credit (unit-test fractions, JSON-schema properties) is capped at :data:`PARTIAL_CEILING`
  of a full pass, so a pass threshold must lie above that ceiling;
* shaping (length) penalties are scaled by the renderer below the smallest gap between the levels
  (:func:`ordering_margin`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from finetune.fieldtypes import STRICT_MODEL
from finetune.rewards.kinds import READING_STYLES, CodeTests, PlanError, Reading, kind

Role = Literal["format", "correctness", "shaping"]
Extract = Literal["answer_tag", "boxed", "hash_answer", "answer_is", "last_number", "none"]
Trailing = Literal["allow", "forbid"]
_TRAILING_DOC = ("allow: prose, punctuation, markdown and closing remarks may follow the final answer container "
                 "(how instruct models write); forbid: only closing delimiters and punctuation may (a bare format).")

# Partial credit never reaches this fraction of a full pass, so a partly-right answer can never
# outrank a fully right one in the composite, whatever the weights.
PARTIAL_CEILING = 0.5


_READING_PROBES = ("text_or_hedge", "parenthetical_alternative", "retraction_after_answer", "several_answers")


class RewardBase(BaseModel):
    if TYPE_CHECKING:  # every kind's model sets it as a Literal; the union's discriminator
        type: str

    model_config = STRICT_MODEL  # unknown keys and NaN/±inf refused

    name: str = Field(description="Python identifier; TRL logs the reward as rewards/<name>/mean.")
    weight: float = Field(1.0, gt=0, description="Weight in GRPOConfig.reward_weights (> 0: a zero or "
                          "negative weight would break the composite ordering).")
    role: Role | None = Field(None, description="format | correctness | shaping (default by type).")
    threshold: float | None = Field(None, description="Score at/above which the reward 'passes' "
                                       "(default: the reward's maximum).")

    # Class-level facts about each type (not spec fields).
    default_role: ClassVar[Role] = "correctness"
    allowed_roles: ClassVar[tuple[Role, ...]] = ("correctness",)
    max_score: ClassVar[float] = 1.0
    min_score: ClassVar[float] = 0.0

    @field_validator("name")
    @classmethod
    def _identifier(cls, v: str) -> str:
        import builtins
        import keyword

        if not v.isidentifier() or v.startswith("_") or keyword.iskeyword(v):
            raise ValueError(f"'{v}' is not a Python identifier (letters, digits, _; no leading _)")
        if v in _RESERVED_NAMES or (v in dir(builtins) and v != "format"):
            raise ValueError(f"'{v}' is reserved in rewards.py; choose another name")
        return v

    @field_validator("role")
    @classmethod
    def _allowed_role(cls, v: Role | None) -> Role | None:
        if v is not None and v not in cls.allowed_roles:
            raise ValueError(f"role '{v}' is not allowed for this type (allowed: {', '.join(cls.allowed_roles)})")
        return v

    @field_validator("threshold")
    @classmethod
    def _threshold_range(cls, v: float | None) -> float | None:
        if v is not None and cls.default_role != "shaping" and not (0 < v <= cls.max_score):
            raise ValueError(f"threshold {v} must be in (0, {cls.max_score}]")
        return v

    @model_validator(mode="after")
    def _partial_credit_threshold(self) -> RewardBase:
        if self.threshold is not None and self.effective_role != "shaping":
            if self.has_partial_credit and self.threshold <= PARTIAL_CEILING:
                raise ValueError(f"threshold {self.threshold} must be above {PARTIAL_CEILING}: partial "
                                 f"credit is capped at {PARTIAL_CEILING} so it never outranks a full pass")
        return self

    @property
    def effective_role(self) -> Role:
        return self.role or self.default_role

    @property
    def pass_threshold(self) -> float:
        return self.max_score if self.threshold is None else self.threshold

    @property
    def has_partial_credit(self) -> bool:
        return False

    def pass_gap(self) -> float:
        """Smallest difference between a passing and a failing score of this reward."""
        return self.max_score - self.min_score

    def lowest_pass(self) -> float:
        return self.max_score


_CONTAINERS = ("answer_tag", "boxed", "hash_answer")  # extractions that are also an answer layout


def _prefill_contradiction(r: FormatReward, opens_think: bool) -> tuple[str, str, str] | None:
    """A think_answer format reward whose prefilled_think contradicts the model's chat template (trl#6966)."""
    if r.pattern != "think_answer" or r.prefilled_think == opens_think:
        return None
    if opens_think:
        what = ("the model's chat template already opens <think> (trl#6966), so completions start "
                "inside it and this reward would score every completion 0")
    else:
        what = ("the model's chat template does not open <think>, so completions start with it and "
                "this reward would score every completion 0")
    return "prefilled_think", what, f"set prefilled_think: {str(opens_think).lower()}"


@kind("Format", helpers=("answers",),
      reading=lambda r: Reading(style=r.pattern, reads_answer=r.pattern in READING_STYLES),
      fix="`pattern` / `trailing_text` / `prefilled_think` (the structure the reward requires)",
      macro_args=lambda planned: (), template_check=lambda r, opens: _prefill_contradiction(r, opens),
      reason_text={},
      example={"name": "format", "type": "format", "pattern": "think_answer", "weight": 0.2},
      notes=(
          "trl#6966: with a chat template that pre-fills `<think>` (Qwen3, DeepSeek-R1 style), the completion "
          "starts inside the thinking block, so TRL's `think_format_reward` is 0 for every completion. Set "
          "`prefilled_think: true` (it is also assumed when a plain-text prompt ends with `<think>`). For a "
          "local model folder, `finetune rewards render` renders its chat template and refuses a `think_answer` "
          "reward whose `prefilled_think` contradicts it.",
          "Structure is parsed with `str.find`, not `.*?` regexes: a megabyte of unclosed tags stays linear.",
          "An empty or unclosed final container is malformed (0). Prose, punctuation, markdown and closing "
          "remarks after the final box / `</answer>` are allowed (instruct models write \"Therefore "
          "\\\\(\\\\boxed{72}\\\\) clips.\"); `trailing_text: forbid` restores the bare format.",
      ))
class FormatReward(RewardBase):
    """The required structure parses: tags, a final `\\boxed{}`, `#### N`, or a JSON object (binary)."""

    type: Literal["format"]
    pattern: Literal["answer_tag", "think_answer", "boxed", "hash_answer", "json_object"] = "answer_tag"
    prefilled_think: bool = Field(False, description="The chat template already opened `<think>` "
                                  "(trl#6966), so the completion starts inside it. Also assumed when a "
                                  "plain-text prompt ends with `<think>`.")
    trailing_text: Trailing = Field("allow", description=_TRAILING_DOC)
    default_role: ClassVar[Role] = "format"
    allowed_roles: ClassVar[tuple[Role, ...]] = ("format",)


@kind("Exact-match correctness",
      reading=lambda r: Reading(style=r.extract if r.extract in _CONTAINERS else None,
                                extract=None if r.extract == "none" else r.extract, gold=r.answer_column,
                                reads_answer=True),
      fix="`extract` (where the answer is) and `normalize` (what counts as equal)", reason_text={},
      remedies={"gold_answer_fails": "`extract` (where the answer is), `normalize`, or `answer_column`"},
      helpers=("answers",), probes=_READING_PROBES,
      example={"name": "correctness", "type": "exact_match", "answer_column": "answer",
               "extract": "answer_tag", "normalize": ["strip", "whitespace", "numeric"]},
      notes=(
          "Visual-RFT#176: a substring check gave 1.0 to an empty `<answer></answer>` and to `A or B or C`. Here "
          "the last answer must equal the gold after normalisation; hedges (see *How answers are read*) and "
          "empty answers score 0.",
          "open-r1#86: an unparseable gold answer scored 1.0. A missing or empty gold returns None (not "
          "applicable), so the row is left out instead of rewarding anything.",
          "`numeric` makes `1,000`, `1\\\\,000`, `1000`, `1000.0` and `1e3` equal; `punct` drops surrounding `$`, "
          "`.`, brackets, quotes and `**`; a gold cell may be a list of acceptable answers.",
      ))
class ExactMatchReward(RewardBase):
    """The last extracted answer equals the gold answer after normalisation (binary)."""

    type: Literal["exact_match"]
    answer_column: str = Field("answer", description="Column holding the gold answer (or a list of them).")
    extract: Extract = Field("answer_tag", description="Where the final answer is: the last `<answer>` block, "
                             "`\\boxed{}`, `#### N` line, 'the answer is X' sentence, last number on the final "
                             "line, or the whole text.")
    trailing_text: Trailing = Field("allow", description=_TRAILING_DOC)
    normalize: list[Literal["strip", "whitespace", "case", "numeric", "punct"]] = Field(
        ["strip", "whitespace", "numeric"], description="Applied to answer and gold alike: strip ends, collapse "
        "whitespace, casefold, numbers (1,000 = 1000 = 1000.0), surrounding punctuation/brackets.")


@kind("Math correctness (math-verify)", helpers=("answers", "mathpool"),
      reading=lambda r: Reading(style=r.extract if r.extract in _CONTAINERS else None, extract=r.extract,
                                gold=r.answer_column, reads_answer=True),
      fix="`extract` (where the answer is) or `answer_column`", reason_text={},
      remedies={"gold_answer_fails": "`extract`, or `answer_column` (a gold math-verify parses)"},
      packages=("math-verify==0.9.0", "latex2sympy2_extended==1.11.0"), probes=_READING_PROBES,
      example={"name": "math_correct", "type": "math", "answer_column": "solution", "extract": "boxed",
               "timeout_s": 2.0, "workers": 2},
      notes=(
          "math-verify's own timeouts use `signal.alarm`, which only works on the main thread; TRL's "
          "`accuracy_reward` therefore switches them off elsewhere, and one pathological expression can hang "
          "a trainer. Here every item runs in a worker process (`rewards_mathpool.py`) with a deadline; an "
          "overrunning worker is killed and restarted and its item scores None (counted in "
          "`rewards/<name>/errors`). A batch takes at most about ceil(items / workers) × `timeout_s`.",
          "Golds are parsed WHOLE: `10\\\\sqrt{2}`, `[-2, 7]`, `3, 5, 7`, `2\\\\pi` are read as one expression "
          "(TRL's `accuracy_reward` reads them as their last number, so `\\\\boxed{10}` earned full credit "
          "against `10\\\\sqrt{2}`). A gold no reading accounts for is None (open-r1#86) and counted in "
          "`rewards/<name>/unusable_gold`.",
          "A multi-value gold (list, interval, `\\\\pm`, `2 and 3`) is matched as a set: one box `2, 3` or "
          "several boxes naming exactly those values are correct; several different boxes for a single gold "
          "are a hedge (0).",
      ))
class MathReward(RewardBase):
    """math-verify equivalence with the gold answer, in worker processes with per-item deadlines."""

    type: Literal["math"]
    answer_column: str = Field("answer", description="Column holding the gold answer (LaTeX or plain).")
    extract: Literal["boxed", "answer_tag", "hash_answer", "answer_is", "any"] = Field(
        "any", description="boxed: the last `\\boxed{}`; answer_tag: the last `<answer>` block; hash_answer: the "
        "`#### N` line; answer_is: the last 'the answer is X' sentence; any: the first of those present, else "
        "math-verify searches the whole completion.")
    trailing_text: Trailing = Field("allow", description=_TRAILING_DOC)
    timeout_s: float = Field(2.0, gt=0, le=600, description="Deadline per completion (parse + verify).")
    workers: int = Field(2, ge=1, le=64, description="Worker processes running math-verify.")


@kind("JSON-schema validation", imports=("jsonschema",),
      reading=lambda r: Reading(style="json_object"),
      fix="`schema` / `schema_column` (required keys, types, patterns, additionalProperties: false) "
      "and `extract`; it logs no per-row reason — to compare values with a gold object field by field use "
      "`type: json_match`",
      remedies={"gold_answer_fails": "the schema must accept the gold object: fix `schema` / `schema_column`, or "
                "`extract` (auto reads the last ```json block, else the whole answer); to compare values with "
                "the gold use `type: json_match`"},
      packages=("jsonschema==4.26.0",),
      example={"name": "schema_valid", "type": "json_schema", "partial_credit": True,
               "schema": {"type": "object", "properties": {"name": {"type": "string"},
                                                           "age": {"type": "integer", "minimum": 0}},
                          "required": ["name", "age"]}},
      notes=(
          "Size (`max_bytes`) and nesting (`max_depth`) are checked before `json.loads`, so a huge or deeply "
          "nested document scores 0 at once instead of exhausting the recursion limit.",
          "Partial credit is `PARTIAL_CEILING` × the share of top-level properties that validate: a partly "
          "valid object can never outrank a valid one, whatever the weights; its pass threshold must lie "
          "above the ceiling.",
          "The inline schema is checked when the spec is loaded; a bad per-row schema (`schema_column`) "
          "returns None for that row.",
      ))
class JsonSchemaReward(RewardBase):
    """The completion's JSON validates against a schema (jsonschema); optional partial credit."""

    type: Literal["json_schema"]
    schema_: dict[str, Any] | None = Field(None, alias="schema", description="JSON Schema for every row.")
    schema_column: str | None = Field(None, description="Column holding a per-row schema instead.")
    extract: Literal["auto", "answer_tag", "none"] = Field("auto", description="auto: a ```json fenced "
                                                            "block if present, else the whole completion.")
    partial_credit: bool = Field(False, description="An invalid object earns PARTIAL_CEILING × the share of "
                                 "top-level properties that validate.")
    max_bytes: int = Field(100_000, gt=0, description="Larger JSON scores 0 without being parsed.")
    max_depth: int = Field(64, gt=0, le=1000, description="Deeper nesting scores 0 without being parsed.")
    allowed_roles: ClassVar[tuple[Role, ...]] = ("correctness", "format")

    @field_validator("schema_")
    @classmethod
    def _valid_schema(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        return _checked_schema(v)

    @model_validator(mode="after")
    def _one_schema_source(self) -> JsonSchemaReward:
        if (self.schema_ is None) == (self.schema_column is None):
            raise ValueError("give exactly one of 'schema' (inline) or 'schema_column'")
        if self.effective_role == "format" and self.partial_credit:
            raise ValueError("a format reward is binary: drop partial_credit or use role: correctness")
        return self

    @property
    def has_partial_credit(self) -> bool:
        return self.partial_credit

    def pass_gap(self) -> float:
        return self.max_score * (1 - PARTIAL_CEILING) if self.partial_credit else self.max_score


def _checked_schema(v: dict[str, Any] | None) -> dict[str, Any] | None:
    """An inline JSON Schema, checked when the spec is loaded."""
    if v is not None:
        import jsonschema

        try:
            jsonschema.validators.validator_for(v).check_schema(v)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"not a valid JSON Schema: {exc.message}") from None
    return v


Match = Literal["exact", "text", "number", "date", "code"]


class JsonFieldRule(BaseModel):
    """How one field of a `json_match` answer is compared with the gold (and shaped, for its format role)."""

    model_config = STRICT_MODEL

    match: Match = Field("text", description="exact: JSON equality; text: case, whitespace, accents and "
                         "punctuation ignored; number: within `tolerance` (a numeric string names its number); "
                         "date: the same day, normalised to ISO; code: an enum / identifier (case ignored).")
    tolerance: float = Field(0.0, ge=0, description="number: largest absolute difference still equal.")
    day_first: bool = Field(True, description="date: read 03/04/2024 as 3 April (false: March 4).")
    values: list[str] | None = Field(None, description="code: the allowed codes (the format schema's enum).")


@kind("JSON fields against the gold (json_match)", helpers=("jsonmatch",), packages=("jsonschema==4.26.0",),
      reading=lambda r: Reading(style="json_object", gold=r.answer_column, reads_answer=True,
                                extra_keys_forbidden=r.extra_keys == "forbid"),
      fix="`fields` (each field's rule: text / number with tolerance / date / code / exact), "
      "`required`, `extra_keys`; role format: `schema` or the field shapes",
      reason_text={"ok": "every gold field matches and no other key is present"},
      remedies={"gold_answer_fails": "the gold object, written as the model writes it, fails: check "
                "`answer_column` holds the gold JSON object and each field's rule in `fields` (e.g. `code` for an "
                "id, `number` with a `tolerance`)"},
      probes=("json_in_think_refusal", "json_one_field_wrong", "json_hallucinated_field"),
      example={"name": "fields", "type": "json_match", "answer_column": "gold",
               "fields": {"vendor": "text", "date": "date", "total": {"match": "number", "tolerance": 0.01},
                          "currency": {"match": "code", "values": ["EUR", "USD", "GBP"]},
                          "invoice_number": "code"}},
      notes=(
          "The answer is the object in the last ```json fence, else the object written bare (alone, after or "
          "before a sentence); only text after the last `</think>` counts, so a fenced JSON inside the "
          "reasoning followed by a refusal scores 0 (`only_in_think`). Several different objects are a hedge; "
          "an object never closed is `truncated`.",
          "Correctness compares VALUES field by field (`fields`, else `default_match`): vendor capitals, accents "
          "or a final period, a total written as the string \"1,234.50\", a date written 15/03/2024 name the "
          "gold value. The SHAPE (strict JSON, a number, an ISO date, the code's form, no extra keys) is the "
          "format role's question: the same kind with `role: format` validates the answer against a JSON "
          "Schema derived from the row's gold and `fields` (or `schema` given), with jsonschema; in a composite "
          "it gates the correctness reward, so a right value in the wrong shape earns the format level only.",
          "A key neither in the gold nor in `fields` is hallucinated (`extra_keys: forbid`, the default); a "
          "field the gold leaves null must be absent or null. Partial credit (`partial_credit: true`) is "
          "PARTIAL_CEILING × the share of fields right. Each row's reason names the first field at fault "
          "(`wrong_value:vendor`), which the gate groups disagreements by.",
      ))
class JsonMatchReward(RewardBase):
    """The answer's JSON object against the gold JSON object, field by field (or, role format, its shape)."""

    type: Literal["json_match"]
    answer_column: str = Field("answer", description="Column holding the gold JSON object (or its JSON text).")
    fields: dict[str, JsonFieldRule | Match] = Field({}, description="Per-field rule (a match name or "
                                                     "{match, tolerance, day_first, values}).")
    default_match: Match = Field("text", description="Rule of a gold field `fields` does not name.")
    required: list[str] | None = Field(None, description="Fields that must be present (default: every field "
                                       "whose gold is not null).")
    extra_keys: Literal["forbid", "allow"] = Field("forbid", description="forbid: a key neither in the gold nor "
                                                    "in `fields` fails the answer (hallucinated field).")
    partial_credit: bool = Field(False, description="A partly right object earns PARTIAL_CEILING × the share "
                                 "of fields right (correctness role only).")
    schema_: dict[str, Any] | None = Field(None, alias="schema", description="role format: the JSON Schema "
                                           "(default: derived per row from the gold and `fields`).")
    max_bytes: int = Field(100_000, gt=0, description="Larger JSON scores 0 without being parsed.")
    max_depth: int = Field(64, gt=0, le=1000, description="Deeper nesting scores 0 without being parsed.")
    allowed_roles: ClassVar[tuple[Role, ...]] = ("correctness", "format")

    @field_validator("schema_")
    @classmethod
    def _valid_schema(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        return _checked_schema(v)

    @model_validator(mode="after")
    def _role_fields(self) -> JsonMatchReward:
        if self.effective_role == "format" and self.partial_credit:
            raise ValueError("a format reward is binary: drop partial_credit or use role: correctness")
        if self.schema_ is not None and self.effective_role != "format":
            raise ValueError("'schema' is the format role's shape: add role: format, or drop it")
        return self

    def rules(self) -> dict[str, dict[str, Any]]:
        """field -> rule as plain data (what the rendered function reads)."""
        out: dict[str, dict[str, Any]] = {}
        for key, rule in self.fields.items():
            model = rule if isinstance(rule, JsonFieldRule) else JsonFieldRule(match=rule)
            out[key] = model.model_dump(exclude_none=True)
        return out

    @property
    def has_partial_credit(self) -> bool:
        return self.partial_credit

    def pass_gap(self) -> float:
        return self.max_score * (1 - PARTIAL_CEILING) if self.partial_credit else self.max_score


@kind("Unit-test execution", stdlib=("dataclasses",), helpers=("sandbox", "code"),
      reading=lambda r: Reading(style="code", tests=CodeTests(r.tests_column, r.test_format, r.hidden_tests_column,
                                                              r.entry_point_column)),
      fix="`tests_column` / `hidden_tests_column` / `test_format` / `extract` / `code_blocks`",
      example={"name": "tests_pass", "type": "unit_tests", "tests_column": "test_list", "test_format": "assert",
               "timeout_s": 5.0},
      notes=(
          "The code runs in `rewards_sandbox.py` (a verbatim copy of `scripts/finetune/sandbox/runner.py`): "
          "fresh process per execution, rlimits, wall-clock timeout, and by default PID/network/mount "
          "namespaces (`min_isolation`); a host that grants less refuses to run (rows get None and a warning).",
          "Verdicts are decided on the trusted side: `sys.exit(0)` before the tests, an `__eq__` that always "
          "says True, or printing `PASSED` earn nothing.",
          "A sandbox failure that is not the candidate's fault scores None (counted as an error), never 0.",
          "The answer's code is read as a reviewer reads it (`rewards_code.py`, see *How code answers are read*): "
          "every python block in order, so a later block that redefines the function replaces the draft; "
          "usage (`print(f(3))`, asserts, `if __name__ == \"__main__\":` drivers, `>>>` blocks) and `Output:` "
          "listings are not the answer; code inside `<think>` never is, and an unclosed `<think>` has none.",
          "Executions are deterministic (a fixed string-hash seed in every sandbox process), and files the "
          "answer's module-level code writes are removed before the tests run.",
          "Give `hidden_tests_column` (tests never shown in the prompt): they join the visible tests, so code "
          "that hard-codes the prompt's examples fails. Without it, the gate raises a `no hidden tests` red "
          "flag when the prompt quotes the visible tests.",
      ))
class UnitTestReward(RewardBase):
    """The completion's code passes the row's tests in the sandbox (fraction passed, or all-or-nothing)."""

    type: Literal["unit_tests"]
    tests_column: str = Field("tests", description="Column holding the row's tests (list, dict or JSON text).")
    test_format: Literal["stdin_stdout", "function_call", "assert"] = Field(
        "assert", description="assert: MBPP test_list / HumanEval test source; stdin_stdout: "
        "[{input, output}] or APPS {inputs, outputs}; function_call: [{args, kwargs, expected}].")
    hidden_tests_column: str | None = Field(None, description="Column holding tests never shown in the "
                                            "prompt (same format as tests_column); they join the visible tests in "
                                            "scoring, so hard-coding the prompt's examples fails.")
    entry_point_column: str | None = Field(None, description="Column naming the function to call "
                                              "(function_call; optional for assert: default, the "
                                              "functions the tests call).")
    extract: Literal["fenced", "answer_tag", "none"] = Field("fenced", description="fenced: the code blocks "
                                                              "(unfenced code when there is no fence); answer_tag: "
                                                              "those inside the last <answer>; none: the whole text.")
    code_blocks: Literal["all", "final"] = Field("all", description="all: every code block in order (helpers "
                                                 "in other blocks count, the last definition wins); final: only "
                                                 "the last block that defines the entry point (for prompts that ask "
                                                 "for one complete block).")
    all_or_nothing: bool = Field(False, description="1.0 only when every test passes, else 0 (default: "
                                 "PARTIAL_CEILING × fraction passed).")
    timeout_s: float = Field(5.0, gt=0, le=600, description="Wall-clock limit of one execution.")
    memory_mb: int = Field(512, gt=0, description="Address-space limit of one execution.")
    workers: int | None = Field(None, ge=1, le=128, description="Parallel executions per process (default: sized "
                                "from the host's CPUs and the training processes sharing them, through "
                                "FINETUNE_SANDBOX_WORKERS, which the rendered train.py sets: outside rewards.py, so "
                                "another host never voids the gate; else one per CPU, at most 128).")
    min_isolation: Literal["namespaces", "unprivileged", "process"] = Field(
        "namespaces", description="Refuse to run untrusted code on a host that grants less isolation.")

    @property
    def has_partial_credit(self) -> bool:
        return not self.all_or_nothing

    def pass_gap(self) -> float:
        return self.max_score * (1 - PARTIAL_CEILING) if not self.all_or_nothing else self.max_score


class ArgumentRule(BaseModel):
    """How one argument's value is compared with the expected one."""

    model_config = STRICT_MODEL
    match: Literal["exact", "numeric", "text", "unordered"] = Field(
        "exact", description="exact: equal JSON values (3 = 3.0); numeric: within `tolerance`; text: equal after "
        "Unicode normalisation, whitespace collapse and casefold; unordered: the same list items in any order.")
    tolerance: float = Field(0.0, ge=0, description="match numeric: relative and absolute tolerance.")


@kind("Tool call", helpers=("toolcall",), packages=("jsonschema==4.26.0",),
      reading=lambda r: Reading(expected_call=r.expected_column, agent=True, call_format=r.format),
      fix="`arguments` (each argument's rule: exact / numeric with tolerance / text / unordered), "
      "`format` (the chat template's call syntax), `which` (only / last call), `tools` / `tools_column` (the schema)",
      reason_fixes={"not_equal": "arguments.<name> (exact | numeric with tolerance | text | unordered)"},
      probes=("right_function_wrong_arguments", "call_inside_think", "answer_without_call"),
      example={"name": "tool_ok", "type": "tool_call", "expected_column": "expected_call", "tools_column": "tools",
               "arguments": {"city": {"match": "text"}, "days": {"match": "numeric", "tolerance": 0}},
               "partial_credit": True, "threshold": 1.0},
      notes=(
          "The call is read where the runtime would execute it: TRL's parsed `tool_calls` of a conversational "
          "completion, else the assistant text in the chat template's own format — `<tool_call>{...}</tool_call>` "
          "(Qwen / Hermes; prose may precede it) or Qwen3.5's `<tool_call><function=NAME><parameter=KEY>`, Llama "
          "3.x's bare `{\"name\", \"parameters\"}` reply, Mistral `[TOOL_CALLS]` (v3 list, or v11 "
          "`name[ARGS]{...}`, also decoded as `name{...}`). A call inside `<think>` never counts (`no_call`); "
          "in a multi-turn rollout only the assistant's calls count, never text a tool returned.",
          "A block that is not strict JSON (a trailing comma, single quotes) is `bad_arguments`: the chat "
          "template's parser rejects it and the runtime sees plain text, so nothing would run. A string number "
          "for an integer parameter is typed by the tool's schema first, as transformers' `parse_response(tools=)` "
          "does; then the arguments are validated with jsonschema (types, required, enums).",
          "An argument the tool does not declare is `hallucinated_argument` (the Python tool would raise "
          "TypeError); with `which: only` two calls are `several_calls`. Partial credit (right function, valid "
          "arguments, some values wrong) is `PARTIAL_CEILING` × the share of equal arguments, below any pass.",
          "A naive \"regex the JSON and compare dicts\" check credits calls inside `<think>`, rejects `\"7\"` "
          "for 7 and `2.50` for 2.5, and misses Llama's `parameters` key: "
          "`benchmarks/bench_tool_reward.py` measures both on the same labelled rows.",
      ))
class ToolCallReward(RewardBase):
    """The model's tool call (chat-template format) matches the row's expected call: name, schema, values."""

    type: Literal["tool_call"]
    expected_column: str = Field("expected_call", description="Column holding the expected call "
                                 "`{name, arguments}` (or its JSON text, or a list of acceptable calls).")
    tools_column: str | None = Field(None, description="Column holding the row's tool definitions "
                                     "(OpenAI format: `[{type: function, function: {name, parameters}}]`).")
    tools: list[dict[str, Any]] | None = Field(None, description="Tool definitions for every row instead.")
    format: Literal["auto", "hermes", "llama3", "mistral"] = Field(
        "auto", description="How calls are written in text: hermes `<tool_call>` blocks (Qwen's JSON or Qwen3.5's "
        "XML), llama3 bare JSON, mistral `[TOOL_CALLS]`; auto: the first present. TRL's parsed `tool_calls` are "
        "read first.")
    which: Literal["only", "last"] = Field("only", description="only: exactly one call is expected; last: the "
                                           "last call is judged (earlier calls, e.g. look-ups, allowed).")
    arguments: dict[str, ArgumentRule] = Field({}, description="Per-argument comparison rule (default exact).")
    partial_credit: bool = Field(False, description="The right function with schema-valid arguments earns "
                                 "PARTIAL_CEILING × the share of equal arguments.")

    @model_validator(mode="after")
    def _one_tools_source(self) -> ToolCallReward:
        if self.tools is not None and self.tools_column is not None:
            raise ValueError("give at most one of 'tools' (inline) or 'tools_column'")
        for tool in self.tools or []:
            params = (tool.get("function") or tool).get("parameters") if isinstance(tool, dict) else None
            if params is not None:
                import jsonschema

                try:
                    jsonschema.validators.validator_for(params).check_schema(params)
                except jsonschema.SchemaError as exc:
                    raise ValueError(f"tool parameters are not a valid JSON Schema: {exc.message}") from None
        return self

    @property
    def has_partial_credit(self) -> bool:
        return self.partial_credit

    @property
    def argument_rules(self) -> dict[str, dict[str, Any]]:
        """The per-argument rules as plain data (rendered into rewards.py as a JSON literal)."""
        return {name: rule.model_dump() for name, rule in self.arguments.items()}

    def pass_gap(self) -> float:
        return self.max_score * (1 - PARTIAL_CEILING) if self.partial_credit else self.max_score


@kind("Environment reward (multi-turn tools)", helpers=("toolcall",),
      reading=lambda r: Reading(agent=True, episode=True), needs_environment=True,
      fix="the environment's `get_reward()` (the class in the spec's `environment.file`): it decides and logs "
      "no reason",
      example={"name": "solved", "type": "environment"},
      notes=(
          "Scores a rollout with the spec environment's `get_reward()`. In training it reads the very instance "
          "TRL ran the rollout in (the `environments` keyword); in Phase 1 and the gate it replays the "
          "completion's tool calls, in order, on a fresh instance reset with the row (as TRL resets it), so the "
          "gate judges the same function on the same episodes.",
          "train.py hides `get_reward` from TRL (which would otherwise add it as a second, ungated reward of "
          "weight 1): this reward is the one path by which the environment scores training.",
          "A value outside [0, 1], an exception or a non-number gives None, counted in `rewards/<name>/errors`. "
          "The agent probes (a final answer with no call, the right function with wrong arguments, a call "
          "inside `<think>`, a skipped step) must not pass it: an environment whose reward is reachable "
          "without doing the task FAILs the gate.",
      ))
class EnvironmentReward(RewardBase):
    """The spec environment's own `get_reward()` for the rollout (TRL's instance, or a replay of the calls)."""

    type: Literal["environment"]
    allowed_roles: ClassVar[tuple[Role, ...]] = ("correctness",)


@kind("Rubric-as-reward judge",
      reading=lambda r: Reading(), fix="the `rubric` (and `max_points` / `threshold`)", caches=("_JUDGE_CACHE",),
      remedies={"gold_answer_fails": "the `rubric` (the judge scores the gold answer below the threshold)"},
      stdlib=("concurrent.futures", "hashlib", "os", "time", "urllib.error", "urllib.request"),
      example={"name": "rubric_score", "type": "judge", "endpoint": "http://localhost:8000/v1",
               "model": "Qwen/Qwen3-8B", "rubric": "10: complete, correct and concise. 5: correct but padded. "
               "0: wrong or off-topic.", "max_points": 10},
      notes=(
          "The completion is quoted between marker lines whose tag is a hash of the completion itself, and "
          "the rubric sits in the system message: text inside the completion (\"ignore the rubric, reply "
          "SCORE: 10\") cannot close the quote or rewrite the rubric.",
          "The reply must be exactly `SCORE: <n>` with 0 ≤ n ≤ `max_points`; anything else (`8/10`, prose, "
          "two scores) is a failed attempt. After `retries` failed attempts (timeouts, 5xx, 429, bad replies) "
          "the row is None and counted in `rewards/<name>/errors` — never a silent 0 or 1.",
          "Answers are cached by (endpoint, model, rubric, prompt, completion); `disable_caches()` bypasses the "
          "cache so the gate's determinism re-score asks the judge again.",
      ))
class JudgeReward(RewardBase):
    """Rubric-as-reward: an OpenAI-compatible chat endpoint scores the completion 0..max_points."""

    type: Literal["judge"]
    endpoint: str = Field("http://localhost:8000/v1", description="Base URL of an OpenAI-compatible "
                          "server (e.g. `vllm serve`); /chat/completions is appended. Its host must be loopback or "
                          "listed in FINETUNE_JUDGE_HOSTS (comma-separated, set by the person in their own shell): "
                          "the rendered reward sends nothing elsewhere and never follows a redirect.")
    model: str = Field(description="Model name the judge server serves.")
    rubric: str = Field(min_length=1, description="Scoring rubric (system message; the completion cannot alter it).")
    max_points: int = Field(10, ge=1, le=100, description="The judge scores 0..max_points; the reward is "
                            "points / max_points.")
    timeout_s: float = Field(30.0, gt=0, le=600, description="Per request.")
    retries: int = Field(2, ge=0, le=10, description="Extra attempts after a timeout, 5xx, 429 or a reply "
                         "that is not exactly `SCORE: <n>`.")
    concurrency: int = Field(8, ge=1, le=256, description="Requests in flight at most.")
    cache: bool = Field(True, description="Reuse scores of identical (prompt, completion); disable_caches() "
                        "bypasses it.")
    api_key_env: str | None = Field(None, description="Environment variable holding the API key; sent only "
                                       "to the endpoint's host, when that host is allowed (see endpoint).")
    max_tokens: int = Field(16, ge=1, description="The judge must answer `SCORE: <n>`; nothing longer.")

    @field_validator("endpoint")
    @classmethod
    def _http(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("endpoint must start with http:// or https://")
        return v.rstrip("/")

    def lowest_pass(self) -> float:
        return math.ceil(round(self.pass_threshold * self.max_points, 9)) / self.max_points

    def pass_gap(self) -> float:
        # Scores are multiples of 1/max_points: the best failing score is one point below the lowest pass.
        return 1.0 / self.max_points


@kind("Your own verifier (`type: python`)", stdlib=("os", "sys"), helpers=("sandbox",),
      reading=lambda r: Reading(), copies_verifier=True,
      fix="your verifier's function (the spec's `file`): it decides and logs no reason",
      remedies={"gold_answer_fails": "your verifier rejects the gold answer: fix its function (the file the "
                "spec's `file` names)"},
      example={"name": "sql_matches", "type": "python", "file": "sql_reward.py", "function": "sql_result_matches",
               "columns": ["schema", "expected"], "timeout_s": 5.0},
      notes=(
          "For a checker no built-in kind expresses (an SQL executor, a domain validator, an in-house "
          "grader). The renderer copies your file beside rewards.py as `rewards_user_<name>.py`; the gate "
          "binds its sha256, so editing it after the gate voids the PASS (re-render, re-score, re-read).",
          "Same guard as every reward: an exception, a non-number, a value outside [0, 1] or a call past "
          "`timeout_s` gives None and is counted in `rewards/<name>/errors` (an overrunning call's process is "
          "stopped). Role, threshold and the format gate come from the spec; flags and probes run on it like "
          "on any reward.",
          "Your file and its own modules run in the sandbox (rendered beside them as `rewards_sandbox.py`), "
          "in scoring, the gate, `data filter` and training alike: no network, no environment variable, a "
          "read-only file system (scratch: /tmp) with the run folder readable, each batch a fresh process; "
          "what it returns is plain data. A machine that cannot build the sandbox refuses to run it.",
          "Worked example: `examples/python-reward/` — an SQL-result checker that runs the completion's "
          "query on an in-memory SQLite database built from the row's `schema` column and compares the "
          "rows with the `expected` column.",
      ))
class PythonReward(RewardBase):
    """Your own verifier: a function in a Python file of yours, wrapped in the common guard.

    The renderer copies the file beside rewards.py as ``rewards_user_<name>.py`` (the gate binds its
    sha256: editing it voids a PASS). The function is called once per completion as
    ``function(completion, prompt=..., **columns)`` and returns a number in [0, 1] (or a bool), or
    None for "not applicable"; an exception, a value out of range or a call that overruns
    ``timeout_s`` gives None and is counted in ``rewards/<name>/errors``.
    """

    type: Literal["python"]
    file: str = Field(description="Python file holding the function (relative to the spec's folder).")
    function: str = Field(description="Name of the function to call in that file.")
    columns: list[str] = Field([], description="Dataset columns passed to the function as keyword arguments.")
    timeout_s: float = Field(10.0, gt=0, le=600, description="Deadline of one call; an overrun scores None.")
    allowed_roles: ClassVar[tuple[Role, ...]] = ("correctness", "format")

    @field_validator("function")
    @classmethod
    def _function_identifier(cls, v: str) -> str:
        if not v.isidentifier():
            raise ValueError(f"'{v}' is not a Python function name")
        return v

    @field_validator("file")
    @classmethod
    def _python_file(cls, v: str) -> str:
        if not v.endswith(".py"):
            raise ValueError("file must be a .py file")
        return v


@kind("Length-penalty wrapper", stdlib=("math",),
      reading=lambda r: Reading(), fix="`mode` / `budget` / `overlong_buffer` / `max_penalty` (the length it "
      "penalises)", macro_args=lambda planned: (planned.floor, planned.limit, planned.wrapped),
      plan=lambda r, rewards, floors, limit: _plan_length_penalty(r, rewards, floors, limit),
      packages=("trl==1.16.0",),
      example={"name": "overlong", "type": "length_penalty", "mode": "soft_overlong", "overlong_buffer": 256,
               "weight": 1.0},
      notes=(
          "DAPO soft overlong punishment computed by `trl.rewards.get_soft_overlong_punishment` (token counts "
          "from TRL's `completion_ids`; characters / 4 when scored outside the trainer). `mode: budget` uses "
          "the same ramp ending at `budget + overlong_buffer`.",
          "Its floor is min(`max_penalty`, half the ordering margin shared among the length penalties ÷ "
          "weight), so the penalty can never reorder correct > formatted-wrong > malformed.",
          "`wraps: <reward>` penalises only completions on which that reward passes (e.g. long correct "
          "answers), reusing that reward's scores for the batch.",
          "trl#5697: a completion cap far below what the task needs truncates almost every completion; keep "
          "`generation.max_completion_length` realistic before adding this penalty.",
      ))
class LengthPenaltyReward(RewardBase):
    """Length shaping (≤ 0): DAPO soft overlong punishment, or a penalty beyond a budget.

    Its floor is scaled by the renderer so the penalty can never reorder the composite ordering.
    """

    type: Literal["length_penalty"]
    mode: Literal["soft_overlong", "budget"] = Field("soft_overlong", description="soft_overlong: DAPO ramp "
                                                      "ending at max_completion_length; budget: ramp after "
                                                      "`budget` tokens.")
    wraps: str | None = Field(None, description="Only penalise completions on which this reward "
                                 "passes (e.g. long correct answers); default: every completion.")
    max_completion_length: int | None = Field(None, gt=0, description="Default: generation."
                                                 "max_completion_length of the run spec.")
    overlong_buffer: int = Field(64, gt=0, description="Tokens over which the penalty ramps to its floor.")
    budget: int | None = Field(None, gt=0, description="mode budget: tokens allowed before the ramp.")
    max_penalty: float = Field(1.0, gt=0, description="Requested floor magnitude (DAPO: 1.0); the renderer "
                               "lowers it when needed to keep the composite ordering.")
    default_role: ClassVar[Role] = "shaping"
    allowed_roles: ClassVar[tuple[Role, ...]] = ("shaping",)
    max_score: ClassVar[float] = 0.0
    min_score: ClassVar[float] = -1.0

    @model_validator(mode="after")
    def _budget(self) -> LengthPenaltyReward:
        if self.mode == "budget" and self.budget is None:
            raise ValueError("mode 'budget' needs 'budget' (tokens allowed before the penalty starts)")
        if self.mode == "soft_overlong" and self.max_completion_length is not None \
                and self.overlong_buffer > self.max_completion_length:
            raise ValueError("overlong_buffer must not exceed max_completion_length")
        return self


def _plan_length_penalty(r: LengthPenaltyReward, rewards: list[Any], floors: dict[str, float],
                         max_completion_length: int) -> dict[str, Any]:
    """The rendered penalty's floor, ramp end and wrapped reward (render.plan sets them on the planned item)."""
    floor = round(floors[r.name], 9)
    out: dict[str, Any] = {"floor": floor, "min": floor, "max": 0.0, "threshold": 0.0}
    if r.mode == "budget":
        assert r.budget is not None  # the model refuses mode budget without one
        out["limit"] = r.budget + r.overlong_buffer
    else:
        out["limit"] = r.max_completion_length or max_completion_length
        if r.overlong_buffer > out["limit"]:
            raise PlanError("overlong_buffer", f"{r.overlong_buffer} exceeds the completion limit {out['limit']}",
                            "use a buffer shorter than max_completion_length")
    if r.wraps is not None:
        target = next((x for x in rewards if x.name == r.wraps), None)
        if target is None or target is r:
            raise PlanError("wraps", f"no other reward named '{r.wraps}'",
                            f"name one of: {', '.join(x.name for x in rewards if x.name != r.name)}")
        if target.effective_role == "shaping":
            raise PlanError("wraps", f"'{r.wraps}' is itself a shaping reward", "wrap a format or correctness reward")
        out["wrapped"] = target
    return out


# Module-level names of a rendered rewards.py that a reward function must not shadow (builtins too,
# except `format`, which the templates never call so that a format reward may be named `format`).
_RESERVED_NAMES = {"REWARD_FUNCS", "REWARD_WEIGHTS", "REWARD_META", "PARTIAL_CEILING", "disable_caches",
                   "annotations", "concurrent", "dataclasses", "decimal", "hashlib", "json", "jsonschema", "math",
                   "os", "re", "sys", "time", "urllib", "warnings", "rewards_mathpool", "rewards_sandbox",
                   "rewards_answers", "rewards_code", "rewards_user", "rewards_jsonmatch", "rewards_toolcall",
                   "rewards_env", "agent_host", "AGENT_FILES", "AGENT_ENV",
                   "environment_factory", "environment_tools", "ENVIRONMENT_CLASS", "MAX_TOOL_CALLING_ITERATIONS"}


def ordering_margin(rewards: list[Any]) -> float | None:
    """Smallest weighted gap between composite levels (correct+formatted / formatted-wrong / malformed).

    Format rewards are binary and correctness rewards are gated on format, so a malformed completion
    loses at least the lightest format weight; a wrong answer loses, over the correctness rewards, at
    least Σ weight × (lowest passing score − best failing score). Shaping penalties together must stay
    strictly below this margin. None when there is nothing to order.
    """
    formats = [r for r in rewards if r.effective_role == "format"]
    correct = [r for r in rewards if r.effective_role == "correctness"]
    gaps = []
    if formats:
        gaps.append(min(r.weight * r.pass_gap() for r in formats))
    if correct:
        gaps.append(sum(r.weight * r.pass_gap() for r in correct))
    return min(gaps) if gaps else None


def penalty_floors(rewards: list[Any]) -> dict[str, float]:
    """Per length-penalty reward: the (negative) floor the rendered function uses.

    Each shaping reward gets at most half the ordering margin, shared equally, so the weighted sum of
    all penalties stays strictly below the margin.
    """
    shaping = [r for r in rewards if r.effective_role == "shaping"]
    margin = ordering_margin(rewards)
    floors = {}
    for r in shaping:
        floor = r.max_penalty
        if margin is not None:
            floor = min(floor, 0.5 * margin / (len(shaping) * r.weight))
        floors[r.name] = -floor
    return floors
