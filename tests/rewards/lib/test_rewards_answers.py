"""rewards_answers (copied verbatim beside rewards.py): the final answer as a careful reader takes it."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finetune.rewards.lib import rewards_answers as answers


@pytest.mark.parametrize("text, how, values, reason", [
    ("Therefore, Natalia sold \\(\\boxed{72}\\) clips in April and May.", "boxed", ["72"], "ok"),
    ("Natalia sold $\\boxed{72}$ clips altogether.", "boxed", ["72"], "ok"),
    ("**\\boxed{72}**\n\nI hope it is correct.", "boxed", ["72"], "ok"),
    ("\\[\\boxed{72}\\]\nCheck: 48 + 24 = 72.", "boxed", ["72"], "ok"),
    ("\\boxed{12 \\text{ or } 13}", "boxed", [], "hedge_or"),
    ("\\boxed{7.5 \\text{ or 8 hours}}", "boxed", [], "hedge_or"),
    ("\\boxed{13 \\text{ (or 14)}}", "boxed", [], "hedge_or"),
    ("\\boxed{either 3 or 4}", "boxed", [], "hedge_or"),
    ("<answer>A/B</answer>", "answer_tag", [], "hedge_or"),
    ("\\boxed{3/4}", "boxed", ["3/4"], "ok"),  # a fraction is not an alternative
    ("\\boxed{7.5 \\text{ hours}}", "boxed", ["7.5 \\text{ hours}"], "ok"),  # a unit is not a hedge
    ("\\boxed{7}\n\nNo wait, it is 6.", "boxed", [], "retraction"),
    ("\\boxed{7} Actually, I made an error: the answer is 6.", "boxed", [], "retraction"),
    ("\\boxed{2} and \\boxed{3}", "boxed", ["2", "3"], "several_values"),
    ("\\boxed{5}, i.e. \\boxed{5.0}", "boxed", ["5"], "ok"),
    ("\\boxed{}", "boxed", [], "empty_container"),
    ("so \\boxed{3", "boxed", [], "unbalanced"),
    ("no answer", "boxed", [], "no_container"),
    ("work\n#### 1,200\n", "hash_answer", ["1,200"], "ok"),
    ("So the answer is 42.", "answer_is", ["42"], "ok"),
    ("The final answer is $\\frac{1}{2}$. I hope it is correct.", "answer_is", ["\\frac{1}{2}"], "ok"),
    ("<answer><!-- 54 --><b>55</b></answer>", "answer_tag", ["55"], "ok"),  # hidden markup dropped
    ("text \\boxed{4} more", "any", ["4"], "ok"),
    ("$\\boxed{990}$\n\nWait, let me double-check: yes, it holds, so the answer stays 990.", "boxed", ["990"], "ok"),
    ("<answer>Jupiter</answer>\nWait, no, it is Saturn.", "answer_tag", [], "retraction"),
    ("<think>Maybe \\boxed{12}? 3 x 5 = 15.</think>\n\nThe answer is $\\boxed{15}$.", "boxed", ["15"], "ok"),
    ("<think>\nThe product is \\boxed{15} and then I need to", "boxed", [], "unbalanced"),  # stopped inside
    ("work\n#### 42 pages", "hash_answer", ["42 pages"], "ok"),
    ("Final Answer: The final answer is $14{,}916$. I hope it is correct.", "answer_is", ["14{,}916"], "ok"),
])
def test_final_answers(text, how, values, reason):
    assert answers.final_answers(text, how) == (values, reason)


def test_trailing_text_forbid():
    assert answers.final_answers("\\boxed{72} clips", "boxed", "forbid") == ([], "trailing_text")
    assert answers.final_answers("$\\boxed{72}$.", "boxed", "forbid") == (["72"], "ok")
    assert answers.format_reason("\\boxed{72} clips", "boxed", "forbid") == "trailing_text"
    assert answers.format_reason("\\boxed{72} clips", "boxed") == "ok"


def test_units_are_not_part_of_the_value():
    assert answers.strip_units("42 pages") == "42"
    assert answers.strip_units("7.5 \\text{ hours}") == "7.5"
    assert answers.strip_units("125\\textnormal{ miles}") == "125"
    assert answers.normalise_latex("(12,102)") == "(12,102)"  # a comma inside LaTeX may separate values
    assert answers.canonical_number("11,\\! 111,\\! 111,\\! 100") == "11111111100"


@pytest.mark.parametrize("spelling", ["3600", "3,600", "3\\,600", "3{,}600", "3 600", "3\u2009600", "3600.0",
                                      "3.6e3", "3.6 \\times 10^3", "３６００", "٣٦٠٠"])
def test_number_forms(spelling):
    assert answers.canonical_number(spelling) == "3600"


@pytest.mark.parametrize("value, expected", [
    ("10000000000000000000000000000", "10000000000000000000000000000"),  # 29 digits: beyond decimal's default 28
    ("123456789012345678901234567890123456789", "123456789012345678901234567890123456789"),
    ("1.5e39", "1500000000000000000000000000000000000000"),
    ("0.1234567890123456789012345678901", "0.1234567890123456789012345678901"),
])
def test_long_numbers_keep_every_digit(value, expected):
    # hypothesis found a 29-digit integer gold scoring None (decimal.InvalidOperation under 28-digit precision)
    assert answers.canonical_number(value) == expected


@pytest.mark.parametrize("value", ["12,34", "1 2", "3-4", "x", "1e999", ""])
def test_not_one_number(value):
    assert answers.canonical_number(value) is None


@pytest.mark.parametrize("raw, expected", [("\\frac13", "\\frac{1}{3}"), ("\\sqrt3", "\\sqrt{3}"),
                                          ("\\tfrac12", "\\frac{1}{2}"), ("\\dfrac{3}{4}", "\\frac{3}{4}"),
                                          ("1\\,200", "1200")])
def test_tex_shorthand(raw, expected):
    assert answers.normalise_latex(raw) == expected


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_never_raises(text):
    for how in ("boxed", "answer_tag", "hash_answer", "answer_is", "any"):
        values, reason = answers.final_answers(text, how)
        assert reason in answers.REASONS
        assert answers.format_reason(text, how) in answers.REASONS


@pytest.mark.parametrize(("text", "reason"), [
    ("$\\boxed{12}$\n\nWait, checking: 12 \\times 3 = 36 \\neq 45, so it is not 12.", "rejected"),
    ("Therefore, $x$ cannot be $\\boxed{12}$.", "rejected"),
    ("The answer is not \\boxed{12} but we still need to check.", "rejected"),
    ("$\\boxed{12}$. However, 12 is not the correct answer.", "rejected"),
    ("I get $\\boxed{12}$, which is wrong.", "rejected"),
    ("This gives $\\boxed{12}$. That can\u2019t be the answer.", "rejected"),  # typographic apostrophe
    ("$\\boxed{12}$ is ruled out.", "rejected"),
    ("So the answer is $\\boxed{12}$, not 15.", "ok"),
    ("It is not 15; it is $\\boxed{12}$.", "ok"),
    ("$\\boxed{12}$. Note that 12 is not prime.", "ok"),
    ("It's not hard to see that the answer is $\\boxed{12}$.", "ok"),
    ("$\\boxed{12}$. This is not a coincidence.", "ok"),
    ("$\\boxed{12}$\n\n(Not 12.5: a whole number.)", "ok"),
])
def test_a_box_its_own_words_reject(text, reason):
    values, why = answers.final_answers(text, "boxed")
    if reason == "ok":
        assert (values, why) == (["12"], "ok")
    else:  # "which is wrong" is also a retraction cue: either refusal is the reading
        assert values == [] and why in ("rejected", "retraction")


@pytest.mark.parametrize(("value", "number", "quantity", "size"), [
    ("5 \\text{ cm}", "5", (("length", 1),), Fraction(1, 100)),
    ("2\\,\\text{km}", "2", (("length", 1),), Fraction(1000)),
    ("90 minutes", "90", (("time", 1),), Fraction(60)),
    ("8 \\text{ cm}^2", "8", (("length", 2),), Fraction(1, 10000)),
    ("60 \\text{ km/h}", "60", (("length", 1), ("time", -1)), Fraction(5, 18)),
    ("30 miles per hour", "30", (("length", 1), ("time", -1)), Fraction(1397, 3125)),
    ("\\frac{1}{2} \\text{ kg}", "\\frac{1}{2}", (("mass", 1),), Fraction(1000)),
])
def test_split_unit(value, number, quantity, size):
    assert answers.split_unit(value) == (number, (quantity, size))


@pytest.mark.parametrize("value", ["42 pages", "12", "x = 5 m", "3 \\text{ or } 4 m", "12 in total", "7 \\%"])
def test_no_unit_of_the_table(value):
    assert answers.split_unit(value) is None


def test_exact_unit_conversion():
    assert answers.in_unit("2", Fraction(1000)) == "2000"
    assert answers.in_unit("1", Fraction(1, 3)) == "\\frac{1}{3}"
    assert answers.in_unit("0.25", Fraction(1000)) == "250"
    assert answers.in_unit("\\frac{1}{2}", Fraction(1000)) == "\\left(\\frac{1}{2}\\right) \\cdot 1000"


def test_decimal_digits_grouped_in_threes():
    assert answers.canonical_number("6.283\\,185\\,3") == "6.2831853"
    assert answers.normalise_latex("6.283\\,185\\,3") == "6.2831853"


def test_an_fbox_answer_is_read_alike_by_the_reward_the_format_check_and_the_probes(tmp_path):
    """`\\fbox{42}` is a box to every reader: the format reward and the correctness reward pass it, and Phase 1's
    own question ("is there an answer at all?") finds 42 there, so no `correct_without_answer` flag is raised."""
    from finetune.inspect import flags
    from finetune.inspect.rewardmod import load_rewards
    from finetune.rewards.render import render_rewards
    from finetune.spec import load_spec

    (tmp_path / "spec.yaml").write_text(
        "name: fbox\nmodel: tiny\ndataset: {path: data.jsonl}\nrewards:\n"
        "  - {name: boxed_ok, type: format, pattern: boxed, weight: 0.2}\n"
        "  - {name: correct, type: exact_match, answer_column: answer, extract: boxed}\n", encoding="utf-8")
    spec = load_spec(tmp_path / "spec.yaml")
    render_rewards(spec, tmp_path)
    rm = load_rewards(tmp_path)
    text = "6 times 7 is 42, so the answer is \\fbox{42}."
    item = {"prompt": "6 x 7?", "completion": text, "columns": {"answer": "42"}}
    assert [rm.score(r, [item])[0] for r in rm.rewards] == [[1.0], [1.0]]
    assert answers.final_answer(text, "boxed") == "42" == answers.final_answers(text, "boxed")[0][0]
    row = {"id": "s0", "row": 0, "completion": text, "rewards": {"boxed_ok": 1.0, "correct": 1.0}, "errors": {}}
    found = flags.detect(rm, spec, [row], {}, {"probes": [], "controls": []}, None)
    assert "correct_without_answer:correct" not in {f["id"] for f in found}
    assert answers.final_answer("so the answer is 42.", "boxed") is None  # the flag still sees a missing box


@pytest.mark.parametrize("text, how, answer", [
    ("So \\(\\boxed{72}\\) clips.", "boxed", "72"),
    ("<think>\\boxed{3}</think> I give up.", "boxed", None),  # a box inside the reasoning is not the answer
    ("<think>still thinking \\boxed{3}", "boxed", None),  # an unclosed <think>: no answer at all
    ("\\boxed{}", "boxed", None),
    ("\\boxed{4", "boxed", None),  # cut off inside the box
    ("<answer> 12 </answer>", "answer_tag", "12"),
    ("<think>x</think>\n<answer>7</answer>", "think_answer", "7"),
    ("work\n#### 1,000", "hash_answer", "1,000"),
    ("So the answer is 19.", "answer_is", "19"),
    ("First 3, then\nfinally 17 apples", "last_number", "17"),
    ("no box but 5 at the end", "any", "5"),
    ("Here:\n```json\n{\"a\": 1}\n```", "json_object", "Here:\n```json\n{\"a\": 1}\n```"),
    ("not json", "json_object", None),
])
def test_final_answer_is_the_one_reader_phase_1_asks_whether_there_is_an_answer(text, how, answer):
    assert answers.final_answer(text, how) == answer


def test_json_payload_reads_the_answer_after_the_reasoning_within_its_limits():
    assert answers.json_payload('<think>{"a": 1}</think> sorry', "auto", 1000, 8) == (False, None)
    assert answers.json_payload('<answer>{"a": [1]}</answer>', "answer_tag", 1000, 8) == (True, {"a": [1]})
    assert answers.json_payload("[" * 50 + "]" * 50, "none", 1000, 8) == (False, None)  # too deep: not parsed
    assert answers.json_payload('{"a": "' + "x" * 2000 + '"}', "none", 1000, 8) == (False, None)  # too large


# ------------------------------------------------------------------ linear reading (same answers as before) --

_OLD_DELIMS = r"^(?:\$\$|\$|\\\(|\\\[)\s*|\s*(?:\$\$|\$|\\\)|\\\])$"  # the regex unwrap used (quadratic on spaces)
_OLD_HASH = r"^[ \t>*_]*####[ \t]*(.*?)[ \t]*$"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="$\\()[] x1\t\n", max_size=12))
def test_delimiters_are_stripped_as_the_regex_stripped_them(value):
    import re

    value = value.strip()  # unwrap strips before and after every pass
    assert answers._strip_delims(value).strip() == re.sub(_OLD_DELIMS, "", value).strip()


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="# \t>*_x1\n", max_size=20))
def test_hash_lines_read_as_the_regex_read_them(text):
    import re

    assert answers.hash_lines(text) == [(m.group(1), m.end()) for m in re.finditer(_OLD_HASH, text, re.M)]


def test_many_boxes_of_both_kinds_are_all_found_in_order():
    text = "\\fbox{1}\\boxed{2}" * 3000 + "\\boxed{3}"
    found, closed = answers.boxed(text)
    assert closed and [c for c, _ in found] == ["1", "2"] * 3000 + ["3"]


def test_units_are_read_on_values_of_unit_size_only():
    digits = "7" * answers.UNIT_VALUE_MAX
    assert answers.strip_units("42 pages") == "42" and answers.split_unit("2 km") is not None
    assert answers.strip_units(digits + " pages") == digits + " pages"  # a value longer than any unit answer
    assert answers.split_unit(digits + " km") is None
