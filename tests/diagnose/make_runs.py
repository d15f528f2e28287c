"""Produce REAL short GRPO runs of the tiny local model on CPU, for `finetune diagnose` to read.

Nothing here is a hand-typed number: each scenario trains the 2-layer model from
:func:`finetune.tinymodel.build_tiny_model` with TRL's GRPOTrainer and keeps the log history TRL
wrote. The scenarios are built to show one behaviour each:

* ``collapse`` — a reward with no task behind it (a fixed pseudo-random score per distinct text) and
  a very high learning rate: the policy sharpens onto whichever short string happened to score well
  and stops exploring; entropy falls steeply and the reward plateaus below its maximum (the failure
  DAPO's clip-higher targets). The collapse itself is chaotic: it happened for 10 of 11 (model
  seed, run seed) pairs tried; on the 11th the entropy lost only ~30% and the diagnosis said so.
* ``length`` — a correctness reward the model never earns plus a shaping reward that pays per
  character: completions grow to the cap, the total reward follows them, correctness stays flat —
  reward hacking carried by the shaping reward. With that reward taken out of its logs the
  same run is GRPO's length drift (Dr. GRPO): tests/diagnose/test_diagnose.py derives both readings.
* ``healthy`` — a format reward and a dense correctness reward (closeness of the opening
  ``<answer>N</answer>`` to the gold sum) at a moderate learning rate: the reward rises, entropy and
  length stay put, the KL stays small.
* ``moe`` — a few plain-GRPO steps of the tiny Qwen3-MoE: the structure alone requires GSPO.

Each run directory looks like a pipeline run directory: ``rewards.py`` (the reward module the run
trained with, exposing REWARD_FUNCS / REWARD_WEIGHTS / REWARD_META as the rendered one does),
``config/grpo_config.yaml`` (every GRPOConfig kwarg the run used) and ``train/trainer_state.json``.

    python tests/diagnose/make_runs.py OUT_DIR [--scenario collapse length healthy moe] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import yaml

SCENARIOS = ("collapse", "length", "healthy", "moe")

# The reward module each run trains with; written into the run directory and imported from there, so
# the file diagnose reads is the file the run used.
REWARDS_SOURCE = {
    "collapse": '''
import hashlib
from types import SimpleNamespace  # REWARD_META: objects with RewardMeta's attributes

def lottery(completions, **kwargs):
    """No task behind it: a fixed pseudo-random score per distinct text, whatever the prompt."""
    texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    return [hashlib.sha256(t.encode()).digest()[0] / 255.0 for t in texts]

REWARD_FUNCS = [lottery]
REWARD_WEIGHTS = [1.0]
REWARD_META = [SimpleNamespace(name="lottery", type="judge", role="correctness", threshold=1.0, min=0.0, max=1.0,
     weight=1.0, gated=False, episode=False)]
''',
    "length": '''
import re
from types import SimpleNamespace  # REWARD_META: objects with RewardMeta's attributes

def correctness(completions, answer, **kwargs):
    """1 when the number inside <answer>...</answer> equals the gold sum."""
    texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    out = []
    for t, a in zip(texts, answer):
        m = re.search(r"<answer>\\s*(-?\\d+)\\s*</answer>", t)
        out.append(1.0 if m and m.group(1) == str(a) else 0.0)
    return out

def verbosity(completions, **kwargs):
    """A shaping reward that pays for every character: the reward hack the diagnosis must catch."""
    texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    return [min(len(t), 96) / 96.0 for t in texts]

REWARD_FUNCS = [correctness, verbosity]
REWARD_WEIGHTS = [1.0, 1.0]
REWARD_META = [
    SimpleNamespace(name="correctness", type="exact_match", role="correctness", threshold=1.0, min=0.0, max=1.0,
     weight=1.0, gated=False, episode=False),
    SimpleNamespace(name="verbosity", type="judge", role="shaping", threshold=1.0, min=0.0, max=1.0,
     weight=1.0, gated=False, episode=False),
]
''',
    "healthy": '''
import re
from types import SimpleNamespace  # REWARD_META: objects with RewardMeta's attributes

# Both rewards read only the head of the completion: whatever follows the answer neither pays nor
# costs, so nothing here rewards length.
_HEAD = re.compile(r"\\s*<answer>\\s*(-?\\d+)\\s*</answer>")

def answer_format(completions, **kwargs):
    """1 when the completion opens with <answer>N</answer>."""
    texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    return [1.0 if _HEAD.match(t) else 0.0 for t in texts]

def closeness(completions, answer, **kwargs):
    """Dense correctness: 1 - |N - gold| / 10 for the opening <answer>N</answer>, else 0."""
    texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    out = []
    for t, a in zip(texts, answer):
        m = _HEAD.match(t)
        out.append(max(0.0, 1.0 - abs(int(m.group(1)) - int(a)) / 10.0) if m else 0.0)
    return out

REWARD_FUNCS = [answer_format, closeness]
REWARD_WEIGHTS = [0.5, 1.0]
REWARD_META = [
    SimpleNamespace(name="answer_format", type="format", role="format", threshold=1.0, min=0.0, max=1.0,
     weight=0.5, gated=False, episode=False),
    SimpleNamespace(name="closeness", type="exact_match", role="correctness", threshold=1.0, min=0.0, max=1.0,
     weight=1.0, gated=False, episode=False),
]
''',
}
REWARDS_SOURCE["moe"] = REWARDS_SOURCE["healthy"]

# The plain-GRPO algorithm fields, all explicit (explicit-fields contract): no run inherits TRL's defaults.
BASE_KWARGS = dict(
    loss_type="grpo", scale_rewards="group", multi_objective_aggregation="sum_then_normalize",
    importance_sampling_level="token", epsilon=0.2, epsilon_high=0.2, delta=None, num_iterations=1,
    steps_per_generation=None, num_generations=4, temperature=1.0, top_p=1.0, top_k=0, min_p=None,
    mask_truncated_completions=False, top_entropy_quantile=1.0, vllm_importance_sampling_correction=False,
    max_completion_length=16, gradient_checkpointing=False,
    per_device_train_batch_size=8, gradient_accumulation_steps=1, lr_scheduler_type="constant",
    warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0, logging_steps=1,
)
SCENARIO_KWARGS = {
    "collapse": dict(learning_rate=1e-2, beta=0.01, max_steps=50, max_completion_length=16),
    "length": dict(learning_rate=1e-3, beta=0.01, max_steps=24, max_completion_length=32),
    # Four prompts a step and 80 steps, so the reward's rise stands well out of the sampling noise; a
    # small step and a firm KL leash (beta 0.08) keep the 2-layer policy near its start. Checked healthy
    # on 8 of 8 seeds; lr 5e-4 / beta 0.04 drifted into KL > 1 on 2 of 8 (the tiny model is touchy).
    "healthy": dict(learning_rate=3e-4, beta=0.08, max_steps=80, per_device_train_batch_size=16),
    "moe": dict(learning_rate=1e-3, beta=0.01, max_steps=8),
}


def prompts_dataset(n: int = 64, seed: int = 0):
    """Small arithmetic prompts in chat form, with the gold answer as a column."""
    import random

    from datasets import Dataset

    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        a, b = rng.randint(0, 9), rng.randint(0, 9)
        rows.append({"prompt": [{"role": "user", "content": f"What is {a} plus {b}?"}], "answer": str(a + b)})
    return Dataset.from_list(rows)


def _import_rewards(run_dir: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"rewards_{run_dir.name}_{id(run_dir)}", run_dir / "rewards.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_run(scenario: str, run_dir: str | Path, model_dir: str | Path, seed: int = 0,
             **overrides) -> Path:
    """Train one scenario into ``run_dir``; return the run directory. ``overrides`` patch GRPOConfig."""
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; one of {SCENARIOS}")
    from trl import GRPOConfig, GRPOTrainer

    run_dir = Path(run_dir)
    (run_dir / "config").mkdir(parents=True, exist_ok=True)
    (run_dir / "rewards.py").write_text(REWARDS_SOURCE[scenario].lstrip())
    rewards = _import_rewards(run_dir)

    kwargs = {**BASE_KWARGS, **SCENARIO_KWARGS[scenario], **overrides, "seed": seed,
              "reward_weights": list(rewards.REWARD_WEIGHTS)}
    # What a rendered grpo_config.yaml holds: the run's kwargs, with the model and reward import paths.
    config_doc = {"model_name_or_path": str(model_dir), **kwargs,
                  "reward_funcs": [f"rewards.{f.__name__}" for f in rewards.REWARD_FUNCS]}
    (run_dir / "config" / "grpo_config.yaml").write_text(yaml.safe_dump(config_doc, sort_keys=False))

    train_dir = run_dir / "train"
    args = GRPOConfig(output_dir=str(train_dir), use_cpu=True, bf16=False, report_to="none",
                      save_strategy="no", disable_tqdm=True, data_seed=seed, **kwargs)
    trainer = GRPOTrainer(model=str(model_dir), reward_funcs=list(rewards.REWARD_FUNCS), args=args,
                          train_dataset=prompts_dataset(seed=seed))
    trainer.train()
    # save_strategy "no" writes no trainer_state.json; keep the log history ourselves (CPU facts).
    trainer.state.save_to_json(str(train_dir / "trainer_state.json"))
    return run_dir


def warm_start(model_dir: str | Path, out_dir: str | Path, steps: int = 30, lr: float = 3e-3,
               seed: int = 0) -> Path:
    """A few supervised steps on "<answer>{a+b}</answer>" so the policy ends its completions.

    A randomly initialised model almost never samples the end token (most completions would hit the
    length cap), which is not what a GRPO run starts from. Thirty steps teach it the answer format
    and to stop, with its token entropy still around 1.5 nats: a barely-tuned "SFT checkpoint".
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    rows = prompts_dataset(n=steps * 32, seed=seed + 1)
    for step in range(steps):
        batch = rows.select(range(step * 32, (step + 1) * 32))
        prompts = [tok.apply_chat_template(r["prompt"], add_generation_prompt=True, tokenize=False) for r in batch]
        prompt_ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
        target_ids = [tok(f"<answer>{r['answer']}</answer>", add_special_tokens=False)["input_ids"]
                      + [tok.eos_token_id] for r in batch]
        width = max(len(p) + len(t) for p, t in zip(prompt_ids, target_ids))
        ids = torch.full((len(batch), width), tok.pad_token_id)
        labels = torch.full((len(batch), width), -100)
        for i, (p, t) in enumerate(zip(prompt_ids, target_ids)):
            ids[i, : len(p) + len(t)] = torch.tensor(p + t)
            labels[i, len(p): len(p) + len(t)] = torch.tensor(t)
        model(input_ids=ids, attention_mask=(ids != tok.pad_token_id).long(), labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    out = Path(out_dir)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


# Which starting policy each scenario trains: the raw random model (entropy near log|V|, so a collapse
# has room to show), the warm-started one (it ends its completions), or the raw Qwen3-MoE.
START_MODEL = {"collapse": "raw", "length": "warm", "healthy": "warm", "moe": "moe"}


def make_runs(out_dir: str | Path, scenarios=SCENARIOS, seed: int = 0, raw_model: str | Path | None = None,
              moe_model: str | Path | None = None) -> dict[str, Path]:
    """Train each scenario into ``out_dir/<scenario>``; return {scenario: run_dir}.

    ``raw_model`` / ``moe_model`` reuse already-built tiny models (the test session's fixtures);
    otherwise they are built here with ``seed``. The warm start is always derived here.
    """
    from finetune.tinymodel import build_tiny_model

    out = Path(out_dir)
    models: dict[str, Path] = {}

    def model_for(kind: str) -> Path:
        if kind not in models:
            if kind == "raw":
                models[kind] = Path(raw_model) if raw_model else build_tiny_model(out / "models" / "raw", seed=seed)
            elif kind == "moe":
                models[kind] = Path(moe_model) if moe_model else build_tiny_model(out / "models" / "moe", moe=True,
                                                                                  seed=seed)
            else:
                models[kind] = warm_start(model_for("raw"), out / "models" / "warm", seed=seed)
        return models[kind]

    return {s: make_run(s, out / s, model_for(START_MODEL[s]), seed=seed) for s in scenarios}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--scenario", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    out = Path(args.out_dir) / f"seed{args.seed}"
    for scenario in args.scenario:
        t0 = time.perf_counter()
        run = make_runs(out, [scenario], seed=args.seed,
                        raw_model=out / "models" / "raw" if (out / "models" / "raw" / "config.json").is_file() else None)[scenario]
        state = json.loads((run / "train" / "trainer_state.json").read_text())
        print(f"{scenario}: {len(state['log_history'])} log entries in {time.perf_counter() - t0:.1f}s -> {run}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
