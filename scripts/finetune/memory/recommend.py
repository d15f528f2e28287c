"""The per-scale keyword values: :func:`recommend` is THE one source of method, micro-batch, accumulation,
vLLM share, sleep mode, checkpointing, optimizer and ZeRO stage, each with a reason from the estimate; the
renderer and references/grpo-memory.md both call it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from finetune.hardware import Hardware
from finetune.loratargets import is_all_linear
from finetune.memory.estimate import Knobs, _check_choice, _round_up, _suggestions, estimate, lora_targets_text
from finetune.memory.formulas import (
    METHODS,
    PROMPTS_PER_STEP,
    TRL_SERVER_DEFAULT_UTIL,
    VLLM_OVERHEAD_GIB,
    VLLM_SERVER_BATCHED_TOKENS,
    gib,
    kv_cache_bytes,
    vllm_activation_bytes,
)
from finetune.memory.result import Estimate
from finetune.models import ModelInfo
from finetune.vllm_layout import VllmLayout, split_generation_gpus, tp_choices


@dataclass(frozen=True)
class Recommendation:
    """Per-scale keyword values for a model on a hardware setup, each with a reason from the estimate.

    THE one source of these values (DESIGN.md's per-scale contract): the renderer writes them into the GRPOConfig
    and references/grpo-memory.md tabulates them. ``fits`` is False when nothing tried fits; the values
    are then the most memory-saving configuration tried, and the reasons say by how much it misses.
    """

    method: str
    per_device_train_batch_size: int
    gradient_accumulation_steps: int
    steps_per_generation: int
    num_generations: int
    use_vllm: bool
    vllm_mode: str | None
    vllm_gpus: int | None
    vllm_tensor_parallel_size: int
    vllm_gpu_memory_utilization: float | None
    vllm_enable_sleep_mode: bool
    gradient_checkpointing: bool
    optimizer: str
    zero_stage: int
    model_dtype: str
    bf16: bool
    training_processes: int
    estimate: Estimate = field(repr=False)
    reasons: dict[str, str] = field(default_factory=dict)

    @property
    def fits(self) -> bool:
        """True unless the estimate says ``does not fit`` (a ``tight`` fit counts; its reason says so)."""
        return self.estimate.verdict != "does not fit"

    def grpo_kwargs(self) -> dict[str, Any]:
        """The GRPOConfig keyword values this recommendation decides (model_init_kwargs carries the dtype)."""
        kw: dict[str, Any] = {
            "per_device_train_batch_size": self.per_device_train_batch_size,
            "gradient_accumulation_steps": self.gradient_accumulation_steps,
            "steps_per_generation": self.steps_per_generation,
            "gradient_checkpointing": self.gradient_checkpointing,
            "optim": self.optimizer, "bf16": self.bf16, "use_vllm": self.use_vllm,
            "model_init_kwargs": {"dtype": self.model_dtype},
        }
        if self.use_vllm:
            kw["vllm_mode"] = self.vllm_mode
            if self.vllm_mode == "colocate":
                kw["vllm_gpu_memory_utilization"] = self.vllm_gpu_memory_utilization
                kw["vllm_enable_sleep_mode"] = self.vllm_enable_sleep_mode
                kw["vllm_tensor_parallel_size"] = self.vllm_tensor_parallel_size
        return kw

    def as_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if k not in ("estimate", "reasons")}
        d["fits"] = self.fits
        d["peak_gib"] = round(self.estimate.total_gib, 2)
        d["reasons"] = dict(self.reasons)
        return d


def accumulation_for(batch: int, processes: int, num_generations: int,
                     target_completions: int | None = None) -> int:
    """Smallest accumulation reaching ``target_completions`` per generation round (default 4 prompts ×
    num_generations, the seed's 8 × 4 on one GPU) with batch × processes × accumulation divisible by
    num_generations (TRL's generation_batch_size check)."""
    target = target_completions or PROMPTS_PER_STEP * num_generations
    acc = max(1, math.ceil(target / (batch * processes)))
    while (batch * processes * acc) % num_generations:
        acc += 1
    return acc


def _server_need_gib(model: ModelInfo, tp: int, seq_len: int) -> float:
    """What one server GPU holds at TP ``tp``: weights / TP + overhead + activations + 16 sequences' KV."""
    return (gib(model.params * 2 / tp) + VLLM_OVERHEAD_GIB
            + gib(vllm_activation_bytes(model, VLLM_SERVER_BATCHED_TOKENS, 64, tp))
            + 16 * gib(kv_cache_bytes(model, seq_len) / tp))


def server_min_tp(model: ModelInfo, memory_gib: float, seq_len: int, limit: int) -> int | None:
    """Smallest TP vLLM allows for the model's heads (:func:`finetune.vllm_layout.tp_choices`), up to ``limit``
    GPUs, whose GPUs hold weights + overhead + 16 sequences at `trl vllm-serve`'s default share."""
    for tp in tp_choices(model.heads, model.kv_heads, limit):
        if _server_need_gib(model, tp, seq_len) <= TRL_SERVER_DEFAULT_UTIL * memory_gib:
            return tp
    return None


def _server_tp(model: ModelInfo, hardware: Hardware, method: str, seq_len: int) -> int | None:
    """The fewest server GPUs (one TP group) that hold the model, leaving a GPU to train."""
    return server_min_tp(model, hardware.memory_gib, seq_len, min(hardware.gpus, hardware.total_gpus - 1))


def server_layout(model: ModelInfo, hardware: Hardware, seq_len: int) -> VllmLayout | None:
    """TP × DP of the ``hardware.vllm_gpus`` server GPUs (None: no server). When no TP within them holds the
    model, the largest allowed TP, so that the estimate shows what does not fit."""
    gpus = hardware.vllm_gpus or 0
    if gpus < 1 or hardware.profile.is_cpu:
        return None
    min_tp = server_min_tp(model, hardware.memory_gib, seq_len, gpus)
    if min_tp is None:
        tp = tp_choices(model.heads, model.kv_heads, gpus)[-1]
        return VllmLayout(gpus, tp, gpus // tp, f"TP {tp}: no TP vLLM allows within {gpus} GPU(s) holds the model")
    return split_generation_gpus(gpus, model.heads, model.kv_heads, min_tp)


def recommend(model: ModelInfo, hardware: Hardware, method: str | None = None,
              workload: Knobs | None = None) -> Recommendation:
    """Per-scale GRPO keyword values (per-scale contract), the first configuration in preference order that fits.

    ``workload`` fixes completions per prompt, lengths, beta and the LoRA rank (default: the seed's recipe);
    recommend() chooses the rest. Preference: full fine-tuning over LoRA over QLoRA (when ``method`` is None);
    no checkpointing, the full AdamW and vLLM awake over their memory-saving alternatives; the largest
    micro-batch of 8/4/2/1. Single GPU → vLLM colocate with the smallest share holding its weights and one
    round's KV; several GPUs → `trl vllm-serve` on the fewest GPUs (TP) that hold the model, the rest
    training (server mode).
    """
    if method is not None:
        _check_choice(method, METHODS, "method")
    w = workload or Knobs()
    methods = [method] if method else list(METHODS)
    hw = hardware.with_vllm_gpus(_server_gpus(model, hardware, methods[0], w))
    layout = server_layout(model, hw, w.max_prompt_length + w.max_completion_length)
    tried: list[Estimate] = []
    for knobs in _candidates(hw, methods, w, layout.tp if layout else 1):
        tried.append(_sized(model, hw, knobs))
        if tried[-1].fits:
            return _recommendation(tried[-1], tried, w.num_generations, hw.training_gpus)
    # nothing fits: the smallest peak tried, said plainly
    chosen = min(tried, key=lambda e: (round(e.total_gib), e.training_peak_gib))
    return _recommendation(chosen, tried, w.num_generations, hw.training_gpus)


def _server_gpus(model: ModelInfo, hardware: Hardware, method: str, w: Knobs) -> int | None:
    """GPUs for `trl vllm-serve`: the spec's choice (0 = colocate), else the fewest that hold the model when
    there are several GPUs; None: vLLM colocated (or a CPU target)."""
    if hardware.profile.is_cpu:
        return None
    if hardware.vllm_gpus is not None:
        return hardware.vllm_gpus or None
    if hardware.total_gpus > 1:
        return _server_tp(model, hardware, method, w.max_prompt_length + w.max_completion_length)
    return None


# recommend()'s preference order inside a method and ZeRO stage: vLLM awake before asleep, fp32 AdamW
# before 8-bit; then no checkpointing before checkpointing, the larger micro-batch first.
_SLEEP_OPTIMIZER = ((False, "adamw_torch"), (False, "adamw_8bit"), (True, "adamw_torch"), (True, "adamw_8bit"))
_CHECKPOINTING_BATCH = ((False, 8), (False, 4), (True, 8), (True, 4), (True, 2), (True, 1))


def _candidates(hw: Hardware, methods: list[str], w: Knobs, server_tp: int = 1) -> Iterator[Knobs]:
    """Every configuration recommend() tries on ``hw`` (server GPUs and their TP decided), most preferred first."""
    cpu, n_train = hw.profile.is_cpu, hw.training_gpus
    mode = None if cpu else "server" if hw.vllm_gpus else "colocate"
    tp = server_tp if mode == "server" else 1
    for m in methods:
        for zero in [0] if n_train == 1 or cpu else ([2, 3] if m == "full" else [0, 3]):
            for sleep, optim in _SLEEP_OPTIMIZER:
                if (sleep and mode != "colocate") or (cpu and optim != "adamw_torch"):
                    continue
                for gc, batch in _CHECKPOINTING_BATCH:
                    yield replace(w, method=m, per_device_train_batch_size=batch,
                                  gradient_accumulation_steps=accumulation_for(batch, n_train, w.num_generations),
                                  zero_stage=zero, gradient_checkpointing=gc, optimizer=optim,
                                  use_vllm=mode is not None, vllm_mode=mode or "colocate",
                                  vllm_gpus=hw.vllm_gpus if mode == "server" else None, vllm_tensor_parallel_size=tp,
                                  vllm_gpu_memory_utilization=None, vllm_enable_sleep_mode=sleep)


def _sized(model: ModelInfo, hw: Hardware, knobs: Knobs) -> Estimate:
    """The estimate of a candidate; a colocated engine gets the smallest share (+5%, within 0.1–0.9) that holds
    its weights and one round's KV, measured on TRL's default share first."""
    if knobs.use_vllm and knobs.vllm_mode == "colocate":
        engine = estimate(model, hw, knobs, suggest=False).vllm
        assert engine is not None  # use_vllm: the estimate sizes the engine
        knobs = replace(knobs, vllm_gpu_memory_utilization=min(0.9, max(0.1, _round_up(engine.min_utilization * 1.05))))
    return estimate(model, hw, knobs, suggest=False)


def _pct(e: Estimate, mem: float) -> str:
    return f"{e.total_gib:.1f} GiB of {mem:.1f} ({100 * e.total_gib / mem:.0f}%)"


def _first(estimates: list[Estimate], **match: Any) -> Estimate | None:
    """The first estimate whose settings have every ``match`` value."""
    return next((t for t in estimates if all(t.settings.get(k) == v for k, v in match.items())), None)


def _fit_reason(est: Estimate) -> dict[str, str]:
    mem = est.memory_gib
    fixes = "; ".join(sug.action for sug in _suggestions(est)[:3])
    if est.verdict == "tight":
        return {"fits": f"tight: peak {_pct(est, mem)} leaves under {100 * (1 - est.fit_limit_gib / mem):.0f}% "
                        f"for fragmentation; {fixes}"}
    if not est.fits:
        return {"fits": f"nothing tried fits: the smallest peak is {_pct(est, mem)}; {fixes}"}
    return {}


def _training_reasons(est: Estimate, tried: list[Estimate], rejected: list[Estimate], num_generations: int,
                      n_train: int) -> dict[str, str]:
    """Why this method, micro-batch, accumulation, checkpointing and optimizer."""
    s, mem = est.settings, est.memory_gib
    m, b, acc, gc = s["method"], s["per_device_train_batch_size"], s["gradient_accumulation_steps"], \
        s["gradient_checkpointing"]

    def least(method: str) -> float:
        return min(t.total_gib for t in tried if t.settings["method"] == method)

    targets = s["lora_target_modules"]
    on = "" if is_all_linear(targets) else f" on {lora_targets_text(est.model, targets)}"

    method = {
        "full": f"full fine-tuning fits: peak {_pct(est, mem)}",
        "lora": f"LoRA r={s['lora_r']}{on}: peak {_pct(est, mem)}" + (
            f"; full fine-tuning would need at least {least('full'):.1f} GiB"
            if _first(rejected, method="full") else ""),
        "qlora": f"QLoRA: peak {_pct(est, mem)}" + (
            f"; LoRA would need at least {least('lora'):.1f} GiB" if _first(rejected, method="lora") else ""),
    }[m]
    bigger = [t for t in rejected if t.settings["method"] == m and t.settings["per_device_train_batch_size"] > b
              and t.settings["gradient_checkpointing"] == gc]
    no_gc = _first(rejected, method=m, gradient_checkpointing=False, per_device_train_batch_size=b)
    return {
        "method": method,
        "per_device_train_batch_size": (
            f"{b} completions per micro-batch: peak {_pct(est, mem)} (LM head {est.gib_of('lm_head'):.1f} GiB, "
            f"activations {est.gib_of('activations'):.1f} GiB)"
            + (f"; {bigger[0].settings['per_device_train_batch_size']} would need {bigger[0].total_gib:.1f} GiB"
               if bigger else "")),
        "gradient_accumulation_steps": (
            f"{b} × {n_train} process(es) × {acc} = {b * n_train * acc} completions per generation round = "
            f"{b * n_train * acc // num_generations} prompts × {num_generations} generations (divisible by "
            "num_generations)"),
        "gradient_checkpointing": (
            "off: activations fit without recomputation (faster)" if not gc else
            f"on: activations {est.gib_of('activations'):.1f} GiB" + (
                f"; without it the peak would be {no_gc.total_gib:.1f} GiB" if no_gc else "")),
        "optimizer": ("AdamW with fp32 states fits" if s["optimizer"] == "adamw_torch" else
                      f"8-bit AdamW: states {est.gib_of('optimizer'):.2f} GiB; fp32 AdamW did not fit"),
    }


def _placement_reasons(est: Estimate, n_train: int) -> dict[str, str]:
    """Why this ZeRO stage and load dtype."""
    s = est.settings
    return {
        "zero_stage": ("no DeepSpeed: one training process" if n_train == 1 else
                       f"ZeRO-{s['zero_stage']} over {n_train} training GPUs" if s["zero_stage"] else
                       f"DDP over {n_train} training GPUs: the model and its states fit unsharded"),
        "model_dtype": ("fp32 on CPU (bf16=False)" if est.hardware.profile.is_cpu else
                        "bf16 base weights (adapters train in fp32)" if s["method"] != "full" else
                        "fp32 weights + bf16 autocast: lr 5e-7 updates survive (no DeepSpeed master copy)"
                        if s["model_dtype"] == "float32" and s["zero_stage"] == 0 else
                        "bf16 weights; DeepSpeed keeps the fp32 master copy"),
    }


def _vllm_reasons(est: Estimate, rejected: list[Estimate], n_train: int) -> dict[str, str]:
    """Why vLLM runs where it does, with this share and sleep mode."""
    s, v = est.settings, est.vllm
    if not s["use_vllm"]:
        return {"use_vllm": "no GPU: transformers generate on CPU"}
    if v is None:
        return {}
    if v.mode == "server":
        return {
            "use_vllm": (f"vLLM server mode: `trl vllm-serve` on {v.gpus} GPU(s) (TP {v.tensor_parallel_size} × DP "
                         f"{max(1, v.gpus // v.tensor_parallel_size)}), "
                         f"{n_train} GPU(s) train"),
            "vllm_mode": "server: the seed's multi-GPU path; generation and training do not contend",
            "vllm_gpus": (f"{v.gpus}: weights {v.weights_gib:.1f} GiB per GPU + KV space "
                          f"{v.kv_available_gib:.1f} GiB ({v.concurrent_seqs} sequences of {v.seq_len})"),
            "vllm_gpu_memory_utilization": f"{v.utilization} (`trl vllm-serve` default; the GPUs are its own)",
            "vllm_enable_sleep_mode": "off: server GPUs do not train",
        }
    awake = _first(rejected, method=s["method"], vllm_enable_sleep_mode=False,
                   per_device_train_batch_size=s["per_device_train_batch_size"],
                   gradient_checkpointing=s["gradient_checkpointing"])
    return {
        "use_vllm": "vLLM colocate: one GPU (or no GPU to spare) generates and trains",
        "vllm_mode": ("colocate: generation and training share each GPU (the seed's single-GPU default)"
                      if n_train == 1 else f"colocate: each of {n_train} training GPUs runs its own engine"),
        "vllm_gpu_memory_utilization": (
            f"{v.utilization}: weights {v.weights_gib:.1f} + activations {v.activation_gib:.1f} + overhead "
            f"{v.overhead_gib:.1f} + KV for {v.max_num_seqs} × {v.seq_len} tokens {v.kv_needed_gib:.1f} GiB = "
            f"{v.min_utilization:.2f} of {est.memory_gib:.1f} GiB, rounded up with 5% headroom"),
        "vllm_enable_sleep_mode": (
            f"on: frees {v.share_gib - v.during_training_gib:.1f} GiB while training"
            + (f"; awake the peak would be {awake.total_gib:.1f} GiB" if awake else "")
            if v.sleep_mode else "off: the training peak fits beside the awake engine (no wake-up cost per step)"),
    }


def _recommendation(est: Estimate, tried: list[Estimate], num_generations: int, n_train: int) -> Recommendation:
    """The chosen estimate's values, each with its reason (from the estimate and the rejected candidates)."""
    s = est.settings
    rejected = [t for t in tried if t is not est]
    reasons = {**_fit_reason(est), **_training_reasons(est, tried, rejected, num_generations, n_train),
               **_placement_reasons(est, n_train), **_vllm_reasons(est, rejected, n_train)}
    return Recommendation(
        method=s["method"], per_device_train_batch_size=s["per_device_train_batch_size"],
        gradient_accumulation_steps=s["gradient_accumulation_steps"], steps_per_generation=s["steps_per_generation"],
        num_generations=num_generations, use_vllm=s["use_vllm"], vllm_mode=s["vllm_mode"], vllm_gpus=s["vllm_gpus"],
        vllm_tensor_parallel_size=s["vllm_tensor_parallel_size"],
        vllm_gpu_memory_utilization=s["vllm_gpu_memory_utilization"],
        vllm_enable_sleep_mode=s["vllm_enable_sleep_mode"], gradient_checkpointing=s["gradient_checkpointing"],
        optimizer=s["optimizer"], zero_stage=s["zero_stage"], model_dtype=s["model_dtype"],
        bf16=not est.hardware.profile.is_cpu and est.hardware.profile.bf16, training_processes=n_train, estimate=est,
        reasons=reasons)
