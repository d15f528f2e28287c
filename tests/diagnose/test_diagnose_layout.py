"""finetune.diagnose is layered: each module imports only the modules listed before it in the package's
docstring, at module level (no function-level import of the package's own modules to dodge a cycle), and
no module is a shim re-exporting another."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from finetune import diagnose

PACKAGE = Path(diagnose.__file__).parent


def _order() -> list[str]:
    return re.findall(r"^- ``(\w+)``:", diagnose.__doc__ or "", re.M)


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(module of the package imported, whether at module level) for every import of finetune.diagnose.*."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(n) for n in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("finetune.diagnose"):
            parts = node.module.split(".")  # type: ignore[union-attr]
            names = [parts[2]] if len(parts) > 2 else [a.name for a in node.names]
            found += [(name, id(node) in top) for name in names]
        elif isinstance(node, ast.Import):
            found += [(a.name.split(".")[2], id(node) in top) for a in node.names
                      if a.name.startswith("finetune.diagnose.")]
    return found


def test_every_module_is_listed_and_imports_only_earlier_ones_at_module_level():
    order = _order()
    modules = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
    assert sorted(order) == modules, "the package docstring lists every module once"
    for name in order:
        for imported, at_top in _imports(PACKAGE / f"{name}.py"):
            assert at_top, f"{name}.py imports {imported} inside a function"
            assert order.index(imported) < order.index(name), f"{name}.py imports {imported}, listed after it"


def test_the_package_init_re_exports_nothing():
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    assert all(isinstance(n, ast.Expr) for n in tree.body), "finetune/diagnose/__init__.py holds only its docstring"
