"""A scratch copy of the repository for DESIGN.md's "How to add" tests, and the checks a contributor runs on it.

A recipe is proven by doing it: the test copies the repository, applies the recipe there, and runs ruff, mypy and
the structure tests on the copy (:func:`checks`) beside its own behavioural checks — so a recipe whose realistic
entry trips a module cap, an import rule or the type checker fails its test, not the next contributor.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COPIED = ("scripts", "tests", "examples", "references", "skills", "commands", "agents", "benchmarks",
          ".claude-plugin", "pyproject.toml", "DESIGN.md", "README.md", "Makefile")
STRUCTURE = ("tests/test_structure.py",)


def copy_repo(dest: Path) -> Path:
    """The repository's tracked parts under ``dest`` (no caches, no virtual environment); returns ``dest``."""
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        elif source.is_file():
            shutil.copy(source, dest / name)
    return dest


def digests(root: Path) -> dict[str, str]:
    """relative path -> sha256 of every file (what a recipe touched is the difference of two of these)."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and ".mypy_scratch" not in p.parts}


def run(args: list[str], root: Path, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    """``args`` in ``root`` with the copy's package first on the path (the editable install is the original's)."""
    env = {**os.environ, "PYTHONPATH": str(root / "scripts")}
    return subprocess.run(args, capture_output=True, text=True, env=env, cwd=root, timeout=timeout)


def checks(root: Path, tests: tuple[str, ...] = ()) -> dict[str, subprocess.CompletedProcess[str]]:
    """ruff, mypy and pytest on the structure tests (and ``tests``) in the copy. mypy starts from a copy of the
    original's cache when there is one (read, never written): only what the recipe changed is checked again."""
    if (ROOT / ".mypy_cache").is_dir() and not (root / ".mypy_scratch").exists():
        shutil.copytree(ROOT / ".mypy_cache", root / ".mypy_scratch")
    return {"ruff": run([sys.executable, "-m", "ruff", "check", "."], root),
            "mypy": run([sys.executable, "-m", "mypy", "--cache-dir", str(root / ".mypy_scratch")], root),
            "pytest": run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *STRUCTURE, *tests], root)}


def failed(results: dict[str, subprocess.CompletedProcess[str]]) -> dict[str, str]:
    """check -> the end of its output, for each check that failed."""
    return {name: (r.stdout + r.stderr)[-3000:] for name, r in results.items() if r.returncode != 0}
