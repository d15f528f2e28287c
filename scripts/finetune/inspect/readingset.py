"""Which samples the reading covers, and whether the reading is blind for the reward as it is now.

A reading is blind when every verdict was given before its sample's reward scores were shown and the reward has
not changed since the reader saw them. After a reward fix the samples whose disagreements led to the fix are no
test of the fixed reward: it was tuned on them. ``inspection.held_back_prompts`` keeps samples of other prompts
out of the first reading (``inspect sample`` records their ids in sample_info.json as ``held_back``);
``finetune inspect review RUN --fresh`` switches the reading to them (``reading_set.json``), and verdicts on them,
given before their key, are a blind reading of the fixed reward. Without held-back samples the fresh set is
re-sampled with another ``training.seed``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from finetune import atomic, jsonio, locks, rundir
from finetune.errors import UserError
from finetune.inspect import verdicts as V

if TYPE_CHECKING:
    from finetune.spec import RunSpec

FILE = "reading_set.json"  # written by `inspect review --fresh`: the reading is the held-back samples
SAMPLE_INFO = "sample_info.json"


def held_back(run_dir: str | Path) -> list[str]:
    """The ids ``inspect sample`` held back from the first reading (sample_info.json's ``held_back``)."""
    path = Path(run_dir) / SAMPLE_INFO
    if not path.is_file():
        return []
    info = jsonio.read_json_object(path, what=SAMPLE_INFO, fix="sample again (`finetune inspect sample`)")
    ids = info.get("held_back")
    return [str(i) for i in ids] if isinstance(ids, list) else []


class ReadingSet(BaseModel):
    """reading_set.json as `inspect review --fresh` writes it: the reading is the held-back samples."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    reading: Literal["fresh"]
    """always `fresh`: the reading is the held-back samples"""
    ids: list[str]
    """the held-back sample ids now read"""
    rewards: str = Field(description="rewards_digest when the reading switched")
    time: str
    """when the reading switched"""


class ReadingState(BaseModel):
    """Whether the current reading is blind for the reward now (the gate record's ``blind`` adds the reveals)."""

    model_config = ConfigDict(extra="forbid")

    reading: Literal["first", "fresh"]
    reading_read: int
    reading_blind: bool
    after_reveal: list[str]
    earlier_reward: list[str]
    earlier_readings: int
    statement: str


def switched(run_dir: str | Path) -> ReadingSet | None:
    """reading_set.json when the reading was switched to the held-back samples (None: the first reading)."""
    path = Path(run_dir) / FILE
    if not path.is_file():
        return None
    doc = jsonio.read_json_object(path, what=FILE, fix=f"remove {FILE} and run `finetune inspect review RUN --fresh`")
    try:
        return ReadingSet.model_validate(doc)
    except ValidationError:
        raise UserError(f"{FILE} names no fresh reading", where=str(path),
                        fix=f"remove it and run `finetune inspect review {run_dir} --fresh`") from None


def reading_ids(run_dir: str | Path, ids: list[str]) -> set[str]:
    """The scored ids the current reading covers: the held-back ones after a switch, else all but them."""
    fresh = switched(run_dir)
    if fresh is not None:
        return set(fresh.ids) & set(ids)
    return set(ids) - set(held_back(run_dir))


def earlier_statement(run_dir: str | Path, ids: list[str]) -> str:
    """What the gate makes of the verdicts given outside the reading ``ids`` (said when a reading switches)."""
    earlier = len(set(V.load_verdicts(run_dir)) - set(ids))
    if not earlier:
        return "no verdict was given before"
    return (f"the {earlier} verdict(s) of the earlier reading no longer count toward inspection.min_read (only "
            "verdicts on these samples do) but still count for disagreements: a disagreement they show stands")


def unrevealed_held_back(run_dir: str | Path) -> list[str]:
    """Held-back ids whose scores no one has seen (what a fresh reading can still use)."""
    reveals = V.load_reveals(run_dir)
    return [i for i in held_back(run_dir) if i not in reveals]


def switch_to_fresh(run_dir: str | Path, spec: RunSpec) -> tuple[ReadingSet, int]:
    """Make the held-back samples the reading (reading_set.json); refuse when there are none to switch to.
    Returns the reading set and how many samples it is short of ``inspection.min_read``."""
    run_dir = Path(run_dir)
    with locks.file_lock(run_dir):
        if switched(run_dir) is not None:
            raise UserError("the reading is already the held-back samples", where="--fresh",
                            fix=f"for another blind set re-sample: {resample_line(run_dir)}")
        held = held_back(run_dir)
        if not held:
            raise UserError("no samples were held back from the first reading (inspection.held_back_prompts is 0)",
                            where="--fresh", fix=f"re-sample for a fresh blind set: {resample_line(run_dir)}")
        seen = [i for i in held if i in V.load_reveals(run_dir)]
        if seen:
            raise UserError(f"{len(seen)} held-back sample(s) had their scores shown already (e.g. {seen[0]})",
                            where="--fresh", fix=f"re-sample for a fresh blind set: {resample_line(run_dir)}")
        doc = ReadingSet(reading="fresh", ids=held, rewards=V.rewards_digest(run_dir), time=V.now())
        atomic.write_text(run_dir / FILE, jsonio.json_text(run_dir / FILE, doc.model_dump(mode="json")))
    return doc, max(0, spec.inspection.min_read - len(held))


def resample_line(run_dir: Path) -> str:
    """How to draw a fresh blind set when none is held back: another seed, then Phase 1's sampling again."""
    from finetune.invocation import command

    return (f"change `training.seed` in spec.yaml (it seeds Phase 1's sampling), then "
            f"`{command('inspect', 'sample', Path(run_dir) / rundir.SPEC)}`, score, review and record the new "
            "reading before opening the key")


def fresh_offer(run_dir: str | Path) -> str:
    """The fresh blind set this run can offer: its held-back samples, or a re-sample."""
    from finetune.invocation import command

    run_dir = Path(run_dir)
    try:
        free = [] if switched(run_dir) is not None else unrevealed_held_back(run_dir)
    except UserError:
        free = []
    if free:
        return (f"a fresh blind set: `{command('inspect', 'review', run_dir, '--fresh')}` switches the reading to "
                f"the {len(free)} held-back samples no one has seen (then read them, record the verdicts, "
                f"open the key, gate); or {resample_line(run_dir)}")
    return f"a fresh blind set: {resample_line(run_dir)}"


def blind_record(run_dir: str | Path, read: list[V.Verdict], current: set[str]) -> ReadingState:
    """Whether the current reading (the counted verdicts on ``current``) is blind for the reward now.

    ``after_reveal``: verdicts recorded after the reader saw the rewards' view of that sample (no first, blind
    verdict kept); ``earlier_reward``: samples whose scores were shown under another reward than the one now
    (the reward changed after the reader saw them). ``earlier_readings``: verdicts outside the current reading
    (a first reading before a switch to the held-back samples): they still count for disagreements."""
    reveals = V.load_reveals(run_dir)
    digest = V.rewards_digest(run_dir)
    now = [v for v in read if v.id in current]
    after = [v.id for v in now if v.id in reveals and v.first_verdict is None and V.later(v.time, reveals[v.id].time)]
    earlier = [v.id for v in now if v.id in reveals and any(d != digest for d in reveals[v.id].rewards)]
    fresh = switched(run_dir) is not None
    return ReadingState(reading="fresh" if fresh else "first", reading_read=len(now),
                        reading_blind=not after and not earlier, after_reveal=after, earlier_reward=earlier,
                        earlier_readings=len(read) - len(now), statement=statement(len(now), after, earlier))


def statement(total: int, after: list[str], earlier: list[str]) -> str:
    """One plain sentence on whether the reading was blind (gate output, gate.json, status)."""
    parts = []
    if after:
        parts.append(f"{len(after)} of {total} verdicts were recorded after the reader saw the rewards' view")
    if earlier:
        parts.append(f"the reward changed after the reader saw the scores of {len(earlier)} of {total} samples "
                     "(it was fixed looking at them)")
    if not parts:
        return f"a blind reading: {total} verdicts, each given before its sample's scores were shown"
    return "; ".join(parts) + ": not a blind reading"
