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
    from tests.rewards.conftest import render_module

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
