"""type: python end to end: the user's own verifier goes render → score → flags and
probes → gate PASS → config render → a real GRPOTrainer step on CPU that logs rewards/<name>/mean; an
edit of the user's file afterwards voids the gate for both config render and train.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from render_fixtures import pass_phase1, write_run

pytestmark = pytest.mark.slow

CHECKER = '''
import re

def answer_matches(completion, prompt="", answer=None, **_):
    """1.0 when the completion ends with one <answer>...</answer> holding exactly the gold answer."""
    found = re.findall(r"<answer>(.*?)</answer>", completion, flags=re.S)
    if answer is None:
        return None
    ends_there = completion.rstrip().endswith("</answer>")  # nothing after it: no retraction, no second try
    return ends_there and len(set(f.strip() for f in found)) == 1 and found[-1].strip() == str(answer).strip()
'''


NAIVE = CHECKER.replace("ends_there and ", "")  # reads the last answer, ignores what follows it


def _python_run(run: Path, model: str, cli, checker: str = CHECKER) -> Path:
    spec_path = write_run(run, model)
    spec = yaml.safe_load(spec_path.read_text())
    (run / "checker.py").write_text(checker)
    spec["rewards"][1] = {"name": "mine", "type": "python", "file": "checker.py", "function": "answer_matches",
                          "columns": ["answer"], "weight": 1.0}
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    assert cli("rewards", "render", spec_path).code == 0
    return spec_path


def test_python_reward_gates_renders_and_trains(cli, tmp_path, tiny_model_dir):
    run = tmp_path / "run"
    spec = _python_run(run, str(tiny_model_dir), cli)
    assert (run / "rewards_user_mine.py").read_text() == CHECKER
    gate = pass_phase1(cli, spec)
    assert gate["status"] == "PASS" and "rewards_user_mine.py" in gate["hashes"]
    report = json.loads((run / "score_report.json").read_text())
    assert report["probes"], "the hack probes ran on the python reward"
    assert cli("config", "render", spec).code == 0

    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "config/train.py", "--cpu", "--max-steps", "1"], cwd=run, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    state = json.loads(next(run.rglob("trainer_state.json")).read_text())
    assert any("rewards/mine/mean" in entry for entry in state["log_history"])

    # The user edits their verifier after the PASS: the gate no longer holds anywhere.
    (run / "rewards_user_mine.py").write_text(CHECKER.replace("found[-1]", "found[0]"))
    assert cli("config", "render", spec).code != 0
    proc = subprocess.run([sys.executable, "config/train.py", "--cpu", "--max-steps", "1"], cwd=run, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "rewards_user_mine.py" in proc.stderr


def test_probes_catch_a_naive_user_verifier(cli, tmp_path, tiny_model_dir):
    """The hack probes run on the user's function like on any reward: one that ignores a retraction after
    its last answer ("... no wait, it is 6") fails the gate however honest the reading."""
    spec = _python_run(tmp_path / "run", str(tiny_model_dir), cli, checker=NAIVE)
    with pytest.raises(AssertionError):
        pass_phase1(cli, spec)
    gate = json.loads((tmp_path / "run" / "gate.json").read_text())
    assert gate["status"] == "FAIL"
    passing = [p for p in gate["probes"] if p["passing"]]
    assert passing and all(p["probe"] == "retraction_after_answer" and "mine" in str(p["passed_by"])
                           for p in passing), passing[:2]
