"""examples/code-tests carries a code task end to end through the gate offline: real-style answers, the
reader's verdicts, PASS; without its hidden tests the gate names the `no_hidden_tests` red flag."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from person_helpers import person_verdicts

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "code-tests"


def _through_gate(cli, run: Path):
    assert cli("rewards", "render", run / "spec.yaml").code == 0
    assert cli("inspect", "sample", run / "spec.yaml", "--import", run / "completions.jsonl").code == 0
    assert cli("inspect", "score", run).code == 0
    # the example ships a person's reading: recorded the way the person records it (not pre-approved for an agent)
    assert person_verdicts(cli, run, run / "verdicts.jsonl", "--user", "example reader").code == 0
    return cli("inspect", "gate", run), json.loads((run / "gate.json").read_text())


@pytest.mark.slow
def test_code_example_passes_the_gate_and_needs_its_hidden_tests(cli, tmp_path):
    run = tmp_path / "code"
    shutil.copytree(EXAMPLE, run)
    result, gate = _through_gate(cli, run)
    assert result.code == 0 and gate["status"] == "PASS", (result, gate.get("reasons"))
    report = json.loads((run / "score_report.json").read_text())
    assert report["tests"][0]["hidden"]["rows_without"] == 0
    assert any(p["probe"] == "hardcoded_examples" and not p["passing"] for p in report["probes"])
    assert cli("config", "render", run / "spec.yaml").code == 0
    brief = (run / "config" / "BRIEF.md").read_text()
    assert "runs 1–2 visible test(s) per prompt row and 1–4 hidden one(s) (0 of 20 rows without" in brief

    bare = tmp_path / "bare"
    shutil.copytree(EXAMPLE, bare)
    spec = (bare / "spec.yaml").read_text().replace(" hidden_tests_column: hidden_tests,", "")
    (bare / "spec.yaml").write_text(spec)
    result, gate = _through_gate(cli, bare)
    assert result.code == 1 and gate["status"] == "FAIL"
    assert any("no_hidden_tests:tests_pass" in line for line in gate["reasons"]), gate["reasons"]
