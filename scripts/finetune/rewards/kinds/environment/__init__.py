"""The `environment` reward kind: the spec environment's own `get_reward()` for the rollout."""

from __future__ import annotations

from typing import ClassVar, Literal

from finetune.rewards.kind import Gold, Reading, kind
from finetune.rewards.specs import RewardBase, Role


@kind("Environment reward (multi-turn tools)", order=80, helpers=("toolcall",),
      reading=lambda r: Reading(agent=True, episode=True), needs_environment=True,
      # the environment reads the whole row (TRL resets it with every column), no column of this entry's
      columns=lambda r: [],
      gold=lambda r, dataset: Gold(dataset.answer_column, "answer", read=False) if dataset.answer_column else None,
      reasons={},
      fix="the environment's `get_reward()` (the class in the spec's `environment.file`): it decides and logs "
      "no reason",
      example={"name": "solved", "type": "environment"})
class EnvironmentReward(RewardBase):
    """The spec environment's own `get_reward()` for the rollout (TRL's instance, or a replay of the calls)."""

    type: Literal["environment"]
    allowed_roles: ClassVar[tuple[Role, ...]] = ("correctness",)
