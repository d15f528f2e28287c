"""The demo's tool task: a calculator environment the tiny model learns to call through TRL's
``environment_factory``.

Task: ``What is 3 plus 4?`` with columns ``a``, ``b``. The environment (:data:`ENV_SOURCE`, written as the
run's ``env.py``) exposes one tool, ``add(a, b)``; its ``get_reward()`` is 1 when ``add`` was called with
the row's two numbers. The tiny model (:func:`finetune.tinymodel.build_tiny_model` with ``tools=True``:
Qwen2.5's chat template, so TRL parses ``<tool_call>`` blocks as on Qwen) gets a few seconds of *noisy*
supervised warm-up on whole trajectories — call, tool result, final answer — where some targets call with a
wrong number or answer without calling, so that GRPO has something to sharpen. :data:`BROKEN_ENV_SOURCE` is
the hack the gate must catch: its reward is reachable by any call of ``add``, whatever the arguments.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENV_CLASS = "Calculator"
ENV_SOURCE = '''"""A calculator the model must use: the episode is solved when add() ran on the row's two numbers."""


class Calculator:
    def reset(self, a=0, b=0, **row):
        self.a, self.b, self.calls = int(a), int(b), []

    def add(self, a: int, b: int):
        """Add two integers.

        Args:
            a: The first integer.
            b: The second integer.
        """
        self.calls.append((a, b))
        return a + b

    def get_reward(self) -> float:
        return 1.0 if sorted([self.a, self.b]) in [sorted(c) for c in self.calls] else 0.0
'''
# The hack: any call of add() counts, so "the right function with wrong arguments" is rewarded.
BROKEN_ENV_SOURCE = ENV_SOURCE.replace(
    "return 1.0 if sorted([self.a, self.b]) in [sorted(c) for c in self.calls] else 0.0",
    "return 1.0 if self.calls else 0.0")
# What TRL shows the model for Calculator.add (transformers' get_json_schema of the method; no return annotation,
# so no "return" key): the warm-up renders the very same prompt.
TOOL_SCHEMA = {"type": "function", "function": {
    "name": "add", "description": "Add two integers.",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer", "description": "The first integer."},
                                                    "b": {"type": "integer", "description": "The second integer."}},
                   "required": ["a", "b"]}}}
EXTRA_WORDS = ("What", "is", "plus", "add", "Add", "two", "integers", "a", "b", "first", "second", "The")


def question(a: int, b: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"What is {a} plus {b}?"}]


def rows(n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` prompts with their columns (single digits: the tiny tokenizer reads digits one by one)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = rng.randrange(10), rng.randrange(10)
        out.append({"prompt": question(a, b), "a": a, "b": b,
                    "expected_call": json.dumps({"name": "add", "arguments": {"a": a, "b": b}})})
    return out


@dataclass(frozen=True)
class ToolWarmup:
    steps: int = 250
    batch: int = 16
    lr: float = 3e-3
    wrong_share: float = 0.35  # targets that call add with a wrong number
    skip_share: float = 0.15  # targets that answer without calling
    seed: int = 0
    anneal: float = 0.4  # the share of the steps over which the learning rate falls linearly to zero
    # 128 wide: at 64 the copy of the two numbers into the call has not formed after 300 steps
    hidden: int = 128
    intermediate: int = 256


def _trajectory(a: int, b: int, rng: random.Random, recipe: ToolWarmup) -> list[dict[str, Any]]:
    roll = rng.random()
    if roll < recipe.skip_share:
        return [*question(a, b), {"role": "assistant", "content": str(rng.randrange(19))}]
    x, y = a, b
    if roll < recipe.skip_share + recipe.wrong_share:
        y = (b + rng.randrange(1, 10)) % 10
    call = {"type": "function", "function": {"name": "add", "arguments": {"a": x, "b": y}}}
    return [*question(a, b), {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "name": "add", "content": str(x + y)},
            {"role": "assistant", "content": str(x + y)}]


def warm_up(model_dir: Path, recipe: ToolWarmup = ToolWarmup(),
            progress: Callable[[int, float], None] | None = None) -> float:
    """Noisy supervised warm-up on whole trajectories (loss on everything after the prompt); returns the
    last loss. Seeded and single-threaded: the same seed gives the same weights."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(recipe.seed)
    rng = random.Random(recipe.seed)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    optim = torch.optim.AdamW(model.parameters(), lr=recipe.lr)
    # At a constant 3e-3 the loss spikes now and then; saving on a spike (step 250 under AVX-512 kernels once
    # left a model that never closed its call's JSON) made the demo depend on the CPU. Annealing the rate to
    # zero over the last part lands the saved weights in a settled state whatever the kernels.
    tail = recipe.anneal * recipe.steps
    sched = torch.optim.lr_scheduler.LambdaLR(optim, lambda i: min(1.0, (recipe.steps - i) / tail))
    model.train()
    loss_value = float("nan")
    cache: dict[str, tuple[list[int], list[int]]] = {}  # the chat template renders each trajectory once

    def encode(a: int, b: int, messages: list[dict[str, Any]]) -> tuple[list[int], list[int]]:
        key = json.dumps(messages, sort_keys=True)
        if key not in cache:
            prompt = tok.apply_chat_template(question(a, b), tools=[TOOL_SCHEMA], add_generation_prompt=True,
                                             tokenize=False)
            full = tok.apply_chat_template(messages, tools=[TOOL_SCHEMA], tokenize=False)
            p_ids, f_ids = tok(prompt)["input_ids"], tok(full)["input_ids"]
            cache[key] = (f_ids, [-100] * len(p_ids) + f_ids[len(p_ids):])
        return cache[key]

    for step in range(recipe.steps):
        ids, labels = [], []
        for _ in range(recipe.batch):
            a, b = rng.randrange(10), rng.randrange(10)
            f_ids, label = encode(a, b, _trajectory(a, b, rng, recipe))
            ids.append(f_ids)
            labels.append(label)
        width = max(len(x) for x in ids)
        pad = tok.pad_token_id
        input_ids = torch.tensor([x + [pad] * (width - len(x)) for x in ids])
        label_ids = torch.tensor([x + [-100] * (width - len(x)) for x in labels])
        mask = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in ids])
        loss = model(input_ids=input_ids, attention_mask=mask, labels=label_ids).loss
        loss.backward()
        optim.step()
        sched.step()
        optim.zero_grad()
        loss_value = float(loss.detach())
        if progress is not None:
            progress(step + 1, loss_value)
    model.save_pretrained(model_dir)
    return loss_value


def build_base(out: Path, recipe: ToolWarmup = ToolWarmup()) -> Path:
    """The tool-calling tiny model before its warm-up."""
    from finetune.tinymodel import build_tiny_model

    return build_tiny_model(out, seed=recipe.seed, extra_words=EXTRA_WORDS, tools=True, hidden=recipe.hidden,
                            intermediate=recipe.intermediate)


def build_model(out: Path, recipe: ToolWarmup = ToolWarmup()) -> Path:
    """The tool-calling tiny model, built and warmed up in ``out``."""
    warm_up(build_base(out, recipe), recipe)
    return out
