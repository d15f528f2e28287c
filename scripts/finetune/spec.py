"""RunSpec: the one file a user (or the agent) writes; every stage reads it.

Validated with pydantic; a bad spec becomes one line naming file:line and the field path
(:func:`load_spec`). Values left as ``None`` are filled by the stage that owns them (per-scale
defaults come from :func:`finetune.memory.recommend`, DESIGN.md's per-scale contract).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from finetune.errors import UserError
from finetune.fieldtypes import STRICT_MODEL
from finetune.rewards.kind import KINDS
from finetune.rewards.registry import RewardSpec
from finetune.yamlio import line_for, load_with_lines

BASE_LEARNING_RATE = 5e-7  # the seed's settled GRPO learning rate (base-recipe contract)
BASE_BETA = 0.01  # the seed's KL coefficient vs the reference policy (base-recipe contract)
BASE_SEED = 3407
MIN_NUM_GENERATIONS = 8  # floor: fewer starves the group-relative baseline


class _Strict(BaseModel):
    model_config = STRICT_MODEL  # unknown keys and NaN/±inf refused (a `.inf` would render as `inf` in train.py)


class DataFilterSpec(_Strict):
    """Written by `finetune data filter` (not by hand): the difficulty-filtered training file."""

    path: str = Field(description="The filtered file train.py trains on (relative to the spec's folder).")
    source: str = Field(description="dataset.path it was filtered from.")
    k: int = Field(ge=2, description="Completions sampled per prompt.")
    keep: list[float] = Field(min_length=2, max_length=2, description="Pass-rate range kept [LO, HI], inclusive.")
    max_prompts: int = Field(ge=1, description="Prompts assessed (the first N of the source).")
    rows: int = Field(ge=1, description="Prompts kept.")
    pass_rates: str = Field(description="data/pass_rates.jsonl (relative to the spec's folder).")
    sha256: str = Field(description="sha256 of the filtered file as written; the gate record binds the file.")
    source_rows: int = Field(ge=1, description="Prompts in the source file.")
    predicted_frac_reward_zero_std: list[float] = Field(min_length=2, max_length=2, description="Predicted "
                                                        "frac_reward_zero_std [before, after] the filter.")
    check_prompts: int = Field(0, ge=0, description="Kept prompts re-sampled (fresh seed) for the 'after' "
                                                    "prediction; 0: predicted in-sample (biased low).")


class HeldoutSpec(_Strict):
    """The held-out prompts `finetune eval` measures success on, before (base) and after training: never trained on,
    never read in Phase 1. Bound by the gate record: changing it after a PASS voids the PASS."""

    prompts: int = Field(64, ge=0, le=100_000, description="Held-out prompts: carved by `config render` from the "
                         "training data (at most a tenth of its rows, none that Phase 1 sampled; train.py leaves them "
                         "out), or the first N of `path`. 0: no held-out split (`finetune eval` then refuses).")
    path: str | None = Field(None, description="A held-out file of your own (the training data's columns); "
                             "without it the split is carved from the training data.")


class JobsSpec(_Strict):
    """Job files `config render` writes for a PASS run (config/sky.yaml, config/hf_job.sh): the person submits them,
    and each stops at the limit set here."""

    engines: list[Literal["skypilot", "hf"]] = Field(min_length=1, description="skypilot: a SkyPilot task (one "
                                                     "node or several, node 0 serving vLLM as launch.slurm does); hf: "
                                                     "a Hugging Face Jobs command (one node, a flavour of the profile)")
    max_hours: float = Field(gt=0, le=720, description="Time limit: the job is stopped after this many hours.")
    max_cost_usd: float | None = Field(None, gt=0, description="Cost limit (HF Jobs: the timeout becomes the "
                                       "smaller of max_hours and this at the flavour's listed price, read at submit "
                                       "time; SkyPilot shows its price before the person confirms).")
    image: str = Field("python:3.12", pattern=r"^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,199}$",
                       description="HF Jobs: the Docker image (python and pip; the pinned packages are installed on "
                       "it).")


class DatasetSpec(_Strict):
    path: str = Field(description="jsonl / parquet file, or a folder saved with datasets.save_to_disk.")
    format: Literal["auto", "jsonl", "parquet", "hf_disk"] = Field(
        "auto", description="auto: from the path (folder → hf_disk, .parquet → parquet, else jsonl).")
    split: str = Field("train", description="Split to train on (hf_disk datasets with several splits).")
    prompt_column: str = Field("prompt", description="Column holding the prompt (plain text or chat messages).")
    answer_column: str | None = Field("answer", description="Gold answer column, if any.")
    tests_column: str | None = Field(None, description="Unit-test column for code tasks.")
    system_prompt: str | None = Field(None, description="Prepended as a system message when the "
                                         "prompt column holds plain strings and the model has a chat template.")
    filter: DataFilterSpec | None = Field(None, description="Set by `finetune data filter`: train on this "
                                             "pass-rate-filtered file instead of `path` (bound into the gate record).")
    heldout: HeldoutSpec = Field(HeldoutSpec(), description="Held-out prompts for `finetune eval` (bound into the "
                                 "gate record).")


class HardwareSpec(_Strict):
    profile: str = Field("h100-80gb", description="Named profile (see finetune.hardware.PROFILES).")
    gpus: int = Field(1, ge=0, description="GPUs per node.")
    nodes: int = Field(1, ge=1, description="Machines. With nodes > 1 the first node serves generation "
                       "(`trl vllm-serve`) and the others train.")
    gpu_memory_gib: float | None = Field(None, gt=0, description="Override the profile's per-GPU memory.")
    vllm_gpus: int | None = Field(None, ge=0, description="GPUs per run given to `trl vllm-serve` in "
                                     "server mode (default: chosen by the renderer when gpus > 1); split "
                                     "tensor × data parallel by vLLM's head rules (references/vllm-layout.md). "
                                     "Several nodes: node 0's gpus.")
    host_cpus: int | None = Field(None, ge=1, description="Logical CPUs of each node (`nproc` there): the "
                                  "reward sandbox's workers per training process are sized from it and the "
                                  "training processes sharing the node; `finetune env check` compares it with "
                                  "the host. Default: read from the host when training starts.")


class LoraSpec(_Strict):
    r: int = Field(16, ge=1, description="LoRA rank.")
    alpha: int = Field(32, ge=1, description="LoRA alpha (scaling = alpha / r).")
    dropout: float = Field(0.05, ge=0, lt=1, description="LoRA dropout.")
    target_modules: list[str] | str = Field("all-linear", description="Modules to adapt, as PEFT reads them: "
                                            "'all-linear' = every linear layer but the output head; a list names "
                                            "modules by name or dotted suffix (q_proj, self_attn.q_proj); any other "
                                            "string is a regular expression over full module names. Checked against "
                                            "the model's linear layers.")

    @field_validator("target_modules")
    @classmethod
    def _target_modules(cls, v: list[str] | str) -> list[str] | str:
        # What needs no model (the names themselves are checked against the model where it is loaded:
        # finetune.models.lora_target_problem, at render and in `finetune memory`)
        import re

        if isinstance(v, str):
            try:
                re.compile(v)
            except re.error as exc:
                raise ValueError(f"not 'all-linear', and not a regular expression either ({exc}); "
                                 "name modules in a list: [q_proj, v_proj]") from None
            return v
        if not v:
            raise ValueError("an empty list adapts nothing: name modules ([q_proj, v_proj]) or use all-linear")
        if any(not name.strip() for name in v):
            raise ValueError("an empty module name: name modules ([q_proj, v_proj]) or use all-linear")
        if any(name.lower() == "all-linear" for name in v):
            raise ValueError("'all-linear' is PEFT's shorthand only as the whole value: write "
                             "`target_modules: all-linear`, not a list")
        return v


class GenerationSpec(_Strict):
    """Sampling settings: used by GRPO rollouts AND by Phase 1 sampling, so the gate sees what training sees."""

    max_prompt_length: int = Field(512, gt=0, description="Longest prompt in tokens (checked against the "
                                   "dataset); vllm_max_model_length = this + max_completion_length.")
    max_completion_length: int = Field(1024, gt=0, description="Completion cap in tokens; checked against the "
                                       "dataset's answer lengths (trl#5697: a 256 cap truncated 97-99%).")
    temperature: float = Field(1.0, gt=0, description="Sampling temperature.")
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling (1.0 = off).")
    top_k: int = Field(0, ge=0, description="0 = disabled.")
    min_p: float | None = Field(None, ge=0, le=1, description="Minimum token probability relative to the "
                                   "top token (null = off).")
    repetition_penalty: float = Field(1.0, gt=0, description="1.0 = off.")


class TrainingSpec(_Strict):
    learning_rate: float = Field(BASE_LEARNING_RATE, gt=0, description="The seed's settled GRPO rate; "
                                 "changing it needs a PASS gate and a healthy diagnosis (base-recipe contract).")
    beta: float = Field(BASE_BETA, ge=0, description="KL coefficient vs the reference policy (grpo); same "
                        "rule as learning_rate. Variants set their own.")
    num_generations: int = Field(8, ge=2, description="Completions per prompt; 8 is a floor (fewer starves "
                                 "the group-relative baseline).")
    per_device_train_batch_size: int | None = Field(None, ge=1, description="null: from "
                                                       "finetune.memory.recommend() for the model's scale class.")
    gradient_accumulation_steps: int | None = Field(None, ge=1, description="null: from "
                                                       "finetune.memory.recommend().")
    num_iterations: int = Field(1, ge=1, description="Policy updates per generation batch (> 1 is off-policy).")
    steps_per_generation: int | None = Field(None, ge=1, description="null: gradient_accumulation_steps "
                                                "(on-policy); GSPO renders 2 × that (off-policy).")
    max_steps: int = Field(-1, description="Stop after N optimiser steps (-1: run num_train_epochs).")
    num_train_epochs: float = Field(1.0, gt=0, description="Passes over the prompts.")
    logging_steps: int = Field(10, ge=1, description="Log every N steps (diagnose reads these; it needs 10 "
                               "log points, which config render checks).")
    warmup_steps: int = Field(10, ge=0, description="Linear warm-up before the constant learning rate; "
                              "config render warns when it is over 20% of the optimiser steps.")
    save_steps: int = Field(200, ge=1, description="Checkpoint every N steps.")
    seed: int = Field(BASE_SEED, description="The seed's reference seed.")
    gradient_checkpointing: bool | None = Field(None, description="null: from finetune.memory.recommend().")
    optimizer: Literal["adamw_torch", "adamw_8bit", "paged_adamw_8bit"] | None = Field(
        None, description="null: from finetune.memory.recommend().")


class BaseSuccessSpec(_Strict):
    prompts: int = Field(16, ge=1, description="Prompts sampled to measure base success.")
    samples_per_prompt: int = Field(16, ge=1, description="Samples per prompt.")
    temperature: float = Field(0.3, gt=0, description="Low temperature: does the model ever succeed?")


class EnvironmentSpec(_Strict):
    """A multi-turn tool environment (TRL's `environment_factory`): one instance per rollout; its public
    methods are the tools, `reset(**row)` starts an episode, an optional `get_reward()` scores it."""

    file: str = Field(description="Python file defining the environment class (relative to the spec's folder); "
                      "copied beside rewards.py as rewards_env.py and bound by the gate.")
    class_: str = Field(alias="class", description="Name of the environment class in that file.")
    # strict: YAML's `true` or a quoted "4" is a mistake, not 1 or 4 rounds
    max_tool_calling_iterations: int = Field(4, ge=1, le=64, strict=True, description="Generate → execute tool "
                                             "calls rounds per rollout (GRPOConfig.max_tool_calling_iterations); "
                                             "every turn and tool result shares generation.max_completion_length.")

    @field_validator("file")
    @classmethod
    def _python_file(cls, v: str) -> str:
        if not v.endswith(".py"):
            raise ValueError("file must be a .py file")
        return v

    @field_validator("class_")
    @classmethod
    def _class_name(cls, v: str) -> str:
        if not v.isidentifier() or v.startswith("_"):
            raise ValueError(f"'{v}' is not a public Python class name")
        return v


class InspectionSpec(_Strict):
    prompts: int = Field(16, ge=1, description="Prompts sampled for Phase 1.")
    per_prompt: int = Field(4, ge=1, description="Completions per prompt.")
    min_read: int = Field(50, ge=50, le=100, description="Samples a reader must judge (the seed: 50-100).")
    held_back_prompts: int = Field(0, ge=0, le=10_000, description="Prompts sampled beyond `prompts` (or, on an "
                                   "import, taken from the imported prompts) and held back from the first reading: "
                                   "after a reward fix, `finetune inspect review RUN --fresh` switches the reading to "
                                   "them, a blind set the fixed reward was not tuned on. Enough for one reading: "
                                   "ceil(min_read / per_prompt). 0: none (a fresh set is then re-sampled).")
    min_recall: float | None = Field(None, gt=0, lt=1, description="A floor on each reward's recall against the "
                                     "reading: a PASS needs its exact one-sided 95 % lower bound at least this (a "
                                     "0.95 floor needs 59 read correct answers, all agreeing). null: report only.")
    min_precision: float | None = Field(None, gt=0, lt=1, description="A floor on each reward's precision against "
                                        "the reading (samples the reward passes that the reader accepts), as "
                                        "min_recall. null: report only.")
    probe_prompts: int = Field(4, ge=1, description="Prompts used for the reward probes.")
    every_steps: int | None = Field(None, ge=1, le=1_000_000, description="Training: the inspection "
                                       "callback in train.py samples, flags and may stop the run every N "
                                       "optimiser steps. null: 5 × training.logging_steps.")
    base_success: BaseSuccessSpec = Field(BaseSuccessSpec(), description="Base-success measurement "
                                          "(RL needs non-zero base success).")


class RunSpec(_Strict):
    name: str = Field(description="Run name (used for folders and reports).")
    model: str = Field(description="Hub id or local path of the policy (e.g. the SFT checkpoint).")
    model_config_path: str | None = Field(None, alias="model_config", description="config.json (or a "
                                             "bundled model name) for memory estimates when `model` is a hub id.")
    dataset: DatasetSpec = Field(description="The prompts (and answer / test columns the rewards read).")
    rewards: list[RewardSpec] = Field(min_length=1, description="Reward functions, composite: a format "
                                      "reward plus a correctness reward (references/reward-functions.md).")
    method: Literal["full", "lora", "qlora"] | None = Field(None, description="null: from "
                                                               "finetune.memory.recommend() for the target.")
    lora: LoraSpec = Field(LoraSpec(), description="Adapter settings when method is lora / qlora.")
    hardware: HardwareSpec = Field(HardwareSpec(), description="The TARGET hardware (validated on any box).")
    variant: Literal["grpo", "dapo", "dr_grpo", "gspo"] = Field("grpo", description="grpo, or a variant "
                                                                "licensed by a diagnosis; MoE → gspo.")
    generation: GenerationSpec = Field(GenerationSpec(), description="Sampling, shared by Phase 1 and training.")
    training: TrainingSpec = Field(TrainingSpec(), description="Optimiser and batch settings.")
    inspection: InspectionSpec = Field(InspectionSpec(), description="Phase 1 sampling and reading.")
    overrides: dict[str, Any] = Field(default_factory=dict, description="Extra GRPOConfig kwargs, by allowlist "
                                      "(config.overrides classifies every field of the installed TRL): logging, "
                                      "save cadence, dataloader workers, evaluation, memory and speed knobs pass; "
                                      "the optimiser's shape (lr_scheduler_*, max_grad_norm, adam_*, ...) needs the "
                                      "learning rate's licence; sampling, the reference model, remote code, hub / "
                                      "trackers, the vLLM server, sharding, compilation, resuming, data order and "
                                      "algorithm fields are refused, naming where each belongs.")
    jobs: JobsSpec | None = Field(None, description="Job files for SkyPilot / Hugging Face Jobs, with the person's "
                                  "time and cost limits (config render writes them for a PASS run).")
    environment: EnvironmentSpec | None = Field(None, description="Multi-turn tool environment (TRL "
                                                "`environment_factory`); score it with a `type: environment` "
                                                "reward (references/reward-functions.md).")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        import re

        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", v):
            raise ValueError("use letters, digits, '.', '_' or '-' (max 64 characters)")
        return v

    @field_validator("model")
    @classmethod
    def _model_name(cls, v: str) -> str:
        # Checked as a local folder before it is taken for a hub id: a name no filesystem can hold
        # (ENAMETOOLONG, NUL) is refused here with one line instead of an OSError later.
        if "\x00" in v or any(len(part.encode("utf-8", "surrogatepass")) > 255 for part in v.split("/")):
            raise ValueError("not a hub id or a path (a NUL, or a path component over 255 bytes)")
        return v

    @model_validator(mode="after")
    def _environment_reward_needs_environment(self) -> RunSpec:
        if self.environment is None and any(KINDS[r.type].needs_environment for r in self.rewards):
            raise ValueError("a `type: environment` reward needs the spec's `environment: {file, class}`")
        return self

    @model_validator(mode="after")
    def _unique_reward_names(self) -> RunSpec:
        seen: set[str] = set()
        for r in self.rewards:
            if r.name in seen:
                raise ValueError(f"duplicate reward name '{r.name}'")
            seen.add(r.name)
        return self

    # Set by load_spec: where the spec came from (relative paths in it resolve against its folder).
    _source: Path | None = None

    @property
    def source(self) -> Path | None:
        return self._source

    def resolve_path(self, value: str) -> Path:
        p = Path(value).expanduser()
        if not p.is_absolute() and self._source is not None:
            p = self._source.parent / p
        return p

    def training_data_path(self) -> Path:
        """The file train.py trains on: the filtered file when `finetune data filter` set one."""
        return self.resolve_path(self.dataset.filter.path if self.dataset.filter else self.dataset.path)

    def filter_binding(self) -> dict[str, Any]:
        """Keyword arguments of hashing.bound_hashes for the dataset filter (empty without one)."""
        if self.dataset.filter is None:
            return {}
        return {"data_filter": self.dataset.filter.model_dump(mode="json"), "filtered_file": self.training_data_path()}

    def sampling_binding(self) -> dict[str, Any]:
        """What the gated samples were drawn with and train.py samples with: the system prompt and the
        generation section (temperature, top_p, top_k, min_p, repetition_penalty, the length caps)."""
        return {"system_prompt": self.dataset.system_prompt, "generation": self.generation.model_dump(mode="json")}

    def inspection_binding(self) -> dict[str, Any]:
        """The inspection section as the gate binds it: training's live hacking stop (every_steps) is part of it."""
        return self.inspection.model_dump(mode="json")

    def heldout_binding(self) -> dict[str, Any]:
        """Keyword arguments of hashing.bound_hashes for the held-out split: its settings and, for a file of its
        own, that file."""
        h = self.dataset.heldout
        return {"heldout": h.model_dump(mode="json"), "heldout_file": self.resolve_path(h.path) if h.path else None}

    def binding(self) -> dict[str, Any]:
        """Keyword arguments of hashing.bound_hashes beyond the reward section: sampling, inspection, the data
        filter and the held-out split."""
        return {"sampling": self.sampling_binding(), "inspection": self.inspection_binding(), **self.filter_binding(),
                **self.heldout_binding()}

    def reward_section(self) -> list[dict[str, Any]]:
        """The reward section exactly as it is bound by the gate (weights included)."""
        return [r.model_dump(mode="json", by_alias=True, exclude={"default_role", "max_score"}) for r in self.rewards]


def _format_error(err: ErrorDetails, lines: dict[tuple[Any, ...], int], path: Path) -> UserError:
    loc = shown_loc(tuple(err["loc"]))
    field = ".".join(f"[{x}]" if isinstance(x, int) else str(x) for x in loc).replace(".[", "[")
    line = line_for(lines, loc)
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
    return UserError(f"{field or '(top level)'}: {msg}", where=where, fix=fix)


def shown_loc(loc: tuple[Any, ...], model: Any = None) -> tuple[Any, ...]:
    """A pydantic error location as the spec file spells it: the tag pydantic inserts after a discriminated
    union (``rewards.0.python.file``: 'python' names the member, it is no key of the file) is dropped. Walks
    the models' annotations, so every union member — every reward kind — is read the same way."""
    import typing

    out: list[Any] = []
    current: Any = RunSpec if model is None else model
    for part in loc:
        members = _tagged_members(current)
        if members is not None and isinstance(part, str) and part in members:
            current = members[part]  # the tag: the next part is a field of that member
            continue
        out.append(part)
        current = _step(current, part, typing)
    return tuple(out)


def _tagged_members(annotation: Any) -> dict[str, Any] | None:
    """{tag: model} when ``annotation`` is a union discriminated by a Literal field (pydantic's tagged union)."""
    import typing

    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    members = [a for a in typing.get_args(annotation) if a is not type(None)]
    if len(members) < 2 or not all(isinstance(m, type) and issubclass(m, BaseModel) for m in members):
        return None
    out: dict[str, Any] = {}
    for m in members:
        tag = m.model_fields.get("type")
        if tag is None or typing.get_origin(tag.annotation) is not Literal:
            return None
        out.update({value: m for value in typing.get_args(tag.annotation)})
    return out


def _step(annotation: Any, part: Any, typing: Any) -> Any:
    """The annotation of ``part`` (a field name or an index) inside ``annotation``; None when unknown."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if len(args) == 1 and typing.get_origin(annotation) not in (list, tuple, dict):  # Optional[X]
        return _step(args[0], part, typing)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel) and isinstance(part, str):
        for name, info in annotation.model_fields.items():
            if part in (name, info.alias):
                return info.annotation
        return None
    if typing.get_origin(annotation) in (list, tuple) and isinstance(part, int) and args:
        return args[0]
    if typing.get_origin(annotation) is dict and len(args) == 2:
        return args[1]
    return None


def parse_spec(data: Any, path: Path, lines: dict[tuple[Any, ...], int] | None = None) -> RunSpec:
    if not isinstance(data, dict):
        raise UserError("the run spec must be a YAML mapping", where=str(path), fix="see examples/spec.yaml")
    from finetune.literals import check_text

    unencodable = check_text(data)
    if unencodable:  # a lone surrogate ("\ud800") is a str no file can hold: refuse before anything is written
        raise UserError(f"{unencodable[0]}: a lone surrogate (\\ud800-\\udfff) is not text", where=str(path),
                        fix="remove the escape or write the character it was meant to be")
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


# ----------------------------------------------------------------------------------------------
# references/run-spec.md, generated from the field descriptions above (`finetune docs`)

def _type_name(annotation: Any) -> str:
    import typing

    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        return " \\| ".join(repr(a).replace("'", "") for a in args)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        parts = [a for a in args if a is not type(None)]
        if parts and all(isinstance(a, type) and issubclass(a, BaseModel) for a in parts) and len(parts) > 1:
            return "reward (by `type`, below)"
        inner = " \\| ".join(_type_name(a) for a in parts)
        return f"{inner} \\| null" if len(parts) < len(args) else inner
    if origin in (list, tuple):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return "mapping"
    if origin is typing.Annotated:
        return _type_name(args[0])
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    return getattr(annotation, "__name__", str(annotation))


def _default_text(f: FieldInfo) -> str:
    if f.is_required():
        return "**required**"
    value = f.get_default(call_default_factory=True)  # the default, or what its factory makes
    if isinstance(value, BaseModel):
        return "(section)"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if value == {}:
        return "{}"
    return f"`{value}`"


def _field_rows(model: type[BaseModel], prefix: str, rows: list[str], nested: list[tuple[str, type]]) -> None:
    for name, f in model.model_fields.items():
        if name in ("default_role", "max_score"):
            continue
        key = f.alias or name
        path = f"{prefix}{key}"
        ann = f.annotation
        sub = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
        if sub is not None:
            nested.append((path, sub))
        desc = (f.description or "").replace("|", "\\|").replace("\n", " ")
        rows.append(f"| `{path}` | {_type_name(ann)} | {_default_text(f)} | {desc} |")


def run_spec_doc() -> str:
    """references/run-spec.md: every run-spec field with its type, default and description."""
    import typing

    out = ["# Run spec reference (`spec.yaml`)", "",
           "<!-- generated by finetune.spec.run_spec_doc(); run `finetune docs` — do not edit -->", "",
           "One YAML file per run; every stage reads it (`finetune rewards render`, `finetune inspect ...`,",
           "`finetune config render`, `finetune memory`). Unknown fields are errors, reported as one line with",
           "the file, line and field path. A documented example ships as `examples/spec.yaml`.",
           "Fields left `null` are filled by the stage that owns them: per-scale values (method, batch,",
           "accumulation, gradient checkpointing, optimizer) come from `finetune.memory.recommend()`",
           f"(per-scale contract). Base recipe: learning_rate {BASE_LEARNING_RATE:g}, beta {BASE_BETA:g}, "
           f"seed {BASE_SEED}, "
           f"num_generations ≥ {MIN_NUM_GENERATIONS}.", ""]
    rows: list[str] = []
    nested: list[tuple[str, type]] = []
    _field_rows(RunSpec, "", rows, nested)
    out += ["## Top level", "", "| field | type | default | description |", "|---|---|---|---|", *rows, ""]
    while nested:
        path, model = nested.pop(0)
        rows = []
        more: list[tuple[str, type]] = []
        _field_rows(model, f"{path}.", rows, more)
        nested = more + nested
        out += [f"## `{path}`", "", "| field | type | default | description |", "|---|---|---|---|", *rows, ""]
    out += ["## `rewards[]` (one entry per reward, chosen by `type`)", "",
            "Full reward implementations and their behaviour: `references/reward-functions.md`.", ""]
    union = typing.get_args(typing.get_args(RewardSpec)[0])
    for model in union:
        tag = typing.get_args(model.model_fields["type"].annotation)[0]
        rows = []
        _field_rows(model, "rewards[].", rows, [])
        rows = [r for r in rows if not r.startswith("| `rewards[].type` |")]
        role_field = model.model_fields.get("default_role")
        role = role_field.default if role_field is not None else getattr(model, "default_role", "correctness")
        out += [f"### `type: {tag}` (default role: {role})", "", "| field | type | default | description |",
                "|---|---|---|---|", *rows, ""]
    return "\n".join(out).rstrip() + "\n"
