"""The `json_match` reward kind: the answer's JSON object against the gold JSON object, field by field."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from finetune.fieldtypes import STRICT_MODEL
from finetune.rewards.kind import Gold, Reading, kind, library_reasons
from finetune.rewards.specs import PARTIAL_CEILING, RewardBase, Role, checked_schema

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


@kind("JSON fields against the gold (json_match)", order=50, helpers=("jsonmatch",), stdlib=("json",),
      packages=("jsonschema==4.26.0",),
      reading=lambda r: Reading(style="json_object", reads_answer=True, extra_keys_forbidden=r.extra_keys == "forbid"),
      columns=lambda r: [("answer_column", r.answer_column)],
      gold=lambda r, dataset: Gold(r.answer_column, "object"),
      # each field's judgement has a field of its own in the spec; a reason `<id>:<field>` names the field at fault
      reasons=library_reasons("jsonmatch", {
          "wrong_value": "`fields.<field>` (match: text | number with tolerance | date with day_first | code | exact)",
          "missing_field": "`required` (a field the gold may lack), or the gold column",
          "hallucinated_key": "`extra_keys: allow`, or name the key in `fields`",
          "hallucinated_value": "the gold column (a field it leaves null)",
          "schema": "`fields.<field>` (the derived shape), `schema` (given), or `extra_keys`",
          "not_strict_json": "none needed when right: json.loads refuses trailing commas (the format role's rule)",
          "only_in_think": "none: the answer after </think> holds no JSON (a refusal or nothing)",
          "several_objects": "none: several different objects are a hedge",
          "no_gold": "`answer_column` (a column holding the gold JSON object)"}),
      fix="`fields` (each field's rule: text / number with tolerance / date / code / exact), "
      "`required`, `extra_keys`; role format: `schema` or the field shapes",
      remedies={"gold_answer_fails": "the gold object, written as the model writes it, fails: check "
                "`answer_column` holds the gold JSON object and each field's rule in `fields` (e.g. `code` for an "
                "id, `number` with a `tolerance`)"},
      probes=("json_in_think_refusal", "json_one_field_wrong", "json_hallucinated_field"),
      example={"name": "fields", "type": "json_match", "answer_column": "gold",
               "fields": {"vendor": "text", "date": "date", "total": {"match": "number", "tolerance": 0.01},
                          "currency": {"match": "code", "values": ["EUR", "USD", "GBP"]},
                          "invoice_number": "code"}})
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
        return checked_schema(v)

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
