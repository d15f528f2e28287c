"""`finetune memory --trainer sft|dpo`: what a supervised or DPO step holds, which a GRPO estimate does not.

SFT and DPO generate nothing: no vLLM engine, no KV cache, no group of completions per prompt. What a
training step holds is the weights, the trainable parameters' gradients and optimizer state, the
activations of one micro-batch, and its logits (TRL's SFT/DPO trainers materialise them: fp32 logits
plus their gradient and the log-softmax temporaries). DPO runs chosen and rejected through the model
together (twice the sequences) and needs a reference policy: a frozen second copy for full
fine-tuning, nothing extra with LoRA (TRL 1.16's DPOTrainer, given a ``peft_config``, sets ``ref_model`` to
None and runs the reference pass with the adapters disabled).

LoRA's trainable parameters — and so its gradient and optimizer-state terms — are those PEFT adapts for the
``target_modules`` asked for, counted by :mod:`finetune.loratargets` (the GRPO estimate's one implementation);
a name the model lacks, or the LM head, is a UserError.

Per-component formulas reuse finetune.memory's (activation bytes per layer are checked there against
what autograd saves). `measure_sft_step_peak` runs one real SFTTrainer step on CPU under the torch
profiler; benchmarks/bench_memory_trainers.py compares the two.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from finetune.errors import UserError
from finetune.loratargets import HEAD_PROBLEM, Targets, lora_target_problem

if TYPE_CHECKING:
    from finetune.placement import Layout

SFT_METHODS = ("full", "lora", "qlora")
LOGIT_COPIES = 3  # fp32 logits, their log-softmax, and the gradient flowing back through them
TRAINER_CLASS = {"sft": "SFTTrainer", "dpo": "DPOTrainer"}


@dataclass
class TrainerEstimate:
    """Component bytes of one SFT / DPO step and why each is there."""

    trainer: str
    method: str
    trainable: int = 0  # parameters with a gradient and optimizer state (every one for full fine-tuning)
    components: dict[str, int] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    load: int = 0  # bytes on a GPU right after loading, before DeepSpeed partitions anything
    load_reason: str = ""

    @property
    def step(self) -> int:
        return sum(self.components.values())

    @property
    def peak(self) -> int:
        """The larger of the load and the step: a QLoRA model under ZeRO-3 loads whole on every rank."""
        return max(self.step, self.load)

    @property
    def above_weights(self) -> int:
        return self.peak - self.components.get("weights", 0)


def estimate_step(model: Any, trainer: str, method: str, *, seq_len: int, batch: int = 1, lora_r: int = 16,
                  lora_target_modules: Targets = "all-linear", checkpointing: bool = True, param_bytes: int = 2,
                  mixed_precision: bool = True, where: str = "lora.target_modules",
                  layout: Layout | None = None) -> TrainerEstimate:
    """Bytes per GPU of one SFT or DPO step for ``model`` (a finetune.models.ModelInfo); LoRA / QLoRA adapt
    ``lora_target_modules`` (PEFT's semantics). ``where`` names the input a bad target list came from. ``layout``
    (:func:`finetune.placement.arrange` with vLLM off): the training processes and ZeRO stage the step is
    partitioned over (None: one process)."""
    _check_choice(trainer, method)
    est = TrainerEstimate(trainer, method)
    _weights(est, model, param_bytes)
    est.trainable = (model.params if method == "full"
                     else _lora_trainable(model, trainer, lora_r, lora_target_modules, where))
    _trainable_state(est, param_bytes, mixed_precision)
    if method != "full":
        named = lora_target_modules if isinstance(lora_target_modules, str) else ", ".join(lora_target_modules)
        est.reasons["gradients"] += f" (LoRA r={lora_r} on {named})"
    _reference(est, model, param_bytes)
    _step_tensors(est, model, seq_len, batch, checkpointing, param_bytes)
    if layout is not None and layout.training_processes > 1:
        _partition(est, layout)
    return est


def _partition(est: TrainerEstimate, layout: Layout) -> None:
    """DeepSpeed's partitions over the layout's training processes (ZeRO-2: gradients and optimizer state; ZeRO-3:
    the weights too — QLoRA's packed 4-bit ones through ``bnb_4bit_quant_storage``), and the load moment before it:
    transformers skips zero.Init for a quantized model (modeling_utils ``get_init_context``), so QLoRA loads whole
    on every rank first."""
    n, stage = layout.shards, layout.zero_stage
    whole = est.components["weights"] + est.components.get("reference", 0)
    parts = ("gradients", "optimizer") + (("weights", "reference") if stage == 3 else ())
    for key in parts:
        if key in est.components:
            est.components[key] //= n
            est.reasons[key] += f" / {n} (ZeRO-{stage})"
    if stage == 3 and est.method == "qlora":
        est.load, est.load_reason = whole, f"the 4-bit model whole on each of {n} ranks before ZeRO-3 partitions it"
    elif stage != 3:
        est.load, est.load_reason = whole, "the weights whole on every rank"
    else:
        est.load, est.load_reason = whole // n, f"partitioned at load by zero.Init (/ {n})"


def _check_choice(trainer: str, method: str) -> None:
    if trainer not in ("sft", "dpo"):
        raise UserError(f"trainer '{trainer}' is not sized here", where="--trainer",
                        fix="sft or dpo here; grpo uses `finetune memory` without --trainer")
    if method not in SFT_METHODS:
        raise UserError(f"method '{method}' is not one of {', '.join(SFT_METHODS)}", where="--method",
                        fix="pick full, lora or qlora")


def _lora_trainable(model: Any, trainer: str, r: int, target_modules: Targets, where: str) -> int:
    """PEFT's trainable count for ``target_modules`` (finetune.loratargets), or the one-line refusal."""
    problem = lora_target_problem(model, target_modules)
    if problem:
        what = problem[0]
        if what == HEAD_PROBLEM:  # TRL 1.16's SFTTrainer / DPOTrainer refuse it at construction, for the same reason
            what = (f"target_modules adapts the output head: TRL 1.16's {TRAINER_CLASS[trainer]} computes log-probs "
                    "from lm_head.weight directly and refuses a LoRA adapter there")
        raise UserError(what, where=where, fix=problem[1])
    return int(model.lora_params(r, target_modules))


def _weights(est: TrainerEstimate, model: Any, param_bytes: int) -> None:
    c, why = est.components, est.reasons
    if est.method == "qlora":  # the GRPO estimate's formula: bitsandbytes quantizes nn.Linear but the head
        from finetune.memory.formulas import QLORA_BYTES_PER_PARAM

        q = model.quantizable_params
        c["weights"] = int(q * QLORA_BYTES_PER_PARAM + (model.params - q) * param_bytes)
        why["weights"] = (f"{q:,} linear weights in 4-bit NF4 (double-quantized block scales) + "
                          f"{model.params - q:,} others × {param_bytes} B")
    else:
        c["weights"] = model.params * param_bytes
        why["weights"] = f"{param_bytes} B per parameter"


def _reference(est: TrainerEstimate, model: Any, param_bytes: int) -> None:
    """DPO's reference policy: TRL 1.16 loads a frozen copy for full fine-tuning; with a peft_config its
    ref_model is None and the reference pass runs the base with the adapters disabled."""
    if est.trainer != "dpo":
        return
    full = est.method == "full"
    est.components["reference"] = model.params * param_bytes if full else 0
    est.reasons["reference"] = ("a frozen copy of the policy" if full
                                else "none: the reference pass disables the adapters")


def _trainable_state(est: TrainerEstimate, param_bytes: int, mixed_precision: bool) -> None:
    """Gradients and AdamW state of the trainable parameters (PEFT keeps adapters in fp32)."""
    full = est.method == "full"
    grad_bytes = param_bytes if full else 4
    est.components["gradients"] = est.trainable * grad_bytes
    est.reasons["gradients"] = f"{est.trainable:,} trainable parameters × {grad_bytes} B"
    master = 4 if (full and mixed_precision and param_bytes == 2) else 0
    est.components["optimizer"] = est.trainable * (8 + master)
    est.reasons["optimizer"] = "AdamW moments (fp32)" + (" + fp32 master weights" if master else "")


def _step_tensors(est: TrainerEstimate, model: Any, seq_len: int, batch: int, checkpointing: bool,
                  param_bytes: int) -> None:
    """Activations and logits of one micro-batch (DPO: chosen and rejected in one forward)."""
    from finetune.memory.formulas import activation_bytes

    seqs = batch * (2 if est.trainer == "dpo" else 1)
    est.components["activations"] = activation_bytes(model, seqs, seq_len, checkpointing) * param_bytes // 2
    est.reasons["activations"] = (f"{seqs} sequence(s) × {seq_len} tokens, "
                                  f"checkpointing {'on' if checkpointing else 'off'}")
    est.components["logits"] = LOGIT_COPIES * seqs * seq_len * model.vocab * 4
    est.reasons["logits"] = "fp32 logits, log-softmax and their gradient over every token"


def measure_sft_step_peak(model_dir: str, *, seq_len: int, batch: int = 1, checkpointing: bool = False) -> int:
    """Peak bytes above the loaded model of two real SFTTrainer steps on CPU (fp32; the second holds the
    optimizer state through forward and backward, as every later step does), by the torch profiler."""
    import tempfile

    import numpy as np
    import torch
    from datasets import Dataset
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import MemoryProfileTimeline
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    tok = AutoTokenizer.from_pretrained(model_dir)
    words = [w for w in tok.get_vocab() if w.isalpha()][:50]
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(words, seq_len)) for _ in range(2 * batch)]
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    with tempfile.TemporaryDirectory() as out:
        args = SFTConfig(output_dir=out, max_steps=2, per_device_train_batch_size=batch, use_cpu=True,
                         max_length=seq_len, packing=False, gradient_checkpointing=checkpointing, report_to=[],
                         save_strategy="no", logging_strategy="no", dataloader_num_workers=0, bf16=False,
                         optim="adamw_torch", learning_rate=1e-4, disable_tqdm=True)
        trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_dict({"text": texts}),
                             processing_class=tok)
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                     with_stack=True) as prof:
            trainer.train()
    # torch's private timeline helper (no public API gives the per-category sizes); it is unannotated
    timeline = MemoryProfileTimeline(prof._memory_profile())
    _, sizes = timeline._coalesce_timeline(torch.device("cpu"))  # type: ignore[no-untyped-call]
    totals = np.array(sizes).sum(1)
    return int(totals.max() - totals[0])
