"""A blind re-read after a reward fix: samples held back at sampling become the reading (`inspect review --fresh`),
and the gate and status say per reading whether it was blind.

The walk: a broken correctness reward (it checks the format only) is read blind and FAILs; the reward is fixed; the
same reading now agrees, and the gate PASSes but says, first, that the reading was not blind (the reward changed
after the reader saw those samples' scores) and offers the held-back set; the reader switches to it, reads it before
its key, and the gate PASSes on a blind reading."""

from __future__ import annotations

import json
import shutil
import time

import inspect_helpers as helpers
import pytest
from inspect_helpers import CORRECTNESS, MODULES, craft_samples, write_jsonl

from finetune.inspect import readingset

# the inspect tests' toy spec, with a held-back set of {held} prompts
SPEC = helpers.SPEC.replace("probe_prompts: 4}}", "probe_prompts: 4, held_back_prompts: {held}}}")
assert SPEC != helpers.SPEC
SAMPLES = craft_samples(n_prompts=32)  # 128 samples of 32 prompts: 16 prompts (64 samples) held back


def reading(ids: set[str]) -> list[dict]:
    """A careful reader, blind, on the samples ``ids`` (correctness said only of well-formed answers: the reward
    modules here do not gate correctness on format)."""
    return [{"id": s["id"], "accept": s["kind"] == "right", "well_formed": s["kind"] in ("right", "wrong"),
             **({"correct": s["kind"] == "right"} if s["kind"] in ("right", "wrong") else {}),
             "note": s["kind"].replace("_", " ")} for s in SAMPLES if s["id"] in ids]


def _run(tmp_path, cli, held: int = 16):
    run = tmp_path / "run"
    run.mkdir()
    (run / "spec.yaml").write_text(SPEC.format(correctness=CORRECTNESS["exact_match"], held=held))
    shutil.copy(MODULES / "format_only.py", run / "rewards.py")  # "correctness" checks only the format
    data = write_jsonl(tmp_path / "samples.jsonl", [{k: v for k, v in r.items() if k != "kind"} for r in SAMPLES])
    assert cli("inspect", "sample", run / "spec.yaml", "--import", data).code == 0
    assert cli("inspect", "score", run).code == 0
    return run


def _sheet_ids(run) -> set[str]:
    sheet = (run / "review.md").read_text()
    return {s["id"] for s in SAMPLES if f"`{s['id']}`" in sheet}


def _read(cli, run, ids: set[str]) -> None:
    write_jsonl(run / "reading.jsonl", reading(ids))
    assert cli("inspect", "verdict", run, "--file", run / "reading.jsonl", "--reader", "agent").code == 0
    assert cli("inspect", "review", run, "--key").code == 0
    assert cli("inspect", "confirm", run, "--user", "Ada", "--yes").code == 0


def _status_line(cli, run, step: str) -> str:
    """What `finetune status` says of that step (checked directly: this run has no route.json or rendered spec)."""
    from finetune import status

    check = {name: fn for _, name, fn in status.STEPS}[step]
    state, detail = check(status._Run(run))
    return f"{state} {detail}"


@pytest.mark.slow  # four gates and a re-score over 128 samples
def test_a_fix_then_the_held_back_set_gives_a_blind_pass(cli, tmp_path):
    run = _run(tmp_path, cli)
    held = set(readingset.held_back(run))
    by_prompt = {s["id"]: s["row"] for s in SAMPLES}
    assert len(held) == 64 and len({by_prompt[i] for i in held}) == 16  # whole prompts held back

    # the first reading: the sheet shows every sample but the held-back ones
    assert cli("inspect", "review", run).code == 0
    first = _sheet_ids(run)
    assert len(first) == 64 and not first & held
    assert "64 more held back for a fresh blind reading" in (run / "review.md").read_text()
    _read(cli, run, first)
    r = cli("inspect", "gate", run)
    assert r.code == 1 and "false positive" in r.out  # well-formed wrong answers pass "correctness"
    assert "NOT BLIND" not in r.out  # read before the key, reward unchanged: blind

    # the fix; the same verdicts now agree, but the reward was fixed looking at these very samples
    shutil.copy(MODULES / "good.py", run / "rewards.py")
    assert cli("inspect", "score", run).code == 0
    stale = _status_line(cli, run, "inspect review + verdict")
    assert "not blind" in stale and "--fresh" in stale and "64 held-back samples" in stale, stale
    r = cli("inspect", "gate", run)
    assert r.code == 0, r
    lines = r.out.splitlines()
    assert lines[0] == ("PASS on a reading that was NOT BLIND: the reward changed after the reader saw the scores of "
                        "64 of 64 samples (it was fixed looking at them): not a blind reading"), lines[0]
    assert "gate PASS (not a blind reading" in r.out and "inspect review" in r.out and "--fresh" in r.out
    gate = json.loads((run / "gate.json").read_text())
    assert gate["blind"]["reading_blind"] is False and len(gate["blind"]["earlier_reward"]) == 64
    line = _status_line(cli, run, "inspect gate")
    assert "NOT BLIND" in line and "--fresh" in line, line

    # the fresh blind set: the held-back samples, never shown
    r = cli("inspect", "review", run, "--fresh")
    assert r.code == 0 and "64 held-back samples" in r.out, r
    # said at once, as the gate will count them: not toward the number read, still for disagreements
    assert ("the 64 verdict(s) of the earlier reading no longer count toward inspection.min_read"
            in " ".join(r.out.split())), r.out
    assert "still count for disagreements" in " ".join(r.out.split())
    assert _sheet_ids(run) == held
    assert "held-back samples (a fresh blind reading)" in (run / "review.md").read_text()
    assert "changed since the gate PASSed" in _status_line(cli, run, "inspect gate")  # the switch voids the PASS
    r = cli("inspect", "gate", run)
    assert r.code == 1 and "0 of the required 50 samples read" in r.err, r  # the old reading counts no longer
    _read(cli, run, held)
    r = cli("inspect", "gate", run)
    assert r.code == 0, r
    assert r.out.startswith("read 64/50 required, 0 disagreement(s)") and "NOT BLIND" not in r.out, r.out
    assert "64 verdict(s) of an earlier reading still count for disagreements" in r.out
    gate = json.loads((run / "gate.json").read_text())
    assert gate["blind"]["reading"] == "fresh" and gate["blind"]["reading_blind"] is True
    assert gate["blind"]["statement"].startswith("a blind reading: 64 verdicts")
    assert "NOT BLIND" not in _status_line(cli, run, "inspect gate")

    r = cli("inspect", "review", run, "--fresh")  # one held-back set: the next blind set is re-sampled
    assert r.code == 2 and "already" in r.err and "training.seed" in r.err


@pytest.mark.slow  # two gates and a 1.1 s wait for the key's second to pass: near the 5 s budget
def test_a_reading_recorded_after_the_key_is_stated_as_not_blind(cli, tmp_path):
    run = _run(tmp_path, cli, held=0)  # nothing held back: the offer is a re-sample
    assert cli("inspect", "review", run).code == 0
    ids = _sheet_ids(run)
    assert len(ids) == 100  # the sheet's 100, stratified
    early = set(sorted(ids)[:88])
    write_jsonl(run / "reading.jsonl", reading(early))
    assert cli("inspect", "verdict", run, "--file", run / "reading.jsonl", "--reader", "agent").code == 0
    assert cli("inspect", "review", run, "--key").code == 0
    time.sleep(1.1)  # times are recorded to the second: the late verdicts come a second after the key
    _read(cli, run, ids - early)  # 12 judged with the rewards' view open
    r = cli("inspect", "gate", run)
    assert r.out.splitlines()[0].endswith("12 of 100 verdicts were recorded after the reader saw the rewards' view: "
                                          "not a blind reading"), r.out
    assert "change `training.seed`" in r.out and "--fresh" not in r.out
    r = cli("inspect", "review", run, "--fresh")
    assert r.code == 2 and "held_back_prompts is 0" in r.err and "training.seed" in r.err
