"""The `json_schema` reward kind: the completion's JSON validates against a schema (jsonschema)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from finetune.rewards.kind import Gold, Reading, kind
from finetune.rewards.specs import PARTIAL_CEILING, RewardBase, Role, checked_schema


@kind("JSON-schema validation", order=40, imports=("jsonschema",), stdlib=("json",), helpers=("answers",),
      reading=lambda r: Reading(style="json_object"),
      columns=lambda r: [("schema_column", r.schema_column)] if r.schema_column else [],
      # it compares with no gold; the probes take the right object from the dataset's answer column
      gold=lambda r, dataset: Gold(dataset.answer_column, "object", read=False) if dataset.answer_column else None,
      reasons={},
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
                          "required": ["name", "age"]}})
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
        return checked_schema(v)

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
