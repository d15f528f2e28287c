"""Server mode on CPU: the rendered launch.sh (2-GPU render: `trl vllm-serve` + one training process)
run for real — env check, a real `trl vllm-serve`, its /health/ wait, generation over HTTP through TRL's
own client, the real training process, and the server stopped when the launch ends.

Not executed, and asserted as the named gap: TRL 1.16's server-mode weight sync. Its client runs only on
vLLM's NCCL weight-transfer engine and refuses a CPU device, so the trainer stops at
``init_communicator`` before its first step (references/vllm-on-cpu.md). The day that changes, this
test fails and must be turned into a >= 3 step run with the weight-sync check.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("vllm")

from vllm_tier import render_run, shim_env  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "env"))
from envfakes import fake_site  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.vllm]
TWO_GPUS = {"profile": "h100-80gb", "gpus": 2, "nodes": 1}
PORT = 8000  # the rendered port (finetune.config.VLLM_SERVER_PORT)
HERE = Path(__file__).resolve().parent
NCCL_ONLY = "Weight synchronization runs on vLLM's NCCL weight-transfer engine, which needs a CUDA device"


def _q(p: Path | str) -> str:
    return shlex.quote(str(p))


def launch_env(tmp: Path) -> tuple[dict[str, str], Path]:
    """FINETUNE_PYTHON: this environment's python, trl and accelerate behind recording wrappers.

    Only env_check.py sees fake GPUs (the config is for 2 GPUs and the check refuses a box without
    them); before train.py starts, TRL's VLLMClient generates over HTTP from the server launch.sh
    started and waited for."""
    real, log, out = Path(sys.executable).parent, tmp / "calls.log", tmp / "http_generate.json"
    site = fake_site(tmp / "fake-site")
    folder = tmp / "env" / "bin"
    folder.mkdir(parents=True)
    wrappers = {
        "python": f'''echo "python $*" >> {_q(log)}
case "$1" in
  config/env_check.py) PYTHONPATH={_q(site)} FAKE_GPUS=2 exec {_q(sys.executable)} "$@" ;;
  config/train.py) {_q(sys.executable)} {_q(HERE / "http_generate.py")} 127.0.0.1 {PORT} {_q(out)} \\
                     && echo "http generate ok" >> {_q(log)} ;;
esac
exec {_q(sys.executable)} "$@"
''',
        "trl": f'echo "trl $*" >> {_q(log)}\necho $$ > {_q(tmp / "server.pid")}\nexec {_q(real / "trl")} "$@"\n',
    }
    for name, body in wrappers.items():
        (folder / name).write_text("#!/bin/sh\n" + body)
        (folder / name).chmod(0o755)
    env = shim_env(FINETUNE_PYTHON=str(folder / "python"), VLLM_HEALTH_TIMEOUT="900", VLLM_HEALTH_INTERVAL="2",
                   PATH="/usr/local/bin:/usr/bin:/bin")
    return env, log


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


def _processes_naming(text: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if text in (proc / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


@pytest.fixture(scope="module")
def server_launch(tmp_path_factory, vllm_model_dir):
    tmp = tmp_path_factory.mktemp("server")
    run = render_run(tmp / "run", vllm_model_dir, hardware=TWO_GPUS)
    env, log = launch_env(tmp)
    res = subprocess.run(["bash", "config/launch.sh", "--max-steps", "3"], cwd=run, env=env, capture_output=True,
                         text=True, timeout=1500)
    return tmp, run, res, log


def test_launch_runs_check_server_generation_then_training_in_order(server_launch):
    tmp, run, res, log = server_launch
    assert "vllm_mode: server" in (run / "config" / "grpo_config.yaml").read_text()
    calls = log.read_text().splitlines()
    assert calls[0] == f"python config/env_check.py {run}", calls
    assert calls[1].startswith("trl vllm-serve --model ") and "--port 8000" in calls[1], calls
    assert calls[2:4] == ["python config/train.py --vllm-server-host 127.0.0.1 --max-steps 3", "http generate ok"]
    assert "trl vllm-serve is healthy" in res.stdout


def test_generation_over_http_from_the_launched_server(server_launch):
    tmp, *_ = server_launch
    got = json.loads((tmp / "http_generate.json").read_text())
    assert len(got["completion_ids"]) == 4 and all(1 <= len(c) <= 8 for c in got["completion_ids"])
    assert all(lp[0] <= 0.0 for seq in got["logprobs"] for lp in seq)  # the sampled tokens' log-probabilities


def test_training_stops_at_the_nccl_only_weight_sync(server_launch):
    _, _, res, _ = server_launch
    assert res.returncode == 1, res.stdout[-2000:] + res.stderr[-4000:]
    assert NCCL_ONLY in res.stderr, res.stderr[-4000:]


def test_the_server_is_stopped_when_the_launch_ends(server_launch, vllm_model_dir):
    tmp, *_ = server_launch
    pid = int((tmp / "server.pid").read_text())
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (_alive(pid) or _processes_naming(str(vllm_model_dir))):
        time.sleep(1)
    assert not _alive(pid), "launch.sh left `trl vllm-serve` running"
    assert _processes_naming(str(vllm_model_dir)) == [], "a vLLM process of the launch survived it"
    assert subprocess.run(["curl", "-sf", "--max-time", "3", f"http://127.0.0.1:{PORT}/health/"]).returncode != 0
