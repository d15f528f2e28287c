"""A CLI verb added exactly as DESIGN.md's recipe says is parsed, run, documented and attacked.

The recipe is followed in a scratch copy of the plugin: a domain function appended to ``dataset.py`` and, in the
group module ``cli/data.py``, the verb's two functions and its entry in that module's ``VERBS`` — nothing else.
Then, on that copy, in child processes: ``finetune data count --help`` and the verb itself run,
``finetune docs`` regenerates the README command table (and nothing else) with its row, and the hostile suite
attacks it with no list to update (its generic cases run and pass). A variant of the verb that takes its input
through an option, not a positional argument, fails ``test_every_command_is_attacked`` until
``tests/hostile/cases.py`` ``INPUT_OPTION`` names that option.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from scratch_repo import checks, copy_repo, failed

ROOT = Path(__file__).resolve().parents[2]

DOMAIN = '''

def count_rows(spec: RunSpec, column: str | None = None) -> tuple[int, int]:
    """(rows in the dataset, rows that hold ``column``; every row when None) — the recipe's dummy verb."""
    rows = load_rows(spec)
    return len(rows), sum(1 for r in rows if column is None or column in r)
'''

GROUP = '''

def count_arguments(p: argparse.ArgumentParser) -> None:
    """`data count` (VERBS below)."""
    p.add_argument(INPUT, help="run spec (spec.yaml) or run directory")
    p.add_argument("--column", help="also count the rows that hold this column")


def _count(args: argparse.Namespace) -> int:
    from finetune.dataset import count_rows
    from finetune.spec import load_spec

    spec_path, _ = rundir.resolve(getattr(args, INPUT.lstrip("-")), None)
    if spec_path is None:
        raise UserError(f"no {rundir.SPEC} in {getattr(args, INPUT.lstrip('-'))}", fix="pass the run spec")
    total, holding = count_rows(load_spec(spec_path), args.column)
    print(f"{total} rows" + (f", {holding} with '{args.column}'" if args.column else ""))
    return 0
'''

ENTRY = '''VERBS = {"count": Verb(count_arguments, _count, "count the dataset's rows (recipe dummy)"),
         '''

SPEC = "name: count\nmodel: tiny\ndataset: {path: data.jsonl}\nrewards:\n  - {name: fmt, type: format}\n"
DATA = '{"prompt": "2+2?", "answer": "4"}\n{"prompt": "3+3?"}\n{"prompt": "1+1?", "answer": "2"}\n'


def _scratch(tmp: Path, input_arg: str) -> Path:
    """A copy of the plugin with the dummy verb added to the recipe's two files; ``input_arg`` is its input's
    spelling (``spec``: positional; ``--spec``: an option)."""
    root = copy_repo(tmp / "plugin")
    package = root / "scripts" / "finetune"
    dataset = package / "dataset.py"
    dataset.write_text(dataset.read_text(encoding="utf-8") + DOMAIN, encoding="utf-8")  # recipe file 2
    group = package / "cli" / "data.py"  # recipe file 1: the verb's two functions and its VERBS entry
    text = group.read_text(encoding="utf-8")
    anchor = "\n\n# verb -> its arguments and handler"
    assert text.count(anchor) == 1 and text.count("VERBS = {") == 1
    text = text.replace(anchor, GROUP.replace("INPUT", repr(input_arg)) + anchor).replace("VERBS = {", ENTRY)
    group.write_text(text, encoding="utf-8")
    (tmp / "spec.yaml").write_text(SPEC, encoding="utf-8")
    (tmp / "data.jsonl").write_text(DATA, encoding="utf-8")
    return root


def _run(root: Path, *argv: str, module: str = "finetune") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root / "scripts")}
    return subprocess.run([sys.executable, "-m", module, *argv], capture_output=True, text=True, env=env, cwd=root,
                          timeout=600)


def _hostile(root: Path, *selection: str) -> subprocess.CompletedProcess[str]:
    return _run(root, "-q", "-p", "no:cacheprovider", "-o", "slow_budget_seconds=0", *selection, module="pytest")


def test_the_recipe_names_the_files_this_test_edits() -> None:
    design = (ROOT / "DESIGN.md").read_text(encoding="utf-8")
    recipe = design[design.index("### A CLI verb"):]
    assert "- Files: `scripts/finetune/cli/<group>.py`, `scripts/finetune/<domain>.py`" in recipe
    assert "`VERBS`" in recipe and "`INPUT_OPTION`" in recipe


@pytest.mark.slow  # fresh interpreters on the copy, `finetune docs`, the hostile suite's base run, ruff, mypy
def test_a_verb_added_as_the_recipe_says_runs_is_documented_and_attacked(tmp_path: Path) -> None:
    root = _scratch(tmp_path, "spec")
    helped = _run(root, "data", "count", "--help")
    assert helped.returncode == 0 and "--column" in helped.stdout and "count the dataset's rows" in helped.stdout
    ran = _run(root, "data", "count", str(tmp_path / "spec.yaml"), "--column", "answer")
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "3 rows, 2 with 'answer'\n", "")
    bad = _run(root, "data", "count", str(tmp_path / "absent.yaml"))
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1 and "Traceback" not in bad.stderr
    # the README command table is regenerated with its row, and nothing else is
    docs = _run(root, "docs", "--root", str(root))
    assert docs.returncode == 0, docs.stdout + docs.stderr
    assert [line for line in docs.stdout.splitlines() if "regenerated" in line] == [
        "README.md (region 'cli'): regenerated"]
    assert "| `finetune data count` | count the dataset's rows (recipe dummy) |" in (root / "README.md").read_text(
        encoding="utf-8")
    # the hostile suite covers it from the table: the check passes and the verb's own cases run and pass
    hostile = _hostile(root, "tests/hostile/test_hostile.py", "-k", "every_command_is_attacked or data and count")
    assert hostile.returncode == 0, hostile.stdout[-3000:]
    assert "3 passed" in hostile.stdout, hostile.stdout[-2000:]  # the check + unknown_option + garbage_input
    assert not failed(checks(root))  # ruff, mypy and the structure tests on the copy


@pytest.mark.slow  # fresh interpreters on the copy
def test_a_verb_without_an_input_path_fails_the_hostile_check_until_it_names_one(tmp_path: Path) -> None:
    root = _scratch(tmp_path, "--spec")
    check = "tests/hostile/test_hostile.py::test_every_command_is_attacked"
    refused = _hostile(root, check)
    assert refused.returncode == 1 and "data count: no input path to attack" in refused.stdout, refused.stdout[-2000:]
    cases = root / "tests" / "hostile" / "cases.py"
    text = cases.read_text(encoding="utf-8")
    anchor = 'INPUT_OPTION = {("route",): "--answers", '
    assert text.count(anchor) == 1
    cases.write_text(text.replace(anchor, anchor + '("data", "count"): "--spec", '), encoding="utf-8")
    passed = _hostile(root, check)
    assert passed.returncode == 0, passed.stdout[-2000:]
