"""`finetune docs [--check]`: regenerate (or check) every generated part of the plugin's Markdown (finetune.docs)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path

from finetune.docs import REGISTRY, Outcome, Target, default_root, sync
from finetune.errors import CheckFailed, UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if any target drifted")
    parser.add_argument("--root", metavar="DIR", help="plugin root (default: the checkout this package is in)")


def _line(o: Outcome) -> str | None:
    if o.status == "unavailable":
        return f"{o.target.describe()}: cannot generate: producer {o.target.producer} unavailable: {o.detail}"
    if o.status == "failed":
        return f"{o.target.describe()}: cannot generate: producer {o.target.producer} raised {o.detail}"
    if o.status == "drifted":
        return f"{o.target.describe()}: drifted from {o.target.producer}(); run `finetune docs`"
    if o.status == "written":
        return f"{o.target.describe()}: regenerated"
    return None


def run(args: argparse.Namespace, registry: Iterable[Target] | None = None) -> int:
    """``registry``: the targets (tests pass their own); default every generated part of the plugin."""
    root = Path(args.root) if args.root else default_root()
    if not root.is_dir():
        raise UserError(f"not a directory: {root}", where="--root", fix="pass the plugin folder")
    outcomes = sync(root, args.check, REGISTRY if registry is None else registry)
    for o in outcomes:
        if (line := _line(o)) is not None:
            print(line)
    bad = [o for o in outcomes if o.status in {"unavailable", "failed", "drifted"}]
    if bad:
        kinds = sorted({o.status for o in bad})
        raise CheckFailed(f"{len(bad)} generated target(s) {' / '.join(kinds)}")
    print(f"docs: {len(outcomes)} generated target(s) up to date")
    return 0
