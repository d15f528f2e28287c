"""gate.json as the model it is validated into (the gate-record contract), passed between modules as such.

``inspect gate`` builds a :class:`GateRecord` and writes it; every reader (``verify_gate`` and through it config
render, data filter, status, the checkpoint comparison, the demo) loads it with :func:`load_record`, which
refuses a record of another schema version in one line: a record written before the version it carries now
asks for a new gate (``finetune inspect gate RUN``), never a guess at its old shape. A change to what gate.json
holds bumps :data:`SCHEMA_VERSION`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from finetune import jsonio
from finetune.errors import UserError
from finetune.inspect.verdicts import Confirmation

# 2: the person's acts are signed (verdict lines, confirmation, acks), verdicts.jsonl keeps its history and the
# record says which path each verdict took, which earlier verdicts were replaced and where the samples came from.
# 3: the hashes bind the spec's inspection section (spec:inspection).
SCHEMA_VERSION = 3


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Disagreement(_Part):
    """A reward and a verdict that disagree on one sample (role-wise: `verdicts.compare`)."""

    id: str
    field: str
    kind: Literal["false_positive", "false_negative"]
    rewards: list[str]
    scores: dict[str, float | None]
    thresholds: dict[str, float | None]
    note: str = ""
    reader: str
    why: dict[str, str | None] | None = None  # the reward's reason per row (a checkpoint set's comparison)


class Cause(_Part):
    """Disagreements grouped by kind, reward and the reason the reward logged (`gate.group_causes`)."""

    kind: str
    reward: str
    reason: str
    count: int
    examples: list[str]
    text: str
    fix: str
    summary: str


class GatedAgreement(_Part):
    id: str
    reward: str
    score: float | None
    note: str


class Counts(_Part):
    scored: int
    read: int
    min_read: int
    stale_verdicts: int
    agreed: int
    disagreements: int
    gated_agreements: int
    human: int
    agent: int
    replaced: int = 0  # earlier verdicts on the samples read that a later one replaced (history)


class Blind(_Part):
    """Whether the reading was blind (reveals.json + the verdicts; `readingset.blind_record`)."""

    revealed: int
    judged_after_reveal: list[str]
    changed_after_reveal: list[str]
    reading: Literal["first", "fresh"]
    reading_read: int
    reading_blind: bool
    after_reveal: list[str]
    earlier_reward: list[str]
    earlier_readings: int
    statement: str
    mirrors_rewards: bool


class Paths(_Part):
    """Which path each counted verdict was recorded through: a person's signed path or the agent's."""

    counts: dict[str, int]
    ids: dict[str, list[str]]
    human_declared_not_established: list[str] = Field(
        description="ids whose verdict says `human` (or names a person's path) without the person's signature")


class HistoryEntry(_Part):
    """One recorded verdict on a sample (verdicts.jsonl only grows)."""

    accept: bool
    correct: bool | None = None
    well_formed: bool | None = None
    reader: str
    via: str | None
    by: str | None = None
    time: str | None
    person: bool = Field(description="a person's verdict (signed on a person's path)")
    counts: bool = Field(description="the verdict the gate counts for this sample")
    disagreed: list[str] = Field(default_factory=list, description="the rewards it disagreed with (kind:field:reward)")


class Replaced(_Part):
    """A sample whose recorded verdicts changed: every verdict in order, and the disagreements that were replaced."""

    id: str
    verdicts: list[HistoryEntry]
    replaced_disagreements: list[str] = Field(default_factory=list)


class Samples(_Part):
    """Where the samples read came from: this plugin's sampler, or an import (the file, and whether the agent's
    tools could have written it)."""

    source: Literal["sampled", "imported", "unknown"]
    file: str | None = None
    sha256: str | None = None
    agent_writable: bool | None = None


class GateRecord(BaseModel):
    """gate.json (the gate-record contract). A FAIL written because the re-score could not run carries only the
    status, reasons, versions and time."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[3] = 3  # SCHEMA_VERSION
    status: Literal["PASS", "FAIL"]
    reasons: list[str]
    hashes: dict[str, str] = Field(default_factory=dict)
    inputs: dict[str, str] = Field(default_factory=dict)
    sampling: dict[str, Any] | None = None
    counts: Counts | None = None
    disagreements: list[Disagreement] = Field(default_factory=list)
    causes: list[Cause] = Field(default_factory=list)
    gated_agreements: list[GatedAgreement] = Field(default_factory=list)
    history: list[Replaced] = Field(default_factory=list)
    blind: Blind | None = None
    flags: list[dict[str, Any]] = Field(default_factory=list)  # the score report's flags, each open / acknowledged
    probes: list[dict[str, Any]] = Field(default_factory=list)
    base_success: dict[str, Any] | None = None
    tests: list[Any] = Field(default_factory=list)
    readers: list[Literal["human", "agent"]] = Field(default_factory=list)
    paths: Paths | None = None
    samples: Samples | None = None
    confirmation: Confirmation | None = None
    confirmed: bool = False
    dataset_filter: dict[str, Any] | None = None  # `finetune data filter`'s section, once it re-bound the record
    versions: dict[str, str] = Field(default_factory=dict)
    time: str

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def old_schema(data: Any) -> str | None:
    """One line when ``data`` is a gate record of another schema version (None: this version, or not a record)."""
    if not isinstance(data, dict):
        return None
    version = data.get("schema_version")
    if version == SCHEMA_VERSION:
        return None
    was = "no schema version" if version is None else f"schema version {version!r}"
    return (f"this gate record has {was}, not {SCHEMA_VERSION} (written by another version of the plugin); "
            "run `finetune inspect gate` again")


def parse_record(data: Any, where: str) -> GateRecord:
    """A gate record from its JSON, or UserError in one line (another schema version, or not a gate record)."""
    stale = old_schema(data)
    if stale:
        raise UserError(stale, where=where, fix="re-run `finetune inspect gate RUN` (the files it binds are re-judged)")
    try:
        return GateRecord.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(x) for x in err["loc"]) or "(top level)"
        raise UserError(f"not a gate record written by `finetune inspect gate`: {field}: {err['msg']}", where=where,
                        fix="delete it and re-run `finetune inspect gate RUN` (never edit gate.json)") from None


def load_record(path: str | Path) -> GateRecord:
    """gate.json read and validated (UserError naming the file when unreadable or of another shape)."""
    return parse_record(jsonio.read_json(Path(path)), str(path))
