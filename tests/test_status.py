"""`finetune status RUN`: the phase /finetune resumes at, re-derived from the run directory's files."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest
import yaml

from finetune import status

COMMAND = Path(__file__).resolve().parents[1] / "commands" / "finetune.md"


def _resume(cli, run_dir) -> str:
    r = cli("status", run_dir)
    assert r.code == 0, r.err
    return r.out.strip().splitlines()[-1]


def test_phases_match_the_command_headings():
    headings = re.findall(r"^## (Phase \d)", COMMAND.read_text(encoding="utf-8"), re.M)
    assert [p for p, _, _ in status.STEPS] == sorted([p for p, _, _ in status.STEPS])
    assert sorted({p for p, _, _ in status.STEPS}) == headings


def test_a_file_is_bad_input_and_a_new_directory_starts_at_phase_0(cli, tmp_path):
    (tmp_path / "file").write_text("x")
    r = cli("status", tmp_path / "file")
    assert r.code == 2 and "not a run directory" in r.err and r.out == ""
    r = cli("status", tmp_path / "runs" / "new")
    assert r.code == 0 and r.out.splitlines()[0].startswith("machine: ")
    assert r.out.splitlines()[-1] == "resume: Phase 0 - route (missing)"
    assert not (tmp_path / "runs").exists()  # status writes nothing


def test_new_run_starts_at_phase_0(cli, tmp_path):
    assert _resume(cli, tmp_path) == "resume: Phase 0 - route (missing)"
    (tmp_path / "route.json").write_text(json.dumps({"route": "lora-qlora-recipes"}))
    assert _resume(cli, tmp_path) == "resume: Phase 0 - route (other route)"
    (tmp_path / "route.json").write_text(json.dumps({"route": "grpo-rlvr-training"}))
    assert _resume(cli, tmp_path) == "resume: Phase 0 - spec.yaml (missing)"
    (tmp_path / "answers.yaml").write_text("verifiable: true\n")
    later = (tmp_path / "route.json").stat().st_mtime + 5
    os.utime(tmp_path / "answers.yaml", (later, later))
    assert _resume(cli, tmp_path) == "resume: Phase 0 - route (stale)"
    os.utime(tmp_path / "route.json", (later + 1, later + 1))
    (tmp_path / "spec.yaml").write_text("model: [unclosed\n")
    assert _resume(cli, tmp_path) == "resume: Phase 0 - spec.yaml (failed)"


def _later(path: Path, seconds: float = 5) -> None:
    t = path.stat().st_mtime + seconds
    os.utime(path, (t, t))


@pytest.mark.slow
def test_a_complete_run_and_each_kind_of_staleness(cli, demo_run, tmp_path):
    run = tmp_path / "pass"
    shutil.copytree(demo_run.out / "pass", run)
    for shared in ("model", "data"):  # the spec names ../model and ../data
        shutil.copytree(demo_run.out / shared, tmp_path / shared)
    # the demo appends its CPU profile to BRIEF.md: config/ no longer is what the renderer writes
    assert _resume(cli, run) == "resume: Phase 2 - memory + config render (stale)"
    assert cli("config", "render", run / "spec.yaml").code == 0
    # config/ rendered after the logs: the new brief has not been trained yet
    assert _resume(cli, run) == "resume: Phase 3 - training (stale)"
    now = time.time()  # the run logged after the render
    os.utime(run / "train" / "trainer_state.json", (now, now))
    assert _resume(cli, run) == "resume: Phase 4 - diagnose (stale)"
    assert cli("diagnose", run).code == 0
    assert _resume(cli, run) == "resume: nothing to do - every phase is done and current"
    states, _ = status.run_status(run)
    assert [s.state for s in states] == ["ok"] * len(status.STEPS)

    # a reward edited in the spec: the rendered rewards are stale (re-derived, not compared by time)
    spec = yaml.safe_load((run / "spec.yaml").read_text())
    spec["rewards"][0]["weight"] = float(spec["rewards"][0].get("weight", 1.0)) + 0.5
    (run / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    assert _resume(cli, run) == "resume: Phase 1 - rewards render (stale)"
    assert cli("rewards", "render", run / "spec.yaml").code == 0
    assert _resume(cli, run) == "resume: Phase 1 - inspect score (stale)"
    # a gate record that no longer exists
    shutil.copytree(demo_run.out / "pass", tmp_path / "again")
    (tmp_path / "again" / "gate.json").unlink()
    assert _resume(cli, tmp_path / "again") == "resume: Phase 1 - inspect gate (missing)"
    out = json.loads(cli("status", tmp_path / "again", "--json").out)
    assert out["resume"]["phase"] == "Phase 1" and out["resume"]["state"] == "missing"
