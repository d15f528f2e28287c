"""No PASS without the reward agreeing: every forgery of the gate's inputs FAILs.

The gate re-runs rewards.py on the samples (isolated, caches off) and compares with scored.jsonl and
score_report.json; verify_gate (what `config render` and train.py rely on) re-checks the report's
binding, files added after the PASS, and re-judges the bound files, so an edited status is no PASS.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from inspect_helpers import craft_samples, verdicts_for, write_jsonl
from person_helpers import person_verdicts

from finetune.inspect.gate import verify_gate
from finetune.spec import load_spec


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _json(path: Path):
    return json.loads(path.read_text())


def _put(path: Path, obj) -> None:
    path.write_text(json.dumps(obj))


def _read_all(cli, run: Path, reader: str = "human") -> None:
    write_jsonl(run / "mine.jsonl", verdicts_for(craft_samples(), reader=reader, n=56))
    r = (person_verdicts(cli, run, run / "mine.jsonl") if reader == "human"
         else cli("inspect", "verdict", run, "--file", run / "mine.jsonl"))
    assert r.code == 0, r


@pytest.fixture
def passed(cli, make_run):
    run = make_run("good", name="good")
    assert cli("inspect", "score", run).code == 0
    _read_all(cli, run)
    r = cli("inspect", "gate", run)
    assert r.code == 0, r
    return run


def _check(cli, run: Path, expect_in_reasons: str | None = None) -> dict:
    r = cli("inspect", "gate", run)
    gate = _json(run / "gate.json")
    assert r.code == 1 and gate["status"] == "FAIL", (r, gate.get("reasons"))
    if expect_in_reasons:
        assert any(expect_in_reasons in reason for reason in gate["reasons"]), gate["reasons"]
    assert not verify_gate(run, load_spec(run / "spec.yaml")).ok
    return gate


@pytest.mark.slow
def test_a_good_rewards_scores_and_report_under_a_hackable_one_fail(cli, make_run, passed):
    """A FAIL run (substring reward: probes pass) given the PASS run's scored.jsonl and report."""
    run = make_run("substring", name="hack")
    assert cli("inspect", "score", run).code == 0
    _read_all(cli, run)
    assert cli("inspect", "gate", run).code == 1
    shutil.copy(passed / "scored.jsonl", run / "scored.jsonl")
    report = _json(passed / "score_report.json")
    report["inputs"] = _json(run / "score_report.json")["inputs"]  # bound to the hackable rewards.py
    report["scored_sha256"] = _sha(run / "scored.jsonl")
    _put(run / "score_report.json", report)
    gate = _check(cli, run, "does not match the gate's own re-score")
    assert any("scored.jsonl" in reason for reason in gate["reasons"])
    assert any("score_report.json" in reason and "probes" in reason for reason in gate["reasons"])


@pytest.mark.slow
def test_scored_rows_edited_to_agree_fail(cli, passed):
    rows = [json.loads(line) for line in (passed / "scored.jsonl").read_text().splitlines()]
    rows[3]["rewards"]["correctness"] = 1.0 - rows[3]["rewards"]["correctness"]
    (passed / "scored.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = _json(passed / "score_report.json")
    report["scored_sha256"] = _sha(passed / "scored.jsonl")
    _put(passed / "score_report.json", report)
    _check(cli, passed, "scored.jsonl does not match")


@pytest.mark.parametrize("edit", ["flags", "probes", "base_success", "rewards", "controls"])
@pytest.mark.slow
def test_report_edits_fail(cli, passed, edit):
    report = _json(passed / "score_report.json")
    if edit == "flags":
        report["flags"] = [{"id": "forged", "message": "x", "sample_ids": []}]
    elif edit == "probes":
        report["probes"][0]["passing"] = True
        report["probes"] = report["probes"][:1]
    elif edit == "base_success":
        report["base_success"]["mean_success"] = 0.5
    elif edit == "rewards":
        report["rewards"][0]["mean"] = 0.123
    else:
        report["controls"] = []
    _put(passed / "score_report.json", report)
    _check(cli, passed, f"{edit}")


@pytest.mark.slow
def test_gate_record_edits_never_pass(cli, make_run, passed):
    spec = load_spec(passed / "spec.yaml")
    assert verify_gate(passed, spec).ok
    # rewards.py replaced and its hash rewritten in gate.json: the score report no longer binds it
    gate = _json(passed / "gate.json")
    shutil.copy(Path(__file__).parent / "reward_modules" / "substring.py", passed / "rewards.py")
    gate["hashes"]["rewards.py"] = _sha(passed / "rewards.py")
    _put(passed / "gate.json", gate)
    check = verify_gate(passed, spec)
    assert not check.ok and "score report" in check.reason, check.reason


@pytest.mark.slow
def test_a_fail_record_with_its_status_edited_is_no_pass(cli, make_run):
    run = make_run("good", name="few")
    assert cli("inspect", "score", run).code == 0
    write_jsonl(run / "mine.jsonl", verdicts_for(craft_samples(), reader="human", n=10))
    assert person_verdicts(cli, run, run / "mine.jsonl").code == 0
    assert cli("inspect", "gate", run).code == 1
    gate = _json(run / "gate.json")
    gate["status"], gate["reasons"] = "PASS", []
    _put(run / "gate.json", gate)
    check = verify_gate(run, load_spec(run / "spec.yaml"))
    assert not check.ok and "do not PASS" in check.reason, check.reason


@pytest.mark.slow
def test_acks_or_confirmation_after_the_pass_void_it(cli, make_run, passed):
    spec = load_spec(passed / "spec.yaml")
    (passed / "acks.json").write_text(json.dumps({"constant_reward:correctness": {"reason": "late"}}))
    check = verify_gate(passed, spec)
    assert not check.ok and "acks.json" in check.reason
    (passed / "acks.json").unlink()
    assert verify_gate(passed, spec).ok
    (passed / "confirmation.json").write_text("{}")
    check = verify_gate(passed, spec)
    assert not check.ok and "confirmation.json" in check.reason
