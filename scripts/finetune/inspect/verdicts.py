"""Reader verdicts, the user's confirmation of an agent-only reading, and flag acknowledgements.

A verdict says what the reader saw in one scored sample: ``accept`` (the output fully does what the
task asks), optionally ``correct`` / ``well_formed``, a note, and who read it (``human`` or
``agent``). Verdicts map to rewards role-wise (reward-roles contract): ``well_formed`` ↔ format rewards,
``correct`` ↔ correctness rewards, ``accept`` ↔ every format and correctness reward passes.
Everything here is written through commands (``finetune inspect verdict|confirm|ack``) so nobody
edits JSON by hand.

verdicts.jsonl only grows — one line per verdict recorded, so a replaced verdict stays (:func:`verdict_history`);
the verdict that counts per sample (:func:`effective`, what :func:`load_verdicts` returns) is, on the sample as last
judged, the newest person's verdict, else the newest line: a person's verdict stands, and the agent's command
refuses (exit 2, nothing written) a verdict on a sample where one does. ``time``, ``via`` and ``by`` are stamped by
the recording command; on the agent's path any of :data:`STAMPED` in the input is refused. A verdict counts only
while the scored sample still has its ``sample_sha256``. :func:`is_person` — reader human, a person's path and a
signature that checks under the person's key — is the one test of a person's verdict. reveals.json records when a
sample's scores were shown (key, page, terminal), under the same lock as verdicts.jsonl. An :class:`Ack` or a
:class:`Confirmation` is valid only as its command writes it; :func:`acks_for` is the one validator the gate calls
(well-formed, signed, waivable, bound to the flag as it is now); a confirmation counts only while
``Confirmation.signed()``. Field by field: references/formats.md.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from finetune import commit, jsonio, locks, rundir
from finetune.errors import UserError
from finetune.hashing import canonical_json, sha256_file
from finetune.inspect import personkey
from finetune.rewards.lib.rewards_meta import RewardMeta

CONFIRMATION = "confirmation.json"
ACKS = "acks.json"
REVEALS = "reveals.json"  # which samples' reward scores a reader saw, and when (blind-reading record)

# What each verdict field means, printed on every reading sheet so a reader and the gate agree.
DEFINITIONS = {
    "correct": "The final answer (or result) is right for this prompt and gold answer, however it is presented.",
    "well_formed": "The completion follows the required output format (the tag, box, schema or layout the "
                   "task asks for), whether or not the answer is right.",
    "accept": "The completion fully does what the task asks: it is correct and well-formed, and you would "
              "want the model to produce more outputs like it.",
}
MIN_ACK_REASON_CHARS = 20  # a reason is a sentence, not "ok"

# Who read is established by the path a verdict was recorded through and the person's signature on it, never by
# what a file says. `inspect verdict` is pre-approved for the agent (commands/finetune.md allowed-tools), so
# whatever it records is the agent's. A person's verdicts come only through the person's own commands, which the
# plugin's PreToolUse hook denies to the agent: `inspect human-verdict` (review.html's export) and the terminal
# review. Those sign each line with the person's key (personkey.py); `is_person` checks the signature.
AGENT_PATH = "verdict"
PERSON_PATHS = ("human-verdict", "terminal")
PATHS = (AGENT_PATH, *PERSON_PATHS)
# Fields the recording command stamps: never taken from what the agent's path is given.
STAMPED = ("time", "first_verdict", "revealed", "changed_after_reveal", "page", "sig")


def now() -> str:
    # Microseconds: an agent can open the key and record a verdict within one second, and at one-second
    # resolution that verdict would read as given before the reveal (a blind one).
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


class Judgement(BaseModel):
    """A verdict's three fields as given at one moment (the first verdict, before the scores were revealed)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    accept: bool
    """the sample is acceptable: correct and well-formed"""
    correct: bool | None = None
    """the answer is right"""
    well_formed: bool | None = None
    """the output has the required format"""


class Verdict(BaseModel):
    """One reader's judgement of one scored sample."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    id: str = Field(min_length=1)
    """the sample's id"""
    accept: bool
    """the sample is acceptable: correct and well-formed (`true` with `correct` or `well_formed` false is refused:
    `verdicts.DEFINITIONS`)"""
    correct: bool | None = None
    """the answer is right (compared with the correctness rewards)"""
    well_formed: bool | None = None
    """the output has the required format (compared with the format rewards)"""
    note: str = ""
    """the reader's note"""
    reader: Literal["human", "agent"]
    """`human` or `agent`; the agent's path always records `agent`"""
    time: str | None = None
    """stamped by the recording command, never taken from input"""
    sample_sha256: str | None = Field(default=None, description="Digest of the prompt, completion and columns "
                                         "the reader saw; filled in when the verdict is recorded.")
    revealed: bool | None = Field(default=None, description="The reader saw this sample's reward scores (after "
                                     "giving the first verdict).")
    first_verdict: Judgement | None = Field(default=None, description="The verdict as first given, before the reveal.")
    changed_after_reveal: bool | None = Field(default=None, description="The verdict differs from first_verdict: "
                                                 "it changed after the reader saw the rewards.")
    via: Literal["verdict", "human-verdict", "terminal"] | None = Field(
        default=None, description="The path the verdict was recorded through (stamped by the recording command; "
        "a value in an input file is replaced): only a person's path makes a `human` reader count as one.")
    by: str | None = Field(default=None, description="The person who recorded it (person paths only).")
    page: str | None = Field(default=None, description="Digest of the review page the verdict was exported from "
                             "(`inspect human-verdict` takes only such an export).")
    sig: str | None = Field(default=None, description="HMAC of the line under the person's key (person paths "
                            "only; personkey.py): what makes `via` a checked fact.")

    @model_validator(mode="after")
    def _consistent(self) -> Verdict:
        # accept means correct and well-formed (DEFINITIONS); a reading that says otherwise is a typo
        for name in ("correct", "well_formed"):
            if self.accept and getattr(self, name) is False:
                raise ValueError(f"accept: true contradicts {name}: false (accept means correct and well-formed)")
        return self


def signed_payload(v: Verdict) -> dict[str, Any]:
    """What a person's signature on a verdict line covers: every field but the signature itself."""
    return v.model_dump(mode="json", exclude_none=True, exclude={"sig"})


def is_person(v: Verdict) -> bool:
    """A person's verdict: reader human, recorded through a person's path, and signed by the person's key there."""
    return v.reader == "human" and v.via in PERSON_PATHS and personkey.verify("verdict", signed_payload(v), v.sig)


def parse_verdicts(path: Path, reader: str | None = None, unique: bool = False) -> list[Verdict]:
    """Every line validated before anything is used. ``reader`` fills lines that name none and refuses
    lines that name another; ``unique`` refuses an id given twice (a reading file is one verdict per sample)."""
    verdicts: list[Verdict] = []
    seen: dict[str, int] = {}
    for n, obj in jsonio.read_jsonl(path):
        if reader is not None and isinstance(obj, dict):
            if obj.get("reader", reader) != reader:
                raise UserError(f"reader is '{obj['reader']}' but --reader says '{reader}'", where=f"{path}:{n}",
                                fix="record each reader's verdicts in a call of its own")
            obj = {**obj, "reader": reader}
        try:
            verdicts.append(Verdict.model_validate(obj))
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(x) for x in err["loc"]) or "(line)"
            raise UserError(f"{field}: {err['msg']}".replace("Value error, ", ""), where=f"{path}:{n}",
                            fix="each line needs id, accept (true/false), reader (human|agent); "
                                "optional correct, well_formed, note") from None
        if unique:
            if verdicts[-1].id in seen:
                raise UserError(f"sample '{verdicts[-1].id}' is judged twice (lines {seen[verdicts[-1].id]} and {n})",
                                where=f"{path}:{n}", fix="keep one verdict per sample")
            seen[verdicts[-1].id] = n
    return verdicts


def verdict_history(run_dir: str | Path) -> list[Verdict]:
    """Every verdict line ever recorded, in order: verdicts.jsonl only grows (a replaced verdict stays there)."""
    path = Path(run_dir) / rundir.VERDICTS
    if not path.exists():
        return []  # (a directory in its place is read, and refused, by jsonio: never taken for "no verdicts")
    return parse_verdicts(path)


def effective(lines: list[Verdict]) -> dict[str, Verdict]:
    """The verdict that counts per sample id: among the lines on the sample as last judged (its newest
    ``sample_sha256``), the newest person's verdict, else the newest line. A person's verdict stands: a later
    agent line on the same sample never replaces it."""
    by_id: dict[str, list[Verdict]] = {}
    for v in lines:
        by_id.setdefault(v.id, []).append(v)
    out: dict[str, Verdict] = {}
    for sid, seen in by_id.items():
        latest = [v for v in seen if v.sample_sha256 == seen[-1].sample_sha256]
        people = [v for v in latest if is_person(v)]
        out[sid] = (people or latest)[-1]
    return out


def load_verdicts(run_dir: str | Path) -> dict[str, Verdict]:
    """The run's verdicts that count, by sample id (:func:`effective` of the whole history)."""
    return effective(verdict_history(run_dir))


def sample_digest(row: dict[str, Any]) -> str:
    """What a reader judged: the prompt, the completion and the columns (gold), as one sha256."""
    payload = [row.get("prompt"), row.get("completion"), row.get("columns") or {}]
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def scored_digests(run_dir: str | Path) -> dict[str, str]:
    """{sample id: sample_digest} of the current scored.jsonl."""
    path = Path(run_dir) / rundir.SCORED
    if not path.is_file():
        raise UserError(f"no {rundir.SCORED} in {run_dir}", fix="run `finetune inspect score RUN` first")
    from finetune.inspect.runfiles import check_scored

    return {obj["id"]: sample_digest(obj) for obj in check_scored(jsonio.read_jsonl(path), path)}


def record_verdicts(run_dir: str | Path, new: list[Verdict], source: str = "verdict", *, via: str,
                    by: str | None = None) -> Path:
    """Append ``new`` to verdicts.jsonl after checking every id was scored; the earlier lines stay (history).

    ``via`` is the path that records them (:data:`PATHS`) and is stamped on each verdict, with ``time`` (now,
    whatever the input says). Through the agent's path every verdict is recorded as the agent's, whatever its
    ``reader`` says; a line carrying a field the recording command stamps (:data:`STAMPED`: a time, a first
    verdict, a reveal) is refused there, and so is a verdict on a sample a person's verdict stands on. On a
    person's path ``by`` (the person) is kept and each line is signed with the person's key.

    Each verdict is bound to the sample it judged (``sample_sha256``): a verdict exported from a
    review page built before the samples changed is refused, and the gate ignores verdicts whose
    sample has changed since.
    """
    run_dir = Path(run_dir)
    if via not in PATHS:
        raise ValueError(f"unknown verdict path {via!r}")
    person = via in PERSON_PATHS
    if not person:
        _refuse_stamped(new, source)
    stamp = {"via": via, "by": (by or None) if person else None}
    new = [v.model_copy(update={**stamp, "reader": v.reader if person else "agent"}) for v in new]
    with locks.file_lock(run_dir / rundir.VERDICTS):  # re-read under the lock: no concurrent verdict is lost
        return _append_verdicts(run_dir, new, source, person)


def _refuse_stamped(new: list[Verdict], source: str) -> None:
    for v in new:
        given = [f for f in STAMPED if getattr(v, f) is not None]
        if given:
            raise UserError(f"'{given[0]}' on sample '{v.id}' is stamped by the command that records a verdict, never "
                            "taken from a file", where=source,
                            fix="remove it: the agent's reading is recorded as given now (a review page's export is "
                                "the person's: they record it with `inspect human-verdict`)")


def standing(run_dir: Path, ids: list[str], known: dict[str, str]) -> list[str]:
    """The ids among ``ids`` whose counting verdict is a person's, on the sample as scored now."""
    current = load_verdicts(run_dir)
    return [i for i in ids if i in current and is_person(current[i]) and current[i].sample_sha256 == known.get(i)]


def _append_verdicts(run_dir: Path, new: list[Verdict], source: str, person: bool) -> Path:
    known = scored_digests(run_dir)
    for v in new:
        if v.id not in known:
            raise UserError(f"sample id '{v.id}' is not in {rundir.SCORED}", where=source,
                            fix="use ids from review.md / review.html (re-run score if samples changed)")
        if v.sample_sha256 and v.sample_sha256 != known[v.id]:
            raise UserError(f"the verdict for '{v.id}' was given on a different completion than the one scored "
                            "now", where=source, fix="re-create the review (`finetune inspect review`) and read again")
    held = [] if person else standing(run_dir, [v.id for v in new], known)
    if held:
        raise UserError(f"{len(held)} sample(s) carry a person's verdict, which the agent's command cannot replace "
                        f"(e.g. {', '.join(held[:3])})", where=source,
                        fix="leave them out of the agent's reading: the person's verdict stands (where you disagree, "
                            "tell the person; only they can record a new one)")
    history = verdict_history(run_dir)  # the caller holds the run directory's lock
    stamp = now()
    lines = []
    for v in new:
        line = v.model_copy(update={"time": stamp, "sample_sha256": known[v.id], "sig": None})
        if person:
            line = line.model_copy(update={"sig": personkey.sign("verdict", signed_payload(line))})
        lines.append(line)
    files = {rundir.VERDICTS: jsonio.jsonl_text(run_dir / rundir.VERDICTS, [v.model_dump(mode="json", exclude_none=True)
                                                                          for v in [*history, *lines]])}
    revealed = [v for v in lines if v.revealed]
    if revealed:
        reveals = _with_reveals(run_dir, {v.id: Reveal(time=stamp, via=source if person else AGENT_PATH,
                                                       changed_after_reveal=bool(v.changed_after_reveal))
                                          for v in revealed})
        files[REVEALS] = reveals_text(run_dir, reveals)
    # one commit: a kill never leaves a verdict given after a reveal saved without its reveal record
    commit.commit_files(run_dir, files)
    return run_dir / rundir.VERDICTS


def rewards_digest(run_dir: str | Path) -> str:
    """One sha256 over the reward files now (rewards.py and its helpers): the reward whose view a reveal showed."""
    import hashlib

    from finetune.hashing import reward_files, sha256_file

    parts = [f"{p.name}:{sha256_file(p)}" for p in reward_files(run_dir)]
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()


class Reveal(BaseModel):
    """One sample's entry of reveals.json: when its scores were first shown, how, and under which rewards."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    time: str = Field(min_length=1)
    """when the sample's scores were first shown"""
    via: str = Field(min_length=1)
    """how: the key, the page, the terminal"""
    changed_after_reveal: bool | None = None
    """the verdict changed after the reveal"""
    rewards: list[str] = Field(default_factory=list, description="every rewards_digest a reveal of it showed")


def _with_reveals(run_dir: Path, new: dict[str, Reveal]) -> dict[str, Reveal]:
    """reveals.json plus ``new`` (caller holds the run directory's lock); the first reveal of a sample is kept,
    and ``rewards`` accumulates every reward (``rewards_digest``) whose view of the sample was shown: a reward
    changed after its reader saw a sample's scores was fixed looking at that sample."""
    reveals = load_reveals(run_dir)
    digest = rewards_digest(run_dir)
    for sid, entry in new.items():
        kept = reveals.setdefault(sid, entry)
        if digest not in kept.rewards:
            kept.rewards.append(digest)
    return reveals


def reveals_text(run_dir: Path, reveals: dict[str, Reveal]) -> str:
    return jsonio.json_text(run_dir / REVEALS, {k: v.model_dump(mode="json", exclude_none=True)
                                                for k, v in reveals.items()})


def record_reveals(run_dir: str | Path, ids: list[str], via: str) -> None:
    """Record that the reward scores of ``ids`` were shown to the reader (the key, the terminal review)."""
    stamp = now()
    run_dir = Path(run_dir)
    with locks.file_lock(run_dir / REVEALS):
        reveals = _with_reveals(run_dir, {i: Reveal(time=stamp, via=via) for i in ids})
        from finetune import atomic

        atomic.write_text(run_dir / REVEALS, reveals_text(run_dir, reveals))


def load_reveals(run_dir: str | Path) -> dict[str, Reveal]:
    """reveals.json validated (a hand-edited entry is bad input naming the file); {} when absent."""
    path = Path(run_dir) / REVEALS
    data = load_json(path)
    if data is None:
        return {}
    fix = f"remove {REVEALS} only if no reader saw a score (it records the reveals), then re-write the key"
    if not isinstance(data, dict):
        raise UserError(f"{REVEALS} must be a JSON object, found {type(data).__name__}", where=str(path), fix=fix)
    return {str(k): _validated(path, Reveal, v, f"reveal of '{k}' is not as the commands write it", fix)
            for k, v in data.items()}


def _gated_excuse(meta: RewardMeta, verdict: Verdict) -> bool:
    """A reader's ``correct`` on a sample they call malformed, against a correctness reward gated on
    format: the reward means "correct and well-formed", so the reader's view of it is False too."""
    return meta.gated and verdict.correct is True and verdict.well_formed is False


def _applied(row: dict[str, Any], name: str) -> bool:
    """Did reward ``name`` judge this row? None without an error is "not applicable" (a mixed set's other
    reward): the row's all_pass skips it, so no disagreement names it as a cause."""
    return row.get("rewards", {}).get(name) is not None or bool(row.get("errors", {}).get(name))


def compare(row: dict[str, Any], verdict: Verdict, metas: list[RewardMeta]) -> list[dict[str, Any]]:
    """Role-wise disagreements between a scored sample and its verdict (reward-roles contract).

    false_positive: a reward passes what the reader rejects (reward-hacking risk);
    false_negative: a reward fails what the reader accepts (lost learning signal).
    A format-gated correctness reward is compared with "correct and well-formed" (see gated_notes).
    """
    out: list[dict[str, Any]] = []
    rewards, passes = row.get("rewards", {}), row.get("passes", {})

    def add(kind: str, field: str, names: list[str]) -> None:
        out.append({"id": row["id"], "field": field, "kind": kind, "rewards": names,
                    "scores": {n: rewards.get(n) for n in names},
                    "thresholds": {m.name: m.threshold for m in metas if m.name in names},
                    "note": verdict.note, "reader": verdict.reader})

    gated = [m.name for m in metas if m.role in ("format", "correctness") and _applied(row, m.name)]
    if verdict.accept and not row.get("all_pass"):
        add("false_negative", "accept", [n for n in gated if not passes.get(n)])
    elif not verdict.accept and row.get("all_pass"):
        add("false_positive", "accept", [n for n in gated if passes.get(n)])
    for field, role in (("correct", "correctness"), ("well_formed", "format")):
        said = getattr(verdict, field)
        if said is None:
            continue
        for m in metas:
            if m.role != role or (rewards.get(m.name) is None and not row.get("errors", {}).get(m.name)):
                continue
            if field == "correct" and _gated_excuse(m, verdict):
                continue  # correct-but-malformed: the format comparison judges the format; see gated_notes
            passed = bool(passes.get(m.name))
            if passed and not said:
                add("false_positive", field, [m.name])
            elif said and not passed:
                add("false_negative", field, [m.name])
    return out


def gated_notes(row: dict[str, Any], verdict: Verdict, metas: list[RewardMeta]) -> list[dict[str, Any]]:
    """Agreements worth a note: the reader says correct but malformed, and a format-gated correctness
    reward gives no credit — by design (correct+formatted > formatted-wrong > malformed), not a bug."""
    rewards, passes = row.get("rewards", {}), row.get("passes", {})
    return [{"id": row["id"], "reward": m.name, "score": rewards.get(m.name),
             "note": f"reader: correct but malformed; {m.name} gives no credit to malformed output by design "
                     "(gated on format), so this is agreement"}
            for m in metas if m.role == "correctness" and _gated_excuse(m, verdict)
            and rewards.get(m.name) is not None and not passes.get(m.name)]


def confirm(run_dir: str | Path, user: str, statement: str | None, shown: list[str] | None = None) -> Path:
    """Record the person's confirmation of the agent's reading, bound to the current verdicts file and signed with
    the person's key; ``shown`` is what the command showed the person before they confirmed (kept in the record)."""
    run_dir = Path(run_dir)
    if not user.strip():
        raise UserError("empty --user", where="--user", fix="give the name of the person confirming")
    with locks.file_lock(run_dir / CONFIRMATION):  # the verdicts hashed are the verdicts counted
        return _write_confirmation(run_dir, user, statement, list(shown or []))


def _write_confirmation(run_dir: Path, user: str, statement: str | None, shown: list[str]) -> Path:
    verdicts = load_verdicts(run_dir)
    if not verdicts:
        raise UserError(f"no verdicts in {run_dir}", fix="record verdicts with `finetune inspect verdict` first")
    agent = sum(1 for v in verdicts.values() if not is_person(v))
    record = Confirmation(
        user=user.strip(), statement=statement or f"I reviewed the agent's reading of {agent} samples and confirm it.",
        time=now(), verdicts_sha256=sha256_file(run_dir / rundir.VERDICTS), agent_verdicts=agent,
        verdicts=len(verdicts), shown=shown)
    record.sig = personkey.sign("confirmation", record.payload())
    return jsonio.write_json(run_dir / CONFIRMATION, record.model_dump(mode="json", exclude_none=True))


def load_json(path: Path) -> Any:
    """A run file's JSON, or None when absent; unreadable / invalid → UserError naming the path."""
    if not path.exists():
        return None
    return jsonio.read_json(path)


# Flags no written reason can clear. A model that never succeeds gives every GRPO group identical
# rewards, so no advantage and no learning: the seed routes it back to SFT, and only a new base-success
# measurement (after SFT) can clear this flag.
UNWAIVABLE_FLAGS = {
    "base_never_succeeds": "the model never succeeds on the task, so GRPO has nothing to sharpen "
                           "(RL re-weights what already works; it does not install a skill)",
}


class Confirmation(BaseModel):
    """confirmation.json as `finetune inspect confirm` writes it; anything else is bad input."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)

    user: str = Field(min_length=1, pattern=r"\S")
    """the person who confirmed"""
    statement: str = Field(min_length=1)
    """what the person confirmed, in words"""
    time: str = Field(min_length=1)
    """stamped by the command"""
    verdicts_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """sha256 of verdicts.jsonl as confirmed: a later verdict voids the confirmation"""
    agent_verdicts: int = Field(ge=0)
    """the agent's verdicts confirmed"""
    verdicts: int = Field(ge=1)
    """all counted verdicts"""
    shown: list[str] = Field(default_factory=list, description="what the command showed the person first")
    sig: str | None = Field(default=None, description="HMAC under the person's key (personkey.py)")

    def payload(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True, exclude={"sig"})

    def signed(self) -> bool:
        """Recorded by the person's command (its signature checks under the person's key)."""
        return personkey.verify("confirmation", self.payload(), self.sig)


class Ack(BaseModel):
    """One entry of acks.json as `finetune inspect ack` writes it: bound to the flag it waived."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)

    reason: str = Field(min_length=MIN_ACK_REASON_CHARS)
    """the person's written reason (at least `verdicts.MIN_ACK_REASON_CHARS` characters)"""
    by: str = Field(min_length=1)
    """the person who acknowledged"""
    time: str = Field(min_length=1)
    """stamped by the command"""
    flag_sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="digest of the flag as the score report "
                             "stated it when acknowledged; a changed flag needs a new acknowledgement")
    flag: str | None = Field(default=None, description="the flag's id (part of what the signature covers)")
    sig: str | None = Field(default=None, description="HMAC under the person's key (personkey.py)")

    def payload(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True, exclude={"sig"})

    def signed(self, flag_id: str) -> bool:
        """Recorded by the person's command for this very flag (an ack moved to another flag's key fails)."""
        return self.flag == flag_id and personkey.verify("ack", self.payload(), self.sig)


def _validated(path: Path, model: type[BaseModel], data: Any, what: str, fix: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(x) for x in err["loc"]) or "(top level)"
        raise UserError(f"{what}: {field}: {err['msg']}", where=str(path), fix=fix) from None


def load_confirmation(run_dir: str | Path) -> Confirmation | None:
    """confirmation.json validated against what `inspect confirm` writes (None when absent)."""
    path = Path(run_dir) / CONFIRMATION
    data = load_json(path)
    if data is None:
        return None
    fix = "delete it; the person runs `finetune inspect confirm RUN --user NAME` (never edit it by hand)"
    confirmation: Confirmation = _validated(path, Confirmation, data,
                                            "not a confirmation written by `finetune inspect confirm`", fix)
    return confirmation


def flag_digest(flag: dict[str, Any]) -> str:
    """sha256 of a flag as the score report states it (what an acknowledgement is bound to)."""
    return hashlib.sha256(canonical_json({k: v for k, v in flag.items() if k not in ("status", "ack")})).hexdigest()


def load_acks(run_dir: str | Path) -> dict[str, Ack]:
    """acks.json validated against what `inspect ack` writes; a hand-written entry is bad input."""
    path = Path(run_dir) / ACKS
    data = load_json(path)
    if data is None:
        return {}
    fix = "delete it; the person acknowledges with `finetune inspect ack RUN FLAG --reason TEXT` (never by hand)"
    if not isinstance(data, dict):
        raise UserError(f"acks.json must be a JSON object, found {type(data).__name__}", where=str(path), fix=fix)
    return {str(k): _validated(path, Ack, v, f"acknowledgement '{k}' was not written by `finetune inspect ack`",
                               fix) for k, v in data.items()}


def acks_for(run_dir: str | Path, flags: list[dict[str, Any]]) -> dict[str, Ack]:
    """The acknowledgements that hold for these flags: valid, signed by the person, waivable, and bound to the
    flag as it is now.

    The one validator the gate and verify_gate call: an ack of a flag whose evidence changed since (new
    samples, a new reward) no longer counts, nor does one the person's key did not sign.
    """
    acks = load_acks(run_dir)
    out: dict[str, Ack] = {}
    for f in flags:
        fid = f.get("id")
        ack = acks.get(fid) if isinstance(fid, str) else None
        if (ack and isinstance(fid, str) and fid not in UNWAIVABLE_FLAGS and ack.flag_sha256 == flag_digest(f)
                and ack.signed(fid)):
            out[fid] = ack
    return out


def check_ack(flag_id: str, reason: str, by: str | None, flags: list[dict[str, Any]],
              probe_ids: list[str]) -> dict[str, Any]:
    """The flag an acknowledgement would waive, or UserError: passing probes cannot be waived (probes contract),
    nor the unwaivable flags, nor an unknown flag; the reason is a sentence."""
    known_flags = [f["id"] for f in flags]
    if flag_id in probe_ids or flag_id.startswith("probe:"):
        raise UserError(f"'{flag_id}' is a hack probe; a passing probe cannot be waived", where=flag_id,
                        fix="fix the reward so the probe fails, then re-run `finetune inspect score`")
    if flag_id in UNWAIVABLE_FLAGS:
        raise UserError(f"'{flag_id}' cannot be acknowledged: {UNWAIVABLE_FLAGS[flag_id]}", where=flag_id,
                        fix="go back to SFT (skills/lora-qlora-recipes), then sample and score again")
    if flag_id not in known_flags:
        raise UserError(f"no red flag '{flag_id}' in the score report", where=flag_id,
                        fix="one of: " + (", ".join(known_flags) or "(none: nothing to acknowledge)"))
    if len(reason.strip()) < MIN_ACK_REASON_CHARS:
        raise UserError(f"reason too short ({len(reason.strip())} characters)", where="--reason",
                        fix=f"write why this flag is acceptable (at least {MIN_ACK_REASON_CHARS} characters)")
    if by is not None and not by.strip():
        raise UserError("empty --by", where="--by", fix="name who acknowledges it, or leave --by out")
    return next(f for f in flags if f["id"] == flag_id)


def acknowledge(run_dir: str | Path, flag_id: str, reason: str, by: str | None,
                flags: list[dict[str, Any]], probe_ids: list[str]) -> Path:
    """Acknowledge a red flag with the person's written reason, signed with the person's key."""
    run_dir = Path(run_dir)
    flag = check_ack(flag_id, reason, by, flags, probe_ids)
    entry = Ack(reason=reason.strip(), by=(by or "unknown").strip(), time=now(), flag_sha256=flag_digest(flag),
                flag=flag_id)
    entry.sig = personkey.sign("ack", entry.payload())
    with locks.file_lock(run_dir / ACKS):  # re-read under the lock: a concurrent ack is not lost
        acks = load_acks(run_dir)
        acks[flag_id] = entry
        return jsonio.write_json(run_dir / ACKS, {k: a.model_dump(mode="json", exclude_none=True)
                                                  for k, a in acks.items()})


def later(a: Any, b: Any) -> bool:
    """Was ISO time ``a`` recorded after ``b``, as far as their resolution tells? (False when either is missing
    or unreadable.) Equal times count as after: a verdict stamped in the same instant as a reveal cannot be
    shown to come first. A time without fractional seconds (an older record, a hand-written one) is compared
    at whole seconds, so its truncation cannot place it before a reveal it followed.

    >>> later("2026-01-01T10:00:05+00:00", "2026-01-01T10:00:05.300000+00:00")
    True
    >>> later("2026-01-01T10:00:05.100000+00:00", "2026-01-01T10:00:05.300000+00:00")
    False
    """
    try:
        ta, tb = (datetime.fromisoformat(str(t)) for t in (a, b))
    except ValueError:
        return False
    ta, tb = (t if t.tzinfo else t.replace(tzinfo=timezone.utc) for t in (ta, tb))
    if not (ta.microsecond and tb.microsecond):
        ta, tb = ta.replace(microsecond=0), tb.replace(microsecond=0)
    return ta >= tb
