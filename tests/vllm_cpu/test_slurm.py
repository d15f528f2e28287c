"""launch.slurm on one machine: a fake `srun` / `scontrol` around the rendered 2-node job (2 nodes x 1 GPU:
node 0 serves, node 1 trains), where "node 0" really runs `trl vllm-serve` and "node 1" really runs
`accelerate launch` of train.py against it, both on localhost.

The two node names are `localhost` and `127.0.0.1`: the job addresses the server by node 0's name and
accelerate's main process by node 1's, and both reach this machine. As in server mode
(test_server.py), the trainer stops at TRL 1.16's NCCL-only weight sync, asserted as the named gap.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("vllm")

from vllm_tier import NCCL_ONLY, PORT, alive, launch_env, processes_naming, render_run  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.vllm]
NODES = ["localhost", "127.0.0.1"]


def fake_slurm(tmp: Path) -> dict[str, str]:
    """`scontrol show hostnames` lists NODES; `srun` records its options and command (one JSON line),
    then runs the command here (every --nodes=N step once: one machine stands for all)."""
    log, path = tmp / "srun.log", tmp / "slurm-bin"
    path.mkdir()
    (path / "scontrol").write_text(f'#!/bin/sh\n[ "$1 $2" = "show hostnames" ] && printf "%s\\n" {" ".join(NODES)}\n')
    (path / "srun").write_text(f'''#!/bin/sh
{shlex.quote(sys.executable)} -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@" >> {shlex.quote(str(log))}
while [ $# -gt 0 ]; do case "$1" in --*) shift ;; *) break ;; esac; done
exec "$@"
''')
    for name in ("scontrol", "srun"):
        (path / name).chmod(0o755)
    return {"SLURM_JOB_NODELIST": "fake[0-1]", "SRUN_LOG": str(log)}


@pytest.fixture(scope="module")
def slurm_job(tmp_path_factory, vllm_model_dir):
    tmp = tmp_path_factory.mktemp("slurm")
    run = render_run(tmp / "run", vllm_model_dir, hardware={"profile": "h100-80gb", "gpus": 1, "nodes": 2})
    env, log = launch_env(tmp, gpus=1)
    env.update(fake_slurm(tmp), SLURM_SUBMIT_DIR=str(run))
    env["PATH"] = f"{tmp / 'slurm-bin'}:{env['PATH']}"
    res = subprocess.run(["bash", str(run / "config" / "launch.slurm"), "--max-steps", "3"], cwd=tmp, env=env,
                         capture_output=True, text=True, timeout=1500)
    steps = [json.loads(line) for line in (tmp / "srun.log").read_text().splitlines()]
    return tmp, run, res, log, steps


def test_node0_serves_and_node1_trains_against_it(slurm_job):
    tmp, run, res, log, steps = slurm_job
    assert [s[:3] for s in steps] == [["--nodes=2", "--ntasks=2", "--ntasks-per-node=1"],
                                      ["--nodes=1", "--ntasks=1", "--nodelist=localhost"],
                                      ["--nodes=1", "--ntasks=1", "--nodelist=127.0.0.1"]], steps
    serve, train = steps[1], steps[2]
    assert serve[4:6] == ["vllm-serve", "--model"] and "--host" in serve and serve[serve.index("--host") + 1] == "0.0.0.0"
    assert train[4] == "launch" and train[-4:] == ["--vllm-server-host", "localhost", "--max-steps", "3"]
    opts = dict(zip(train[5::2], train[6::2]))
    assert opts["--main_process_ip"] == "127.0.0.1" and opts["--machine_rank"] == "0"
    assert (run / "config" / "accelerate.yaml").is_file()
    calls = log.read_text().splitlines()
    assert "http generate ok from localhost" in calls  # node 1 reached node 0's server over HTTP by its name
    assert "trl vllm-serve is healthy" in res.stdout


def test_training_node_stops_at_the_nccl_only_weight_sync(slurm_job):
    tmp, _, res, _, _ = slurm_job
    got = json.loads((tmp / "http_generate.json").read_text())
    assert len(got["completion_ids"]) == 4
    assert res.returncode != 0 and NCCL_ONLY in res.stderr, res.stderr[-4000:]


def test_the_serving_step_is_stopped_with_the_job(slurm_job, vllm_model_dir):
    tmp, *_ = slurm_job
    pid = int((tmp / "server.pid").read_text())
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (alive(pid) or processes_naming(str(vllm_model_dir))):
        time.sleep(1)
    assert not alive(pid) and processes_naming(str(vllm_model_dir)) == []
    assert subprocess.run(["curl", "-sf", "--max-time", "3", f"http://127.0.0.1:{PORT}/health/"]).returncode != 0
