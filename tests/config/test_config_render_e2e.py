"""End to end on CPU: render for the tiny local model, then train with the rendered files.

Real runs as subprocesses (kept to 2 steps each): the rendered train.py, TRL's own
`trl grpo --config` on the rendered YAML, train.py in 2 real processes (Accelerate MULTI_CPU), and a
LoRA render.
Each must leave a trainer_state.json whose log history carries rewards/<name>/mean for every reward.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from render_fixtures import write_run

pytestmark = pytest.mark.slow
REWARD_NAMES = ("format_ok", "correct")
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def rendered_run(tmp_path_factory, tiny_model_dir) -> Path:
    from finetune.cli import main

    run = tmp_path_factory.mktemp("e2e") / "run"
    spec = write_run(run, str(tiny_model_dir))
    assert main(["config", "render", str(spec), "--no-gate"]) == 0
    return run


def _env(run: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(run), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


def _run(cmd: list[str], run: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=run, env=_env(run), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return proc


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _assert_reward_logs(state_path: Path, steps: int = 2) -> None:
    state = json.loads(state_path.read_text())
    assert state["global_step"] == steps
    logged = [e for e in state["log_history"] if "loss" in e]
    assert logged, state["log_history"]
    for name in REWARD_NAMES:
        assert all(f"rewards/{name}/mean" in e for e in logged), (name, logged[0].keys())


def test_rendered_train_py_trains_on_cpu(rendered_run):
    shutil.rmtree(rendered_run / "train", ignore_errors=True)
    proc = _run([sys.executable, "config/train.py", "--cpu", "--max-steps", "2"], rendered_run)
    assert "--no-gate" in proc.stderr  # the loud warning of a test-only render
    _assert_reward_logs(rendered_run / "train" / "trainer_state.json")
    # trackio is installed: the run logged to its local project inside the run directory, and diagnose reads it
    from finetune.diagnose import trackiodb
    from finetune.diagnose.logs import load_logs

    db = rendered_run / "train" / "trackio" / "finetune-tiny-e2e.db"
    assert "tracking: Trackio project finetune-tiny-e2e" in proc.stderr and trackiodb.is_db(db)
    tracked = load_logs(db)
    state = load_logs(rendered_run / "train" / "trainer_state.json")
    assert tracked.steps == state.steps == [1, 2]
    for name in REWARD_NAMES:
        key = f"rewards/{name}/mean"
        assert tracked.series[key].values == state.series[key].values


def test_trl_cli_runs_rendered_yaml(rendered_run):
    out = rendered_run / "train_cli"
    shutil.rmtree(out, ignore_errors=True)
    # the YAML is used as-is; only the CPU substitutions and a short run are given on the command line
    _run([str(BIN / "trl"), "grpo", "--config", "config/grpo_config.yaml", "--use_cpu", "true", "--bf16", "false",
          "--use_vllm", "false", "--max_steps", "2", "--output_dir", str(out)], rendered_run)
    states = sorted(out.glob("checkpoint-*/trainer_state.json"))
    assert states, list(out.iterdir())
    _assert_reward_logs(states[-1])


def test_train_py_in_two_processes(tmp_path, tiny_model_dir):
    """Rendered for 3 GPUs with one serving vLLM: 2 training processes, batch 2 × 2 × 2 = 8 = one group.

    The renderer's own batch check accepts it for 2 training processes (and refuses the same batch on
    one GPU, see test_config_validation); TRL's check inside a real 2-process run must agree."""
    from finetune.cli import main

    run = tmp_path / "two"
    spec = write_run(run, str(tiny_model_dir), hardware={"profile": "h100-80gb", "gpus": 3, "vllm_gpus": 1},
                     training__per_device_train_batch_size=2, training__gradient_accumulation_steps=2)
    assert main(["config", "render", str(spec), "--no-gate"]) == 0
    assert "--num_processes 2" in (run / "config" / "launch.sh").read_text()
    # `accelerate launch --cpu --num_processes 2` falls back to ONE process in accelerate 1.16 unless MPI
    # is installed (its simple launcher). `--multi_gpu` selects accelerate's torchrun launcher; the
    # script's use_cpu=True then makes Accelerate run the two ranks as MULTI_CPU over gloo. At one
    # process TRL would raise (2 × 1 × 2 = 4 is not a group of 8), so a finished run proves TRL saw
    # the 2 training processes the renderer validated for.
    _run([sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
          "--main_process_port", str(_free_port()),
          "config/train.py", "--cpu", "--max-steps", "2"], run, timeout=400)
    _assert_reward_logs(run / "train" / "trainer_state.json")


def test_lora_render_trains_on_cpu(tmp_path, tiny_model_dir):
    from finetune.cli import main

    run = tmp_path / "lora"
    spec = write_run(run, str(tiny_model_dir), method="lora", lora={"r": 4, "alpha": 8, "target_modules": "all-linear"})
    assert main(["config", "render", str(spec), "--no-gate"]) == 0
    assert "LoraConfig(r=4" in (run / "config" / "train.py").read_text()
    _run([sys.executable, "config/train.py", "--cpu", "--max-steps", "2"], run)
    _assert_reward_logs(run / "train" / "trainer_state.json")


def test_run_folder_moved_with_its_model_and_data_still_trains(tmp_path, tiny_model_dir):
    """Paths the spec gave relative (`../model`, `../common/train.jsonl`) stay relative to the run directory in
    train.py, so the project folder copied elsewhere (to the GPU box) passes env check and trains."""
    from finetune.cli import main

    project = tmp_path / "project"
    shutil.copytree(tiny_model_dir, project / "model")
    spec = write_run(project / "run", "../model")
    (project / "common").mkdir()
    shutil.move(project / "run" / "data" / "train.jsonl", project / "common" / "train.jsonl")
    text = spec.read_text().replace("path: data/train.jsonl", "path: ../common/train.jsonl")
    spec.write_text(text)
    assert main(["config", "render", str(spec), "--no-gate"]) == 0
    train_py = (project / "run" / "config" / "train.py").read_text()
    assert "MODEL = '../model'" in train_py and "'../common/train.jsonl'" in train_py
    assert str(project) not in train_py
    moved = tmp_path / "gpu-box" / "project"
    moved.parent.mkdir()
    shutil.move(project, moved)
    from finetune.env import check

    target = check.load_target(moved / "run")
    rows = {r.what: r for r in check.check_inputs(target, moved / "run")}
    assert rows["training data"].ok and rows["model"].ok, rows
    assert rows["model"].found == str(moved / "run" / ".." / "model")
    out = subprocess.run([sys.executable, "config/env_check.py"], cwd=moved / "run", env=_env(moved / "run"),
                         capture_output=True, text=True, timeout=120).stdout
    assert "fix training data" not in out and "fix model" not in out, out
    _run([sys.executable, "config/train.py", "--cpu", "--max-steps", "1"], moved / "run")
    assert json.loads((moved / "run" / "train" / "trainer_state.json").read_text())["global_step"] == 1


def test_env_check_names_a_missing_data_file_and_model_folder(tmp_path, tiny_model_dir):
    from finetune.cli import main
    from finetune.env import check

    project = tmp_path / "project"
    shutil.copytree(tiny_model_dir, project / "model")
    spec = write_run(project / "run", "../model")
    assert main(["config", "render", str(spec), "--no-gate"]) == 0
    (project / "run" / "data" / "train.jsonl").unlink()
    shutil.rmtree(project / "model")
    rows = {r.what: r for r in check.check_inputs(check.load_target(project / "run"), project / "run")}
    assert not rows["training data"].ok and "copy the data" in rows["training data"].fix
    assert not rows["model"].ok and "copy the model folder" in rows["model"].fix
    proc = subprocess.run([sys.executable, "config/env_check.py"], cwd=project / "run", env=_env(project / "run"),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "fix training data:" in proc.stdout and "fix model:" in proc.stdout
