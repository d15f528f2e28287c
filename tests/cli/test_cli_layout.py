"""The command line lives in finetune/cli/, one module per command group; domain modules never parse.

DESIGN.md ("Module map"): `finetune.cli.<group>` holds a group's argparse and the call into the domain; the
modules that do the work expose plain typed functions. These tests read the package's source (AST), so an
`import argparse` added back to a domain module, or a group registered outside finetune/cli/, fails here.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import finetune
from finetune import cli

PACKAGE = Path(finetune.__file__).parent


def _domain_modules() -> list[Path]:
    """Every Python module of the package outside finetune/cli/. Files under a templates/ folder are
    standalone scripts written into a run directory (their own command line is the user's), not modules."""
    return sorted(p for p in PACKAGE.rglob("*.py")
                  if "cli" not in p.relative_to(PACKAGE).parts[:1] and "templates" not in p.parts
                  and "__pycache__" not in p.parts)


def _imports_argparse(path: Path) -> list[int]:
    """Line numbers of every `import argparse` / `from argparse import ...`, at any depth (lazy imports too)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "argparse" for a in node.names):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "argparse":
            lines.append(node.lineno)
    return lines


def test_the_walk_sees_the_domain_modules():
    rel = {p.relative_to(PACKAGE).as_posix() for p in _domain_modules()}
    assert {"memory/estimate.py", "diagnose/detectors.py", "inspect/gate.py", "rewards/render.py", "env/check.py"} <= rel
    assert not any(r.startswith("cli/") for r in rel)


def test_the_check_finds_an_argparse_import(tmp_path):
    """The detector itself: a lazy import inside a function counts, a string or a comment does not."""
    f = tmp_path / "m.py"
    f.write_text("x = 'import argparse'  # import argparse\n\ndef f():\n    from argparse import Namespace\n")
    assert _imports_argparse(f) == [4]
    f.write_text("import os, argparse.x\n")
    assert _imports_argparse(f) == [1]


def test_no_domain_module_imports_argparse():
    offenders = {p.relative_to(PACKAGE).as_posix(): lines for p in _domain_modules() if (lines := _imports_argparse(p))}
    assert not offenders, (f"argparse belongs in finetune/cli/<group>.py, not in the domain module: {offenders}; "
                           "move the add_arguments/run pair there and expose a plain typed function")


@pytest.mark.parametrize("group", list(cli.GROUPS))
def test_each_group_is_a_module_of_finetune_cli(group):
    module_name = cli.GROUPS[group][0]
    assert module_name.startswith("finetune.cli."), f"'{group}' is registered in {module_name}, outside finetune/cli/"
    module = importlib.import_module(module_name)
    if cli.verbs(group):  # the module's table names its own functions, and nothing else adds verbs
        for verb, entry in cli.verbs(group).items():
            for function in (entry.arguments, entry.run):
                assert function.__module__ == module_name and getattr(module, function.__name__) is function, verb
        assert not hasattr(module, "add_arguments")
    else:
        assert callable(module.add_arguments) and callable(module.run)
    shape = cli.shape(group)
    assert shape.help == cli.GROUPS[group][1] and "--help" in shape.options
    assert list(shape.verbs) == list(cli.verbs(group))  # the parser's verbs are the table's


def test_dispatch_runs_the_handler_the_table_names(monkeypatch, tmp_path):
    """A verb added to the table is parsed and dispatched with no other change (here: a handler swapped in)."""
    from finetune.cli import inspect as inspect_cli

    seen: list[tuple[str, str]] = []
    probe = cli.Verb(inspect_cli.gate_arguments, lambda args: seen.append((args.verb, args.run)) or 7, "a test verb")
    monkeypatch.setitem(inspect_cli.VERBS, "probe-verb", probe)
    assert cli.main(["inspect", "probe-verb", str(tmp_path)]) == 7
    assert seen == [("probe-verb", str(tmp_path))]
    assert ("inspect", "probe-verb") in cli.commands() and ("route",) in cli.commands()
    assert "probe-verb" in cli.shape("inspect").verbs


def test_shape_reads_the_parsers():
    """lint and docs read commands through cli.shape: it must show the real verbs and options."""
    inspect = cli.shape("inspect")
    assert list(inspect.verbs)[:3] == ["sample", "score", "review"]
    assert {"--import", "--emit-requests", "-o"} <= inspect.verbs["sample"].options
    assert inspect.verbs["gate"].help.startswith("PASS/FAIL")
    assert cli.shape("inspect", load=False).verbs == {}
    with pytest.raises(KeyError):
        cli.shape("no-such-group")


def test_parsers_load_no_ml_stack():
    """Every group's parser (what `--help`, the README table and lint's command check build) loads without
    torch / transformers / TRL: a group module imports its domain's heavy parts only inside `run`."""
    code = ("import sys\nfrom finetune.cli import GROUPS, shape\nfor g in GROUPS:\n    shape(g)\n"
            "print(sorted(m for m in ('torch', 'transformers', 'trl', 'vllm') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_next_lines_never_wrap_mid_path(tmp_path):
    """A `next:` line longer than the terminal stays one line, so the path and command copy-paste whole."""
    import io

    from rich.console import Console

    from finetune.cli.inspect import next_line

    out = io.StringIO()
    path = tmp_path / ("deep-folder-name-" * 6) / "phase1"
    next_line(Console(file=out, width=40, force_terminal=False), f"finetune inspect score {path}")
    assert out.getvalue() == f"next: finetune inspect score {path}\n"
