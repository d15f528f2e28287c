"""What an estimate sizes: one GRPO configuration (:class:`Knobs`), the layout it runs on, and the resolved inputs
every component and moment function reads (:class:`Sizing`, :class:`Parts`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from finetune.errors import UserError
from finetune.memory.formulas import METHODS, OPTIMIZERS, TRL_SERVER_DEFAULT_UTIL, VLLM_MODES, gib
from finetune.memory.result import Component, Phase, VllmBudget
from finetune.placement import Layout, Request

if TYPE_CHECKING:
    from finetune.hardware import Hardware
    from finetune.models import ModelInfo
    from finetune.spec import RunSpec


def _check_choice(value: Any, allowed: Iterable[str], where: str) -> None:
    if value not in allowed:
        raise UserError(f"{where} '{value}' is not one of {', '.join(allowed)}", where=where,
                        fix="use one of: " + ", ".join(allowed))


def default_model_dtype(method: str, zero_stage: int, hardware: Hardware) -> str:
    """Dtype the policy is loaded in (GRPOConfig.model_init_kwargs["dtype"]).

    TRL 1.16 loads float32 unless told otherwise. LoRA / QLoRA train only fp32 adapters, so bf16 base
    weights halve memory at no cost. Full fine-tuning under DeepSpeed keeps fp32 master weights in the
    optimizer, so bf16 is right there too; plain DDP full fine-tuning needs fp32 weights (bf16 autocast
    for compute): at lr 5e-7 an AdamW step (≈ lr) is far below bf16's resolution (2^-8 relative), so a
    bf16-weight model would silently not learn.
    """
    if hardware.profile.is_cpu:
        return "float32"
    if method == "full" and zero_stage == 0:
        return "float32"
    return "bfloat16"


@dataclass(frozen=True)
class Knobs:
    """What :func:`estimate` sizes besides the model and the hardware: one GRPO configuration.

    Names are GRPOConfig's (``optimizer`` is its ``optim``, ``zero_stage`` the DeepSpeed stage, ``method``
    full / lora / qlora); ``per_device_train_batch_size`` counts completions per micro-batch (TRL ≥ 0.18).
    ``None`` leaves a value to the estimator: ``steps_per_generation`` → gradient_accumulation_steps,
    ``vllm_gpu_memory_utilization`` → TRL's 0.3 (colocate) / `trl vllm-serve`'s 0.9 (server), ``model_dtype`` →
    :func:`default_model_dtype`. ``use_vllm``, ``vllm_mode``, ``vllm_gpus``, ``vllm_tensor_parallel_size`` and
    ``zero_stage`` are a request to :func:`finetune.placement.arrange` (:func:`request_of`), which lays the run out;
    an estimate of a layout already decided reads the layout instead. ``fused_lm_head=False`` sizes a trainer that
    materialises the completion logits (TRL before 1.x, other frameworks) instead of TRL 1.16's chunked head;
    ``cast_lm_head_to_fp32`` is GRPOConfig's (the head's weight and tiles in fp32). A rendered run's head is
    :func:`rendered_lm_head`'s. ``lora_target_modules`` is PEFT's ``target_modules``
    (:meth:`ModelInfo.lora_targets`).
    """

    method: str = "lora"
    num_generations: int = 8
    per_device_train_batch_size: int = 8
    gradient_accumulation_steps: int = 4
    steps_per_generation: int | None = None
    max_prompt_length: int = 512
    max_completion_length: int = 1024
    beta: float = 0.01
    use_vllm: bool | None = None
    vllm_mode: str = "colocate"
    vllm_gpu_memory_utilization: float | None = None
    vllm_enable_sleep_mode: bool = False
    vllm_tensor_parallel_size: int = 1
    vllm_gpus: int | None = None
    gradient_checkpointing: bool = True
    optimizer: str = "adamw_torch"
    zero_stage: int = 0
    lora_r: int = 16
    lora_target_modules: str | list[str] | tuple[str, ...] = "all-linear"
    model_dtype: str | None = None
    fused_lm_head: bool = True
    cast_lm_head_to_fp32: bool = False


class LmHead(TypedDict):
    """The :class:`Knobs` fields that decide the LM head's memory."""

    fused_lm_head: bool
    cast_lm_head_to_fp32: bool


def rendered_lm_head(overrides: Mapping[str, Any]) -> LmHead:
    """The LM head a rendered run computes its log-probs with, as :class:`Knobs` values: the one source that
    config render's estimate, :func:`recommend`'s candidates and every suggestion size.

    TRL 1.16's GRPOTrainer patches its fused, chunked head onto every policy (grpo_trainer.py calls
    ``add_fused_lm_head`` unconditionally; ``use_liger_kernel`` keeps it, refusing Liger's fused cross-entropy),
    so ``fused_lm_head`` is always True; ``cast_lm_head_to_fp32`` is the spec's override (GRPOConfig default False).
    """
    return {"fused_lm_head": True, "cast_lm_head_to_fp32": overrides.get("cast_lm_head_to_fp32") is True}


def workload_of(spec: RunSpec) -> Knobs:
    """The part of a spec :func:`recommend` keeps fixed (completions per prompt, lengths, KL, the LoRA rank and
    target modules, the LM head the rendered run uses)."""
    g, t = spec.generation, spec.training
    return Knobs(num_generations=t.num_generations, max_prompt_length=g.max_prompt_length,
                 max_completion_length=g.max_completion_length, beta=t.beta, lora_r=spec.lora.r,
                 lora_target_modules=spec.lora.target_modules, **rendered_lm_head(spec.overrides))


def request_of(k: Knobs, hardware: Hardware) -> Request:
    """What ``k`` pins of the layout, as :func:`finetune.placement.arrange` reads it (a server with no GPU count
    takes the spec's ``hardware.vllm_gpus`` there)."""
    del hardware  # arrange() reads the spec's hardware.vllm_gpus for a server given no count
    return Request(use_vllm=k.use_vllm, vllm_mode=k.vllm_mode if k.use_vllm is not False else None,
                   vllm_gpus=k.vllm_gpus, vllm_tensor_parallel_size=k.vllm_tensor_parallel_size,
                   zero_stage=k.zero_stage)


@dataclass(frozen=True)
class Sizing:
    """An estimate's inputs with the estimator's defaults filled in: what every component function reads."""

    model: ModelInfo
    layout: Layout
    k: Knobs  # as given (its layout fields are the layout's)
    spg: int  # steps_per_generation
    util: float  # vllm_gpu_memory_utilization
    dtype: str  # model_dtype: what the policy is loaded in

    @property
    def hardware(self) -> Hardware:
        return self.layout.hardware

    @property
    def cpu(self) -> bool:
        return self.layout.cpu

    @property
    def use_vllm(self) -> bool:
        return self.layout.use_vllm

    @property
    def server(self) -> bool:
        return self.layout.server

    @property
    def n_train(self) -> int:
        return self.layout.training_processes

    @property
    def shards(self) -> int:
        """N: the training processes DeepSpeed partitions over (1 without ZeRO)."""
        return self.layout.shards

    @property
    def zero3(self) -> bool:
        """ZeRO-3 over several processes: the weights themselves are partitioned."""
        return self.layout.zero3

    @property
    def shard_note(self) -> str:
        return f" / {self.shards} GPUs" if self.zero3 else ""

    @property
    def wbytes(self) -> int:
        return 2 if self.dtype == "bfloat16" else 4

    @property
    def seq_len(self) -> int:
        return self.k.max_prompt_length + self.k.max_completion_length

    @property
    def round_seqs(self) -> int:
        """Completions one training process generates per round."""
        return self.k.per_device_train_batch_size * self.spg


def check_knobs(k: Knobs) -> None:
    _check_choice(k.method, METHODS, "method")
    _check_choice(k.optimizer, OPTIMIZERS, "optimizer")
    if k.use_vllm is not False:
        _check_choice(k.vllm_mode, VLLM_MODES, "vllm_mode")
    for name in ("per_device_train_batch_size", "gradient_accumulation_steps", "num_generations", "max_prompt_length",
                 "max_completion_length", "vllm_tensor_parallel_size", "lora_r"):
        v = getattr(k, name)
        if int(v) < 1:
            raise UserError(f"{name} must be ≥ 1 (got {v})", where=name, fix="use a positive value")


def resolve(model: ModelInfo, layout: Layout, k: Knobs) -> Sizing:
    """``k`` checked on ``layout``, with what it leaves to the estimator filled in (see :class:`Knobs`)."""
    check_knobs(k)
    if layout.cpu and k.use_vllm:
        raise UserError("vLLM needs a GPU", where="use_vllm", fix="set use_vllm false with the cpu profile")
    util = k.vllm_gpu_memory_utilization
    if util is None:
        util = TRL_SERVER_DEFAULT_UTIL if layout.server else 0.3
    if not 0 < util <= 1:
        raise UserError(f"vllm_gpu_memory_utilization {util}", where="vllm_gpu_memory_utilization",
                        fix="a fraction in (0, 1]")
    dtype = k.model_dtype or default_model_dtype(k.method, layout.zero_stage, layout.hardware)
    _check_choice(dtype, ("bfloat16", "float32"), "model_dtype")
    return Sizing(model, layout, k, k.steps_per_generation or k.gradient_accumulation_steps, util, dtype)


@dataclass
class Parts:
    """What the component functions find: the estimate's lines, warnings, problems and vLLM budget."""

    components: list[Component] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    vllm: VllmBudget | None = None

    def add(self, key: str, label: str, n_bytes: float, formula: str, phase: Phase) -> None:
        self.components.append(Component(key, label, gib(n_bytes), formula, phase))

    def gib_of(self, *keys: str) -> float:
        return sum(c.gib for c in self.components if c.key in keys)
