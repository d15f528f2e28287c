"""Code tasks whose prompts quote their tests: hidden tests stop the hard-coding hack, and without them the
gate names it (a `no_hidden_tests` red flag, acknowledgeable with a reason)."""

from __future__ import annotations

import json

import pytest
from inspect_helpers import write_jsonl

SPEC = """\
name: toy-code
model: ./model
dataset: {{path: data.jsonl, prompt_column: prompt, answer_column: null, tests_column: tests}}
rewards:
  - {{name: tests_pass, type: unit_tests, tests_column: tests, test_format: assert, all_or_nothing: true,
     min_isolation: process{hidden}}}
inspection: {{prompts: 4, per_prompt: 2, min_read: 50, probe_prompts: 2}}
"""
SOLUTIONS = ["def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a - b\n"]


def _run(tmp_path, hidden: bool):
    run = tmp_path / ("hidden" if hidden else "visible")
    run.mkdir()
    (run / "spec.yaml").write_text(SPEC.format(hidden=", hidden_tests_column: hidden" if hidden else ""))
    rows = []
    for i in range(4):
        shown = [f"assert add(1, {i}) == {1 + i}", "assert add(2, 2) == 4"]
        for k, body in enumerate(SOLUTIONS):
            rows.append({"id": f"c{i}-s{k}", "row": i, "completion": f"```python\n{body}```",
                         "prompt": "Write add(a, b). Your code should pass these tests:\n" + "\n".join(shown),
                         "columns": {"tests": shown, "hidden": [f"assert add({i + 5}, 7) == {i + 12}"]}})
    write_jsonl(run / "samples.jsonl", rows)
    return run


@pytest.mark.slow
def test_hardcoding_probe_fails_with_hidden_tests_and_the_report_counts_them(cli, tmp_path):
    run = _run(tmp_path, hidden=True)
    assert cli("rewards", "render", run / "spec.yaml").code == 0
    assert cli("inspect", "score", run).code == 0
    report = json.loads((run / "score_report.json").read_text())
    hard = [p for p in report["probes"] if p["probe"] == "hardcoded_examples"]
    assert len(hard) == 2 and not any(p["passing"] for p in hard)
    assert "_shown('add', 1, 1, 0)" in hard[0]["completion"]  # row 0's shown example, as a lookup entry
    assert report["tests"] == [{"reward": "tests_pass", "tests_column": "tests", "hidden_tests_column": "hidden",
                                "rows": 4, "visible": {"min": 2, "max": 2, "rows_without": 0},
                                "hidden": {"min": 1, "max": 1, "rows_without": 0}}]
    assert not any(f["name"] == "no_hidden_tests" for f in report["flags"])
    # the same table without the hidden tests passes: the probe is what hidden tests defend against
    from finetune.inspect.probes import hardcoded_solution

    table = hardcoded_solution(["assert add(1, 0) == 1", "assert add(2, 2) == 4"], "assert", None)
    scope: dict = {}
    exec(table, scope)
    assert scope["add"](1, 0) == 1 and scope["add"](2, 2) == 4 and scope["add"](5, 7) is None


@pytest.mark.slow
def test_prompt_quoting_every_test_without_hidden_tests_is_a_red_flag(cli, tmp_path):
    run = _run(tmp_path, hidden=False)
    assert cli("rewards", "render", run / "spec.yaml").code == 0
    assert cli("inspect", "score", run).code == 0
    report = json.loads((run / "score_report.json").read_text())
    flag = next(f for f in report["flags"] if f["id"] == "no_hidden_tests:tests_pass")
    assert "4 row(s)" in flag["message"] and "hidden_tests_column" in flag["remedy"]
    assert not any(p["probe"] == "hardcoded_examples" for p in report["probes"])
    assert report["tests"][0]["hidden"] == {"min": 0, "max": 0, "rows_without": 4}
    assert cli("inspect", "ack", run, "no_hidden_tests:tests_pass", "--reason",
               "the tests are generic properties, not examples", "--yes").code == 0


def test_hardcoding_probe_writes_leetcode_class_solution_tables():
    """LeetCode-style `Solution().method(...)` tests get a lookup-table `class Solution` (it was None: no probe ran),
    which passes the shown examples and fails a hidden test in the sandbox."""
    from finetune.inspect.probes import hardcoded_solution
    from finetune.sandbox.runner import AssertJob, SandboxPool

    shown = ["assert Solution().twoSum([2, 7, 11], 9) == [0, 1]", "assert Solution().isPal(s='aba')",
             "assert not Solution().isPal('ab')"]
    table = hardcoded_solution(json.dumps(shown), "assert", None)
    assert table is not None and "class Solution:" in table
    scope: dict = {}
    exec(table, scope)
    sol = scope["Solution"]()
    assert sol.twoSum([2, 7, 11], 9) == [0, 1] and sol.isPal(s="aba") is True and sol.isPal("ab") is False
    assert sol.twoSum([3, 3], 6) is None
    hidden = ["assert Solution().twoSum([3, 3], 6) == [0, 1]"]
    with SandboxPool(workers=1, timeout_s=5.0, memory_mb=256, min_isolation="process") as pool:
        visible_only, with_hidden = pool.run_batch([AssertJob(table, shown), AssertJob(table, shown + hidden)])
    assert visible_only.passed and (with_hidden.passed, with_hidden.tests_passed) == (False, 3)
