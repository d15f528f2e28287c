"""`finetune memory --trainer sft`: the estimate beside one real SFTTrainer step's peak, side by side.

A Qwen2.5-0.5B config cut to 2 layers (vocabulary 8,192, random weights, fp32 on CPU), full fine-tuning,
AdamW, 2 sequences per micro-batch. The peak above the loaded model is read from the torch profiler's
memory timeline over two steps (the second holds the optimizer state through forward and backward).
Target: within 15% (the GRPO estimator's median target). Prints TARGET MET / TARGET MISSED.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path


def main() -> int:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from finetune.memory_trainers import estimate_step, measure_sft_step_peak
    from finetune.models import load_model_info, resolve_config_path
    from finetune.tinymodel import build_tiny_model

    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        tiny = build_tiny_model(Path(tmp) / "tiny")
        raw = json.loads(resolve_config_path("Qwen/Qwen2.5-0.5B").read_text())
        raw.update(num_hidden_layers=2, vocab_size=8192, bos_token_id=None, eos_token_id=None, pad_token_id=None)
        model_dir = Path(tmp) / "cut"
        torch.manual_seed(0)
        AutoModelForCausalLM.from_config(AutoConfig.for_model(**raw), dtype=torch.float32).save_pretrained(model_dir)
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(Path(tiny) / name, model_dir / name)
        info = load_model_info(str(model_dir))
        print(f"{'tokens × seqs':<16} {'measured MiB':>14} {'estimate MiB':>14} {'error':>8}")
        for seq_len, batch in ((256, 2), (512, 2)):
            measured = measure_sft_step_peak(str(model_dir), seq_len=seq_len, batch=batch)
            est = estimate_step(info, "sft", "full", seq_len=seq_len, batch=batch, checkpointing=False,
                                param_bytes=4, mixed_precision=False)
            err = est.above_weights / measured - 1
            worst = max(worst, abs(err))
            print(f"{seq_len:>6} × {batch:<7} {measured / 2**20:>14.1f} {est.above_weights / 2**20:>14.1f} "
                  f"{100 * err:>+7.1f}%")
    ok = worst <= 0.15
    print("TARGET MET" if ok else "TARGET MISSED", f"(largest |error| {100 * worst:.1f}%, target ≤ 15%)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
