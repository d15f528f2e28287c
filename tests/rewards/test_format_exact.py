"""Format and exact-match rewards: structure, extraction, normalisation, hedging, adversarial input."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ADVERSARIAL = st.one_of(
    st.text(),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1),  # lone surrogates
    st.text(alphabet="<>/answerthink{}\\boxed#$ \n`0123456789,.", max_size=300),
    st.none(),
)


@pytest.fixture(scope="module")
def mod(tmp_path_factory):
    from reward_helpers import render_module

    return render_module([
        {"name": "format", "type": "format", "pattern": "answer_tag", "weight": 0.5},
        {"name": "think_fmt", "type": "format", "pattern": "think_answer", "weight": 0.5},
        {"name": "prefilled_fmt", "type": "format", "pattern": "think_answer", "prefilled_think": True},
        {"name": "boxed_fmt", "type": "format", "pattern": "boxed"},
        {"name": "hash_fmt", "type": "format", "pattern": "hash_answer"},
        {"name": "json_fmt", "type": "format", "pattern": "json_object"},
        {"name": "strict_tag", "type": "format", "pattern": "answer_tag", "trailing_text": "forbid"},
        {"name": "strict_boxed", "type": "format", "pattern": "boxed", "trailing_text": "forbid"},
        {"name": "strict_hash", "type": "format", "pattern": "hash_answer", "trailing_text": "forbid"},
        {"name": "correct", "type": "exact_match"},
    ], tmp_path_factory.mktemp("fmt"))


@pytest.fixture(scope="module")
def ungated(tmp_path_factory):
    from reward_helpers import render_module

    return render_module([
        {"name": "tag", "type": "exact_match", "extract": "answer_tag",
         "normalize": ["strip", "whitespace", "case", "numeric", "punct"]},
        {"name": "boxed", "type": "exact_match", "extract": "boxed"},
        {"name": "hashed", "type": "exact_match", "extract": "hash_answer"},
        {"name": "last", "type": "exact_match", "extract": "last_number"},
        {"name": "whole", "type": "exact_match", "extract": "none", "normalize": ["strip"]},
    ], tmp_path_factory.mktemp("exact"))


def one(func, completion, prompt="Q", **cols):
    return func(prompts=[prompt], completions=[completion], **{k: [v] for k, v in cols.items()})[0]


@pytest.mark.parametrize("text, expected", [
    ("reasoning <answer>42</answer>", 1.0),
    ("<answer>42</answer>\n  ", 1.0),
    ("<answer></answer>", 0.0),  # empty answer is malformed
    ("<answer>  </answer>", 0.0),
    ("<answer>1</answer><answer>2</answer>", 0.0),
    ("<answer>42</answer> trailing text", 1.0),  # prose after the answer is how instruct models write
    ("<answer>42", 0.0),
    ("<answer><answer>4</answer>", 0.0),
    ("42", 0.0),
    ("", 0.0),
])
def test_answer_tag_format(mod, text, expected):
    assert one(mod.format, text) == expected


@pytest.mark.parametrize("text, prompt, prefilled, expected", [
    ("<think>hmm</think><answer>4</answer>", "Q", False, 1.0),
    ("  <think>\nhmm\n</think>\n<answer>4</answer>", "Q", False, 1.0),
    ("hmm</think><answer>4</answer>", "Q", False, 0.0),   # no opening tag and not pre-filled
    ("hmm</think><answer>4</answer>", "Q", True, 1.0),    # trl#6966: template opened <think>
    ("hmm</think><answer>4</answer>", "Q <think>", False, 1.0),  # detected from a plain-text prompt
    ("<think>a</think><think>b</think><answer>4</answer>", "Q", False, 0.0),
    ("<think>a</think>text<answer>4</answer>", "Q", False, 0.0),
    ("<think>a<answer>4</answer>", "Q", False, 0.0),
    ("<think>x</think><answer>4</answer>", "Q", True, 0.0),  # pre-filled: a second <think> is nesting
])
def test_think_answer_format(mod, text, prompt, prefilled, expected):
    func = mod.prefilled_fmt if prefilled else mod.think_fmt
    assert one(func, text, prompt=prompt) == expected


def test_prefilled_conversational_prompt(mod):
    prompt = [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "<think>"}]
    assert one(mod.think_fmt, [{"role": "assistant", "content": "x</think><answer>1</answer>"}], prompt=prompt) == 1.0


@pytest.mark.parametrize("func, text, expected", [
    ("boxed_fmt", "so $\\boxed{\\frac{1}{2}}$.", 1.0),
    ("boxed_fmt", "\\boxed{}", 0.0),
    ("boxed_fmt", "\\boxed{3} and then more words", 1.0),  # trailing_text: allow (default)
    ("boxed_fmt", "Therefore, Natalia sold \\(\\boxed{72}\\) clips in April and May.", 1.0),
    ("boxed_fmt", "**\\boxed{72}**\n\nI hope it is correct.", 1.0),
    ("boxed_fmt", "\\boxed{3", 0.0),
    ("boxed_fmt", "\\boxed{3} and \\boxed{4", 0.0),  # the last box never closes (truncated)
    ("strict_boxed", "\\boxed{3} and then more words", 0.0),
    ("strict_boxed", "so $\\boxed{3}$.", 1.0),
    ("strict_tag", "<answer>42</answer> trailing text", 0.0),
    ("strict_tag", "<answer>42</answer>\n", 1.0),
    ("hash_fmt", "work\n#### 72", 1.0),
    ("hash_fmt", "#### 1\n#### 2", 1.0),  # structure holds; correctness refuses the two values
    ("hash_fmt", "#### 72\nmore", 1.0),
    ("hash_fmt", "work\n####\n", 0.0),
    ("strict_hash", "#### 72\nmore", 0.0),
    ("strict_hash", "work\n#### 72", 1.0),
    ("json_fmt", '{"a": 1}', 1.0),
    ("json_fmt", 'text\n```json\n{"a": [1, 2]}\n```\n', 1.0),
    ("json_fmt", "[1, 2]", 0.0),
    ("json_fmt", '{"a": 1', 0.0),
    ("json_fmt", "[" * 100_000, 0.0),  # deep nesting is refused before json.loads
])
def test_other_formats(mod, func, text, expected):
    assert one(getattr(mod, func), text) == expected


def test_conversational_and_none_completions(mod, ungated):
    completions = [[{"role": "assistant", "content": "<answer>7</answer>"}],
                   [{"role": "assistant", "content": [{"type": "text", "text": "<answer>7</answer>"}]}],
                   None, "", [{"role": "user", "content": "<answer>7</answer>"}]]
    assert mod.format(prompts=["Q"] * 5, completions=completions) == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert ungated.tag(prompts=["Q"] * 5, completions=completions, answer=["7"] * 5) == [1.0, 1.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("func, text, gold, expected", [
    ("tag", "<answer>1,000</answer>", "1000", 1.0),
    ("tag", "<answer>1000.0</answer>", "1,000", 1.0),
    ("tag", "<answer> The  Cat. </answer>", "the cat", 1.0),
    ("tag", "<answer>(B)</answer>", "B", 1.0),
    ("tag", "<answer>A or B or C</answer>", "A", 0.0),  # Visual-RFT#176: hedging
    ("tag", "<answer>A, B, C, D</answer>", "B", 0.0),   # every option listed
    ("tag", "<answer></answer>", "", None),             # empty gold: not applicable
    ("tag", "<answer></answer>", "A", 0.0),             # empty answer
    ("tag", "<answer>4</answer><answer>5</answer>", "5", 0.0),  # two different answers
    ("tag", "<answer>5</answer> and again <answer> 5 </answer>", "5", 1.0),
    ("tag", "<answer>5</answer>", None, None),           # open-r1#86: unparseable gold → None
    ("tag", "<answer>5</answer>", ["4", "5"], 1.0),      # list of acceptable answers
    ("tag", "<answer>-0</answer>", "0", 1.0),
    ("tag", "<answer>0.50</answer>", ".5", 1.0),
    ("boxed", "\\boxed{1} wait \\boxed{2}", "2", 0.0),
    ("boxed", "thus \\boxed{12}", 12, 1.0),
    ("boxed", "Natalia sold $\\boxed{72}$ clips altogether.", "72", 1.0),
    ("boxed", "\\boxed{12 \\text{ or } 13}", "12", 0.0),       # hedge inside \text{}
    ("boxed", "\\boxed{13 \\text{ (or 14)}}", "13", 0.0),      # parenthetical alternative
    ("boxed", "\\boxed{7}\n\nNo wait, it is 6.", "7", 0.0),   # retraction after the box
    ("boxed", "\\boxed{3\\,600}", "3600", 1.0),               # thin-space thousands
    ("boxed", "\\boxed{3{,}600}", "3,600", 1.0),
    ("boxed", "\\boxed{3.6e3}", "3600", 1.0),
    ("boxed", "\\boxed{３６００}", "3600", 1.0),                  # full-width digits
    ("boxed", "\\boxed{5} and again \\boxed{5.0}", "5", 1.0),  # the same value twice is fine
    ("tag", "<answer>yes/no</answer>", "yes/no", 1.0),         # a gold that itself names alternatives
    ("tag", "<answer>yes/no</answer>", "yes", 0.0),
    ("hashed", "steps\n#### 1,234", "1234", 1.0),
    ("last", "we get 3 then 4\nso 17", "17", 1.0),
    ("last", "it is 3 or 4", "4", 0.0),  # hedged final line
    ("last", "no numbers", "4", 0.0),
    ("whole", " yes ", "yes", 1.0),
])
def test_exact_match(ungated, func, text, gold, expected):
    assert one(getattr(ungated, func), text, answer=gold) == expected


def test_exact_match_is_gated_on_format(render):
    # A right answer in a malformed completion earns no correctness credit in a composite.
    mod = render([{"name": "format", "type": "format", "pattern": "think_answer"},
                  {"name": "correct", "type": "exact_match"}])
    assert one(mod.correct, "<think>x</think><answer>4</answer>", answer="4") == 1.0
    assert one(mod.correct, "<answer>4</answer>", answer="4") == 0.0  # the format reward fails
    assert one(mod.correct, "<answer>4</answer>", answer=None) is None


def test_missing_column_gives_none_and_logs_errors(mod):
    logged = []
    with pytest.warns(UserWarning, match="column 'answer'"):
        scores = mod.correct(prompts=["Q", "Q"], completions=["a", "b"], log_metric=lambda k, v: logged.append((k, v)))
    assert scores == [None, None]
    assert logged == [("rewards/correct/errors", 2.0)]


def test_megabyte_inputs_are_fast(mod, ungated):
    import time

    huge = ["<answer>" * 125_000, "x" * 1_000_000 + "<answer>1</answer>", "\\boxed{" * 100_000,
            "```\n" * 250_000, "1," * 500_000]
    start = time.perf_counter()
    for func in (mod.format, mod.think_fmt, mod.boxed_fmt, mod.hash_fmt, mod.json_fmt):
        assert all(s in (0.0, 1.0) for s in func(prompts=["Q"] * 5, completions=huge))
    for func in (ungated.tag, ungated.boxed, ungated.hashed, ungated.last, ungated.whole):
        assert all(s in (0.0, 1.0) for s in func(prompts=["Q"] * 5, completions=huge, answer=["1"] * 5))
    assert time.perf_counter() - start < 10  # linear parsing: a quadratic regex would take minutes


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=ADVERSARIAL, gold=st.one_of(st.none(), st.text(max_size=20), st.integers()))
def test_never_raises_and_stays_in_range(mod, ungated, text, gold):
    for func in (mod.format, mod.think_fmt, mod.prefilled_fmt, mod.boxed_fmt, mod.hash_fmt, mod.json_fmt,
                 mod.strict_tag, mod.strict_boxed, mod.strict_hash):
        assert one(func, text) in (0.0, 1.0)
    for func in (mod.correct, ungated.tag, ungated.boxed, ungated.hashed, ungated.last, ungated.whole):
        assert one(func, text, answer=gold) in (0.0, 1.0, None)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(-10**12, 10**12))
def test_numeric_spellings_match(ungated, n):
    for spelling in (str(n), f"{n:,}", f"{n}.0", f"{n}.000"):
        assert one(ungated.tag, f"<answer>{spelling}</answer>", answer=str(n)) == 1.0
    assert one(ungated.tag, f"<answer>{n + 1}</answer>", answer=str(n)) == 0.0


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(gold=st.text(alphabet=st.characters(blacklist_characters="<>", blacklist_categories=("Cs",)), min_size=1,
                    max_size=30).filter(lambda s: any(c.isalnum() for c in s)),  # punctuation-only gold is unusable
       other=st.text(alphabet="abcxyz0123456789", min_size=1, max_size=10))
def test_gold_scores_one_and_hedges_score_zero(mod, ungated, gold, other):
    assert one(ungated.tag, f"<answer>{gold}</answer>", answer=gold) == 1.0
    if one(ungated.tag, f"<answer>{other}</answer>", answer=gold) == 0.0:
        assert one(ungated.tag, f"<answer>{gold}</answer><answer>{other}</answer>", answer=gold) == 0.0
        assert one(ungated.tag, f"<answer>{gold} or {other}</answer>", answer=gold) == 0.0
