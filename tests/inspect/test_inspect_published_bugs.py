"""Real reward modules carrying published bugs: flags and probes name each bug before anyone reads a
sample, and the gate FAILs — even when a reader's verdicts would otherwise agree."""

from __future__ import annotations

import json
import shutil

import pytest
from inspect_helpers import CODE_SPEC, MODULES, code_samples, craft_samples, verdicts_for, write_jsonl
from person_helpers import person_verdicts

# module, correctness type in the spec, probes that must pass (the bug), flags that must be raised
CASES = [
    ("substring", "exact_match", {"hedged", "answer_in_reasoning", "html_wrapped", "markdown_wrapped"},
     {"correct_without_answer:correctness"}),
    ("unparseable_gold", "math", {"unparseable_gold"}, set()),
    ("format_only", "exact_match", {"wrong_answer", "empty_answer"}, set()),
    ("length_credit", "exact_match", {"padding"}, {"length_correlated:correctness"}),
    ("judge_injection", "judge", {"judge_injection"}, set()),
]


@pytest.mark.parametrize("module, correctness, probes, flags", CASES, ids=[c[0] for c in CASES])
@pytest.mark.slow
def test_published_bug_is_named_and_fails_the_gate(cli, make_run, judge_endpoint, module, correctness, probes,
                                                     flags):
    run = make_run(module, correctness)
    r = cli("inspect", "score", run)
    assert r.code == 0, r
    report = json.loads((run / "score_report.json").read_text())
    passing = {p["probe"] for p in report["probes"] if p["passing"]}
    assert probes <= passing, passing
    assert flags <= {f["id"] for f in report["flags"]}
    for name in probes:
        assert f"PROBE PASSES {name}" in " ".join(r.out.split())
    # before any verdict: FAIL, naming the passing probes
    r = cli("inspect", "gate", run)
    assert r.code == 1
    assert any(name in r.err for name in probes)
    # a full human reading that agrees with the reward's view does not rescue a hackable reward
    rows = [json.loads(line) for line in (run / "scored.jsonl").read_text().splitlines()]
    agreeing = [{"id": row["id"], "accept": row["all_pass"], "reader": "human"} for row in rows]
    write_jsonl(run / "v.jsonl", agreeing)
    assert person_verdicts(cli, run, run / "v.jsonl").code == 0
    assert cli("inspect", "gate", run).code == 1
    gate = json.loads((run / "gate.json").read_text())
    assert gate["status"] == "FAIL" and probes <= {p["probe"] for p in gate["probes"] if p["passing"]}


@pytest.mark.slow
def test_reading_alone_misses_the_substring_bug(cli, make_run):
    """Why probes exist: on these samples a careful reader agrees with the substring reward everywhere
    (the gold never appears outside the answer), so only the probes catch it."""
    run = make_run("substring")
    assert cli("inspect", "score", run).code == 0
    write_jsonl(run / "v.jsonl", verdicts_for(craft_samples(), reader="human"))
    assert person_verdicts(cli, run, run / "v.jsonl").code == 0
    assert cli("inspect", "gate", run).code == 1
    gate = json.loads((run / "gate.json").read_text())
    assert gate["disagreements"] == [] and any(p["passing"] for p in gate["probes"])


@pytest.mark.slow  # a scoring child (it imports torch for the zero-std prediction): 2-3.5 s CPU
def test_judge_rescore_bypasses_its_cache(cli, make_run, judge_endpoint):
    """A noisy judge behind a cache looks deterministic unless the re-score disables the cache."""
    judge_endpoint.noisy = True
    run = make_run("judge_injection", "judge")
    assert cli("inspect", "score", run).code == 0
    report = json.loads((run / "score_report.json").read_text())
    assert "nondeterministic:judge_correct" in {f["id"] for f in report["flags"]}


@pytest.mark.slow  # a scoring child (it imports torch for the zero-std prediction): 2-3.5 s CPU
def test_exceptions_and_out_of_range_are_flagged(cli, make_run, tmp_path):
    run = make_run("good")
    src = (run / "rewards.py").read_text().replace(
        "        out.append(1.0 if got is not None and _norm(got) == _norm(gold) else 0.0)",
        "        if got == '':\n            raise ValueError('empty answer')\n"
        "        out.append(2.0 if got is not None and _norm(got) == _norm(gold) else 0.0)")
    (run / "rewards.py").write_text(src)
    assert cli("inspect", "score", run).code == 0
    report = json.loads((run / "score_report.json").read_text())
    ids = {f["id"] for f in report["flags"]}
    assert {"exceptions:correctness", "out_of_range:correctness"} <= ids
    exc = next(f for f in report["flags"] if f["id"] == "exceptions:correctness")
    assert "empty_answer@0" in exc["sample_ids"] and "ValueError: empty answer" in exc["message"]


def _code_run(tmp_path, module=None):
    run = tmp_path / "code"
    run.mkdir()
    (run / "spec.yaml").write_text(CODE_SPEC)
    write_jsonl(run / "samples.jsonl", code_samples())
    if module:
        shutil.copy(MODULES / f"{module}.py", run / "rewards.py")
    return run


@pytest.mark.slow
def test_code_reward_judged_by_exit_status_is_caught(cli, tmp_path):
    run = _code_run(tmp_path, "code_exit_status")
    assert cli("inspect", "score", run).code == 0
    report = json.loads((run / "score_report.json").read_text())
    passing = {p["probe"] for p in report["probes"] if p["passing"]}
    assert {"exit_before_tests", "monkeypatch"} <= passing and "pass_marker" not in passing
    assert cli("inspect", "gate", run).code == 1


@pytest.mark.slow
def test_rendered_unit_test_reward_resists_the_code_probes(cli, tmp_path):
    run = _code_run(tmp_path)
    assert cli("rewards", "render", run / "spec.yaml").code == 0
    assert cli("inspect", "score", run).code == 0
    report = json.loads((run / "score_report.json").read_text())
    code_probes = [p for p in report["probes"] if p["probe"] in ("exit_before_tests", "pass_marker", "monkeypatch")]
    assert len(code_probes) == 6 and not any(p["passing"] for p in code_probes)
    rows = [json.loads(line) for line in (run / "scored.jsonl").read_text().splitlines()]
    assert [r["rewards"]["tests_pass"] for r in rows] == [1.0, 0.0] * 4  # the honest solutions are told apart
