"""The `python` reward kind: your own verifier, a function in a Python file of yours, in the common guard."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator

from finetune.rewards.kind import Gold, Reading, kind
from finetune.rewards.specs import RewardBase, Role


@kind("Your own verifier (`type: python`)", order=100, helpers=("sandbox",),
      reading=lambda r: Reading(), copies_verifier=True,
      columns=lambda r: [("columns", c) for c in r.columns],
      # what your function compares with is its own affair; the probes take the right answer from the dataset's
      # answer column
      gold=lambda r, dataset: Gold(dataset.answer_column, "answer", read=False) if dataset.answer_column else None,
      reasons={},
      fix="your verifier's function (the spec's `file`): it decides and logs no reason",
      remedies={"gold_answer_fails": "your verifier rejects the gold answer: fix its function (the file the "
                "spec's `file` names)"},
      example={"name": "sql_matches", "type": "python", "file": "sql_reward.py", "function": "sql_result_matches",
               "columns": ["schema", "expected"], "timeout_s": 5.0})
class PythonReward(RewardBase):
    """Your own verifier: a function in a Python file of yours, wrapped in the common guard.

    The renderer copies the file beside rewards.py as ``rewards_user_<name>.py`` (the gate binds its
    sha256: editing it voids a PASS). The function is called once per completion as
    ``function(completion, prompt=..., **columns)`` and returns a number in [0, 1] (or a bool), or
    None for "not applicable"; an exception, a value out of range or a call that overruns
    ``timeout_s`` gives None and is counted in ``rewards/<name>/errors``.
    """

    type: Literal["python"]
    file: str = Field(description="Python file holding the function (relative to the spec's folder).")
    function: str = Field(description="Name of the function to call in that file.")
    columns: list[str] = Field([], description="Dataset columns passed to the function as keyword arguments.")
    timeout_s: float = Field(10.0, gt=0, le=600, description="Deadline of one call; an overrun scores None.")
    allowed_roles: ClassVar[tuple[Role, ...]] = ("correctness", "format")

    @field_validator("function")
    @classmethod
    def _function_identifier(cls, v: str) -> str:
        if not v.isidentifier():
            raise ValueError(f"'{v}' is not a Python function name")
        return v

    @field_validator("file")
    @classmethod
    def _python_file(cls, v: str) -> str:
        if not v.endswith(".py"):
            raise ValueError("file must be a .py file")
        return v
