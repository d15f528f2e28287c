"""/finetune's allowed-tools against the calls its body makes.

Claude Code pre-approves a Bash call when an allowed-tools rule matches the command string as the agent
writes it: ``Bash(PREFIX:*)`` matches PREFIX followed by nothing or a space and more; ``Bash(EXACT)``
matches only EXACT. ``${CLAUDE_PLUGIN_ROOT}`` / ``${CLAUDE_PLUGIN_DATA}`` are substituted in both the rules
and the body, so the test compares them as written. A quoted call with an unquoted rule (a reported
bug) is not covered - a permission prompt on every call.

``inspect confirm``, ``inspect ack`` and ``inspect human-verdict`` must NOT be pre-approved by any rule, in any spelling the agent
could use: they record a person's act, so Claude Code must ask the person.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COMMAND = ROOT / "commands" / "finetune.md"
FT = '"${CLAUDE_PLUGIN_DATA}/venv/bin/finetune"'
PERSON_ONLY = ("inspect confirm", "inspect ack", "inspect human-verdict")
RUN = "runs/my-task"


def _command() -> tuple[dict, str]:
    text = COMMAND.read_text(encoding="utf-8")
    m = re.match(r"---\n(.*?)\n---\n", text, re.S)
    assert m, "commands/finetune.md needs YAML frontmatter"
    return yaml.safe_load(m.group(1)), text[m.end():]


def body_calls(body: str) -> list[str]:
    """Every command line of the body's ```bash blocks (indented ones too), without '# only if:' notes."""
    calls = []
    for m in re.finditer(r"^([ \t]*)```bash\n(.*?)^[ \t]*```", body, re.S | re.M):
        for raw in m.group(2).splitlines():
            line = raw.strip()
            if line and not line.startswith("#"):
                calls.append(line.partition(" # only if: ")[0].strip())
    return calls


def bash_rules(front: dict) -> list[str]:
    tools = front["allowed-tools"]
    assert isinstance(tools, list), "allowed-tools: one rule per line (a YAML list)"
    return [t[len("Bash("):-1] for t in tools if t.startswith("Bash(")]


def covers(rule: str, call: str) -> bool:
    """Does the Bash rule's specifier pre-approve ``call`` (Claude Code's prefix / exact matching)?"""
    if rule.endswith(":*"):
        prefix = rule[:-2]
        return call == prefix or call.startswith(prefix + " ")
    if rule.endswith(" *"):
        return call.startswith(rule[:-1]) or call == rule[:-2]
    return call == rule


def _subcommand(call: str) -> str:
    rest = call[len(FT):].split()
    return " ".join(rest[:2]) if rest and rest[0] in ("inspect", "rewards", "config") else rest[0]


def test_every_call_of_the_body_is_pre_approved_except_a_persons_act():
    front, body = _command()
    rules, calls = bash_rules(front), body_calls(body)
    assert len(calls) >= 15, calls
    person = [c for c in calls if c.startswith(FT) and _subcommand(c) in PERSON_ONLY]
    assert {_subcommand(c) for c in person} == set(PERSON_ONLY), "the body still records a person's acts"
    for call in calls:
        covering = [r for r in rules if covers(r, call)]
        if call in person:
            assert not covering, f"{call!r} is pre-approved by {covering}: a person's act must prompt the person"
        else:
            assert covering, f"{call!r} matches no allowed-tools rule (rules: {rules})"
    # no rule that no call uses (an unquoted twin of a quoted call is exactly such a rule)
    for rule in rules:
        assert any(covers(rule, c) for c in calls), f"allowed-tools rule Bash({rule}) matches no call of the body"


def test_one_rule_per_subcommand_written_as_the_calls_are_made():
    front, body = _command()
    rules, calls = bash_rules(front), body_calls(body)
    finetune_rules = [r for r in rules if r.startswith(FT)]
    subcommands = sorted({_subcommand(c) for c in calls if c.startswith(FT)} - set(PERSON_ONLY))
    assert sorted(_subcommand(r[:-2]) for r in finetune_rules) == subcommands
    for rule in finetune_rules:  # quoted executable, one subcommand, prefix match
        assert re.fullmatch(re.escape(FT) + r" [a-z]+(?: [a-z]+)?:\*", rule), rule
    boot = '"${CLAUDE_PLUGIN_ROOT}/scripts/bootstrap.sh" "${CLAUDE_PLUGIN_DATA}"'
    assert boot in rules and boot in calls  # exact: the bootstrap takes no other arguments


@pytest.mark.parametrize("verb", PERSON_ONLY)
@pytest.mark.parametrize("spelling", [
    '{ft} {verb} "{run}" --user "A Person" --statement "read it"',
    "{ft} {verb} {run} x",
    '{ft}  {verb} "{run}"',
    '{ft} {verb}',
])
def test_confirm_and_ack_are_never_pre_approved(verb, spelling):
    front, _ = _command()
    call = spelling.format(ft=FT, verb=verb, run=RUN)
    assert not [r for r in bash_rules(front) if covers(r, call)]
    # and no rule is so broad that it would cover them (a bare group, the bare executable, a wildcard)
    for rule in bash_rules(front):
        assert not rule.startswith((f"{FT}:", f"{FT} *", f"{FT} inspect:", f"{FT} inspect *")), rule
    assert "Bash" not in front["allowed-tools"] and "Bash(*)" not in front["allowed-tools"]


def test_the_command_says_why_confirm_and_ack_ask_the_user():
    _, body = _command()
    why = re.search(r"except the person's own acts:.{0,40}`inspect human-verdict`.{0,120}`inspect confirm`.{0,120}"
                    r"`inspect ack`.{0,400}refuses\s+all of them to you.{0,200}type it\s+themselves", body, re.S)
    assert why, ("the command must say that human-verdict/confirm/ack are left out because they are a person's act, "
                 "which the hook refuses to the agent and the user types")


def test_write_rules_cover_exactly_the_files_the_agent_writes():
    front, body = _command()
    # "Write the answers to `$RUN/answers.yaml`", "write `$RUN/spec.yaml` with the user", and the intro's
    # "except `$RUN/spec.yaml` and `$RUN/answers.yaml`, which you write"
    written = set(re.findall(r"[Ww]rite (?:[a-z ]{0,30} )?`\$RUN/([\w.]+)`", body))
    intro = re.search(r"except (`\$RUN/[\w.]+`(?:\s+and\s+`\$RUN/[\w.]+`)*),\s+which you write[^,]*"
                      r"(?:,\s+and\s+(`\$RUN/[\w.]+`), which you write)?", body)
    assert intro, "the command says which files the agent writes by hand"
    written |= set(re.findall(r"`\$RUN/([\w.]+)`", intro.group(0)))
    assert written == {"spec.yaml", "answers.yaml", "reading.jsonl", "verifier.py"}, written
    file_rules = [t for t in front["allowed-tools"] if re.match(r"(Write|Edit)\(", t)]
    for name in written:
        for tool in ("Write", "Edit"):
            assert any(fnmatch.fnmatch(f"{RUN}/{name}", r[len(tool) + 1:-1]) for r in file_rules
                       if r.startswith(tool + "(")), (tool, name)
    for rule in file_rules:  # scoped: never a bare Write / Edit, never outside a run directory's named files
        assert re.fullmatch(r"(Write|Edit)\(runs/\*/(spec\.yaml|answers\.yaml|reading\.jsonl|verifier\.py)\)",
                            rule), rule
    assert "Write" not in front["allowed-tools"] and "Edit" not in front["allowed-tools"]


def test_subagent_tool_is_the_current_name():
    front, body = _command()
    assert "Agent" in front["allowed-tools"] and "Task" not in front["allowed-tools"]
    assert "(Agent tool)" in body and "Task tool" not in body


@pytest.mark.parametrize("call", [
    f'{FT} publish "{RUN}" --repo me/model --license apache-2.0',
    f"{FT} publish {RUN} --dry-run",
    f"{FT} publish",
    f"cd {RUN} && sky launch -c my-task config/sky.yaml --down",
    "sky launch config/sky.yaml",
    f"bash {RUN}/config/hf_job.sh",
    "hf jobs run --flavor a100-large python:3.12 bash -c true",
])
def test_publishing_and_job_submission_are_never_pre_approved(call):
    front, _ = _command()
    assert not [r for r in bash_rules(front) if covers(r, call)], call


def test_the_command_and_the_engineer_leave_publishing_and_submission_to_the_person():
    from finetune import publish

    _, body = _command()
    agent = (ROOT / "agents" / "llm-finetuning-training-engineer.md").read_text(encoding="utf-8")
    assert publish.GUARD_DENIED == ("publish",)
    for text in (body, agent):
        assert "finetune eval" in text or "$FT eval" in text
        assert re.search(r"publish.{0,80}(user's act|person's act)", text, re.S | re.I), "publishing is the person's act"
        assert "config/sky.yaml" in text and "config/hf_job.sh" in text and "Trackio" in text
    assert re.search(r"never submit a job yourself", agent)
    assert not [c for c in body_calls(body) if " publish" in c or c.startswith(("sky ", "hf "))]
