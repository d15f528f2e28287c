"""Every reward kind's entry (rewards/kind.py) declares its hooks, and they tell the truth about its template.

The checks run over whatever the table holds, so a new kind folder is held to them with no list to update (the
kind recipe's test runs this file on its scratch copy): the columns its rendered reward reads are exactly the
ones its ``columns`` hook declares; its template uses only the modules its entry declares and the shared plumbing;
its gold and reasons are declared; a rendered rewards.py binds no module-level name a reward may be named; a spec
error in any kind's entry is reported at its own field and line; and an incomplete entry is refused when it
registers.
"""

from __future__ import annotations

import ast
import builtins
import importlib.util
import itertools
import re
import typing
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import TypeAdapter
from reward_helpers import reward_specs

from finetune.rewards import kind as kinds
from finetune.rewards import registry, render, specs
from finetune.rewards.lib import HELPERS
from finetune.rewards.reference import DOC_EXAMPLES

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
_COUNTER = itertools.count()


def _rendered(entry: dict[str, Any], folder: Path) -> dict[str, str]:
    """rewards.py and its helpers for one spec entry (a `type: python` entry takes its file from the worked
    example's folder; an environment reward the calculator environment of examples/tool-environment/)."""
    from finetune.spec import EnvironmentSpec

    if kinds.KINDS[entry["type"]].needs_environment:
        env = EnvironmentSpec.model_validate({"file": "env.py", "class": "Calculator"})
        return render.render_sources(reward_specs([entry]), source_path=EXAMPLES / "tool-environment" / "spec.yaml",
                                     tool_env=env)
    return render.render_sources(reward_specs([entry]), source_path=EXAMPLES / "python-reward" / "spec.yaml")


def _imported(folder: Path, files: dict[str, str]) -> Any:
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"_kind_check_{next(_COUNTER)}", folder / "rewards.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", registry.TYPE_ORDER)
def test_every_hook_of_every_kind_answers_for_its_example(name: str) -> None:
    entry = kinds.KINDS[name]
    example = TypeAdapter(registry.RewardSpec).validate_python(entry.example)
    assert entry.fix.strip() and entry.notes, f"{name}: a fix and its folder's notes.md"
    assert isinstance(entry.reading(example), kinds.Reading)
    fields = type(example).model_fields
    for field, column in entry.columns(example):  # a spec field of the entry holding that column
        value = getattr(example, field)
        assert field in fields and (column == value or column in value), (name, field, column)
    from finetune.spec import DatasetSpec

    gold = entry.gold(example, DatasetSpec.model_validate({"path": "d.jsonl"}))
    assert gold is None or (isinstance(gold, kinds.Gold) and gold.column), (name, gold)
    if gold is not None and gold.read:  # a gold the reward reads is one of the columns it declares
        assert gold.column in {c for _, c in entry.columns(example)}, name
    assert all(isinstance(r, kinds.Reason) and r.text.strip() for r in entry.reasons.values()), name
    macros = render._macros(entry.template)
    assert callable(getattr(macros, "library", None)) and callable(getattr(macros, "reward", None)), name


@pytest.mark.parametrize("name", registry.TYPE_ORDER)
def test_the_rendered_reward_reads_exactly_the_columns_its_hook_declares(name: str, tmp_path: Path) -> None:
    """Its batch asks the shared `_column` for every column it reads (a missing one is a whole-batch error in
    training): called on an empty batch with `_column` recorded, it names the hook's columns and no other."""
    entry = kinds.KINDS[name]
    module = _imported(tmp_path, _rendered(entry.example, tmp_path))
    asked: list[str] = []

    def record(kwargs: dict[str, Any], column: str, n: int) -> list[Any]:
        asked.append(column)
        return [None] * n

    module._column = record
    assert getattr(module, entry.example["name"])(prompts=[], completions=[]) == []
    declared = {c for _, c in entry.columns(reward_specs([entry.example])[0])}
    assert set(asked) == declared, (name, asked, declared)


def _bound(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.add(n.name)
    return out


def _top_level(tree: ast.Module) -> set[str]:
    """The names a module binds at its top level (assignments, definitions, imports)."""
    out: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            out.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(stmt.name)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in stmt.names)
    return out


def _plumbing() -> set[str]:
    """What rewards.py itself defines for its kinds' sections: the shared library (_common.py.j2) and the names
    rewards.py.j2 defines (the format gate, the environment's replay)."""
    names = _bound(ast.parse(str(render._macros("_common.py.j2").library())))
    text = (kinds.TEMPLATES / "rewards.py.j2").read_text(encoding="utf-8")
    return names | set(re.findall(r"^(?:def |class )?(_?[A-Za-z]\w*)\b(?:\s*=[^=]|\s*\()", text, re.M))


@pytest.mark.parametrize("name", registry.TYPE_ORDER)
def test_a_template_uses_only_what_its_entry_declares(name: str) -> None:
    """Shared module globals are not learned by copying: every module a kind's code names is in its entry
    (`stdlib`, `imports`, `helpers` → rewards_<helper>), beside the shared plumbing's own functions."""
    entry = kinds.KINDS[name]
    example = reward_specs([entry.example])[0]
    item = render.plan([example], 1024)[0]
    macros = render._macros(entry.template)
    tree = ast.parse(f"{macros.library()}\n\n{macros.reward(example, *item.args)}")
    loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    allowed = ({m.split(".")[0] for m in (*entry.stdlib, *entry.imports)}
               | {HELPERS[h][0][:-3] for h in entry.helpers} | _plumbing())
    if entry.copies_verifier:
        allowed.add(f"rewards_user_{example.name}")
    undeclared = loaded - _bound(tree) - set(dir(builtins)) - allowed
    assert not undeclared, f"{name}'s template uses {sorted(undeclared)}: declare them in its entry"
    unused = {m.split(".")[0] for m in entry.stdlib} - loaded
    assert not unused, f"{name} declares stdlib modules its template never uses: {sorted(unused)}"


def test_a_rendered_module_binds_only_names_no_reward_may_take(tmp_path: Path) -> None:
    """`reserved_name` is derived from the registry and the templates: every public module-level name of a
    rewards.py rendered with every kind is one, and a spec naming a reward like one is refused."""
    from finetune.errors import UserError
    from finetune.spec import load_spec

    names: set[str] = set()
    for entry in kinds.KINDS.values():
        tree = ast.parse(_rendered(entry.example, tmp_path)["rewards.py"])
        names |= {n for n in _top_level(tree) if not n.startswith("_")} - {entry.example["name"]}
    assert all(kinds.reserved_name(n) for n in names), sorted(n for n in names if not kinds.reserved_name(n))
    assert {"REWARD_META", "REWARD_FUNCS", "rewards_meta", "json", "environment_factory"} <= names
    for name in ("REWARD_META", "rewards_meta", "json", "disable_caches"):
        path = tmp_path / f"{name}.yaml"
        path.write_text(f"name: n\nmodel: m\ndataset: {{path: d.jsonl}}\nrewards:\n  - {{name: {name}, type: format}}\n",
                        encoding="utf-8")
        with pytest.raises(UserError, match="reserved in rewards.py"):
            load_spec(path)


# ----------------------------------------------------------------------------------------- registration --

def test_an_incomplete_or_clashing_entry_is_refused_when_it_registers(monkeypatch: pytest.MonkeyPatch) -> None:
    from finetune.errors import RegistryError

    monkeypatch.setattr(kinds, "KINDS", dict(kinds.KINDS))

    class Incomplete(specs.RewardBase):
        type: Literal["incomplete"]

    hooks = {"order": 999, "reading": lambda r: kinds.Reading(), "columns": lambda r: [],
             "gold": lambda r, dataset: None, "reasons": {}, "fix": "a field"}
    with pytest.raises(RegistryError, match="lacks the hook"):
        kinds.kind("Incomplete", **{k: v for k, v in hooks.items() if k != "columns"})(Incomplete)
    with pytest.raises(RegistryError, match="has the order 10 of 'format'"):
        kinds.kind("Incomplete", **{**hooks, "order": 10})(Incomplete)
    with pytest.raises(RegistryError, match="unknown helpers"):
        kinds.kind("Incomplete", **hooks, helpers=("nope",))(Incomplete)
    with pytest.raises(RegistryError, match="lower_snake_case"):
        kinds.kind("Incomplete", **{**hooks, "reasons": {"Bad Id": kinds.Reason("x")}})(Incomplete)
    assert "incomplete" not in kinds.KINDS
    kinds.kind("Complete", **hooks)(Incomplete)
    assert kinds.KINDS["incomplete"].reading(None) == kinds.Reading()
    with pytest.raises(RegistryError, match="registered twice"):
        kinds.kind("Again", **{**hooks, "order": 998})(Incomplete)


def test_every_declared_reason_is_explained_in_its_kinds_words() -> None:
    for name, entry in kinds.KINDS.items():
        for rid, reason in entry.reasons.items():
            text, fix = registry.explain(rid, name)
            assert text == reason.text and fix == (reason.fix or entry.fix), (name, rid)
        text, fix = registry.explain("zz_undeclared", name)  # never read as "needs type: python"
        assert "does not declare" in text and entry.fix in fix


# Reward behaviour is asked of the kind's entry, never of its `type` string: a comparison of a reward's type
# with a kind's name outside the kinds' own folders is a branch a new kind would silently miss.
TYPE_BRANCH = (r"""(\.type|\btype|reward_type|\bkind)\s*(==|!=|\bin\b|\bnot in\b)\s*[\(\[]?\s*["']"""
               r"""|selectattr\(\s*["']type["']|get\(\s*["']type["']\)\s*(==|!=|\bin\b)""")
ALLOWED = {
    # the DAPO recipe's own advice names the one kind it asks for (a sentence, not a behaviour)
    "scripts/finetune/templates/BRIEF.md.j2",
}


def test_no_reward_type_branches_outside_the_kind_folders() -> None:
    found = []
    names = re.compile(r"""["']({})["']""".format("|".join(map(re.escape, registry.TYPE_ORDER))))
    for path in sorted((ROOT / "scripts" / "finetune").rglob("*")):
        rel = path.relative_to(ROOT).as_posix()
        if (path.suffix not in (".py", ".j2") or rel in ALLOWED or "/rewards/lib/" in rel or "/sandbox/" in rel
                or "/rewards/kinds/" in rel):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(TYPE_BRANCH, line) and names.search(line):
                found.append(f"{rel}:{number}: {line.strip()}")
    assert not found, "reward type-name branches (ask the kind's entry instead):\n" + "\n".join(found)


def test_the_scan_sees_a_type_branch() -> None:
    assert re.search(TYPE_BRANCH, 'if r.type == "math":')
    assert re.search(TYPE_BRANCH, '{% if r.spec.type == "format" %}')
    assert re.search(TYPE_BRANCH, 'if r.type in ("tool_call", "environment"):')
    assert re.search(TYPE_BRANCH, 'if any(m.get("type") == "json_match" for m in metas):')
    assert not re.search(TYPE_BRANCH, 'if r.effective_role == "format":')


# --------------------------------------------------------------------------------------- error paths --

def _spec_text(reward: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump({"name": "paths", "model": "tiny", "dataset": {"path": "data.jsonl"},
                           "environment": {"file": "env.py", "class": "Env"}, "rewards": [reward]},
                          sort_keys=False)


@pytest.mark.parametrize("kind_name", registry.TYPE_ORDER)
def test_every_kind_reports_a_field_error_at_its_own_path_and_line(kind_name: str, tmp_path: Path) -> None:
    """An unknown key in any kind's entry: `rewards[0].<key>`, on the key's own line (the union tag pydantic puts
    in the error location is no key of the file)."""
    from finetune.errors import UserError
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


def test_the_table_is_the_folders_in_their_order() -> None:
    folders = {p.parent.name for p in (kinds.KINDS_DIR).glob("*/__init__.py")}
    assert set(kinds.KINDS) == folders and list(kinds.KINDS) == sorted(kinds.KINDS, key=lambda t: kinds.KINDS[t].order)
    assert [typing.get_args(k.spec.model_fields["type"].annotation)[0] for k in kinds.KINDS.values()] == list(kinds.KINDS)
    assert set(DOC_EXAMPLES) == set(kinds.KINDS)


def test_code_tests_format_of_a_row():
    """A mixed set's row names its own test format; an empty or unknown cell falls back to the reward's."""
    from finetune.rewards.kind import CodeTests

    tests = CodeTests("tests", "assert", format_column="kind")
    assert [tests.format_of({"kind": k}) for k in ("stdin_stdout", " function_call ", "", None, "java")] == \
        ["stdin_stdout", "function_call", "assert", "assert", "assert"]
    assert CodeTests("tests", "assert").format_of({"kind": "stdin_stdout"}) == "assert"
