"""`finetune demo`: every phase on the embedded toy task, on CPU, with a report (finetune.demo)."""

from __future__ import annotations

import argparse
import os

from finetune.cli.argtypes import count
from finetune.demo import DEFAULT_SEEDS, run_demo
from finetune.demo_train import DEMO_STEPS
from finetune.errors import CheckFailed, UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--out", default="runs/demo", metavar="DIR",
                        help="folder for the demo's run directories and report (default: ./runs/demo; "
                             "must be new, empty, or an earlier demo's)")
    parser.add_argument("--reader", choices=["auto", "checker", "terminal"], default="auto",
                        help="who reads the samples: you in a terminal review, or the demo's independent checker "
                             "(auto: on a terminal it asks, defaulting to you; otherwise the checker)")
    parser.add_argument("--seeds", type=count(1, 64), default=len(DEFAULT_SEEDS), metavar="N",
                        help=f"GRPO seeds for the before/after measurement (default {len(DEFAULT_SEEDS)})")
    parser.add_argument("--steps", type=count(1, 100000), default=DEMO_STEPS,
                        help=f"GRPO steps per seed (default {DEMO_STEPS})")
    parser.add_argument("--tools", action="store_true",
                        help="run the calculator tool task instead (TRL environment_factory, tool calls executed; "
                             "default folder ./runs/demo-tools)")


def run(args: argparse.Namespace) -> int:
    if args.seeds < 1 or args.steps < 10:
        raise UserError("need at least 1 seed and 10 steps (diagnose needs 10 logged steps)",
                        where="--seeds/--steps", fix="e.g. --seeds 2 --steps 40")
    seeds = tuple(DEFAULT_SEEDS[0] + i for i in range(args.seeds))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.tools:
        from finetune.demo_toolrun import TOOL_STEPS, run_tool_demo

        out = "runs/demo-tools" if args.out == "runs/demo" else args.out
        result = run_tool_demo(out, seeds=seeds, steps=TOOL_STEPS if args.steps == DEMO_STEPS else args.steps)
    else:
        result = run_demo(args.out, reader=args.reader, seeds=seeds, steps=args.steps)
    if result.facts.get("stopped_at"):
        raise CheckFailed(f"demo stopped at '{result.facts['stopped_at']['phase']}'; see {result.out / 'report.md'}")
    return 0
