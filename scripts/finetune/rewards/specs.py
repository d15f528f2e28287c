"""Run-spec schema of the ``rewards:`` section (one model per reward type).

Each reward has a role (DESIGN.md contract 3): ``format``, ``correctness`` or ``shaping``, and a pass
threshold (default: the reward's maximum). The gate maps reader verdicts to rewards by role.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

Role = Literal["format", "correctness", "shaping"]
Extract = Literal["answer_tag", "boxed", "hash_answer", "last_number", "none"]


class _RewardBase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Python identifier; TRL logs the reward as rewards/<name>/mean.")
    weight: float = Field(1.0, description="Weight in GRPOConfig.reward_weights.")
    role: Optional[Role] = Field(None, description="format | correctness | shaping (default by type).")
    threshold: Optional[float] = Field(None, description="Score at/above which the reward 'passes' "
                                       "(default: the reward's maximum).")

    @field_validator("name")
    @classmethod
    def _identifier(cls, v: str) -> str:
        if not v.isidentifier() or v.startswith("_"):
            raise ValueError(f"'{v}' is not a Python identifier (letters, digits, _; no leading _)")
        return v

    default_role: Role = "correctness"
    max_score: float = 1.0

    @property
    def effective_role(self) -> Role:
        return self.role or self.default_role

    @property
    def pass_threshold(self) -> float:
        return self.max_score if self.threshold is None else self.threshold


class FormatReward(_RewardBase):
    type: Literal["format"]
    pattern: Literal["answer_tag", "think_answer", "boxed", "hash_answer", "json_object"] = "answer_tag"
    prefilled_think: bool = Field(False, description="The chat template already opened <think> "
                                  "(trl#6966), so the completion starts inside it.")
    default_role: Role = "format"


class ExactMatchReward(_RewardBase):
    type: Literal["exact_match"]
    answer_column: str = "answer"
    extract: Extract = "answer_tag"
    normalize: list[Literal["strip", "whitespace", "case", "numeric"]] = ["strip", "whitespace", "numeric"]


class MathReward(_RewardBase):
    type: Literal["math"]
    answer_column: str = "answer"
    extract: Literal["boxed", "answer_tag", "any"] = "any"
    timeout_s: float = Field(2.0, gt=0)
    workers: int = Field(2, ge=1)


class JsonSchemaReward(_RewardBase):
    type: Literal["json_schema"]
    schema_: Optional[dict[str, Any]] = Field(None, alias="schema")
    schema_column: Optional[str] = None
    partial_credit: bool = False
    max_bytes: int = Field(100_000, gt=0)
    max_depth: int = Field(64, gt=0)


class UnitTestReward(_RewardBase):
    type: Literal["unit_tests"]
    tests_column: str = "tests"
    test_format: Literal["stdin_stdout", "function_call", "assert"] = "assert"
    all_or_nothing: bool = False
    timeout_s: float = Field(5.0, gt=0)
    memory_mb: int = Field(512, gt=0)
    workers: Optional[int] = Field(None, ge=1)
    min_isolation: Literal["namespaces", "unprivileged", "process"] = "namespaces"


class JudgeReward(_RewardBase):
    type: Literal["judge"]
    endpoint: str = "http://localhost:8000/v1"
    model: str
    rubric: str
    max_points: int = Field(10, ge=1)
    timeout_s: float = Field(30.0, gt=0)
    retries: int = Field(2, ge=0)
    concurrency: int = Field(8, ge=1)
    cache: bool = True


class LengthPenaltyReward(_RewardBase):
    type: Literal["length_penalty"]
    mode: Literal["soft_overlong", "budget"] = "soft_overlong"
    wraps: Optional[str] = Field(None, description="Name of the reward this penalty is applied to.")
    max_completion_length: Optional[int] = Field(None, gt=0)
    overlong_buffer: int = Field(64, gt=0)
    budget: Optional[int] = Field(None, gt=0)
    default_role: Role = "shaping"
    max_score: float = 0.0


RewardSpec = Annotated[
    Union[FormatReward, ExactMatchReward, MathReward, JsonSchemaReward, UnitTestReward, JudgeReward,
          LengthPenaltyReward],
    Field(discriminator="type"),
]
