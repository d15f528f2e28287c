"""The `exact_match` reward kind: the last extracted answer equals the gold answer after normalisation."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from finetune.rewards.kind import Gold, Reading, Reason, kind, library_reasons
from finetune.rewards.specs import CONTAINERS, READING_PROBES, TRAILING_DOC, Extract, RewardBase, Trailing


@kind("Exact-match correctness", order=20, helpers=("answers",), stdlib=("re",),
      reading=lambda r: Reading(style=r.extract if r.extract in CONTAINERS else None,
                                extract=None if r.extract == "none" else r.extract, reads_answer=True,
                                trailing_forbidden=r.trailing_text == "forbid"),
      columns=lambda r: [("answer_column", r.answer_column)],
      gold=lambda r, dataset: Gold(r.answer_column, "answer"),
      reasons={**library_reasons("answers", {"trailing_text": "`trailing_text: allow`",
                                             "no_container": "`extract` (where the final answer is)"}),
               "not_equal": Reason("the final answer differs from the gold answer",
                                   "`normalize` (what counts as equal), or `type: math` (equivalent expressions)"),
               "no_gold": Reason("the row has no gold answer (not applicable)", "`answer_column`")},
      fix="`extract` (where the answer is) and `normalize` (what counts as equal)",
      remedies={"gold_answer_fails": "`extract` (where the answer is), `normalize`, or `answer_column`"},
      probes=READING_PROBES,
      example={"name": "correctness", "type": "exact_match", "answer_column": "answer",
               "extract": "answer_tag", "normalize": ["strip", "whitespace", "numeric"]})
class ExactMatchReward(RewardBase):
    """The last extracted answer equals the gold answer after normalisation (binary)."""

    type: Literal["exact_match"]
    answer_column: str = Field("answer", description="Column holding the gold answer (or a list of them).")
    extract: Extract = Field("answer_tag", description="Where the final answer is: the last `<answer>` block, "
                             "`\\boxed{}`, `#### N` line, 'the answer is X' sentence, last number on the final "
                             "line, or the whole text.")
    trailing_text: Trailing = Field("allow", description=TRAILING_DOC)
    normalize: list[Literal["strip", "whitespace", "case", "numeric", "punct"]] = Field(
        ["strip", "whitespace", "numeric"], description="Applied to answer and gold alike: strip ends, collapse "
        "whitespace, casefold, numbers (1,000 = 1000 = 1000.0), surrounding punctuation/brackets.")
