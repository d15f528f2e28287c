"""Live metrics: the rendered train.py appends every logged step to train/metrics.jsonl, and
`finetune diagnose` reads a run killed before its first checkpoint (no trainer_state.json anywhere)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from render_fixtures import write_run

LOGGED = 12  # more than diagnose's minimum of log points, so it gives a verdict, not "insufficient"


def _whole_lines(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    text = path.read_text()
    return [json.loads(line) for line in text.splitlines()[: text.count("\n")] if line.strip()]


@pytest.mark.slow
def test_diagnose_reads_a_run_killed_before_its_first_checkpoint(tmp_path, tiny_model_dir, cli):
    from finetune.cli import main

    spec = write_run(tmp_path / "run", str(tiny_model_dir), training__save_steps=10_000)
    run = spec.parent
    assert main(["config", "render", str(spec), "--no-gate"]) == 0
    train_py = (run / "config" / "train.py").read_text()
    assert "callbacks=callbacks," in train_py and "callbacks = [metrics_callback(" in train_py
    from finetune.config.build import UNGATED_OVERRIDE

    env = dict(os.environ, PYTHONPATH=str(run), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               OMP_NUM_THREADS="1", FINETUNE_UNGATED_OVERRIDE=UNGATED_OVERRIDE)  # 5000 steps: beyond a smoke test
    env.pop("CUDA_VISIBLE_DEVICES", None)
    metrics = run / "train" / "metrics.jsonl"
    proc = subprocess.Popen([sys.executable, "config/train.py", "--cpu", "--max-steps", "5000"], cwd=run, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 400
        while len(_whole_lines(metrics)) < LOGGED:
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, "no live metrics after 400 s"
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # killed mid-run: no save_state, no checkpoint
        proc.wait()
    assert not list((run / "train").rglob("trainer_state.json"))

    rows = _whole_lines(metrics)
    steps = [r["step"] for r in rows if "loss" in r]
    assert steps == list(range(1, len(steps) + 1))  # logging_steps 1: every step, in order, once
    assert all("rewards/correct/mean" in r and "rewards/format_ok/mean" in r for r in rows if "loss" in r)

    r = cli("diagnose", run)
    assert r.code == 0, r
    doc = json.loads((run / "diagnosis" / "diagnosis.json").read_text())
    assert doc["run"]["log"] == str(metrics) and doc["verdict"] != "insufficient"
    assert doc["run"]["logged_steps"] >= len(steps) and doc["run"]["first_step"] == 1
    # the log train.py wrote, bound to the config it trained under (train/provenance.json): it may license a change
    found = doc["run"]["provenance"]
    assert found["own_training"] and found["bound"] and doc["licence"]["holds"] is True, found
    assert json.loads((run / "train" / "provenance.json").read_text())["train_py_sha256"] == found["config_sha256"]


def test_choose_log_file_prefers_final_state_then_live_log(tmp_path):
    from finetune.diagnose.logs import choose_log_file

    train = tmp_path / "train"
    (train / "checkpoint-5").mkdir(parents=True)
    checkpoint = train / "checkpoint-5" / "trainer_state.json"
    checkpoint.write_text("{}")
    live = train / "metrics.jsonl"
    live.write_text('{"step": 1}\n')
    os.utime(checkpoint, ns=(1, 1))
    assert choose_log_file(tmp_path) == live  # the live log is newer than the last checkpoint
    os.utime(live, ns=(0, 0))
    assert choose_log_file(tmp_path) == checkpoint  # a run not launched by train.py kept saving
    (train / "trainer_state.json").write_text("{}")
    assert choose_log_file(tmp_path) == train / "trainer_state.json"  # the finished run's own state


def test_a_live_log_line_still_being_written_is_not_an_error(tmp_path, cli):
    entry = {"loss": 0.1, "reward": 0.5, "reward_std": 0.2, "entropy": 1.0, "kl": 0.0,
             "completions/mean_length": 10.0}
    train = tmp_path / "train"
    train.mkdir()
    text = "".join(json.dumps({"step": s, **entry}) + "\n" for s in range(1, 4))
    (train / "metrics.jsonl").write_text(text + '{"step": 4, "loss": 0.')  # cut mid-write
    from finetune.diagnose.logs import load_logs

    assert load_logs(tmp_path).steps == [1, 2, 3]
    (train / "metrics.jsonl").write_text(text + '{"step": 4, "loss": 0.\n{"step": 5}\n')
    r = cli("diagnose", tmp_path)
    assert r.code == 2 and "metrics.jsonl:4" in r.err  # a broken line inside the file is still bad input
