"""The hostile-input families over every command: no traceback, the right exit code (2 for bad input),
one line, nothing written, no command executed. Cases are data (tests/hostile/cases.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cases import cases, check, invoke

CASES = cases()
FIRST = "p0000-s00"  # a scored id of the base run (conftest: the crafted 'right' samples of prompt 0)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_case(case, damaged):
    run, spec, side = damaged(case)
    problem = check(case, run, spec, side, first=FIRST)
    assert problem == "", problem


RUN_VERBS = [("inspect", "score", "{run}"), ("inspect", "review", "{run}"), ("inspect", "gate", "{run}"),
             ("inspect", "confirm", "{run}", "--user", "Ada", "--yes"), ("rewards", "render", "{spec}"),
             ("memory", "{spec}"), ("config", "render", "{spec}", "--no-gate")]


@pytest.mark.parametrize("verb", RUN_VERBS, ids=[" ".join(v[:2]) for v in RUN_VERBS])
def test_family_10_crash_leftovers_are_gone_after_any_verb(verb, damaged):
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
    code, err = invoke(Case("10", verb, lambda r: None, ""), [a.format(run=run, spec=spec, tmp=side) for a in verb])
    assert "Traceback" not in err and code in (0, 1, 2)
    assert not tmp.exists() and not stage.exists()
    assert not [p.name for p in run.iterdir() if p.name.endswith((".tmp", ".stage", ".journal"))]


def test_every_command_is_attacked():
    """Every command of the CLI table (finetune.cli.commands()) gets the generic cases — an unknown option, and
    binary garbage where its input path goes — with no hand-kept verb list: a verb without an input path
    (no positional argument, nothing in cases.INPUT_OPTION) fails here until it names one."""
    from cases import command_argv

    from finetune import cli

    attacked = {(c.verb[:2] if c.verb[1:2] and not c.verb[1].startswith(("{", "-")) else c.verb[:1], c.name)
                for c in CASES}
    for command in cli.commands():
        assert (command, "unknown_option") in attacked, command
        assert command_argv(command) is not None and (command, "garbage_input") in attacked, (
            f"{' '.join(command)}: no input path to attack; name its input option in tests/hostile/cases.py "
            f"INPUT_OPTION")


def test_every_family_is_covered():
    families = {c.family.split("-")[0] for c in CASES} | {"5", "10"}  # 5: tests/inspect/test_verdicts_locks.py
    assert families == {str(i) for i in range(1, 11)}, families
    assert len(CASES) >= 150


@pytest.mark.parametrize("text", ["a\u2028b", "c\u0085d", "e\u2029f", "g\x1ch"])
def test_family_4_line_separators_keep_the_run_usable(text, damaged):
    """A note with a line separator used to corrupt verdicts.jsonl for every later command."""
    from cases import Case

    run, spec, side = damaged(Case("4", (), lambda r: None, ""))
    noop = Case("4", (), lambda r: None, "")
    import json

    first, second = [json.loads(line)["id"] for line in (run / "scored.jsonl").read_text().split("\n")[:2]]
    code, err = invoke(noop, ["inspect", "verdict", str(run), "--id", first, "--accept", "--reader", "agent",
                              "--note", text])
    assert code == 0, err
    for verb in (["inspect", "review", str(run)], ["inspect", "confirm", str(run), "--user", "Ada", "--yes"],
                 ["inspect", "verdict", str(run), "--id", second, "--accept", "--reader", "agent"]):
        code, err = invoke(noop, verb)
        assert code == 0, (verb, err)
    from finetune.inspect.verdicts import load_verdicts

    assert load_verdicts(run)[first].note == text


@pytest.mark.parametrize("content", [b"[1]", b'"PASS"', b"\xff\xfe", b"{", b'{"status": NaN}'])
def test_train_py_refuses_a_damaged_gate_record_in_one_line(tmp_path, content):
    """Family 9 on the GPU box: the rendered train.py reading a hand-damaged gate.json."""
    import importlib.util

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from render_fixtures import write_run

    from finetune.cli import main

    spec = write_run(tmp_path / "run", "Qwen/Qwen3-1.7B")
    assert main(["config", "render", str(spec), "--no-gate"]) == 0
    loader = importlib.util.spec_from_file_location("rendered_train_hostile", spec.parent / "config" / "train.py")
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    module.GATE_REQUIRED = True
    (spec.parent / "gate.json").write_bytes(content)
    with pytest.raises(SystemExit) as exc:
        module.check_gate()
    assert str(exc.value).startswith("refusing to train:") and "gate" in str(exc.value)
