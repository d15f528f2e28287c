"""rewards_jsonmatch reads an amount's trailing currency code as before, without re-reading a long whitespace run
from every position inside it."""

from __future__ import annotations

import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from finetune.rewards.lib import rewards_jsonmatch


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="1 \tEURx.", max_size=14))
def test_the_currency_tail_is_removed_as_before(text):
    assert rewards_jsonmatch._CODE_TAIL.sub("", text) == re.sub(r"\s*[A-Z]{3}$", "", text)


def test_a_long_whitespace_run_is_read_at_once():
    start = time.process_time()
    rewards_jsonmatch._CODE_TAIL.sub("", "1" + " " * 100_000 + "x")
    assert time.process_time() - start < 1.0
