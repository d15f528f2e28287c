"""`finetune lint [PATH]`: the plugin's Markdown checked (finetune.lint lists the checks); exit 1 on a finding."""

from __future__ import annotations

import argparse
from pathlib import Path

from finetune.errors import CheckFailed


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", default=".", help="plugin folder, a folder in it, or one Markdown file")


def run(args: argparse.Namespace) -> int:
    from finetune.lint import find_plugin_root, lint, markdown_files, render_findings

    target = Path(args.path)
    findings = lint(target)
    root = find_plugin_root(target) if target.exists() else target
    for line in render_findings(findings, root):
        print(line)
    if findings:
        raise CheckFailed(f"{len(findings)} lint finding(s)")
    n = len(markdown_files(target))
    print(f"lint: {n} Markdown file(s) clean")
    return 0
