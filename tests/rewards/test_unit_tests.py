"""Unit-test reward: the completion's code runs against the row's tests in the rendered sandbox."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ADD = "```python\ndef add(a, b):\n    return a + b\n```"
HALF = "```python\ndef add(a, b):\n    return a + b if a < 5 else 0\n```"


@pytest.fixture(scope="module")
def mod(tmp_path_factory):
    from reward_helpers import render_module

    common = {"timeout_s": 2.0, "workers": 2, "min_isolation": "process"}
    return render_module([
        {"name": "asserts", "type": "unit_tests", "tests_column": "tests", **common},
        {"name": "strict", "type": "unit_tests", "tests_column": "tests", "all_or_nothing": True, **common},
        {"name": "stdio", "type": "unit_tests", "tests_column": "io", "test_format": "stdin_stdout", **common},
        {"name": "calls", "type": "unit_tests", "tests_column": "cases", "test_format": "function_call",
         "entry_point_column": "fn", **common},
    ], tmp_path_factory.mktemp("unit"))


def test_assert_tests_fraction_and_all_or_nothing(mod):
    tests = ["assert add(1, 2) == 3", "assert add(5, 5) == 10"]
    completions = [ADD, HALF, "no code at all", "```python\nimport sys\nsys.exit(0)\n```",
                   "```python\nclass Liar:\n    def __eq__(self, o): return True\ndef add(a, b): return Liar()\n```",
                   "```python\nwhile True: pass\n```", None]
    kw = {"prompts": ["Q"] * 7, "completions": completions, "tests": [tests] * 7}
    assert mod.asserts(**kw) == [1.0, 0.25, 0.0, 0.0, 0.0, 0.0, 0.0]  # partial = 0.5 × fraction passed
    assert mod.strict(**kw) == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]


def test_json_text_tests_and_unusable_tests(mod):
    tests = [json.dumps(["assert add(2, 2) == 4"]), None, 42, []]
    assert mod.asserts(prompts=["Q"] * 4, completions=[ADD] * 4, tests=tests) == [1.0, None, None, None]


def test_stdin_stdout_and_function_call(mod):
    io_tests = [{"input": "3\n", "output": "6\n"}, {"input": "5\n", "output": "10\n"}]
    apps = {"inputs": ["1\n", "2\n"], "outputs": ["2\n", "4\n"]}
    doubler = "```python\nprint(int(input()) * 2)\n```"
    assert mod.stdio(prompts=["Q"] * 3, completions=[doubler, doubler, "```python\nprint(1)\n```"],
                     io=[io_tests, json.dumps(apps), io_tests]) == [1.0, 1.0, 0.0]
    cases = [{"args": [1, 2], "expected": 3}, {"args": [2, 2], "expected": 4}]
    assert mod.calls(prompts=["Q"] * 3, completions=[ADD, HALF, ADD], cases=[cases, cases, cases],
                     fn=["add", "add", None]) == [1.0, 1.0, None]


def test_judge_checks_and_problem_limits_per_row(render):
    """Floats within tolerance, any valid line order, and a problem's own time limit, each from the row."""
    mod = render([{"name": "judged", "type": "unit_tests", "tests_column": "io", "test_format": "stdin_stdout",
                   "compare": "float", "float_abs_tol": 1e-4, "compare_column": "checker", "checker_column": "judge",
                   "time_limit_column": "seconds", "memory_limit_column": "mb", "min_isolation": "process",
                   "workers": 2, "timeout_s": 5.0}])
    third = [{"input": "3\n", "output": "0.333333\n"}]
    pairs = [{"input": "2\n", "output": "1 2\n2 1\n"}]
    spin = "```python\nimport time\nt = time.time()\nwhile time.time() - t < 1.5: pass\nprint(1 / int(input()))\n```"
    completions = ["```python\nprint(1 / int(input()))\n```", "```python\nprint(round(1 / int(input()), 2))\n```",
                   "```python\nprint('2 1')\nprint('1 2')\n```", "```python\nprint('2 1')\nprint('2 1')\n```",
                   spin, spin, "```python\nprint(1 / int(input()))\n```", "```python\nprint(1 / int(input()))\n```"]
    rows = {"io": [third, third, pairs, pairs, third, third, third, third],
            "checker": [None, "", "unordered_lines", "unordered_lines", None, None, "sorted", None],
            "seconds": [None, None, None, None, 0.5, "4", None, "-1"],
            "mb": [None, None, None, None, None, None, None, None], "judge": [None] * 8}
    scores = mod.judged(prompts=["Q"] * 8, completions=completions, **rows)
    assert scores == [1.0, 0.0, 1.0, 0.0, 0.0, 1.0, None, None]
    # a row's special judge (any two numbers summing to n); one that fails is an error (None), not a 0
    checker = ("import json, sys\ncase = json.load(sys.stdin)\na, b = map(int, case['output'].split())\n"
               "sys.exit(0 if a + b == int(case['input']) else 1)\n")
    sums = [{"input": "5\n", "output": "2 3\n"}]
    judged = mod.judged(prompts=["Q"] * 3, completions=["```python\nprint(1, int(input()) - 1)\n```",
                                                        "```python\nprint(1, int(input()))\n```",
                                                        "```python\nprint(1, int(input()) - 1)\n```"],
                        io=[sums] * 3, checker=[None] * 3, seconds=[None] * 3, mb=[None] * 3,
                        judge=[checker, checker, "import sys\nsys.exit(3)"])
    assert judged == [1.0, 0.0, None]


def test_mixed_stdin_and_function_rows_in_one_reward(render):
    """One reward for a mixed set: each row names its own test format; a row naming none of them is not applicable."""
    mod = render([{"name": "mixed", "type": "unit_tests", "tests_column": "tests", "test_format": "assert",
                   "test_format_column": "kind", "entry_point_column": "fn", "compare": "float",
                   "min_isolation": "process", "workers": 2, "timeout_s": 5.0}])
    io = [{"input": "4\n", "output": "0.25\n"}]
    calls = [{"args": [1, 2], "expected": 3}]
    asserts = ["assert add(2, 2) == 4"]
    stdin_code = "```python\nprint(1 / int(input()))\n```"
    completions = [stdin_code, ADD, ADD, "```python\nprint(0.5)\n```", HALF.replace("a < 5", "a > 5"), ADD]
    rows = {"tests": [io, calls, asserts, io, calls, calls], "fn": [None, "add", None, None, "add", "add"],
            "kind": ["stdin_stdout", "function_call", None, "stdin_stdout", "function_call", "java"]}
    assert mod.mixed(prompts=["Q"] * 6, completions=completions, **rows) == [1.0, 1.0, 1.0, 0.0, 0.0, None]


def test_stdout_checks_refused_for_other_formats():
    from pydantic import ValidationError

    from finetune.rewards.kinds.unit_tests import UnitTestReward

    with pytest.raises(ValidationError, match="test_format: stdin_stdout"):
        UnitTestReward(name="t", type="unit_tests", compare="float")


def test_gated_on_format(render):
    mod = render([{"name": "format", "type": "format", "pattern": "answer_tag"},
                  {"name": "tests_pass", "type": "unit_tests", "tests_column": "tests", "min_isolation": "process",
                   "workers": 1, "timeout_s": 2.0}])
    tests = [["assert add(1, 2) == 3"]] * 2
    assert mod.tests_pass(prompts=["Q"] * 2, completions=[f"<answer>{ADD}</answer>", ADD], tests=tests) == [1.0, 0.0]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(st.text(max_size=200),
                      st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1)))
def test_never_raises(mod, text):
    score = mod.asserts(prompts=["Q"], completions=[f"```python\n{text}\n```"], tests=[["assert add(1, 2) == 3"]])[0]
    assert score in (0.0, 1.0)


# ------------------------------------------------------------------ how the answer's code is read --

USAGE = ("Here is the function:\n\n```python\ndef add(a, b):\n    return a + b\n```\n\nExample usage:\n\n"
         "```python\nprint(add(2, 3))  # Output: 5\nassert add(1, 1) == 3  # a wrong example is usage\n```\n"
         "Output:\n```\n5\n```")
DRAFT_FIX = ("```python\ndef add(a, b):\n    return a - b\n```\nWait, that subtracts. Fixed:\n"
             "```python\ndef add(a, b):\n    return a + b\n```")
THINK_ONLY = "<think>\n```python\ndef add(a, b):\n    return a + b\n```\n"
CUT = "```python\ndef add(a, b):\n    return (a +"
UNFENCED = "Here is the code.\n\ndef add(a, b):\n    return a + b\n\nThis adds two numbers."


def test_reviewer_reading_of_code_answers(mod):
    tests = ["assert add(1, 2) == 3", "assert add(5, 5) == 10"]
    cases = [USAGE, DRAFT_FIX, THINK_ONLY, f"<think>{ADD}</think>\nDone: no code here.", CUT, UNFENCED,
             "```python\ndef plus(a, b):\n    return a + b\n```"]
    whys = {}
    scores = mod.strict(prompts=["Q"] * len(cases), completions=cases, tests=[tests] * len(cases),
                        log_extra=lambda key, values: whys.setdefault(key, values))
    assert scores == [1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    assert whys["strict/why"] == ["ok", "ok", "unclosed_think", "no_code", "truncated_code", "ok", "no_entry_point"]


def test_hidden_tests_join_the_visible_ones(render):
    mod = render([{"name": "t", "type": "unit_tests", "tests_column": "tests", "hidden_tests_column": "hidden",
                   "all_or_nothing": True, "min_isolation": "process", "workers": 1, "timeout_s": 2.0}])
    hard_coded = "```python\ndef add(a, b):\n    if (a, b) == (1, 2):\n        return 3\n    return 0\n```"
    kw = {"prompts": ["Q"] * 2, "completions": [hard_coded, ADD], "tests": [["assert add(1, 2) == 3"]] * 2}
    assert mod.t(**kw, hidden=[None, None]) == [1.0, 1.0]  # the visible example alone is hard-codable
    assert mod.t(**kw, hidden=[["assert add(7, 8) == 15"]] * 2) == [0.0, 1.0]


def test_executions_are_deterministic_and_module_level_files_do_not_count(mod):
    sandbox = mod.rewards_sandbox
    program = "print(list(set(f'w{i}' for i in range(30))))"
    with sandbox.SandboxPool(workers=2, timeout_s=5.0, min_isolation="process") as pool:
        results = pool.run_batch([sandbox.StdioJob(code=program, tests=[("", "-")])] * 6)
    orders = {r.detail for r in results}  # "wrong output: got '[...]'" — the order each execution printed
    assert len(orders) == 1 and "w1" in orders.pop()  # every execution, in every worker, orders the set alike
    pre_written = ("```python\nopen('out.txt', 'w').write('done')\ndef save(text):\n    pass\n```")
    honest = "```python\ndef save(text):\n    open('out.txt', 'w').write(text)\n```"
    tests = ["save('done')\nassert open('out.txt').read() == 'done'"]
    assert mod.strict(prompts=["Q"] * 2, completions=[pre_written, honest], tests=[tests] * 2) == [0.0, 1.0]


def test_bare_code_without_a_fence_is_the_program(mod):
    doubler = "n = int(input())\nprint(n * 2)\n"
    prose = "Sure, here it is:\nn = int(input())\nprint(n * 2)\nThis doubles n."
    io_tests = [{"input": "3\n", "output": "6\n"}]
    assert mod.stdio(prompts=["Q"] * 3, completions=[doubler, prose, "I think it doubles."],
                     io=[io_tests] * 3) == [1.0, 1.0, 0.0]
