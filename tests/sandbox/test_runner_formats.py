"""Correct and wrong solutions for each of the three test formats, judged on the trusted side."""

from __future__ import annotations

import pytest

from finetune.sandbox.runner import AssertJob, CallJob, CallTest, SandboxPool, StdioJob, StdioTest

ADD = "def add(a, b):\n    return a + b\n"


def test_stdio_correct_and_wrong(pool):
    code = "a, b = map(int, input().split())\nprint(a + b)\n"
    good, wrong, crash = pool.run_batch([
        StdioJob(code, [StdioTest("1 2\n", "3\n"), StdioTest("5 7", "12")]),
        StdioJob("print(4)", [StdioTest("1 2\n", "3\n")]),
        StdioJob("raise ValueError('boom')", [StdioTest("", "")]),
    ])
    assert (good.passed, good.score, good.status, good.tests_total) == (True, 1.0, "passed", 2)
    assert (wrong.passed, wrong.status) == (False, "failed")
    assert crash.status == "crashed" and "ValueError: boom" in crash.detail


def test_stdio_compare_modes(pool):
    results = pool.run_batch([
        StdioJob("print('1  2 ')", [("", "1 2\n")], compare="tokens"),
        StdioJob("print('1  2 ')", [("", "1  2\n")], compare="lines"),
        StdioJob("print('1  2 ')", [("", "1  2\n")], compare="exact"),
    ])
    assert [r.passed for r in results] == [True, True, False]


def test_stdio_float_and_unordered_checkers(pool):
    """A judge's float check (absolute or relative tolerance, token-wise) and unordered lines, on the trusted side."""
    tol = pool.run_batch([
        StdioJob("print(0.3333333, 'ok')", [("", "0.333333333 ok\n")], compare="float"),
        StdioJob("print(1e9 + 50)", [("", "1000000000\n")], compare="float", rel_tol=1e-6),
        StdioJob("print(0.34, 'ok')", [("", "0.333333333 ok\n")], compare="float"),
        StdioJob("print(0.3333333, 'OK')", [("", "0.333333333 ok\n")], compare="float"),
        StdioJob("print('nan 1')", [("", "nan 1\n")], compare="float"),
        StdioJob("print('0.3333')", [("", "0.333333\n")], compare="float", abs_tol=1e-3),
        StdioJob("print('3\\n1\\n2')", [("", "1\n2\n3\n")], compare="unordered_lines"),
        StdioJob("print('3\\n1\\n1')", [("", "1\n2\n3\n")], compare="unordered_lines"),
        StdioJob("print(0.3333333)", [("", "0.333333333\n")], compare="lines"),
    ])
    assert [r.passed for r in tol] == [True, True, False, False, True, True, True, False, False]
    with pytest.raises(ValueError, match="unordered_lines"):
        pool.run(StdioJob("print(1)", [("", "1")], compare="sorted"))


# A special judge for "print any two numbers that sum to n": several outputs are right.
SUM_CHECKER = """import json, sys
case = json.load(sys.stdin)
n = int(case["input"])
try:
    a, b = map(int, case["output"].split())
except ValueError:
    print("expected two integers")
    sys.exit(2)
sys.exit(0 if a + b == n else 1)
"""


def test_stdio_special_judge_in_the_sandbox(pool):
    """The checker sees input, expected and output; its exit code is the verdict (testlib's codes); a checker that
    fails is the sandbox's error, never the candidate's."""
    tests = [StdioTest("5\n", "2 3\n"), StdioTest("8\n", "4 4\n")]
    other, wrong, garbled, crash, broken = pool.run_batch([
        StdioJob("n = int(input())\nprint(1, n - 1)", tests, checker=SUM_CHECKER),
        StdioJob("n = int(input())\nprint(1, n)", tests, checker=SUM_CHECKER),
        StdioJob("print('many')", tests, checker=SUM_CHECKER),
        StdioJob("raise SystemExit(3)", tests, checker=SUM_CHECKER),
        StdioJob("n = int(input())\nprint(1, n - 1)", tests, checker="import sys\nsys.exit(3)"),
    ])
    assert (other.passed, other.tests_passed) == (True, 2)
    assert (wrong.status, wrong.detail) == ("failed", "wrong answer (checker)")
    assert garbled.detail == "presentation error (checker: expected two integers)"
    assert crash.status == "crashed"
    assert broken.status == "error" and "the checker failed" in broken.detail


def test_job_limits_override_the_pool(pool):
    """A problem's own limits: its time and address space, not the pool's."""
    hog = "x = bytearray(200 * 1024 * 1024)\nprint(len(x) > 0)\n"
    spin = "import time\nt = time.time()\nwhile time.time() - t < 2: pass\nprint(1)\n"
    small, large, slow = pool.run_batch([
        StdioJob(hog, [("", "True\n")], memory_mb=128),
        StdioJob(hog, [("", "True\n")], memory_mb=1024),
        StdioJob(spin, [("", "1\n")], timeout_s=0.5),
    ])
    assert (small.passed, small.status) == (False, "crashed")
    assert large.passed
    assert slow.status == "timeout"


def test_function_call_partial_credit(pool):
    result = pool.run(CallJob(ADD + "def sub(a, b):\n    return a - b\n", "add",
                              [CallTest([1, 2], 3), CallTest([[1], [2]], [1, 2]), CallTest([1, 1], 3)]))
    assert (result.passed, result.tests_passed, result.tests_total) == (False, 2, 3)
    assert result.test_statuses == ("passed", "passed", "failed")


def test_function_call_json_compare_accepts_tuple_for_list(pool):
    code = "def pair(x):\n    return (x, x)\n"
    strict, loose = pool.run_batch([CallJob(code, "pair", [([1], [1, 1])]),
                                    CallJob(code, "pair", [([1], [1, 1])], compare="json")])
    assert (strict.passed, loose.passed) == (False, True)


def test_mbpp_asserts(pool):
    ok, wrong = pool.run_batch([
        AssertJob(ADD, ["assert add(1, 2) == 3", "assert add('a', 'b') == 'ab'", "assert add(0.1, 0.2) != 1"],
                  setup="import math"),
        AssertJob("def add(a, b):\n    return a * b\n", ["assert add(2, 2) == 4", "assert add(1, 2) == 3"]),
    ])
    assert ok.passed and ok.tests_total == 3
    assert (wrong.passed, wrong.score) == (False, 0.5)


def test_humaneval_check_function(pool):
    test = ("METADATA = {}\n\ndef check(candidate):\n    assert candidate([1.0, 2.0], 0.5) == False\n"
            "    assert candidate([1.0, 1.2], 0.5)\n    assert abs(candidate([1.0], 0.1) - 0) < 1\n")
    code = ("def close(xs, t):\n    return any(abs(a - b) < t for i, a in enumerate(xs)"
            " for b in xs[i + 1:])\n")
    good, bad = pool.run_batch([AssertJob(code, test, entry_point="close"),
                                AssertJob("def close(xs, t):\n    return True\n", test, entry_point="close")])
    assert good.passed and good.tests_total == 3
    assert not bad.passed and bad.test_statuses[0] == "failed"


def test_isclose_assert_is_split(pool):
    code = "def area(r):\n    return 3.14159 * r * r\n"
    result = pool.run(AssertJob(code, ["assert math.isclose(area(2), 12.566, rel_tol=0.001)"],
                                setup="import math"))
    assert result.passed


def test_stdlib_beyond_the_preimported_modules_is_importable(pool):
    """The interpreter's own paths stay readable for the candidate's uid even when they live under a
    hidden or untraversable directory (here: pyenv under /root, mode 0700)."""
    code = "import xml.dom.minidom, sqlite3, socket\nprint(xml.dom.minidom.parseString('<a/>').documentElement.tagName)"
    assert pool.run(StdioJob(code, [("", "a\n")])).passed


def test_numpy_scalars_leave_the_sandbox_as_plain_numbers(pool):
    pytest.importorskip("numpy")
    code = "import numpy as np\ndef f(x):\n    return np.int64(x) * 2\ndef g(x):\n    return np.bool_(x > 1)\n"
    result = pool.run(AssertJob(code, ["assert f(2) == 4", "assert g(2)", "assert not g(0)"]))
    assert result.passed, result


def test_a_broken_dataset_test_fails_only_itself(pool):
    result = pool.run(AssertJob(ADD, ["assert add(1, 2) == 3", "assert add((1, 2) == 3"]))
    assert result.test_statuses == ("passed", "failed") and "SyntaxError" in result.detail


def test_two_pools_never_share_a_candidate_uid(pool):
    with SandboxPool(workers=2, timeout_s=1.5, min_isolation="process") as other:
        assert not set(other.candidate_uids) & set(pool.candidate_uids)
        assert other.run(CallJob(ADD, "add", [([1, 2], 3)])).passed


def test_a_solution_that_does_not_load_fails_every_test(pool):
    broken, exits = pool.run_batch([AssertJob("def add(a, b)\n    return a + b\n", ["assert add(1, 2) == 3"]),
                                    CallJob("import sys\nsys.exit(0)\n", "add", [([1, 2], 3)])])
    assert broken.status == "crashed" and "SyntaxError" in broken.detail
    assert exits.status == "exited_early" and "SystemExit" in exits.detail
