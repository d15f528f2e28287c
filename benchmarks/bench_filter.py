"""Difficulty filter on the demo's toy task: measured frac_reward_zero_std with and without it, same seeds.

Runs `finetune demo` without its filter (or reuses ``--demo-dir``, a finished demo output, whose filter
is undone in the copies), copies its PASS run twice,
runs `finetune data filter` (k = num_generations) in one copy and re-renders its config, then trains
the demo's toy GRPO run (finetune.demo.train.train_toy, the demo's CPU profile) in both copies on the same
seeds and prints, side by side, the filter's predicted frac_reward_zero_std (kept prompts: on fresh samples,
with its 95% interval) and the value TRL logged (mean over the logged steps, and over the first steps), with
the ratio filtered / unfiltered and each run's training-reward gain. Single-threaded like the demo, so the
demo's own seeds reproduce its report's numbers.

    .venv/bin/python benchmarks/bench_filter.py [--demo-dir DIR] [--seeds 3407 ... 3414] [--steps 40] [--k K]
        [--keep LO-HI] [--check-prompts N]
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
    from finetune.demo.train import DEMO_STEPS

    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(3407, 3415)),
                        help="training seeds (default 3407-3414; the demo's own are 3407 and 3408)")
    parser.add_argument("--steps", type=int, default=DEMO_STEPS, help=f"GRPO steps per run (default {DEMO_STEPS}, "
                                                                      "the demo's)")
    parser.add_argument("--max-prompts", type=int, default=None, help="prompts the filter assesses (default all)")
    parser.add_argument("--k", type=int, default=None, help="completions per prompt (default num_generations)")
    parser.add_argument("--keep", default=None, help="pass-rate range kept, LO-HI (default the filter's)")
    parser.add_argument("--check-prompts", type=int, default=None,
                        help="kept prompts re-sampled for the 'after' prediction (default the filter's)")
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from rich.console import Console

    torch.set_num_threads(1)  # as the demo trains: same seeds, same numbers

    from finetune.cli import main as cli
    from finetune.datafilter import DEFAULT_CHECK_PROMPTS, DEFAULT_KEEP, parse_keep, run_filter
    from finetune.demo.run import run_demo
    from finetune.demo.train import EARLY_STEPS, measured_zero_std, reward_gain, train_toy
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
                         max_prompts=args.max_prompts, keep=keep,
                         check_prompts=DEFAULT_CHECK_PROMPTS if args.check_prompts is None else args.check_prompts)
    print(f"filter: k={summary['k']}, keep {keep[0]:g}-{keep[1]:g}, kept {summary['kept']} of {summary['assessed']} prompts "
          f"({summary['dropped_never']} never, {summary['dropped_always']} always solved) in "
          f"{time.perf_counter() - t0:.0f} s")
    assert cli(["config", "render", str(filtered)]) == 0
    rows, stops = [], []
    for seed in args.seeds:
        measured: dict[str, tuple[float, float, float]] = {}
        for name, spec_path in (("unfiltered", plain), ("filtered", filtered)):
            run_dir = spec_path.parent
            out = run_dir / f"train-seed{seed}"
            train_toy(run_dir, load_spec(spec_path), seed, out, args.steps, lambda *_: None)
            measured[name] = (measured_zero_std(out) or 0.0, measured_zero_std(out, EARLY_STEPS) or 0.0,
                              reward_gain(out) or 0.0)
            if (out / "STOPPED.json").is_file():  # the in-training inspection stopped it: its mean is shorter
                stop = json.loads((out / "STOPPED.json").read_text())
                stops.append(f"seed {seed} {name}: stopped at step {stop.get('step')} ({stop.get('rule')})")
        rows.append((seed, measured["unfiltered"], measured["filtered"]))
    _table(args, summary, rows)
    lower_seeds = sum(mf[0] < mu[0] for _, mu, mf in rows)
    ties = sum(mf[0] == mu[0] for _, mu, mf in rows)
    p_value = sign_test_p(lower_seeds, len(rows) - ties)
    mean_u, mean_f = (sum(r[i][0] for r in rows) / len(rows) for i in (1, 2))
    early_u, early_f = (sum(r[i][1] for r in rows) / len(rows) for i in (1, 2))
    gain_u, gain_f = (sum(r[i][2] for r in rows) / len(rows) for i in (1, 2))
    print(f"filtered lower than unfiltered on {lower_seeds}/{len(rows)} seeds ({ties} ties); one-sided sign test "
          f"p = {p_value:.3g} (the effect is shown when p < 0.05); mean over seeds {mean_u:.3f} -> {mean_f:.3f} (ratio {mean_f / mean_u:.2f}; first "
          f"{EARLY_STEPS} steps {early_u:.3f} -> {early_f:.3f}); training reward gain {gain_u:+.3f} -> {gain_f:+.3f}")
    print(f"runs stopped by the in-training inspection: {len(stops)} of {2 * len(rows)}"
          + "".join(f"\n  {s}" for s in stops))
    print(f"(work dir: {work})")
    return 0 if p_value < 0.05 else 1


def sign_test_p(lower: int, untied: int) -> float:
    """One-sided sign test: the chance of ``lower`` or more of ``untied`` paired seeds coming out lower with the
    filter if the filter changed nothing (each seed a fair coin). Ties carry no sign and are left out.

    >>> round(sign_test_p(8, 8), 4), round(sign_test_p(1, 2), 2), sign_test_p(0, 0)
    (0.0039, 0.75, 1.0)
    """
    from scipy.stats import binomtest

    return 1.0 if untied == 0 else float(binomtest(lower, untied, 0.5, alternative="greater").pvalue)


def _table(args: argparse.Namespace, summary: dict, rows: list) -> None:
    """Predicted and measured side by side: whole run and its first EARLY_STEPS steps (the sampled policy)."""
    from finetune.demo.train import EARLY_STEPS

    pb, pa = summary["predicted_zero_std_before"], summary["predicted_zero_std_after"]
    interval = summary.get("predicted_zero_std_after_interval")
    shown = f"{pa:.3f}" + (f" [{interval[0]:.2f},{interval[1]:.2f}]" if interval else " (in-sample)")
    d = summary.get("dispersion") or {}
    print(f"dispersion index of pass rates {d.get('index', float('nan')):.2f} (1 = every prompt equally hard); "
          f"kept prompts predicted on fresh samples of {summary.get('check_prompts', 0)} of them "
          f"(in-sample: {summary.get('predicted_zero_std_after_in_sample', pa):.3f}, biased low)")
    print(f"\nfrac_reward_zero_std, {args.steps} steps per run (demo CPU profile), same seeds; "
          f"measured = TRL's log, mean over all steps (first {EARLY_STEPS} steps); gain = training reward, "
          "last 10 steps minus first 10")
    print(f"{'seed':>6} | {'predicted unfilt.':>17} | {'measured unfilt.':>16} | {'predicted filt.':>22} | "
          f"{'measured filt.':>16} | {'ratio':>5} | {'gain unfilt. / filt.':>20}")
    for seed, (mu, eu, gu), (mf, ef, gf) in rows:
        ratio = f"{mf / mu:.2f}" if mu else "n/a"
        print(f"{seed:>6} | {pb:>17.3f} | {mu:>6.3f} ({eu:.3f}) | {shown:>22} | {mf:>6.3f} ({ef:.3f}) | {ratio:>5} | "
              f"{gu:>+9.3f} / {gf:+.3f}")


if __name__ == "__main__":
    sys.exit(main())
