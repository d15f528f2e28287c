"""`finetune rewards render SPEC [-o DIR]` — write the run's standalone rewards.py and its helpers."""

from __future__ import annotations

import argparse

from finetune.cli import Verb
from finetune.errors import UserError


def render_arguments(p: argparse.ArgumentParser) -> None:
    """`rewards render` (VERBS below)."""
    p.description = ("Render rewards.py and the helpers it needs into the run directory "
                     "(the spec's folder unless -o names another). All files or none.")
    p.add_argument("spec", help="run spec (spec.yaml) or a run directory holding one")
    p.add_argument("-o", "--out", help="run directory to write into (default: the spec's folder)")


def run(args: argparse.Namespace) -> int:
    from finetune import rundir
    from finetune.rewards.render import render_rewards
    from finetune.spec import load_spec

    spec_path, run_dir = rundir.resolve(args.spec, args.out)
    if spec_path is None:
        raise UserError(f"no {rundir.SPEC} in {run_dir}", where=str(args.spec), fix="pass the run spec file")
    spec = load_spec(spec_path)
    from finetune.rewards.columns import check_dataset

    check_dataset(spec, required=False)  # a column a reward reads must exist (exit 2, nothing written)
    for path in render_rewards(spec, run_dir):
        print(path)
    return 0


# verb -> its arguments and handler (finetune.cli.verbs reads this; the order is --help's)
VERBS = {"render": Verb(render_arguments, run, "render rewards.py (+ rewards_*.py helpers) from the spec")}
