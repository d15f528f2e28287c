"""literals.visible: the one display escape of every reading sheet — what a terminal or browser would act on or
not show is written as a mark, everything else as it is."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finetune.literals import MARK_CLOSE, MARK_OPEN, hidden_characters, marks_note, visible

ISSUE = "<answer>000</answer>\x1b[2K\r<answer>741</answer>\x1b[8m hidden"


@pytest.mark.parametrize("raw, shown", [
    (ISSUE, "<answer>000</answer>⟦ESC⟧[2K⟦CR⟧<answer>741</answer>⟦ESC⟧[8m hidden"),
    ("abc\u202edcba", "abc⟦RLO⟧dcba"),  # bidi override
    ("\u2066x\u2069 \u200e\u200f\u061c", "⟦LRI⟧x⟦PDI⟧ ⟦LRM⟧⟦RLM⟧⟦ALM⟧"),
    ("7\u200b4\u200d1\u200c\u2060\ufeff", "7⟦ZWSP⟧4⟦ZWJ⟧1⟦ZWNJ⟧⟦WJ⟧⟦BOM⟧"),  # zero-width
    ("a\x00b\x7fc", "a⟦NUL⟧b⟦DEL⟧c"), ("\x85\x9b\x90", "⟦NEL⟧⟦CSI⟧⟦U+0090⟧"),  # NUL, DEL, C1 controls
    ("12\r", "12⟦CR⟧"), ("line\r\nnext", "line⟦CR⟧\nnext"), ("a\x08b\x07", "a⟦BS⟧b⟦BEL⟧"),
    ("1\u00a0000\u3000x", "1⟦NBSP⟧000⟦U+3000⟧x"),  # spaces that are not a space
    ("\U000e0041\U000e0042", "⟦U+E0041⟧⟦U+E0042⟧"),  # tag characters (invisible text)
    ("a\u2028b\u2029", "a⟦LS⟧b⟦PS⟧"), ("x\ufe0f\u3164", "x⟦U+FE0F⟧⟦U+3164⟧"),
    ("⟦ESC⟧", "⟦U+27E6⟧ESC⟦U+27E7⟧"),  # a mark written by the model is not one of ours
    ("plain text,\ttabs and\nnewlines; café 中文 😀 ∑", "plain text,\ttabs and\nnewlines; café 中文 😀 ∑"),
])
def test_marks(raw, shown):
    assert visible(raw) == shown


@settings(max_examples=500, deadline=None)
@given(st.text())
def test_nothing_hidden_remains_and_every_mark_is_ours(text):
    shown = visible(text)
    outside = shown
    for name in hidden_characters(text):
        outside = outside.replace(f"{MARK_OPEN}{name}{MARK_CLOSE}", "")
    assert MARK_OPEN not in outside and MARK_CLOSE not in outside
    for ch in outside:
        assert ch in "\n\t " or unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs")


def test_the_note_counts_what_was_marked():
    assert marks_note("plain", "text\n") is None
    assert marks_note(ISSUE, "\u202e") == ("4 characters written as ⟦…⟧ marks (controls, invisible or "
                                           "direction-changing characters a terminal or browser would act on or "
                                           "hide): ESC ×2, CR, RLO")
