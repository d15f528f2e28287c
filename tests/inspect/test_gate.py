"""The gate end to end on real reward modules: score → verdicts → confirm/ack → gate → verify_gate."""

from __future__ import annotations

import json

import pytest
from inspect_helpers import CORRECTNESS, SPEC, craft_samples, verdicts_for, write_jsonl
from person_helpers import person_verdicts

from finetune.inspect import gaterecord
from finetune.inspect.gate import verify_gate
from finetune.spec import load_spec


def _scored(run):
    return [json.loads(line) for line in (run / "scored.jsonl").read_text().splitlines()]


def _pass_run(cli, make_run, reader="human"):
    run = make_run("good")
    assert cli("inspect", "score", run).code == 0
    write_jsonl(run / "mine.jsonl", verdicts_for(craft_samples(), reader=reader, n=56))
    r = (person_verdicts(cli, run, run / "mine.jsonl") if reader == "human"
         else cli("inspect", "verdict", run, "--file", run / "mine.jsonl"))
    assert r.code == 0, r
    return run


def test_correct_reward_has_no_flags_and_no_passing_probe(cli, make_run):
    run = make_run("good")
    r = cli("inspect", "score", run)
    assert r.code == 0, r
    report = json.loads((run / "score_report.json").read_text())
    assert report["flags"] == []
    probes = report["probes"]
    assert len({p["probe"] for p in probes}) >= 11 and not any(p["passing"] for p in probes)
    assert report["base_success"]["verdict"] == "learnable"
    rows = _scored(run)
    assert len(rows) == 64 and {"rewards", "passes", "all_pass", "total", "flags"} <= set(rows[0])
    right = next(row for row in rows if row["id"] == "p0000-s00")
    assert right["all_pass"] and right["rewards"] == {"format_ok": 1.0, "correctness": 1.0}


@pytest.mark.slow
def test_human_reading_passes_and_tampering_voids_it(cli, make_run):
    run = _pass_run(cli, make_run, reader="human")
    r = cli("inspect", "gate", run)
    assert r.code == 0, r
    gate = json.loads((run / "gate.json").read_text())
    assert gate["status"] == "PASS" and gate["counts"]["read"] == 56 and gate["counts"]["disagreements"] == 0
    assert set(gate["hashes"]) == {"rewards.py", "scored.jsonl", "verdicts.jsonl", "spec:rewards", "spec:sampling",
                                   "spec:inspection", "spec:dataset.heldout"}
    spec = load_spec(run / "spec.yaml")
    assert verify_gate(run, spec).ok

    originals = {n: (run / n).read_bytes() for n in ("rewards.py", "scored.jsonl", "verdicts.jsonl", "samples.jsonl")}
    for name, data in originals.items():
        (run / name).write_bytes(data.replace(b'"accept": true', b'"accept": false', 1) if name == "verdicts.jsonl"
                                 else data + b"\n# edited\n" if name == "rewards.py" else data.replace(b"7", b"8", 1))
        check = verify_gate(run, spec)
        assert not check.ok and name in check.reason, (name, check.reason)
        (run / name).write_bytes(data)
        assert verify_gate(run, spec).ok
    # a helper module rendered beside rewards.py is bound too
    (run / "rewards_extra.py").write_text("X = 1\n")
    assert "rewards_extra.py" in verify_gate(run, spec).reason
    (run / "rewards_extra.py").unlink()
    # changing a reward weight in the spec voids the PASS
    text = (run / "spec.yaml").read_text()
    (run / "spec.yaml").write_text(text.replace("weight: 0.2", "weight: 0.3"))
    check = verify_gate(run, load_spec(run / "spec.yaml"))
    assert not check.ok and "spec:rewards" in check.reason


@pytest.mark.slow
def test_agent_reading_needs_the_users_confirmation(cli, make_run):
    run = _pass_run(cli, make_run, reader="agent")
    r = cli("inspect", "gate", run)
    assert r.code == 1 and "confirm" in r.err
    assert json.loads((run / "gate.json").read_text())["status"] == "FAIL"
    assert not verify_gate(run, load_spec(run / "spec.yaml")).ok
    assert cli("inspect", "confirm", run, "--user", "Ada", "--yes").code == 0
    r = cli("inspect", "gate", run)
    assert r.code == 0, r
    gate = json.loads((run / "gate.json").read_text())
    assert gate["confirmation"]["user"] == "Ada" and gate["readers"] == ["agent"]
    # a verdict changed after the confirmation makes the confirmation stale
    assert cli("inspect", "verdict", run, "--id", "p0000-s01", "--reject", "--incorrect", "--reader", "agent",
               "--note", "wrong sum").code == 0
    r = cli("inspect", "gate", run)
    assert r.code == 1 and "confirm again" in r.err


@pytest.mark.slow
def test_disagreements_are_listed_as_false_positive_or_negative(cli, make_run):
    run = _pass_run(cli, make_run)
    # the reader rejects a sample the reward passes, and accepts one it fails
    assert person_verdicts(cli, run, [{"id": "p0000-s00", "accept": False, "correct": False,
                                       "note": "looks right but the prompt wanted words"},
                                      {"id": "p0000-s02", "accept": True}]).code == 0
    r = cli("inspect", "gate", run)
    assert r.code == 1
    gate = json.loads((run / "gate.json").read_text())
    kinds = {(d["id"], d["field"], d["kind"]) for d in gate["disagreements"]}
    assert ("p0000-s00", "accept", "false_positive") in kinds
    assert ("p0000-s00", "correct", "false_positive") in kinds
    assert ("p0000-s02", "accept", "false_negative") in kinds
    assert "false positive (reward-hacking risk)" in r.out and "false negative (lost signal)" in r.out


@pytest.mark.slow
def test_the_record_states_bounds_and_a_recall_floor_the_reading_cannot_support_fails(cli, make_run):
    floor = SPEC.format(correctness=CORRECTNESS["exact_match"]).replace("probe_prompts: 4", "probe_prompts: 4, "
                                                                        "min_recall: 0.95")
    run = make_run("good", spec_text=floor)
    assert cli("inspect", "score", run).code == 0
    samples = craft_samples()
    write_jsonl(run / "mine.jsonl", verdicts_for(samples, reader="human", n=56))
    assert person_verdicts(cli, run, run / "mine.jsonl").code == 0
    r = cli("inspect", "gate", run)
    gate = json.loads((run / "gate.json").read_text())
    assert gate["schema_version"] == gaterecord.SCHEMA_VERSION and r.code == 1 and gate["counts"]["disagreements"] == 0
    bound = next(b for b in gate["bounds"] if b["reward"] == "correctness" and b["field"] == "correct")
    right = sum(s["kind"] == "right" for s in samples[:56])
    assert bound["read_positives"] == right and bound["false_negatives"] == 0 and bound["min_recall"] == 0.95
    assert bound["recall_lower"] == pytest.approx(0.05 ** (1 / right)) and bound["more_positives"] == 59 - right
    assert f"read {59 - right} more correct answers" in r.err
    assert f"'correctness' on correct: recall ≥ {100 * 0.05 ** (1 / right):.1f} % on {right} read correct" in r.out
    # without the floor the bound is reported, not required
    (run / "spec.yaml").write_text(SPEC.format(correctness=CORRECTNESS["exact_match"]))
    r = cli("inspect", "gate", run)
    assert r.code == 0, r
    assert "on correct: recall ≥" in r.out and json.loads((run / "gate.json").read_text())["bounds"]


@pytest.mark.slow
def test_too_few_read_fails(cli, make_run):
    run = make_run("good")
    assert cli("inspect", "score", run).code == 0
    write_jsonl(run / "mine.jsonl", verdicts_for(craft_samples(), reader="human", n=49))
    assert person_verdicts(cli, run, run / "mine.jsonl").code == 0
    r = cli("inspect", "gate", run)
    assert r.code == 1 and "49 of the required 50 samples read" in r.err


@pytest.mark.slow
def test_flags_need_a_written_reason_and_probes_cannot_be_waived(cli, make_run):
    # every completion right: correctness is constant and the base model is saturated
    samples = [s for s in craft_samples(per_prompt=8) if s["kind"] == "right"]
    run = make_run("good", samples=samples)
    assert cli("inspect", "score", run).code == 0
    report = json.loads((run / "score_report.json").read_text())
    ids = {f["id"] for f in report["flags"]}
    assert {"constant_reward:correctness", "constant_reward:format_ok", "base_saturated"} <= ids
    write_jsonl(run / "mine.jsonl", verdicts_for(samples, reader="human"))
    assert person_verdicts(cli, run, run / "mine.jsonl").code == 0
    assert cli("inspect", "gate", run).code == 1
    r = cli("inspect", "ack", run, "base_saturated", "--reason", "ok")
    assert r.code == 2 and "reason too short" in r.err
    r = cli("inspect", "ack", run, "hedged@0", "--reason", "the hedged answer is fine for this task, really")
    assert r.code == 2 and "cannot be waived" in r.err
    r = cli("inspect", "ack", run, "no_such_flag", "--reason", "a reason that is long enough to count")
    assert r.code == 2 and "no red flag" in r.err
    for flag in sorted(ids):
        assert cli("inspect", "ack", run, flag, "--by", "Ada", "--reason",
                   "these samples come from a curated easy split; the full set varies", "--yes").code == 0
    r = cli("inspect", "gate", run)
    assert r.code == 0, r
    gate = json.loads((run / "gate.json").read_text())
    assert all(f["status"] == "acknowledged" and f["ack"]["by"] == "Ada" for f in gate["flags"])


@pytest.mark.slow  # a scoring child (it imports torch for the zero-std prediction): 2-3.5 s CPU
def test_a_changed_reward_makes_the_report_stale(cli, make_run):
    run = _pass_run(cli, make_run)
    (run / "rewards.py").write_text((run / "rewards.py").read_text() + "\n# tweak\n")
    r = cli("inspect", "gate", run)
    assert r.code == 1 and "stale" in r.err and "rewards.py changed" in r.err


@pytest.mark.parametrize("args, message", [
    (("gate", "{run}"), "run `finetune inspect score RUN` first"),
    (("verdict", "{run}", "--id", "nope", "--accept", "--reader", "agent"), "is not in scored.jsonl"),
    (("verdict", "{run}", "--id", "p0000-s00", "--accept"), "--reader"),
    (("confirm", "{run}", "--user", "Ada"), "no verdicts"),
])
def test_bad_input_is_one_line_and_exit_2(cli, make_run, args, message):
    run = make_run("good")
    if args[0] != "gate":
        assert cli("inspect", "score", run).code == 0
    r = cli("inspect", *[a.format(run=run) for a in args])
    assert r.code == 2 and message in r.err and len(r.err.strip().splitlines()) == 1, r
    assert not (run / "gate.json").exists() and not (run / "verdicts.jsonl").exists()


@pytest.mark.slow  # a scoring child (it imports torch for the zero-std prediction): 2-3.5 s CPU
def test_bad_verdict_line_names_file_and_line(cli, make_run):
    run = make_run("good")
    assert cli("inspect", "score", run).code == 0
    bad = run / "bad.jsonl"
    bad.write_text('{"id": "p0000-s00", "accept": true, "reader": "human"}\n{"id": "p0000-s01", "accept": "maybe", '
                   '"reader": "human"}\n')
    r = cli("inspect", "verdict", run, "--file", bad)
    assert r.code == 2 and f"{bad}:2" in r.err and "accept" in r.err
    assert not (run / "verdicts.jsonl").exists()


def test_reward_module_that_does_not_match_the_spec_is_bad_input(cli, make_run):
    run = make_run("judge_injection")  # defines judge_correct; the spec names correctness
    r = cli("inspect", "score", run)
    assert r.code == 2 and "re-render rewards.py" in r.err
    assert not (run / "scored.jsonl").exists()


@pytest.mark.parametrize("correctness", ["exact_match", "math"])
@pytest.mark.slow
def test_rendered_rewards_resist_every_probe(cli, make_run, correctness):
    """The rewards `finetune rewards render` writes for this spec: no probe passes, no flag is raised."""
    run = make_run("good", correctness=correctness)
    (run / "rewards.py").unlink()
    assert cli("rewards", "render", run / "spec.yaml").code == 0
    r = cli("inspect", "score", run)
    assert r.code == 0, r
    report = json.loads((run / "score_report.json").read_text())
    assert report["flags"] == [] and not [p["id"] for p in report["probes"] if p["passing"]]
    write_jsonl(run / "mine.jsonl", verdicts_for(craft_samples(), reader="human", n=60))
    assert person_verdicts(cli, run, run / "mine.jsonl").code == 0
    assert cli("inspect", "gate", run).code == 0


@pytest.mark.slow
def test_verdicts_bind_the_sample_they_judged(cli, make_run):
    run = _pass_run(cli, make_run)
    assert cli("inspect", "gate", run).code == 0
    # new completions under the same ids (e.g. sampled again): the old reading no longer counts
    samples = craft_samples()
    for s in samples[:10]:
        s["completion"] += " Done."
    write_jsonl(run / "samples.jsonl", [{k: v for k, v in s.items() if k != "kind"} for s in samples])
    assert cli("inspect", "score", run).code == 0
    r = cli("inspect", "gate", run)
    assert r.code == 1 and "46 of the required 50 samples read (10 verdict(s) judged samples that changed" in r.err
    # a verdict file carrying the digest of an older completion is refused
    old = {k: v for k, v in json.loads((run / "verdicts.jsonl").read_text().splitlines()[0]).items()
           if k not in ("time", "sig", "page", "first_verdict", "revealed", "changed_after_reveal")}
    (run / "old.jsonl").write_text(json.dumps(old) + "\n")
    r = cli("inspect", "verdict", run, "--file", run / "old.jsonl")
    assert r.code == 2 and "different completion" in r.err


@pytest.mark.slow  # a scoring child (it imports torch for the zero-std prediction): 2-3.5 s CPU
def test_bare_answer_task_gets_bare_probes(cli, make_run):
    """extract: none compares the whole completion: the probes must use bare answers, or every
    correct answer would look unreachable (gold_answer_fails) and the probes would prove nothing."""
    spec = SPEC.replace("  - {{name: format_ok, type: format, pattern: answer_tag, weight: 0.2}}\n", "").format(
        correctness="{name: correctness, type: exact_match, answer_column: answer, extract: none}")
    samples = craft_samples()
    for s in samples[::3]:
        s["completion"] = s["columns"]["answer"] if s["kind"] == "right" else "0"
    run = make_run("good", samples=samples, spec_text=spec)
    (run / "rewards.py").unlink()
    assert cli("rewards", "render", run / "spec.yaml").code == 0
    assert cli("inspect", "score", run).code == 0
    report = json.loads((run / "score_report.json").read_text())
    gold = [c for c in report["controls"] if c["probe"] == "gold_answer"]
    assert gold and all(c["scores"]["correctness"] == 1.0 for c in gold)
    assert not any(p["passing"] for p in report["probes"])
    assert "gold_answer_fails:correctness" not in {f["id"] for f in report["flags"]}
