"""`finetune config render SPEC`: Phase 2 — validate the run spec for its target hardware and write config/
(finetune.config: GRPOConfig, train.py, launch files, BRIEF.md)."""

from __future__ import annotations

import argparse
import sys

from finetune.cli import Verb
from finetune.config.render import render


def render_arguments(p: argparse.ArgumentParser) -> None:
    """`config render` (VERBS below)."""
    p.description = "Validate SPEC for its target hardware and write DIR/config/ atomically."
    p.add_argument("spec", help="run spec (spec.yaml) or a run directory")
    p.add_argument("-o", "--out", help="run directory (default: the spec's folder)")
    p.add_argument("--preview", action="store_true",
                   help="render only BRIEF.md with the memory fit, marked PREVIEW (no gate needed, nothing launchable)")
    p.add_argument("--no-gate", action="store_true",
                   help="an UNGATED preview without the Phase 1 gate record: train.py runs a smoke test only, "
                        "launch files refuse to start (unless a person sets FINETUNE_UNGATED_OVERRIDE)")


def run(args: argparse.Namespace) -> int:
    if args.no_gate and not args.preview:
        print("WARNING: --no-gate — an UNGATED preview, WITHOUT a Phase 1 gate record: these rewards were never "
              "inspected. Its train.py runs a CPU smoke test only and its launch files refuse to start.",
              file=sys.stderr)
    from finetune import rundir
    from finetune.inspect.gate import render_void

    void = render_void(rundir.resolve(args.spec, args.out)[1])  # said after the render replaces it
    plan, target = render(args.spec, args.out, preview=args.preview, no_gate=args.no_gate)
    names = sorted(p.name for p in target.iterdir() if p.is_file())
    kind = "PREVIEW" if plan.preview else "rendered"
    print(f"{kind}: {target} ({', '.join(names)})")
    if void and not plan.preview:
        print(f"the config/ this replaces was VOID: {void.split(': a verdict')[0]}")
    for w in plan.warnings:
        print(f"warning: {w}")
    return 0


# verb -> its arguments and handler (finetune.cli.verbs reads this; the order is --help's)
VERBS = {"render": Verb(render_arguments, run, "validate the run spec for its target hardware and write config/")}
