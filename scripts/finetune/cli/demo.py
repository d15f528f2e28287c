"""`finetune demo`: every phase on the embedded toy tasks, on CPU, with a report (finetune.demo, finetune.demo.toolrun).

By default the digit task runs into DIR and then the calculator tool task into DIR/tools, each with its own
report; ``--no-tools`` runs the digit task alone, ``--tools`` the tool task alone."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from finetune.cli.argtypes import count
from finetune.demo.run import DEFAULT_SEEDS, run_demo
from finetune.demo.train import DEMO_STEPS
from finetune.errors import CheckFailed, UserError

if TYPE_CHECKING:
    from finetune.demo.runner import DemoResult

TOOLS_DIR = "tools"  # the tool task's folder inside DIR when both tasks run


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--out", default="runs/demo", metavar="DIR",
                        help="folder for the demo's run directories and report (default: ./runs/demo; "
                             "must be new, empty, or an earlier demo's)")
    parser.add_argument("--reader", choices=["auto", "checker", "terminal"], default="auto",
                        help="who reads the digit task's samples: you in a terminal review, or the demo's independent "
                             "checker (auto: on a terminal it asks, defaulting to you; otherwise the checker)")
    parser.add_argument("--seeds", type=count(1, 64), default=len(DEFAULT_SEEDS), metavar="N",
                        help=f"GRPO seeds for the before/after measurement (default {len(DEFAULT_SEEDS)})")
    parser.add_argument("--steps", type=count(1, 100000), default=DEMO_STEPS,
                        help=f"GRPO steps per seed (default {DEMO_STEPS} for the digit task, the tool task's own "
                             "20 for the tool task)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--tools", action="store_true",
                       help="run the calculator tool task alone (TRL environment_factory, tool calls executed; "
                            "default folder ./runs/demo-tools)")
    which.add_argument("--no-tools", action="store_true",
                       help="run the digit task alone (by default the tool task follows it, into DIR/tools)")


def run(args: argparse.Namespace) -> int:
    if args.seeds < 1 or args.steps < 10:
        raise UserError("need at least 1 seed and 10 steps (diagnose needs 10 logged steps)",
                        where="--seeds/--steps", fix="e.g. --seeds 2 --steps 40")
    seeds = tuple(DEFAULT_SEEDS[0] + i for i in range(args.seeds))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.tools:
        _tool_task("runs/demo-tools" if args.out == "runs/demo" else args.out, seeds, args.steps)
        return 0
    result = run_demo(args.out, reader=args.reader, seeds=seeds, steps=args.steps)
    _stopped(result)
    if not args.no_tools:
        _tool_task(result.out / TOOLS_DIR, seeds, args.steps)
    return 0


def _tool_task(out: str | Path, seeds: tuple[int, ...], steps: int) -> None:
    from finetune.demo.toolrun import TOOL_STEPS, run_tool_demo

    _stopped(run_tool_demo(out, seeds=seeds, steps=TOOL_STEPS if steps == DEMO_STEPS else steps))


def _stopped(result: DemoResult) -> None:
    if result.facts.get("stopped_at"):
        raise CheckFailed(f"demo stopped at '{result.facts['stopped_at']['phase']}'; see {result.out / 'report.md'}")
