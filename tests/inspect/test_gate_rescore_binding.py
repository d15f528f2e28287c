"""Every PASS a consumer accepts was computed on the bytes it loads.

- the gate binds the bytes it judged: files swapped while its re-score runs FAIL it (the race where a
  broken rewards.py and a re-pointed score report landed between the re-score and the hashing);
- a hand-assembled gate.json (a good run's scored / verdict files copied beside a broken rewards.py, every
  hash recomputed) passes a hash check, but not config render's or data filter's re-score.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from inspect_helpers import MODULES, craft_samples, verdicts_for, write_jsonl
from person_helpers import person_verdicts

from finetune.inspect import gate
from finetune.spec import load_spec


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _passed(cli, make_run, module: str = "good", name: str = "run") -> Path:
    run = make_run(module, name=name)
    assert cli("inspect", "score", run).code == 0
    write_jsonl(run / "mine.jsonl", verdicts_for(craft_samples(), reader="human", n=56))
    assert person_verdicts(cli, run, run / "mine.jsonl").code == 0
    return run


def _scored_broken_copy(cli, run: Path, tmp: Path) -> Path:
    """The same samples scored with the substring reward (credits 9973 for gold 973), in a folder aside."""
    other = tmp / "broken"
    other.mkdir()
    for name in ("spec.yaml", "samples.jsonl"):
        shutil.copy(run / name, other / name)
    shutil.copy(MODULES / "substring.py", other / "rewards.py")
    assert cli("inspect", "score", other).code == 0
    return other


@pytest.mark.slow
def test_files_swapped_while_the_gate_rescores_fail_it(cli, make_run, tmp_path, monkeypatch):
    run = _passed(cli, make_run)
    broken = _scored_broken_copy(cli, run, tmp_path)
    good = {n: (run / n).read_bytes() for n in ("rewards.py", "scored.jsonl", "score_report.json")}
    real = gate.rescore_differences

    def racing(run_dir, spec, rows, report):
        out = real(run_dir, spec, rows, report)  # the re-score of the good files (seconds, in a child)...
        for n in good:  # ...and meanwhile the broken rewards and a report re-pointed at them land
            shutil.copy(broken / n, run / n)
        return out

    monkeypatch.setattr(gate, "rescore_differences", racing)
    record = gate.run_gate(run, load_spec(run / "spec.yaml"))
    assert record.status == "FAIL", record.reasons
    assert any("changed while the gate ran" in r and "rewards.py" in r for r in record.reasons)
    # the record binds the bytes that were judged, never the ones swapped in
    assert record.hashes["rewards.py"] == hashlib.sha256(good["rewards.py"]).hexdigest()
    assert not gate.verify_gate(run, load_spec(run / "spec.yaml")).ok


def _forge(run: Path, good: Path) -> None:
    """Copy the good run's scored / verdict files into ``run`` and recompute every hash the record holds."""
    from finetune.hashing import bound_hashes

    for name in ("scored.jsonl", "verdicts.jsonl", "gate.json"):
        shutil.copy(good / name, run / name)
    spec = load_spec(run / "spec.yaml")
    report = json.loads((good / "score_report.json").read_text())
    report["inputs"]["rewards.py"] = _sha(run / "rewards.py")
    report["scored_sha256"] = _sha(run / "scored.jsonl")
    (run / "score_report.json").write_text(json.dumps(report))
    record = json.loads((run / "gate.json").read_text())
    record["hashes"] = bound_hashes(run, spec.reward_section(), **spec.binding())
    record["inputs"] = gate._input_hashes(run)
    (run / "gate.json").write_text(json.dumps(record))


@pytest.mark.slow
def test_a_hand_assembled_gate_record_fails_every_consumers_rescore(cli, make_run, tmp_path):
    good = _passed(cli, make_run, name="good")
    assert cli("inspect", "gate", good).code == 0
    failed = make_run("substring", name="failed")
    assert cli("inspect", "score", failed).code == 0
    _forge(failed, good)
    spec = load_spec(failed / "spec.yaml")
    assert gate.verify_gate(failed, spec).ok  # hashes alone: forgeable by anyone who writes the run folder
    check = gate.verify_gate(failed, spec, rescore=True)
    assert not check.ok and "re-score" in check.reason, check.reason
    from finetune.config import build as config

    ok, reason, _ = config._verify_gate(failed, spec, rescore=True)  # what `config render` asks (render())
    assert not ok and "re-score" in reason
    r = cli("data", "filter", failed / "spec.yaml", "--k", "2")
    assert r.code == 1 and "re-score" in r.err, r


@pytest.mark.parametrize("shadow", ["math_verify.py", "re.py", "sympy/__init__.py"])
@pytest.mark.slow
def test_a_module_shadowing_a_reward_dependency_voids_the_pass(cli, make_run, shadow):
    """RUN/math_verify.py whose verify returns True would replace the real package in a process started in
    the run directory: config render (verify_gate), data filter and status refuse the run while it is there."""
    run = _passed(cli, make_run)
    assert cli("inspect", "gate", run).code == 0
    spec = load_spec(run / "spec.yaml")
    assert gate.verify_gate(run, spec).ok
    (run / shadow).parent.mkdir(exist_ok=True)
    (run / shadow).write_text("def verify(gold, answer, *a, **k):\n    return True\n")
    check = gate.verify_gate(run, spec)
    assert not check.ok and shadow.split("/")[0] in check.reason and "stand in" in check.reason
    from finetune.status import gate_state

    state, detail = gate_state(run, spec)  # status's gate line (this run has no route.json, so it stops earlier)
    assert "stand in" in detail and "PASS holds" not in detail
    (run / shadow).unlink()
    assert gate.verify_gate(run, spec).ok
