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
import subprocess
import time

import pytest

pytest.importorskip("vllm")

from vllm_tier import NCCL_ONLY, PORT, alive, launch_env, processes_naming, render_run  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.vllm]
TWO_GPUS = {"profile": "h100-80gb", "gpus": 2, "nodes": 1}


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
    assert calls[2:4] == ["python config/train.py --vllm-server-host 127.0.0.1 --max-steps 3",
                          "http generate ok from 127.0.0.1"]
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
    while time.monotonic() < deadline and (alive(pid) or processes_naming(str(vllm_model_dir))):
        time.sleep(1)
    assert not alive(pid), "launch.sh left `trl vllm-serve` running"
    assert processes_naming(str(vllm_model_dir)) == [], "a vLLM process of the launch survived it"
    assert subprocess.run(["curl", "-sf", "--max-time", "3", f"http://127.0.0.1:{PORT}/health/"]).returncode != 0
