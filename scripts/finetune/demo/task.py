"""The demo's embedded task and its tiny local model: copy three digits into ``<answer>...</answer>``.

Task: ``Copy the digits 4 7 1`` → ``<answer>471</answer>``. All 1000 digit strings are split
deterministically into training prompts and held-out prompts that neither the warm-up nor GRPO sees.

Model: a 2-layer Qwen3 built by :func:`finetune.tinymodel.build_tiny_model`, then given a few seconds
of supervised warm-up on a *noisy* version of the task, so that — like a real SFT checkpoint — it
knows the format and sometimes succeeds. Like a real checkpoint on a real dataset, its difficulty
differs from prompt to prompt, decided by the first digit (:attr:`WarmupRecipe.tiers`): prompts it has
mastered (almost always copied), prompts it only partly knows (most warm-up targets reverse the digits,
some corrupt one, drop the tags or hedge ``<answer>471 or 174</answer>``, a minority copy correctly),
and prompts beyond it (never copied: reversed, rotated or corrupted). Sampled at the spec's temperature
its success lies between 5% and 60% (RL's precondition: it sometimes succeeds), which GRPO can then
sharpen; the mastered and the beyond prompts give all-equal groups that teach nothing, which is what
`finetune data filter` removes. Everything is seeded and single-threaded, so the same seed builds the
same weights.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from finetune import jsonio

if TYPE_CHECKING:
    pass

INSTRUCTION = "Copy the digits"
N_DIGITS = 3
HELDOUT_SHARE = 0.2
SPLIT_SEED = 7


def digits_prompt(digits: str) -> list[dict[str, str]]:
    """The conversational prompt for ``digits`` (the chat template is applied by sampler and trainer)."""
    return [{"role": "user", "content": f"{INSTRUCTION} " + " ".join(digits)}]


def splits(seed: int = SPLIT_SEED) -> tuple[list[str], list[str]]:
    """(training digit strings, held-out digit strings): a fixed shuffle of all 10**N_DIGITS strings."""
    strings = [f"{i:0{N_DIGITS}d}" for i in range(10 ** N_DIGITS)]
    random.Random(seed).shuffle(strings)
    n_held = int(len(strings) * HELDOUT_SHARE)
    return strings[n_held:], strings[:n_held]


def write_dataset(path: str | Path, strings: list[str]) -> Path:
    """JSONL rows ``{"prompt": [messages], "answer": digits}`` (prompt column + gold answer column)."""
    return jsonio.write_jsonl(path, [{"prompt": digits_prompt(s), "answer": s} for s in strings])


# ----------------------------------------------------------------------------------------------
# the warm-up: a noisy supervised version of the task


@dataclass(frozen=True)
class WarmupRecipe:
    """How the demo model is built; recorded beside the weights (DEMO_MODEL.json)."""

    seed: int = 0
    hidden: int = 128
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    intermediate: int = 256
    steps: int = 250
    batch: int = 32
    learning_rate: float = 3e-3
    warmup_steps: int = 20
    # per difficulty tier: (the prompts' first digits, share of warm-up targets of each kind, summing to 1).
    # A real dataset is heterogeneous in the same way (a checkpoint masters some problems and never solves
    # others); with one mixture for every prompt, a 0/k or k/k prompt would only be sampling luck and an
    # offline difficulty filter could not help (its report says so: the dispersion of pass rates).
    tiers: dict[str, tuple[str, dict[str, float]]] = field(default_factory=lambda: {
        "mastered": ("012", {"copy": 0.97, "corrupt_one_digit": 0.03}),
        "partial": ("3456", {"copy": 0.35, "reverse": 0.45, "corrupt_one_digit": 0.10, "no_tags": 0.05,
                             "hedge": 0.05}),
        "beyond": ("789", {"reverse": 0.6, "rotate": 0.3, "corrupt_one_digit": 0.1})})

    def mix_for(self, digits: str) -> dict[str, float]:
        """The warm-up mixture of the tier ``digits`` belongs to (by its first digit)."""
        return next(mix for firsts, mix in self.tiers.values() if digits[0] in firsts)

    def tier_of(self, digits: str) -> str:
        return next(name for name, (firsts, _) in self.tiers.items() if digits[0] in firsts)


def warmup_target(digits: str, rng: random.Random, mix: dict[str, float]) -> tuple[str, str]:
    """(kind, completion text) drawn from the noisy mixture.

    >>> warmup_target("471", random.Random(0), {"rotate": 1.0})
    ('rotate', '<answer>714</answer>')
    """
    u, acc, kind = rng.random(), 0.0, "copy"
    for kind, share in mix.items():  # noqa: B007 - the kind drawn is the one the loop stops on
        acc += share
        if u < acc:
            break
    if kind == "copy":
        return kind, f"<answer>{digits}</answer>"
    if kind == "reverse":
        return kind, f"<answer>{digits[::-1]}</answer>"
    if kind == "rotate":
        return kind, f"<answer>{digits[1:] + digits[0]}</answer>"
    if kind == "corrupt_one_digit":
        chars = list(digits)
        i = rng.randrange(len(chars))
        chars[i] = str((int(chars[i]) + rng.randrange(1, 10)) % 10)
        return kind, f"<answer>{''.join(chars)}</answer>"
    if kind == "no_tags":
        return kind, f"Answer {digits}"
    if kind == "hedge":
        return kind, f"<answer>{digits} or {digits[::-1]}</answer>"
    raise ValueError(f"unknown warm-up target kind {kind!r}")


def build_demo_model(out_dir: str | Path, train_strings: list[str], recipe: WarmupRecipe = WarmupRecipe(),
                     progress: Callable[[int, int], None] | None = None) -> Path:
    """Build the tiny model, warm it up on the noisy task, save it to ``out_dir``; return the folder."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from finetune.tinymodel import build_tiny_model

    started = time.perf_counter()
    out = Path(out_dir)
    build_tiny_model(out, hidden=recipe.hidden, layers=recipe.layers, heads=recipe.heads, kv_heads=recipe.kv_heads,
                     intermediate=recipe.intermediate, seed=recipe.seed)
    tok = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out)
    torch.manual_seed(recipe.seed)
    rng = random.Random(recipe.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.learning_rate, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / recipe.warmup_steps))
    model.train()
    losses = []
    for step in range(recipe.steps):
        texts, prompt_lens = [], []
        for _ in range(recipe.batch):
            digits = rng.choice(train_strings)
            prompt = cast(str, tok.apply_chat_template(digits_prompt(digits), tokenize=False,
                                                       add_generation_prompt=True))
            _, target = warmup_target(digits, rng, recipe.mix_for(digits))
            texts.append(prompt + target + tok.eos_token)
            prompt_lens.append(len(tok(prompt, add_special_tokens=False)["input_ids"]))
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        labels = enc["input_ids"].clone()
        labels[enc["attention_mask"] == 0] = -100
        for i, n in enumerate(prompt_lens):  # learn the completion only, as SFT on prompt/completion does
            labels[i, :n] = -100
        loss = model(**enc, labels=labels).loss
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad()
        losses.append(loss.item())
        if progress:
            progress(step + 1, recipe.steps)
    model.eval()
    model.save_pretrained(out)
    tok.save_pretrained(out)
    jsonio.write_json(out / "DEMO_MODEL.json", {
        "built_by": "finetune.demo.task.build_demo_model",
        "task": f"{INSTRUCTION} (3 digits) -> <answer>DIGITS</answer>",
        "recipe": asdict(recipe), "train_prompts": len(train_strings),
        "loss_first": losses[0], "loss_last": sum(losses[-10:]) / min(10, len(losses)),
        "seconds": round(time.perf_counter() - started, 2)})
    return out


# ----------------------------------------------------------------------------------------------
# held-out evaluation: the rendered rewards and the independent checker on fresh samples


@dataclass
class HeldoutScore:
    """Mean scores of ``k`` samples per held-out prompt at the training temperature."""

    prompts: int
    samples: int
    temperature: float
    seed: int
    reward: float  # weighted total, as TRL's `reward` metric sums it
    per_reward: dict[str, float]
    checker_accept: float  # the independent checker's acceptance rate
    examples: list[dict[str, Any]]


def heldout_from_eval(samples: list[dict[str, Any]], strings: list[str], temperature: float, seed: int,
                      rewards: list[tuple[str, float]]) -> HeldoutScore:
    """One side of `finetune eval`'s samples (their scores by the gated rewards) read as the demo reports them,
    with the independent checker's acceptance on the same completions; ``rewards``: (name, weight)."""
    from finetune.demo import checker as demo_checker

    per_reward = {}
    for name, _ in rewards:
        vals = [s["scores"].get(name) for s in samples if s["scores"].get(name) is not None]
        per_reward[name] = sum(vals) / len(vals) if vals else 0.0
    checks = [demo_checker.check(s["prompt"], s["completion"]) for s in samples]
    examples = [{"prompt": s["prompt"][0]["content"], "completion": s["completion"], "checker": c.note}
                for s, c in list(zip(samples, checks))[:: max(1, len(samples) // 6)][:6]]
    return HeldoutScore(prompts=len(strings), samples=len(samples), temperature=temperature, seed=seed,
                        reward=sum(float(s["total"]) for s in samples) / len(samples), per_reward=per_reward,
                        checker_accept=sum(c.accept for c in checks) / len(checks), examples=examples)
