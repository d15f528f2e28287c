"""The reward sandbox on the training host: a code reward rendered for a 224-CPU, 8-GPU node scores a batch (the
CPU count faked from outside, the real rendered train.py sizing the pool and the real sandbox running the code),
and env check reports workers × training processes against the host's CPUs and the isolation it grants."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from envfakes import base_env, fake_site
from render_fixtures import write_run

PY = sys.executable
CPUS = 224  # a DGX H100: the runner's old default (one worker per CPU) refused it: "at most 128 workers"
ROWS = [{"prompt": "Write add(a, b).", "answer": "", "tests": json.dumps(["assert add(1, 2) == 3",
                                                                        "assert add(-1, 1) == 0"])}] * 8
GOOD = "```python\ndef add(a, b):\n    return a + b\n```"
BAD = "```python\ndef add(a, b):\n    return a - b\n```"

SCORE = textwrap.dedent('''
    import importlib.util, json, os, sys
    spec = importlib.util.spec_from_file_location("train", sys.argv[1])
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    train.size_sandbox()
    rewards = train.load_gated_rewards()
    tests = [json.loads(sys.argv[2])["tests"]] * 2
    scores = rewards.REWARD_FUNCS[-1](prompts=["p", "p"], completions=[sys.argv[3], sys.argv[4]], tests=tests)
    print(json.dumps({"workers": os.environ.get("FINETUNE_SANDBOX_WORKERS"), "scores": scores,
                      "pool_workers": [p.workers for p in rewards.rewards_sandbox._REWARD_POOLS.values()]}))
''')


@pytest.fixture(scope="module")
def code_run(tmp_path_factory) -> Path:
    """One node of 8 H100s with 224 CPUs; a unit-test reward whose workers are left to the host."""
    from finetune.cli import main

    spec = write_run(tmp_path_factory.mktemp("sandbox") / "code", "Qwen/Qwen3-1.7B",
                     hardware={"profile": "h100-80gb", "gpus": 8, "nodes": 1, "host_cpus": CPUS},
                     dataset={"path": "data/train.jsonl", "prompt_column": "prompt", "answer_column": None},
                     rewards=[{"name": "tests_pass", "type": "unit_tests", "tests_column": "tests",
                               "test_format": "assert", "all_or_nothing": True, "weight": 1.0}])
    (spec.parent / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    assert main(["config", "render", str(spec), "--no-gate"]) == 0
    return spec.parent


def test_target_sizes_the_sandbox_from_the_host_cpus(code_run):
    from finetune.env.check import sandbox_workers

    target = json.loads((code_run / "config" / "target.json").read_text())
    box = target["sandbox"]
    per, reserved = box["processes_per_node"], box["reserved_cpus"]
    assert target["hardware"]["host_cpus"] == CPUS and box["min_isolation"] == "namespaces"
    assert per + target["hardware"]["vllm_gpus"] == 8 and reserved == target["hardware"]["vllm_gpus"]
    assert box["workers_per_pool"] == sandbox_workers(CPUS, per, reserved) == (CPUS - reserved) // per - 1
    assert per * (box["workers_per_pool"] + 1) + reserved <= CPUS  # never oversubscribed
    assert "FINETUNE_SANDBOX_WORKERS" not in (code_run / "rewards.py").read_text()  # sizing is outside the gate


@pytest.mark.slow
def test_a_code_reward_rendered_for_224_cpus_scores_a_batch(code_run, tmp_path):
    box = json.loads((code_run / "config" / "target.json").read_text())["sandbox"]
    script = tmp_path / "score.py"
    script.write_text(SCORE)
    env = base_env(PYTHONPATH=str(fake_site(tmp_path / "site")), FAKE_CPUS=str(CPUS),
                   LOCAL_WORLD_SIZE=str(box["processes_per_node"]))
    res = subprocess.run([PY, str(script), str(code_run / "config" / "train.py"), json.dumps(ROWS[0]), GOOD, BAD],
                         cwd=code_run, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["scores"] == [1.0, 0.0], res.stderr[-3000:]  # scored, not None for the batch
    assert int(out["workers"]) == box["workers_per_pool"] and out["pool_workers"] == [box["workers_per_pool"]]


def test_the_runner_default_never_refuses_a_large_host(monkeypatch):
    from finetune.sandbox import runner

    monkeypatch.delenv(runner.WORKERS_ENV, raising=False)
    monkeypatch.setattr(runner.os, "cpu_count", lambda: CPUS)
    assert runner.default_workers() == 128
    monkeypatch.setenv(runner.WORKERS_ENV, "31")
    assert runner.default_workers() == 31
    for bad in ("0", "129", "lots"):
        monkeypatch.setenv(runner.WORKERS_ENV, bad)
        with pytest.raises(ValueError, match="FINETUNE_SANDBOX_WORKERS"):
            runner.default_workers()


@pytest.mark.parametrize(("cpus", "procs", "reserved", "fixed", "pools", "want"), [
    (224, 7, 1, 0, 1, 30), (224, 8, 0, 0, 1, 27), (192, 8, 0, 2, 1, 21), (208, 4, 0, 0, 2, 25), (4096, 1, 0, 0, 1, 128),
    (8, 7, 1, 0, 1, 1), (16, 1, 0, 0, 1, 15)])
def test_sandbox_workers_rule(cpus, procs, reserved, fixed, pools, want):
    from finetune.env.check import sandbox_workers

    assert sandbox_workers(cpus, procs, reserved, fixed, pools) == want


def test_train_py_applies_the_env_check_rule(code_run, monkeypatch):
    """The rendered train.py's size_sandbox is env_check.py's sandbox_workers on the host it starts on, capped at
    what was rendered for the target (one rule in two standalone files)."""
    import importlib.util

    from finetune.env.check import sandbox_workers

    spec = importlib.util.spec_from_file_location("train_for_sizing", code_run / "config" / "train.py")
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    box = train.SANDBOX
    for cpus, local in ((CPUS, 7), (96, 7), (12, 3), (4096, 1), (2, 8)):
        monkeypatch.delenv("FINETUNE_SANDBOX_WORKERS", raising=False)
        monkeypatch.setenv("LOCAL_WORLD_SIZE", str(local))
        monkeypatch.setattr(train.os, "sched_getaffinity", lambda pid, n=cpus: set(range(n)))
        train.size_sandbox()
        want = min(sandbox_workers(cpus, local, box["reserved_cpus"], box["fixed_workers"], box["sized_pools"]),
                   box["workers_per_pool"])
        assert train.os.environ["FINETUNE_SANDBOX_WORKERS"] == str(want)
    monkeypatch.setenv("FINETUNE_SANDBOX_WORKERS", "3")  # a person's choice is kept
    train.size_sandbox()
    assert train.os.environ["FINETUNE_SANDBOX_WORKERS"] == "3"


def _check(run: Path, tmp: Path, **env: str):
    site = fake_site(tmp / "site", {"vllm": "0.30.0", "deepspeed": "0.19.8"})
    return subprocess.run([PY, "-m", "finetune", "env", "check", str(run)], cwd=run,
                          env=base_env(PYTHONPATH=str(site), FAKE_GPUS="8", **env), capture_output=True, text=True,
                          timeout=300)


def _row(out: str, what: str) -> str:
    return next(line for line in out.splitlines() if f"] {what}:" in line)


@pytest.mark.slow
def test_env_check_reports_workers_ranks_cores_and_isolation(code_run, tmp_path):
    box = json.loads((code_run / "config" / "target.json").read_text())["sandbox"]
    per, w, r = box["processes_per_node"], box["workers_per_pool"], box["reserved_cpus"]
    res = _check(code_run, tmp_path, FAKE_CPUS=str(CPUS), FAKE_MISSING="rich")
    cpus = _row(res.stdout, "sandbox CPUs")
    assert cpus.startswith("  [ok]") and f"{per} training process(es) × ({w} sandbox workers + 1)" in cpus
    assert f"= {per * (w + 1) + r}; found {CPUS} CPUs" in cpus
    iso = _row(res.stdout, "sandbox isolation")
    assert "need >= namespaces (tests_pass: namespaces)" in iso and iso.startswith("  [ok]")  # root here: granted
    # the same config on an 8-CPU box: even one worker each oversubscribes it
    small = _check(code_run, tmp_path, FAKE_CPUS="8")
    assert "fix sandbox CPUs: run on a host with at least" in small.stdout and small.returncode == 1


def test_env_check_refuses_a_runner_that_is_not_the_rendered_one(code_run, tmp_path):
    from finetune.env.check import check_isolation

    box = json.loads((code_run / "config" / "target.json").read_text())["sandbox"]
    row = check_isolation({**box, "sha256": "0" * 64}, code_run)
    assert not row.ok and "differs from the runner this config was rendered with" in row.found
