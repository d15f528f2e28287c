"""The `math` reward kind: math-verify equivalence with the gold answer, in worker processes."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from finetune.rewards.kind import Gold, Reading, Reason, kind, library_reasons
from finetune.rewards.specs import CONTAINERS, READING_PROBES, TRAILING_DOC, RewardBase, Trailing


@kind("Math correctness (math-verify)", order=30, helpers=("answers", "mathpool"),
      reading=lambda r: Reading(style=r.extract if r.extract in CONTAINERS else None, extract=r.extract,
                                reads_answer=True, trailing_forbidden=r.trailing_text == "forbid"),
      columns=lambda r: [("answer_column", r.answer_column)],
      gold=lambda r, dataset: Gold(r.answer_column, "answer"),
      reasons={**library_reasons("answers", {"trailing_text": "`trailing_text: allow`",
                                             "no_container": "`extract` (where the final answer is)"}),
               "not_equal": Reason("the final answer is not equivalent to the gold answer"),
               "no_gold": Reason("the row has no gold answer (not applicable)", "`answer_column`"),
               "unusable_gold": Reason("no reading of the gold answer accounts for all of it (not applicable)",
                                       "`answer_column` (a column whose gold answers parse)"),
               "timeout": Reason("scoring ran past its deadline", "`timeout_s`")},
      fix="`extract` (where the answer is) or `answer_column`",
      remedies={"gold_answer_fails": "`extract`, or `answer_column` (a gold math-verify parses)"},
      packages=("math-verify==0.9.0", "latex2sympy2_extended==1.11.0"), probes=READING_PROBES,
      example={"name": "math_correct", "type": "math", "answer_column": "solution", "extract": "boxed",
               "timeout_s": 2.0, "workers": 2})
class MathReward(RewardBase):
    """math-verify equivalence with the gold answer, in worker processes with per-item deadlines."""

    type: Literal["math"]
    answer_column: str = Field("answer", description="Column holding the gold answer (LaTeX or plain).")
    extract: Literal["boxed", "answer_tag", "hash_answer", "answer_is", "any"] = Field(
        "any", description="boxed: the last `\\boxed{}`; answer_tag: the last `<answer>` block; hash_answer: the "
        "`#### N` line; answer_is: the last 'the answer is X' sentence; any: the first of those present, else "
        "math-verify searches the whole completion.")
    trailing_text: Trailing = Field("allow", description=TRAILING_DOC)
    timeout_s: float = Field(2.0, gt=0, le=600, description="Deadline per completion (parse + verify).")
    workers: int = Field(2, ge=1, le=64, description="Worker processes running math-verify.")
