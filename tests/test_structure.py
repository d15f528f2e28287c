"""Structure checks (issue 17): no function in the package is longer than 80 lines.

Long orchestrators hide their steps; a function over the limit is split into named steps. ``ALLOWED`` lists
the offenders this check found when it landed, with their length then: the list only shrinks — remove an
entry when its function is split, never add one (the test fails on a stale entry too).
"""

from __future__ import annotations

import ast
from pathlib import Path

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
