"""A diagnosis licenses a config change only from this run's own training, or with the person's approval."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from finetune.diagnose.licence import approve, holds, provenance


@pytest.fixture
def run(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    run = tmp_path / "run"
    (run / "train").mkdir(parents=True)
    (run / "config").mkdir()
    (run / "config" / "train.py").write_text("# rendered\n")
    (run / "train" / "metrics.jsonl").write_text('{"step": 1}\n')
    return run


def _doc(run: Path, log: Path) -> dict:
    return {"verdict": "healthy", "symptoms": [], "recommended_change": None,
            "run": {"log": str(log), "provenance": provenance(log, run)}}


def test_own_training_bound_to_its_config_licenses(run):
    log = run / "train" / "metrics.jsonl"
    assert holds(_doc(run, log), run) == (False, holds(_doc(run, log), run)[1])  # no provenance.json yet
    assert "not bound" in holds(_doc(run, log), run)[1]
    digest = hashlib.sha256((run / "config" / "train.py").read_bytes()).hexdigest()
    (run / "train" / "provenance.json").write_text(json.dumps({"train_py_sha256": digest}))
    doc = _doc(run, log)
    assert holds(doc, run)[0] and doc["run"]["provenance"]["bound"]
    log.write_text('{"step": 1}\n{"step": 2}\n')  # the log changed after the diagnosis
    assert not holds(doc, run)[0] and "changed since it was diagnosed" in holds(doc, run)[1]
    (run / "config" / "train.py").write_text("# re-rendered since\n")  # trained under another config
    assert not holds(_doc(run, log), run)[0]


def test_a_log_from_anywhere_else_licenses_only_with_the_persons_signature(run, tmp_path):
    fabricated = run / "reading.jsonl"
    fabricated.write_text('{"step": 1, "reward": 1.0}\n')
    doc = _doc(run, fabricated)
    ok, why = holds(doc, run)
    assert not ok and "not this run's own train/ log" in why
    assert holds(None, run)[0] is False and holds({"verdict": "healthy"}, run)[0] is False
    approved = approve(doc, "Ada")
    assert holds(approved, run) == (True, "approved by Ada (signed)")
    edited = {**approved, "verdict": "symptom", "symptoms": [{"name": "entropy_collapse"}]}
    assert not holds(edited, run)[0]  # the approval covers what it was shown, not an edit after
    forged = {**doc, "approval": {**approved["approval"], "sig": "0" * 64}}
    assert not holds(forged, run)[0]
