"""DESIGN.md's reward-kind recipe, done: a realistic kind added to a scratch copy touches one folder and a test, and
the checks a contributor runs stay green there.

The kind is `regex_match` (tests/rewards/recipe_regex_match/): its own column (a field named `pattern`, not
`*_column`), its own gold semantics (a pattern is no answer: the probes take one from `example_column`), its own
reasons. The recipe is followed in a copy of the repository (the kinds table is filled when the package is
imported, so a kind cannot be added to a running process): the folder ``rewards/kinds/regex_match/`` and
``tests/rewards/test_regex_match.py``, then ``finetune docs`` regenerates the references. On that copy: only those
files changed; a child process shows spec errors at the new field's line, the reward rendering and scoring, its
columns checked, its gold driving the controls and the probes running against it; and ruff, mypy, the structure,
design-recipe, kind-entry, escaping and docs tests and the kind's own test pass there.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from scratch_repo import checks, copy_repo, digests, failed, run

RECIPE = Path(__file__).resolve().parent / "recipe_regex_match"
KIND = "scripts/finetune/rewards/kinds/regex_match"
ADDED = {f"{KIND}/__init__.py": "__init__.py.txt", f"{KIND}/template.py.j2": "template.py.j2",
         f"{KIND}/notes.md": "notes.md", "tests/rewards/test_regex_match.py": "test_regex_match.py.txt"}
REGENERATED = {"references/reward-functions.md", "references/run-spec.md"}  # `finetune docs` (the recipe says so)
CHECKS = ("tests/test_design_recipes.py", "tests/rewards/test_kind.py", "tests/rewards/test_regex_match.py", "tests/rewards/test_reference.py",
          "tests/test_docs.py", "tests/test_literals_template_escaping.py")

SPEC = """\
name: recipe
model: tiny
dataset:
  path: data.jsonl
rewards:
  - name: matches
    type: regex_match
    pattern: answer_pattern
    example_column: example
    extract: boxed
"""
BAD_VALUE = SPEC + "    max_answer_chars: 0\n"  # line 11: rewards[0].max_answer_chars
BAD_KEY = SPEC + "    shade: dark\n"  # line 11: rewards[0].shade
ROWS = [{"prompt": "On which date did the launch happen?", "answer_pattern": r"\d{4}-\d{2}-\d{2}",
         "example": "2024-01-05", "answer": "not-the-gold"}]

CHILD = """
import json, sys
from pathlib import Path
from finetune.errors import UserError
from finetune.inspect import probes
from finetune.inspect.rewardmod import load_rewards
from finetune.rewards import render
from finetune.rewards.columns import reward_columns
from finetune.spec import load_spec

work = Path(sys.argv[1])
out = {"errors": {}}
for name in ("bad_value.yaml", "bad_key.yaml"):
    try:
        load_spec(work / name)
    except UserError as exc:
        out["errors"][name] = [exc.what, exc.where]
spec = load_spec(work / "spec.yaml")
run = work / "run"
run.mkdir()
render.render_rewards(spec, run)
rm = load_rewards(run, [r.name for r in spec.rewards])
sample = {"id": "s0", "row": 0, "prompt": "On which date did the launch happen?", "completion": "",
          "columns": json.loads((work / "data.jsonl").read_text().splitlines()[0])}
result = probes.run_probes(rm, spec, [sample])
out["columns"] = reward_columns(spec)
out["gold"] = result["gold"]
out["reading"] = sorted(probes.reading_rewards(spec))
out["meta"] = rm.rewards[0].as_dict()
out["probes"] = {p["probe"]: p["scores"]["matches"] for p in result["probes"]}
out["passing"] = [p["probe"] for p in result["probes"] if p["passing"]]
out["controls"] = {c["probe"]: c["scores"]["matches"] for c in result["controls"]}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def added_kind(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Follow the recipe in a scratch copy of the repository and report what happened there."""
    work = copy_repo(tmp_path_factory.mktemp("kind_recipe"))
    before = digests(work)
    for target, source in ADDED.items():  # the recipe: one folder and a test
        (work / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(RECIPE / source, work / target)
    out: dict[str, Any] = {"work": str(work), "docs": run([sys.executable, "-m", "finetune", "docs"], work)}
    after = digests(work)
    out["touched"] = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    specs = tmp_path_factory.mktemp("kind_recipe_specs")  # a user's folder, beside the copy (its run is no code)
    for name, text in (("spec.yaml", SPEC), ("bad_value.yaml", BAD_VALUE), ("bad_key.yaml", BAD_KEY)):
        (specs / name).write_text(text, encoding="utf-8")
    (specs / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    out["specs"] = str(specs)
    child = run([sys.executable, "-c", CHILD, str(specs)], work)
    assert child.returncode == 0, child.stderr[-3000:]
    out.update(json.loads(child.stdout.strip().splitlines()[-1]))
    out["checks"] = checks(work, CHECKS)
    return out


pytestmark = pytest.mark.slow


def test_the_recipe_touches_one_folder_and_a_test(added_kind: dict[str, Any]) -> None:
    assert added_kind["docs"].returncode == 0, added_kind["docs"].stdout + added_kind["docs"].stderr
    assert set(added_kind["touched"]) == set(ADDED) | REGENERATED, added_kind["touched"]


def test_ruff_mypy_and_the_structure_kind_and_docs_tests_stay_green_on_the_copy(added_kind: dict[str, Any]) -> None:
    assert not failed(added_kind["checks"])


def test_spec_errors_name_the_new_kinds_field_and_line(added_kind: dict[str, Any]) -> None:
    what, where = added_kind["errors"]["bad_value.yaml"]
    assert what.startswith("rewards[0].max_answer_chars: ") and "greater than 0" in what
    assert where == f"{added_kind['specs']}/bad_value.yaml:11"
    what, where = added_kind["errors"]["bad_key.yaml"]
    assert what == "rewards[0].shade: unknown field" and where == f"{added_kind['specs']}/bad_key.yaml:11"


def test_its_columns_gold_and_meta_come_from_its_entry(added_kind: dict[str, Any]) -> None:
    assert added_kind["columns"] == [["answer_pattern", "rewards[0].pattern"]]  # a field not named *_column
    # its gold is no answer: the probes take one from its example column, never the dataset's `answer` (a decoy)
    assert added_kind["gold"] == {"column": "example", "rows": 1, "of": 1, "note": None}
    assert added_kind["meta"] == {"name": "matches", "type": "regex_match", "role": "correctness", "weight": 1.0,
                                  "threshold": 1.0, "min": 0.0, "max": 1.0, "gated": False, "episode": False}


def test_the_controls_and_the_reading_probes_run_against_it(added_kind: dict[str, Any]) -> None:
    assert added_kind["controls"]["gold_answer"] == 1.0 and added_kind["controls"]["wellformed_wrong"] == 0.0
    assert added_kind["controls"]["bold_box"] == 1.0  # an expected-pass control: it reads answers
    assert added_kind["reading"] == ["matches"]
    probes = added_kind["probes"]
    for name in ("wrong_answer", "hedged", "text_or_hedge", "retraction_after_answer", "several_answers"):
        assert probes[name] == 0.0, name
    assert not added_kind["passing"], added_kind["passing"]
