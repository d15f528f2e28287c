"""What re-scoring a PASS costs its consumers: verify_gate with hashes only (status) against verify_gate with the
re-score of the bound samples by the bound rewards (config render, data filter), on the inspection suite's
64 crafted samples and its exact-match reward. Prints both wall times and their ratio, side by side.

    .venv/bin/python benchmarks/bench_gate_rescore.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "inspect"))


def _passed_run(run: Path) -> None:
    from inspect_helpers import CORRECTNESS, MODULES, SPEC, craft_samples, verdicts_for, write_jsonl

    from finetune.cli import main

    run.mkdir()
    (run / "spec.yaml").write_text(SPEC.format(correctness=CORRECTNESS["exact_match"]))
    shutil.copy(MODULES / "good.py", run / "rewards.py")
    rows = craft_samples()
    write_jsonl(run / "samples.jsonl", [{k: v for k, v in r.items() if k != "kind"} for r in rows])
    write_jsonl(run / "mine.jsonl", verdicts_for(rows, reader="human", n=56))
    with contextlib.redirect_stdout(io.StringIO()):
        for argv in (["inspect", "score", str(run)], ["inspect", "human-verdict", str(run), "--file",
                                                      str(run / "mine.jsonl")], ["inspect", "gate", str(run)]):
            assert main(argv) == 0, argv


def main() -> None:
    from finetune.inspect.gate import verify_gate
    from finetune.spec import load_spec

    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        _passed_run(run)
        spec = load_spec(run / "spec.yaml")
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.repeat):
            for rescore in (False, True):
                t = time.perf_counter()
                assert verify_gate(run, spec, rescore=rescore).ok
                times[rescore].append(time.perf_counter() - t)
    hashes, rescored = min(times[False]), min(times[True])
    print(f"{'check':<28}{'best wall s':>12}")
    print(f"{'hashes only (status)':<28}{hashes:>12.2f}")
    print(f"{'re-score (render, filter)':<28}{rescored:>12.2f}")
    print(f"ratio {rescored / hashes:.1f}x; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
