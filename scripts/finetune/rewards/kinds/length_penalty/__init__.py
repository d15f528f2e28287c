"""The `length_penalty` reward kind: length shaping (<= 0), scaled below the composite ordering's margin."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from finetune.rewards.kind import PlanContext, PlanError, Reading, kind
from finetune.rewards.specs import RewardBase, Role


def _plan_length_penalty(r: LengthPenaltyReward, context: PlanContext) -> dict[str, Any]:
    """Its floor (also its RewardMeta's min; it passes at 0), the ramp's end and the wrapped reward's meta."""
    floor = round(context.floors[r.name], 9)
    out: dict[str, Any] = {"floor": floor, "min": floor, "max": 0.0, "threshold": 0.0}
    if r.mode == "budget":
        assert r.budget is not None  # the model refuses mode budget without one
        out["limit"] = r.budget + r.overlong_buffer
    else:
        out["limit"] = r.max_completion_length or context.max_completion_length
        if r.overlong_buffer > out["limit"]:
            raise PlanError("overlong_buffer", f"{r.overlong_buffer} exceeds the completion limit {out['limit']}",
                            "use a buffer shorter than max_completion_length")
    if r.wraps is not None:
        target = context.metas.get(r.wraps)
        if target is None or target.name == r.name:
            raise PlanError("wraps", f"no other reward named '{r.wraps}'",
                            f"name one of: {', '.join(x.name for x in context.rewards if x.name != r.name)}")
        if target.role == "shaping":
            raise PlanError("wraps", f"'{r.wraps}' is itself a shaping reward", "wrap a format or correctness reward")
        out["wrapped"] = target
    return out


@kind("Length-penalty wrapper", order=110, stdlib=("math",),
      reading=lambda r: Reading(), columns=lambda r: [], gold=lambda r, dataset: None, reasons={},
      fix="`mode` / `budget` / `overlong_buffer` / `max_penalty` (the length it penalises)",
      macro_args=lambda r, meta, planned: (planned["floor"], planned["limit"], planned.get("wrapped")),
      plan=lambda r, context: _plan_length_penalty(r, context),
      packages=("trl==1.16.0",),
      example={"name": "overlong", "type": "length_penalty", "mode": "soft_overlong", "overlong_buffer": 256,
               "weight": 1.0})
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
