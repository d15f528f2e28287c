"""`finetune data filter SPEC`: keep the prompts GRPO can learn from — k samples per prompt scored with the
gated rewards, pass-rate range kept, report and binding written (finetune.datafilter)."""

from __future__ import annotations

import argparse
from pathlib import Path

from finetune import rundir
from finetune.cli import Verb
from finetune.datafilter import (
    DEFAULT_CHECK_PROMPTS,
    DEFAULT_K,
    DEFAULT_KEEP,
    FILTER_REPORT,
    PASS_RATES,
    parse_keep,
    run_filter,
)
from finetune.errors import UserError


def filter_arguments(p: argparse.ArgumentParser) -> None:
    """`data filter` (VERBS below)."""
    p.add_argument("spec", help="run spec (spec.yaml) or run directory")
    p.add_argument("-o", "--out", help="run directory (default: the spec's folder)")
    p.add_argument("--k", type=int, default=DEFAULT_K, help=f"completions per prompt (default {DEFAULT_K})")
    p.add_argument("--max-prompts", type=int, default=None, help="assess only the first N prompts")
    p.add_argument("--keep", default=f"{DEFAULT_KEEP[0]:g}-{DEFAULT_KEEP[1]:g}",
                   help="pass-rate range kept, inclusive (default 0.1-0.9: drops 0/k and k/k for k ≤ 9)")
    p.add_argument("--check-prompts", type=int, default=DEFAULT_CHECK_PROMPTS,
                   help=f"kept prompts re-sampled with another seed to predict frac_reward_zero_std after the filter "
                        f"(default {DEFAULT_CHECK_PROMPTS}; 0: in-sample only, biased low)")
    p.add_argument("--device", default=None, help="torch device (default: cuda if available, else cpu)")
    p.add_argument("--backend", choices=["auto", "transformers", "vllm"], default="auto")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    spec_path, run_dir = rundir.resolve(args.spec, args.out)
    if spec_path is None:
        raise UserError(f"no {rundir.SPEC} in {args.spec}", fix="pass the run spec")
    if args.max_prompts is not None and args.max_prompts < 1:
        raise UserError("--max-prompts must be at least 1", where="--max-prompts", fix="e.g. --max-prompts 500")
    console = Console(stderr=True)
    s = run_filter(Path(spec_path), Path(run_dir), k=args.k, max_prompts=args.max_prompts,
                   keep=parse_keep(args.keep), device=args.device, backend=args.backend, console=console,
                   check_prompts=args.check_prompts)
    after = (f"{s['predicted_zero_std_after']:.2f} (fresh samples of {s['check_prompts']} kept prompts, 95% "
             f"{s['predicted_zero_std_after_interval'][0]:.2f}-{s['predicted_zero_std_after_interval'][1]:.2f})"
             if s["check_prompts"] else f"{s['predicted_zero_std_after']:.2f} (in-sample, biased low)")
    print(f"kept {s['kept']} of {s['assessed']} prompts ({s['dropped_never']} never solved, {s['dropped_always']} "
          f"always solved); predicted frac_reward_zero_std {s['predicted_zero_std_before']:.2f} -> {after}; "
          f"wrote {s['filtered']}, {PASS_RATES}, {FILTER_REPORT}")
    if s["dispersion"] is not None and s["dispersion"]["index"] < 2:
        print(f"note: pass rates barely differ between prompts (dispersion index {s['dispersion']['index']:.2f}); "
              f"most 0/k and k/k prompts are luck and the filter helps little — see {FILTER_REPORT}")
    return 0


# verb -> its arguments and handler (finetune.cli.verbs reads this; the order is --help's)
VERBS = {"filter": Verb(filter_arguments, run,
                        "keep the prompts whose pass rate (k samples, gated rewards) is in LO-HI")}
