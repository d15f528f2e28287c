"""Parsers stay linear: one completion a policy can emit (a 100,000-character digit run, nested braces, a long
whitespace run, thousands of repeated ``\\boxed{`` or alternating tags) is read by every reward kind's rendered
function in well under a second of CPU time, so it cannot stall a GRPO step, ``inspect score`` or the gate.

Before the fix one 40,000-digit completion took 44 s in the rendered exact_match reward (``_WORD_UNITS``: adjacent
overlapping quantifiers over digits). CPU time of this process is measured per call (``time.process_time``: a loaded
box stretches wall time, not CPU time); the math reward reads and verifies in worker processes, so for it the
bound is the worker's deadline, which now covers the whole answer path (reading included).
"""

from __future__ import annotations

import json
import math
import sys
import time

import pytest
from pydantic import TypeAdapter

from finetune.demo import tools as demo_tools
from finetune.rewards.registry import RewardSpec
from finetune.rewards.render import render_sources
from finetune.spec import EnvironmentSpec

N = 100_000
CPU_LIMIT_S = 1.0  # per call; the slowest shape measured 0.3 s on a loaded 2-core box
MATH_TIMEOUT_S = 2.0
DIGITS = ("1234567890" * (N // 10))[:N]

SHAPES = {
    "digit run": DIGITS, "answer: digit run": f"<answer>{DIGITS}</answer>",
    "boxed digit run": "\\boxed{" + DIGITS + "}", "digit run with a unit": f"<answer>{DIGITS} meters</answer>",
    "boxed digit run with a unit": "\\boxed{" + DIGITS[:-2] + " m}", "#### digit run": "#### " + DIGITS,
    "the answer is a digit run": "The answer is " + DIGITS,
    "spaced digits": "<answer>" + " ".join(DIGITS[:N // 2]) + " x</answer>",
    "digits after the answer": "<answer>5</answer> it is not " + DIGITS,
    "nested braces": "\\boxed{" + "{" * (N // 2) + "}" * (N // 2) + "}", "unclosed braces": "\\boxed{" + "{" * N,
    "whitespace run": " " * N + "x", "answer: whitespace run": "<answer>1" + " " * N + "x</answer>",
    "boxed whitespace run": "\\boxed{1" + " " * N + "x}", "newline run": "<answer>1" + "\n" * N + "x</answer>",
    "#### whitespace run": "#### 1" + " " * N + "x", "answer is, then spaces": "the answer is" + " " * N,
    "repeated \\boxed{": "\\boxed{" * (N // 7), "repeated closed boxes": "\\boxed{1}" * (N // 9),
    "repeated \\fbox then \\boxed": "\\fbox{1}" * (N // 16) + "\\boxed{2}",
    "alternating empty tags": "<answer></answer>" * (N // 17), "alternating tags": "<answer>1</answer>" * (N // 18),
    "alternating open tags": "<answer><think>" * (N // 15), "unclosed think": "<think>" * (N // 7),
    "repeated ####": "####\n" * (N // 5), "dollar run": "<answer>" + "$" * N + "1</answer>",
    "backslash run": "\\" * N, "tilde fence run": "~" * N + "x\n```\n1\n```",
    "backtick fence run": "`" * N + "!\n```python\nprint(1)\n```", "comment openers": "<!--" * (N // 4),
    "tag openers": "<a" * (N // 2), "thousands commas": "<answer>" + "1," * (N // 2) + "</answer>",
    "thin spaces": "\\boxed{1" + "\\," * (N // 2) + "}", "unit words": "<answer>1 " + "m " * (N // 2) + "</answer>",
    "unit macros": "\\boxed{1" + "\\text{ m}" * (N // 9) + "}", "percent run": "\\boxed{1" + "%" * N + "}",
    "fences": "```\n" * (N // 4), "json openers": '{"a":' * (N // 5), "deep json": "[" * N,
    "json string spaces": '{"total": "1' + " " * N + 'x EUR"}',
    "tool call spaces": "<tool_call><function=f><parameter=x>" + " " * N,
    "tool responses": "<tool_response>" * (N // 15), "hedge words": "<answer>" + "1 or " * (N // 5) + "</answer>",
    "word slashes": "<answer>" + "a/" * (N // 2) + "</answer>",
    "retraction then numbers": "<answer>5</answer> wait " + "1 " * (N // 2),
    "rejection words": "not " * (N // 4) + "\\boxed{5}", "output label": "output " * (N // 7) + ":\n```\n1\n```",
    "full-width digits": "<answer>" + "\uff11" * N + "</answer>",
}
ROW = {"answer": "12", "gold": json.dumps({"vendor": "a", "date": "2020-01-01", "total": 1.0, "currency": "EUR"}),
       "expected_call": json.dumps({"name": "add", "arguments": {"a": 1, "b": 2}}),
       "tools": json.dumps([demo_tools.TOOL_SCHEMA]), "tests": ["assert f(1) == 1"], "a": 1, "b": 2}
CHECKER = "def check(completion, answer=None, **_):\n    return float(completion.strip() == str(answer))\n"


def _entries() -> list[dict]:
    """One reward of every kind (every extraction, every format pattern)."""
    out: list[dict] = [{"name": f"fmt_{p}", "type": "format", "pattern": p}
                       for p in ("answer_tag", "think_answer", "boxed", "hash_answer", "json_object")]
    out += [{"name": f"exact_{e}", "type": "exact_match", "extract": e,
             "normalize": ["strip", "whitespace", "numeric", "punct", "case"]}
            for e in ("answer_tag", "boxed", "hash_answer", "answer_is", "last_number", "none")]
    out += [{"name": f"math_{e}", "type": "math", "extract": e, "timeout_s": MATH_TIMEOUT_S, "workers": 2}
            for e in ("boxed", "answer_tag", "hash_answer", "answer_is", "any")]
    out += [{"name": "schema", "type": "json_schema", "schema": {"type": "object"}},
            {"name": "fields", "type": "json_match", "answer_column": "gold",
             "fields": {"vendor": "text", "date": "date", "total": {"match": "number", "tolerance": 0.01},
                        "currency": {"match": "code", "values": ["EUR"]}}},
            {"name": "tool", "type": "tool_call", "expected_column": "expected_call", "tools_column": "tools"},
            {"name": "solved", "type": "environment"},
            {"name": "tests_pass", "type": "unit_tests", "tests_column": "tests", "min_isolation": "process",
             "workers": 2, "timeout_s": 2.0},
            {"name": "rubric", "type": "judge", "endpoint": "http://127.0.0.1:9/v1", "model": "m", "rubric": "r",
             "retries": 0, "timeout_s": 0.5},
            {"name": "mine", "type": "python", "file": "checker.py", "function": "check", "columns": ["answer"],
             "timeout_s": 2.0},
            {"name": "overlong", "type": "length_penalty", "mode": "soft_overlong", "overlong_buffer": 64}]
    return out


@pytest.fixture(scope="module")
def rewards(tmp_path_factory):
    """Every kind rendered into one rewards.py (with the demo's environment and a python verifier), imported by
    path; the math workers started by a first call."""
    import importlib.util

    folder = tmp_path_factory.mktemp("linear")
    (folder / "env.py").write_text(demo_tools.ENV_SOURCE)
    (folder / "checker.py").write_text(CHECKER)
    specs = [TypeAdapter(RewardSpec).validate_python(e) for e in _entries()]
    env = EnvironmentSpec.model_validate({"file": "env.py", "class": demo_tools.ENV_CLASS})
    run = folder / "run"
    run.mkdir()
    for name, text in render_sources(specs, run_name="linear", source_path=folder / "spec.yaml", tool_env=env,
                                     max_completion_length=1024).items():
        (run / name).write_text(text, encoding="utf-8")
    for stem in ("rewards_answers", "rewards_mathpool"):
        sys.modules.pop(stem, None)
    loaded = importlib.util.spec_from_file_location("_linear_rewards", run / "rewards.py")
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    for func in module.REWARD_FUNCS:
        if func.__name__.startswith("math_"):
            _call(func, "\\boxed{\\frac{1}{2}}")  # the workers import math-verify once, outside any measure
    return module


def _call(func, text: str) -> list:
    return func(prompts=["What is 1 plus 2?"], completions=[text], completion_ids=[[1] * 8],
                **{k: [v] for k, v in ROW.items()})


def _measured(func, text: str) -> tuple[float, float, list]:
    cpu, wall = time.process_time(), time.perf_counter()
    out = _call(func, text)
    return time.process_time() - cpu, time.perf_counter() - wall, out


def test_a_100k_digit_run_is_read_at_once_by_exact_match(rewards):
    """The reported case: one digit run through the rendered exact_match reward (44 s at 40,000 digits)."""
    for name in ("exact_answer_tag", "exact_last_number", "exact_none", "exact_boxed", "exact_answer_is"):
        func = getattr(rewards, name)
        for shape in ("digit run", "answer: digit run", "boxed digit run", "digit run with a unit",
                      "the answer is a digit run", "spaced digits"):
            cpu, _, out = _measured(func, SHAPES[shape])
            assert cpu < CPU_LIMIT_S and out[0] in (0.0, 1.0), (name, shape, cpu, out)


@pytest.mark.slow  # every kind × every shape: about 1,600 calls, sandbox and worker processes included
def test_every_kind_reads_every_adversarial_shape_in_linear_time(rewards):
    slow = []
    for func in rewards.REWARD_FUNCS:
        for shape, text in SHAPES.items():
            cpu, wall, out = _measured(func, text)
            assert len(out) == 1 and (out[0] is None or math.isfinite(out[0])), (func.__name__, shape, out)
            if cpu >= CPU_LIMIT_S:
                slow.append((func.__name__, shape, round(cpu, 2)))
            if func.__name__.startswith("math_"):  # the worker's deadline bounds reading and verifying alike
                assert wall < MATH_TIMEOUT_S + 8, (func.__name__, shape, wall)
    assert not slow, slow


@pytest.mark.slow  # a fresh math worker pool (math-verify import) for a reader that hangs
def test_the_math_deadline_covers_reading_the_answer(tmp_path):
    """A reader that hangs is cut off by the worker's deadline: the reading runs inside the worker (it ran in
    the trainer's process, before the deadline, so a slow regex there stalled the step)."""
    import importlib.util

    specs = [TypeAdapter(RewardSpec).validate_python(
        {"name": "correct", "type": "math", "extract": "boxed", "timeout_s": 3.0, "workers": 1})]
    for name, text in render_sources(specs, run_name="deadline").items():
        if name == "rewards_answers.py":  # the reader stalls on one completion (a stand-in for any slow regex)
            text = text.replace('    body = after_thinking(text)\n    if body is None:\n        return [], "unbalanced"',
                                '    if "STALL" in text:\n        import time\n        time.sleep(60)\n'
                                '    body = after_thinking(text)\n    if body is None:\n        return [], "unbalanced"',
                                1)
            assert "STALL" in text
        (tmp_path / name).write_text(text, encoding="utf-8")
    for stem in ("rewards_answers", "rewards_mathpool"):
        sys.modules.pop(stem, None)
    loaded = importlib.util.spec_from_file_location("_deadline_rewards", tmp_path / "rewards.py")
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    logged: list = []
    kwargs = {"prompts": ["q"] * 2, "answer": ["3", "3"], "log_metric": lambda k, v: logged.append((k, v))}
    assert module.correct(completions=["\\boxed{\\frac{6}{2}}", "\\boxed{\\frac{6}{2}}"], **kwargs) == [1.0, 1.0]
    start = time.perf_counter()
    assert module.correct(completions=["STALL \\boxed{3}", "\\boxed{3}"], **kwargs) == [None, 1.0]
    assert time.perf_counter() - start < 3.0 + 30  # the deadline plus a worker restart, not the 60 s stall
    assert ("rewards/correct/errors", 1.0) in logged

