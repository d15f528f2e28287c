"""The per-scale keyword values: :func:`recommend` is THE one source of method, micro-batch, accumulation, vLLM
share, sleep mode, checkpointing and optimizer, each with a reason from the estimate; the renderer and
references/grpo-memory.md both call it. Where the GPUs go (vLLM mode, TP × DP, training processes, ZeRO stage) is
:func:`finetune.placement.decide`'s, which recommend() asks with its own sizing of each layout.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from finetune.errors import UserError
from finetune.hardware import PROFILES, Hardware
from finetune.loratargets import is_all_linear
from finetune.memory.estimate import Knobs, _check_choice, _round_up, _suggestions, estimate_on, lora_targets_text
from finetune.memory.formulas import METHODS, PROMPTS_PER_STEP
from finetune.memory.result import Estimate
from finetune.models import ModelInfo
from finetune.placement import Decision, Layout, LayoutRefusal, Request, decide

Change = tuple[str, Any]  # a spec edit: (dotted path, value), offered as "set <path>: <value>"
Fix = tuple[Change, ...]  # edits applied together: "set <path>: <value> and <path>: <value>"


def fix_text(fix: Fix) -> str:
    return "set " + " and ".join(f"{path}: {value}" for path, value in fix)


@dataclass(frozen=True)
class Recommendation:
    """Per-scale keyword values for a model on a hardware setup, each with a reason from the estimate, and the layout
    :func:`finetune.placement.decide` chose for them.

    THE one source of these values (DESIGN.md's per-scale contract): the renderer writes them into the GRPOConfig
    and references/grpo-memory.md tabulates them. ``fits`` is False when nothing tried fits; the values
    are then the most memory-saving configuration tried, and the reasons say by how much it misses.
    """

    method: str
    per_device_train_batch_size: int
    gradient_accumulation_steps: int
    steps_per_generation: int
    num_generations: int
    vllm_gpu_memory_utilization: float | None
    vllm_enable_sleep_mode: bool
    gradient_checkpointing: bool
    optimizer: str
    model_dtype: str
    bf16: bool
    layout: Layout = field(repr=False)
    estimate: Estimate = field(repr=False)
    reasons: dict[str, str] = field(default_factory=dict)

    @property
    def fits(self) -> bool:
        """True unless the estimate says ``does not fit`` (a ``tight`` fit counts; its reason says so)."""
        return self.estimate.verdict != "does not fit"

    @property
    def use_vllm(self) -> bool:
        return self.layout.use_vllm

    @property
    def vllm_mode(self) -> str | None:
        return self.layout.vllm_mode

    @property
    def vllm_gpus(self) -> int | None:
        """GPUs of `trl vllm-serve` (server mode), else None."""
        return self.layout.server_gpus

    @property
    def vllm_tensor_parallel_size(self) -> int:
        return self.layout.vllm_tp

    @property
    def zero_stage(self) -> int:
        return self.layout.zero_stage

    @property
    def training_processes(self) -> int:
        return self.layout.training_processes

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
        d = {k: v for k, v in asdict(self).items() if k not in ("estimate", "reasons", "layout")}
        d.update(use_vllm=self.use_vllm, vllm_mode=self.vllm_mode, vllm_gpus=self.vllm_gpus,
                 vllm_tensor_parallel_size=self.vllm_tensor_parallel_size, zero_stage=self.zero_stage,
                 training_processes=self.training_processes)
        d["fits"] = self.fits
        d["peak_gib"] = round(self.estimate.total_gib, 2)
        d["binding_moment"] = self.estimate.binding.key if self.estimate.binding else None
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


def recommend(model: ModelInfo, hardware: Hardware, method: str | None = None,
              workload: Knobs | None = None, request: Request | None = None) -> Recommendation:
    """Per-scale GRPO keyword values (per-scale contract), the first configuration in preference order that fits.

    ``workload`` fixes completions per prompt, lengths, beta and the LoRA rank (default: the seed's recipe);
    ``request`` what the spec pins of the layout. For each method — full fine-tuning over LoRA over QLoRA when
    ``method`` is None — :func:`finetune.placement.decide` walks its layouts and this module sizes each: no
    checkpointing, the full AdamW and vLLM awake over their memory-saving alternatives, the largest micro-batch of
    8/4/2/1; a colocated engine gets the smallest share holding its weights and one round's KV. A layout fits when
    every moment (load, engine start, weight sync, step) does. A request no layout satisfies is a UserError whose
    fixes each re-decide and fit.
    """
    if method is not None:
        _check_choice(method, METHODS, "method")
    w, req = workload or Knobs(), request or Request()
    tried: list[Estimate] = []
    best: Decision[Estimate] | None = None
    refused: LayoutRefusal | None = None
    for m in [method] if method else list(METHODS):
        def size(lay: Layout, m: str = m) -> Estimate:
            return _fit(model, lay, m, w, tried)

        try:
            d = decide(model, hardware, m, req, size)
        except LayoutRefusal as exc:
            refused = refused or exc  # all refused: say why the most preferred method was
            if method:
                raise _verified(exc, model, hardware, method, w, req) from None
            continue
        if d.fits:
            return _recommendation(d.sized, tried, w.num_generations)
        if best is None or d.sized.pressure < best.sized.pressure:
            best = d
    if best is None:
        assert refused is not None
        raise _verified(refused, model, hardware, None, w, req) from None
    return _recommendation(best.sized, tried, w.num_generations)


# recommend()'s preference order inside a layout: vLLM awake before asleep, fp32 AdamW before 8-bit; then no
# checkpointing before checkpointing, the larger micro-batch first. The last is the least memory of every knob.
_SLEEP_OPTIMIZER = ((False, "adamw_torch"), (False, "adamw_8bit"), (True, "adamw_torch"), (True, "adamw_8bit"))
_CHECKPOINTING_BATCH = ((False, 8), (False, 4), (True, 8), (True, 4), (True, 2), (True, 1))


def _candidates(layout: Layout, method: str, w: Knobs) -> Iterator[Knobs]:
    """Every configuration recommend() tries on a decided layout, most preferred first."""
    n = layout.training_processes
    for sleep, optim in _SLEEP_OPTIMIZER:
        if (sleep and layout.vllm_mode != "colocate") or (layout.cpu and optim != "adamw_torch"):
            continue
        for gc, batch in _CHECKPOINTING_BATCH:
            yield replace(w, method=method, per_device_train_batch_size=batch,
                          gradient_accumulation_steps=accumulation_for(batch, n, w.num_generations),
                          gradient_checkpointing=gc, optimizer=optim, use_vllm=layout.use_vllm,
                          vllm_gpu_memory_utilization=None, vllm_enable_sleep_mode=sleep)


def _fit(model: ModelInfo, layout: Layout, method: str, w: Knobs, record: list[Estimate]) -> Estimate:
    """The first candidate on ``layout`` that fits, else its least-memory one (tried first: when even that does not
    fit, no other can, each knob's every alternative holding less)."""
    candidates = list(_candidates(layout, method, w))
    floor = _sized(model, layout, candidates[-1])
    record.append(floor)
    if not floor.fits:
        return floor
    for knobs in candidates[:-1]:
        record.append(_sized(model, layout, knobs))
        if record[-1].fits:
            return record[-1]
    return floor


def _sized(model: ModelInfo, layout: Layout, knobs: Knobs) -> Estimate:
    """The estimate of a candidate; a colocated engine gets the smallest share (+5%, within 0.1–0.9) that holds
    its weights and one round's KV, measured on TRL's default share first."""
    if layout.vllm_mode == "colocate":
        engine = estimate_on(model, layout, knobs, suggest=False).vllm
        assert engine is not None  # use_vllm: the estimate sizes the engine
        knobs = replace(knobs, vllm_gpu_memory_utilization=min(0.9, max(0.1, _round_up(engine.min_utilization * 1.05))))
    return estimate_on(model, layout, knobs, suggest=False)


def apply_change(hardware: Hardware, method: str | None, request: Request, change: Change
                 ) -> tuple[Hardware, str | None, Request]:
    """The inputs a spec edit gives recommend() (what a fix would render)."""
    path, value = change
    if path == "method":
        return hardware, value, request
    if path == "hardware.gpus":
        return hardware.with_gpus(int(value)), method, request
    if path == "hardware.nodes":
        return hardware.with_nodes(int(value)), method, request
    if path == "hardware.profile":
        profile = PROFILES[value]
        return replace(hardware, profile=profile, memory_gib=profile.memory_gib), method, request
    if path == "hardware.vllm_gpus":
        return replace(hardware, vllm_gpus=int(value)), method, replace(request, vllm_gpus=None, vllm_mode=None)
    if path == "overrides.vllm_tensor_parallel_size":
        return hardware, method, replace(request, vllm_tensor_parallel_size=int(value))
    raise ValueError(f"no such change: {path}")


def renders(model: ModelInfo, hardware: Hardware, method: str | None, w: Knobs, request: Request, fix: Fix) -> bool:
    """Whether recommend() fits once every edit of ``fix`` is applied (a layout refused outright does not)."""
    try:
        for change in fix:
            hardware, method, request = apply_change(hardware, method, request, change)
        return recommend(model, hardware, method, w, request).fits
    except UserError:
        return False


def _verified(exc: LayoutRefusal, model: ModelInfo, hardware: Hardware, method: str | None, w: Knobs,
              request: Request) -> UserError:
    """The refusal with only the alternatives that re-decide and fit as its fix (else the hardware that would); a
    refusal whose fix is to remove what the spec pins keeps it."""
    if not exc.alternatives and exc.fix:
        return exc
    kept: list[Fix] = [(c,) for c in exc.alternatives if renders(model, hardware, method, w, request, (c,))]
    kept = kept or fixes_for(model, hardware, method, w, request)
    fix = " or ".join(fix_text(f) for f in kept) or "no change of hardware tried here fits: use GPUs with more memory"
    return UserError(exc.what, where=exc.where or "hardware", fix=fix)


def fixes_for(model: ModelInfo, hardware: Hardware, method: str | None, w: Knobs, request: Request,
              limit: int = 2) -> list[Fix]:
    """Spec edits that make recommend() fit, cheapest first, each re-decided: another method (when the spec pins
    one), another count of server GPUs (when it pins one), more GPUs per node, more nodes (with full nodes), then a
    card with more memory."""
    tries: list[Fix] = [(("method", m),) for m in METHODS if method and METHODS.index(m) > METHODS.index(method)]
    if hardware.vllm_gpus is not None and hardware.nodes == 1:  # the spec pins the server's GPUs: other counts
        current = hardware.vllm_gpus
        nearest = sorted(range(hardware.gpus), key=lambda v: (abs(v - current), v))
        tries += [(("hardware.vllm_gpus", v),) for v in nearest if v != current]
    if not hardware.profile.is_cpu:
        full = max(hardware.gpus, hardware.profile.node_gpus)
        tries += [(("hardware.gpus", g),) for g in (2, 4, 8) if g > hardware.gpus]
        tries += [(("hardware.nodes", n),) for n in (2, 3, 4, 6, 8) if n > hardware.nodes]
        tries += [(("hardware.gpus", full), ("hardware.nodes", n)) for n in (2, 3, 4, 6, 8)
                  if full > hardware.gpus and n > hardware.nodes]
        tries += [(("hardware.profile", p.name),) for p in sorted(PROFILES.values(), key=lambda p: p.memory_gib)
                  if not p.is_cpu and not p.unified and p.memory_gib > hardware.memory_gib]
    out: list[Fix] = []
    for fix in tries:
        fields = tuple(path for path, _ in fix)
        if fields != ("hardware.vllm_gpus",) and fields in {tuple(path for path, _ in f) for f in out}:
            continue  # more GPUs, nodes or memory: the smallest that works (a larger one works too)
        if renders(model, hardware, method, w, request, fix):
            out.append(fix)
        if len(out) >= limit:
            break
    return out


def _pct(e: Estimate, mem: float) -> str:
    return f"{e.total_gib:.1f} GiB of {mem:.1f} ({100 * e.total_gib / mem:.0f}%)"


def _first(estimates: list[Estimate], **match: Any) -> Estimate | None:
    """The first estimate whose settings have every ``match`` value."""
    return next((t for t in estimates if all(t.settings.get(k) == v for k, v in match.items())), None)


def _fit_reason(est: Estimate) -> dict[str, str]:
    mem, b = est.memory_gib, est.binding
    fixes = "; ".join(sug.action for sug in _suggestions(est)[:3])
    moment = f" (binding moment: {b.title}, {b.gib:.1f} of {b.limit_gib:.1f} GiB)" if b else ""
    if est.verdict == "tight":
        return {"fits": f"tight: peak {_pct(est, mem)}{moment} leaves under "
                        f"{100 * (1 - est.fit_limit_gib / mem):.0f}% for fragmentation; {fixes}"}
    if not est.fits:
        return {"fits": f"nothing tried fits: the smallest peak is {_pct(est, mem)}{moment}; {fixes}"}
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


def _placement_reasons(est: Estimate, rejected: list[Estimate], n_train: int) -> dict[str, str]:
    """Why this ZeRO stage (placement's choice, the first that fits) and load dtype."""
    s = est.settings
    other = [t for t in rejected if t.settings["method"] == s["method"] and t.settings["zero_stage"] != s["zero_stage"]
             and t.settings["vllm_gpus"] == s["vllm_gpus"]]
    before = min(other, key=lambda t: t.pressure) if other else None
    why = ""
    if before is not None and not before.fits and before.binding is not None:
        stage = f"ZeRO-{before.settings['zero_stage']}" if before.settings["zero_stage"] else "no ZeRO"
        why = f"; {stage} did not fit ({before.binding.title} {before.binding.gib:.1f} GiB)"
    return {
        "zero_stage": ("no DeepSpeed: one training process" if n_train == 1 else
                       f"ZeRO-{s['zero_stage']} over {n_train} training GPUs{why}" if s["zero_stage"] else
                       f"DDP over {n_train} training GPUs: the model and its states fit unsharded"),
        "model_dtype": ("fp32 on CPU (bf16=False)" if est.hardware.profile.is_cpu else
                        "bf16 base weights (adapters train in fp32)" if s["method"] != "full" else
                        "fp32 weights + bf16 autocast: lr 5e-7 updates survive (no DeepSpeed master copy)"
                        if s["model_dtype"] == "float32" and s["zero_stage"] == 0 else
                        "bf16 weights; DeepSpeed keeps the fp32 master copy"),
    }


def _vllm_reasons(est: Estimate, rejected: list[Estimate], n_train: int) -> dict[str, str]:
    """Why vLLM runs where it does, with this share and sleep mode."""
    s, v, lay = est.settings, est.vllm, est.layout
    if not s["use_vllm"]:
        return {"use_vllm": "no GPU: transformers generate on CPU"}
    if v is None or lay is None:
        return {}
    if v.mode == "server":
        return {
            "use_vllm": (f"vLLM server mode: `trl vllm-serve` on {v.gpus} GPU(s) (TP {lay.vllm_tp} × DP "
                         f"{lay.vllm_dp}), {n_train} GPU(s) train"),
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


def _recommendation(est: Estimate, tried: list[Estimate], num_generations: int) -> Recommendation:
    """The chosen estimate's values, each with its reason (from the estimate and the rejected candidates)."""
    s, layout = est.settings, est.layout
    assert layout is not None  # every candidate is sized on a decided layout
    n_train = layout.training_processes
    rejected = [t for t in tried if t is not est]
    reasons = {**_fit_reason(est), **_training_reasons(est, tried, rejected, num_generations, n_train),
               **_placement_reasons(est, rejected, n_train), **_vllm_reasons(est, rejected, n_train)}
    return Recommendation(
        method=s["method"], per_device_train_batch_size=s["per_device_train_batch_size"],
        gradient_accumulation_steps=s["gradient_accumulation_steps"], steps_per_generation=s["steps_per_generation"],
        num_generations=num_generations, vllm_gpu_memory_utilization=s["vllm_gpu_memory_utilization"],
        vllm_enable_sleep_mode=s["vllm_enable_sleep_mode"], gradient_checkpointing=s["gradient_checkpointing"],
        optimizer=s["optimizer"], model_dtype=s["model_dtype"],
        bf16=not est.hardware.profile.is_cpu and est.hardware.profile.bf16, layout=layout, estimate=est,
        reasons=reasons)
