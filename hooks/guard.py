"""llm-finetuning's PreToolUse guard: the agent's tools cannot stand in for the person.

Claude Code runs this before every tool call of a session with the plugin enabled (hooks/hooks.json) and feeds it
the call as JSON on stdin. It needs only Python's standard library (run as ``python3 -I`` by guard.sh: not the
plugin's venv). It prints nothing and exits 0 to let the call go on to Claude Code's own permission rules, or
exits 2 with one line on stderr — what is refused, why, and the person's command to use instead — to deny it.
A crash, a hang past the timeout or a missing interpreter blocks the call too (``onFailure: "block"``).

Denied to the agent:
  * the person's commands, in any spelling a shell runs (env prefixes, ``bash -c``, absolute paths, ``python -m``):
    ``finetune inspect human-verdict | confirm | ack``, ``inspect review --format terminal``, ``diagnose
    --approve``, ``demo`` (it confirms its own toy reading) and ``publish``;
  * writes (Write, Edit, MultiEdit, NotebookEdit, and Bash commands naming them) to a run's files that only the
    plugin's commands write: verdicts, confirmation, acks, reveals, the reading set, samples, scored samples and
    the score report, gate.json, rendered rewards, and the run's config/, train/ and diagnosis/ folders;
  * any access to the person's key folder (``$XDG_CONFIG_HOME/llm-finetuning``), and Bash that sets
    ``XDG_CONFIG_HOME``, ``HOME``, ``FINETUNE_UNGATED_OVERRIDE`` or ``FINETUNE_JUDGE_HOSTS``;
  * a launch (``launch.sh``, ``launch.slurm``, ``sbatch``, ``accelerate launch``, ``torchrun``, ``deepspeed``,
    ``trl grpo``, ``python .../config/train.py``) of a run whose gate PASS does not hold now, as
    ``finetune inspect verify RUN`` (the plugin's venv) says; no venv, no answer: denied.
A command it cannot parse is denied when it names any of these. What it cannot stop: a general shell the person
approves can still write any file this user can (DESIGN.md's person's-act contract).
"""

import json
import os
import re
import shlex
import subprocess
import sys

PERSON_FOLDER = "llm-finetuning"
PROTECTED_NAMES = {
    "verdicts.jsonl", "confirmation.json", "acks.json", "reveals.json", "reading_set.json", "samples.jsonl",
    "base_samples.jsonl", "sample_info.json", "scored.jsonl", "score_report.json", "gate.json", "rewards.py",
    "comparison.json", "checkpoint.json",
}
PROTECTED_DIRS = ("config", "train", "diagnosis")  # inside a run directory (a folder holding spec.yaml)
RUN_MARKERS = ("spec.yaml", "gate.json", "rewards.py", "scored.jsonl")
PERSON_ENV = ("XDG_CONFIG_HOME", "HOME", "FINETUNE_UNGATED_OVERRIDE", "FINETUNE_JUDGE_HOSTS", "FINETUNE_JUDGE_KEY_ENVS",
              "FINETUNE_JUDGE_PROXY")
# the plugin's userConfig, as Claude Code hands it to its hooks; kept for the plugin's commands in the person's folder
OPTIONS = {"judge_hosts": "CLAUDE_PLUGIN_OPTION_JUDGE_HOSTS", "judge_key_envs": "CLAUDE_PLUGIN_OPTION_JUDGE_KEY_ENVS",
           "judge_proxy": "CLAUDE_PLUGIN_OPTION_JUDGE_PROXY"}
READ_ONLY = {"cat", "head", "tail", "less", "more", "wc", "ls", "stat", "file", "sha256sum", "md5sum", "diff", "cmp",
             "grep", "egrep", "fgrep", "rg", "jq", "nl", "od", "xxd", "realpath", "readlink", "test", "[", "du"}
WRAPPERS = {"env", "command", "exec", "nohup", "time", "nice", "stdbuf", "sudo", "doas", "caffeinate", "setsid"}
SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "fish"}
PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
SEPARATORS = {";", "&&", "||", "|", "&", "|&", "(", ")", ";;", "{", "}"}
REDIRECTS = {">", ">>", ">|", "&>", "&>>", "<>", ">&"}
LAUNCHERS = {"sbatch", "srun", "torchrun", "deepspeed", "mpirun"}
VERIFY_TIMEOUT = 20  # seconds for `finetune inspect verify`; hooks.json gives the whole hook 30


class Deny(Exception):
    """A refusal: one line, what and why, and the person's command to use instead."""


def person_folder(env):
    base = (env.get("XDG_CONFIG_HOME") or "").strip()
    home = env.get("HOME") or os.path.expanduser("~")
    return os.path.realpath(os.path.join(base or os.path.join(home, ".config"), PERSON_FOLDER))


def names_person_folder(text, env):
    """Does ``text`` name the person's key folder (as resolved now, or as ~/.config/llm-finetuning, or its key)?
    The plugin's own folders are named llm-finetuning too: the bare name is not enough."""
    folder = person_folder(env)
    return folder in text or "person.key" in text or re.search(r"\.config/+" + PERSON_FOLDER + r"\b", text) is not None


def _abs(path, cwd):
    return os.path.realpath(os.path.join(cwd, os.path.expanduser(path)))


def protected_path(path, cwd, env):
    """Why the agent may not write ``path`` (None: it may, as far as this guard is concerned)."""
    full = _abs(path, cwd)
    folder = person_folder(env)
    if _inside(full, folder):
        return f"the person's key folder ({folder})"
    name = os.path.basename(full)
    if name in PROTECTED_NAMES or (name.startswith("rewards_") and name.endswith(".py")):
        return f"{name}, which only the plugin's commands write (the gate binds it)"
    parts = full.split(os.sep)
    if name.endswith(".log") and len(parts) > 1 and parts[-2] == "train":
        return None  # a launcher's console log (train/launch.log): nothing reads it as the run's record
    for i, part in enumerate(parts):
        if part in PROTECTED_DIRS:
            run = os.sep.join(parts[:i]) or os.sep
            if any(os.path.exists(os.path.join(run, m)) for m in RUN_MARKERS):
                return f"the run's {part}/ folder, which only the plugin's commands write"
    return None


def path_tool(name, tool_input, cwd, env):
    """Write / Edit / MultiEdit / NotebookEdit: no protected file; Read / Grep / Glob: not the key folder."""
    path = tool_input.get("file_path") or tool_input.get("notebook_path") or tool_input.get("path")
    if name in ("Write", "Edit", "MultiEdit", "NotebookEdit"):
        if not isinstance(path, str) or not path:
            raise Deny(f"{name} names no file; refused")
        why = protected_path(path, cwd, env)
        if why:
            raise Deny(f"{name} of {path} is refused: {why}. The plugin's commands write it (the person's own "
                       "commands for their verdicts, confirmation and acknowledgements)")
        return
    folder = person_folder(env)
    for key in ("file_path", "path", "pattern", "glob"):
        value = tool_input.get(key)
        if isinstance(value, str) and value and (names_person_folder(value, env) or _inside(_abs(value, cwd), folder)):
            raise Deny(f"{name} of the person's key folder is refused: only the person's commands use it")
    root = tool_input.get("path") if isinstance(tool_input.get("path"), str) and tool_input.get("path") else cwd
    if name in ("Grep", "Glob") and _inside(folder, _abs(root, cwd)):
        raise Deny(f"{name} over {_abs(root, cwd)} would search the person's key folder; give a path that does not "
                   "hold it")


def _inside(path, folder):
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _lex(command):
    """Tokens of a shell command with its operators apart; None when it does not parse (an open quote)."""
    lexer = shlex.shlex(command.replace("\n", " ; "), posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:
        return None


OPERATORS = sorted(SEPARATORS | REDIRECTS | {"<", "<<", "<<<", "<&"}, key=len, reverse=True)


def _operators(tok):
    """A run of punctuation shlex kept together (`);`, `&&(`) as the operators a shell reads in it."""
    if not tok or any(c not in ";&|()<>" for c in tok):
        return [tok]
    out = []
    while tok:
        op = next((o for o in OPERATORS if tok.startswith(o)), tok[0])
        out.append(op)
        tok = tok[len(op):]
    return out


def simple_commands(tokens):
    """The simple commands of a token list, each as (argv, redirect targets)."""
    out, argv, targets, expect = [], [], [], False
    for tok in [o for t in tokens for o in _operators(t)]:
        if tok in SEPARATORS:
            if argv or targets:
                out.append((argv, targets))
            argv, targets, expect = [], [], False
        elif tok in REDIRECTS or re.match(r"^\d*>>?$", tok) or tok == "<":
            expect = tok != "<"
            if tok == "<":
                expect = None
        elif expect:
            targets.append(tok)
            expect = False
        elif expect is None:
            expect = False
        else:
            argv.append(tok)
    if argv or targets:
        out.append((argv, targets))
    return out


def _strip(argv):
    """argv without leading NAME=value assignments and wrappers (env, nohup, timeout N, ...); the assignments."""
    assigned, i = [], 0
    while i < len(argv):
        tok = argv[i]
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", tok):
            assigned.append(tok.split("=", 1)[0])
        elif os.path.basename(tok) in WRAPPERS or tok.startswith("-") and i and os.path.basename(argv[i - 1]) in (
                "env", "nice", "stdbuf", "sudo"):
            pass
        elif os.path.basename(tok) == "timeout":
            i += 1  # its duration
            while i + 1 < len(argv) and argv[i].startswith("-"):
                i += 1
        else:
            break
        i += 1
    return argv[i:], assigned


def finetune_args(argv):
    """The arguments after the plugin's CLI when ``argv`` runs it (a path to finetune, python -m finetune), else
    None."""
    for i, tok in enumerate(argv):
        base = os.path.basename(tok)
        if base == "finetune" and (i == 0 or not argv[i - 1].startswith("-")):
            return argv[i + 1:]
        if tok == "-m" and i + 1 < len(argv) and argv[i + 1] in ("finetune", "finetune.cli", "finetune.__main__"):
            return argv[i + 2:]
    return None


PERSON_COMMANDS = (
    (("inspect", "human-verdict"), "records the person's own verdicts"),
    (("inspect", "confirm"), "records the person's confirmation of a reading"),
    (("inspect", "ack"), "records the person's reason for waiving a red flag"),
    (("publish",), "publishes on the person's behalf"),
    (("demo",), "confirms its own toy reading with the person's key"),
)


def person_command(args):
    """Why the finetune arguments ``args`` are a person's act (None: they are not)."""
    words = [a for a in args if not a.startswith("-")]
    for prefix, what in PERSON_COMMANDS:
        if tuple(words[:len(prefix)]) == prefix:
            return "`finetune {}` {}".format(" ".join(prefix), what)
    if words[:2] == ["inspect", "review"] and ("terminal" in args or "--format=terminal" in args):
        return "the terminal review records the person's own verdicts"
    if words[:1] == ["diagnose"] and any(a == "--approve" or a.startswith("--approve=") for a in args):
        return "`finetune diagnose --approve` records the person's licence for a config change"
    return None


def _raw_person_words(command):
    words = set(re.findall(r"[A-Za-z][\w-]*", command))
    if "human-verdict" in words:
        return "it names `inspect human-verdict`"
    if "finetune" in words or "inspect" in words:
        for w in ("confirm", "ack", "publish", "approve"):
            if w in words:
                return f"it names `{w}` beside the plugin's command"
        if "review" in words and "terminal" in words:
            return "it names the terminal review"
    return None


def bash(command, cwd, env):
    """Deny a Bash command that does a person's act, writes a protected file, sets a person's variable or launches
    a run whose PASS does not hold."""
    tokens = _lex(command)
    if names_person_folder(command, env):
        raise Deny(f"the person's key folder ({person_folder(env)}) is the person's alone: this command names it")
    if tokens is None:
        why = _raw_person_words(command) or (_mentions_protected(command) and "it names a run file")
        if why:
            raise Deny(f"a command the guard cannot parse (an open quote), and {why}: refused")
        return
    here = cwd
    for argv, targets in simple_commands(tokens):
        here = _one(argv, targets, command, here, env)
    substituted = "$(" in command or "`" in command or "<(" in command or "eval" in [t for t in tokens]
    why = _raw_person_words(command) if substituted or _dynamic(tokens) else None
    if why:
        raise Deny(f"a command built at run time (a variable, a substitution, eval), and {why}: refused")


def _dynamic(tokens):
    return any(t.startswith("$") or "${" in t for t in tokens)


def _mentions_protected(text):
    names = "|".join(re.escape(n) for n in sorted(PROTECTED_NAMES))
    return re.search(rf"(^|[/\s'\"=])({names}|rewards_\w+\.py)($|[\s'\";|&<>)])", text) is not None


def _one(argv, targets, command, cwd, env):
    """Check one simple command; return the working folder after it (``cd`` changes it for the next)."""
    argv, assigned = _strip(argv)
    touched = [a for a in assigned if a in PERSON_ENV]
    if touched or any(re.match(r"^(export|declare|typeset|readonly|set)$", a) for a in argv[:1]) and any(
            a.split("=", 1)[0] in PERSON_ENV for a in argv[1:]):
        raise Deny("setting {} is the person's choice, not the agent's: refused".format(
            ", ".join(touched) or "a person's variable ({})".format(", ".join(PERSON_ENV))))
    for target in targets:
        why = protected_path(target, cwd, env)
        if why:
            raise Deny(f"writing {target} is refused: {why}")
    if not argv:
        return cwd
    prog = os.path.basename(argv[0])
    if prog == "cd":
        return _abs(argv[1], cwd) if len(argv) > 1 else env.get("HOME", cwd)
    if prog in SHELLS and "-c" in argv[1:]:
        inner = argv[argv.index("-c") + 1:]
        if inner:
            bash(inner[0], cwd, env)
        return cwd
    if prog == "eval":
        bash(" ".join(argv[1:]), cwd, env)
        return cwd
    args = finetune_args(argv)
    if args is not None:
        why = person_command(args)
        if why:
            raise Deny(f"{why}: the person runs it themselves (in their own terminal, or Claude Code's `!` mode), "
                       f"never the agent: {_person_line(args)}")
        return cwd
    inner = _raw_person_words(" ".join(argv[1:]))
    if inner:  # script -c, expect, tmux send-keys, python -c "...main(['inspect', 'confirm'])": the act inside
        raise Deny(f"`{prog}` runs a person's command inside it ({inner}): refused; the person runs it themselves")
    if _is_launch(prog, argv):
        _launch(argv, cwd, env)
    else:
        _writes(prog, argv, cwd, env)
    return cwd


def _person_line(args):
    return "ask the person to run `finetune {}` (they see what it records and say yes)".format(
        " ".join(shlex.quote(a) for a in args))


def _writes(prog, argv, cwd, env):
    """A program other than the plugin's CLI naming a protected file: refused unless it only reads."""
    named = [(a, protected_path(a, cwd, env)) for a in argv[1:] if not a.startswith("-") or "=" in a]
    named += [(a.split("=", 1)[1], protected_path(a.split("=", 1)[1], cwd, env)) for a in argv[1:]
              if a.startswith("-") and "=" in a]
    if prog in READ_ONLY:
        return  # (its redirections were checked with the command)
    hits = [(a, why) for a, why in named if why]
    if hits:
        raise Deny(f"`{prog}` on {hits[0][0]} is refused: {hits[0][1]}; the plugin's commands write it")
    if any(_mentions_protected(a) for a in argv[1:]):
        raise Deny(f"`{prog}` with code naming a run file only the plugin's commands write is refused")


def _run_of(argv, cwd):
    """The run directory a launch command names (config/train.py, launch.sh, launch.slurm, grpo_config.yaml)."""
    for tok in argv:
        value = tok.split("=", 1)[1] if tok.startswith("-") and "=" in tok else tok
        norm = value.replace("\\", "/")
        for leaf in ("config/train.py", "config/launch.sh", "config/launch.slurm", "config/grpo_config.yaml"):
            if norm == leaf or norm.endswith("/" + leaf):
                return os.path.dirname(os.path.dirname(_abs(value, cwd)))
        if os.path.basename(norm) in ("launch.sh", "launch.slurm", "train.py", "grpo_config.yaml"):
            folder = os.path.dirname(_abs(value, cwd))
            if os.path.basename(folder) == "config":
                return os.path.dirname(folder)
    return None


def _is_launch(prog, argv):
    words = [os.path.basename(a) for a in argv]
    if prog in ("launch.sh", "launch.slurm") or prog in LAUNCHERS:
        return True
    if prog in SHELLS and any(w in ("launch.sh", "launch.slurm") for w in words[1:]):
        return True
    if prog == "accelerate" and "launch" in argv[1:2]:
        return True
    if prog == "trl" and argv[1:2] == ["grpo"]:
        return True
    if PYTHON.match(prog) or prog in ("uv", "uvx"):
        return any(w == "train.py" for w in words[1:]) or "accelerate.commands.launch" in argv
    return False


def _launch(argv, cwd, env):
    run = _run_of(argv, cwd)
    if run is None:
        raise Deny("a training launch whose run directory the guard cannot tell (no config/train.py, launch.sh or "
                   "grpo_config.yaml named) is refused; launch the run's config/launch.sh by its path")
    ok, why = verify(run, env)
    if not ok:
        raise Deny(f"launching {run} is refused: its gate PASS does not hold ({why}); fix it and re-render "
                   "(`finetune inspect gate`, `finetune config render`), or the person launches it "
                   "themselves")


def verify(run, env):
    """(holds, why): ``finetune inspect verify RUN`` from the plugin's venv; anything else is a refusal."""
    data = env.get("CLAUDE_PLUGIN_DATA") or ""
    exe = os.path.join(data, "venv", "bin", "finetune") if data else ""
    if not exe or not os.access(exe, os.X_OK):
        return False, "the plugin's venv is not installed, so nothing can check the gate (run its bootstrap)"
    try:
        proc = subprocess.run([exe, "inspect", "verify", run], capture_output=True, text=True,
                              timeout=VERIFY_TIMEOUT, cwd=run if os.path.isdir(run) else None)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"the check did not finish ({type(exc).__name__})"
    line = (proc.stdout.strip() or proc.stderr.strip() or "no answer").splitlines()[-1]
    return proc.returncode == 0, line[:400]


def decide(payload, env):
    """None to let the call go on to Claude Code's permission rules; else the one-line reason to deny it."""
    if not isinstance(payload, dict):
        return "the tool call the guard was given is not a JSON object; refused"
    name = payload.get("tool_name")
    tool_input = payload.get("tool_input")
    cwd = payload.get("cwd") or os.getcwd()
    if not isinstance(name, str) or not isinstance(tool_input, dict) or not isinstance(cwd, str):
        return "the tool call has no tool_name / tool_input / cwd the guard can read; refused"
    try:
        if name == "Bash":
            command = tool_input.get("command")
            if not isinstance(command, str):
                return "a Bash call without a command string; refused"
            bash(command, cwd, env)
        elif name in ("Write", "Edit", "MultiEdit", "NotebookEdit", "Read", "Grep", "Glob"):
            path_tool(name, tool_input, cwd, env)
    except Deny as exc:
        return "llm-finetuning guard: " + str(exc)
    return None


def sync_settings(env):
    """Keep the person's userConfig (the judge hosts, key names and proxy they set in /plugin) where the plugin's
    commands read it: settings.json in the person's folder, which the agent's tools cannot write. Written only when
    it changed; a folder that cannot be written leaves the commands on their defaults (loopback, no key, no proxy)."""
    given = {k: env[v] for k, v in OPTIONS.items() if v in env}
    if not given:
        return
    data = {k: ([x.strip() for x in v.split(",") if x.strip()] if k != "judge_proxy" else v.strip())
            for k, v in given.items()}
    folder = person_folder(env)
    path = os.path.join(folder, "settings.json")
    try:
        with open(path, encoding="utf-8") as fh:
            if json.load(fh) == data:
                return
    except (OSError, ValueError):
        pass
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        staged = f"{path}.{os.getpid()}.tmp"
        with open(staged, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
        os.replace(staged, path)
    except OSError:
        pass


def main():
    try:
        payload = json.loads(sys.stdin.read() or "null")
    except ValueError:
        payload = None
    sync_settings(dict(os.environ))
    reason = decide(payload, dict(os.environ))
    if reason is None:
        return 0
    sys.stderr.write(reason.replace("\n", " ") + "\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
