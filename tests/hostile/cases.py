"""The hostile-input families as data: one Case per (family, verb, input). Shared by the test suite
(tests/hostile/test_hostile.py) and benchmarks/bench_hostile.py, which counts and runs them.

A case names the verb's arguments, how it damages a copy of a complete run directory, the exit code
that is right for it, and a phrase the one-line error must contain. Every case is checked for: that
exit code, no traceback, a one-line message (for exit 2), the run directory byte-identical afterwards
(for exit 1/2), and no marker file from an executed command.

The agent's reach has suites of its own: test_agent_reach.py drives every Bash rule of ``allowed-tools`` (a rule no
attempt drives fails it) and checks after each that there is no PASS, no changed person's verdict, no rendered
config and no licence; test_hook.py feeds hooks/guard.py the PreToolUse JSON Claude Code sends. Kills and
concurrency: tests/test_commit.py (SIGKILL at each commit step), tests/inspect/test_verdicts_locks.py,
tests/inspect/test_inspect_atomic_outputs.py and test_kills.py (``config render`` killed across its wall time).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MARKER = "pwned.txt"
SPEC = """\
name: toy-arith
model: Qwen/Qwen3-1.7B
dataset: {path: data.jsonl, prompt_column: prompt, answer_column: answer}
rewards:
  - {name: format_ok, type: format, pattern: answer_tag, weight: 0.2}
  - {name: correctness, type: exact_match, answer_column: answer, extract: answer_tag, weight: 1.0}
hardware: {profile: h100-80gb, gpus: 1}
generation: {max_completion_length: 64, temperature: 1.0}
training: {num_generations: 8}
inspection: {prompts: 16, per_prompt: 4, min_read: 50, probe_prompts: 4}
"""
LAUGHS = "lol: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"l{i}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for i, (p, c) in enumerate(zip("abcdefgh", "bcdefghi")))


@dataclass
class Case:
    family: str
    verb: tuple[str, ...]  # argv with {run} / {spec} / {tmp}
    damage: Callable[[Path], None]
    expect: str  # phrase in the one-line error
    code: int | None = 2  # None: any of 0/1/2 (the check is that nothing ran and nothing crashed)
    name: str = ""
    subprocess: bool = False  # run as a real process (cheap verbs) rather than in-process cli.main

    @property
    def id(self) -> str:
        return f"{self.family}:{' '.join(self.verb[:2])}:{self.name}"


# verbs that load the run spec first, with arguments that would otherwise be fine
SPEC_VERBS: list[tuple[str, ...]] = [
    ("rewards", "render", "{spec}"),
    ("inspect", "sample", "{spec}", "--import", "{tmp}/good.jsonl"),
    ("inspect", "score", "{run}"),
    ("inspect", "review", "{run}"),
    ("inspect", "verdict", "{run}", "--id", "{first}", "--accept", "--reader", "agent"),
    ("inspect", "confirm", "{run}", "--user", "Ada", "--yes"),
    ("inspect", "ack", "{run}", "constant_reward:format_ok", "--reason", "a reason that is long enough to count",
     "--yes"),
    ("inspect", "gate", "{run}"),
    ("config", "render", "{spec}", "--no-gate"),
    ("config", "render", "{spec}", "--preview", "--no-gate"),
    ("memory", "{spec}"),
]


def _spec(text: str) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        (run / "spec.yaml").write_bytes(text.encode("utf-8", "surrogateescape"))
    return damage


HOSTILE_SPECS = {  # family → {name: (spec text, phrase)}
    "6-non-finite": {
        "temperature_inf": (SPEC.replace("temperature: 1.0", "temperature: .inf"), "not a finite number"),
        "temperature_overflow": (SPEC.replace("temperature: 1.0", "temperature: 1.0e+999"), "not a finite number"),
        "gpu_memory_nan": (SPEC.replace("gpus: 1}", "gpus: 1, gpu_memory_gib: .nan}"), "not a finite number"),
        "weight_inf": (SPEC.replace("weight: 0.2", "weight: -.inf"), "not a finite number"),
    },
    "7-yaml-bomb": {
        "billion_laughs": (SPEC + LAUGHS, "anchors and aliases"),
        "recursive_alias": (SPEC + "x: &x [*x]\n", "anchors and aliases"),
        "duplicate_key": (SPEC + "model: other/model\n", "duplicate key 'model'"),
        "deep": (SPEC + "x: " + "[" * 80 + "]" * 80 + "\n", "nested deeper than 64"),
        "huge": (SPEC + "#" * (1 << 20) + "\n", "file too large"),
    },
    "9-traceback": {
        "spec_not_utf8": (SPEC.replace("toy-arith", "toy-\udcff"), "not UTF-8"),
    },
}


def _replace(name: str, content: bytes | None) -> Callable[[Path], None]:
    """Replace a run file by a directory (content None) or by these bytes."""
    def damage(run: Path) -> None:
        p = run / name
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
        if content is None:
            p.mkdir()
            (p / "inner").write_text("x")
        else:
            p.write_bytes(content)
    return damage


# which run files each verb reads (a damaged one must stop it with exit 2 — or 1 where a check refuses)
READS: dict[tuple[str, ...], list[str]] = {
    ("inspect", "score", "{run}"): ["rewards.py", "samples.jsonl"],
    ("inspect", "review", "{run}"): ["score_report.json", "scored.jsonl"],
    ("inspect", "verdict", "{run}", "--id", "{first}", "--accept", "--reader", "agent"):
        ["scored.jsonl", "verdicts.jsonl"],
    ("inspect", "confirm", "{run}", "--user", "Ada", "--yes"): ["verdicts.jsonl"],
    ("inspect", "ack", "{run}", "constant_reward:format_ok", "--reason", "a reason that is long enough to count",
     "--yes"): ["score_report.json", "acks.json"],
    ("inspect", "gate", "{run}"): ["score_report.json", "scored.jsonl", "verdicts.jsonl", "acks.json",
                                   "confirmation.json"],
}
BAD_CONTENT = {"dir": (None, ""),  # "is a directory", or "no X in RUN" where the verb looks for a file
               "not_utf8": (b'{"a": "\xff\xfe"}\n', "not UTF-8"),
               "truncated": (b'{"id": "p0', "invalid JSON"), "nan": (b'{"x": NaN}\n', "non-finite"),
               "wrong_type": (b"[1]\n", "")}


def cases() -> list[Case]:
    out: list[Case] = []
    for family, specs in HOSTILE_SPECS.items():
        for name, (text, phrase) in specs.items():
            for verb in SPEC_VERBS:
                out.append(Case(family, verb, _spec(text), phrase, name=name,
                                subprocess=(name == "billion_laughs" and verb[0] == "memory")))
            out.append(Case(family, ("route", "--answers", "{run}/spec.yaml", "-o", "{run}"), _spec(text), phrase,
                            name=name))
    for verb, files in READS.items():
        for fname in files:
            for kind, (content, phrase) in BAD_CONTENT.items():
                if kind == "wrong_type" and fname.endswith(".py"):
                    continue
                if fname == "rewards.py" and kind != "dir":
                    continue  # a broken rewards.py is a reward error, covered by family 8
                out.append(Case("9-traceback", verb, _replace(fname, content), phrase, name=f"{fname}:{kind}"))
    out += _other_cases()
    out += command_cases()
    return out


# ------------------------------------------------------------------------------ every command of the CLI --
# The commands come from the CLI's one table (finetune.cli.commands()): a verb added there is attacked here with
# no list to update. Each gets an unknown option, and a file of binary garbage where its input path goes (its
# first positional argument, or the option named in INPUT_OPTION); required arguments get a placeholder.
GARBAGE = "garbage.bin"
INPUT_OPTION = {("route",): "--answers", ("demo",): "-o", ("docs",): "--root"}  # commands without a positional
GARBAGE_CODE = {("lint",): (1, "lint finding")}  # lint reports an unreadable file as a finding (exit 1)


def command_argv(command: tuple[str, ...]) -> tuple[str, ...] | None:
    """``command`` with its required arguments, "{in}" where its input path goes; None when it has none."""
    from finetune import cli

    parser = cli.build_parser(command[0])
    for word in command:  # down the sub-parsers: finetune -> group -> verb
        sub = cli._sub_action(parser)
        assert sub is not None, command
        parser = sub.choices[word]
    positionals = parser._get_positional_actions()
    required = [w for a in parser._actions if a.required and a.option_strings for w in (a.option_strings[0], "x")]
    if positionals:
        return (*command, "{in}", *["x"] * (len(positionals) - 1), *required)
    if command in INPUT_OPTION:
        return (*command, INPUT_OPTION[command], "{in}", *required)
    return None


def _garbage(run: Path) -> None:
    (run.parent / GARBAGE).write_bytes(b"\xff\xfe\x00 not text \x81")


def command_cases() -> list[Case]:
    from finetune import cli

    out: list[Case] = []
    for command in cli.commands():
        argv = command_argv(command) or command
        out.append(Case("9-traceback", tuple(a.replace("{in}", "{run}") for a in argv) + ("--no-such-option",),
                        lambda run: None, "unrecognized arguments: --no-such-option", name="unknown_option"))
        if "{in}" in argv:
            code, phrase = GARBAGE_CODE.get(command, (2, GARBAGE))
            out.append(Case("9-traceback", tuple(a.replace("{in}", "{tmp}/" + GARBAGE) for a in argv), _garbage,
                            phrase, code=code, name="garbage_input"))
    return out


def build_base_run(run: Path) -> Path:
    """A complete run directory made by the real commands: spec, data, rewards.py, samples, scored,
    report, verdicts (agent), confirmation, one acknowledged flag."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "inspect"))
    from inspect_helpers import MODULES, craft_samples, verdicts_for

    from finetune.cli import main

    run.mkdir(parents=True)
    (run / "spec.yaml").write_text(SPEC)
    samples = [s for s in craft_samples(per_prompt=8) if s["kind"] == "right"]  # constant rewards: flags to ack
    rows = [{k: v for k, v in r.items() if k != "kind"} for r in samples]
    _write_jsonl(run / "data.jsonl", [{"prompt": r["prompt"], "answer": r["columns"]["answer"]} for r in rows])
    shutil.copy(MODULES / "good.py", run / "rewards.py")
    _write_jsonl(run / "samples.jsonl", rows)
    assert main(["inspect", "score", str(run)]) == 0
    _write_jsonl(run.parent / "v.jsonl", verdicts_for(samples, reader="agent"))
    assert main(["inspect", "verdict", str(run), "--file", str(run.parent / "v.jsonl")]) == 0
    (run.parent / "v.jsonl").unlink()
    assert main(["inspect", "confirm", str(run), "--user", "Ada", "--yes"]) == 0
    assert main(["inspect", "ack", str(run), "base_saturated", "--reason",
                 "a curated easy split: the full set varies", "--yes"]) == 0
    return run


def damaged_copy(base: Path, side: Path, case: Case) -> tuple[Path, Path, Path]:
    """A copy of the base run under ``side`` (plus a good import file beside it), with the case's damage."""
    side.mkdir(parents=True)
    run = side / "run"
    shutil.copytree(base, run)
    (side / "good.jsonl").write_text(json.dumps({"prompt": "p", "completion": "c"}) + "\n")
    case.damage(run)
    return run, run / "spec.yaml", side


def snapshot(folder: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None) for p in sorted(folder.rglob("*"))}


def invoke(case: Case, argv: list[str]) -> tuple[int, str]:
    """Run one invocation: a real process for ``case.subprocess``, else ``finetune.cli.main`` in-process."""
    import contextlib
    import io
    import subprocess
    import sys

    if case.subprocess:
        r = subprocess.run([sys.executable, "-m", "finetune", *argv], capture_output=True, text=True, timeout=120)
        return r.returncode, r.stderr
    from finetune.cli import main

    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse --help / --version only
            code = exc.code if isinstance(exc.code, int) else 2
        except BaseException:  # noqa: BLE001 — an escaped exception is the defect being looked for
            import traceback

            code, _ = 99, traceback.print_exc(file=err)
    return code, err.getvalue()


def check(case: Case, run: Path, spec: Path, side: Path, first: str = "p0000-s00") -> str:
    """'' when the case behaves (see the module doc), else what went wrong."""
    argv = [a.format(run=run, spec=spec, tmp=side, first=first) for a in case.verb]
    before = snapshot(side)
    code, err = invoke(case, argv)
    if "Traceback" in err:
        return "traceback: " + err[-1500:]
    if (run / MARKER).exists() or (side / MARKER).exists():
        return "a spec string executed a command"
    if case.code is None:
        return "" if code in (0, 1, 2) else f"exit {code}: {err[-1000:]}"
    if code != case.code:
        return f"exit {code}, expected {case.code}: {err[-1000:]}"
    if case.expect not in err:
        return f"'{case.expect}' not in: {err[-1000:]}"
    lines = err.strip().splitlines()
    if case.code == 2 and [ln for ln in lines if ln.startswith("error:")] != lines[-1:]:
        return "not one error line at the end: " + err[-1000:]  # a --no-gate warning may precede it
    if snapshot(side) != before:
        return "bad input wrote something"
    return ""


def _write_jsonl(path: Path, rows: list) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _other_cases() -> list[Case]:
    def bad_base(run: Path) -> None:
        (run.parent / "bad.jsonl").write_text('{"prompt": "p", "completion": "c"}\n{"prompt": \n')

    def list_row(run: Path) -> None:
        _write_jsonl(run.parent / "good.jsonl", [{"prompt": "p", "completion": "c", "row": [1]}])

    def nan_completion(run: Path) -> None:
        (run.parent / "good.jsonl").write_text('{"prompt": "p", "completion": NaN}\n')

    def exiting_reward(run: Path) -> None:
        (run / "rewards.py").write_text((run / "rewards.py").read_text() + "\nimport sys\nsys.exit(0)\n")

    def hand_acks(run: Path) -> None:
        (run / "acks.json").write_text(json.dumps({"constant_reward:format_ok": {"reason": "", "by": "me"}}))

    def hand_confirmation(run: Path) -> None:
        (run / "confirmation.json").write_text(json.dumps({"user": 5}))

    def out_is_file(run: Path) -> None:
        (run.parent / "taken").write_text("mine")

    def stale_gate(run: Path) -> None:
        (run / "gate.json").write_text("[1]")

    def injected_spec(run: Path) -> None:
        payload = 'x""" + str(__import__("os").system("touch ' + str(run / MARKER) + '")) + """'
        text = (run / "spec.yaml").read_text().replace("answer_column: answer, extract", "answer_column: '"
                                                       + payload.replace("'", "''") + "', extract")
        (run / "spec.yaml").write_text(text)

    def shadow_package(run: Path) -> None:
        (run / "rewards").mkdir()
        (run / "rewards" / "__init__.py").write_text(f"open({str(run / MARKER)!r}, 'w').write('imported')\n")

    return [
        Case("1-code-injection", ("rewards", "render", "{spec}"), injected_spec, "", code=None, name="answer_column"),
        Case("1-code-injection", ("config", "render", "{spec}", "--no-gate"), injected_spec, "", code=None,
             name="answer_column"),
        Case("3-shadow-import", ("inspect", "score", "{run}"), shadow_package, "", code=None, name="rewards_package"),
        Case("8-bad-input-writes", ("inspect", "sample", "{spec}", "--import", "{tmp}/good.jsonl", "--import-base",
                                    "{tmp}/bad.jsonl"), bad_base, "bad.jsonl:2", name="import_good_base_bad"),
        Case("9-traceback", ("inspect", "sample", "{spec}", "--import", "{tmp}/good.jsonl"), list_row, "'row'",
             name="list_row"),
        Case("4-jsonl", ("inspect", "sample", "{spec}", "--import", "{tmp}/good.jsonl"), nan_completion,
             "non-finite", name="nan_in_import"),
        Case("9-traceback", ("inspect", "sample", "{spec}", "--import", "{tmp}"), lambda run: None, "is a directory",
             name="import_dir"),
        Case("9-traceback", ("inspect", "verdict", "{run}", "--file", "{tmp}"), lambda run: None, "is a directory",
             name="file_dir"),
        Case("8-bad-input-writes", ("inspect", "score", "{run}"), exiting_reward, "rewards.py", name="sys_exit"),
        Case("8-bad-input-writes", ("inspect", "gate", "{run}"), hand_acks, "acks.json", name="hand_acks"),
        Case("8-bad-input-writes", ("inspect", "gate", "{run}"), hand_confirmation, "confirmation.json",
             name="hand_confirmation"),
        Case("9-traceback", ("memory", "{spec}", "-o", "{tmp}/taken"), out_is_file, "taken", name="out_is_file"),
        Case("9-traceback", ("rewards", "render", "{spec}", "-o", "{tmp}/taken"), out_is_file, "taken",
             name="out_is_file"),
        Case("9-traceback", ("config", "render", "{spec}", "-o", "{tmp}/taken", "--no-gate"), out_is_file, "taken",
             name="out_is_file"),
        Case("9-traceback", ("route", "--answers", "{tmp}", "-o", "{run}"), lambda run: None, "is a directory",
             name="answers_dir", subprocess=True),
        Case("2-pass-without-reward", ("config", "render", "{spec}"), stale_gate, "gate", code=1,
             name="gate_json_list"),
        Case("6-non-finite", ("memory", "--model", "Qwen/Qwen3-1.7B", "--gpu-memory-gib", "nan", "-o", "{run}"),
             lambda run: None, "not a finite number", name="cli_nan", subprocess=True),
        Case("6-non-finite", ("memory", "--model", "Qwen/Qwen3-1.7B", "--num-generations", "0"), lambda run: None,
             "out of range", name="cli_zero_generations"),
        Case("9-traceback", ("memory", "{spec}", "--batch", "0"), lambda run: None, "out of range", name="batch_0"),
        Case("9-traceback", ("diagnose", "{tmp}/log.jsonl", "-o", "{run}"),
             lambda run: (run.parent / "log.jsonl").write_bytes(b'{"loss": 1}\n\xff\xfe\n'), "not UTF-8",
             name="log_not_utf8"),
        Case("9-traceback", ("diagnose", "{tmp}", "-o", "{run}"), lambda run: None, "trainer_state",
             name="no_log"),
        Case("9-traceback", ("lint", "{tmp}/x.md"),
             lambda run: (run.parent / "x.md").write_bytes(b"# \xff\xfe\n"), "1 lint finding", name="lint_not_utf8",
             code=1),
        Case("9-traceback", ("demo", "-o", "{tmp}/taken"), out_is_file, "taken", name="out_is_file"),
    ]
