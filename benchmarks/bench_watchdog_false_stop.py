"""False stops of the stall watchdog (config/watchdog.py): healthy runs held to the bounds a dry run derives.

Renders a CPU run around the tiny model (`finetune config render --no-gate`: the rendered train.py, watchdog.py and
launch.sh as shipped), runs its one-step dry run (`train.py --cpu --dry-run`: train/dryrun.json), then N healthy
runs of `--max-steps S` held to FACTOR × each moment's dry-run duration WITHOUT the floors (`--budget` per moment:
the tightest bound the rule gives, as a fast GPU box's seconds-long moments would get), and prints per run whether
the watchdog stopped it (a false stop: the target is 0) and, per moment, the longest duration over the first — the
margin FACTOR must cover. Each run's durations come from train/watchdog/moments-<pid>.json.

    .venv/bin/python benchmarks/bench_watchdog_false_stop.py [--runs 5] [--steps 20] [--factor 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def _env() -> dict[str, str]:
    return dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")


def _render(out: Path) -> Path:
    from render_fixtures import write_run

    from finetune.cli import main as finetune
    from finetune.tinymodel import build_tiny_model

    model = build_tiny_model(out / "model")
    spec = write_run(out / "run", str(model), hardware={"profile": "cpu", "gpus": 0, "nodes": 1},
                     training__num_train_epochs=50, training__warmup_steps=0)
    if finetune(["config", "render", str(spec), "--no-gate"]) != 0:
        raise SystemExit("config render failed")
    return spec.parent


def _train(run: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    # an ungated render trains past the smoke-test limit only with a person's override: this bench's own toy run
    from finetune.config.build import UNGATED_OVERRIDE

    env = dict(_env(), FINETUNE_UNGATED_OVERRIDE=UNGATED_OVERRIDE)
    return subprocess.run([sys.executable, "config/train.py", "--cpu", *extra], cwd=run, env=env,
                          capture_output=True, text=True, timeout=3600)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--factor", type=float, default=None, help="default: the watchdog's FACTOR")
    args = parser.parse_args()
    from finetune import watchdog

    factor = args.factor or watchdog.FACTOR
    with tempfile.TemporaryDirectory() as tmp:
        run = _render(Path(tmp))
        dry = _train(run, "--dry-run")
        if dry.returncode != 0:
            raise SystemExit(f"dry run failed:\n{dry.stderr[-3000:]}")
        first = json.loads((run / "train" / watchdog.DRY_RUN).read_text())["moments"]
        budgets = {m: max(factor * s, 0.5) for m, s in first.items()}  # no floors: the tightest bound
        print(f"dry run (first durations, s): {first}; bounds = {factor:g}× (no floor): "
              + ", ".join(f"{m} {b:.1f}s" for m, b in budgets.items()), flush=True)
        flags = [f"--budget={m}={b:.3f}" for m, b in budgets.items()]
        rows = []
        for i in range(args.runs):
            for old in (run / "train" / watchdog.FOLDER).glob("moments-*.json"):
                old.unlink()
            t0 = time.perf_counter()
            res = _train(run, "--max-steps", str(args.steps), *flags)
            stalled = run / "train" / watchdog.STALLED
            moments = {}
            for f in (run / "train" / watchdog.FOLDER).glob("moments-*.json"):
                moments = json.loads(f.read_text())
            rows.append({"run": i, "rc": res.returncode, "stopped": stalled.exists(),
                         "moment": json.loads(stalled.read_text())["moment"] if stalled.exists() else "-",
                         "wall_s": time.perf_counter() - t0, "moments": moments})
            r = rows[-1]
            print(f"  run {i}: {'STOPPED at ' + r['moment'] if r['stopped'] else 'ran'} rc {r['rc']} in "
                  f"{r['wall_s']:.0f}s; longest/first: " + ", ".join(
                      f"{m} {v['max_over_first']:.2f} ({v['count']}×)" for m, v in moments.items()), flush=True)
    false_stops = sum(r["stopped"] for r in rows)
    margins = {}
    for r in rows:
        for m, v in r["moments"].items():
            margins[m] = max(margins.get(m, 0.0), v["max_over_first"])
    print(f"\nfalse stops {false_stops}/{len(rows)} (target 0) at bounds {factor:g}× the dry run without floors; "
          "largest longest/first over all runs: " + ", ".join(f"{m} {v:.2f}" for m, v in margins.items()))
    return 0 if false_stops == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
