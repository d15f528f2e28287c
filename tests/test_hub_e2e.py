"""A hub id flows through every stage fully offline: inspect sample → memory → config render → train.py.

The model is named only by its hub id; the HF cache (conftest ``hf_home``) is a temp folder laid out as
huggingface_hub caches a download, and the rendered train.py (a subprocess, HF_HUB_OFFLINE=1) loads it
from there through transformers' own resolution.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml
from hfcache_helpers import HUB_REPO_ID
from render_fixtures import write_run

pytestmark = pytest.mark.slow


def test_hub_id_sample_memory_render_train(hf_home, cli, tmp_path):
    spec = write_run(tmp_path / "run", HUB_REPO_ID, inspection={"prompts": 2, "per_prompt": 2})
    run = spec.parent
    r = cli("inspect", "sample", spec, "--no-base", "--device", "cpu", "--backend", "transformers")
    assert r.code == 0, r
    info = json.loads((run / "sample_info.json").read_text())
    assert info["model"].startswith(str(hf_home / "hub" / "models--finetune-tests--tiny-qwen3" / "snapshots"))
    assert len((run / "samples.jsonl").read_text().splitlines()) == 4

    r = cli("memory", spec)
    assert r.code == 0, r
    from finetune.models import load_model_info

    memory_md = (run / "memory.md").read_text()
    summary = load_model_info(HUB_REPO_ID).summary().split(": ", 1)[1]  # from the cached config.json
    assert f"`{HUB_REPO_ID}` — {summary}" in memory_md

    r = cli("config", "render", spec, "--no-gate")
    assert r.code == 0, r
    train_py = (run / "config" / "train.py").read_text()
    assert repr(HUB_REPO_ID) in train_py or json.dumps(HUB_REPO_ID) in train_py  # the id, not a path
    assert yaml.safe_load((run / "config" / "grpo_config.yaml").read_text())["model_name_or_path"] == HUB_REPO_ID

    env = dict(os.environ, PYTHONPATH=str(run), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               HF_HOME=str(hf_home), HF_HUB_CACHE=str(hf_home / "hub"), OMP_NUM_THREADS="1")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    proc = subprocess.run([sys.executable, "config/train.py", "--cpu", "--max-steps", "2"], cwd=run, env=env,
                          capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads((run / "train" / "trainer_state.json").read_text())["global_step"] == 2
