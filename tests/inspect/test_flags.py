"""Red flags that need no reader: each raised by a real reward module that has the defect."""

from __future__ import annotations

import json

import pytest
from inspect_helpers import SPEC, craft_samples

ONLY_CORRECTNESS = SPEC.replace("  - {{name: format_ok, type: format, pattern: answer_tag, weight: 0.2}}\n", "")


def _flags(cli, run):
    r = cli("inspect", "score", run)
    assert r.code == 0, r
    return {f["id"]: f for f in json.loads((run / "score_report.json").read_text())["flags"]}


def _patch(run, old, new):
    src = (run / "rewards.py").read_text()
    assert old in src
    (run / "rewards.py").write_text(src.replace(old, new))


@pytest.mark.slow
def test_correctness_alone_gives_format_no_signal(cli, make_run):
    from inspect_helpers import CORRECTNESS

    run = make_run("good", spec_text=ONLY_CORRECTNESS.format(correctness=CORRECTNESS["exact_match"]))
    _patch(run, "REWARD_FUNCS = [format_ok, correctness]", "REWARD_FUNCS = [correctness]")
    _patch(run, "REWARD_WEIGHTS = [0.2, 1.0]", "REWARD_WEIGHTS = [1.0]")
    _patch(run, '    {"name": "format_ok", "type": "format", "role": "format", "threshold": 1.0, "min": 0.0, "max": 1.0,\n'
                '     "weight": 0.2, "gated": False, "episode": False},\n', "")
    flags = _flags(cli, run)
    assert "format_blind" in flags and "same total" in flags["format_blind"]["message"]


@pytest.mark.slow
def test_empty_completion_rewarded(cli, make_run):
    samples = craft_samples()
    samples[5]["completion"] = "   "
    run = make_run("good", samples=samples)
    _patch(run, "    return [1.0 if re.fullmatch", "    return [0.5 if not _text(c).strip() else 1.0 if re.fullmatch")
    flags = _flags(cli, run)
    assert flags["empty_rewarded:format_ok"]["sample_ids"] == [samples[5]["id"]]


@pytest.mark.slow  # a scoring child (it imports torch for the zero-std prediction): 2-3.5 s CPU
def test_nan_and_all_none(cli, make_run):
    run = make_run("good")
    _patch(run, "        out.append(1.0 if got is not None and _norm(got) == _norm(gold) else 0.0)",
           "        out.append(float('nan') if got is None else 1.0 if _norm(got) == _norm(gold) else 0.0)")
    _patch(run, "    return [1.0 if re.fullmatch", "    return [None for c in completions] or [1.0 if re.fullmatch")
    flags = _flags(cli, run)
    assert "non_finite:correctness" in flags and "all_none:format_ok" in flags


@pytest.mark.slow  # a scoring child (it imports torch for the zero-std prediction): 2-3.5 s CPU
def test_flag_ids_are_attached_to_scored_rows(cli, make_run):
    run = make_run("substring")
    flags = _flags(cli, run)
    ids = set(flags["correct_without_answer:correctness"]["sample_ids"])
    rows = [json.loads(line) for line in (run / "scored.jsonl").read_text().splitlines()]
    assert ids and ids == {r["id"] for r in rows if "correct_without_answer:correctness" in r["flags"]}


@pytest.mark.slow
def test_async_reward_functions_are_awaited(cli, make_run):
    run = make_run("good")
    _patch(run, "def correctness(prompts, completions, answer, **kwargs):",
           "async def correctness(prompts, completions, answer, **kwargs):")
    assert _flags(cli, run) == {}
    rows = [json.loads(line) for line in (run / "scored.jsonl").read_text().splitlines()]
    assert rows[0]["rewards"]["correctness"] == 1.0


@pytest.mark.slow
def test_strict_format_loses_signal(cli, make_run):
    """A format reward that refuses a correct answer followed by a closing remark fails
    an expected-pass control; that is the red flag lost_signal:<reward>."""
    run = make_run("good")
    assert "lost_signal:format_ok" not in _flags(cli, run)
    _patch(run, '(?:(?!<answer>).)*", _text(c))', '\\\\s*", _text(c))')  # nothing may follow </answer>
    flags = _flags(cli, run)
    assert "lost_signal:format_ok" in flags and "prose_after_answer" in flags["lost_signal:format_ok"]["message"]
    assert "lost_signal:correctness" not in flags


@pytest.mark.slow
def test_reading_probes_catch_a_last_answer_reward(cli, make_run):
    """A correctness reward that takes the last <answer> and ignores what follows passes the
    several_answers / retraction probes; the rendered default rewards pass none."""
    run = make_run("good")
    _patch(run, "        got = None if _hedged(_text(c)) else _extract(_text(c))", "        got = _extract(_text(c))")
    assert cli("inspect", "score", run).code == 0
    report = json.loads((run / "score_report.json").read_text())
    passing = {p["probe"] for p in report["probes"] if p["passing"]}
    assert {"several_answers", "retraction_after_answer"} <= passing
