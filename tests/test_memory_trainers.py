"""`finetune memory --trainer sft|dpo`: SFT / DPO steps sized without generation, checked against a real
SFTTrainer step's peak (torch profiler, CPU) within the GRPO estimator's tolerance (15% median target)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from finetune.memory_trainers import estimate_step, measure_sft_step_peak
from finetune.models import load_model_info

TOLERANCE = 0.15  # the GRPO estimator's median target (benchmarks/bench_memory.py)


def test_components_follow_the_trainer_and_method(cli):
    info = load_model_info("meta-llama/Llama-3.1-8B")
    full = estimate_step(info, "sft", "full", seq_len=1024)
    lora = estimate_step(info, "sft", "lora", seq_len=1024)
    qlora = estimate_step(info, "sft", "qlora", seq_len=1024)
    dpo_full = estimate_step(info, "dpo", "full", seq_len=1024)
    dpo_lora = estimate_step(info, "dpo", "lora", seq_len=1024)
    assert qlora.components["weights"] < lora.components["weights"] == full.components["weights"]
    assert lora.components["optimizer"] < full.components["optimizer"] / 100
    assert dpo_full.components["reference"] == full.components["weights"] and dpo_lora.components["reference"] == 0
    assert dpo_lora.components["activations"] == 2 * lora.components["activations"]  # chosen + rejected
    r = cli("memory", "--model", "Qwen/Qwen2.5-7B", "--trainer", "sft", "--method", "qlora", "--json")
    assert r.code == 0, r.err
    out = json.loads(r.out)
    assert out["trainer"] == "sft" and not any("vllm" in k or "kv" in k for k in out["components"])
    r = cli("memory", "examples/spec.yaml", "--trainer", "sft")
    assert r.code == 2 and "--model" in r.err


@pytest.mark.slow
def test_sft_estimate_matches_a_real_sft_step_peak(tmp_path):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from finetune.models import resolve_config_path
    from finetune.tinymodel import build_tiny_model

    tiny = build_tiny_model(tmp_path / "tiny")  # its WordLevel tokenizer
    raw = json.loads(resolve_config_path("Qwen/Qwen2.5-0.5B").read_text())
    raw.update(num_hidden_layers=2, vocab_size=8192, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    model_dir = tmp_path / "cut"
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(AutoConfig.for_model(**raw), dtype=torch.float32).save_pretrained(model_dir)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(Path(tiny) / name, model_dir / name)
    measured = measure_sft_step_peak(str(model_dir), seq_len=512, batch=2)
    est = estimate_step(load_model_info(str(model_dir)), "sft", "full", seq_len=512, batch=2, checkpointing=False,
                        param_bytes=4, mixed_precision=False)
    assert abs(est.above_weights / measured - 1) <= TOLERANCE, (est.above_weights / 2**20, measured / 2**20)


# LoRA's gradient and optimizer-state terms are sized on the modules target_modules names (finetune.loratargets),
# checked against what the real TRL 1.16 trainers hand to the optimizer once PEFT has wrapped the model
LORA_TARGETS: list[str | list[str]] = [["q_proj", "v_proj"], "all-linear"]


def _trainer_with_lora(trainer: str, model_dir: Path, out: Path, target_modules: str | list[str] | None) -> Any:
    """A real TRL 1.16 SFT / DPO trainer on the tiny model, bf16 base, LoRA r=8 (None: full fine-tuning)."""
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer

    tok = AutoTokenizer.from_pretrained(model_dir)
    words = [w for w in tok.get_vocab() if w.isalpha()][:8]
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
    peft_config = None if target_modules is None else LoraConfig(r=8, lora_alpha=16, target_modules=target_modules,
                                                                  task_type="CAUSAL_LM")
    common: dict[str, Any] = dict(output_dir=str(out), use_cpu=True, report_to=[], bf16=False, max_length=32,
                                  per_device_train_batch_size=1, save_strategy="no", disable_tqdm=True)
    if trainer == "sft":
        data = Dataset.from_dict({"text": [" ".join(words)] * 2})
        return SFTTrainer(model=model, args=SFTConfig(**common), train_dataset=data, processing_class=tok,
                          peft_config=peft_config)
    pairs = {"prompt": [" ".join(words[:3])] * 2, "chosen": [" ".join(words[3:5])] * 2,
             "rejected": [" ".join(words[5:])] * 2}
    return DPOTrainer(model=model, args=DPOConfig(**common), train_dataset=Dataset.from_dict(pairs),
                      processing_class=tok, peft_config=peft_config)


@pytest.mark.slow
@pytest.mark.parametrize("trainer", ["sft", "dpo"])
def test_lora_terms_equal_what_the_trainer_optimizes(trainer: str, tiny_model_dir: Path, tmp_path: Path) -> None:
    import torch

    info = load_model_info(str(tiny_model_dir))
    trainable = {}
    for target_modules in LORA_TARGETS:
        built = _trainer_with_lora(trainer, tiny_model_dir, tmp_path / str(len(trainable)), target_modules)
        params = [p for p in built.model.parameters() if p.requires_grad]
        peft_count, _ = built.model.get_nb_trainable_parameters()
        assert sum(p.numel() for p in params) == peft_count
        assert {p.dtype for p in params} == {torch.float32}  # PEFT upcasts adapters on a bf16 base: 4 B each
        est = estimate_step(info, trainer, "lora", seq_len=32, lora_r=8, lora_target_modules=target_modules)
        assert est.trainable == peft_count
        assert est.components["gradients"] == 4 * peft_count and est.components["optimizer"] == 8 * peft_count
        if trainer == "dpo":  # TRL 1.16 with a peft_config: no second model; the reference disables the adapters
            assert built.ref_model is None and est.components["reference"] == 0
        trainable[str(target_modules)] = peft_count
    assert trainable["['q_proj', 'v_proj']"] < trainable["all-linear"]
    with pytest.raises(ValueError, match="lm_head"):  # why the estimate refuses the head (see the CLI test)
        _trainer_with_lora(trainer, tiny_model_dir, tmp_path / "head", ["lm_head"])
    if trainer == "dpo":  # full fine-tuning: TRL loads a frozen second copy, sized as the policy's weights
        full = _trainer_with_lora(trainer, tiny_model_dir, tmp_path / "full", None)
        assert full.ref_model is not None and full.ref_model is not full.model  # run under no_grad: no gradients
        ref_bytes = sum(p.numel() * p.element_size() for p in full.ref_model.parameters())
        assert estimate_step(info, "dpo", "full", seq_len=32).components["reference"] == ref_bytes


def test_cli_refuses_target_modules_the_model_lacks(cli: Any, tiny_model_dir: Path) -> None:
    ok = cli("memory", "--model", str(tiny_model_dir), "--trainer", "dpo", "--target-modules", "q_proj,v_proj",
             "--json")
    assert ok.code == 0, ok.err
    info = load_model_info(str(tiny_model_dir))
    assert json.loads(ok.out)["components"]["gradients"] == 4 * info.lora_params(16, ["q_proj", "v_proj"])
    for bad, said in (("q_proj,nope", "'nope'"), ("lm_head", "SFTTrainer computes log-probs")):
        r = cli("memory", "--model", str(tiny_model_dir), "--trainer", "sft", "--target-modules", bad)
        assert r.code == 2 and r.out == "", (r.code, r.out)
        assert said in r.err and "--target-modules" in r.err and "Traceback" not in r.err
        assert len(r.err.strip().splitlines()) == 1, r.err


def test_qlora_weights_are_the_grpo_estimates_formula() -> None:
    # one formula for a 4-bit base: bitsandbytes quantizes every nn.Linear but the head; embeddings stay bf16
    from finetune.hardware import resolve_hardware
    from finetune.memory.formulas import GIB
    from finetune.memory.run import estimate_for_model

    info = load_model_info("Qwen/Qwen2.5-7B")
    _, grpo = estimate_for_model(info, resolve_hardware({"profile": "h100-80gb"}), method="qlora")
    sft = estimate_step(info, "sft", "qlora", seq_len=1024)
    assert sft.components["weights"] == pytest.approx(grpo.gib_of("policy_weights") * GIB, abs=1)
    embeddings = info.params - info.quantizable_params
    assert embeddings > 10**9 and sft.components["weights"] > embeddings * 2  # Qwen2.5-7B: 1.09 B untied embeddings


def test_sft_honours_gpus_and_zero_as_placement_lays_them_out(cli: Any) -> None:
    """PEFT's QLoRA + DeepSpeed ZeRO-3 example (a 70B model on 2 × 40 GB): with --gpus 2 --zero 3 the weights,
    gradients and optimizer state are partitioned — and the 4-bit model still loads whole on each rank first
    (transformers skips zero.Init for a quantized model), which is the peak — so it fits; one GPU does not."""
    import json

    base = ["memory", "--model", "meta-llama/Llama-3.1-70B", "--trainer", "sft", "--method", "qlora", "--profile",
            "a100-40gb", "--seq-len", "2048", "--json"]
    one, two = (json.loads(cli(*base, *extra).out) for extra in ([], ["--gpus", "2", "--zero", "3"]))
    assert (one["training_processes"], one["zero_stage"], one["verdict"]) == (1, 0, "does not fit")
    assert (two["training_processes"], two["zero_stage"], two["verdict"]) == (2, 3, "fits")
    assert two["components"]["weights"] * 2 == pytest.approx(one["components"]["weights"], abs=2)
    assert two["peak_bytes"] == two["load_bytes"] > two["step_bytes"]  # loading whole binds, not the step
    ddp = json.loads(cli(*base, "--gpus", "2", "--zero", "0").out)  # plain DDP shards nothing
    assert ddp["components"] == one["components"] and ddp["training_processes"] == 2
