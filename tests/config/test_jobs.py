"""Jobs on existing engines: `config render` writes a SkyPilot task (one node and several, node 0 serving vLLM as
launch.slurm does) and a Hugging Face Jobs command (one node, a flavour of the profile) for a PASS run whose spec asks,
each with the person's time / cost limit; what an engine cannot express is one line, nothing written. Validated with
the installed clients, offline: SkyPilot's task schema and Task.from_yaml (in the skypilot environment, `make test`'s
.venv-jobs: skypilot cannot share an environment with the pinned huggingface_hub), `hf jobs run --dry-run`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from gated_helpers import gated_run

from finetune import rundir
from finetune.config import jobs
from finetune.hardware import PROFILES

SKY_PYTHON = Path(os.environ.get("FINETUNE_SKY_PYTHON") or Path(__file__).resolve().parents[2] / ".venv-jobs/bin/python")


def test_every_flavour_is_one_the_installed_huggingface_hub_knows_and_every_profile_exists():
    from huggingface_hub import JobHardware

    known = {h.value for h in JobHardware}
    assert {f for by_gpus in jobs.HF_FLAVORS.values() for f in by_gpus.values()} <= known
    assert set(jobs.HF_FLAVORS) <= set(PROFILES) and set(jobs.SKY_ACCELERATORS) <= set(PROFILES)


@pytest.fixture(scope="module")
def run(tmp_path_factory, tiny_model_dir):
    import shutil

    run = tmp_path_factory.mktemp("jobs") / "run"
    shutil.copytree(tiny_model_dir, run / "model")  # a job carries the run directory: the model travels inside it
    return gated_run(run, str(run / "model"))


def _render(run: Path, cli, hardware: dict, jobs_section: dict):
    spec = run / rundir.SPEC
    data = yaml.safe_load(spec.read_text())
    data["hardware"], data["jobs"] = hardware, jobs_section
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    return cli("config", "render", spec)


def _config(run: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((run / rundir.CONFIG_DIR).iterdir())}


def _sky_validate(path: Path) -> dict:
    if not SKY_PYTHON.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"no skypilot environment at {SKY_PYTHON} (make test builds .venv-jobs)")
        pytest.skip(f"no skypilot environment at {SKY_PYTHON} (make .venv-jobs, or FINETUNE_SKY_PYTHON)")
    code = ("import json, sys, yaml, sky\nfrom sky.utils import common_utils, schemas\n"
            "cfg = yaml.safe_load(open(sys.argv[1]))\n"
            "common_utils.validate_schema(cfg, schemas.get_task_schema(), 'invalid task: ')\n"
            "t = sky.Task.from_yaml(sys.argv[1])\n"
            "r = next(iter(t.resources))\n"
            "print(json.dumps({'nodes': t.num_nodes, 'accelerators': r.accelerators, 'run': t.run, "
            "'setup': t.setup, 'workdir': t.workdir, 'name': t.name}))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKYPILOT")}
    import tempfile

    with tempfile.TemporaryDirectory() as home:  # SkyPilot keeps its state under HOME: not in the run directory
        proc = subprocess.run([str(SKY_PYTHON), "-c", code, str(path)], capture_output=True, text=True, timeout=120,
                              env={**env, "HOME": home})
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_skypilot_task_for_one_and_two_nodes_validates_with_the_installed_client(run, cli):
    r = _render(run, cli, {"profile": "h100-80gb", "gpus": 8, "nodes": 1}, {"engines": ["skypilot"], "max_hours": 6})
    assert r.code == 0, r
    one = _sky_validate(run / rundir.CONFIG_DIR / jobs.SKY_FILE)
    assert one["nodes"] == 1 and one["accelerators"] == {"H100": 8} and one["workdir"] == "."
    assert "timeout --kill-after=60 21600 bash config/launch.sh" in one["run"] and "NODE_RANK" not in one["run"]
    assert " trl==1.16.0 " in one["setup"] and "trackio==" in one["setup"]
    assert jobs.HF_FILE not in _config(run)

    r = _render(run, cli, {"profile": "h100-80gb", "gpus": 8, "nodes": 2}, {"engines": ["skypilot"], "max_hours": 1.5})
    assert r.code == 0, r
    two = _sky_validate(run / rundir.CONFIG_DIR / jobs.SKY_FILE)
    assert two["nodes"] == 2 and two["accelerators"] == {"H100": 8}
    for line in ('export NODE_RANK="$SKYPILOT_NODE_RANK"', 'sed -n 1p', 'sed -n 2p', "timeout --kill-after=60 5400"):
        assert line in two["run"], line
    assert "launch.slurm" in _config(run)  # the same placement, rendered for SLURM too


@pytest.mark.slow
def test_hf_jobs_command_validates_with_the_installed_hf_client_offline(run, cli):
    r = _render(run, cli, {"profile": "a100-80gb", "gpus": 4, "nodes": 1},
                {"engines": ["hf", "skypilot"], "max_hours": 2, "max_cost_usd": 40})
    assert r.code == 0, r
    script = run / rundir.CONFIG_DIR / jobs.HF_FILE
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}
    env.update(HF_HUB_OFFLINE="1", FINETUNE_HF=str(Path(sys.executable).parent / "hf"), HF_HOME=str(run / ".hf"))
    proc = subprocess.run(["bash", str(script), "--dry-run"], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    assert "a100x4" in out and "120m" in out and "/workspace/run" in out and "bash config/launch.sh" in out
    assert "trl==1.16.0" in script.read_text() and "list_jobs_hardware" in script.read_text()


@pytest.mark.slow
def test_a_layout_an_engine_cannot_express_is_one_line_and_nothing_is_written(run, cli):
    cases = [({"profile": "h100-80gb", "gpus": 1, "nodes": 1}, ["hf"], "HF Jobs has no flavour for h100-80gb"),
             ({"profile": "h200-141gb", "gpus": 8, "nodes": 2}, ["hf"], "HF Jobs runs one node"),
             ({"profile": "dgx-spark", "gpus": 1, "nodes": 1}, ["skypilot"], "SkyPilot cannot rent the dgx-spark")]
    for hardware, engines, said in cases:
        before = _config(run)
        r = _render(run, cli, hardware, {"engines": engines, "max_hours": 1})
        assert r.code == 2 and said in r.err and len(r.err.strip().splitlines()) == 1, (hardware, r)
        assert _config(run) == before
