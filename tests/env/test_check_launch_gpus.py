"""launch.sh pins the GPUs its layout uses (finetune.placement's ordinals), on every branch, as a subset of what the
node grants — an inherited CUDA_VISIBLE_DEVICES, else every GPU — and waits on the server's `/health` (what TRL's
client polls; `/health/` answers a 307 that counts a dead engine as up). Run for real under fake `nvidia-smi`-free
GPUs (envfakes), a fake `trl` / `accelerate` / `curl` that record what they were given."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest
from envfakes import base_env, fake_env_python, fake_site, script
from render_fixtures import write_run

from finetune.config.build import UNGATED_OVERRIDE


def _render(tmp: Path, model: str, **changes) -> Path:
    from finetune.cli import main

    spec = write_run(tmp, model, **changes)
    assert main(["config", "render", str(spec), "--no-gate"]) == 0
    return spec.parent


def _machine(tmp: Path, gpus: int) -> tuple[Path, dict[str, str]]:
    """A ready environment with ``gpus`` fake GPUs. Its python runs env check for real and records, instead of
    running, train.py with the CUDA_VISIBLE_DEVICES it got; `trl` / `accelerate` / `curl` record theirs."""
    log = tmp / "calls.log"
    real = fake_env_python(tmp / "real" / "bin", fake_site(tmp / "site", {"vllm": "0.30.0", "deepspeed": "0.19.8"}),
                           tmp / "env-check.log", FAKE_GPUS=str(gpus))
    record = f'echo "$(basename "$0") CUDA_VISIBLE_DEVICES=${{CUDA_VISIBLE_DEVICES-unset}} $*" >> {shlex.quote(str(log))}'
    script(tmp / "env" / "bin" / "python",
           f'case "$1" in config/train.py) {record}; exit 0 ;; esac\nexec {shlex.quote(str(real))} "$@"\n')
    script(tmp / "env" / "bin" / "trl", f"{record}\nexec sleep 30\n")
    script(tmp / "env" / "bin" / "accelerate", f"{record}\n")
    script(tmp / "path" / "curl", f"{record}\nexit 0\n")
    env = {"FINETUNE_PYTHON": str(tmp / "env" / "bin" / "python"), "PATH": f"{tmp / 'path'}:/usr/bin:/bin",
           "VLLM_HEALTH_TIMEOUT": "20", "VLLM_HEALTH_INTERVAL": "0.2", "FINETUNE_UNGATED_OVERRIDE": UNGATED_OVERRIDE}
    return log, env


def _launch(run: Path, env: dict[str, str], **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "config/launch.sh"], cwd=run, env=base_env(**env, **extra), capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def one_gpu(tmp_path_factory, tiny_model_dir) -> Path:
    return _render(tmp_path_factory.mktemp("launch") / "one", str(tiny_model_dir),
                   hardware={"profile": "h100-80gb", "gpus": 1, "nodes": 1})


@pytest.mark.slow  # env check runs for real on each launch
def test_a_one_gpu_launch_pins_one_granted_gpu(one_gpu, tmp_path):
    """A 1-GPU config on a host with more GPUs visible: train.py sees exactly one (else transformers sees n_gpu > 1
    and TRL refuses nn.DataParallel) — the first one the scheduler granted, or GPU 0 when nothing was set."""
    log, env = _machine(tmp_path, gpus=2)
    res = _launch(one_gpu, env, CUDA_VISIBLE_DEVICES="5,3")
    assert res.returncode == 0, res.stdout + res.stderr
    assert log.read_text().splitlines() == ["python CUDA_VISIBLE_DEVICES=5 config/train.py"]
    log.unlink()
    assert _launch(one_gpu, env).returncode == 0
    assert log.read_text().splitlines() == ["python CUDA_VISIBLE_DEVICES=0 config/train.py"]
    short = _launch(one_gpu, env, CUDA_VISIBLE_DEVICES="")  # granted none
    assert short.returncode == 1 and "CUDA_VISIBLE_DEVICES grants 0" in short.stderr


def test_target_json_carries_the_profiles_gpu_and_the_processes_per_node(one_gpu):
    """What env check reads: the profile's compute capability / arch / oldest CUDA (hardware.gpu_requirements) and
    the layout's training processes per node (the reward sandbox sizes its workers by it)."""
    import json

    from finetune.hardware import PROFILES, gpu_requirements

    hardware = json.loads((one_gpu / "config" / "target.json").read_text())["hardware"]
    assert hardware["gpu"] == gpu_requirements(PROFILES["h100-80gb"]) and hardware["processes_per_node"] == 1


@pytest.mark.slow  # env check runs for real
def test_a_server_launch_splits_the_granted_gpus_and_polls_health(tmp_path_factory, tmp_path, tiny_model_dir):
    """8 × H100, Qwen3-1.7B: `trl vllm-serve` on the first granted GPU, training on the seven after it — both a
    subset of the scheduler's list, never 0..n-1 — and the health wait asks `/health`."""
    run = _render(tmp_path_factory.mktemp("launch") / "server", "Qwen/Qwen3-1.7B",
                  hardware={"profile": "h100-80gb", "gpus": 8, "nodes": 1})
    from finetune.config.build import build_plan
    from finetune.spec import load_spec

    topo = build_plan(load_spec(run / "spec.yaml"), run, no_gate=True).topology
    assert (topo.generation_gpu_ids, topo.training_gpu_ids) == ((0,), (1, 2, 3, 4, 5, 6, 7))
    text = (run / "config" / "launch.sh").read_text()
    assert "$url/health/" not in text and '"$url/health"' in text and "CUDA_VISIBLE_DEVICES=0" not in text
    from hfcache_helpers import install_in_hf_cache

    cache = tmp_path / "hub"  # env check resolves the hub id offline
    install_in_hf_cache(tiny_model_dir, cache, "Qwen/Qwen3-1.7B")
    log, env = _machine(tmp_path, gpus=8)
    res = _launch(run, env, CUDA_VISIBLE_DEVICES="8,9,10,11,12,13,14,15", HF_HUB_CACHE=str(cache))
    assert res.returncode == 0, res.stdout + res.stderr
    calls = log.read_text().splitlines()
    serve = next(c for c in calls if c.startswith("trl "))
    assert serve.startswith("trl CUDA_VISIBLE_DEVICES=8 vllm-serve --model Qwen/Qwen3-1.7B")
    assert any(c.startswith("curl ") and c.endswith("http://127.0.0.1:8000/health") for c in calls), calls
    train = next(c for c in calls if c.startswith("accelerate "))
    assert train.startswith("accelerate CUDA_VISIBLE_DEVICES=9,10,11,12,13,14,15 launch") and \
        "--num_processes 7" in train

