"""The demo's independent checker for the digit-copying task: the demo's READER, not a person.

Written apart from the reward templates on purpose (it shares no code with rewards.py): it reads the
digits to copy from the prompt text itself — not from the dataset's gold column — and judges a
completion the way the task statement defines it:

* well-formed: the completion ends with exactly one non-empty ``<answer>...</answer>`` block (only
  whitespace after it);
* correct: it is well-formed and the text inside the block, stripped, is exactly the digits of the
  prompt in the same order (``071`` is not ``71``: the task copies digits, it does not compute a number);
* accept: well-formed and correct.

Every verdict it produces says so: ``reader: independent checker (demo), not a person``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

READER_LABEL = "independent checker (demo), not a person"
OPEN, CLOSE = "<answer>", "</answer>"
_INSTRUCTION = re.compile(r"Copy the digits((?:\s+\d)+)\s*$")


@dataclass(frozen=True)
class Check:
    """The checker's reading of one completion."""

    well_formed: bool
    correct: bool
    expected: str | None
    note: str

    @property
    def accept(self) -> bool:
        return self.well_formed and self.correct


def prompt_user_text(prompt: Any) -> str:
    """The user's words from a plain-string or conversational prompt."""
    if isinstance(prompt, list):
        return " ".join(str(m.get("content", "")) for m in prompt if isinstance(m, dict) and m.get("role") == "user")
    return str(prompt)


def expected_digits(prompt: Any) -> str | None:
    """The digits the prompt asks to copy, read from its text (None when it is not this task's prompt)."""
    m = _INSTRUCTION.search(prompt_user_text(prompt).strip())
    return "".join(m.group(1).split()) if m else None


def _answer_block(completion: str) -> tuple[str | None, str]:
    """(content of the single final answer block, why not) — content None when the structure is wrong."""
    opens, closes = completion.count(OPEN), completion.count(CLOSE)
    if opens == 0 and closes == 0:
        return None, "no <answer> block"
    if opens != 1 or closes != 1:
        return None, f"{opens} opening and {closes} closing answer tags (need exactly one of each)"
    start, end = completion.index(OPEN), completion.index(CLOSE)
    if end < start:
        return None, "</answer> comes before <answer>"
    if completion[end + len(CLOSE):].strip():
        return None, "text after </answer>"
    content = completion[start + len(OPEN):end].strip()
    if not content:
        return None, "empty answer"
    return content, ""


def check(prompt: Any, completion: str, gold: Any = None) -> Check:
    """Judge ``completion`` for ``prompt``; ``gold`` (the dataset column) is only cross-checked."""
    expected = expected_digits(prompt)
    content, why = _answer_block(completion)
    if expected is None:
        return Check(content is not None, False, None, "prompt is not a 'Copy the digits' prompt")
    gold_note = "" if gold is None or str(gold) == expected else f"; dataset gold {gold!r} differs from the prompt"
    if content is None:
        return Check(False, False, expected, f"malformed: {why}{gold_note}")
    if content == expected:
        return Check(True, True, expected, f"copies {expected} exactly{gold_note}")
    if expected in content:
        return Check(True, False, expected, f"answer {content!r} contains {expected} but is not exactly it "
                                            f"(hedge or extra text){gold_note}")
    return Check(True, False, expected, f"answer {content!r} is not {expected}{gold_note}")
