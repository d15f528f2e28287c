"""A reward kind added exactly as DESIGN.md's recipe says gets everything from its entry.

The recipe is followed in a scratch copy of the package (the spec union is built when the package is
imported, so a kind cannot be added to a running process): one decorated model appended to
``rewards/specs.py`` and its ``templates/<type>.py.j2`` — nothing else. A child process on that copy then
shows that spec errors name the new kind's field and line, the reward renders and scores, its gold column
is the one the probes and controls use, and the reading probes run against it. Beside it, the completeness
checks: every registered kind declares the hooks the rest of the package asks it for, and a kind that leaves
one out is refused when it registers.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import TypeAdapter

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "scripts" / "finetune"

# The recipe's two files for a dummy kind: a word the answer block must name (its `colour` is a setting with
# a closed set of values, so a wrong one is a field error inside the new kind's entry).
DUMMY_MODEL = '''

@kind("Keyword (recipe dummy)", stdlib=("re",),
      reading=lambda r: Reading(style="answer_tag", extract="answer_tag", gold=r.answer_column, reads_answer=True),
      fix="`answer_column` (the keyword column)",
      example={"name": "keyword", "type": "keyword", "answer_column": "word"})
class KeywordReward(RewardBase):
    """The last <answer> block is exactly the row's keyword (binary)."""

    type: Literal["keyword"]
    answer_column: str = Field("answer", description="Column holding the keyword.")
    colour: Literal["red", "blue"] = Field("red", description="A setting with a closed set of values.")
'''

DUMMY_TEMPLATE = '''{% macro library() -%}
def _keyword_score(text: str, gold):
    if gold is None:
        return None
    found = re.findall(r"<answer>(.*?)</answer>", text, flags=re.S)
    return 1.0 if found and found[-1].strip() == str(gold).strip() else 0.0
{%- endmacro %}

{% macro reward(r, gated) -%}
def {{ r.name | py_ident }}(prompts=None, completions=None, log_metric=None, **kwargs) -> list:
    """The last answer block names the keyword of column '{{ r.answer_column | py_doc }}'."""

    def batch(prompts, completions, kwargs):
        golds = _column(kwargs, {{ r.answer_column | py }}, len(completions))
        scores, errors = _rows(len(completions), lambda i: _keyword_score(_text(completions[i]), golds[i]))
{% if gated %}
        return _gate_on_format(scores, prompts, completions, kwargs), errors
{% else %}
        return scores, errors
{% endif %}

    return _run({{ r.name | py }}, batch, prompts, completions, kwargs, log_metric)
{%- endmacro %}
'''

SPEC = """\
name: recipe
model: tiny
dataset:
  path: data.jsonl
rewards:
  - name: keyword
    type: keyword
    answer_column: word
"""

BAD_VALUE = SPEC + "    colour: purple\n"  # line 9: rewards[0].colour
BAD_KEY = SPEC + "    shade: dark\n"  # line 9: rewards[0].shade

CHILD = """
import json, sys
from pathlib import Path
from finetune.errors import UserError
from finetune.inspect import probes
from finetune.inspect.rewardmod import load_rewards
from finetune.rewards import render
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
for file, text in render.render_sources(spec.rewards, source_path=spec.source).items():
    (run / file).write_text(text, encoding="utf-8")
rm = load_rewards(run, [r.name for r in spec.rewards])
sample = {"id": "s0", "row": 0, "prompt": "Which colour is the clear daytime sky?", "completion": "",
          "columns": {"word": "blue", "answer": "not-the-gold"}}
result = probes.run_probes(rm, spec, [sample])
out["gold_column"] = probes.gold_column(spec)
out["style"] = probes.answer_style(spec)
out["reading"] = sorted(probes.reading_rewards(spec))
out["probes"] = {p["probe"]: p["scores"]["keyword"] for p in result["probes"]}
out["passing"] = [p["probe"] for p in result["probes"] if p["passing"]]
out["controls"] = {c["probe"]: c["scores"]["keyword"] for c in result["controls"]}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def added_kind(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Follow the recipe in a scratch copy of the package and report what the child process saw."""
    work = tmp_path_factory.mktemp("kind_recipe")
    copy = work / "scripts" / "finetune"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    specs = copy / "rewards" / "specs.py"
    specs.write_text(specs.read_text(encoding="utf-8") + DUMMY_MODEL, encoding="utf-8")  # recipe file 1
    (copy / "rewards" / "templates" / "keyword.py.j2").write_text(DUMMY_TEMPLATE, encoding="utf-8")  # file 2
    for name, text in (("spec.yaml", SPEC), ("bad_value.yaml", BAD_VALUE), ("bad_key.yaml", BAD_KEY)):
        (work / name).write_text(text, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(work / "scripts")}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(work)], capture_output=True, text=True, env=env,
                          cwd=work, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    out["work"] = str(work)
    return out


def test_spec_errors_name_the_new_kinds_field_and_line(added_kind: dict[str, Any]) -> None:
    work = added_kind["work"]
    what, where = added_kind["errors"]["bad_value.yaml"]
    assert what.startswith("rewards[0].colour: ") and "'red' or 'blue'" in what
    assert where == f"{work}/bad_value.yaml:9"
    what, where = added_kind["errors"]["bad_key.yaml"]
    assert what == "rewards[0].shade: unknown field" and where == f"{work}/bad_key.yaml:9"


def test_the_new_kind_renders_and_its_gold_column_drives_the_controls(added_kind: dict[str, Any]) -> None:
    # its own column, not the dataset's `answer` (which holds a decoy here)
    assert added_kind["gold_column"] == "word"
    assert added_kind["controls"]["gold_answer"] == 1.0  # the rendered function passes the gold, laid out
    assert added_kind["controls"]["wellformed_wrong"] == 0.0
    assert added_kind["controls"]["prose_after_answer"] == 1.0  # an expected-pass control: it reads answers


def test_the_reading_probes_run_against_the_new_kind(added_kind: dict[str, Any]) -> None:
    assert added_kind["style"] == "answer_tag" and added_kind["reading"] == ["keyword"]
    probes = added_kind["probes"]
    for name in ("wrong_answer", "hedged", "text_or_hedge", "retraction_after_answer", "several_answers",
                 "unparseable_gold"):
        assert name in probes, f"{name} did not run for the new kind"
    # the dummy reads the LAST answer block: a hedge fails, a retraction after the block is not read (it passes
    # the retraction probe: the probes catch that on a reward that is too lenient)
    assert probes["hedged"] == 0.0 and probes["text_or_hedge"] == 0.0
    assert "retraction_after_answer" in added_kind["passing"]


# ----------------------------------------------------------------------------------- completeness --

def test_every_kind_declares_the_hooks_the_package_asks_for() -> None:
    from finetune.rewards import kind as kinds
    from finetune.rewards import registry, render

    adapter = TypeAdapter(registry.RewardSpec)
    declared = {f.name for f in dataclasses.fields(kinds.Kind)}
    assert set(kinds.REQUIRED_HOOKS) <= declared
    for name, entry in kinds.KINDS.items():
        assert callable(entry.reading) and entry.fix.strip(), f"{name}: a required hook is empty"
        example = adapter.validate_python(entry.example)
        reading = entry.reading(example)
        assert isinstance(reading, kinds.Reading), f"{name}: its reading hook returns {reading!r}"
        for column in (reading.gold, reading.expected_call):  # a column it names is a column field of its entry
            assert column is None or column in entry.example.values() or column in {
                f.default for f in type(example).model_fields.values()}, f"{name}: {column}"
        macros = render._macros(entry.template)
        assert callable(getattr(macros, "library", None)) and callable(getattr(macros, "reward", None)), name


def test_a_kind_without_a_required_hook_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from finetune.rewards import kind as kinds
    from finetune.rewards import specs

    monkeypatch.setattr(kinds, "KINDS", dict(kinds.KINDS))

    class Incomplete(specs.RewardBase):
        type: Literal["incomplete"]

    with pytest.raises(ValueError, match="lacks the hook"):
        kinds.kind("Incomplete", fix="a field")(Incomplete)
    assert "incomplete" not in kinds.KINDS
    kinds.kind("Complete", fix="a field", reading=lambda r: kinds.Reading())(Incomplete)
    assert kinds.KINDS["incomplete"].reading(None) == kinds.Reading()


# Reward behaviour is asked of the kind's entry, never of its `type` string: a comparison of a reward's type
# with a name outside rewards/specs.py is a branch a new kind would silently miss.
TYPE_BRANCH = (r"""(\.type|\btype|reward_type|\bkind)\s*(==|!=|\bin\b|\bnot in\b)\s*[\(\[]?\s*["']"""
               r"""|selectattr\(\s*["']type["']""")
ALLOWED = {
    # the DAPO recipe's own advice names the one kind it asks for (a sentence, not a behaviour)
    "scripts/finetune/templates/BRIEF.md.j2",
}


def test_no_reward_type_branches_outside_the_registry() -> None:
    import re

    found = []
    names = re.compile(r"""["']({})["']""".format("|".join(map(re.escape, _kind_names()))))
    for path in sorted((ROOT / "scripts" / "finetune").rglob("*")):
        rel = path.relative_to(ROOT).as_posix()
        if path.suffix not in (".py", ".j2") or rel in ALLOWED or "/rewards/lib/" in rel or "/sandbox/" in rel:
            continue
        if rel == "scripts/finetune/rewards/specs.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(TYPE_BRANCH, line) and names.search(line):
                found.append(f"{rel}:{number}: {line.strip()}")
    assert not found, "reward type-name branches (ask the kind's entry instead):\n" + "\n".join(found)


def _kind_names() -> list[str]:
    from finetune.rewards import registry

    return [typing.cast(str, t) for t in registry.TYPE_ORDER]


def test_the_scan_sees_a_type_branch() -> None:
    import re

    assert re.search(TYPE_BRANCH, 'if r.type == "math":')
    assert re.search(TYPE_BRANCH, '{% if r.spec.type == "format" %}')
    assert re.search(TYPE_BRANCH, 'if r.type in ("tool_call", "environment"):')
    assert not re.search(TYPE_BRANCH, 'if r.effective_role == "format":')


# --------------------------------------------------------------------------------------- error paths --

def _spec_text(reward: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump({"name": "paths", "model": "tiny", "dataset": {"path": "data.jsonl"},
                           "environment": {"file": "env.py", "class": "Env"}, "rewards": [reward]},
                          sort_keys=False)


@pytest.mark.parametrize("kind_name", sorted(__import__("finetune.rewards.registry", fromlist=["_"]).TYPE_ORDER))
def test_every_kind_reports_a_field_error_at_its_own_path_and_line(kind_name: str, tmp_path: Path) -> None:
    """An unknown key in any kind's entry: `rewards[0].<key>`, on the key's own line (the union tag pydantic puts
    in the error location is no key of the file)."""
    from finetune.errors import UserError
    from finetune.rewards import kind as kinds
    from finetune.spec import load_spec

    reward = {**kinds.KINDS[kind_name].example, "zz_unknown": 1}
    path = tmp_path / "spec.yaml"
    path.write_text(_spec_text(reward), encoding="utf-8")
    line = next(i for i, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if "zz_unknown" in text)
    with pytest.raises(UserError) as err:
        load_spec(path)
    assert err.value.what == "rewards[0].zz_unknown: unknown field" and err.value.where == f"{path}:{line}"


def test_a_field_named_like_a_kind_keeps_its_path(tmp_path: Path) -> None:
    """`dataset.format` and tool_call's `format` share a name with the `format` kind: neither is dropped."""
    from finetune.errors import UserError
    from finetune.spec import load_spec, shown_loc

    path = tmp_path / "spec.yaml"
    path.write_text("name: p\nmodel: tiny\ndataset:\n  path: d.jsonl\n  format: csv\nrewards:\n"
                    "  - name: fmt\n    type: format\n", encoding="utf-8")
    with pytest.raises(UserError) as err:
        load_spec(path)
    assert err.value.what.startswith("dataset.format: ") and err.value.where == f"{path}:5"
    assert shown_loc(("rewards", 2, "tool_call", "format")) == ("rewards", 2, "format")
    assert shown_loc(("rewards", 0, "json_match", "fields", "total", "match")) == ("rewards", 0, "fields", "total",
                                                                                   "match")
