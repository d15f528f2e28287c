"""`finetune env check [RUN]` — can this machine and interpreter run RUN's rendered config?"""

from __future__ import annotations

import argparse
from pathlib import Path

from finetune import rundir
from finetune.cli import Verb
from finetune.errors import UserError


def check_arguments(p: argparse.ArgumentParser) -> None:
    """`env check` (VERBS below)."""
    p.description = ("Exit 0 ready, 1 not ready. Runs in the interpreter that will train "
                     "(launch.sh runs the same check as config/env_check.py).")
    p.add_argument("run", nargs="?", default=".", help="run directory (default: the current one)")


def run(args: argparse.Namespace) -> int:
    from finetune.env import check

    run_dir = Path(args.run)
    target_path = run_dir / check.TARGET
    if not target_path.is_file():
        raise UserError(f"no {check.TARGET} in {run_dir}", where=str(run_dir),
                        fix=f"render the config first: finetune config render {run_dir / rundir.SPEC}")
    return check.main([str(run_dir)])


# verb -> its arguments and handler (finetune.cli.verbs reads this; the order is --help's)
VERBS = {"check": Verb(check_arguments, run, "check Python, torch/CUDA, GPUs, TRL, vLLM, DeepSpeed and reward "
                           "packages against RUN's config/target.json; print the install line of each missing piece")}
