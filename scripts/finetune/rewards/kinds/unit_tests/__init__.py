"""The `unit_tests` reward kind: the completion's code passes the row's tests in the sandbox."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from finetune.rewards.kind import CodeTests, Gold, Reading, Reason, kind, library_reasons
from finetune.rewards.specs import PARTIAL_CEILING, RewardBase


def _columns(r: UnitTestReward) -> list[tuple[str, str]]:
    named = (("tests_column", r.tests_column), ("hidden_tests_column", r.hidden_tests_column),
             ("entry_point_column", r.entry_point_column), ("test_format_column", r.test_format_column),
             ("compare_column", r.compare_column), ("checker_column", r.checker_column),
             ("time_limit_column", r.time_limit_column), ("memory_limit_column", r.memory_limit_column))
    return [(field, column) for field, column in named if column]


@kind("Unit-test execution", order=60, stdlib=("dataclasses", "json"), helpers=("sandbox", "code"),
      reading=lambda r: Reading(style="code", tests=CodeTests(r.tests_column, r.test_format, r.hidden_tests_column,
                                                              r.entry_point_column, r.test_format_column)),
      columns=lambda r: _columns(r),
      # it runs tests, not a gold answer; the answer probes take one from the dataset's answer column
      gold=lambda r, dataset: Gold(dataset.answer_column, "answer", read=False) if dataset.answer_column else None,
      reasons={**library_reasons("code", {
          "no_entry_point": "`entry_point_column` (the function the tests call)",
          "unusable_tests": "`tests_column` / `hidden_tests_column` / `test_format`",
          "no_code": "`extract` / `code_blocks` (where the code is)"}),
          "timeout": Reason("the code ran past its deadline", "`timeout_s` / `time_limit_column`"),
          # a false positive of a code reward: wrong code that every test of its row passes
          "ok": Reason("the code passed every test its row has (visible and hidden)",
                       "stronger hidden tests: add cases this code fails to `hidden_tests_column` (edge cases, large "
                       "inputs; run a correct solution on them for the expected output), then re-score")},
      fix="`tests_column` / `hidden_tests_column` / `test_format` / `extract` / `code_blocks`",
      example={"name": "tests_pass", "type": "unit_tests", "tests_column": "test_list", "test_format": "assert",
               "timeout_s": 5.0})
class UnitTestReward(RewardBase):
    """The completion's code passes the row's tests in the sandbox (fraction passed, or all-or-nothing)."""

    type: Literal["unit_tests"]
    tests_column: str = Field("tests", description="Column holding the row's tests (list, dict or JSON text).")
    test_format: Literal["stdin_stdout", "function_call", "assert"] = Field(
        "assert", description="assert: MBPP test_list / HumanEval test source; stdin_stdout: "
        "[{input, output}] or APPS {inputs, outputs}; function_call: [{args, kwargs, expected}].")
    test_format_column: str | None = Field(None, description="Column naming the row's own test_format (empty: "
                                           "test_format): one reward for a mixed set of stdin/stdout and "
                                           "function tasks. A value outside the three makes the row not "
                                           "applicable.")
    hidden_tests_column: str | None = Field(None, description="Column holding tests never shown in the "
                                            "prompt (same format as tests_column); they join the visible tests in "
                                            "scoring, so hard-coding the prompt's examples fails.")
    entry_point_column: str | None = Field(None, description="Column naming the function to call "
                                              "(function_call; optional for assert: default, the "
                                              "functions the tests call).")
    extract: Literal["fenced", "answer_tag", "none"] = Field("fenced", description="fenced: the code blocks "
                                                              "(unfenced code when there is no fence); answer_tag: "
                                                              "those inside the last <answer>; none: the whole text.")
    code_blocks: Literal["all", "final"] = Field("all", description="all: every code block in order (helpers "
                                                 "in other blocks count, the last definition wins); final: only "
                                                 "the last block that defines the entry point (for prompts that ask "
                                                 "for one complete block).")
    all_or_nothing: bool = Field(False, description="1.0 only when every test passes, else 0 (default: "
                                 "PARTIAL_CEILING × fraction passed).")
    compare: Literal["lines", "exact", "tokens", "float", "unordered_lines"] = Field(
        "lines", description="How stdout is checked (stdin_stdout): lines: trailing whitespace and trailing blank "
        "lines ignored; exact; tokens: whitespace-separated tokens; float: tokens, numbers equal within "
        "float_abs_tol or float_rel_tol; unordered_lines: the lines in any order.")
    float_abs_tol: float = Field(1e-6, ge=0, description="Absolute tolerance of compare: float.")
    float_rel_tol: float = Field(1e-6, ge=0, description="Relative tolerance of compare: float.")
    compare_column: str | None = Field(None, description="Column naming the row's own check (one of compare's "
                                       "values; empty: compare): a mixed set where some problems take floats or "
                                       "any line order. A value outside them makes the row not applicable.")
    checker_column: str | None = Field(None, description="Column holding the row's special judge (Python source; "
                                       "empty: compare), for problems with several valid outputs: it runs in the "
                                       "sandbox after each run, reads {input, expected, output} as JSON on stdin "
                                       "and exits 0 (accepted), 1 (wrong answer) or 2 (presentation error); any "
                                       "other end is a sandbox error (None), never a 0.")
    time_limit_column: str | None = Field(None, description="Column holding the problem's time limit in seconds "
                                          "(0 < t <= 600; empty: timeout_s): one execution's limit, as timeout_s.")
    memory_limit_column: str | None = Field(None, description="Column holding the problem's memory limit in MB "
                                            "(empty: memory_mb): the address space of one execution, as memory_mb "
                                            "(the interpreter takes its share of it).")
    timeout_s: float = Field(5.0, gt=0, le=600, description="Wall-clock limit of one execution.")
    memory_mb: int = Field(512, gt=0, description="Address-space limit of one execution.")
    workers: int | None = Field(None, ge=1, le=128, description="Parallel executions per process (default: sized "
                                "from the host's CPUs and the training processes sharing them, through "
                                "FINETUNE_SANDBOX_WORKERS, which the rendered train.py sets: outside rewards.py, so "
                                "another host never voids the gate; else one per CPU, at most 128).")
    min_isolation: Literal["namespaces", "unprivileged", "process"] = Field(
        "namespaces", description="Refuse to run untrusted code on a host that grants less isolation.")

    @model_validator(mode="after")
    def _stdout_checks(self) -> UnitTestReward:
        stdin_rows = self.test_format == "stdin_stdout" or self.test_format_column
        if not stdin_rows and (self.compare != "lines" or self.compare_column or self.checker_column):
            raise ValueError("compare / compare_column / checker_column check a program's stdout: use "
                             "test_format: stdin_stdout, or drop them")
        return self

    @property
    def has_partial_credit(self) -> bool:
        return not self.all_or_nothing

    def pass_gap(self) -> float:
        return self.max_score * (1 - PARTIAL_CEILING) if not self.all_or_nothing else self.max_score
