"""benchmarks/gpu_check.py: its CPU dry path renders the launch for a pretend box (the vLLM layout chosen for
it) and runs the rendered config's GRPO steps for both architectures, each phase beside the estimator. The GPU
path is the same code with figures and the rendered launch.sh really run; it is never run here (no accelerator)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_dry_path_runs_both_models(tmp_path):
    out = tmp_path / "rows.json"
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--dry", "--json", str(out)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    rows = json.loads(out.read_text())
    classes = [r for r in rows if "class" in r]
    assert [c["class"] for c in classes] == ["lora-colocate", "qlora-generate", "full-server"]
    assert all(c["command"] == "bash config/launch.sh --dry-run" and "moments" not in c for c in classes)
    assert "| qlora-generate | transformers ×1 | model_load | n/a |" in res.stdout
    rows = [r for r in rows if "class" not in r]
    launch, rows = rows[0], rows[1:]
    assert launch["launch"] and launch["layout"]["gpus"] == 8 and launch["command"].startswith("bash config/launch.sh")
    assert f"layout for 8 × h100-80gb: {launch['layout']['reason']}" in res.stdout
    assert [r["model"] for r in rows] == ["Qwen/Qwen2.5-0.5B", "Qwen/Qwen2.5-1.5B"]
    for r in rows:
        assert r["steps"] == 1 and r["generation_backend"] == "transformers" and not r["cuda"]
        for phase in ("generation", "training"):
            p = r["phases"][phase]
            assert p["calls"] >= 1 and p["estimate_gib"] > 0 and p["measured_gib"] is None
        assert r["phases"]["training"]["estimate_gib"] > r["phases"]["generation"]["estimate_gib"] * 0.5
    table = res.stdout[res.stdout.index("| model | backend"):]
    assert table.count("| Qwen/Qwen2.5-") == 4 and "n/a (no GPU)" in table


@pytest.mark.parametrize(("gpus", "mode", "tp", "dp", "vllm_gpus", "train"),
                         [(1, "colocate", 1, 1, 0, 1), (2, "server", 1, 1, 1, 1), (8, "server", 1, 1, 1, 7)])
def test_launch_renders_the_layout_chosen_for_the_box(tmp_path, monkeypatch, gpus, mode, tp, dp, vllm_gpus, train):
    """The launch job renders Qwen2.5-0.5B (14 / 2 heads) for the box and writes the launch files it would run."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import gpu_check

    monkeypatch.chdir(tmp_path)
    args = argparse.Namespace(dry=True, gpus=gpus, prompt_len=32, completion_len=16, steps=3, launch_timeout=1)
    row = gpu_check.run_launch(tmp_path, args)
    lay = row["layout"]
    assert (lay["mode"], lay["tp"], lay["dp"], lay["vllm_gpus"], lay["training_processes"]) == (
        mode, tp, dp, vllm_gpus, train)
    assert row["command"] == "bash config/launch.sh --max-steps 3" and row["steps"] == 0  # not run without a GPU
    launch = (tmp_path / "run" / "config" / "launch.sh").read_text()
    if mode == "server":
        assert f"--tensor-parallel-size {tp} --data-parallel-size {dp}" in launch
        if train > 1:
            assert f"--num_processes {train}" in launch
        else:  # one training process: train.py runs directly (no accelerate config is rendered for it)
            assert 'train "$PY" config/train.py' in launch and '"$BIN/accelerate" launch' not in launch
    else:
        assert '"$BIN/trl" vllm-serve' not in launch  # the common helpers still define wait_for_vllm


@pytest.fixture(scope="module")
def gpu_check_module():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_check

    yield gpu_check
    sys.path.remove(str(ROOT / "benchmarks"))


def test_layout_classes_render_and_size_each_moment(tmp_path, gpu_check_module, monkeypatch):
    """The smallest instance of each layout class (LoRA colocate 1 GPU, QLoRA on 1 GPU, full + server on 2) is
    rendered for the pretend box with the rendered launch's dry run as its command, and each moment gets the
    estimator's figure (None where nothing sizes it); on a 1-GPU box the server class is skipped, not failed."""
    monkeypatch.chdir(tmp_path)
    args = argparse.Namespace(dry=True, prompt_len=32, completion_len=16, launch_timeout=1)
    for cls in gpu_check_module.LAYOUT_CLASSES:
        row = gpu_check_module.run_layout_class(cls, tmp_path / cls["name"], args, ("h100-80gb", 8))
        assert row["layout"]["mode"] == cls["mode"] and row["method"] == cls["method"], row
        assert row["layout"]["gpus"] == cls["gpus"] and row["command"] == "bash config/launch.sh --dry-run"
        est = row["estimate_gib"]
        assert est["model_load"] > 0 and est["step"] > 0 and est["generation"] > 0
        # the estimator's weight-sync moment (finetune.memory.moments); QLoRA has none: it generates with transformers
        assert (est["weight_sync"] is None) == (cls["mode"] is None)
        assert (tmp_path / cls["name"] / "run" / "config" / "watchdog.py").is_file()
    server = gpu_check_module.LAYOUT_CLASSES[-1]
    real = argparse.Namespace(**{**vars(args), "dry": False})
    assert gpu_check_module.run_layout_class(server, tmp_path / "one", real, ("h100-80gb", 1))["skipped"] == \
        "needs 2 GPUs, this box has 1"


def test_a_dry_run_record_becomes_the_moment_table(gpu_check_module, capsys):
    record = {"moments": {"model_load": 12.5, "vllm_start": 30.0, "weight_sync": 1.5, "generation": 4.0, "step": 9.0},
              "peak_allocated_gib": {"model_load": 1.0, "vllm_start": 50.0, "weight_sync": 3.0, "generation": 55.0,
                                     "step": 20.0}}
    estimate = {"model_load": 2.0, "vllm_start": 40.0, "weight_sync": None, "generation": 50.0, "step": 25.0}
    moments = gpu_check_module.moment_rows(record, estimate)
    assert moments["model_load"]["ratio"] == 0.5 and moments["vllm_start"]["ratio"] == 1.25
    assert moments["weight_sync"]["ratio"] is None and moments["step"]["measured_gib"] == 20.0
    rows = [{"class": "lora-colocate", "layout": {"mode": "colocate", "gpus": 1}, "estimate_gib": estimate,
             "moments": moments}, {"class": "full-server", "skipped": "needs 2 GPUs, this box has 1"}]
    gpu_check_module.print_moments(rows)
    out = capsys.readouterr().out
    assert "| lora-colocate | colocate ×1 | vllm_start | 30.0 | 50.00 | 40.00 | 1.25 |" in out
    assert "| full-server | — | — | — | — | — | needs 2 GPUs, this box has 1 |" in out
