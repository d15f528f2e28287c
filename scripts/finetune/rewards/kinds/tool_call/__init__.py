"""The `tool_call` reward kind: the model's tool call matches the row's expected call."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from finetune.fieldtypes import STRICT_MODEL
from finetune.rewards.kind import Gold, Reading, kind, library_reasons
from finetune.rewards.specs import PARTIAL_CEILING, RewardBase


def _columns(r: ToolCallReward) -> list[tuple[str, str]]:
    named = (("expected_column", r.expected_column), ("tools_column", r.tools_column))
    return [(field, column) for field, column in named if column]


class ArgumentRule(BaseModel):
    """How one argument's value is compared with the expected one."""

    model_config = STRICT_MODEL
    match: Literal["exact", "numeric", "text", "unordered"] = Field(
        "exact", description="exact: equal JSON values (3 = 3.0); numeric: within `tolerance`; text: equal after "
        "Unicode normalisation, whitespace collapse and casefold; unordered: the same list items in any order.")
    tolerance: float = Field(0.0, ge=0, description="match numeric: relative and absolute tolerance.")


@kind("Tool call", order=70, helpers=("toolcall",), stdlib=("json",), packages=("jsonschema==4.26.0",),
      reading=lambda r: Reading(agent=True, call_format=r.format),
      columns=lambda r: _columns(r), gold=lambda r, dataset: Gold(r.expected_column, "call"),
      reasons=library_reasons("toolcall", {
          "several_calls": "`which: last` (the final call after reasoning is the answer)",
          "no_expected": "`expected_column` (the row's expected call)",
          "not_equal": "`arguments.<name>` (exact | numeric with tolerance | text | unordered)"}),
      fix="`arguments` (each argument's rule: exact / numeric with tolerance / text / unordered), "
      "`format` (the chat template's call syntax), `which` (only / last call), `tools` / `tools_column` (the schema)",
      probes=("right_function_wrong_arguments", "call_inside_think", "answer_without_call"),
      example={"name": "tool_ok", "type": "tool_call", "expected_column": "expected_call", "tools_column": "tools",
               "arguments": {"city": {"match": "text"}, "days": {"match": "numeric", "tolerance": 0}},
               "partial_credit": True, "threshold": 1.0})
class ToolCallReward(RewardBase):
    """The model's tool call (chat-template format) matches the row's expected call: name, schema, values."""

    type: Literal["tool_call"]
    expected_column: str = Field("expected_call", description="Column holding the expected call "
                                 "`{name, arguments}` (or its JSON text, or a list of acceptable calls).")
    tools_column: str | None = Field(None, description="Column holding the row's tool definitions "
                                     "(OpenAI format: `[{type: function, function: {name, parameters}}]`).")
    tools: list[dict[str, Any]] | None = Field(None, description="Tool definitions for every row instead.")
    format: Literal["auto", "hermes", "llama3", "mistral"] = Field(
        "auto", description="How calls are written in text: hermes `<tool_call>` blocks (Qwen's JSON or Qwen3.5's "
        "XML), llama3 bare JSON, mistral `[TOOL_CALLS]`; auto: the first present. TRL's parsed `tool_calls` are "
        "read first.")
    which: Literal["only", "last"] = Field("only", description="only: exactly one call is expected; last: the "
                                           "last call is judged (earlier calls, e.g. look-ups, allowed).")
    arguments: dict[str, ArgumentRule] = Field({}, description="Per-argument comparison rule (default exact).")
    partial_credit: bool = Field(False, description="The right function with schema-valid arguments earns "
                                 "PARTIAL_CEILING × the share of equal arguments.")

    @model_validator(mode="after")
    def _one_tools_source(self) -> ToolCallReward:
        if self.tools is not None and self.tools_column is not None:
            raise ValueError("give at most one of 'tools' (inline) or 'tools_column'")
        for tool in self.tools or []:
            params = (tool.get("function") or tool).get("parameters") if isinstance(tool, dict) else None
            if params is not None:
                import jsonschema

                try:
                    jsonschema.validators.validator_for(params).check_schema(params)
                except jsonschema.SchemaError as exc:
                    raise ValueError(f"tool parameters are not a valid JSON Schema: {exc.message}") from None
        return self

    @property
    def has_partial_credit(self) -> bool:
        return self.partial_credit

    @property
    def argument_rules(self) -> dict[str, dict[str, Any]]:
        """The per-argument rules as plain data (rendered into rewards.py as a JSON literal)."""
        return {name: rule.model_dump() for name, rule in self.arguments.items()}

    def pass_gap(self) -> float:
        return self.max_score * (1 - PARTIAL_CEILING) if self.partial_credit else self.max_score
