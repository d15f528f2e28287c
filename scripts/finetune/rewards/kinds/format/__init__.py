"""The `format` reward kind: the required structure parses (binary)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from finetune.rewards.kind import READING_STYLES, Reading, kind, library_reasons
from finetune.rewards.specs import TRAILING_DOC, RewardBase, Role, Trailing


def _prefill_contradiction(r: FormatReward, opens_think: bool) -> tuple[str, str, str] | None:
    """A think_answer format reward whose prefilled_think contradicts the model's chat template (trl#6966)."""
    if r.pattern != "think_answer" or r.prefilled_think == opens_think:
        return None
    if opens_think:
        what = ("the model's chat template already opens <think> (trl#6966), so completions start "
                "inside it and this reward would score every completion 0")
    else:
        what = ("the model's chat template does not open <think>, so completions start with it and "
                "this reward would score every completion 0")
    return "prefilled_think", what, f"set prefilled_think: {str(opens_think).lower()}"


@kind("Format", order=10, helpers=("answers",),
      reading=lambda r: Reading(style=r.pattern, reads_answer=r.pattern in READING_STYLES,
                                trailing_forbidden=r.trailing_text == "forbid", prefilled_think=r.prefilled_think),
      columns=lambda r: [], gold=lambda r, dataset: None,
      reasons=library_reasons("answers", {
          "trailing_text": "`trailing_text: allow`",
          "no_container": "`pattern` (the structure the reward requires)",
          "several_values": "`pattern` (the tag layout is one `<answer>` block)"}),
      fix="`pattern` / `trailing_text` / `prefilled_think` (the structure the reward requires)",
      macro_args=lambda r, meta, planned: (), template_check=lambda r, opens: _prefill_contradiction(r, opens),
      example={"name": "format", "type": "format", "pattern": "think_answer", "weight": 0.2})
class FormatReward(RewardBase):
    """The required structure parses: tags, a final `\\boxed{}`, `#### N`, or a JSON object (binary)."""

    type: Literal["format"]
    pattern: Literal["answer_tag", "think_answer", "boxed", "hash_answer", "json_object"] = "answer_tag"
    prefilled_think: bool = Field(False, description="The chat template already opened `<think>` "
                                  "(trl#6966), so the completion starts inside it. Also assumed when a "
                                  "plain-text prompt ends with `<think>`.")
    trailing_text: Trailing = Field("allow", description=TRAILING_DOC)
    default_role: ClassVar[Role] = "format"
    allowed_roles: ClassVar[tuple[Role, ...]] = ("format",)
