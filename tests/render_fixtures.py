"""Helpers for the renderer's tests: a run directory around a model (imported as a plain module)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import yaml
from person_helpers import person_verdicts

ROWS = [{"prompt": f"What is {a} plus {b}? Answer in <answer></answer>.", "answer": str(a + b)}
        for a, b in [(1, 2), (3, 4), (5, 6), (7, 8), (2, 9), (4, 4), (6, 1), (9, 9)]]

# Until the rewards helper's renderer is importable, the e2e run uses this hand-written rewards.py
# with the same interface (DESIGN.md: one function per reward, REWARD_FUNCS, REWARD_WEIGHTS).
HAND_REWARDS = textwrap.dedent('''
    import re

    _TAG = re.compile(r"<answer>(.*?)</answer>", re.S)


    def _text(c):
        return c[0]["content"] if isinstance(c, list) else c


    def format_ok(completions, **kwargs):
        return [1.0 if _TAG.search(_text(c)) else 0.0 for c in completions]


    def correct(completions, answer, **kwargs):
        out = []
        for c, gold in zip(completions, answer):
            m = _TAG.search(_text(c))
            out.append(1.0 if m and m.group(1).strip() == str(gold).strip() else 0.0)
        return out


    REWARD_FUNCS = [format_ok, correct]
    REWARD_WEIGHTS = [0.2, 1.0]
''')


def write_run(run_dir: Path, model: str, **changes) -> Path:
    """A run directory with spec.yaml, data/train.jsonl and rewards.py; returns the spec path."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "data").mkdir(exist_ok=True)
    (run_dir / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    spec = {
        "name": "tiny-e2e",
        "model": model,
        "dataset": {"path": "data/train.jsonl", "prompt_column": "prompt", "answer_column": "answer"},
        "rewards": [{"name": "format_ok", "type": "format", "pattern": "answer_tag", "weight": 0.2},
                    {"name": "correct", "type": "exact_match", "answer_column": "answer",
                     "extract": "answer_tag", "weight": 1.0}],
        "hardware": {"profile": "h100-80gb", "gpus": 1, "nodes": 1},
        "generation": {"max_prompt_length": 64, "max_completion_length": 16},
        "training": {"per_device_train_batch_size": 4, "gradient_accumulation_steps": 2, "logging_steps": 1},
    }
    for dotted, value in changes.items():
        node = spec
        *parents, last = dotted.split("__")
        for p in parents:
            node = node.setdefault(p, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    path = run_dir / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    write_rewards(run_dir, path)
    return path


def write_rewards(run_dir: Path, spec_path: Path) -> None:
    try:
        from finetune.rewards.render import render_rewards
    except ImportError:
        (run_dir / "rewards.py").write_text(HAND_REWARDS)
        return
    from finetune.spec import load_spec

    render_rewards(load_spec(spec_path), run_dir)




def pass_phase1(cli, spec_path: Path) -> dict:
    """A genuine Phase 1 PASS for a write_run() directory: crafted samples scored by the rendered
    rewards, a person's verdicts, `inspect gate` = PASS (a hand-written gate.json no longer renders).
    Returns the gate record."""
    import importlib.util

    helpers_path = Path(__file__).resolve().parent / "inspect" / "inspect_helpers.py"
    spec = importlib.util.spec_from_file_location("inspect_helpers_for_render", helpers_path)
    helpers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helpers)
    run = spec_path.parent
    data = yaml.safe_load(spec_path.read_text())
    data["inspection"] = {"prompts": 16, "per_prompt": 4, "min_read": 50, "probe_prompts": 4}
    spec_path.write_text(yaml.safe_dump(data, sort_keys=False))
    samples = helpers.craft_samples()
    helpers.write_jsonl(run / "samples.jsonl", [{k: v for k, v in s.items() if k != "kind"} for s in samples])
    assert cli("inspect", "score", run).code == 0
    helpers.write_jsonl(run / "reading.jsonl", helpers.verdicts_for(samples, reader="human", n=56))
    assert person_verdicts(cli, run, run / "reading.jsonl").code == 0
    res = cli("inspect", "gate", run)
    assert res.code == 0, res
    return json.loads((run / "gate.json").read_text())
