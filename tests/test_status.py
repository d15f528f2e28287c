"""`finetune status RUN`: the phase /finetune resumes at, re-derived from the run directory's files."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest
import yaml
from person_helpers import person_verdicts

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
    gate_line = next(s for s in states if s.step == "inspect gate").detail
    assert "gate PASS holds" in gate_line and "on accept: recall ≥ " in gate_line  # one line per reward and field

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


# ------------------------------------------------------------------------------------------------
# a run the inspection callback stopped (train/STOPPED.json, written by config/watch.py)

def _stopped_by_the_callback(run: Path) -> dict:
    """train/STOPPED.json written by the real inspection callback (finetune.watch, transformers' own
    TrainerState / TrainerControl): an empty completion passing the correctness reward at step 5."""
    from transformers import TrainerControl, TrainerState

    from finetune import watch
    from finetune.rewards.lib.rewards_meta import RewardMeta

    meta = [RewardMeta(name="right", type="exact_match", role="correctness", weight=1.0, threshold=1.0, min=0.0,
                       max=1.0, gated=False, episode=False)]
    rec = watch.Recorder()
    cb = watch.inspection_callback(watch.Settings(every_steps=5, sample_rows=50, max_completion_length=64,
                                                  meta=meta), rec)
    args = type("Args", (), {"output_dir": "train"})()  # as train.py passes it, from the run directory
    state, control = TrainerState(), TrainerControl()

    def right(completions, **kwargs):
        return [1.0 if not c.strip() else 0.0 for c in completions]

    with contextlib.chdir(run):
        cb.on_train_begin(args, state, control)
        rec.wrap(right)(prompts=["p"] * 3, completions=["<a>1</a>", "", "<a>2</a>"], answer=["1"] * 3)
        state.global_step = 5
        cb.on_step_end(args, state, control)
    assert control.should_training_stop
    return json.loads((run / "train" / "STOPPED.json").read_text())


MALFORMED = {  # what train/STOPPED.json holds -> what status says of it (one line, no traceback)
    "{not json": "train/STOPPED.json does not parse (invalid JSON",
    "[1, 2]": "train/STOPPED.json is not a JSON object (found list)",
    '{"step": 5, "reward": "right"}': "train/STOPPED.json names no rule",
    '{"rule": "  ", "step": 5}': "train/STOPPED.json names no rule",
    "\udcff": "train/STOPPED.json does not parse (not UTF-8 text",
}


@pytest.mark.parametrize("text", list(MALFORMED))
def test_a_malformed_stop_file_is_one_line_never_a_traceback(cli, tmp_path, text):
    (tmp_path / "train").mkdir()
    data = text.encode("utf-8", "surrogateescape")
    (tmp_path / "train" / "STOPPED.json").write_bytes(data)
    stop = status.read_stop(tmp_path)
    assert stop is not None and stop.problem.startswith(MALFORMED[text]) and "\n" not in stop.problem
    r = cli("status", tmp_path)
    assert r.code == 0 and r.err == "" and "Traceback" not in r.out
    said = [line for line in r.out.splitlines() if line.startswith("stopped: ")]
    assert said == [f"stopped: {stop.problem}"]
    out = json.loads(cli("status", tmp_path, "--json").out)
    assert out["stopped"]["problem"] == stop.problem and out["stopped"]["rule"] is None


def test_the_stop_file_the_callback_writes_is_read_back(tmp_path):
    written = _stopped_by_the_callback(tmp_path)
    stop = status.read_stop(tmp_path)
    assert stop is not None and stop.problem == ""
    assert (stop.rule, stop.step, stop.reward) == (written["rule"], written["step"], written["reward"]) == (
        "probe_passing", 5, "right")
    assert written["inspection_file"] == "train/inspections/step_5.jsonl"  # relative to the run directory
    assert stop.message == written["message"] and stop.inspection_file == written["inspection_file"]
    assert "read train/inspections/step_5.jsonl as in Phase 1" in stop.next[0]
    assert "diagnose" in stop.next[1] and "fix the reward right in spec.yaml" in stop.next[2]
    # a message with line breaks and terminal escapes stays one printable line
    doc = {**written, "message": "line one\nline two\x1b[31m red", "reward": "r\u2028x"}
    (tmp_path / "train" / "STOPPED.json").write_text(json.dumps(doc))
    stop = status.read_stop(tmp_path)
    assert stop is not None and stop.message == "line one line two [31m red" and stop.reward == "r x"
    # a run directory copied elsewhere: the file it names is gone, the step's file in this run is found
    (tmp_path / "train" / "STOPPED.json").write_text(json.dumps({**written, "inspection_file": "/gone/step_5.jsonl"}))
    assert status.read_stop(tmp_path).inspection_file == "train/inspections/step_5.jsonl"
    (tmp_path / "train" / "inspections" / "step_5.jsonl").unlink()  # no step file at all: say where to look
    stop = status.read_stop(tmp_path)
    assert stop.inspection_file is None and "read the last inspection under train/inspections/" in stop.next[0]
    assert status.read_stop(tmp_path / "elsewhere") is None


def _copy_demo(demo_run, tmp_path: Path) -> Path:
    for shared in ("pass", "model", "data"):  # the spec names ../model and ../data
        shutil.copytree(demo_run.out / shared, tmp_path / shared)
    return tmp_path / "pass"


def _lines_of(r) -> list[str]:
    assert r.code == 0 and r.err == "", r
    return r.out.splitlines()


@pytest.mark.slow
def test_a_stopped_run_resumes_at_phase_3_with_the_stop_and_what_comes_next(cli, demo_run, tmp_path):
    run = _copy_demo(demo_run, tmp_path)
    assert cli("config", "render", run / "spec.yaml").code == 0  # the demo's BRIEF.md carries its CPU profile
    now = time.time()
    os.utime(run / "train" / "trainer_state.json", (now, now))
    assert cli("diagnose", run).code == 0
    assert _resume(cli, run) == "resume: nothing to do - every phase is done and current"

    written = _stopped_by_the_callback(run)  # the callback stops the next launch at step 5
    lines = _lines_of(cli("status", run))
    assert lines[-1] == "resume: Phase 3 - training (stopped)"  # not "Phase 4 ok": the stop comes first
    row = next(line for line in lines if line.startswith("Phase 3  training"))
    assert "stopped by the inspection callback at step 5: probe_passing on reward right" in row
    assert written["message"] in row
    assert next(line for line in lines if line.startswith("Phase 4")).split()[3] == "pending"
    assert "stopped: train/STOPPED.json: rule probe_passing, step 5, reward right" in lines
    nexts = [line for line in lines if line.startswith("  next ")]
    assert len(nexts) == 3 and "train/inspections/step_5.jsonl" in nexts[0]
    assert "diagnose" in nexts[1] and "fix the reward right in spec.yaml and repeat Phase 1" in nexts[2]
    out = json.loads(cli("status", run, "--json").out)
    assert out["resume"]["state"] == "stopped" and out["resume"]["phase"] == "Phase 3"
    assert {k: out["stopped"][k] for k in ("rule", "step", "reward", "problem", "inspection_file")} == {
        "rule": "probe_passing", "step": 5, "reward": "right", "problem": "",
        "inspection_file": "train/inspections/step_5.jsonl"}

    # a stop file that does not parse: still a stopped run, said in one line, no traceback
    (run / "train" / "STOPPED.json").write_text('{"rule": "probe_passing", "step": ')
    lines = _lines_of(cli("status", run))
    assert lines[-1] == "resume: Phase 3 - training (stopped)"
    said = [line for line in lines if line.startswith("stopped: ")]
    assert len(said) == 1 and said[0].startswith("stopped: train/STOPPED.json does not parse (invalid JSON")
    assert "read the last inspection under train/inspections/" in next(x for x in lines if x.startswith("  next 1:"))

    # the reward fixed, re-gated and config/ rendered again: the stop belongs to the last launch
    later = (run / "train" / "STOPPED.json").stat().st_mtime + 10  # after the stop, however long the steps took
    os.utime(run / "config" / "train.py", (later, later))
    assert _resume(cli, run) == "resume: Phase 3 - training (stale)"
    assert not [line for line in _lines_of(cli("status", run)) if line.startswith("  next ")]


@pytest.mark.slow
def test_checkpoint_sets_with_their_gate_and_comparison_re_derived(cli, demo_run, tmp_path):
    from finetune.demo.runner import checker_verdicts
    from finetune.spec import load_spec

    run = _copy_demo(demo_run, tmp_path)
    sets = run / "inspect" / "checkpoints"
    # the demo's trained policy re-inspected on Phase 1's prompts, read by the demo's checker, gated
    assert cli("inspect", "sample", run, "--model", run / "train", "--name", "step-40").code == 0
    target = sets / "step-40"
    assert cli("inspect", "score", target).code == 0
    reading, _ = checker_verdicts(target, load_spec(run / "spec.yaml"))
    assert cli("inspect", "verdict", target, "--file", reading, "--reader", "agent").code == 0
    assert cli("inspect", "confirm", target, "--user", "test reader", "--yes").code == 0
    for flag in json.loads((target / "score_report.json").read_text())["flags"]:
        assert cli("inspect", "ack", target, flag["id"], "--reason",
                   "seen on the trained policy's samples; read and judged in this test", "--yes").code == 0
    assert cli("inspect", "gate", target).code == 0
    # a set imported and not yet scored or gated
    assert cli("inspect", "sample", run, "--import", run / "samples.jsonl", "--name", "imported").code == 0

    def listed() -> dict[str, dict]:
        return {s["name"]: s for s in json.loads(cli("status", run, "--json").out)["checkpoints"]}

    s = listed()
    assert list(s) == ["imported", "step-40"]
    assert (s["imported"]["gate"], s["imported"]["comparison"], s["imported"]["comparison_state"]) == (
        "missing", None, "none")
    saved = json.loads((target / "comparison.json").read_text())
    assert (s["step-40"]["gate"], s["step-40"]["comparison_state"]) == ("PASS", "current")
    keys = ("name", "role", "agreement_phase1", "agreement_checkpoint", "success_rate_phase1",
            "success_rate_checkpoint")
    assert s["step-40"]["comparison"]["rewards"] == [{k: r[k] for k in keys} for r in saved["rewards"]]
    correct = next(r for r in saved["rewards"] if r["role"] == "correctness")
    assert correct["success_rate_checkpoint"] > correct["success_rate_phase1"] + 0.2  # the policy learned
    with contextlib.chdir(run):  # the same run named another way: the comparison is still current
        here = {c["name"]: c for c in json.loads(cli("status", ".", "--json").out)["checkpoints"]}
    assert here["step-40"]["comparison_state"] == "current"
    text = _lines_of(cli("status", run))
    assert "checkpoint sets (inspect/checkpoints/):" in text and "  step-40  gate PASS: gate PASS holds" in text
    shown = next(line for line in text if line.startswith("    Phase 1 -> checkpoint:"))
    assert (f"success {correct['name']} {correct['success_rate_phase1']:.0%} -> "
            f"{correct['success_rate_checkpoint']:.0%}; 0 new disagreement(s) on 0 sample(s)") in shown

    # re-derived, not trusted: an edited comparison.json is stale, and the numbers shown are recomputed
    forged = {**saved, "rewards": [{**r, "success_rate_checkpoint": 1.0} for r in saved["rewards"]]}
    (target / "comparison.json").write_text(json.dumps(forged))
    s = listed()["step-40"]
    assert s["comparison_state"] == "stale" and s["comparison"]["rewards"] == [{k: r[k] for k in keys}
                                                                              for r in saved["rewards"]]
    (target / "comparison.json").write_text(json.dumps(saved))
    # the run's reward changed after the set was scored: the set's PASS no longer holds
    rewards = (run / "rewards.py").read_bytes()
    (run / "rewards.py").write_bytes(rewards + b"\n# edited\n")
    s = listed()["step-40"]
    assert s["gate"] == "stale" and "rewards.py changed since this set was scored" in s["detail"]
    (run / "rewards.py").write_bytes(rewards)
    assert listed()["step-40"]["gate"] == "PASS"
    # a reader's verdict after the PASS: stale (the gate binds the verdicts), and so is the comparison
    row = next(r for r in map(json.loads, (target / "scored.jsonl").read_text().splitlines()) if r["all_pass"])
    assert person_verdicts(cli, target, [{"id": row["id"], "accept": False, "correct": False, "well_formed": True,
                                          "note": "not what the prompt asked"}]).code == 0
    s = listed()["step-40"]
    assert s["gate"] == "stale" and "verdicts.jsonl" in s["detail"] and s["comparison_state"] == "stale"
    assert cli("inspect", "gate", target).code == 1  # the reward passes what the reader rejects
    s = listed()["step-40"]
    assert s["gate"] == "FAIL" and "disagree" in s["detail"] and s["comparison_state"] == "current"
    assert s["comparison"]["new_disagreement_samples"] == 1 and s["comparison"]["new_disagreements"] == len(
        json.loads((target / "comparison.json").read_text())["new_disagreements"])
    # Phase 1's steps are unaffected by its sets
    assert _resume(cli, run) == "resume: Phase 2 - memory + config render (stale)"


@pytest.mark.slow
@pytest.mark.parametrize("name,step", [("sample_info.json", "Phase 1 - inspect sample"),
                                       ("score_report.json", "Phase 1 - inspect score")])
def test_a_phase_file_that_does_not_parse_is_a_stale_step_in_one_line(cli, demo_run, tmp_path, name, step):
    run = _copy_demo(demo_run, tmp_path)
    for text in ("{bad", "[1]", '{"rewards": 3}'):
        (run / name).write_text(text)
        lines = _lines_of(cli("status", run))
        assert lines[-1] == f"resume: {step} (stale)" and not any("Traceback" in line for line in lines)
        row = next(line for line in lines if line.startswith(step.replace(" - ", "  ")))
        assert name in row


@pytest.mark.slow
def test_samples_that_sample_info_does_not_describe_are_not_current(cli, demo_run, tmp_path):
    """sample_info.json records the sha256 of the sample files it was committed with: new samples beside an old
    record (a write killed half-way, or a hand edit) are stale, re-derived from the files, never trusted."""
    run = _copy_demo(demo_run, tmp_path)
    info = json.loads((run / "sample_info.json").read_text())
    assert set(info["sha256"]) >= {"samples.jsonl"}
    assert _resume(cli, run) != "resume: Phase 1 - inspect sample (stale)"
    with open(run / "samples.jsonl", "a") as fh:
        fh.write((run / "samples.jsonl").read_text().splitlines()[0] + "\n")
    lines = _lines_of(cli("status", run))
    assert lines[-1] == "resume: Phase 1 - inspect sample (stale)"
    assert any("describes other samples than samples.jsonl on disk (edited?)" in line for line in lines)
    info["sha256"] = {"../../etc/passwd": "0" * 64}  # a record naming a path elsewhere is not followed
    (run / "sample_info.json").write_text(json.dumps(info))
    assert _resume(cli, run) == "resume: Phase 1 - inspect sample (stale)"


def test_re_reading_samples_whose_scores_were_revealed_is_named_not_blind(tmp_path):
    """After a reward fix re-scores the same samples, status says a re-read is not blind when the reader saw
    their scores, and how to get a blind set (a re-sample when nothing was held back); without a reveal it only asks to read again."""
    import os

    from finetune import rundir, status

    (tmp_path / rundir.VERDICTS).write_text('{"id": "s1"}\n')
    (tmp_path / rundir.SCORED).write_text('{"id": "s1", "rewards": {}}\n')
    os.utime(tmp_path / rundir.VERDICTS, (1_000_000, 1_000_000))
    state, text = status._verdicts(status._Run(tmp_path))
    assert state == status.STALE and "not blind" not in text
    (tmp_path / "reveals.json").write_text('{"s1": {"time": "2026-01-01T00:00:00+00:00", "via": "key"}}')
    state, text = status._verdicts(status._Run(tmp_path))
    assert state == status.STALE and "not blind" in text and "a fresh blind set" in text and "training.seed" in text
    assert "--fresh" not in text  # nothing was held back: the fresh set is re-sampled


@pytest.mark.parametrize(("text", "said"), [
    ("{not json", "stopped by the watchdog, but train/STALLED.json does not parse"),
    ("[1]", "stopped by the watchdog, but train/STALLED.json names no moment"),
    ('{"moment": "generation", "message": "stalled at generation: no progress for 900 s"}',
     "stopped by the watchdog: stalled at generation: no progress for 900 s — likely: "),
])
def test_a_stall_file_is_read_in_one_line(tmp_path, text, said):
    """train/STALLED.json (config/watchdog.py) as status reads it: one line, whatever the file holds (the real
    watchdog's file is read back in tests/test_watchdog.py)."""
    from finetune import status

    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "STALLED.json").write_text(text)
    line = status.read_stall(tmp_path)
    assert line is not None and line.startswith(said) and "\n" not in line, line
