"""An extraction task (invoice fields as JSON): the probes and the flags' test answers are built in the task's
answer shape, so no flag fires on rewards that real samples pass, and a reward that credits the gold JSON inside
<think> followed by a refusal is caught by a probe."""

from __future__ import annotations

import json

import pytest

FIELDS = ('{vendor: text, date: date, total: {match: number, tolerance: 0.01}, currency: code, '
          'invoice_number: code}')
SPEC = f"""name: invoices
model: tiny
dataset: {{path: data.jsonl, answer_column: gold}}
generation: {{max_completion_length: 256}}
rewards:
  - {{name: json_shape, type: json_match, role: format, answer_column: gold, fields: {FIELDS}, weight: 0.2}}
  - {{name: json_fields, type: json_match, answer_column: gold, fields: {FIELDS}}}
"""
NAIVE = """import json, re

def last_object_equals(completion, prompt=None, gold=None):
    found = re.findall(r"\\{[^{}]*\\}", completion)
    try:
        return float(bool(found) and json.loads(found[-1]) == gold)
    except ValueError:
        return 0.0
"""
NAIVE_SPEC = """name: invoices
model: tiny
dataset: {path: data.jsonl, answer_column: gold}
generation: {max_completion_length: 256}
rewards:
  - {name: fields, type: python, file: naive.py, function: last_object_equals, columns: [gold]}
"""
GOLDS = [
    {"vendor": "Müller GmbH", "date": "2024-03-15", "total": 1234.5, "currency": "EUR", "invoice_number": "INV-0042"},
    {"vendor": "Acme Corp", "date": "2023-11-02", "total": 89.99, "currency": "USD", "invoice_number": "A-10293"},
    {"vendor": "Café de Flore", "date": "2024-01-07", "total": 46.8, "currency": "EUR", "invoice_number": None},
]


def _samples():
    """Completions as an instruct model writes them: right, wrong, malformed, in several shapes."""
    rows = []
    for i, gold in enumerate(GOLDS):
        text = json.dumps(gold, ensure_ascii=False, indent=2)
        shapes = [f"Here is the extracted information in JSON format:\n```json\n{text}\n```",
                  json.dumps({**gold, "vendor": gold["vendor"].upper()}, ensure_ascii=False),
                  json.dumps({**gold, "total": gold["total"] + 10}),
                  json.dumps({**gold, "date": "15/03/2024"}),
                  "<think>\n" + "The OCR text lists the vendor, the date and the total. " * 6 + "\n</think>\n"
                  + text[:50]]  # cut at max_completion_length after its reasoning
        for j, completion in enumerate(shapes):
            rows.append({"id": f"s{i}_{j}", "row": i, "prompt": f"Extract the invoice fields from OCR text {i}.",
                         "completion": completion, "columns": {"gold": gold}})
    return rows


def _score(tmp_path, cli, spec_text, files=None):
    from inspect_helpers import write_jsonl

    run = tmp_path / "run"
    run.mkdir()
    (run / "spec.yaml").write_text(spec_text)
    for name, text in (files or {}).items():
        (run / name).write_text(text)
    write_jsonl(run / "samples.jsonl", _samples())
    assert cli("rewards", "render", run / "spec.yaml").code == 0
    assert cli("inspect", "score", run).code == 0
    return json.loads((run / "score_report.json").read_text())


@pytest.mark.slow
def test_json_match_rewards_raise_no_flag_and_refuse_the_task_shaped_probes(tmp_path, cli):
    report = _score(tmp_path, cli, SPEC)
    names = {p["probe"] for p in report["probes"]}
    assert {"json_in_think_refusal", "json_one_field_wrong", "json_hallucinated_field", "json_truncated"} <= names
    assert not [p["id"] for p in report["probes"] if p["passing"]]
    controls = {c["id"]: c for c in report["controls"]}
    gold = controls["gold_answer@0"]
    assert "```json" in gold["completion"] and json.loads(gold["completion"].split("```json\n")[1].split("```")[0]) \
        == GOLDS[0]  # the gold written as JSON in the task's shape, not Python's repr nor a wrapping object
    assert gold["scores"] == {"json_shape": 1.0, "json_fields": 1.0}
    wrong = controls["wellformed_wrong@0"]
    assert wrong["scores"]["json_shape"] == 1.0 and wrong["scores"]["json_fields"] == 0.0
    assert not [c["id"] for c in report["controls"] if c.get("failed_by")]
    assert report["flags"] == [], [f["id"] for f in report["flags"]]


@pytest.mark.slow
def test_a_reward_that_credits_json_inside_think_is_caught_with_a_fix_for_its_kind(tmp_path, cli):
    report = _score(tmp_path, cli, NAIVE_SPEC, {"naive.py": NAIVE})
    passing = {p["probe"] for p in report["probes"] if p["passing"]}
    assert "json_in_think_refusal" in passing
    flags = {f["name"]: f for f in report["flags"]}
    assert "gold_answer_fails" not in flags  # the gold JSON, fenced, passes this reward
    assert "type: json_match" in flags["format_blind"]["remedy"] and "role: format" in flags["format_blind"]["remedy"]
