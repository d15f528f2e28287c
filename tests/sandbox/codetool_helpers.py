"""The code-interpreter example (examples/code-interpreter/env.py) on the tool-calling tiny model: a short
supervised warm-up on whole trajectories (``python(code="print(3+4)")``, its output, the answer) so the
model writes calls TRL parses and the sandbox runs."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "code-interpreter"
ENV_SOURCE = (EXAMPLE / "env.py").read_text()
ENV_CLASS = "CodeInterpreter"
# What the tiny chat template shows of the tool (its name and argument types): `python(code: string)`.
TOOL_SCHEMA = {"type": "function", "function": {
    "name": "python", "description": "Run a Python program and return what it prints.",
    "parameters": {"type": "object", "properties": {"code": {"type": "string", "description": "The code."}},
                   "required": ["code"]}}}


def question(a: int, b: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"What is {a} plus {b}?"}]


def rows(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    pairs = [(rng.randrange(10), rng.randrange(10)) for _ in range(n)]
    return [{"prompt": question(a, b), "answer": str(a + b)} for a, b in pairs]


def _trajectory(a: int, b: int, rng: random.Random) -> list[dict[str, Any]]:
    y = b if rng.random() > 0.3 else (b + rng.randrange(1, 10)) % 10  # some wrong copies: rewards vary
    call = {"type": "function", "function": {"name": "python", "arguments": {"code": f"print({a}+{y})"}}}
    return [*question(a, b), {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "name": "python", "content": f"{a + y}\n"},
            {"role": "assistant", "content": str(a + y)}]


def build_model(out: Path, steps: int = 80, seed: int = 0) -> Path:
    """The tool-calling tiny model (`python` and `code` in its vocabulary), warmed up on code-tool calls."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from finetune.tinymodel import build_tiny_model

    build_tiny_model(out, seed=seed, extra_words=("What", "is", "plus", "python", "code"), tools=True,
                     hidden=64, intermediate=128)
    torch.manual_seed(seed)
    rng = random.Random(seed)
    tok = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    optim = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        ids, labels = [], []
        for _ in range(16):
            a, b = rng.randrange(10), rng.randrange(10)
            prompt = tok.apply_chat_template(question(a, b), tools=[TOOL_SCHEMA], add_generation_prompt=True,
                                             tokenize=False)
            full = tok.apply_chat_template(_trajectory(a, b, rng), tools=[TOOL_SCHEMA], tokenize=False)
            p_ids, f_ids = tok(prompt)["input_ids"], tok(full)["input_ids"]
            ids.append(f_ids)
            labels.append([-100] * len(p_ids) + f_ids[len(p_ids):])
        width = max(len(x) for x in ids)
        pad = tok.pad_token_id
        loss = model(input_ids=torch.tensor([x + [pad] * (width - len(x)) for x in ids]),
                     attention_mask=torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in ids]),
                     labels=torch.tensor([x + [-100] * (width - len(x)) for x in labels])).loss
        loss.backward()
        optim.step()
        optim.zero_grad()
    model.save_pretrained(out)
    return out


def write_spec(run: Path, model: Path, n_rows: int = 8) -> Path:
    import yaml

    run.mkdir(parents=True)
    (run / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows(n_rows, seed=3)))
    (run / "env.py").write_text(ENV_SOURCE)
    spec = {"name": "code-tool", "model": str(model),
            "dataset": {"path": "train.jsonl", "prompt_column": "prompt", "answer_column": "answer"},
            "environment": {"file": "env.py", "class": ENV_CLASS, "max_tool_calling_iterations": 2},
            "rewards": [{"name": "solved", "type": "environment"}],
            "hardware": {"profile": "h100-80gb", "gpus": 1, "nodes": 1},
            "generation": {"max_prompt_length": 128, "max_completion_length": 64},
            "training": {"per_device_train_batch_size": 4, "gradient_accumulation_steps": 2, "logging_steps": 1},
            "inspection": {"prompts": 4, "per_prompt": 4, "min_read": 50, "probe_prompts": 2,
                           "base_success": {"prompts": 2, "samples_per_prompt": 4, "temperature": 0.3}}}
    path = run / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path
