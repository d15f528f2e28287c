"""RunSpec: the one file a user (or the agent) writes; every stage reads it.

Validated with pydantic; a bad spec becomes one line naming file:line and the field path
(:func:`load_spec`). Values left as ``None`` are filled by the stage that owns them (per-scale
defaults come from :func:`finetune.memory.recommend`, DESIGN.md contract 8).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from finetune.errors import UserError
from finetune.rewards.specs import RewardSpec
from finetune.yamlio import line_for, load_with_lines

BASE_LEARNING_RATE = 5e-7  # the seed's settled GRPO learning rate (contract 7)
BASE_BETA = 0.01  # the seed's KL coefficient vs the reference policy (contract 7)
BASE_SEED = 3407
MIN_NUM_GENERATIONS = 8  # floor: fewer starves the group-relative baseline


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class DatasetSpec(_Strict):
    path: str = Field(description="jsonl / parquet file, or a folder saved with datasets.save_to_disk.")
    format: Literal["auto", "jsonl", "parquet", "hf_disk"] = "auto"
    split: str = "train"
    prompt_column: str = "prompt"
    answer_column: Optional[str] = Field("answer", description="Gold answer column, if any.")
    tests_column: Optional[str] = Field(None, description="Unit-test column for code tasks.")
    system_prompt: Optional[str] = Field(None, description="Prepended as a system message when the "
                                         "prompt column holds plain strings and the model has a chat template.")


class HardwareSpec(_Strict):
    profile: str = Field("h100-80gb", description="Named profile (see finetune.hardware.PROFILES).")
    gpus: int = Field(1, ge=0, description="GPUs per node.")
    nodes: int = Field(1, ge=1)
    gpu_memory_gib: Optional[float] = Field(None, gt=0, description="Override the profile's per-GPU memory.")
    vllm_gpus: Optional[int] = Field(None, ge=0, description="GPUs per run given to `trl vllm-serve` in "
                                     "server mode (default: chosen by the renderer when gpus > 1).")


class LoraSpec(_Strict):
    r: int = Field(16, ge=1)
    alpha: int = Field(32, ge=1)
    dropout: float = Field(0.05, ge=0, lt=1)
    target_modules: list[str] | str = "all-linear"


class GenerationSpec(_Strict):
    """Sampling settings: used by GRPO rollouts AND by Phase 1 sampling, so the gate sees what training sees."""

    max_prompt_length: int = Field(512, gt=0)
    max_completion_length: int = Field(1024, gt=0)
    temperature: float = Field(1.0, gt=0)
    top_p: float = Field(1.0, gt=0, le=1)
    top_k: int = Field(0, ge=0, description="0 = disabled.")
    min_p: Optional[float] = Field(None, ge=0, le=1)
    repetition_penalty: float = Field(1.0, gt=0)


class TrainingSpec(_Strict):
    learning_rate: float = Field(BASE_LEARNING_RATE, gt=0)
    beta: float = Field(BASE_BETA, ge=0)
    num_generations: int = Field(8, ge=2)
    per_device_train_batch_size: Optional[int] = Field(None, ge=1)
    gradient_accumulation_steps: Optional[int] = Field(None, ge=1)
    num_iterations: int = Field(1, ge=1)
    steps_per_generation: Optional[int] = Field(None, ge=1)
    max_steps: int = Field(-1)
    num_train_epochs: float = Field(1.0, gt=0)
    logging_steps: int = Field(10, ge=1)
    save_steps: int = Field(200, ge=1)
    seed: int = BASE_SEED
    gradient_checkpointing: Optional[bool] = None
    optimizer: Optional[Literal["adamw_torch", "adamw_8bit", "paged_adamw_8bit"]] = None


class BaseSuccessSpec(_Strict):
    prompts: int = Field(16, ge=1)
    samples_per_prompt: int = Field(16, ge=1)
    temperature: float = Field(0.3, gt=0)


class InspectionSpec(_Strict):
    prompts: int = Field(16, ge=1, description="Prompts sampled for Phase 1.")
    per_prompt: int = Field(4, ge=1, description="Completions per prompt.")
    min_read: int = Field(50, ge=50, le=100, description="Samples a reader must judge (the seed: 50-100).")
    probe_prompts: int = Field(4, ge=1)
    base_success: BaseSuccessSpec = BaseSuccessSpec()


class RunSpec(_Strict):
    name: str = Field(description="Run name (used for folders and reports).")
    model: str = Field(description="Hub id or local path of the policy (e.g. the SFT checkpoint).")
    model_config_path: Optional[str] = Field(None, alias="model_config", description="config.json (or a "
                                             "bundled model name) for memory estimates when `model` is a hub id.")
    dataset: DatasetSpec
    rewards: list[RewardSpec] = Field(min_length=1)
    method: Optional[Literal["full", "lora", "qlora"]] = None
    lora: LoraSpec = LoraSpec()
    hardware: HardwareSpec = HardwareSpec()
    variant: Literal["grpo", "dapo", "dr_grpo", "gspo"] = "grpo"
    generation: GenerationSpec = GenerationSpec()
    training: TrainingSpec = TrainingSpec()
    inspection: InspectionSpec = InspectionSpec()
    overrides: dict[str, Any] = Field(default_factory=dict, description="Extra GRPOConfig kwargs, "
                                      "validated against the installed TRL.")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        import re

        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", v):
            raise ValueError("use letters, digits, '.', '_' or '-' (max 64 characters)")
        return v

    @model_validator(mode="after")
    def _unique_reward_names(self) -> "RunSpec":
        seen: set[str] = set()
        for r in self.rewards:
            if r.name in seen:
                raise ValueError(f"duplicate reward name '{r.name}'")
            seen.add(r.name)
        return self

    # Set by load_spec: where the spec came from (relative paths in it resolve against its folder).
    _source: Optional[Path] = None

    @property
    def source(self) -> Optional[Path]:
        return self._source

    def resolve_path(self, value: str) -> Path:
        p = Path(value).expanduser()
        if not p.is_absolute() and self._source is not None:
            p = self._source.parent / p
        return p

    def reward_section(self) -> list[dict[str, Any]]:
        """The reward section exactly as it is bound by the gate (weights included)."""
        return [r.model_dump(mode="json", by_alias=True, exclude={"default_role", "max_score"}) for r in self.rewards]


def _format_error(err: dict[str, Any], lines: dict[tuple, int], path: Path) -> UserError:
    loc = tuple(x for x in err["loc"])
    # pydantic puts the union tag (e.g. 'format') into the loc of discriminated unions; drop it for display
    shown = [str(x) for x in loc]
    field = ".".join(f"[{x}]" if isinstance(x, int) else str(x) for x in loc if not _is_tag(x)).replace(".[", "[")
    line = line_for(lines, tuple(x for x in loc if not _is_tag(x)))
    where = f"{path}:{line}" if line else str(path)
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = "unknown field"
        fix = "remove it or check its spelling against references/run-spec.md"
    elif err["type"] == "missing":
        fix = "add this field"
    elif err["type"] == "union_tag_invalid":
        fix = "use one of the reward types listed in references/reward-functions.md"
    else:
        fix = "correct the value"
    del shown
    return UserError(f"{field or '(top level)'}: {msg}", where=where, fix=fix)


_TAGS = {"format", "exact_match", "math", "json_schema", "unit_tests", "judge", "length_penalty"}


def _is_tag(x: Any) -> bool:
    return isinstance(x, str) and x in _TAGS


def parse_spec(data: Any, path: Path, lines: dict[tuple, int] | None = None) -> RunSpec:
    if not isinstance(data, dict):
        raise UserError("the run spec must be a YAML mapping", where=str(path), fix="see examples/spec.yaml")
    try:
        spec = RunSpec.model_validate(data)
    except ValidationError as exc:
        raise _format_error(exc.errors()[0], lines or {}, path) from None
    spec._source = path.resolve()
    return spec


def load_spec(path: str | Path) -> RunSpec:
    """Read and validate a run spec; any problem → UserError naming file:line and field path."""
    path = Path(path)
    data, lines = load_with_lines(path)
    return parse_spec(data, path, lines)
