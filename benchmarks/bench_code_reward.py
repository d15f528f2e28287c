"""Unit-test reward accuracy on real-style code answers, side by side with two common peers.

Corpus: tests/data/code_corpus.jsonl (built by tests/data/build_code_corpus.py; every row labelled with the
reader's verdict and why). Systems, all given the same rows and the same tests (visible + hidden):

* finetune — the project's `unit_tests` reward, rendered from a spec (all_or_nothing, hidden_tests_column)
  and called TRL-style; a row is accepted on a score of 1.
* naive — "the last ```python block + the tests, exit code 0 passes" (stdin tasks: every case's stdout
  matches line by line, trailing whitespace ignored), the approach most GRPO code recipes take.
* open-r1 — huggingface/open-r1's `extract_code` (vendored below), run locally the way its `code_reward`
  evaluation script judges stdin cases (exit 0, stripped stdout compared line by line with zip); assert
  and call tasks: the extracted code + the tests, exit 0 passes.

Peers run in plain subprocesses with PYTHONHASHSEED=0 (so the table does not move from run to run).
Targets: finetune 0 false positives, false negatives <= 1 %, fewer of both than the naive peer.
Run: .venv/bin/python benchmarks/bench_code_reward.py [--show-errors]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "data" / "code_corpus.jsonl"
FORMATS = {"code_assert": "assert", "code_stdio": "stdin_stdout", "code_call": "function_call"}


# Vendored from huggingface/open-r1, src/open_r1/rewards.py (commit ed89dd949da3), Apache License 2.0,
# Copyright The HuggingFace Team: the extraction its code_reward runs before executing the tests.
def open_r1_extract_code(completion: str, language: str = "python") -> str:
    pattern = re.compile(rf"```{language}\n(.*?)```", re.DOTALL)
    matches = pattern.findall(completion)
    extracted_answer = matches[-1] if len(matches) >= 1 else ""
    return extracted_answer


def naive_extract(completion: str) -> str:
    """The last ```python block, else the whole text."""
    blocks = re.findall(r"```python\n(.*?)```", completion, re.DOTALL)
    return blocks[-1] if blocks else completion


# ------------------------------------------------------------------------------------- peers --

def _run(code: str, stdin: str, cwd: str) -> subprocess.CompletedProcess[str] | None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin"), "PYTHONHASHSEED": "0"}
    try:
        return subprocess.run([sys.executable, "-c", code], input=stdin, capture_output=True, text=True,
                              timeout=5, cwd=cwd, env=env)
    except subprocess.TimeoutExpired:
        return None


def _asserts(row: dict[str, Any]) -> list[str]:
    cols = row["columns"]
    tests = cols["tests"] + cols["hidden_tests"]
    if row["kind"] == "code_call":
        return [f"assert {cols['entry_point']}(*{t['args']!r}) == {t['expected']!r}" for t in tests]
    return list(tests)


def peer_accepts(row: dict[str, Any], code: str, stdio_compare: str) -> bool:
    with tempfile.TemporaryDirectory() as cwd:
        if row["kind"] != "code_stdio":
            done = _run(code + "\n" + "\n".join(_asserts(row)), "", cwd)
            return done is not None and done.returncode == 0
        for case in row["columns"]["tests"] + row["columns"]["hidden_tests"]:
            done = _run(code, case["input"], cwd)
            if done is None or done.returncode != 0:
                return False
            got, want = done.stdout, case["output"]
            if stdio_compare == "open-r1":  # its evaluation script: strip, then zip the lines
                same = all(a.strip() == b.strip() for a, b in zip(got.strip().split("\n"), want.split("\n")))
            else:
                same = [x.rstrip() for x in got.rstrip().split("\n")] == [x.rstrip() for x in want.rstrip().split("\n")]
            if not same:
                return False
    return True


# ----------------------------------------------------------------------------------- project --

def render(folder: Path) -> dict[str, Any]:
    """The project's reward for each task kind, rendered from a spec and imported as TRL would."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from pydantic import TypeAdapter

    from finetune.rewards.registry import RewardSpec
    from finetune.rewards.render import render_sources

    adapter: TypeAdapter[Any] = TypeAdapter(RewardSpec)
    common = {"type": "unit_tests", "tests_column": "tests", "hidden_tests_column": "hidden_tests",
              "all_or_nothing": True, "timeout_s": 5.0, "min_isolation": "process"}
    specs = [adapter.validate_python({**common, "name": kind, "test_format": fmt,
                                      **({"entry_point_column": "entry_point"} if fmt == "function_call" else {})})
             for kind, fmt in FORMATS.items()]
    for name, text in render_sources(specs, run_name="bench").items():
        (folder / name).write_text(text, encoding="utf-8")
    sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location("bench_code_rewards", folder / "rewards.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {kind: getattr(module, kind) for kind in FORMATS}


def project_verdicts(rows: list[dict[str, Any]]) -> tuple[list[bool], list[str]]:
    with tempfile.TemporaryDirectory() as tmp:
        funcs = render(Path(tmp))
        accepted: list[bool] = [False] * len(rows)
        whys: list[str] = [""] * len(rows)
        for kind, func in funcs.items():
            idx = [i for i, r in enumerate(rows) if r["kind"] == kind]
            if not idx:
                continue
            cols: dict[str, list[Any]] = {}
            for name in ("tests", "hidden_tests", "entry_point"):
                cols[name] = [rows[i]["columns"].get(name) for i in idx]
            logged: dict[str, list[str]] = {}
            scores = func(prompts=[rows[i]["prompt"] for i in idx], completions=[rows[i]["completion"] for i in idx],
                          log_extra=logged.__setitem__, **cols)
            for j, i in enumerate(idx):
                accepted[i] = scores[j] == 1.0
                whys[i] = logged.get(f"{kind}/why", [""] * len(idx))[j]
    return accepted, whys


# ------------------------------------------------------------------------------------ report --

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--show-errors", action="store_true", help="list every row a system gets wrong")
    args = parser.parse_args()
    rows = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [r for r in rows if not r["ambiguous"]]
    systems: dict[str, list[bool]] = {}
    systems["finetune"], whys = project_verdicts(rows)
    systems["naive last-block"] = [peer_accepts(r, naive_extract(r["completion"]), "lines") for r in rows]
    systems["open-r1 extract_code"] = [peer_accepts(r, open_r1_extract_code(r["completion"]), "open-r1")
                                       for r in rows]
    positives = sum(r["correct"] for r in rows)
    negatives = len(rows) - positives
    print(f"code corpus: {len(rows)} rows, {len({r['problem'] for r in rows})} problems "
          f"({positives} correct, {negatives} not); all systems get the visible + hidden tests\n")
    print("| system | false positives | false negatives | FP rate | FN rate | agreement |")
    print("|---|---|---|---|---|---|")
    errors: dict[str, list[str]] = {}
    for name, verdicts in systems.items():
        fp = [r for r, v in zip(rows, verdicts) if v and not r["correct"]]
        fn = [r for r, v in zip(rows, verdicts) if r["correct"] and not v]
        errors[name] = [f"  {'FP' if r in fp else 'FN'} {r['id']} ({r['style']}): {r['reason']}" for r in fp + fn]
        print(f"| {name} | {len(fp)} | {len(fn)} | {len(fp) / max(negatives, 1):.1%} | "
              f"{len(fn) / max(positives, 1):.1%} | {1 - (len(fp) + len(fn)) / len(rows):.1%} |")
    for name in systems:
        wrong = Counter(line.split()[1].split("/")[1] for line in errors[name])
        print(f"\n{name}: errors by answer shape: {dict(sorted(wrong.items())) or 'none'}")
        if args.show_errors:
            print("\n".join(errors[name]))
    print("\nfinetune reason ids:", dict(sorted(Counter(whys).items())))
    fp_ft = sum(v and not r["correct"] for r, v in zip(rows, systems["finetune"]))
    fn_ft = sum(r["correct"] and not v for r, v in zip(rows, systems["finetune"]))
    return 0 if fp_ft == 0 and fn_ft <= 0.01 * positives else 1


if __name__ == "__main__":
    sys.exit(main())
