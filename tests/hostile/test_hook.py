"""The plugin's PreToolUse guard (hooks/), fed the tool-call JSON Claude Code sends, as Claude Code runs it.

Each call runs hooks/guard.sh the way hooks/hooks.json declares it (`/bin/sh guard.sh`, the payload on stdin) with an
environment holding no venv: the guard needs only /bin/sh and the system's python3. Exit 2 with one stderr line
denies; exit 0 with no output hands the call on to Claude Code's permission rules. The allowed-tools of
commands/finetune.md are read from the file, never copied here: every pre-approved call of the command's body passes
the guard, every person's act the body names is denied, and so is each of those in every shell spelling tried.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_command_permissions import PERSON_ONLY, _command, bash_rules, body_calls, covers  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
HOOKS = ROOT / "hooks"
DATA = "/opt/claude-plugin-data"  # what ${CLAUDE_PLUGIN_DATA} stands for in a session
VENV_FT = f'"{DATA}/venv/bin/finetune"'


def payload(tool: str, tool_input: dict, cwd: Path) -> dict:
    """A PreToolUse payload as Claude Code 2.1.328 sends it."""
    return {"session_id": "3f1c2b8e-0000-4000-8000-000000000000", "transcript_path": str(cwd / "transcript.jsonl"),
            "cwd": str(cwd), "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": tool,
            "tool_input": tool_input, "tool_use_id": "toolu_01ABCDEF"}


def guard(data: dict | str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run the hook as hooks.json declares it; (exit code, stderr)."""
    entry = json.loads((HOOKS / "hooks.json").read_text())["hooks"]["PreToolUse"][0]["hooks"][0]
    argv = [entry["command"], *[a.replace("${CLAUDE_PLUGIN_ROOT}", str(ROOT)) for a in entry["args"]]]
    base = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "CLAUDE_PLUGIN_ROOT": str(ROOT),
            "CLAUDE_PLUGIN_DATA": DATA, "XDG_CONFIG_HOME": os.environ["XDG_CONFIG_HOME"]}
    proc = subprocess.run(argv, input=data if isinstance(data, str) else json.dumps(data), capture_output=True,
                          text=True, env={**base, **(env or {})}, timeout=entry["timeout"])
    return proc.returncode, proc.stderr


def bash(command: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    return guard(payload("Bash", {"command": command, "description": "run it"}, cwd), env)


def _module():
    spec = importlib.util.spec_from_file_location("llm_finetuning_guard", HOOKS / "guard.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GUARD = _module()


def decide(data: dict, env: dict[str, str] | None = None) -> tuple[int, str]:
    """The guard's decision in-process (guard.py's own `decide`, what main() prints): for the many-case tables;
    the tests above and below run the real script."""
    base = {"HOME": os.environ.get("HOME", "/root"), "CLAUDE_PLUGIN_DATA": DATA,
            "XDG_CONFIG_HOME": os.environ["XDG_CONFIG_HOME"]}
    reason = GUARD.decide(data, {**base, **(env or {})})
    return (0, "") if reason is None else (2, reason + "\n")


@pytest.fixture
def project(tmp_path) -> Path:
    """A project folder with one run directory (its spec), as /finetune lays it out."""
    run = tmp_path / "runs" / "my-task"
    (run / "config").mkdir(parents=True)
    (run / "spec.yaml").write_text("name: my-task\n")
    return tmp_path


def test_hooks_json_fails_closed_and_runs_without_the_venv():
    hooks = json.loads((HOOKS / "hooks.json").read_text())
    [group] = hooks["hooks"]["PreToolUse"]
    [entry] = group["hooks"]
    assert group["matcher"] == "*" and entry["type"] == "command" and entry["onFailure"] == "block"
    assert 0 < entry["timeout"] <= 30 and entry["command"] == "/bin/sh"
    assert entry["args"] == ["${CLAUDE_PLUGIN_ROOT}/hooks/guard.sh"]
    script = (HOOKS / "guard.sh").read_text()
    assert "python3 -I" in script and "venv" not in script.replace("not the plugin's venv", "")
    imported = {line.split()[1].split(".")[0] for line in (HOOKS / "guard.py").read_text().splitlines()
                if line.startswith(("import ", "from "))}
    assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)


def test_a_broken_call_or_a_missing_python_is_refused(project, tmp_path):
    assert guard("not json")[0] == 2
    assert guard(json.dumps({"tool_name": "Bash"}))[0] == 2
    assert guard(payload("Bash", {"command": 5}, project))[0] == 2
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    code, err = guard(payload("Read", {"file_path": "README.md"}, project), env={"PATH": str(empty)})
    assert code == 2 and "python3 is not on PATH" in err, err


def test_every_pre_approved_call_passes_and_every_persons_act_is_denied(project):
    """The command's allowed-tools and the guard agree: read from commands/finetune.md, not copied."""
    front, body = _command()
    rules = bash_rules(front)
    calls = [c.replace("${CLAUDE_PLUGIN_DATA}", DATA).replace("${CLAUDE_PLUGIN_ROOT}", str(ROOT))
             .replace("$RUN", "runs/my-task") for c in body_calls(body)]
    rules = [r.replace("${CLAUDE_PLUGIN_DATA}", DATA).replace("${CLAUDE_PLUGIN_ROOT}", str(ROOT)) for r in rules]
    person = [c for c in calls if not any(covers(r, c) for r in rules)]
    assert {" ".join(c.split()[1:3]) for c in person} == set(PERSON_ONLY), person
    for call in calls:
        # every call through the guard's decision; the first of each kind through the script itself as well
        code, err = decide(payload("Bash", {"command": call, "description": "run it"}, project))
        if call in (person[0], next(c for c in calls if c not in person)):
            assert bash(call, project) == (code, err), call
        if call in person:
            assert code == 2 and "the person runs it themselves" in err, (call, err)
        else:
            assert (code, err) == (0, ""), (call, err)
    for tool in front["allowed-tools"]:  # the Write / Edit rules: their files are the agent's to write
        if tool.startswith(("Write(", "Edit(")):
            name = tool[:tool.index("(")]
            path = tool[len(name) + 1:-1].replace("*", "my-task")
            assert decide(payload(name, {"file_path": path, "content": "x"}, project)) == (0, ""), tool


PERSON_SPELLINGS = [
    "{ft} inspect human-verdict runs/my-task --file runs/my-task/reading.jsonl --user Ada --yes",
    "{ft} inspect confirm runs/my-task --user Ada --yes",
    "{ft} inspect ack runs/my-task base_saturated --reason 'a curated split: the full set varies' --yes",
    "{ft} inspect review runs/my-task --format terminal",
    "{ft} inspect review runs/my-task --format=terminal",
    "{ft} diagnose runs/my-task --approve --user Ada",
    "{ft} demo -o runs/demo",
    "{ft} publish runs/my-task",
    "FOO=1 BAR=2 {ft} inspect confirm runs/my-task --user Ada --yes",
    "env -i PATH=/bin {ft} inspect confirm runs/my-task --user Ada --yes",
    "nohup {ft} inspect confirm runs/my-task --user Ada --yes &",
    "timeout 60 {ft} inspect confirm runs/my-task --user Ada --yes",
    "cd runs && {ft} inspect confirm my-task --user Ada --yes",
    "true; {ft} inspect confirm runs/my-task --user Ada --yes",
    "false || {ft} inspect confirm runs/my-task --user Ada --yes",
    "({ft} inspect confirm runs/my-task --user Ada --yes)",
    "echo yes | {ft} inspect confirm runs/my-task --user Ada",
    "{ft} inspect gate runs/my-task\n{ft} inspect confirm runs/my-task --user Ada --yes",
    "bash -c '{ft} inspect confirm runs/my-task --user Ada --yes'",
    "sh -c \"bash -c '{ft} inspect ack runs/my-task f --reason long-enough-reason-here --yes'\"",
    "eval '{ft} inspect confirm runs/my-task --user Ada --yes'",
    "python3 -m finetune inspect confirm runs/my-task --user Ada --yes",
    "/usr/bin/env python -m finetune.cli inspect human-verdict runs/my-task --file x --yes",
    "F={ft}; $F inspect confirm runs/my-task --user Ada --yes",
    "$(echo {ft}) inspect confirm runs/my-task --user Ada --yes",
    "`echo finetune` inspect ack runs/my-task f --reason long-enough-reason-here --yes",
    "x=inspect; finetune $x confirm runs/my-task --user Ada --yes",
    "{ft} inspect confirm 'runs/my-task --user Ada",  # an open quote: cannot parse, names a person's act
    "script -qc '{ft} inspect review runs/my-task --format terminal' /dev/null",  # a pty for isatty()
    "unbuffer {ft} inspect review runs/my-task --format terminal",
    "tmux send-keys '{ft} inspect confirm runs/my-task --user Ada --yes' Enter",
    "python3 -c \"from finetune.cli import main; main(['inspect', 'confirm', 'runs/my-task', '--user', 'A'])\"",
]


@pytest.mark.parametrize("spelling", PERSON_SPELLINGS)
def test_a_persons_command_is_denied_in_every_spelling(project, spelling):
    code, err = decide(payload("Bash", {"command": spelling.format(ft=VENV_FT)}, project))
    assert code == 2 and err.startswith("llm-finetuning guard: ") and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("tool,field", [("Write", "file_path"), ("Edit", "file_path"), ("MultiEdit", "file_path"),
                                        ("NotebookEdit", "notebook_path")])
@pytest.mark.parametrize("rel", ["verdicts.jsonl", "confirmation.json", "acks.json", "reveals.json",
                                 "reading_set.json", "samples.jsonl", "sample_info.json", "scored.jsonl",
                                 "score_report.json", "gate.json", "rewards.py", "rewards_answers.py",
                                 "config/train.py", "config/launch.sh", "train/metrics.jsonl",
                                 "train/trainer_state.json", "diagnosis/diagnosis.json", "requests/samples.jsonl",
                                 "inspect/checkpoints/step-40/verdicts.jsonl"])
def test_the_agents_file_tools_cannot_write_a_run_file(project, tool, field, rel):
    (project / "runs" / "my-task" / "train").mkdir(exist_ok=True)
    for path in (f"runs/my-task/{rel}", str(project / "runs" / "my-task" / rel)):
        code, err = decide(payload(tool, {field: path, "content": "{}", "old_string": "a", "new_string": "b"}, project))
        assert code == 2 and "refused" in err, (tool, path, err)


@pytest.mark.parametrize("command", [
    "echo '{{}}' > runs/my-task/gate.json",
    "printf x >> runs/my-task/verdicts.jsonl",
    "cat /tmp/v.jsonl | tee runs/my-task/verdicts.jsonl",
    "cp /tmp/x runs/my-task/confirmation.json",
    "mv /tmp/x runs/my-task/acks.json",
    "sed -i s/false/true/ runs/my-task/verdicts.jsonl",
    "rm runs/my-task/reveals.json",
    "ln -sf /tmp/x runs/my-task/reading_set.json",
    "python3 -c \"open('runs/my-task/gate.json', 'w').write('{{}}')\"",
    "cd runs/my-task && echo x > gate.json",
    "dd if=/tmp/x of=runs/my-task/scored.jsonl",
    "cp /tmp/metrics.jsonl runs/my-task/train/metrics.jsonl",
    "cp -r /tmp/cfg/. runs/my-task/config/",
])
def test_bash_writes_to_run_files_are_denied(project, command):
    code, err = decide(payload("Bash", {"command": command.format()}, project))
    assert code == 2 and "refused" in err, (command, err)


@pytest.mark.parametrize("command", [
    "cat runs/my-task/gate.json", "jq .status runs/my-task/gate.json", "ls -la runs/my-task",
    "head -5 runs/my-task/verdicts.jsonl", "git status", "nvidia-smi", "python3 --version",
    "grep -c accept runs/my-task/verdicts.jsonl", "cat runs/my-task/config/BRIEF.md",
])
def test_reads_and_unrelated_commands_pass(project, command):
    assert decide(payload("Bash", {"command": command}, project)) == (0, ""), command


def test_the_persons_key_folder_is_out_of_reach(project, tmp_path):
    folder = Path(os.environ["XDG_CONFIG_HOME"]) / "llm-finetuning"
    code, err = guard(payload("Read", {"file_path": str(folder / "person.key")}, project))  # the script itself
    assert code == 2 and "key folder" in err, err
    for tool, field in (("Read", "file_path"), ("Write", "file_path"), ("Edit", "file_path")):
        code, err = decide(payload(tool, {field: str(folder / "person.key"), "content": "x"}, project))
        assert code == 2 and "key folder" in err, (tool, err)
    assert decide(payload("Grep", {"pattern": "x", "path": str(folder.parent)}, project))[0] == 2
    assert decide(payload("Glob", {"pattern": "**/*.key", "path": str(folder.parent.parent)}, project))[0] == 2
    for command in (f"cat {folder}/person.key", "cat ~/.config/llm-finetuning/person.key",
                    "XDG_CONFIG_HOME=/tmp/mine {ft} inspect gate runs/my-task", "export HOME=/tmp/elsewhere",
                    "FINETUNE_UNGATED_OVERRIDE=x bash runs/my-task/config/launch.sh",
                    "FINETUNE_JUDGE_HOSTS=evil.example {ft} rewards render runs/my-task/spec.yaml"):
        code, err = decide(payload("Bash", {"command": command.format(ft=VENV_FT)}, project))
        assert code == 2, (command, err)
    # the plugin's own folders carry the same name: reading them is not reading the key
    plugin = "/root/.claude/plugins/cache/llm-finetuning/skills/grpo-rlvr-training/SKILL.md"
    assert decide(payload("Read", {"file_path": plugin}, project)) == (0, "")
    assert decide(payload("Bash", {"command": f"{VENV_FT} inspect gate runs/my-task"}, project)) == (0, "")


def fake_venv(tmp_path: Path, code: int, line: str) -> dict[str, str]:
    """CLAUDE_PLUGIN_DATA whose venv's finetune answers `inspect verify` with ``code`` and ``line``."""
    exe = tmp_path / "data" / "venv" / "bin" / "finetune"
    exe.parent.mkdir(parents=True)
    exe.write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path / 'asked'}\necho '{line}'\nexit {code}\n")
    exe.chmod(0o755)
    return {"CLAUDE_PLUGIN_DATA": str(tmp_path / "data")}


LAUNCHES = ["bash runs/my-task/config/launch.sh", "runs/my-task/config/launch.sh",
            "cd runs/my-task && ./config/launch.sh", "sbatch runs/my-task/config/launch.slurm",
            "accelerate launch --config_file runs/my-task/config/accelerate.yaml runs/my-task/config/train.py",
            "trl grpo --config runs/my-task/config/grpo_config.yaml",
            "python runs/my-task/config/train.py", "cd runs/my-task && python3 config/train.py --cpu --max-steps 2",
            "nohup bash runs/my-task/config/launch.sh > log.txt 2>&1 &",
            "bash runs/my-task/config/launch.sh 2>&1 | tee runs/my-task/train/launch.log &",
            "bash runs/my-task/config/launch.sh > runs/my-task/train/launch.log 2>&1 &",
            "torchrun --nproc_per_node 2 runs/my-task/config/train.py"]


@pytest.mark.parametrize("launch", LAUNCHES)
def test_a_launch_goes_on_only_while_the_pass_holds(project, tmp_path, launch):
    call = payload("Bash", {"command": launch}, project)
    held = fake_venv(tmp_path / "ok", 0, "gate PASS holds and config/ was rendered from it")
    assert decide(call, held) == (0, ""), launch
    assert (tmp_path / "ok" / "asked").read_text().split() == ["inspect", "verify", str(project / "runs" / "my-task")]
    code, err = decide(call, fake_venv(tmp_path / "void", 1, "acks.json changed after config/ was rendered"))
    assert code == 2 and "acks.json changed" in err, err
    code, err = decide(call, {"CLAUDE_PLUGIN_DATA": str(tmp_path / "nowhere")})
    assert code == 2 and "venv is not installed" in err, err


def test_a_launch_of_an_unknown_run_is_denied(project):
    for command in ("sbatch job.slurm", "accelerate launch train_something.py", "trl grpo --config cfg.yaml"):
        code, err = decide(payload("Bash", {"command": command}, project))
        assert code == 2 and "cannot tell" in err, (command, err)


@pytest.mark.slow  # the guard, then the venv's finetune it runs (imports the inspect stack): 3-6 s
def test_the_real_verify_denies_a_run_without_a_gate(project, tmp_path):
    """`finetune inspect verify` of this checkout's venv, as the guard runs it: no gate record, no launch."""
    exe = Path(sys.executable).parent / "finetune"
    if not exe.is_file():
        pytest.skip("no finetune console script beside this interpreter")
    data = tmp_path / "data" / "venv" / "bin"
    data.mkdir(parents=True)
    (data / "finetune").symlink_to(exe)
    code, err = bash("bash runs/my-task/config/launch.sh", project, {"CLAUDE_PLUGIN_DATA": str(tmp_path / "data")})
    assert code == 2 and "does not hold" in err, err


@pytest.mark.slow  # Claude Code's own validator through npx: 5-20 s
def test_claude_plugin_validate_strict_takes_the_hook_and_user_config():
    """The manifest itself (userConfig) and hooks/hooks.json (onFailure, exec form) as Claude Code 2.1.328 reads
    them: `--strict` clean. (tests/test_plugin.py validates the folder, whose marketplace manifest it reads.)"""
    import shutil as _shutil

    from test_plugin import CLAUDE_CODE_VERSION

    npx = _shutil.which("npx")
    if npx is None:
        pytest.skip("npx (Node.js) is not installed, so Claude Code's plugin validator cannot run here")
    manifest = json.loads((ROOT / ".claude-plugin" / "plugin.json").read_text())
    assert {"judge_hosts", "judge_key_envs", "judge_proxy"} <= set(manifest["userConfig"])
    out = subprocess.run([npx, "--yes", f"@anthropic-ai/claude-code@{CLAUDE_CODE_VERSION}", "plugin", "validate",
                          "--strict", str(ROOT / ".claude-plugin" / "plugin.json")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "Validation passed" in out.stdout, out.stdout[-4000:] + out.stderr[-2000:]
    assert 'hooks: PreToolUse * command /bin/sh ["${CLAUDE_PLUGIN_ROOT}/hooks/guard.sh"]' in out.stdout
