"""A reward module that exits while imported or scoring is an error naming it, never a success.

`rewards.py` ending in `sys.exit(0)` made `inspect score` exit 0 having written
nothing. Scoring now runs in an isolated child (finetune.inspect.isolate): sys.exit / os._exit there
is exit 2 naming the reward, nothing is written, and a gate re-score that dies voids an old PASS.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from inspect_helpers import MODULES, craft_samples, verdicts_for, write_jsonl
from person_helpers import person_verdicts

WRAP = '''

import os as _os, sys as _sys
_real_correctness = correctness


def correctness(prompts, completions, answer, **kwargs):
    if {condition}:
        {action}
    return _real_correctness(prompts, completions, answer, **kwargs)


REWARD_FUNCS = [format_ok, correctness]
'''


def _module(run: Path, *, condition: str = "True", action: str = "_sys.exit(0)", at_import: bool = False) -> None:
    text = (MODULES / "good.py").read_text()
    text += f"\nimport os as _os, sys as _sys\n{action}\n" if at_import else WRAP.format(condition=condition, action=action)
    (run / "rewards.py").write_text(text)


@pytest.mark.parametrize("action", ["_sys.exit(0)", "_sys.exit(3)", "_os._exit(0)", "raise SystemExit"])
def test_exit_while_scoring_is_exit_2_naming_the_reward(cli, make_run, action):
    run = make_run("good")
    _module(run, action=action)
    r = cli("inspect", "score", run)
    assert r.code == 2, r
    assert "reward 'correctness'" in r.err and "Traceback" not in r.err, r
    assert len(r.err.strip().splitlines()) == 1
    assert not (run / "scored.jsonl").exists() and not (run / "score_report.json").exists()


def test_exit_at_import_is_exit_2(cli, make_run):
    run = make_run("good")
    _module(run, action="_sys.exit(0)", at_import=True)
    r = cli("inspect", "score", run)
    assert r.code == 2 and "import of rewards.py" in r.err, r
    assert not (run / "scored.jsonl").exists()


@pytest.mark.slow
def test_exit_during_the_gate_rescore_voids_the_pass(cli, make_run):
    run = make_run("good")
    _module(run, condition='_os.path.exists(_os.path.join(_os.path.dirname(__file__), "armed"))',
            action="_os._exit(0)")
    assert cli("inspect", "score", run).code == 0
    write_jsonl(run / "mine.jsonl", verdicts_for(craft_samples(), reader="human", n=56))
    assert person_verdicts(cli, run, run / "mine.jsonl").code == 0
    assert cli("inspect", "gate", run).code == 0
    (run / "armed").write_text("")
    r = cli("inspect", "gate", run)
    assert r.code == 2 and "reward 'correctness'" in r.err, r
    gate = json.loads((run / "gate.json").read_text())
    assert gate["status"] == "FAIL" and "correctness" in gate["reasons"][0]
