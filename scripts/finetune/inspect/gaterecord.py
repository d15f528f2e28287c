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
# 3: per reward and verdict field, the reading's agreements and exact one-sided bounds on precision and recall.
# 4: the hashes bind the spec's inspection section (spec:inspection).
SCHEMA_VERSION = 4


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class Disagreement(_Part):
    """A reward and a verdict that disagree on one sample (role-wise: `verdicts.compare`)."""

    id: str
    """the sample's id"""
    field: str
    """the verdict field that disagrees (`accept`, `correct`, `well_formed`)"""
    kind: Literal["false_positive", "false_negative"]
    """`false_positive`: the reward passes what the reader rejected; `false_negative`: the reverse"""
    rewards: list[str]
    """the rewards of that field's role that disagree"""
    scores: dict[str, float | None]
    """each reward's score on the sample"""
    thresholds: dict[str, float | None]
    """each reward's pass threshold"""
    note: str = ""
    """the reader's note on the sample"""
    reader: str
    """`human` or `agent`"""
    why: dict[str, str | None] | None = None  # the reward's reason per row (a checkpoint set's comparison)
    """the reason id each reward logged for the row (a checkpoint set's comparison)"""


class Cause(_Part):
    """Disagreements grouped by kind, reward and the reason the reward logged (`gate.group_causes`)."""

    kind: str
    """the disagreement kind"""
    reward: str
    """the reward"""
    reason: str
    """the reason id the reward logged"""
    count: int
    """disagreements in the group"""
    examples: list[str]
    """sample ids of the group"""
    text: str
    """what the reason id means"""
    fix: str
    """the spec field that changes it"""
    summary: str
    """one line for the terminal and review sheet"""


class GatedAgreement(_Part):
    id: str
    """the sample's id"""
    reward: str
    """the gated correctness reward"""
    score: float | None
    """its score (0: the completion failed a format reward)"""
    note: str
    """why a reader's `correct: true, well_formed: false` counts as agreement here"""


class Counts(_Part):
    scored: int
    """samples scored"""
    read: int
    """samples with a counted verdict"""
    min_read: int
    """verdicts needed in the current reading (`inspection.min_read`)"""
    stale_verdicts: int
    """verdicts whose `sample_sha256` no longer matches the scored sample (not counted)"""
    agreed: int
    """samples where reader and rewards agree"""
    disagreements: int
    """disagreements, on every sample read"""
    gated_agreements: int
    """correct-but-malformed agreements"""
    human: int
    """counted verdicts of a person (`verdicts.is_person`)"""
    agent: int
    """counted verdicts of the agent"""
    replaced: int = 0
    """earlier verdicts on the samples read that a later one replaced (history)"""


class Blind(_Part):
    """Whether the reading was blind (reveals.json + the verdicts; `readingset.blind_record`)."""

    revealed: int
    """samples whose scores were shown (reveals.json)"""
    judged_after_reveal: list[str]
    """ids first judged after their scores were shown"""
    changed_after_reveal: list[str]
    """ids whose verdict changed after the reveal"""
    reading: Literal["first", "fresh"]
    """`first` (the sampled reading) or `fresh` (the held-back samples after `review --fresh`)"""
    reading_read: int
    """verdicts in the current reading"""
    reading_blind: bool
    """no sample of the current reading was shown before its verdict"""
    after_reveal: list[str]
    """ids of the current reading judged after a reveal"""
    earlier_reward: list[str]
    """ids whose scores were shown under another reward than the one now (reveals.json's `rewards`)"""
    earlier_readings: int
    """readings before the current one"""
    statement: str
    """one sentence, e.g. "12 of 64 verdicts were recorded after the reader saw the rewards' view: not a blind
    reading"; `inspect gate` prints it first when the reading was not blind"""
    mirrors_rewards: bool
    """the reading is the rewards' view field for field with no note (reported: blindness cannot be proven while
    scored.jsonl is readable)"""


class Paths(_Part):
    """Which path each counted verdict was recorded through: a person's signed path or the agent's."""

    counts: dict[str, int]
    """counted verdicts per path (`verdict`, `human-verdict`, `terminal`)"""
    ids: dict[str, list[str]]
    """the sample ids per path"""
    human_declared_not_established: list[str] = Field(
        description="ids whose verdict says `human` (or names a person's path) without the person's signature")


class HistoryEntry(_Part):
    """One recorded verdict on a sample (verdicts.jsonl only grows)."""

    accept: bool
    """the verdict's accept"""
    correct: bool | None = None
    """the verdict's correct"""
    well_formed: bool | None = None
    """the verdict's well_formed"""
    reader: str
    """`human` or `agent`, as recorded"""
    via: str | None
    """the path that recorded it"""
    by: str | None = None
    """the person who recorded it"""
    time: str | None
    """when it was recorded"""
    person: bool = Field(description="a person's verdict (signed on a person's path)")
    counts: bool = Field(description="the verdict the gate counts for this sample")
    disagreed: list[str] = Field(default_factory=list, description="the rewards it disagreed with (kind:field:reward)")


class Replaced(_Part):
    """A sample whose recorded verdicts changed: every verdict in order, and the disagreements that were replaced."""

    id: str
    """the sample's id"""
    verdicts: list[HistoryEntry]
    """every verdict on it, oldest first"""
    replaced_disagreements: list[str] = Field(default_factory=list)
    """the disagreements an earlier verdict held that a later one replaced"""


class Samples(_Part):
    """Where the samples read came from: this plugin's sampler, or an import (the file, and whether the agent's
    tools could have written it)."""

    source: Literal["sampled", "imported", "unknown"]
    """`sampled` by this plugin, `imported` (`inspect sample --import`), or `unknown`"""
    file: str | None = None
    """the imported file"""
    sha256: str | None = None
    """its sha256"""
    agent_writable: bool | None = None
    """the agent's Write rules cover the file (shown on every sheet)"""


class Bound(_Part):
    """One reward against one verdict field on the reading (`bounds.bound_entry`): the counts behind exact
    one-sided Clopper–Pearson lower bounds on its recall and precision, and the floors the spec sets."""

    reward: str
    """the reward's name, or `all_pass` (every format and correctness reward) for accept"""
    field: Literal["accept", "correct", "well_formed"]
    """the verdict field the reward is held to"""
    agreed: int
    """samples on which reward and reader agree"""
    false_positives: int
    """samples the reward passes and the reader rejects"""
    false_negatives: int
    """samples the reader accepts and the reward fails"""
    read_positives: int
    """samples the reader calls positive on this field (recall's trials)"""
    accepted: int
    """samples the reward passes (precision's trials)"""
    recall_lower: float | None
    """the lower bound on recall; None: no read positive, nothing bounded"""
    precision_lower: float | None
    """the lower bound on precision; None: the reward passed nothing read"""
    level: float
    """the one-sided confidence level of both bounds"""
    min_recall: float | None = None
    """the spec's recall floor (`inspection.min_recall`); None: reported only"""
    min_precision: float | None = None
    """the spec's precision floor (`inspection.min_precision`); None: reported only"""
    more_positives: int | None = None
    """read positives (all agreeing) that would lift recall to its floor"""
    more_accepted: int | None = None
    """accepted samples (all agreeing) that would lift precision to its floor"""


class GateRecord(BaseModel):
    """gate.json (the gate-record contract). A FAIL written because the re-score could not run carries only the
    status, reasons, versions and time."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    schema_version: Literal[4] = 4  # SCHEMA_VERSION
    """`gaterecord.SCHEMA_VERSION`; a record of another version is one line asking for a new gate"""
    status: Literal["PASS", "FAIL"]
    """`PASS` or `FAIL`; a FAIL run of the gate replaces an earlier PASS (the latest judgement holds)"""
    reasons: list[str]
    """why FAIL; a list inside a reason is complete or ends with "and N more — see gate.json" """
    hashes: dict[str, str] = Field(default_factory=dict)
    """what train.py re-checks (`hashing.bound_hashes`): sha256 of rewards.py, every rewards_*.py (a python
    verifier's and the environment's modules as `rewards_lib_NAME.py`), scored.jsonl, verdicts.jsonl,
    `spec:rewards`, `spec:sampling`, `spec:inspection` and, after `finetune data filter`, `spec:dataset.filter` and
    `dataset.filter:file`"""
    inputs: dict[str, str] = Field(default_factory=dict)
    """sha256 of samples.jsonl, base_samples.jsonl, score_report.json, confirmation.json, acks.json,
    reading_set.json: `verify_gate` re-checks them (one that appears after the PASS voids it); train.py does not"""
    sampling: dict[str, Any] | None = None
    """`spec.sampling_binding()`: dataset.system_prompt and the generation section, so a change can be named"""
    counts: Counts | None = None
    """the reading's counts"""
    disagreements: list[Disagreement] = Field(default_factory=list)
    """each `false_positive` / `false_negative`, by verdict field and reward"""
    causes: list[Cause] = Field(default_factory=list)
    """the disagreements grouped by the reason the reward logged"""
    bounds: list[Bound] = Field(default_factory=list)
    """per reward and verdict field: the counts and the one-sided lower bounds on recall and precision the
    reading supports, with the spec's floors"""
    gated_agreements: list[GatedAgreement] = Field(default_factory=list)
    """correct-but-malformed samples counted as agreement"""
    history: list[Replaced] = Field(default_factory=list)
    """every sample read with more than one verdict"""
    blind: Blind | None = None
    """whether the reading was blind"""
    flags: list[dict[str, Any]] = Field(default_factory=list)  # the score report's flags, each open / acknowledged
    """the score report's flags, each `open` or `acknowledged` with the written reason"""
    probes: list[dict[str, Any]] = Field(default_factory=list)
    """the score report's probes (a passing probe cannot be waived)"""
    base_success: dict[str, Any] | None = None
    """the base model's success, with `provisional` and `missing` (fewer prompts / samples than
    `inspection.base_success`, another or unknown temperature, or training samples standing in)"""
    tests: list[Any] = Field(default_factory=list)
    """the score report's visible / hidden tests per row of each unit_tests reward"""
    readers: list[Literal["human", "agent"]] = Field(default_factory=list)
    """who read: `human` only for `verdicts.is_person`"""
    paths: Paths | None = None
    """the path each counted verdict took"""
    samples: Samples | None = None
    """where the samples read came from"""
    confirmation: Confirmation | None = None
    """the person's confirmation of an agent's reading, when one counts"""
    confirmed: bool = False
    """the confirmation counts (signed, bound to verdicts.jsonl as it is now)"""
    dataset_filter: dict[str, Any] | None = None  # `finetune data filter`'s section, once it re-bound the record
    """`finetune data filter`'s section, once it re-bound the record"""
    versions: dict[str, str] = Field(default_factory=dict)
    """plugin and TRL versions"""
    time: str
    """when the gate ran"""

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
