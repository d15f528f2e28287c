"""launch.sh and launch.slurm, run for real with fake machines around them.

launch.sh checks the environment first and refuses on exit 1, runs everything with the interpreter the
check validated (FINETUNE_PYTHON, else the rendering one) and never with PATH's; it stops with the
server log's tail when `trl vllm-serve` never becomes healthy. launch.slurm is checked with `bash -n`
and run under a fake `srun` / `scontrol` that record what each node would run.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
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


def _bash(run: Path, name: str, *args: str, timeout: int = 120, **env: str) -> subprocess.CompletedProcess:
    from finetune.config.build import UNGATED_OVERRIDE

    env = {"FINETUNE_UNGATED_OVERRIDE": UNGATED_OVERRIDE, **env}  # these configs are --no-gate renders
    return subprocess.run(["bash", f"config/{name}", *args], cwd=run, env=base_env(**env), capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory, tiny_model_dir) -> Path:
    return _render(tmp_path_factory.mktemp("launch") / "cpu", str(tiny_model_dir),
                   hardware={"profile": "cpu", "gpus": 0, "nodes": 1})


@pytest.mark.slow
def test_launch_refuses_when_env_check_fails(cpu_run, tmp_path):
    log = tmp_path / "calls.log"
    py = fake_env_python(tmp_path / "env" / "bin", fake_site(tmp_path / "site"), log, FAKE_MISSING="trl")
    res = _bash(cpu_run, "launch.sh", FINETUNE_PYTHON=str(py))
    assert res.returncode == 1, res.stdout + res.stderr
    # the install line names the interpreter the wrapper runs (where pip installs)
    assert f"fix trl: {sys.executable} -m pip install trl==1.16.0" in res.stdout
    assert "refusing to start" in res.stderr
    assert log.read_text().splitlines() == [f"python config/env_check.py {cpu_run}"]  # train.py never ran
    assert not (cpu_run / "train").exists()


def test_launch_refuses_an_interpreter_that_does_not_exist(cpu_run, tmp_path):
    res = _bash(cpu_run, "launch.sh", FINETUNE_PYTHON=str(tmp_path / "nowhere" / "python"))
    assert res.returncode == 1 and "refusing to start" in res.stderr


@pytest.mark.slow
def test_launch_trains_with_the_validated_interpreter(cpu_run, tmp_path):
    log = tmp_path / "calls.log"
    py = fake_env_python(tmp_path / "env" / "bin", fake_site(tmp_path / "site"), log)
    # PATH has no python with trl on it: only FINETUNE_PYTHON's can run this
    res = _bash(cpu_run, "launch.sh", "--cpu", "--max-steps", "1", timeout=600, FINETUNE_PYTHON=str(py))
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]
    assert log.read_text().splitlines() == [f"python config/env_check.py {cpu_run}",
                                            "python config/train.py --cpu --max-steps 1"]
    assert json.loads((cpu_run / "train" / "trainer_state.json").read_text())["global_step"] == 1


# ------------------------------------------------------------------------------------------------
# a dead vLLM server

@pytest.fixture(scope="module")
def node_run(tmp_path_factory) -> Path:
    return _render(tmp_path_factory.mktemp("launch") / "node", "Qwen/Qwen3-1.7B",
                   hardware={"profile": "h100-80gb", "gpus": 8, "nodes": 1})


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory, tiny_model_dir) -> Path:
    """A Hugging Face cache holding the configs' hub id: env check verifies the model resolves (offline here)."""
    from hfcache_helpers import install_in_hf_cache

    cache = tmp_path_factory.mktemp("hub-cache")
    install_in_hf_cache(tiny_model_dir, cache, "Qwen/Qwen3-1.7B")
    return cache


def _gpu_env(tmp: Path, trl_body: str) -> tuple[Path, Path, dict[str, str]]:
    """A ready 8-GPU environment (fake GPUs, vLLM, DeepSpeed) whose `trl` is ``trl_body``; curl never connects."""
    log = tmp / "calls.log"
    site = fake_site(tmp / "site", {"vllm": "0.30.0", "deepspeed": "0.19.8"})
    py = fake_env_python(tmp / "env" / "bin", site, log, FAKE_GPUS="8")
    script(tmp / "env" / "bin" / "trl", f'echo "trl $*" >> {shlex.quote(str(log))}\n' + trl_body)
    script(tmp / "env" / "bin" / "accelerate", f'echo "accelerate $*" >> {shlex.quote(str(log))}\n')
    script(tmp / "path" / "curl", "exit 7\n")  # connection refused, every time
    env = {"FINETUNE_PYTHON": str(py), "PATH": f"{tmp / 'path'}:/usr/bin:/bin", "VLLM_HEALTH_TIMEOUT": "3",
           "VLLM_HEALTH_INTERVAL": "0.5"}
    return py, log, env


@pytest.mark.parametrize("trl_body,says", [
    ('echo "INFO loading Qwen/Qwen3-1.7B"\necho "ERROR engine core failed: CUDA out of memory"\nexec sleep 60\n',
     "never became healthy at http://127.0.0.1:8000 within 3s"),
    ('echo "ERROR engine core failed: CUDA out of memory"\nexit 1\n', "exited before it became healthy"),
])
@pytest.mark.slow
def test_dead_vllm_server_stops_the_launch(node_run, tmp_path, trl_body, says, hub_cache):
    _py, log, env = _gpu_env(tmp_path, trl_body)
    env["HF_HUB_CACHE"] = str(hub_cache)
    res = _bash(node_run, "launch.sh", timeout=60, **env)
    assert res.returncode == 1, res.stdout + res.stderr
    assert says in res.stderr and "CUDA out of memory" in res.stderr  # the server log's tail
    calls = log.read_text()
    assert "trl vllm-serve --model Qwen/Qwen3-1.7B" in calls and "accelerate" not in calls  # training never started


# ------------------------------------------------------------------------------------------------
# SLURM

NODES = ["gpu01", "gpu02", "gpu03"]


@pytest.fixture(scope="module")
def slurm_run(tmp_path_factory) -> Path:
    return _render(tmp_path_factory.mktemp("launch") / "slurm", "Qwen/Qwen3-1.7B",
                   hardware={"profile": "h100-80gb", "gpus": 8, "nodes": 3})


def _fake_slurm(tmp: Path, *, healthy: bool) -> dict[str, str]:
    """A fake `srun` / `scontrol` / `curl`. The server step records itself, logs, then marks itself up; the
    fake `/health/` answers only once it is up, as a real server's can. (A `curl` that answered before the
    background server step had even started let launch.slurm finish, and its EXIT trap kill that step,
    before the step wrote its record: under load the log held 3 steps, or an empty server log.)"""
    log, up = tmp / "srun.log", tmp / "vllm-serve.up"
    path = tmp / "path"
    script(path / "scontrol", f'[ "$1 $2" = "show hostnames" ] && [ "$3" = "gpu[01-03]" ] && printf "%s\\n" {" ".join(NODES)}\n')
    # each srun step: one JSON line (its options and command); the server step stays up until killed
    script(path / "srun", f'''
        {shlex.quote(sys.executable)} -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@" >> {shlex.quote(str(log))}
        case " $* " in *" vllm-serve "*) echo "INFO vllm-serve loading"; : > {shlex.quote(str(up))}; exec sleep 60 ;; esac
    ''')
    # no answer before the server process is up (bounded: a fake that never starts fails, never hangs)
    script(path / "curl", f'''
        i=0
        while [ ! -f {shlex.quote(str(up))} ] && [ "$i" -lt 400 ]; do sleep 0.1; i=$((i + 1)); done
        {"exit 0" if healthy else "exit 7"}
    ''')
    return {"PATH": f"{path}:/usr/bin:/bin", "SLURM_JOB_NODELIST": "gpu[01-03]", "SLURM_SUBMIT_DIR": "",
            "VLLM_HEALTH_TIMEOUT": "3", "VLLM_HEALTH_INTERVAL": "0.5", "SRUN_LOG": str(log),
            "FINETUNE_UNGATED_OVERRIDE": UNGATED_OVERRIDE}  # a --no-gate render: the person's override


def _steps(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_launch_slurm_runs_each_node_its_part(slurm_run, tmp_path):
    slurm = slurm_run / "config" / "launch.slurm"
    assert subprocess.run(["bash", "-n", str(slurm)]).returncode == 0
    header = [line for line in slurm.read_text().splitlines() if line.startswith("#SBATCH")]
    assert header == ["#SBATCH --job-name=tiny-e2e", "#SBATCH --nodes=3", "#SBATCH --ntasks-per-node=1",
                      "#SBATCH --gpus-per-node=8", "#SBATCH --exclusive", "#SBATCH --output=slurm-%x-%j.out"]
    env = _fake_slurm(tmp_path, healthy=True)
    env["SLURM_SUBMIT_DIR"] = str(slurm_run)
    refused = subprocess.run(["bash", str(slurm)], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                             env=base_env(**{k: v for k, v in env.items() if k != "FINETUNE_UNGATED_OVERRIDE"}))
    assert refused.returncode == 1 and "refusing to start: UNGATED" in refused.stderr  # no override, no start
    assert not (tmp_path / "srun.log").exists()
    res = subprocess.run(["bash", str(slurm)], cwd=tmp_path, env=base_env(**env), capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    steps = _steps(tmp_path / "srun.log")
    assert len(steps) == 4, steps
    # the check finishes before anything starts; training starts only once the server answers /health/;
    # the two training steps run side by side (their records may land in either order)
    check, serve = steps[:2]
    train = sorted(steps[2:], key=lambda step: step[2])
    assert all("launch" in s for s in train), steps
    assert check[:3] == ["--nodes=3", "--ntasks=3", "--ntasks-per-node=1"] and check[-2:] == [
        "config/env_check.py", str(slurm_run)]
    assert serve[:3] == ["--nodes=1", "--ntasks=1", "--nodelist=gpu01"] and serve[3].endswith("/trl")
    # node 0's 8 GPUs serve the tiny model as TP 1 x DP 8 (finetune.vllm_layout: the smallest TP that holds it)
    assert serve[4] == "vllm-serve" and serve[serve.index("--tensor-parallel-size") + 1] == "1"
    assert serve[serve.index("--data-parallel-size") + 1] == "8"
    for rank, (step, node) in enumerate(zip(train, NODES[1:])):
        assert step[:3] == ["--nodes=1", "--ntasks=1", f"--nodelist={node}"] and step[3].endswith("/accelerate")
        opts = dict(zip(step[5::2], step[6::2]))
        assert opts["--machine_rank"] == str(rank) and opts["--num_machines"] == "2"
        assert opts["--num_processes"] == "16" and opts["--main_process_ip"] == "gpu02"
        assert step[-2:] == ["--vllm-server-host", "gpu01"]


def test_launch_slurm_stops_when_the_server_never_serves(slurm_run, tmp_path):
    env = _fake_slurm(tmp_path, healthy=False)
    env["SLURM_SUBMIT_DIR"] = str(slurm_run)
    res = subprocess.run(["bash", str(slurm_run / "config" / "launch.slurm")], cwd=tmp_path, env=base_env(**env),
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and "never became healthy at http://gpu01:8000" in res.stderr, res.stderr
    assert "INFO vllm-serve loading" in res.stderr  # the log tail
    assert [s for s in _steps(tmp_path / "srun.log") if "launch" in s] == []  # no training step


def test_launch_slurm_outside_the_run_directory(slurm_run, tmp_path):
    env = _fake_slurm(tmp_path, healthy=True)
    env["SLURM_SUBMIT_DIR"] = str(tmp_path)
    res = subprocess.run(["bash", str(slurm_run / "config" / "launch.slurm")], cwd=tmp_path, env=base_env(**env),
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "sbatch config/launch.slurm" in res.stderr
