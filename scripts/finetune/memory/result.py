"""What an estimate says: its components (GiB per training GPU, formula, when held), the generation engine's
budget, the suggestions that would lower the peak, and the verdict — as a dict and as Markdown (RUN/memory.md)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from finetune.hardware import Hardware
from finetune.memory.formulas import FIT_FRACTION, FIT_FRACTION_UNIFIED
from finetune.models import ModelInfo

if TYPE_CHECKING:
    from finetune.placement import Layout

Phase = Literal["resident", "training", "generation", "context"]


@dataclass(frozen=True)
class Component:
    """One line of the estimate: GiB per training GPU, how it was computed, when it is held.

    ``phase``: ``resident`` (held for the whole run), ``training`` (only during the backward pass),
    ``generation`` (only while rollouts are generated), ``context`` (outside torch's allocator).
    """

    key: str
    label: str
    gib: float
    formula: str
    phase: Phase


@dataclass(frozen=True)
class VllmBudget:
    """The colocated (per training GPU) or server (per vLLM GPU) generation engine's memory."""

    mode: str
    gpus: int
    tensor_parallel_size: int
    utilization: float
    share_gib: float
    weights_gib: float
    activation_gib: float
    overhead_gib: float
    kv_available_gib: float
    kv_needed_gib: float  # for every sequence of one generation round at full length
    max_num_seqs: int
    seq_len: int
    concurrent_seqs: int  # sequences the KV space holds at full length
    sleep_mode: bool
    during_training_gib: float  # what it holds while the policy trains (residual when asleep)

    @property
    def min_utilization(self) -> float:
        """Smallest share (rounded up to 0.05) holding weights, overhead and a full round's KV."""
        need = self.weights_gib + self.activation_gib + self.overhead_gib + self.kv_needed_gib
        return need / (self.share_gib / self.utilization) if self.utilization else 0.0


@dataclass(frozen=True)
class Moment:
    """One moment of a run where it can die for memory, sized against what it must fit in.

    ``key``: ``load`` (the policy loaded and, colocated, vLLM's start-up check that its share is still free),
    ``engine`` (vLLM's engine: weights, profile run and KV space inside its share — a server GPU's, in server mode),
    ``sync`` (a weight sync into vLLM: what TRL gathers to push the weights), ``step`` (the steady-state step:
    generation and the backward pass). ``limit_gib``: the card, or the engine's share for ``engine``;
    ``headroom``: held to the fragmentation margin (a share is vLLM's own budget, not the allocator's)."""

    key: str
    title: str
    gib: float
    limit_gib: float
    detail: str
    headroom: bool = True

    @property
    def ratio(self) -> float:
        return self.gib / self.limit_gib if self.limit_gib > 0 else float("inf")


@dataclass(frozen=True)
class Suggestion:
    """A change that lowers the peak, with the estimated saving (re-estimated, not guessed)."""

    action: str
    change: dict[str, Any]
    saves_gib: float
    total_after_gib: float
    fits_after: bool


@dataclass(frozen=True)
class Estimate:
    """Per-GPU memory of one GRPO configuration on one hardware setup."""

    model: ModelInfo
    hardware: Hardware
    settings: dict[str, Any]
    components: tuple[Component, ...]
    vllm: VllmBudget | None
    training_peak_gib: float
    generation_peak_gib: float
    warnings: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()  # hard failures besides the total (vLLM cannot start, …)
    suggestions: tuple[Suggestion, ...] = ()
    decode_tokens_per_s: float = 0.0  # bound for one generation round's streams on this hardware
    decode_single_stream_tokens_per_s: float = 0.0
    moments: tuple[Moment, ...] = ()
    layout: Layout | None = None

    @property
    def step_gib(self) -> float:
        """The steady-state step's peak per training GPU: the larger of the generation and training phases."""
        return max(self.training_peak_gib, self.generation_peak_gib)

    @property
    def total_gib(self) -> float:
        """Peak per training GPU over every moment held to the card (load, weight sync, step)."""
        return max([self.step_gib] + [m.gib for m in self.moments if m.headroom])

    @property
    def binding(self) -> Moment | None:
        """The moment that decides whether the layout starts: the one furthest past its limit, else the moment
        closest to the card (an engine's share is its own budget, chosen to hold what it needs)."""
        over = [m for m in self.moments if m.gib > m.limit_gib]
        card = [m for m in self.moments if m.headroom] or list(self.moments)
        return max(over or card, key=lambda m: m.ratio, default=None)

    @property
    def pressure(self) -> float:
        """The binding moment's share of its limit (> 1: does not fit); problems rank past every moment."""
        worst = max([self.step_gib / self.memory_gib if self.memory_gib else float("inf")]
                    + [m.ratio for m in self.moments])
        return worst + (10.0 if self.problems else 0.0)

    @property
    def memory_gib(self) -> float:
        return self.hardware.memory_gib

    @property
    def fit_limit_gib(self) -> float:
        frac = FIT_FRACTION_UNIFIED if self.hardware.profile.unified else FIT_FRACTION
        return self.memory_gib * frac

    @property
    def verdict(self) -> str:
        """``fits`` (with allocator headroom), ``tight`` (within memory, little headroom) or ``does not fit``."""
        frac = self.fit_limit_gib / self.memory_gib if self.memory_gib else 1.0
        if self.problems or self.total_gib > self.memory_gib or any(m.gib > m.limit_gib for m in self.moments):
            return "does not fit"
        tight = self.total_gib > self.fit_limit_gib or any(m.ratio > frac for m in self.moments if m.headroom)
        return "tight" if tight else "fits"

    @property
    def fits(self) -> bool:
        return self.verdict == "fits"

    @property
    def training_allocated_gib(self) -> float:
        """What torch.cuda.max_memory_allocated of the training process would show (no vLLM, no context)."""
        resident = sum(c.gib for c in self.components if c.phase == "resident")
        train = sum(c.gib for c in self.components if c.phase == "training")
        gen = sum(c.gib for c in self.components if c.phase == "generation" and c.key != "vllm")
        return resident + max(train, gen)

    def component(self, key: str) -> Component | None:
        return next((c for c in self.components if c.key == key), None)

    def gib_of(self, key: str) -> float:
        c = self.component(key)
        return c.gib if c else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.name, "params": self.model.params, "scale_class": self.model.scale_class,
            "hardware": self.hardware.describe(), "settings": self.settings,
            "components": [asdict(c) for c in self.components],
            "vllm": asdict(self.vllm) if self.vllm else None,
            "training_peak_gib": round(self.training_peak_gib, 3),
            "moments": [asdict(m) for m in self.moments],
            "binding_moment": self.binding.key if self.binding else None,
            "layout": self.layout_dict(),
            "generation_peak_gib": round(self.generation_peak_gib, 3), "total_gib": round(self.total_gib, 3),
            "memory_gib": self.memory_gib, "verdict": self.verdict, "warnings": list(self.warnings),
            "problems": list(self.problems), "suggestions": [asdict(s) for s in self.suggestions],
            "decode_tokens_per_s_bound": round(self.decode_tokens_per_s, 1),
        }

    def layout_dict(self) -> dict[str, Any] | None:
        """The layout sized, as data (placement's decision: nothing here re-derives it)."""
        lay = self.layout
        if lay is None:
            return None
        return {"mode": lay.vllm_mode, "vllm_gpus": lay.vllm_gpus, "vllm_tp": lay.vllm_tp, "vllm_dp": lay.vllm_dp,
                "nodes": lay.nodes, "training_nodes": lay.training_nodes, "processes_per_node": lay.processes_per_node,
                "training_processes": lay.training_processes, "zero_stage": lay.zero_stage,
                "generation_gpu_ids": list(lay.generation_gpu_ids), "training_gpu_ids": list(lay.training_gpu_ids),
                "quant_storage": lay.quant_storage, "reason": lay.reason}

    def moments_markdown(self) -> list[str]:
        """The moments table and the one that binds (BRIEF.md and memory.md show it)."""
        if not self.moments:
            return []
        lines = ["", "| moment | GiB | limit | share | what is held |", "|---|---:|---:|---:|---|"]
        for m in self.moments:
            mark = "**" if m is self.binding else ""
            lines.append(f"| {mark}{m.title}{mark} | {m.gib:.1f} | {m.limit_gib:.1f} | {100 * m.ratio:.0f}% | "
                         f"{m.detail} |")
        b = self.binding
        assert b is not None
        lines += ["", f"Binding moment: **{b.title}** ({b.gib:.1f} of {b.limit_gib:.1f} GiB, {100 * b.ratio:.0f}%)"
                  + (" — past its limit: the run would die there." if b.gib > b.limit_gib else ".")]
        return lines

    def to_markdown(self, title: str | None = None) -> str:
        """The estimate as Markdown: settings, the component table, phases, verdict, suggestions."""
        s = self.settings
        lines = [f"# {title or 'GPU memory estimate'}", "",
                 f"- model: `{self.model.name}` — {self.model.summary().split(': ', 1)[1]}",
                 f"- hardware: {self.hardware.describe()}" + (f"; layout: {self.layout.reason}" if self.layout else ""),
                 f"- method `{s['method']}`, micro-batch {s['per_device_train_batch_size']} × accumulation "
                 f"{s['gradient_accumulation_steps']}, num_generations {s['num_generations']}, prompt "
                 f"{s['max_prompt_length']} + completion {s['max_completion_length']} tokens, beta {s['beta']}",
                 f"- optimizer `{s['optimizer']}`, gradient checkpointing {s['gradient_checkpointing']}, "
                 f"ZeRO stage {s['zero_stage']}, weights loaded as {s['model_dtype']}, vLLM "
                 + (f"`{s['vllm_mode']}` (share {s['vllm_gpu_memory_utilization']}, TP "
                    f"{s['vllm_tensor_parallel_size']}, sleep mode {s['vllm_enable_sleep_mode']})"
                    if s["use_vllm"] else "off (transformers generate)"),
                 "", "| component (per training GPU) | GiB | held | formula |", "|---|---:|---|---|"]
        for c in self.components:
            lines.append(f"| {c.label} | {c.gib:.2f} | {c.phase} | {c.formula} |")
        lines += ["", f"Peak during generation: **{self.generation_peak_gib:.1f} GiB**; during training: "
                  f"**{self.training_peak_gib:.1f} GiB**; memory: {self.memory_gib:.1f} GiB per GPU."]
        lines += self.moments_markdown()
        lines += ["",
                  f"**Verdict: {self.verdict}** — peak {self.total_gib:.1f} GiB of {self.memory_gib:.1f} GiB "
                  f"({100 * self.total_gib / self.memory_gib:.0f}%; headroom kept for fragmentation: "
                  f"{100 * (1 - self.fit_limit_gib / self.memory_gib):.0f}%)."]
        if self.vllm and self.vllm.mode == "server":
            v = self.vllm
            lines += ["", f"vLLM server ({v.gpus} GPU(s), TP {v.tensor_parallel_size}, share {v.utilization}): "
                      f"weights {v.weights_gib:.1f} + activations {v.activation_gib:.1f} + overhead "
                      f"{v.overhead_gib:.1f} GiB; KV space {v.kv_available_gib:.1f} GiB holds "
                      f"{v.concurrent_seqs} of {v.max_num_seqs} sequences of {v.seq_len} tokens."]
        for p in self.problems:
            lines.append(f"- ✗ {p}")
        for w in self.warnings:
            lines.append(f"- ⚠ {w}")
        if self.decode_tokens_per_s:
            lines += ["", f"Decode bound on {self.hardware.profile.name} ({self.hardware.bandwidth_gbs:.0f} GB/s): "
                      f"≤ {self.decode_single_stream_tokens_per_s:.1f} tokens/s for one stream, ≤ "
                      f"{self.decode_tokens_per_s:.0f} tokens/s for a round of {s['round_sequences']} streams "
                      "(bandwidth ÷ bytes read per step: active weights + each stream's KV)."]
        if self.suggestions:
            lines += ["", "## What would lower it (each alone, re-estimated)", "",
                      "| change | saves GiB | peak after | fits after |", "|---|---:|---:|---|"]
            for sug in self.suggestions:
                lines.append(f"| {sug.action} | {sug.saves_gib:.1f} | {sug.total_after_gib:.1f} | "
                             f"{'yes' if sug.fits_after else 'no'} |")
        return "\n".join(lines) + "\n"
