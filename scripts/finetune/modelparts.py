"""The parts of a model's inventory that LoRA sizing reads: its linear groups, the fused parameters PEFT can adapt,
and the shape a model's facts must have for :mod:`finetune.loratargets` (:class:`Inventory`).

Kept apart from :mod:`finetune.models` so that the two modules that use them import in one direction only:
``models`` builds a ``ModelInfo`` (an ``Inventory``) and asks ``loratargets`` what PEFT adapts on it; ``loratargets``
needs nothing of ``models`` but these types.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class LinearGroup:
    """All nn.Linear modules sharing a leaf name and shape: ``count`` × (d_in → d_out)."""

    name: str
    d_in: int
    d_out: int
    count: int
    is_output_head: bool = False
    paths: tuple[str, ...] = ()  # the modules' full names (model.named_modules()), what PEFT matches against


@dataclass(frozen=True)
class FusedParam:
    """A parameter outside any nn.Linear that PEFT can adapt as a ``target_parameter``: a fused MoE experts tensor
    (E × d1 × d2) or a router's weight, by its full name."""

    path: str
    shape: tuple[int, ...]


class Inventory(Hashable, Protocol):
    """What :mod:`finetune.loratargets` reads of a model (``finetune.models.ModelInfo`` has it; hashable, as its
    answers are memoised per model)."""

    @property
    def name(self) -> str: ...

    @property
    def linear_groups(self) -> tuple[LinearGroup, ...]: ...

    @property
    def fused_params(self) -> tuple[FusedParam, ...]: ...

    @property
    def peft_moe_targets(self) -> tuple[tuple[str, str], ...]: ...

    @property
    def peft_moe_fused(self) -> tuple[tuple[str, tuple[str, ...]], ...]: ...
