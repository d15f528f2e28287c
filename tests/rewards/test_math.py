"""Math reward: math-verify in worker processes with per-item deadlines (also off the main thread)."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

HANG = "\\boxed{9^{9^{9^{9}}}+1}"  # math-verify/sympy parses this for minutes without a deadline


@pytest.fixture(scope="module")
def mod(tmp_path_factory):
    from reward_helpers import render_module

    # 5 s per item: a cold worker's first symbolic check (sympy warm-up) must not read as a timeout on a loaded box
    return render_module([
        {"name": "any_math", "type": "math", "extract": "any", "timeout_s": 5.0, "workers": 2},
        {"name": "boxed_math", "type": "math", "extract": "boxed", "timeout_s": 5.0, "workers": 2},
        {"name": "tag_math", "type": "math", "extract": "answer_tag", "timeout_s": 5.0, "workers": 2},
    ], tmp_path_factory.mktemp("math"))


def scores(func, completions, golds, **kw):
    return func(prompts=["Q"] * len(completions), completions=completions, answer=golds, **kw)


def test_equivalence(mod):
    completions = ["so \\boxed{\\frac{1}{2}}", "so \\boxed{0.5}", "so \\boxed{2}", "no answer here", "",
                   None, [{"role": "assistant", "content": "\\boxed{x^2+2x+1}"}]]
    golds = ["\\frac{1}{2}", "1/2", "1/2", "1/2", "1/2", "1/2", "(x+1)^2"]
    assert scores(mod.boxed_math, completions, golds) == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0]


def test_answer_tag_and_hedging(mod):
    completions = ["<answer>\\frac{3}{4}</answer>", "<answer>0.75</answer>", "<answer>1</answer><answer>0.75</answer>",
                   "<answer></answer>", "\\boxed{1} or maybe \\boxed{0.75}"]
    golds = ["0.75"] * 5
    assert scores(mod.tag_math, completions, golds) == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert scores(mod.boxed_math, completions[-1:], golds[-1:]) == [0.0]


def test_gold_hidden_in_markup_is_not_credited(mod):
    """math-verify searches its whole input: a gold hidden in an HTML comment or struck through beside
    a wrong shown answer must not verify (the inspection gate's html_wrapped / markdown_wrapped probes)."""
    hidden = ["<answer><!-- 54 --><b>55</b></answer>", "<answer>~~54~~ **55**</answer>",
              "<answer><b>54</b></answer>", "<answer><!-- 55 -->54</answer>"]
    assert scores(mod.tag_math, hidden, ["54"] * 4) == [0.0, 0.0, 1.0, 1.0]
    assert scores(mod.boxed_math, ["\\boxed{<!-- 54 -->55}"], ["54"]) == [0.0]
    assert scores(mod.any_math, ["It is <!-- 54 --> 55"], ["54"]) == [0.0]


def test_unusable_gold_is_not_applicable(mod):
    # open-r1#86: an unparseable gold must not score 1.0; None leaves the row out.
    result = scores(mod.any_math, ["\\boxed{1}"] * 4, [None, "", "this is not mathematics at all", {"a": 1}])
    assert result == [None, None, None, None]


@pytest.mark.slow
def test_deadline_holds_off_the_main_thread(mod):
    """math-verify's own timeout needs the main thread; the pool's deadline must work from any thread."""
    logged, out = [], {}

    def work():
        out["scores"] = scores(mod.boxed_math, [HANG, "\\boxed{2}", HANG, "\\boxed{1}"], ["1", "2", "1", "5"],
                               log_metric=lambda k, v: logged.append((k, v)))

    start = time.perf_counter()
    thread = threading.Thread(target=work)
    thread.start()
    thread.join(timeout=60)
    elapsed = time.perf_counter() - start
    assert not thread.is_alive(), "math reward hung"
    assert out["scores"] == [None, 1.0, None, 0.0]
    assert logged == [("rewards/boxed_math/errors", 2.0), ("rewards/boxed_math/unusable_gold", 0.0)]
    assert elapsed < 20  # two timeouts in parallel plus one worker restart each
    # The pool recovered: the next batch is scored normally.
    assert scores(mod.boxed_math, ["\\boxed{3}"], ["3"]) == [1.0]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(st.text(max_size=200), st.text(alphabet="\\boxed{}^_0123456789+-*/()x ", max_size=80),
                      st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1)))
def test_never_raises(mod, text):
    assert scores(mod.any_math, [text], ["2"])[0] in (0.0, 1.0, None)


def test_megabyte_completion_is_bounded(mod):
    start = time.perf_counter()
    assert scores(mod.boxed_math, ["1+" * 500_000 + "\\boxed{2}"], ["2"])[0] in (0.0, 1.0, None)
    assert time.perf_counter() - start < 15


@pytest.mark.parametrize("completion, gold, expected", [
    ("\\boxed{10}", "10\\sqrt{2}", 0.0),          # a plain-LaTeX gold is parsed whole, not cut to its last number
    ("\\boxed{10\\sqrt{2}}", "10\\sqrt{2}", 1.0),
    ("\\boxed{7}", "[-2, 7]", 0.0),
    ("\\boxed{[-2, 7]}", "[-2, 7]", 1.0),
    ("\\boxed{7}", "3, 5, 7", 0.0),
    ("\\boxed{2}", "2\\pi", 0.0),
    ("\\boxed{2} and \\boxed{3}", "2, 3", 1.0),    # several boxes naming exactly the gold's values
    ("\\boxed{2} and \\boxed{3}", "2 \\text{ and } 3", 1.0),
    ("\\boxed{2} and \\boxed{3}", "3", 0.0),       # several different boxes for a single gold: a hedge
    ("\\boxed{\\frac13}", "\\frac{1}{3}", 1.0),     # TeX shorthand
    ("\\boxed{\\sqrt3}", "\\sqrt{3}", 1.0),
    ("\\boxed{3\\,600}", "3600", 1.0),
    ("\\boxed{1.2e4}", "12000", 1.0),
    ("\\boxed{12 \\text{ or } 13}", "12", 0.0),
    ("\\boxed{7.5 \\text{ or 8 hours}}", "7.5", 0.0),
    ("\\boxed{13 \\text{ (or 14)}}", "13", 0.0),
    ("\\boxed{7.5 \\text{ hours}}", "7.5", 1.0),
    ("\\boxed{7}\n\nNo wait, it is 6.", "7", 0.0),
    ("Therefore, Natalia sold \\(\\boxed{72}\\) clips in April and May.", "72", 1.0),
    ("\\boxed{\\pm 3}", "3", 0.0),
    ("\\boxed{\\pm 3}", "\\pm 3", 1.0),
])
def test_reads_like_a_careful_reader(mod, completion, gold, expected):
    assert scores(mod.boxed_math, [completion], [gold]) == [expected]


def test_unusable_gold_is_counted_and_reasons_logged(mod):
    logged, extra = [], {}
    out = scores(mod.any_math, ["\\boxed{72}", "\\boxed{1} or \\boxed{2}"], ["seventy-two apples in total", "1"],
                 log_metric=lambda k, v: logged.append((k, v)), log_extra=lambda c, v: extra.setdefault(c, v))
    assert out == [None, 0.0]
    assert ("rewards/any_math/unusable_gold", 1.0) in logged
    assert extra == {"any_math/why": ["unusable_gold", "several_values"]}
