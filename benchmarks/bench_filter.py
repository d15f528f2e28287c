"""Difficulty filter on the demo's toy task: measured frac_reward_zero_std with and without it, same seeds.

Runs `finetune demo` without its filter (or reuses ``--demo-dir``, a finished demo output, whose filter
is undone in the copies), copies its PASS run twice,
runs `finetune data filter` (k = num_generations) in one copy and re-renders its config, then trains
the demo's toy GRPO run (finetune.demo.train_toy, the demo's CPU profile) in both copies on the same
seeds and prints, side by side, the filter's predicted frac_reward_zero_std and the value TRL logged
(mean over the logged steps), with the ratio filtered / unfiltered.

    .venv/bin/python benchmarks/bench_filter.py [--demo-dir DIR] [--seeds 3407 3408] [--steps 20] [--k K] [--keep LO-HI]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path


def _copy_pass(demo: Path, dst: Path) -> Path:
    dst.mkdir(parents=True)
    for name in ("model", "data"):
        (dst / name).symlink_to(demo / name)
    shutil.copytree(demo / "pass", dst / "pass", ignore=shutil.ignore_patterns("train", "train-*", "train_*",
                                                                             "diagnosis", "data", "spec.yaml.orig"))
    return _unfiltered(dst / "pass")


def _unfiltered(run: Path) -> Path:
    """A demo run that was filtered: back to the spec it gated and the gate's pre-filter binding."""
    import yaml

    from finetune.cli import main as cli
    from finetune.hashing import bound_hashes
    from finetune.inspect.gate import write_gate_record
    from finetune.spec import load_spec

    spec_path = run / "spec.yaml"
    data = yaml.safe_load(spec_path.read_text())
    if data["dataset"].pop("filter", None) is not None:
        spec_path.write_text(yaml.safe_dump(data, sort_keys=False))
        record = json.loads((run / "gate.json").read_text())
        record.pop("dataset_filter", None)
        record["hashes"] = bound_hashes(run, load_spec(spec_path).reward_section())
        write_gate_record(run, record)
        assert cli(["config", "render", str(spec_path)]) == 0
    return spec_path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo-dir", type=Path, help="a finished `finetune demo -o DIR` output to reuse")
    parser.add_argument("--seeds", type=int, nargs="+", default=[3407, 3408])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--max-prompts", type=int, default=None, help="prompts the filter assesses (default all)")
    parser.add_argument("--k", type=int, default=None, help="completions per prompt (default num_generations)")
    parser.add_argument("--keep", default=None, help="pass-rate range kept, LO-HI (default the filter's)")
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from rich.console import Console

    from finetune.cli import main as cli
    from finetune.datafilter import DEFAULT_KEEP, parse_keep, run_filter
    from finetune.demo import EARLY_STEPS, measured_zero_std, run_demo, train_toy
    from finetune.spec import load_spec

    work = Path(tempfile.mkdtemp(prefix="bench-filter-"))
    demo = args.demo_dir.resolve() if args.demo_dir else work / "demo"
    if not args.demo_dir:
        t0 = time.perf_counter()
        run_demo(demo, reader="checker", console=Console(file=open(os.devnull, "w")), filter_k=None)
        print(f"demo: {time.perf_counter() - t0:.0f} s")
    plain, filtered = _copy_pass(demo, work / "unfiltered"), _copy_pass(demo, work / "filtered")
    spec = load_spec(filtered)
    t0 = time.perf_counter()
    keep = parse_keep(args.keep) if args.keep else DEFAULT_KEEP
    summary = run_filter(filtered, filtered.parent, k=args.k or spec.training.num_generations,
                         max_prompts=args.max_prompts, keep=keep)
    print(f"filter: k={summary['k']}, keep {keep[0]:g}-{keep[1]:g}, kept {summary['kept']} of {summary['assessed']} prompts "
          f"({summary['dropped_never']} never, {summary['dropped_always']} always solved) in "
          f"{time.perf_counter() - t0:.0f} s")
    assert cli(["config", "render", str(filtered)]) == 0
    rows = []
    for seed in args.seeds:
        measured: dict[str, tuple[float, float]] = {}
        for name, spec_path in (("unfiltered", plain), ("filtered", filtered)):
            run_dir = spec_path.parent
            out = run_dir / f"train-seed{seed}"
            train_toy(run_dir, load_spec(spec_path), seed, out, args.steps, lambda *_: None)
            measured[name] = (measured_zero_std(out) or 0.0, measured_zero_std(out, EARLY_STEPS) or 0.0)
        rows.append((seed, measured["unfiltered"], measured["filtered"]))
    _table(args, summary, rows)
    lower = all(mf[0] < mu[0] for _, mu, mf in rows)
    mean_u, mean_f = (sum(r[i][0] for r in rows) / len(rows) for i in (1, 2))
    print(f"filtered lower than unfiltered on every seed: {lower}; mean over seeds {mean_u:.3f} -> {mean_f:.3f}")
    print(f"(work dir: {work})")
    return 0 if lower else 1


def _table(args: argparse.Namespace, summary: dict, rows: list) -> None:
    """Predicted and measured side by side: whole run and its first EARLY_STEPS steps (the sampled policy)."""
    from finetune.demo import EARLY_STEPS

    pb, pa = summary["predicted_zero_std_before"], summary["predicted_zero_std_after"]
    print(f"\nfrac_reward_zero_std, {args.steps} steps per run (demo CPU profile), same seeds; "
          f"measured = TRL's log, mean over all steps (first {EARLY_STEPS} steps)")
    print(f"{'seed':>6} | {'predicted unfilt.':>17} | {'measured unfilt.':>18} | {'predicted filt.':>15} | "
          f"{'measured filt.':>18} | {'ratio filt./unfilt.':>19}")
    for seed, (mu, eu), (mf, ef) in rows:
        ratio = f"{mf / mu:.2f}" if mu else "n/a"
        print(f"{seed:>6} | {pb:>17.3f} | {mu:>7.3f} ({eu:.3f}) | {pa:>15.3f} | {mf:>7.3f} ({ef:.3f}) | {ratio:>19}")


if __name__ == "__main__":
    sys.exit(main())
