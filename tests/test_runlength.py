"""Run length and the rendered train.py's TRL pin (item 2).

A short run — 120 prompts at 6 prompts per optimiser step, warm-up 10, logging every 10 — is
20 steps with 3 log points: `config render` must say so on the terminal and in BRIEF.md, with the
spec change that fixes it. The step arithmetic is checked against a real TRL run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from render_fixtures import ROWS, write_run

from finetune.runlength import MAX_WARMUP_FRACTION, MIN_LOG_POINTS, run_length


def _short_run(tmp_path: Path, model: str) -> Path:
    # 6 prompts per step: 8 completions per device × 1 process × 6 accumulation = 48 = 6 prompts × 8
    spec = write_run(tmp_path / "r", model, training__per_device_train_batch_size=8,
                     training__gradient_accumulation_steps=6, training__logging_steps=10)
    rows = [dict(ROWS[i % len(ROWS)], prompt=f"{ROWS[i % len(ROWS)]['prompt']} (#{i})") for i in range(120)]
    (spec.parent / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return spec


def test_short_run_warns_on_terminal_and_in_brief(cli, tmp_path, tiny_model_dir):
    spec = _short_run(tmp_path, str(tiny_model_dir))
    res = cli("config", "render", spec, "--no-gate")
    assert res.code == 0, res
    terminal = [line for line in res.out.splitlines() if line.startswith("warning: run length")]
    assert len(terminal) == 2, res.out
    logs, warm = terminal
    assert "20 optimiser steps" in logs and "3 log point(s)" in logs and "fix: set `training.logging_steps: 2`" in logs
    assert "warm-up of 10 steps is 50%" in warm and "fix: set `training.warmup_steps: 4`" in warm

    brief = (spec.parent / "config" / "BRIEF.md").read_text()
    section = brief.split("## Run length", 1)[1].split("\n## ", 1)[0]
    assert "| optimiser steps | **20** |" in section and "| prompts per optimiser step | 6 |" in section
    assert "| generation batches | 20 |" in section and "| log points | 3 |" in section
    assert "| checkpoints | 0 |" in section and "| warm-up steps | 10 |" in section
    assert "training.logging_steps: 2" in section and "training.warmup_steps: 4" in section

    # applying the two fixes the warnings name clears them
    data = yaml.safe_load(spec.read_text())
    data["training"].update(logging_steps=2, warmup_steps=4)
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    res = cli("config", "render", spec, "--no-gate")
    assert res.code == 0 and "run length" not in res.out, res.out
    brief = (spec.parent / "config" / "BRIEF.md").read_text()
    assert "Long enough to read: 11 log points" in brief
    assert "warmup_steps=4," in (spec.parent / "config" / "train.py").read_text()


def test_warmup_is_a_spec_field_not_an_override(cli, tmp_path, tiny_model_dir):
    spec = write_run(tmp_path / "r", str(tiny_model_dir), overrides={"warmup_steps": 3})
    res = cli("config", "render", spec, "--no-gate")
    assert res.code == 2 and "set training.warmup_steps instead" in res.err, res


@pytest.mark.parametrize("rows,epochs,max_steps,logging", [
    (120, 1.0, -1, 10), (30, 1.0, -1, 10), (7, 1.0, -1, 1), (500, 2.0, -1, 50), (120, 1.0, 6, 1), (64, 0.5, -1, 5)])
def test_each_fix_clears_its_warning(rows, epochs, max_steps, logging):
    """Whatever the run, the fix a warning names (applied) yields ≥ 10 log points and a short warm-up."""
    base = dict(num_generations=8, per_device_train_batch_size=8, processes=1, gradient_accumulation_steps=6,
                steps_per_generation=6, num_iterations=1, save_steps=200)
    r = run_length(rows=rows, num_train_epochs=epochs, max_steps=max_steps, logging_steps=logging,
                   warmup_steps=10, **base)
    changes = {}
    for w in r.warnings:
        for key, value in _fixes(w):
            changes[key] = value
    fixed = run_length(rows=rows, num_train_epochs=changes.get("num_train_epochs", epochs),
                       max_steps=changes.get("max_steps", max_steps),
                       logging_steps=changes.get("logging_steps", logging),
                       warmup_steps=changes.get("warmup_steps", 10), **base)
    assert fixed.log_points >= MIN_LOG_POINTS, (r, fixed)
    assert fixed.warmup_steps <= MAX_WARMUP_FRACTION * fixed.optimiser_steps, (r, fixed)
    assert not fixed.warnings


def _fixes(warning: str):
    import re

    for key, value in re.findall(r"`training\.(\w+): ([\d.]+)`", warning):
        yield key, float(value) if "." in value or key == "num_train_epochs" else int(value)


def test_dataset_smaller_than_a_generation_batch_is_zero_steps():
    r = run_length(rows=5, num_generations=8, per_device_train_batch_size=8, processes=1,
                   gradient_accumulation_steps=6, steps_per_generation=6, num_iterations=1, num_train_epochs=1.0,
                   max_steps=-1, logging_steps=1, warmup_steps=0, save_steps=200)
    assert r.optimiser_steps == 0 and len(r.warnings) == 1 and "fewer than one generation batch (6 prompts)" in r.warnings[0]


# ------------------------------------------------------------------------------------------------
# against a real TRL run, and the rendered train.py's TRL pin

def _env(run: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               OMP_NUM_THREADS="1", **extra)
    env["PYTHONPATH"] = os.pathsep.join([extra.get("PYTHONPATH", ""), str(run)]).strip(os.pathsep)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


@pytest.mark.slow
def test_step_count_matches_a_real_trl_run(cli, tmp_path, tiny_model_dir):
    # 5 prompts, 2 per generation batch (8 × 1 × 2 / 8): 2 batches per epoch (the 5th prompt dropped),
    # each 2 dataloader batches → 2 steps per epoch; 1.5 epochs → ceil(3) = 3 optimiser steps
    spec = write_run(tmp_path / "r", str(tiny_model_dir), training__per_device_train_batch_size=8,
                     training__gradient_accumulation_steps=2, training__num_train_epochs=1.5,
                     training__logging_steps=1, training__warmup_steps=0)
    (spec.parent / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS[:5]))
    assert cli("config", "render", spec, "--no-gate").code == 0
    brief = (spec.parent / "config" / "BRIEF.md").read_text()
    assert "| optimiser steps | **3** |" in brief
    from finetune.config.build import UNGATED_OVERRIDE

    # a --no-gate render trains past its smoke test only with a person's override: the test plays that person
    env = _env(spec.parent, FINETUNE_UNGATED_OVERRIDE=UNGATED_OVERRIDE)
    proc = subprocess.run([sys.executable, "config/train.py", "--cpu"],  # the rendered max_steps: -1 (epochs)
                          cwd=spec.parent, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    state = json.loads((spec.parent / "train" / "trainer_state.json").read_text())
    assert state["global_step"] == 3
    assert len([e for e in state["log_history"] if "loss" in e]) == 3  # log points: steps 1, 2, 3


def test_train_py_refuses_another_trl(cli, tmp_path, tiny_model_dir):
    spec = write_run(tmp_path / "r", str(tiny_model_dir))
    assert cli("config", "render", spec, "--no-gate").code == 0
    fake = tmp_path / "fake-trl"
    (fake / "trl").mkdir(parents=True)
    (fake / "trl" / "__init__.py").write_text('__version__ = "1.17.0"\n')
    proc = subprocess.run([sys.executable, "config/train.py", "--cpu", "--max-steps", "1"], cwd=spec.parent,
                          env=_env(spec.parent, PYTHONPATH=str(fake)), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "TRL 1.17.0 is installed but this config was rendered for TRL 1.16.0" in lines[0]
    assert f"fix: {sys.executable} -m pip install 'trl==1.16.0'" in lines[0]
    assert not (spec.parent / "train").exists()  # refused before anything ran
