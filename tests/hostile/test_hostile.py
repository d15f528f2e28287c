"""Issue 18's hostile families over every verb: no traceback, the right exit code (2 for bad input),
one line, nothing written, no command executed. Cases are data (tests/hostile/cases.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cases import MARKER, cases

CASES = cases()
FIRST = "p0000-s00"  # a scored id of the base run (conftest: the crafted 'right' samples of prompt 0)


def snapshot(folder: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None)
            for p in sorted(folder.rglob("*"))}


def invoke(case, argv: list[str], capsys) -> tuple[int, str]:
    if case.subprocess:
        r = subprocess.run([sys.executable, "-m", "finetune", *argv], capture_output=True, text=True, timeout=120)
        return r.returncode, r.stderr
    from finetune.cli import main

    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse --help/--version only; anything else is a defect the assert shows
        code = exc.code if isinstance(exc.code, int) else 2
    return code, capsys.readouterr().err


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_case(case, damaged, capsys):
    run, spec, side = damaged(case)
    argv = [a.format(run=run, spec=spec, tmp=side, first=FIRST) for a in case.verb]
    before = snapshot(side)
    code, err = invoke(case, argv, capsys)
    assert "Traceback" not in err, err[-3000:]
    assert not (run / MARKER).exists() and not (side / MARKER).exists(), "a spec string executed a command"
    if case.code is None:
        assert code in (0, 1, 2), err[-2000:]
        return
    assert code == case.code, (code, err[-2000:])
    assert case.expect in err, err[-2000:]
    if case.code == 2:  # one error line, the last thing said (a --no-gate warning may precede it)
        lines = err.strip().splitlines()
        assert [ln for ln in lines if ln.startswith("error:")] == lines[-1:], err
    assert snapshot(side) == before, "bad input wrote something"


RUN_VERBS = [("inspect", "score", "{run}"), ("inspect", "review", "{run}"), ("inspect", "gate", "{run}"),
             ("inspect", "confirm", "{run}", "--user", "Ada"), ("rewards", "render", "{spec}"),
             ("memory", "{spec}"), ("config", "render", "{spec}", "--no-gate")]


@pytest.mark.parametrize("verb", RUN_VERBS, ids=[" ".join(v[:2]) for v in RUN_VERBS])
def test_family_10_crash_leftovers_are_gone_after_any_verb(verb, damaged, capsys):
    """A dead writer's temp file and a crashed commit's stage folder do not outlive the next command."""
    from cases import Case

    run, spec, side = damaged(Case("10", verb, lambda r: None, ""))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    tmp = run / f".scored.jsonl.{dead.pid}.k3j2x9.tmp"
    tmp.write_bytes(b"x" * (1 << 20))
    stage = run / f".config.{dead.pid}.0a1b2c3d.stage"
    stage.mkdir()
    (stage / "train.py").write_text("half")
    code, err = invoke(Case("10", verb, lambda r: None, ""), [a.format(run=run, spec=spec, tmp=side) for a in verb],
                       capsys)
    assert "Traceback" not in err and code in (0, 1, 2)
    assert not tmp.exists() and not stage.exists()
    assert not [p.name for p in run.iterdir() if p.name.endswith((".tmp", ".stage", ".journal"))]


def test_every_family_is_covered():
    families = {c.family.split("-")[0] for c in CASES} | {"5", "10"}  # 5: tests/inspect/test_locks.py
    assert families == {str(i) for i in range(1, 11)}, families
    assert len(CASES) >= 150


@pytest.mark.parametrize("text", ["a\u2028b", "c\u0085d", "e\u2029f", "g\x1ch"])
def test_family_4_line_separators_keep_the_run_usable(text, damaged, capsys):
    """A note with a line separator used to corrupt verdicts.jsonl for every later command."""
    from cases import Case

    run, spec, side = damaged(Case("4", (), lambda r: None, ""))
    noop = Case("4", (), lambda r: None, "")
    import json

    first, second = [json.loads(line)["id"] for line in (run / "scored.jsonl").read_text().split("\n")[:2]]
    code, err = invoke(noop, ["inspect", "verdict", str(run), "--id", first, "--accept", "--reader", "agent",
                              "--note", text], capsys)
    assert code == 0, err
    for verb in (["inspect", "review", str(run)], ["inspect", "confirm", str(run), "--user", "Ada"],
                 ["inspect", "verdict", str(run), "--id", second, "--accept", "--reader", "agent"]):
        code, err = invoke(noop, verb, capsys)
        assert code == 0, (verb, err)
    from finetune.inspect.verdicts import load_verdicts

    assert load_verdicts(run)[first].note == text
