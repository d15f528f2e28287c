"""The inspection callback in REAL tiny GRPO runs on CPU, launched with the rendered launch.sh.

A length-paying shaping reward is stopped before its last step, STOPPED.json names it, launch.sh exits
non-zero and `finetune diagnose` names reward_hacking with that reward (and the early length drift); a
healthy run is not stopped; a mid-run inspection file goes through review → verdict → gate unchanged (the
gate judges it as it judges Phase 1's samples).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import watch_runs
from person_helpers import person_verdicts

pytestmark = pytest.mark.slow


def test_a_length_hack_is_stopped_and_diagnosed(tmp_path, warm_model_dir, cli):
    run = watch_runs.write_inspected_run(tmp_path / "hack", warm_model_dir, "length")
    res = watch_runs.launch(run)
    assert res.returncode == 3, res.stderr[-3000:]
    assert "STOPPED by the inspection callback" in res.stderr
    out = watch_runs.outcome(run)
    assert out["global_step"] < out["max_steps"] == 30  # stopped BEFORE its last step
    assert out["global_step"] >= watch_runs.earliest_stop()  # no earlier than the rule can confirm
    stopped = out["stopped"]
    assert (stopped["rule"], stopped["reward"], stopped["step"]) == ("reward_divergence", "verbosity",
                                                                     out["global_step"])
    ev = stopped["evidence"]
    assert ev["reward_p"] < 0.05 and ev["reward_end"] > ev["reward_start"] and "verbosity" in ev["rising_rewards"]
    assert Path(run / stopped["inspection_file"]).is_file()

    # inspection/* metrics in both logs diagnose reads
    live = [json.loads(x) for x in (run / "train" / "metrics.jsonl").read_text().splitlines()]
    state = json.loads((run / "train" / "trainer_state.json").read_text())
    for log in (live, state["log_history"]):
        marked = [e for e in log if "inspection/stop" in e]
        assert [e["step"] for e in marked] == list(range(5, out["global_step"] + 1, 5))
        assert marked[-1]["inspection/stop"] == 1.0 and marked[0]["inspection/stop"] == 0.0

    assert cli("diagnose", run).code == 0
    doc = json.loads((run / "diagnosis" / "diagnosis.json").read_text())
    assert doc["run"]["stopped"]["rule"] == "reward_divergence" and doc["run"]["stopped"]["reward"] == "verbosity"
    names = [s["name"] for s in doc["symptoms"]]
    assert names[0] == "reward_hacking" and doc["recommended_change"]["reward"] == "verbosity"
    drift = next(s for s in doc["symptoms"] if s["name"] == "length_drift")  # early: within the first steps
    assert drift["window"]["to_step"] < stopped["step"]
    assert "over the first 3 steps" in drift["summary"]


def test_top_reward_completions_that_stop_being_well_formed_stop_the_run(tmp_path, warm_model_dir):
    """The length hack beside a format reward (the answer and nothing else): the best-paid completions grow
    out of the format before the reward's trend can be confirmed, so the format rule stops the run first."""
    run = watch_runs.write_inspected_run(tmp_path / "format", warm_model_dir, "format")
    res = watch_runs.launch(run)
    assert res.returncode == 3, res.stderr[-3000:]
    out = watch_runs.outcome(run)
    stopped = out["stopped"]
    assert (stopped["rule"], stopped["reward"]) == ("format_jump", "answer_format")
    assert out["global_step"] == stopped["step"] < out["max_steps"]
    ev = stopped["evidence"]
    assert ev["share"] - ev["baseline"] >= ev["jump"] and ev["failing"]["answer_format"] >= 1 and ev["top"] >= 4


def test_a_healthy_run_is_not_stopped(tmp_path, warm_model_dir):
    run = watch_runs.write_inspected_run(tmp_path / "healthy", warm_model_dir, "healthy")
    res = watch_runs.launch(run)
    assert res.returncode == 0, res.stderr[-3000:]
    out = watch_runs.outcome(run)
    assert out["stopped"] is None and out["global_step"] == out["max_steps"] == 80
    index = [json.loads(x) for x in (run / "train" / "inspections" / "index.jsonl").read_text().splitlines()]
    assert [i["step"] for i in index] == list(range(5, 81, 5)) and not any(i["stop"] for i in index)


def _reading(samples: Path) -> list[dict]:
    """A person's reading of each completion: well-formed = reasoning (no tags), then one closed <answer>
    container holding a value (a letter or digit in it) and nothing after it; correct = that value is the sum."""
    out = []
    for line in samples.read_text().splitlines():
        s = json.loads(line)
        m = re.fullmatch(r"[^<>]*<answer>([^<>]*[A-Za-z0-9][^<>]*)</answer>", s["completion"].strip())
        well_formed = m is not None
        correct = m is not None and m.group(1).strip() == str(s["columns"]["answer"])
        v = {"id": s["id"], "accept": correct, "well_formed": well_formed, "reader": "human",
             "note": "" if correct else "wrong sum" if well_formed else "no single answer"}
        if well_formed:
            v["correct"] = correct
        out.append(v)
    return out


def test_a_mid_run_file_goes_through_review_verdict_gate_unchanged(tmp_path, warm_model_dir, cli):
    run = watch_runs.write_inspected_run(tmp_path / "run", warm_model_dir, "rendered", every_steps=7)
    assert watch_runs.launch(run).returncode == 0
    step_file = run / "train" / "inspections" / "step_7.jsonl"
    assert len(step_file.read_text().splitlines()) == 50  # inspection.min_read: enough for the gate
    review = tmp_path / "review-step7"  # a review directory beside the run: its gate record is untouched
    review.mkdir()
    for p in [run / "spec.yaml", *run.glob("rewards*.py")]:
        shutil.copy(p, review / p.name)
    shutil.copytree(run / "data", review / "data")

    assert cli("inspect", "sample", review, "--import", step_file).code == 0
    assert cli("inspect", "score", review).code == 0
    assert cli("inspect", "review", review).code == 0 and (review / "review.md").is_file()
    (review / "reading.jsonl").write_text("".join(json.dumps(v) + "\n" for v in _reading(review / "samples.jsonl")))
    assert person_verdicts(cli, review, review / "reading.jsonl").code == 0
    report = json.loads((review / "score_report.json").read_text())
    assert report["probes"] and not any(p["passing"] for p in report["probes"])  # probes ran on these prompts
    for flag in report["flags"]:
        if not flag["name"].startswith("base_"):  # a base-success flag cannot be waived
            assert cli("inspect", "ack", review, flag["id"], "--reason",
                       "a seven-step tiny test policy: its sums are all wrong, the test reads the format", "--yes").code == 0
    res = cli("inspect", "gate", review)
    gate = json.loads((review / "gate.json").read_text())
    # the reading agrees with the rewards on all 50; the one thing the gate holds against these samples is
    # that a barely trained tiny model never gets a sum right (base success), which nothing may waive
    assert gate["counts"]["read"] == 50 and gate["counts"]["disagreements"] == 0
    assert res.code == 1 and gate["status"] == "FAIL"
    assert gate["reasons"] and all("base_never_succeeds" in r for r in gate["reasons"]), gate["reasons"]
