"""Structure checks: no function in the package is longer than 80 lines, no module longer than 800 (unless listed
with its reason), no import cycle, no test importing through a ``tests`` package, nothing cited from outside.

Long orchestrators hide their steps; a function over the limit is split into named steps. ``ALLOWED`` lists
the offenders this check found when it landed, with their length then: the list only shrinks — remove an
entry when its function is split, never add one (the test fails on a stale entry too).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "scripts" / "finetune"
MAX_LINES = 80

# "module:qualified.name" -> its length in lines when this test landed (it may only go down, then out)
ALLOWED: dict[str, int] = {
}


def function_lengths(root: Path = PACKAGE) -> dict[str, int]:
    """Every function and method in the package -> its length in lines (``def`` line to last line)."""
    out: dict[str, int] = {}
    for path in sorted(root.rglob("*.py")):
        module = path.relative_to(root).with_suffix("").as_posix()
        _walk(ast.parse(path.read_text(encoding="utf-8"), str(path)), module, "", out)
    return out


def _walk(node: ast.AST, module: str, prefix: str, out: dict[str, int]) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = f"{prefix}{child.name}"
            if not isinstance(child, ast.ClassDef):
                out[f"{module}:{name}"] = (child.end_lineno or child.lineno) - child.lineno + 1
            _walk(child, module, name + ".", out)
        else:
            _walk(child, module, prefix, out)


def test_no_function_over_the_limit() -> None:
    lengths = function_lengths()
    over = {name: n for name, n in lengths.items() if n > MAX_LINES}
    new = {name: n for name, n in over.items() if name not in ALLOWED}
    assert not new, (f"functions over {MAX_LINES} lines (split them into named steps; do not add them to "
                     f"ALLOWED): {new}")
    grown = {name: (ALLOWED[name], n) for name, n in over.items() if name in ALLOWED and n > ALLOWED[name]}
    assert not grown, f"allowed offenders grew (was, now): {grown}"


def test_allowlist_has_no_stale_entries() -> None:
    lengths = function_lengths()
    stale = sorted(name for name in ALLOWED if lengths.get(name, 0) <= MAX_LINES)
    assert not stale, f"now within {MAX_LINES} lines or gone: remove from ALLOWED in tests/test_structure.py: {stale}"


def test_the_measure_counts_nested_functions_and_methods(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("class C:\n    def f(self):\n        def g():\n            return 1\n"
                                   "        return g()\n\n\nasync def h():\n" + "    x = 1\n" * 90)
    assert function_lengths(tmp_path) == {"m:C.f": 4, "m:C.f.g": 2, "m:h": 91}


# ------------------------------------------------------------------------------------------------ module size

MAX_MODULE_LINES = 800

# Modules allowed over MAX_MODULE_LINES, each with the reason. A module over it is several modules in one file
# until shown otherwise: split it along its seams (a pure move) rather than add it here. The test fails on a
# stale entry too, so the list only shrinks.
LARGE_MODULES: dict[str, str] = {
    "sandbox/runner.py": "ships standalone: copied verbatim beside rewards.py as rewards_sandbox.py, one file by "
                         "design (the same code runs inside the sandbox's child)",
}


def module_lengths(root: Path = PACKAGE) -> dict[str, int]:
    """Every module of the package (path under it) -> its length in lines."""
    return {p.relative_to(root).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
            for p in sorted(root.rglob("*.py"))}


def test_no_module_over_the_limit_unless_listed_with_a_reason() -> None:
    lengths = module_lengths()
    over = {m: n for m, n in lengths.items() if n > MAX_MODULE_LINES and m not in LARGE_MODULES}
    assert not over, (f"modules over {MAX_MODULE_LINES} lines: {over}; split each along its seams (one concern a "
                      "module), or list it in LARGE_MODULES with the reason it must stay one file")
    stale = sorted(m for m in LARGE_MODULES if lengths.get(m, 0) <= MAX_MODULE_LINES)
    assert not stale, f"now within {MAX_MODULE_LINES} lines or gone: remove from LARGE_MODULES: {stale}"
    assert all(reason.strip() for reason in LARGE_MODULES.values())


def test_the_module_measure_counts_lines(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.py").write_text("x = 1\n" * 801)
    (tmp_path / "sub" / "b.py").write_text("")
    assert module_lengths(tmp_path) == {"a.py": 801, "sub/b.py": 0}


def _pyproject() -> dict[str, Any]:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    data: dict[str, Any] = tomllib.loads((PACKAGE.parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    return data


def test_static_check_exemptions_name_existing_modules() -> None:
    """The mypy not-yet-clean list and ruff's per-file exemptions only shrink: an entry whose module was
    renamed or removed would outlive it unnoticed (and exempt whatever takes the name later)."""
    cfg = _pyproject()["tool"]
    root = PACKAGE.parents[1]
    unclean = [m for o in cfg["mypy"]["overrides"] if o.get("ignore_errors") for m in o["module"]]
    missing = [m for m in unclean if not any((root / "scripts" / (m.replace(".", "/") + s)).is_file()
                                             for s in (".py", "/__init__.py"))]
    assert not missing, f"not-yet-clean modules that do not exist (drop them from pyproject.toml): {missing}"
    paths = [p for p in cfg["ruff"]["lint"]["per-file-ignores"] if "*" not in p]
    assert not [p for p in paths if not (root / p).is_file()], f"ruff exemptions for missing files: {paths}"


def test_design_md_states_the_limits_this_test_holds() -> None:
    """A contributor learns the limits from DESIGN.md before a recipe's entry crosses one: its line on this test
    states both numbers, so a changed constant fails here until the text follows."""
    design = (PACKAGE.parents[1] / "DESIGN.md").read_text(encoding="utf-8")
    line = re.search(r"^- `tests/test_structure\.py`: (.*)$", design, re.M)
    assert line, "DESIGN.md has no bullet for tests/test_structure.py"
    stated = line.group(1)
    assert f"no function in the package over {MAX_LINES} lines" in stated, stated
    assert f"no module over {MAX_MODULE_LINES} lines" in stated, stated


TESTS = Path(__file__).resolve().parent


def _importable_test_modules() -> list[Path]:
    """Test files and the helper modules beside them. The test folders have no __init__.py: pytest puts each
    folder that holds a test file on sys.path (rootdir conftest, "prepend" import mode), so these are imported
    by bare basename (``from reward_helpers import render_module``)."""
    folders = {p.parent for p in TESTS.rglob("test_*.py")}
    return sorted(p for d in folders for p in d.glob("*.py") if p.name != "conftest.py")


def test_test_and_helper_module_basenames_are_unique():
    """Two modules with one basename cannot both be imported: the second test file is not collected, the second
    helper silently resolves to the first."""
    from collections import Counter

    names = Counter(p.name for p in _importable_test_modules())
    assert not [n for n, c in names.items() if c > 1]
    assert "reward_helpers.py" in names and "test_structure.py" in names  # the walk sees helpers and tests


# ----------------------------------------------------------------------------------------------- import cycles

# Import cycles in the package when this check landed, as their modules: the list only shrinks. A cycle hidden
# in a function-level import is still a cycle (the two modules cannot be understood or loaded apart); break it
# by moving the shared part into a module both import, never by making the import lazy.
KNOWN_CYCLES: list[frozenset[str]] = [
]


def import_graph(root: Path = PACKAGE) -> dict[str, dict[str, int]]:
    """module -> {package module it imports: line of the first such import}: module-level and function-level
    imports and ``importlib.import_module("<literal>")``; imports under ``if TYPE_CHECKING:`` are left out (they
    never run: annotations only)."""
    modules = {_module_name(root, p): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        skip = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If) and "TYPE_CHECKING" in
                ast.unparse(block.test) for stmt in block.body for n in ast.walk(stmt)}
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: dict[str, int] = {}
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            for target in _imported(node, package):
                while target not in modules and "." in target:
                    target = target.rpartition(".")[0]  # an imported name → the module that defines it
                if target in modules and target != name:
                    edges.setdefault(target, node.lineno)  # type: ignore[attr-defined]
        graph[name] = edges
    return graph


def _module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(node: ast.AST, package: str) -> list[str]:
    """Dotted names an import statement (or an import_module call with a literal) may load."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
            base = ".".join(anchor + ([base] if base else []))
        return [f"{base}.{a.name}" for a in node.names] + [base]
    if (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return [node.args[0].value]
    return []


def import_cycles(graph: dict[str, dict[str, int]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan), each a set of modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = {stack.pop()}
            while v not in component:
                component.add(stack.pop())
            if len(component) > 1:
                out.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _edges(graph: dict[str, dict[str, int]], cycle: frozenset[str]) -> list[str]:
    return sorted(f"{a}:{line} -> {b}" for a in cycle for b, line in graph[a].items() if b in cycle)


def test_no_new_import_cycle() -> None:
    graph = import_graph()
    cycles = import_cycles(graph)
    new = [_edges(graph, c) for c in cycles if not any(c <= known for known in KNOWN_CYCLES)]
    assert not new, ("import cycles (module-level or inside a function; move the shared part into a module both "
                     f"import): {new}")
    stale = [sorted(k) for k in KNOWN_CYCLES if not any(c == k for c in cycles)]
    assert not stale, f"fixed or shrunk: update KNOWN_CYCLES in tests/test_structure.py: {stale}"


def test_the_import_graph_sees_lazy_relative_and_dynamic_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..c import thing\n    return thing\n")
    (pkg / "c.py").write_text("import importlib\nX = importlib.import_module('pkg.a')\n")
    (pkg / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.e import E\n")
    (pkg / "e.py").write_text("from pkg import d\n")
    graph = import_graph(pkg)
    assert graph["pkg.a"] == {"pkg.sub.b": 1, "pkg.sub": 1} and graph["pkg.sub.b"] == {"pkg.c": 2}
    assert graph["pkg.c"] == {"pkg.a": 2} and graph["pkg.d"] == {} and graph["pkg.e"] == {"pkg.d": 1, "pkg": 1}
    assert import_cycles(graph) == [frozenset({"pkg.a", "pkg.sub.b", "pkg.c"})]  # the type-only d <-> e is none


def test_no_test_imports_through_a_tests_package():
    """``tests`` is not a package: ``from tests.x import y`` resolves only under ``python -m pytest`` (which puts
    the working directory on sys.path), so plain ``pytest tests/x.py`` fails to collect the file. Conftest
    files are not importable modules either (pytest loads them itself)."""
    bad = []
    for path in sorted(TESTS.rglob("*.py")):
        if "golden" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            bad += [f"{path.relative_to(TESTS)}:{node.lineno} {n}" for n in names
                    if n == "tests" or n.startswith("tests.") or n.split(".")[-1] == "conftest"]
    assert not bad, f"import the helper module by its basename instead: {bad}"


SELF_EXPLAINING = ("scripts", "tests", "benchmarks", "skills", "commands", "agents", "references", "DESIGN.md",
                   "README.md", "Makefile", "pyproject.toml")
# what a reader of the repository cannot follow: a tracker's issue / contract number, a folder beside the checkout
FOREIGN_REFERENCE = re.compile(r"\b(?:contracts? \d+|issue ?\d+)|\.\./shared/", re.IGNORECASE)


def test_code_docs_and_test_names_cite_nothing_outside_the_repository():
    """Comments, docs and test names say what they mean ("the gate-record contract", DESIGN.md), never a
    number in a tracker the repository does not hold; upstream references (trl#1234) are fine."""
    root = PACKAGE.parents[1]
    paths = [p for name in SELF_EXPLAINING for p in ([root / name] if (root / name).is_file() else
                                                     sorted((root / name).rglob("*")))
             if p.is_file() and "golden" not in p.parts and "__pycache__" not in p.parts
             and not any(part.endswith(".egg-info") for part in p.parts)]  # pip writes it at install
    hits = [f"{p.relative_to(root)}:{n}: {m.group(0)}" for p in paths
            for n, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
            for m in FOREIGN_REFERENCE.finditer(line) if p.name != "test_structure.py"]
    assert not hits, f"say what is meant instead (DESIGN.md names the binding contracts): {hits[:20]}"
    assert FOREIGN_REFERENCE.search("see Issue 12") and not FOREIGN_REFERENCE.search("trl#4563, issuer 3")


# ------------------------------------------------------------------------------------- tests mirror modules

# Test files that test no single module, each with why. Everything else sits where the module it tests says:
# tests/test_<module>*.py for scripts/finetune/<module>.py, tests/<package>/test_<module>*.py for a module of a
# package (see ``module_tested_by``). An entry ending in "/" covers a folder.
PLACEMENT_EXCEPTIONS: dict[str, str] = {
    "hostile/": "the hostile-input contract over every command; its cases are data (tests/hostile/README.md)",
    "vllm_cpu/": "the vLLM tier: real vLLM on CPU through render, sample and filter, in its own environment",
    "test_command_permissions.py": "commands/finetune.md: its allowed-tools against the calls its body makes",
    "test_design_recipes.py": "DESIGN.md's 'How to add' recipes against the code (docs drift)",
    "test_example_code_tests.py": "examples/code-tests walked through the gate end to end",
    "test_finetune_command.py": "commands/finetune.md run as written, in order: the whole walk",
    "test_finetune_walk_json.py": "an agent's whole walk through /finetune on a JSON-extraction task",
    "test_gpu_check.py": "benchmarks/gpu_check.py, a script outside the package",
    "test_plugin.py": "the plugin as Claude Code sees it: manifest, skills, validators",
    "test_seed_traceability.py": "references/seed-traceability.md against the seed spec (docs drift)",
    "test_slow_budget.py": "tests/slow_budget.py, the suite's own pytest plugin",
    "test_structure.py": "the package's and the suite's structure",
}


def _names(stem: str, candidates: set[str]) -> str | None:
    """The longest candidate the file stem names: ``gate_forged_pass`` names ``gate``."""
    named = [c for c in candidates if stem == c or stem.startswith(c + "_")]
    return max(named, key=len) if named else None


def module_tested_by(test: Path, tests: Path = TESTS, package: Path = PACKAGE) -> str | None:
    """What a test file's place says it tests (a path under the package, without suffix), or None.

    - ``tests/test_<m>*.py``: the top-level module ``<m>.py`` (a package's tests go in its folder);
    - ``tests/<pkg>[/<sub>]/test_<m>*.py``: the module ``<m>.py`` of that package, a template it renders
      (``kinds/<m>/template.py.j2``: the reward kinds), or the package as a whole (``<m>`` is the package's name);
    - ``tests/<m>/test_<m2>*.py``: a top-level module family with fixtures of its own (``watch``, ``config``:
      ``<m2>`` is ``<m>`` or ``<m>_*``).
    """
    rel = test.relative_to(tests)
    stem, folders = rel.stem, rel.parts[:-1]
    if not stem.startswith("test_"):
        return None
    stem = stem[len("test_"):]
    where = package.joinpath(*folders)
    top_level = {p.stem for p in package.glob("*.py") if p.stem not in ("__init__", "__main__")}
    if not folders:
        found = _names(stem, top_level)
    elif (where / "__init__.py").is_file():
        found = _names(stem, {p.stem for p in where.glob("*.py") if p.stem != "__init__"}
                       | {p.parent.name for p in where.glob("kinds/*/template.py.j2")} | {where.name})
    elif len(folders) == 1 and folders[0] in top_level:
        found = _names(stem, {m for m in top_level if m == folders[0] or m.startswith(folders[0] + "_")})
    else:
        return None
    return "/".join([*folders, found]) if found else None


def misplaced_tests(tests: Path = TESTS, package: Path = PACKAGE,
                    exceptions: dict[str, str] = PLACEMENT_EXCEPTIONS) -> list[str]:
    files = sorted(p for pattern in ("test_*.py", "*_test.py") for p in tests.rglob(pattern)
                   if "golden" not in p.relative_to(tests).parts)
    return [p.relative_to(tests).as_posix() for p in files
            if not any(p.relative_to(tests).as_posix().startswith(e) for e in exceptions)
            and module_tested_by(p, tests, package) is None]


def test_test_files_sit_where_the_module_they_test_says():
    bad = misplaced_tests()
    assert not bad, ("a test file sits where the module it tests says: tests/test_<module>*.py for "
                     "scripts/finetune/<module>.py, tests/<package>/test_<module>*.py for a package's module (move "
                     f"or rename it; PLACEMENT_EXCEPTIONS only for suites that test no single module): {bad}")


def test_placement_exceptions_name_existing_files_and_give_a_reason():
    stale = [e for e in PLACEMENT_EXCEPTIONS if not (TESTS / e).exists()]
    assert not stale, f"remove from PLACEMENT_EXCEPTIONS in tests/test_structure.py: {stale}"
    assert all(len(why) > 20 for why in PLACEMENT_EXCEPTIONS.values())


def test_the_placement_rule_flags_a_misplaced_test(tmp_path: Path):
    pkg, tests = tmp_path / "pkg", tmp_path / "tests"
    for name in ("spec.py", "watch.py", "config.py", "config_render.py", "rewards/__init__.py", "rewards/render.py",
                 "rewards/kinds/math/template.py.j2", "rewards/lib/__init__.py", "rewards/lib/answers.py",
                 "memory/__init__.py", "memory/estimate.py"):
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text("")
    good = {"test_spec.py": "spec", "test_spec_loader.py": "spec", "rewards/test_render_e2e.py": "rewards/render",
            "rewards/test_math.py": "rewards/math", "rewards/test_rewards_corpus.py": "rewards/rewards",
            "rewards/lib/test_answers.py": "rewards/lib/answers", "memory/test_estimate_lora.py": "memory/estimate",
            "watch/test_watch_runs.py": "watch/watch", "config/test_config_render_docs.py": "config/config_render"}
    bad = ["test_memory.py", "test_render.py", "rewards/test_answers.py", "memory/test_spec.py", "render/test_x.py",
           "watch/test_config.py", "test_specs.py", "hostile/test_y.py", "rewards/lib/test_math.py", "spec_test.py"]
    for name in [*good, *bad]:
        (tests / name).parent.mkdir(parents=True, exist_ok=True)
        (tests / name).write_text("")
    assert {n: module_tested_by(tests / n, tests, pkg) for n in good} == good
    assert misplaced_tests(tests, pkg, {}) == sorted(bad)
    assert misplaced_tests(tests, pkg, {"hostile/": "why", "spec_test.py": "why"}) == sorted(
        set(bad) - {"hostile/test_y.py", "spec_test.py"})
