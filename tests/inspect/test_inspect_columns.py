"""A column name that is not in the data exits 2 in every Phase 1 command, naming the
column and the columns that exist, and writes nothing (never a "base never succeeds" from a typo)."""

from __future__ import annotations

import json

SPEC = """name: cols
model: tiny
dataset: {{path: data.jsonl, prompt_column: {prompt}}}
rewards:
  - {{name: format_ok, type: format, pattern: boxed, weight: 0.2}}
  - {{name: correct, type: exact_match, answer_column: {answer}, extract: boxed}}
"""


def _run(tmp_path, prompt="question", answer="answer"):
    run = tmp_path / "run"
    run.mkdir()
    (run / "spec.yaml").write_text(SPEC.format(prompt=prompt, answer=answer))
    (run / "data.jsonl").write_text("".join(json.dumps({"question": f"Q{i}?", "answer": str(i)}) + "\n"
                                            for i in range(3)))
    samples = tmp_path / "import.jsonl"
    samples.write_text("".join(json.dumps({"prompt": f"Q{i}?", "completion": f"\\boxed{{{i}}}", "answer": str(i)})
                               + "\n" for i in range(3)))
    return run, samples


def _one_line(result, column):
    assert result.code == 2, result
    line = result.err.strip()
    assert "\n" not in line and "Traceback" not in line
    assert f"'{column}'" in line and "columns:" in line
    return line


def test_rewards_render_refuses_a_missing_answer_column(cli, tmp_path):
    run, _ = _run(tmp_path, answer="final_answer")
    line = _one_line(cli("rewards", "render", run / "spec.yaml"), "final_answer")
    assert "answer, question" in line and "rewards[1].answer_column" in line
    assert not list(run.glob("rewards*.py"))


def test_inspect_sample_import_refuses_a_missing_column(cli, tmp_path):
    run, samples = _run(tmp_path, answer="final_answer")
    _one_line(cli("inspect", "sample", run / "spec.yaml", "--import", samples), "final_answer")
    assert not (run / "samples.jsonl").exists()


def test_inspect_sample_import_refuses_a_missing_prompt_column(cli, tmp_path):
    run, samples = _run(tmp_path, prompt="problem")
    _one_line(cli("inspect", "sample", run / "spec.yaml", "--import", samples), "problem")
    assert not (run / "samples.jsonl").exists()


def test_inspect_score_refuses_samples_without_the_column(cli, tmp_path):
    run, samples = _run(tmp_path)
    assert cli("rewards", "render", run / "spec.yaml").code == 0
    assert cli("inspect", "sample", run / "spec.yaml", "--import", samples).code == 0
    spec = (run / "spec.yaml").read_text().replace("answer_column: answer", "answer_column: final_answer")
    (run / "spec.yaml").write_text(spec)
    (run / "data.jsonl").write_text(json.dumps({"question": "Q?", "answer": "1", "final_answer": "1"}) + "\n")
    assert cli("rewards", "render", run / "spec.yaml").code == 0
    line = _one_line(cli("inspect", "score", run), "final_answer")
    assert "samples" in line
    assert not (run / "scored.jsonl").exists() and not (run / "score_report.json").exists()
