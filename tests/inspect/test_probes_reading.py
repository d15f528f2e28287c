"""On the rendered default rewards: the reading probes and expected-pass controls."""

from __future__ import annotations

import json

import pytest

SPEC = """name: boxed
model: tiny
dataset: {{path: data.jsonl, answer_column: answer}}
generation: {{max_completion_length: 256}}
rewards:
  - {{name: format_ok, type: format, pattern: boxed, weight: 0.2{format_extra}}}
  - {{name: correct, type: math, answer_column: answer, extract: boxed, workers: 1}}
"""


def _run(tmp_path, cli, format_extra=""):
    from inspect_helpers import write_jsonl

    run = tmp_path / "run"
    run.mkdir()
    (run / "spec.yaml").write_text(SPEC.format(format_extra=format_extra))
    rows = []
    for i, gold in enumerate(["72", "3600", "\\frac{1}{2}"]):
        rows.append({"id": f"s{i}", "row": i, "prompt": f"Question {i}?", "completion":
                     f"Working it out.\nTherefore the answer is \\(\\boxed{{{gold}}}\\).", "columns": {"answer": gold}})
    write_jsonl(run / "samples.jsonl", rows)
    assert cli("rewards", "render", run / "spec.yaml").code == 0
    assert cli("inspect", "score", run).code == 0
    return json.loads((run / "score_report.json").read_text())


@pytest.mark.slow
def test_default_boxed_rewards_pass_controls_and_refuse_reading_probes(tmp_path, cli):
    report = _run(tmp_path, cli)
    probes = {p["probe"] for p in report["probes"]}
    assert {"text_or_hedge", "parenthetical_alternative", "retraction_after_answer", "several_answers"} <= probes
    assert not [p["id"] for p in report["probes"] if p["passing"]]
    controls = {c["probe"]: c for c in report["controls"] if c.get("expect_pass")}
    assert {"prose_after_answer", "bold_box", "paren_delimited_box", "dollar_delimited_box",
            "bracket_delimited_box", "box_then_prose", "thin_space_thousands"} <= set(controls)
    assert not [c["id"] for c in report["controls"] if c.get("failed_by")]
    assert not [f["id"] for f in report["flags"] if f["name"] == "lost_signal"]


@pytest.mark.slow
def test_forbidding_trailing_text_skips_the_prose_controls(tmp_path, cli):
    report = _run(tmp_path, cli, ", trailing_text: forbid")
    controls = {c["probe"] for c in report["controls"] if c.get("expect_pass")}
    assert "prose_after_answer" not in controls and "bold_box" in controls
    assert not [f["id"] for f in report["flags"] if f["name"] == "lost_signal"]
