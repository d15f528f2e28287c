"""rewards_code's fence and output-label patterns read what the earlier ones read, without backtracking over a long
run (a line of 100,000 backticks or tildes, a label of repeated keywords before its colon)."""

from __future__ import annotations

import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from finetune.rewards.lib import rewards_code

_OLD_OPEN = re.compile(r"(`{3,}|~{3,})[ \t]*([A-Za-z0-9_+#.-]*)[ \t]*$")
_OLD_LABEL = re.compile(r"\b(output|outputs|prints?|printed|result|results|returns|expected|console|stdout|"
                        r"stdin|input|inputs)\b[^:\n]*:\s*(\*\*|__)?\s*$", re.I)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="`~ \tpy!", max_size=14))
def test_fence_openers_match_where_they_matched(line):
    old, new = _OLD_OPEN.search(line), rewards_code._OPEN.search(line)
    assert (old is None) == (new is None)
    if old and new:
        assert (old.start(), old.group(2)) == (new.start(), new.group(2))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["output", " ", ":", "*", "_", "x", "\n"]), max_size=10).map("".join))
def test_output_labels_match_where_they_matched(label):
    assert bool(_OLD_LABEL.search(label)) == bool(rewards_code._OUTPUT_LABEL.search(label))


def test_long_runs_are_read_at_once():
    start = time.process_time()
    rewards_code.fenced_blocks("~" * 100_000 + "x\n```\nprint(1)\n```")
    rewards_code._OUTPUT_LABEL.search(":" + " " * 100_000 + "x")
    assert time.process_time() - start < 1.0
