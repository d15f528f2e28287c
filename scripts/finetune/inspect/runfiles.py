"""Shapes of the run files `inspect score` writes, checked on every read.

A hand-edited or truncated scored.jsonl / score_report.json used to surface as a KeyError or
TypeError deep in the gate or the review. Readers validate here first: a file that does not have
the shape `inspect score` writes is bad input (one line naming file:line, exit 2). Extra keys are
allowed (the writer adds fields over time); the keys readers index must be there with the right type.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from finetune.errors import UserError

FIX = "re-run `finetune inspect score RUN` (never edit it by hand)"


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, use_attribute_docstrings=True)


class ScoredRow(_Open):
    id: str = Field(min_length=1)
    """the sample's id"""
    row: int | str
    """the dataset row it was sampled from"""
    completion: str
    """the completion (a rollout's canonical text)"""
    columns: dict[str, Any] = {}
    """the dataset columns the rewards read"""
    rewards: dict[str, float | None]
    """each reward's score (null: scoring failed, see `errors`)"""
    errors: dict[str, str] = {}
    """each failed reward's error"""
    passes: dict[str, bool]
    """each reward passes its threshold"""
    all_pass: bool
    """every format and correctness reward passes"""
    success: bool
    """the correctness rewards pass"""
    total: float
    """the weighted total, as TRL sums it"""
    flags: list[str] = []
    """the red flags this sample shows"""


class RewardStat(_Open):
    name: str
    """the reward"""
    role: str
    """`format`, `correctness` or `shaping`"""
    threshold: float | None
    """its pass threshold"""


class Flag(_Open):
    id: str = Field(min_length=1)
    """the red flag (references/diagnosis.md lists them)"""
    message: str
    """what it found, in one line"""
    sample_ids: list[str] = []
    """the samples that show it"""


class Probe(_Open):
    id: str
    """the probe's id"""
    probe: str
    """what it sends (a hack aimed at a role)"""
    passing: bool
    """a reward of the targeted role passes it (cannot be waived)"""
    passed_by: list[str] = []
    """the rewards that pass it"""


class ScoreReport(_Open):
    inputs: dict[str, str]
    """sha256 of the files scored (samples, rewards.py and its helpers)"""
    scored_sha256: str
    """sha256 of the scored.jsonl written in the same commit"""
    samples: int
    """samples scored"""
    rewards: list[RewardStat]
    """each reward's meta and statistics"""
    base_success: dict[str, Any]
    """the base model's success on the task"""
    flags: list[Flag]
    """the red flags raised"""
    probes: list[Probe]
    """every probe and whether a reward passed it"""


def _check(model: type[BaseModel], obj: Any, where: str, what: str) -> None:
    try:
        model.model_validate(obj)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(x) for x in err["loc"]) or "(top level)"
        raise UserError(f"{what}: {field}: {err['msg']}", where=where, fix=FIX) from None


def check_report(report: Any, path: Path) -> dict[str, Any]:
    _check(ScoreReport, report, str(path), "not a score report as `inspect score` writes it")
    checked: dict[str, Any] = report  # a dict now: ScoreReport validated it
    return checked


def check_scored(rows: list[tuple[int, Any]], path: Path) -> list[dict[str, Any]]:
    seen: dict[str, int] = {}
    for n, obj in rows:
        _check(ScoredRow, obj, f"{path}:{n}", "not a scored sample as `inspect score` writes it")
        if obj["id"] in seen:
            raise UserError(f"duplicate id '{obj['id']}' (first on line {seen[obj['id']]})", where=f"{path}:{n}",
                            fix=FIX)
        seen[obj["id"]] = n
    return [obj for _, obj in rows]
