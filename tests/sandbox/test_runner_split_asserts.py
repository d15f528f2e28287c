"""Assert-style tests are split: the sandbox evaluates only the candidate-dependent subexpressions and
returns plain values; the trusted side evaluates the rest. What cannot be split runs in-process."""

from __future__ import annotations

import ast

import pytest

from finetune.sandbox.runner import AssertJob, _split_assert


def split(src: str, shadowed=frozenset()):
    check = _split_assert(ast.parse(src).body[0], frozenset(shadowed))
    return None if check is None else (check.src, ast.unparse(check.expr))


@pytest.mark.parametrize("src, sandboxed, trusted", [
    ("assert f(1) == 3", "(f(1),)", "_sandbox_value_0 == 3"),
    ("assert not f(1)", "(f(1),)", "not _sandbox_value_0"),
    ("assert abs(candidate(1.33) - 0.33) < 1e-6", "(candidate(1.33),)", "abs(_sandbox_value_0 - 0.33) < 1e-06"),
    ("assert set(f((3, 4), (4, 5))) == set((4,))", "(f((3, 4), (4, 5)),)", "set(_sandbox_value_0) == set((4,))"),
    ("assert math.isclose(f(2), 12.5, rel_tol=0.01)", "(f(2),)",
     "math.isclose(_sandbox_value_0, 12.5, rel_tol=0.01)"),
    ("assert f(1)[0] == g(2)", "(f(1)[0], g(2),)", "_sandbox_value_0 == _sandbox_value_1"),
    ("assert isinstance(f(1), int)", "(f(1),)", "isinstance(_sandbox_value_0, int)"),
])
def test_splittable_asserts(src, sandboxed, trusted):
    assert split(src) == (sandboxed, trusted)


@pytest.mark.parametrize("src", [
    "assert f(x) == y",                          # free names: their values would come from the sandbox
    "assert f(1) == [i for i in range(3)]",      # comprehension
    "assert sorted(f(1), key=len) == []",        # a key function
    "assert max(3, 5) == 5",                     # nothing candidate-dependent
    "for x in range(3):\n    assert f(x) == x",  # not an assert statement
])
def test_unsplittable_asserts_run_in_process(src):
    assert split(src) is None


def test_a_task_function_named_like_a_builtin_is_not_trusted():
    assert split("assert max(f(1), 2) == 2", {"max"}) == ("(max(f(1), 2),)", "_sandbox_value_0 == 2")


def test_always_equal_objects_cannot_pass_split_asserts(pool):
    code = ("class Liar(float):\n    def __eq__(self, other):\n        return True\n"
            "    def __lt__(self, other):\n        return True\n    __sub__ = lambda self, o: self\n"
            "def f(x):\n    return Liar(7.0)\n")
    result = pool.run(AssertJob(code, ["assert f(1) == 2.0", "assert abs(f(1) - 2.0) < 1e-9",
                                       "assert f(1) < 0"]))
    assert result.tests_passed == 0, result


def test_trusted_side_refuses_results_that_would_exhaust_it(pool):
    code = "def f(x):\n    return 'a' * 1000\n"
    result = pool.run(AssertJob(code, ["assert f(1) * 10 ** 9 == 'a'"]))
    assert result.status == "failed" and "too large" in result.detail


def test_humaneval_float_tolerance_asserts_are_judged_on_the_trusted_side(pool):
    test = ("def check(candidate):\n    import math\n    assert abs(candidate(3.5) - 0.5) < 1e-6\n"
            "    assert math.fabs(candidate(1.25) - 0.25) < 1e-6\n")
    good = AssertJob("def truncate(x):\n    return x % 1.0\n", test, entry_point="truncate")
    bad = AssertJob("def truncate(x):\n    return x\n", test, entry_point="truncate")
    results = pool.run_batch([good, bad])
    assert results[0].passed and results[1].tests_passed == 0


def test_unsplittable_tests_still_run_in_process(pool):
    code = "def f(x):\n    return x * 2\n"
    ok, bad = pool.run_batch([AssertJob(code, ["for x in range(3):\n    assert f(x) == 2 * x"]),
                              AssertJob(code, ["for x in range(3):\n    assert f(x) == 3 * x"])])
    assert ok.passed and not bad.passed
