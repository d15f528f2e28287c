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
    model_config = ConfigDict(extra="allow", strict=True)


class ScoredRow(_Open):
    id: str = Field(min_length=1)
    row: int | str
    completion: str
    columns: dict[str, Any] = {}
    rewards: dict[str, float | None]
    errors: dict[str, str] = {}
    passes: dict[str, bool]
    all_pass: bool
    success: bool
    total: float
    flags: list[str] = []


class RewardStat(_Open):
    name: str
    role: str
    threshold: float | None


class Flag(_Open):
    id: str = Field(min_length=1)
    message: str
    sample_ids: list[str] = []


class Probe(_Open):
    id: str
    probe: str
    passing: bool
    passed_by: list[str] = []


class ScoreReport(_Open):
    inputs: dict[str, str]
    scored_sha256: str
    samples: int
    rewards: list[RewardStat]
    base_success: dict[str, Any]
    flags: list[Flag]
    probes: list[Probe]


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
