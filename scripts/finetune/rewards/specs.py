"""Run-spec schema of the ``rewards:`` section (one model per reward type, discriminated by ``type``).

Each reward has a role (DESIGN.md contract 3): ``format``, ``correctness`` or ``shaping``, and a pass
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
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from finetune.types import STRICT_MODEL

Role = Literal["format", "correctness", "shaping"]
Extract = Literal["answer_tag", "boxed", "hash_answer", "answer_is", "last_number", "none"]
Trailing = Literal["allow", "forbid"]
_TRAILING_DOC = ("allow: prose, punctuation, markdown and closing remarks may follow the final answer container "
                 "(how instruct models write); forbid: only closing delimiters and punctuation may (a bare format).")

# Partial credit never reaches this fraction of a full pass, so a partly-right answer can never
# outrank a fully right one in the composite, whatever the weights.
PARTIAL_CEILING = 0.5


class _RewardBase(BaseModel):
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
    def _partial_credit_threshold(self) -> _RewardBase:
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


class FormatReward(_RewardBase):
    """The required structure parses: tags, a final `\\boxed{}`, `#### N`, or a JSON object (binary)."""

    type: Literal["format"]
    pattern: Literal["answer_tag", "think_answer", "boxed", "hash_answer", "json_object"] = "answer_tag"
    prefilled_think: bool = Field(False, description="The chat template already opened `<think>` "
                                  "(trl#6966), so the completion starts inside it. Also assumed when a "
                                  "plain-text prompt ends with `<think>`.")
    trailing_text: Trailing = Field("allow", description=_TRAILING_DOC)
    default_role: ClassVar[Role] = "format"
    allowed_roles: ClassVar[tuple[Role, ...]] = ("format",)


class ExactMatchReward(_RewardBase):
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


class MathReward(_RewardBase):
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


class JsonSchemaReward(_RewardBase):
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
        if v is not None:
            import jsonschema

            try:
                jsonschema.validators.validator_for(v).check_schema(v)
            except jsonschema.SchemaError as exc:
                raise ValueError(f"not a valid JSON Schema: {exc.message}") from None
        return v

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


class UnitTestReward(_RewardBase):
    """The completion's code passes the row's tests in the sandbox (fraction passed, or all-or-nothing)."""

    type: Literal["unit_tests"]
    tests_column: str = Field("tests", description="Column holding the row's tests (list, dict or JSON text).")
    test_format: Literal["stdin_stdout", "function_call", "assert"] = Field(
        "assert", description="assert: MBPP test_list / HumanEval test source; stdin_stdout: "
        "[{input, output}] or APPS {inputs, outputs}; function_call: [{args, kwargs, expected}].")
    entry_point_column: str | None = Field(None, description="Column naming the function to call "
                                              "(test_format: function_call).")
    extract: Literal["fenced", "answer_tag", "none"] = Field("fenced", description="fenced: the last "
                                                              "```python block (else the whole text).")
    all_or_nothing: bool = Field(False, description="1.0 only when every test passes, else 0 (default: "
                                 "PARTIAL_CEILING × fraction passed).")
    timeout_s: float = Field(5.0, gt=0, le=600, description="Wall-clock limit of one execution.")
    memory_mb: int = Field(512, gt=0, description="Address-space limit of one execution.")
    workers: int | None = Field(None, ge=1, description="Parallel executions (default: CPU count).")
    min_isolation: Literal["namespaces", "unprivileged", "process"] = Field(
        "namespaces", description="Refuse to run untrusted code on a host that grants less isolation.")

    @property
    def has_partial_credit(self) -> bool:
        return not self.all_or_nothing

    def pass_gap(self) -> float:
        return self.max_score * (1 - PARTIAL_CEILING) if not self.all_or_nothing else self.max_score


class JudgeReward(_RewardBase):
    """Rubric-as-reward: an OpenAI-compatible chat endpoint scores the completion 0..max_points."""

    type: Literal["judge"]
    endpoint: str = Field("http://localhost:8000/v1", description="Base URL of an OpenAI-compatible "
                          "server (e.g. `vllm serve`); /chat/completions is appended.")
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
    api_key_env: str | None = Field(None, description="Environment variable holding the API key.")
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


class LengthPenaltyReward(_RewardBase):
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


class PythonReward(_RewardBase):
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


def __getattr__(name: str) -> Any:
    # The spec union and the type table are derived from the registry (one entry per kind).
    if name in ("RewardSpec", "REWARD_TYPES"):
        from finetune.rewards import registry

        return getattr(registry, name)
    raise AttributeError(name)


# Module-level names of a rendered rewards.py that a reward function must not shadow (builtins too,
# except `format`, which the templates never call so that a format reward may be named `format`).
_RESERVED_NAMES = {"REWARD_FUNCS", "REWARD_WEIGHTS", "REWARD_META", "PARTIAL_CEILING", "disable_caches",
                   "annotations", "concurrent", "dataclasses", "decimal", "hashlib", "json", "jsonschema", "math",
                   "os", "re", "sys", "time", "urllib", "warnings", "rewards_mathpool", "rewards_sandbox",
                   "rewards_answers", "rewards_user"}


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
