"""The render plan: every GRPOConfig value with the reason it has, where the run goes (the topology) and the
dataset's measured lengths — computed by :func:`finetune.config.build.build_plan` before anything is written."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from finetune.placement import Layout
from finetune.variants import Pinned

# Where generation and training run: the layout finetune.placement.decide chose (the launch templates' `topo`).
Topology = Layout

if TYPE_CHECKING:

    from finetune.hardware import Hardware
    from finetune.inspect.gaterecord import GateRecord
    from finetune.memory.recommend import Recommendation
    from finetune.memory.result import Estimate
    from finetune.models import ModelInfo
    from finetune.runlength import RunLength
    from finetune.spec import RunSpec


# ----------------------------------------------------------------------------------------------
# the plan: every value with the reason it has, computed before anything is written

@dataclass
class Setting:
    """One rendered keyword value and why it has that value."""

    value: Any
    reason: str
    source: str = "renderer"  # variant | memory | spec | override | renderer


@dataclass
class DatasetStats:
    """Token lengths measured on the dataset (or estimated when the tokenizer is not local)."""

    rows: int
    tokenized: bool
    prompt_max: int
    prompt_p95: int
    answer_max: int | None
    answer_p95: int | None
    answer_column: str | None
    columns: list[str]


@dataclass
class RenderPlan:
    """Everything a render writes, each GRPOConfig value with its reason: computed before any file is written."""

    spec: RunSpec
    run_dir: Path
    preview: bool
    no_gate: bool
    model_info: ModelInfo
    hardware: Hardware
    topology: Layout  # placement's decision
    recommendation: Recommendation
    estimate: Estimate
    zero_stage: int  # DeepSpeed ZeRO stage: the layout's (0: one process, or plain DDP)
    algorithm: dict[str, Pinned]
    kwargs: dict[str, Setting]  # every GRPOConfig kwarg, in rendering order
    sections: list[tuple[str, list[str]]]
    model_ref: str
    dataset: dict[str, Any]
    peft: dict[str, Any] | None
    quantization: bool
    stats: DatasetStats
    gate: GateRecord | None
    diagnosis: dict[str, Any] | None
    warnings: list[str] = field(default_factory=list)
    run_length: RunLength | None = None  # of the rendered values

    @property
    def generation_batch_size(self) -> int:
        return int(self.kwargs["per_device_train_batch_size"].value * self.topology.training_processes
                * self.kwargs["steps_per_generation"].value)
