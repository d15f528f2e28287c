"""Structure checks: no function in the package is longer than 80 lines, no module longer than 800 (unless listed
with its reason), no import cycle (type-checking imports included), the placement contract (only
``finetune.placement`` computes a layout), no test importing through a ``tests`` package, nothing cited from
outside.

Long orchestrators hide their steps; a function over the limit is split into named steps. ``ALLOWED`` lists
the offenders this check found when it landed, with their length then: the list only shrinks — remove an
entry when its function is split, never add one (the test fails on a stale entry too).
"""

from __future__ import annotations

import ast
import functools
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
MAX_DESIGN_LINES = 200  # DESIGN.md is a map: contracts, modules, recipes; details live in docstrings

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
    said = " ".join(design.split())
    assert f"this file no longer than {MAX_DESIGN_LINES} lines" in said, "DESIGN.md does not state its own limit"


def _top_level_names(path: Path) -> set[str]:
    """What a module defines or imports at its top level (read, not imported: the map check stays cheap)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def _map_target_exists(dotted: str) -> bool:
    """``a.b.name``: the longest prefix that is a module of the package, then a name defined at its top level."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        base = PACKAGE.joinpath(*parts[:cut])
        module = next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)
        if module is not None:
            rest = parts[cut:]
            return not rest or (len(rest) == 1 and rest[0] in _top_level_names(module))
    return False


def test_design_md_is_a_map() -> None:
    """DESIGN.md stays short enough to read whole: a row that grows past the limit moves its detail into the
    module's docstring. Each module-map row names an entry point that exists, so the map cannot point nowhere."""
    design = (PACKAGE.parents[1] / "DESIGN.md").read_text(encoding="utf-8")
    assert len(design.splitlines()) <= MAX_DESIGN_LINES, f"DESIGN.md has {len(design.splitlines())} lines"
    start = design.index("## Module map")
    rows = [r for r in design[start:design.index("\n## ", start + 1)].splitlines() if r.startswith("| `")]
    assert len(rows) >= 20, rows
    for row in rows:
        entries = re.findall(r"`([\w.]+)`", row.rstrip(" |").rsplit("|", 1)[-1])
        assert entries, f"a module-map row without its entry point: {row}"
        missing = [e for e in entries if not _map_target_exists(e)]
        assert not missing, f"DESIGN.md's module map names {missing}, which the package does not define"
    assert not _map_target_exists("config.build_plan")  # the check can fail: config/__init__.py has no build_plan


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


@functools.cache
def _tree(path: Path, mtime_ns: int) -> ast.Module:
    """A module's AST, parsed once per file version for every check here."""
    del mtime_ns  # part of the key only
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _parsed(path: Path) -> ast.Module:
    return _tree(path, path.stat().st_mtime_ns)


def import_graph(root: Path = PACKAGE, type_checking: bool = False) -> dict[str, dict[str, int]]:
    """module -> {package module it imports: line of the first such import}: module-level and function-level
    imports and ``importlib.import_module("<literal>")``; imports under ``if TYPE_CHECKING:`` only with
    ``type_checking`` (they never run, but a type checker follows them: a circle there still ties the two modules'
    meaning together)."""
    modules = {_module_name(root, p): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        tree = _parsed(path)
        skip = set() if type_checking else {
            id(n) for block in ast.walk(tree) if isinstance(block, ast.If) and "TYPE_CHECKING" in
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


def test_no_import_cycle_at_type_checking_time() -> None:
    """Imports under ``if TYPE_CHECKING:`` included: two modules whose annotations name each other cannot be read
    apart either (move the shared types into a module both import, as ``modelparts`` for models / loratargets)."""
    graph = import_graph(type_checking=True)
    cycles = [_edges(graph, c) for c in import_cycles(graph)]
    assert not cycles, f"import cycles counting type-checking imports: {cycles}"


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
    typed = import_graph(pkg, type_checking=True)
    assert typed["pkg.d"] == {"pkg.e": 3} and frozenset({"pkg.d", "pkg.e"}) in import_cycles(typed)


# ----------------------------------------------------------------------------------------- the placement contract

# Where the GPUs go is decided in finetune.placement alone; everything else reads its Layout. A module outside it
# that computes one of these — tensor / data parallel size, the server's GPUs, training nodes or processes, the
# ZeRO stage, the GPU ordinals — breaks the contract: assigning such a name (or passing it as a keyword, a dict key,
# or returning it from a function of that name) from arithmetic, a comparison, a conditional or a call, or doing
# arithmetic between two GPU counts (one of them such a name).
PLACEMENT_NAMES = frozenset({
    "tp", "dp", "vllm_tp", "vllm_dp", "tensor_parallel_size", "vllm_tensor_parallel_size", "data_parallel_size",
    "vllm_data_parallel_size", "zero_stage", "training_processes", "processes_per_node", "training_nodes",
    "training_gpus", "n_train", "num_processes", "vllm_gpus", "shards", "generation_gpu_ids", "training_gpu_ids"})
GPU_COUNTS = frozenset({"gpus", "nodes", "total_gpus", "gpus_per_node"})
# modules that may: placement itself, and vLLM's checks of a TP × DP it is given (judging, never choosing)
PLACEMENT_OWNERS = {"finetune.placement": "the one place a layout is decided",
                    "finetune.vllm_layout": "vLLM's own checks of a given TP × DP (it judges a layout, never picks one)"}
_READ_CALLS = frozenset({"int", "bool", "getattr", "get", "pop", "str", "tuple", "list"})
_DERIVING_CALLS = frozenset({"min", "max", "sum", "len", "round", "abs", "divmod", "sorted", "next"})


def _name_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    return None


def _computes(value: ast.AST | None) -> bool:
    """Whether an expression derives a value (arithmetic, comparison, condition, comprehension, a call) rather than
    reading one (a name, an attribute, a constant, a subscript, int()/get() of a read)."""
    if value is None or isinstance(value, (ast.Name, ast.Attribute, ast.Constant, ast.Subscript)):
        return False
    if isinstance(value, ast.Call):  # a call derives, unless it only reads or wraps a decided value
        func = value.func.id if isinstance(value.func, ast.Name) else getattr(value.func, "attr", "")
        args = [*value.args, *(k.value for k in value.keywords)]
        if func in _DERIVING_CALLS or any(_computes(a) for a in args):
            return True
        return func not in _READ_CALLS and not any(_name_of(a) in PLACEMENT_NAMES for a in args)
    return True


def _gpu_count(node: ast.AST) -> bool:
    name = _name_of(node)
    return name is not None and (name in PLACEMENT_NAMES or name in GPU_COUNTS)


def placement_violations(root: Path = PACKAGE) -> list[str]:
    """`module:line: what` for every place outside the owners that computes a part of a layout."""
    out: list[str] = []
    for path in sorted(root.rglob("*.py")):
        module = _module_name(root, path)
        if any(module == m or module.startswith(m + ".") for m in PLACEMENT_OWNERS):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for func in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
            if func.name in PLACEMENT_NAMES:
                out += [f"{module}:{r.lineno}: {func.name}() derives its value" for r in ast.walk(func)
                        if isinstance(r, ast.Return) and _computes(r.value)]
        declared = {id(n) for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for n in c.body
                    if isinstance(n, ast.AnnAssign)}  # a data model's field declarations, not decisions
        for node in ast.walk(tree):
            if id(node) not in declared:
                out += [f"{module}:{node.lineno}: {w}" for w in _node_violations(node)]  # type: ignore[attr-defined]
    return out


def _node_violations(node: ast.AST) -> list[str]:
    found: list[str] = []
    targets: list[tuple[ast.AST, ast.AST | None]] = []
    if isinstance(node, ast.Assign):
        targets = [(t, node.value) for t in node.targets]
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [(node.target, node.value if not isinstance(node, ast.AugAssign) else node)]
    elif isinstance(node, ast.Call):
        targets = [(ast.Name(k.arg), k.value) for k in node.keywords if k.arg]
    elif isinstance(node, ast.Dict):
        targets = [(k, v) for k, v in zip(node.keys, node.values) if k is not None]
    for target, value in targets:
        name = _name_of(target)
        if name in PLACEMENT_NAMES and _computes(value):
            found.append(f"{name} is derived here ({ast.unparse(value)[:60] if value is not None else ''})")
    if isinstance(node, ast.BinOp) and _gpu_count(node.left) and _gpu_count(node.right) and (
            _name_of(node.left) in PLACEMENT_NAMES or _name_of(node.right) in PLACEMENT_NAMES):
        found.append(f"GPU arithmetic {ast.unparse(node)[:60]}")
    return found


def template_placement_violations(folder: Path = PACKAGE / "templates") -> list[str]:
    """The same in the Jinja templates: arithmetic on a layout's GPU fields (`topo.nodes - 1`, `range(topo.x)`)."""
    import jinja2
    from jinja2 import nodes

    env = jinja2.Environment()
    fields = PLACEMENT_NAMES | GPU_COUNTS | {"last_node", "training_ranks"}

    def topo_field(n: nodes.Node) -> bool:
        return isinstance(n, nodes.Getattr) and isinstance(n.node, nodes.Name) and n.node.name == "topo" \
            and n.attr in fields

    out = []
    for path in sorted(folder.glob("*.j2")):
        tree = env.parse(path.read_text(encoding="utf-8"))
        for op in tree.find_all((nodes.Add, nodes.Sub, nodes.Mul, nodes.Div, nodes.FloorDiv, nodes.Mod)):
            pair = (op.left, op.right)
            if any(topo_field(n) for n in pair) and (isinstance(op, (nodes.Add, nodes.Sub, nodes.FloorDiv, nodes.Mod))
                                                     or all(topo_field(n) for n in pair)):
                out.append(f"{path.name}:{op.lineno}: arithmetic on the layout")
        for call in tree.find_all(nodes.Call):
            if isinstance(call.node, nodes.Name) and call.node.name == "range" and any(
                    topo_field(n) for a in call.args for n in a.find_all(nodes.Getattr) if True) or (
                    isinstance(call.node, nodes.Name) and call.node.name == "range"
                    and any(topo_field(a) for a in call.args)):
                out.append(f"{path.name}:{call.lineno}: range() over the layout")
    return out


def test_only_placement_computes_a_layout() -> None:
    found = placement_violations() + template_placement_violations()
    assert not found, ("a layout is decided in finetune.placement alone (read its Layout: plan.topology, "
                       f"rec.layout, est.layout): {found}")


def test_the_placement_contract_fails_on_a_module_that_computes_a_layout(tmp_path: Path) -> None:
    """The contract on a scratch copy of the package (placement, vLLM's checks, the memory model and config render,
    which read the layout) with one module added that decides for itself: each way of computing tp, dp, training
    processes or the ZeRO stage is found there, and nothing else."""
    import shutil

    root = tmp_path / "finetune"
    root.mkdir()
    for part in ("__init__.py", "vllm_layout.py", "placement", "memory", "config"):
        copy = shutil.copytree if (PACKAGE / part).is_dir() else shutil.copy
        copy(PACKAGE / part, root / part)
    assert placement_violations(root) == []
    (root / "rogue.py").write_text(
        "def plan(hw, model, spec):\n"
        "    training_processes = hw.gpus - 1\n"
        "    tp = 2 if model.heads % 2 == 0 else 1\n"
        "    dp = hw.gpus // tp\n"
        "    zero_stage = max(spec.zero, 2)\n"
        "    return dict(vllm_gpus=hw.gpus - training_processes)\n"
        "\n\n"
        "def n_train(hw):\n"
        "    return hw.total_gpus - hw.vllm_gpus\n", encoding="utf-8")
    found = placement_violations(root)
    for line in (2, 3, 4, 5, 6, 10):
        assert any(f.startswith(f"finetune.rogue:{line}:") for f in found), (line, found)
    assert any("n_train() derives" in f for f in found)
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "launch.sh.j2").write_text("seq 0 {{ topo.training_nodes - 1 }}\n{{ range(topo.vllm_gpus) }}\n"
                                            "{{ topo.training_ranks | join(' ') }} {{ 8 * topo.training_processes }}\n")
    assert [f.split(": ")[0] for f in template_placement_violations(templates)] == ["launch.sh.j2:1",
                                                                                   "launch.sh.j2:2"]


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
