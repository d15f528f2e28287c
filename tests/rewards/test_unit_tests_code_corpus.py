"""The labelled code-answer corpus (tests/data/code_corpus.jsonl): its rows are well formed and cover the
answer shapes real models produce, and the unit-test reward judges them as the reader labelled them.
`benchmarks/bench_code_reward.py` prints the same numbers beside the naive and open-r1 peers."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROWS = [json.loads(line) for line in (ROOT / "tests" / "data" / "code_corpus.jsonl").read_text().splitlines()]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_code_reward", ROOT / "benchmarks" / "bench_code_reward.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rows_are_labelled_and_cover_the_real_shapes():
    keys = {"id", "kind", "problem", "style", "rule", "prompt", "completion", "columns", "correct", "reason",
            "ambiguous"}
    assert all(set(r) == keys and r["reason"].strip() and isinstance(r["correct"], bool) for r in ROWS)
    assert len({r["id"] for r in ROWS}) == len(ROWS) >= 150
    assert len({r["problem"] for r in ROWS}) >= 30
    assert {r["style"] for r in ROWS} == {"qwen", "llama", "r1"}
    assert {r["kind"] for r in ROWS} == {"code_assert", "code_stdio", "code_call"}
    shapes = Counter(r["rule"] for r in ROWS)
    for shape in ("usage_block", "tests_block", "draft_fix", "think_draft", "unclosed_think", "truncated",
                  "hardcoded", "exit_hack", "atexit_hack", "eq_hack", "wrong_name", "missing_module",
                  "output_in_python_block", "main_driver", "fast_input", "trailing_space", "stderr_debug",
                  "debug_stdout", "input_prompt"):
        assert shapes[shape] >= 1, shape
    assert all(r["columns"]["hidden_tests"] for r in ROWS)  # every problem keeps tests the prompt never shows
    assert all(json.dumps(r["columns"]["hidden_tests"][0])[1:-1] not in r["prompt"] for r in ROWS
               if r["kind"] == "code_assert")


def test_corpus_is_byte_identical_to_its_builder():
    spec = importlib.util.spec_from_file_location("build_code_corpus", ROOT / "tests" / "data" / "build_code_corpus.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in build.rows())
    assert text == (ROOT / "tests" / "data" / "code_corpus.jsonl").read_text()


@pytest.mark.slow
def test_unit_test_reward_matches_the_reader():
    accepted, whys = _bench().project_verdicts(ROWS)
    false_pos = [r["id"] for r, ok in zip(ROWS, accepted) if ok and not r["correct"]]
    false_neg = [r["id"] for r, ok in zip(ROWS, accepted) if r["correct"] and not ok]
    assert false_pos == []
    assert len(false_neg) <= 0.01 * sum(r["correct"] for r in ROWS), false_neg
    by_shape = {r["rule"]: w for r, w in zip(ROWS, whys)}
    assert by_shape["unclosed_think"] == "unclosed_think" and by_shape["truncated"] == "truncated_code"
    assert by_shape["wrong_name"] == "no_entry_point" and by_shape["missing_module"] == "load_failed"
