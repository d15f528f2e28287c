"""`finetune memory --trainer sft|dpo`: what a supervised or DPO step holds, which a GRPO estimate does not.

SFT and DPO generate nothing: no vLLM engine, no KV cache, no group of completions per prompt. What a
training step holds is the weights, the trainable parameters' gradients and optimizer state, the
activations of one micro-batch, and its logits (TRL's SFT/DPO trainers materialise them: fp32 logits
plus their gradient and the log-softmax temporaries). DPO runs chosen and rejected through the model
together (twice the sequences) and needs a reference policy: a frozen second copy for full
fine-tuning, nothing extra with LoRA (TRL disables the adapters for the reference pass).

Per-component formulas reuse finetune.memory's (activation bytes per layer are checked there against
what autograd saves). `measure_sft_step_peak` runs one real SFTTrainer step on CPU under the torch
profiler; benchmarks/bench_memory_trainers.py compares the two.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from finetune.errors import UserError

SFT_METHODS = ("full", "lora", "qlora")
LOGIT_COPIES = 3  # fp32 logits, their log-softmax, and the gradient flowing back through them
QLORA_BYTES = 0.5 + 4 / 64  # NF4 weights plus one fp32 absmax per 64-value block (bitsandbytes)


@dataclass
class TrainerEstimate:
    """Component bytes of one SFT / DPO step and why each is there."""

    trainer: str
    method: str
    components: dict[str, int] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)

    @property
    def peak(self) -> int:
        return sum(self.components.values())

    @property
    def above_weights(self) -> int:
        return self.peak - self.components.get("weights", 0)


def estimate_step(model: Any, trainer: str, method: str, *, seq_len: int, batch: int = 1, lora_r: int = 16,
                  checkpointing: bool = True, param_bytes: int = 2, mixed_precision: bool = True) -> TrainerEstimate:
    """Bytes of one SFT or DPO step for ``model`` (a finetune.models.ModelInfo)."""
    from finetune.memory import activation_bytes

    if trainer not in ("sft", "dpo"):
        raise UserError(f"trainer '{trainer}' is not sized here", where="--trainer",
                        fix="sft or dpo here; grpo uses `finetune memory` without --trainer")
    if method not in SFT_METHODS:
        raise UserError(f"method '{method}' is not one of {', '.join(SFT_METHODS)}", where="--method",
                        fix="pick full, lora or qlora")
    est = TrainerEstimate(trainer, method)
    c, why = est.components, est.reasons
    total = model.params
    if method == "qlora":
        c["weights"] = int(total * QLORA_BYTES)
        why["weights"] = "4-bit NF4 base weights + block scales"
    else:
        c["weights"] = total * param_bytes
        why["weights"] = f"{param_bytes} B per parameter"
    full = method == "full"
    trainable = total if full else model.lora_params(lora_r)
    grad_bytes = param_bytes if full else 4  # PEFT keeps adapters in fp32
    c["gradients"] = trainable * grad_bytes
    why["gradients"] = f"{trainable:,} trainable parameters × {grad_bytes} B"
    master = 4 if (full and mixed_precision and param_bytes == 2) else 0
    c["optimizer"] = trainable * (8 + master)
    why["optimizer"] = "AdamW moments (fp32)" + (" + fp32 master weights" if master else "")
    if trainer == "dpo":
        c["reference"] = total * param_bytes if full else 0
        why["reference"] = "a frozen copy of the policy" if full else "none: the reference pass disables the adapters"
    seqs = batch * (2 if trainer == "dpo" else 1)  # DPO: chosen and rejected in one forward
    c["activations"] = activation_bytes(model, seqs, seq_len, checkpointing) * param_bytes // 2
    why["activations"] = f"{seqs} sequence(s) × {seq_len} tokens, checkpointing {'on' if checkpointing else 'off'}"
    c["logits"] = LOGIT_COPIES * seqs * seq_len * model.vocab * 4
    why["logits"] = "fp32 logits, log-softmax and their gradient over every token"
    return est


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
