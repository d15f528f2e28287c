"""Who read is established, not declared: an agent holding exactly /finetune's allowed-tools cannot PASS
the gate without a person's act.

The agent is played literally: every Bash call it makes is a string that must be covered by one of
commands/finetune.md's allowed-tools rules (Claude Code runs those without asking), every file it writes
must be covered by a Write/Edit rule, and its Bash has no terminal. It tries each way a careless or
adversarial agent would to pass its own reading off as a person's. Only then does the person act
(`inspect human-verdict`, or `inspect confirm`: both outside the rules, so Claude Code asks them).
"""

from __future__ import annotations

import contextlib
import fnmatch
import io
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from person_helpers import page_export  # noqa: E402
from test_command_permissions import FT, _command, bash_rules, covers  # noqa: E402

RUN = "runs/my-task"


class Agent:
    """Claude Code's agent with /finetune's allowed-tools: pre-approved calls only, no terminal."""

    def __init__(self, cwd: Path) -> None:
        front, _ = _command()
        self.rules = bash_rules(front)
        self.file_rules = [t for t in front["allowed-tools"] if t.startswith(("Write(", "Edit("))]
        self.cwd = cwd

    def may_run(self, call: str) -> bool:
        return any(covers(r, call) for r in self.rules)

    def write(self, rel: str, text: str) -> None:
        assert any(fnmatch.fnmatch(rel, r[len("Write("):-1]) for r in self.file_rules if r.startswith("Write(")), rel
        (self.cwd / rel).write_text(text)

    def bash(self, call: str, stdin: str = "") -> tuple[int, str]:
        """Run a pre-approved call as the agent's Bash tool does: a real process, stdin a pipe (no tty)."""
        assert call.startswith(FT) and self.may_run(call), f"not pre-approved, Claude Code would ask: {call}"
        argv = [sys.executable, "-m", "finetune", *shlex.split(call[len(FT):])]
        r = subprocess.run(argv, cwd=self.cwd, input=stdin, capture_output=True, text=True, timeout=300)
        return r.returncode, r.stdout + r.stderr


def _main(cwd: Path, *argv: str) -> tuple[int, str]:
    from finetune.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), contextlib.chdir(cwd):
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue()


@pytest.fixture
def unread(base_run, tmp_path) -> Path:
    """The hostile suite's run, scored, before anyone read it (its acknowledged flag kept)."""
    run = tmp_path / RUN
    shutil.copytree(base_run, run)
    for name in ("verdicts.jsonl", "confirmation.json", "gate.json", "reveals.json"):
        (run / name).unlink(missing_ok=True)
    return tmp_path


def _reading(run: Path, **extra) -> str:
    from inspect_helpers import verdicts_for

    rows = [{**json.loads(line), "kind": "right"} for line in (run / "samples.jsonl").read_text().splitlines()]
    return "".join(json.dumps({**v, **extra}) + "\n" for v in verdicts_for(rows, reader="human"))  # all right


def _n(run: Path) -> int:
    return len((run / "samples.jsonl").read_text().splitlines())


@pytest.mark.slow
def test_an_agent_with_the_allowed_tools_cannot_pass_without_a_person(unread):
    agent, run = Agent(unread), unread / RUN
    q = f'"{RUN}"'
    gate = f"{FT} inspect gate {q}"
    # the person's paths are not the agent's: Claude Code would ask for each
    for call in (f"{FT} inspect human-verdict {q} --file {q}/reading.jsonl",
                 f'{FT} inspect confirm {q} --user "A Person"', f"{FT} inspect ack {q} base_saturated --reason x"):
        assert not agent.may_run(call), call
    for rel in (f"{RUN}/verdicts.jsonl", f"{RUN}/confirmation.json", f"{RUN}/gate.json"):
        with pytest.raises(AssertionError):
            agent.write(rel, "{}")

    # 1. a reading that says it is a person's, recorded through the agent's pre-approved path
    agent.write(f"{RUN}/reading.jsonl", _reading(run))
    code, out = agent.bash(f"{FT} inspect verdict {q} --file {q}/reading.jsonl")
    assert code == 0 and "say reader 'human'" in out and "inspect human-verdict" in out, out
    lines = [json.loads(x) for x in (run / "verdicts.jsonl").read_text().splitlines()]
    assert {(v["reader"], v["via"]) for v in lines} == {("agent", "verdict")} and len(lines) == _n(run)
    code, out = agent.bash(gate)
    record = json.loads((run / "gate.json").read_text())
    assert code == 1 and record["status"] == "FAIL" and record["readers"] == ["agent"], out
    assert any("has not confirmed" in r for r in record["reasons"])
    assert record["paths"]["counts"] == {"verdict": _n(run)}
    assert record["paths"]["human_declared_not_established"] == []  # recorded as the agent's: nothing declared

    # 2. the same, naming the person's path and a person inside the file
    agent.write(f"{RUN}/reading.jsonl", _reading(run, via="human-verdict", by="Ada"))
    assert agent.bash(f"{FT} inspect verdict {q} --file {q}/reading.jsonl")[0] == 0
    assert {json.loads(x)["via"] for x in (run / "verdicts.jsonl").read_text().splitlines()} == {"verdict"}
    # 3. --reader human on the agent's path: not a choice there
    code, out = agent.bash(f"{FT} inspect verdict {q} --file {q}/reading.jsonl --reader human")
    assert code == 2 and "invalid choice" in out
    # 4. the terminal review fed from a pipe
    code, out = agent.bash(f"{FT} inspect review {q} --format terminal", stdin="a\n\nk\n" * _n(run) + "q\n")
    assert code == 2 and "not one" in out, out
    assert {json.loads(x)["reader"] for x in (run / "verdicts.jsonl").read_text().splitlines()} == {"agent"}
    code, out = agent.bash(gate)
    assert code == 1 and json.loads((run / "gate.json").read_text())["readers"] == ["agent"], out
    # every Phase 2 consumer refuses what the agent holds
    code, out = agent.bash(f"{FT} config render {q}/spec.yaml")
    assert code == 1 and not (run / "config").exists(), out

    # the person's act: their own reading of the page, exported and recorded by their own command
    exported = page_export(run, run / "reading.jsonl")
    # the agent's reading.jsonl is no page export: the person's command refuses it even from the person
    code, out = _main(unread, "inspect", "human-verdict", RUN, "--file", f"{RUN}/reading.jsonl", "--user", "Ada",
                      "--yes")
    assert code == 2 and "not an export of the review page" in out, out
    code, out = _main(unread, "inspect", "human-verdict", RUN, "--file", str(exported), "--user", "Ada")
    assert code == 2 and "to record: " in out and "nothing recorded" in out, out  # shown first, recorded on yes
    assert _main(unread, "inspect", "human-verdict", RUN, "--file", str(exported), "--user", "Ada", "--yes")[0] == 0
    for flag in ("constant_reward:format_ok", "constant_reward:correctness"):  # and their reasons (a curated split)
        assert _main(unread, "inspect", "ack", RUN, flag, "--reason", "a curated easy split: the full set varies",
                     "--by", "Ada", "--yes")[0] == 0
    code, out = agent.bash(gate)
    record = json.loads((run / "gate.json").read_text())
    assert code == 0 and record["readers"] == ["human"] and record["paths"]["counts"] == {"human-verdict": _n(run)}, out
    assert record["paths"]["human_declared_not_established"] == []


def test_a_human_line_in_an_agent_reading_needs_the_persons_confirmation(unread):
    """Mixed: the person confirms the agent's reading instead (`inspect confirm`, also outside the rules)."""
    run = unread / RUN
    (run / "reading.jsonl").write_text(_reading(run))
    assert _main(unread, "inspect", "verdict", RUN, "--file", f"{RUN}/reading.jsonl")[0] == 0
    from finetune.inspect import gate
    from finetune.spec import load_spec

    record = gate.evaluate(run, load_spec(run / "spec.yaml"), rescore=False)
    assert record.status == "FAIL" and record.counts.human == 0 and record.counts.agent == _n(run)
    assert _main(unread, "inspect", "confirm", RUN, "--user", "Ada", "--yes")[0] == 0
    record = gate.evaluate(run, load_spec(run / "spec.yaml"), rescore=False)
    assert record.confirmed and record.readers == ["agent"]
    assert not any("confirm" in r for r in record.reasons), record.reasons


def test_a_verdict_file_with_no_recorded_path_is_the_agents(unread):
    """verdicts.jsonl written before paths were recorded (or by hand): `human` without a person's path
    counts as an agent's reading."""
    from inspect_helpers import verdicts_for

    from finetune.inspect import gate
    from finetune.inspect import verdicts as V
    from finetune.spec import load_spec

    run = unread / RUN
    rows = [{**json.loads(line), "kind": "right"} for line in (run / "scored.jsonl").read_text().splitlines()]
    lines = [{**v, "sample_sha256": V.sample_digest(r)} for v, r in zip(verdicts_for(rows, reader="human"), rows)]
    (run / "verdicts.jsonl").write_text("".join(json.dumps(v) + "\n" for v in lines))
    record = gate.evaluate(run, load_spec(run / "spec.yaml"), rescore=False)
    assert record.status == "FAIL" and record.readers == ["agent"]
    assert len(record.paths.human_declared_not_established) == len(rows)
    assert any("has not confirmed" in r for r in record.reasons)


@pytest.mark.slow  # a scoring child (it imports torch for the zero-std prediction): 2-3.5 s CPU
def test_a_reading_copied_from_the_rewards_view_is_reported_as_such(unread):
    """Verdicts copied from scored.jsonl's passes: 0 disagreements, nothing revealed - and the gate says the
    reading is the rewards' view, field for field, with no note (a blind reading cannot be proven)."""
    from finetune.inspect import gate
    from finetune.spec import load_spec

    run = unread / RUN
    rows = [json.loads(line) for line in (run / "scored.jsonl").read_text().splitlines()]
    copied = [{"id": r["id"], "accept": r["all_pass"], "correct": r["passes"]["correctness"],
               "well_formed": r["passes"]["format_ok"], "reader": "agent"} for r in rows]
    (run / "reading.jsonl").write_text("".join(json.dumps(v) + "\n" for v in copied))
    assert _main(unread, "inspect", "verdict", RUN, "--file", f"{RUN}/reading.jsonl")[0] == 0
    spec = load_spec(run / "spec.yaml")
    record = gate.evaluate(run, spec, rescore=False)
    assert record.counts.disagreements == 0 and record.blind.revealed == 0
    assert record.blind.mirrors_rewards is True
    code, out = _main(unread, "inspect", "gate", RUN)
    assert "equals the rewards' view on every sample" in out, out
    # the same reading with the reader's own notes on what they checked is not reported
    noted = [{**v, "note": f"checked the sum in {v['id']}"} for v in copied]
    (run / "reading.jsonl").write_text("".join(json.dumps(v) + "\n" for v in noted))
    assert _main(unread, "inspect", "verdict", RUN, "--file", f"{RUN}/reading.jsonl")[0] == 0
    assert gate.evaluate(run, spec, rescore=False).blind.mirrors_rewards is False
