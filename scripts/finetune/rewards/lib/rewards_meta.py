"""What one reward is, as the renderer decided it — copied verbatim beside rewards.py as ``rewards_meta.py``.

Standalone (stdlib only): the training machine needs nothing of the plugin. ``finetune rewards render`` writes one
:class:`RewardMeta` per reward into rewards.py (``REWARD_META``, in spec order); Phase 1 (score, flags, probes,
the gate), train.py, the inspection callback (watch.py) and ``finetune diagnose`` read them. Nothing else derives
a reward's role, pass threshold, range or flags from the spec again: the renderer computes each value once.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

ROLES = ("format", "correctness", "shaping")


@dataclass(frozen=True)
class RewardMeta:
    """One reward: its name (TRL logs ``rewards/<name>/mean``), kind, role, weight in the composite, the score at
    or above which it passes, its declared range, whether it is gated on the format rewards (a correctness
    reward scoring 0 on a completion that fails one) and whether it scores an environment's episode rather than
    the completion's text (the text-only checks do not apply to it)."""

    # read by pydantic only (references/formats.md, `finetune.formats`): the field docstrings below describe them
    __pydantic_config__ = {"use_attribute_docstrings": True}

    name: str
    """the reward's function name (TRL logs `rewards/<name>/mean`)"""
    type: str
    """its kind (`references/reward-functions.md`)"""
    role: str
    """`format`, `correctness` or `shaping`"""
    weight: float
    """its weight in the composite (`REWARD_WEIGHTS`)"""
    threshold: float
    """the score at or above which it passes"""
    min: float
    """its declared lowest score"""
    max: float
    """its declared highest score"""
    gated: bool
    """a correctness reward that scores 0 on a completion failing a format reward"""
    episode: bool
    """it scores an environment's episode, so the text-only checks skip it"""

    def __post_init__(self) -> None:
        problem = _problem(self)
        if problem is not None:
            raise ValueError(f"reward '{self.name}': {problem}")

    def passes(self, value: float | None) -> bool:
        """A score passes when it is a finite number at or above the threshold."""
        return value is not None and math.isfinite(value) and value >= self.threshold - 1e-9

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def of(cls, source: Any) -> RewardMeta:
        """The RewardMeta ``source`` holds: a mapping with these keys (other keys ignored: a score report's reward
        entry adds its statistics) or an object with these attributes (another copy of this class: the run folder's
        rewards_meta.py loaded with its rewards.py). Raises ValueError naming what is missing or wrong."""
        names = [f.name for f in fields(cls)]
        get = source.get if isinstance(source, dict) else (lambda key, default=None: getattr(source, key, default))
        missing = [n for n in names if get(n, _MISSING) is _MISSING]
        if missing:
            raise ValueError(f"not a reward's meta: no {', '.join(missing)}")
        values: dict[str, Any] = {n: get(n) for n in names}
        return cls(**values)


_MISSING = object()


def _problem(m: RewardMeta) -> str | None:
    """What is wrong with ``m``'s values (a hand-edited rewards.py or score report), or None."""
    if not isinstance(m.name, str) or not m.name.isidentifier():
        return f"name {m.name!r} is not a Python identifier"
    if not isinstance(m.type, str) or not m.type:
        return f"type {m.type!r} is not a reward type"
    if m.role not in ROLES:
        return f"role {m.role!r} is not one of {', '.join(ROLES)}"
    for key in ("weight", "threshold", "min", "max"):
        value = getattr(m, key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return f"{key} {value!r} is not a finite number"
    if m.min > m.max:
        return f"min {m.min} is above max {m.max}"
    for key in ("gated", "episode"):
        if not isinstance(getattr(m, key), bool):
            return f"{key} {getattr(m, key)!r} is not true or false"
    return None
