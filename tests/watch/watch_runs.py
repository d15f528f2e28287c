"""REAL tiny GRPO runs launched through the rendered config (train.py + config/watch.py + launch.sh).

Each run directory is rendered by `finetune config render --no-gate` (the test-only path), then given
the reward module of a make_runs.py scenario — ``length`` (a correctness reward the tiny model never
earns plus a shaping reward paying per character: the issue's reward hack), ``format`` (the same hack
beside a format reward that wants the answer and nothing else) or ``healthy`` (a format reward and a
dense correctness reward) — and that scenario's learning rate and beta written into
train.py's GRPOConfig: the base recipe's lr 5e-7 moves nothing in a few dozen steps, and a rendered
lr needs a PASS gate plus a healthy diagnosis, which a test-only render does not have. Everything
else — the inspection callback, STOPPED.json, launch.sh's exit status — is the rendered code as is.

Used by tests/watch/test_watch_runs.py and benchmarks/bench_false_stop.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

TESTS = Path(__file__).resolve().parents[1]
for sub in ("diagnose", "."):  # make_runs; render_fixtures (tests/)
    if str(TESTS / sub) not in sys.path:
        sys.path.insert(0, str(TESTS / sub))

import make_runs  # noqa: E402  (tests/diagnose/make_runs.py: the scenarios' reward modules)

# name, spec reward (what the renderer validates) for each reward of the scenario's module
SPEC_REWARDS: dict[str, list[dict[str, Any]]] = {
    "length": [{"name": "correctness", "type": "exact_match", "answer_column": "answer", "extract": "answer_tag",
                "weight": 1.0},
               {"name": "verbosity", "type": "length_penalty", "overlong_buffer": 8, "weight": 1.0}],
    "healthy": [{"name": "answer_format", "type": "format", "pattern": "answer_tag", "weight": 0.5},
                {"name": "closeness", "type": "exact_match", "answer_column": "answer", "extract": "answer_tag",
                 "weight": 1.0}],
}
# make_runs.py's settings per scenario (tests/diagnose: checked to hack / to stay healthy)
SPEC_REWARDS["rendered"] = SPEC_REWARDS["healthy"]
# the length hack with a format reward beside it (the answer and nothing else): as completions grow the
# top-paid ones stop being well-formed (the share of top-reward completions failing the format jumps)
SPEC_REWARDS["format"] = [SPEC_REWARDS["healthy"][0], *SPEC_REWARDS["length"]]
FORMAT_SOURCE = make_runs.REWARDS_SOURCE["length"].replace(
    "REWARD_FUNCS = [correctness, verbosity]",
    "_HEAD = re.compile(r\"\\s*<answer>\\s*(-?\\d+)\\s*</answer>\")\n\n"
    "def answer_format(completions, **kwargs):\n"
    "    texts = [c[0][\"content\"] if isinstance(c, list) else c for c in completions]\n"
    "    return [1.0 if _HEAD.fullmatch(t.strip()) else 0.0 for t in texts]\n\n"
    "REWARD_FUNCS = [answer_format, correctness, verbosity]").replace(
    "REWARD_WEIGHTS = [1.0, 1.0]", "REWARD_WEIGHTS = [0.5, 1.0, 1.0]").replace(
    "REWARD_META = [\n", "REWARD_META = [\n    SimpleNamespace(name=\"answer_format\", type=\"format\", role=\"format\", "
    "threshold=1.0, min=0.0, max=1.0, weight=0.5, gated=False, episode=False),\n")
SCENARIO: dict[str, dict[str, Any]] = {
    # the renderer's own rewards.py and the base recipe: nothing swapped, nothing patched
    "rendered": {"max_steps": 7, "max_completion_length": 16, "batch": 8},
    "format": {"learning_rate": 1e-3, "beta": 0.01, "max_steps": 30, "max_completion_length": 32, "batch": 8},
    "length": {"learning_rate": 1e-3, "beta": 0.01, "max_steps": 30, "max_completion_length": 32, "batch": 8},
    "healthy": {"learning_rate": 3e-4, "beta": 0.08, "max_steps": 80, "max_completion_length": 16, "batch": 16},
}


def write_inspected_run(run: Path, model: Path, scenario: str, seed: int = 0, every_steps: int | None = None,
                        max_steps: int | None = None) -> Path:
    """A rendered run directory for ``scenario``; returns it."""
    from finetune.cli import main

    s = SCENARIO[scenario]
    (run / "data").mkdir(parents=True, exist_ok=True)
    rows = make_runs.prompts_dataset(seed=seed).to_list()
    (run / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = {
        "name": f"watch-{scenario}", "model": str(model),
        # no held-out split: a carved one (dataset.heldout's default) leaves rows out of training, and these tiny
        # runs were tuned on every row (with the carve the format hack never grows, and the base model gets sums right)
        "dataset": {"path": "data/train.jsonl", "prompt_column": "prompt", "answer_column": "answer",
                    "heldout": {"prompts": 0}},
        "rewards": SPEC_REWARDS[scenario],
        "hardware": {"profile": "cpu", "gpus": 0, "nodes": 1},
        "generation": {"max_prompt_length": 64, "max_completion_length": s["max_completion_length"]},
        "training": {"per_device_train_batch_size": s["batch"], "gradient_accumulation_steps": 1,
                     "num_generations": 8, "logging_steps": 1, "warmup_steps": 0, "save_steps": 100_000,
                     "max_steps": max_steps or s["max_steps"], "seed": seed, "gradient_checkpointing": False},
        "inspection": {"every_steps": every_steps} if every_steps else {},
    }
    (run / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    assert main(["rewards", "render", str(run / "spec.yaml")]) == 0
    assert main(["config", "render", str(run / "spec.yaml"), "--no-gate"]) == 0
    if scenario == "rendered":
        return run
    source = FORMAT_SOURCE if scenario == "format" else make_runs.REWARDS_SOURCE[scenario]
    (run / "rewards.py").write_text(source.lstrip())
    train_py = run / "config" / "train.py"
    text = train_py.read_text()
    for key in ("learning_rate", "beta"):
        text, n = re.subn(rf"^(\s+{key}=)[^,]+,", rf"\g<1>{s[key]!r},", text, count=1, flags=re.M)
        assert n == 1, key
    train_py.write_text(text)
    return run


from finetune.config.build import UNGATED_OVERRIDE  # noqa: E402


def launch(run: Path, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    """`bash config/launch.sh --cpu` as a person would run it (env check, then train.py)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               OMP_NUM_THREADS="1", FINETUNE_PYTHON=sys.executable,
               FINETUNE_UNGATED_OVERRIDE=UNGATED_OVERRIDE)  # a --no-gate render: the person's override
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return subprocess.run(["bash", "config/launch.sh", "--cpu"], cwd=run, env=env, capture_output=True, text=True,
                          timeout=timeout)


def outcome(run: Path) -> dict[str, Any]:
    """What the run did: last step, whether it was stopped, and why."""
    state = json.loads((run / "train" / "trainer_state.json").read_text())
    stopped = run / "train" / "STOPPED.json"
    return {"global_step": state["global_step"], "max_steps": state["max_steps"],
            "stopped": json.loads(stopped.read_text()) if stopped.is_file() else None}


def earliest_stop(every_steps: int = 5, logging_steps: int = 1) -> int:
    """The first step a confirmed divergence stop can come at: the window needs MIN_POINTS logged steps
    before the inspection's own step is logged, then CONFIRM inspections in a row."""
    from finetune.watch import CONFIRM, MIN_POINTS

    def logged_before(step: int) -> int:  # log entries before this step's own (logging_first_step: step 1)
        return len(({1} | set(range(logging_steps, step, logging_steps))) - {step})

    first = every_steps
    while logged_before(first) < MIN_POINTS:
        first += every_steps
    return first + (CONFIRM - 1) * every_steps
