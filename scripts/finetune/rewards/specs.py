"""What every reward of a run spec's ``rewards:`` section shares: :class:`RewardBase` (the fields, role and
threshold of every kind) and the composite ordering. Each kind's own model lives in its folder,
``rewards/kinds/<type>/``, declared a kind there by its ``@kind(...)`` entry (:mod:`finetune.rewards.kind`).

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

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from finetune.fieldtypes import STRICT_MODEL
from finetune.rewards.kind import reserved_name

Role = Literal["format", "correctness", "shaping"]
Extract = Literal["answer_tag", "boxed", "hash_answer", "answer_is", "last_number", "none"]
Trailing = Literal["allow", "forbid"]
TRAILING_DOC = ("allow: prose, punctuation, markdown and closing remarks may follow the final answer container "
                "(how instruct models write); forbid: only closing delimiters and punctuation may (a bare format).")

# Partial credit never reaches this fraction of a full pass, so a partly-right answer can never
# outrank a fully right one in the composite, whatever the weights.
PARTIAL_CEILING = 0.5


# the hedge / retraction probes every answer-reading kind withstands (reference doc)
READING_PROBES = ("text_or_hedge", "parenthetical_alternative", "retraction_after_answer", "several_answers")


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
        import keyword

        if not v.isidentifier() or v.startswith("_") or keyword.iskeyword(v):
            raise ValueError(f"'{v}' is not a Python identifier (letters, digits, _; no leading _)")
        if reserved_name(v):
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


CONTAINERS = ("answer_tag", "boxed", "hash_answer")  # extractions that are also an answer layout


def checked_schema(v: dict[str, Any] | None) -> dict[str, Any] | None:
    """An inline JSON Schema, checked when the spec is loaded."""
    if v is not None:
        import jsonschema

        try:
            jsonschema.validators.validator_for(v).check_schema(v)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"not a valid JSON Schema: {exc.message}") from None
    return v


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
