"""acks.json / confirmation.json count only as their commands write them."""

from __future__ import annotations

import json

import pytest
from inspect_helpers import craft_samples, verdicts_for, write_jsonl
from person_helpers import person_verdicts

from finetune.inspect.gate import verify_gate
from finetune.spec import load_spec


def _flagged_run(cli, make_run):
    samples = [s for s in craft_samples(per_prompt=8) if s["kind"] == "right"]
    run = make_run("good", samples=samples)
    assert cli("inspect", "score", run).code == 0
    write_jsonl(run / "mine.jsonl", verdicts_for(samples, reader="human"))
    assert person_verdicts(cli, run, run / "mine.jsonl").code == 0
    flags = [f["id"] for f in json.loads((run / "score_report.json").read_text())["flags"]]
    for flag in flags:
        assert cli("inspect", "ack", run, flag, "--by", "Ada", "--reason",
                   "these samples come from a curated easy split; the full set varies", "--yes").code == 0
    assert cli("inspect", "gate", run).code == 0
    return run, flags


@pytest.mark.slow
def test_hand_edited_acks_are_bad_input_and_void_the_pass(cli, make_run):
    run, flags = _flagged_run(cli, make_run)
    spec = load_spec(run / "spec.yaml")
    good = json.loads((run / "acks.json").read_text())
    for bad in ({**good, flags[0]: {**good[flags[0]], "reason": ""}},               # empty reason
                {**good, flags[0]: {"reason": "x" * 30, "by": "me", "time": "t"}},  # no binding (hand-written)
                {**good, flags[0]: {**good[flags[0]], "flag_sha256": 5}},           # wrong type
                [1]):
        (run / "acks.json").write_text(json.dumps(bad))
        assert not verify_gate(run, spec).ok
        before = (run / "gate.json").read_bytes()
        r = cli("inspect", "gate", run)
        assert r.code == 2 and "acks.json" in r.err and len(r.err.strip().splitlines()) == 1, r
        assert (run / "gate.json").read_bytes() == before  # bad input writes nothing
    # an acknowledgement bound to a different statement of the flag no longer counts
    (run / "acks.json").write_text(json.dumps({**good, flags[0]: {**good[flags[0]], "flag_sha256": "0" * 64}}))
    r = cli("inspect", "gate", run)
    assert r.code == 1 and flags[0] in r.err and "neither fixed nor acknowledged" in r.err


@pytest.mark.slow
def test_acks_or_confirmation_added_after_pass_are_noticed(cli, make_run):
    run = make_run("good")
    assert cli("inspect", "score", run).code == 0
    write_jsonl(run / "mine.jsonl", verdicts_for(craft_samples(), reader="human", n=56))
    assert person_verdicts(cli, run, run / "mine.jsonl").code == 0
    assert cli("inspect", "gate", run).code == 0
    spec = load_spec(run / "spec.yaml")
    assert verify_gate(run, spec).ok
    (run / "acks.json").write_text("{}")
    check = verify_gate(run, spec)
    assert not check.ok and "acks.json" in check.reason
    (run / "acks.json").unlink()
    (run / "confirmation.json").write_text("{}")
    check = verify_gate(run, spec)
    assert not check.ok and "confirmation.json" in check.reason


@pytest.mark.slow
def test_confirmation_only_as_written_by_confirm(cli, make_run):
    run = make_run("good")
    assert cli("inspect", "score", run).code == 0
    write_jsonl(run / "mine.jsonl", verdicts_for(craft_samples(), reader="agent", n=56))
    assert cli("inspect", "verdict", run, "--file", run / "mine.jsonl").code == 0
    assert cli("inspect", "confirm", run, "--user", "Ada", "--yes").code == 0
    good = json.loads((run / "confirmation.json").read_text())
    for bad in ({**good, "user": ""}, {**good, "verdicts": "56"}, {**good, "extra": 1}, ["x"]):
        (run / "confirmation.json").write_text(json.dumps(bad))
        r = cli("inspect", "gate", run)
        assert r.code == 2 and "confirmation.json" in r.err and not (run / "gate.json").exists(), r
    (run / "confirmation.json").write_bytes(b'{"user": "\xff"}')
    r = cli("inspect", "gate", run)
    assert r.code == 2 and "not UTF-8" in r.err
    (run / "confirmation.json").write_text(json.dumps(good))
    assert cli("inspect", "gate", run).code == 0
