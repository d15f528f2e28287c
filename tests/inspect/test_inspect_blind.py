"""Honest readings never become false disagreements; broken rewards still fail; batch verdicts; complete
lists; base success that says what its evidence lacks."""

from __future__ import annotations

import json
import re

import pytest
from inspect_helpers import craft_samples, write_jsonl
from person_helpers import person_verdicts

from finetune.inspect.gate import listing

SAMPLES = craft_samples()


def honest_reading(samples=SAMPLES) -> list[dict]:
    """A careful reader, blind: a right answer without the tag is correct but malformed (and rejected)."""
    return [{"id": s["id"], "accept": s["kind"] == "right", "correct": s["kind"] in ("right", "malformed_right"),
             "well_formed": s["kind"] in ("right", "wrong"), "note": s["kind"].replace("_", " ")} for s in samples]


def _run_with(cli, make_run, module: str | None):
    """module None: the rendered rewards.py (format-gated exact match); else a reward module from reward_modules/."""
    run = make_run(module or "good")
    if module is None:
        assert cli("rewards", "render", run / "spec.yaml").code == 0
    assert cli("inspect", "score", run).code == 0
    write_jsonl(run / "reading.jsonl", honest_reading())
    r = cli("inspect", "verdict", run, "--file", run / "reading.jsonl", "--reader", "agent")
    assert r.code == 0, r
    assert cli("inspect", "confirm", run, "--user", "Ada", "--yes").code == 0
    return run


@pytest.mark.slow
def test_honest_reading_of_a_correct_format_gated_composite_passes(cli, make_run):
    run = _run_with(cli, make_run, None)
    meta = json.loads((run / "score_report.json").read_text())["rewards"]
    assert [m["gated"] for m in meta] == [False, True]
    r = cli("inspect", "gate", run)
    assert r.code == 0, r
    gate = json.loads((run / "gate.json").read_text())
    malformed_right = {s["id"] for s in SAMPLES if s["kind"] == "malformed_right"}
    assert gate["status"] == "PASS" and gate["counts"]["disagreements"] == 0
    assert {g["id"] for g in gate["gated_agreements"]} == malformed_right and malformed_right
    assert all(g["reward"] == "correctness" and g["score"] == 0.0 for g in gate["gated_agreements"])
    assert f"{len(malformed_right)} correct-but-malformed sample(s) count as agreement" in r.out


@pytest.mark.slow
def test_the_same_reading_fails_a_broken_correctness_reward(cli, make_run):
    # format_only.py: "correctness" only checks the format, so every well-formed wrong answer earns full credit
    run = _run_with(cli, make_run, "format_only")
    r = cli("inspect", "gate", run)
    assert r.code == 1
    gate = json.loads((run / "gate.json").read_text())
    wrong = {s["id"] for s in SAMPLES if s["kind"] == "wrong"}
    fp = {d["id"] for d in gate["disagreements"] if d["kind"] == "false_positive" and d["field"] == "correct"}
    assert fp == wrong and gate["status"] == "FAIL"


@pytest.mark.slow
def test_the_gated_excuse_needs_a_gated_reward(cli, make_run):
    # good.py's REWARD_META does not mark it gated: correct-but-malformed against it stays a false negative
    run = _run_with(cli, make_run, "good")
    assert cli("inspect", "gate", run).code == 1
    gate = json.loads((run / "gate.json").read_text())
    fn = {d["id"] for d in gate["disagreements"] if d["kind"] == "false_negative"}
    assert fn == {s["id"] for s in SAMPLES if s["kind"] == "malformed_right"} and gate["gated_agreements"] == []


@pytest.mark.slow
def test_long_lists_end_with_how_many_more(cli, make_run):
    run = _run_with(cli, make_run, "format_only")
    r = cli("inspect", "gate", run)
    gate = json.loads((run / "gate.json").read_text())
    total = len(gate["disagreements"])
    assert total > 20
    shown = [line for line in r.out.splitlines() if re.match(r"  p\d{4}-s\d{2}: false", line)]
    assert len(shown) == 20 and f"  and {total - 20} more — see gate.json" in r.out
    assert listing(["a", "b"], 2) == "a, b"
    assert listing([f"p{i}" for i in range(11)], 8) == "p0, p1, p2, p3, p4, p5, p6, p7 and 3 more — see gate.json"


@pytest.mark.slow  # a scoring child (it imports torch for the zero-std prediction): 2-3.5 s CPU
def test_batch_agent_verdicts_are_validated_whole_then_recorded_at_once(cli, make_run):
    run = make_run("good")
    assert cli("inspect", "score", run).code == 0
    good = honest_reading()
    bad_files = {
        "is not in scored.jsonl": good[:10] + [{**good[10], "id": "nope"}],
        "judged twice": good[:10] + [good[3]],
        "but --reader says": good[:10] + [{**good[10], "reader": "human"}],
        "accept: true contradicts correct: false": good[:10] + [{**good[10], "accept": True, "correct": False,
                                                                  "well_formed": True}],
        "accept": good[:10] + [{k: v for k, v in good[10].items() if k != "accept"}],
    }
    for what, rows in bad_files.items():
        write_jsonl(run / "bad.jsonl", rows)
        r = cli("inspect", "verdict", run, "--file", run / "bad.jsonl", "--reader", "agent")
        assert r.code == 2 and what in r.err and len(r.err.strip().splitlines()) == 1, (what, r.err)
        assert not (run / "verdicts.jsonl").exists(), what  # nothing written: validated before recording
    write_jsonl(run / "reading.jsonl", good)
    r = cli("inspect", "verdict", run, "--file", run / "reading.jsonl", "--reader", "agent")
    assert r.code == 0 and "recorded 64 verdict(s)" in r.out
    stored = [json.loads(line) for line in (run / "verdicts.jsonl").read_text().splitlines()]
    assert len(stored) == 64 and {v["reader"] for v in stored} == {"agent"}
    assert all(len(v["sample_sha256"]) == 64 for v in stored)


def _base_rows(n_prompts: int, per_prompt: int) -> list[dict]:
    rows = craft_samples(n_prompts=n_prompts, per_prompt=per_prompt, seed=7)
    return [{**{k: v for k, v in r.items() if k not in ("kind", "id")}, "id": "b" + r["id"]} for r in rows]


@pytest.mark.slow
def test_base_success_is_provisional_when_its_evidence_is_short(cli, make_run):
    run = make_run("good")
    # no base samples: the training samples stand in (4 per prompt, training temperature)
    r = cli("inspect", "score", run)
    base = json.loads((run / "score_report.json").read_text())["base_success"]
    assert base["provisional"] and any("stand in for base samples" in m for m in base["missing"])
    assert any("as few as 4 sample(s) per prompt, the spec asks 16" in m for m in base["missing"])
    assert any("sampled at temperature 1, the spec asks 0.3" in m for m in base["missing"])
    write_jsonl(run / "reading.jsonl", honest_reading())
    assert person_verdicts(cli, run, run / "reading.jsonl").code == 0
    r = cli("inspect", "gate", run)
    assert "base success: learnable (PROVISIONAL: training samples" in r.out

    # imported base samples: 2 prompts x 4 at an unstated temperature
    write_jsonl(run / "few.jsonl", _base_rows(2, 4))
    assert cli("inspect", "sample", run, "--import-base", run / "few.jsonl").code == 0
    assert cli("inspect", "score", run).code == 0
    base = json.loads((run / "score_report.json").read_text())["base_success"]
    assert base["provisional"] and base["missing"] == [
        "2 prompt(s), the spec asks 16", "as few as 4 sample(s) per prompt, the spec asks 16",
        "sampling temperature unknown, the spec asks 0.3 (give --base-temperature with --import-base)"]
    assert "PROVISIONAL" in base["message"]

    # the spec's settings met (16 prompts x 16 samples at 0.3): not provisional
    write_jsonl(run / "full.jsonl", _base_rows(16, 16))
    assert cli("inspect", "sample", run, "--import-base", run / "full.jsonl", "--base-temperature", "0.3").code == 0
    assert cli("inspect", "score", run).code == 0
    base = json.loads((run / "score_report.json").read_text())["base_success"]
    assert not base["provisional"] and base["missing"] == [] and "PROVISIONAL" not in base["message"]
    r = cli("inspect", "sample", run, "--base-temperature", "0.3")
    assert r.code == 2 and "--import-base" in r.err
