"""What the package derives from the reward-kind table :data:`finetune.rewards.kind.KINDS`: the spec union
(:data:`RewardSpec`), the render order, and the reasons a reward logs with what they mean and what changes them.

Each kind is a folder ``rewards/kinds/<type>/`` (its model, its ``@kind(...)`` entry, its template, its notes);
importing :mod:`finetune.rewards.kinds` fills the table. Nothing here lists the kinds.

Per-row reasons: a reward explains each score with a reason id (``<name>/why``); its kind's entry declares every
id it logs with the text and the spec field that changes that judgement (``reasons=``, beside the shared
plumbing's :data:`~finetune.rewards.kind.COMMON_REASONS`); :func:`explain` reads them.
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, Union

from pydantic import Field

from finetune.rewards import kinds, specs  # noqa: F401 (importing kinds fills KINDS: one entry per kind folder)
from finetune.rewards.kind import COMMON_REASONS, KINDS, Reason

TYPE_ORDER = tuple(KINDS)
# a Union built from the registry at import time: `X | Y` spelling cannot express it
if typing.TYPE_CHECKING:
    # what every kind's model shares (name, weight, role, ...); pydantic sees the discriminated union below
    RewardSpec = specs.RewardBase
else:
    RewardSpec = Annotated[Union[tuple(k.spec for k in KINDS.values())], Field(discriminator="type")]  # noqa: UP007
REWARD_TYPES: dict[str, type[Any]] = {t: k.spec for t, k in KINDS.items()}


def explain(reason_id: str, reward_type: str | None) -> tuple[str, str]:
    """(human text, the spec field that changes this judgement or what to do instead) for a reason a reward of
    ``reward_type`` logged. A json_match reason ``<id>:<field>`` names the field at fault: the text and the fix
    name it too. A reason no field answers (``ok`` on a row the reader rejects, ``unexplained``) gets the kind's
    own fix; an id its entry does not declare says so."""
    base, _, field = reason_id.partition(":")
    entry = KINDS.get(reward_type) if reward_type is not None else None
    if entry is None:
        reason = COMMON_REASONS.get(base)
        return (reason.text if reason else f"reason '{reason_id}'"), "read the reward's code (rewards.py)"
    reason = entry.reason(base)
    if reason is None:
        reason = Reason(f"reason '{reason_id}', which the {reward_type} kind's entry does not declare",
                        f"the reward's own code decides it; {entry.fix}")
    text, fix = reason.text, reason.fix
    if field:
        text = f"{text} (field '{field}')"
        fix = fix.replace("<field>", field) if fix else fix
    if fix is None or base == "unexplained":
        fix = entry.fix
    return text, fix


def _union_members() -> tuple[type[Any], ...]:
    return typing.get_args(typing.get_args(RewardSpec)[0])
