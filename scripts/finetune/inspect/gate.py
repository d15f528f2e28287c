"""The gate: PASS only when the reward and a careful reading agree (DESIGN.md: the reward-roles, probes and
gate-record contracts).

PASS needs: at least ``inspection.min_read`` scored samples read; zero disagreements between reward
and reading; every red flag fixed or acknowledged with a written reason; no hack probe passing; and
a person's reading (a ``human`` reader, or the user's recorded confirmation of an agent-only reading).
The record (gate.json) binds :func:`finetune.hashing.bound_hashes`; :func:`verify_gate` re-hashes, so
any later change to rewards.py, its helpers, the scored samples, the verdicts or the spec's reward
section voids the PASS.

:func:`verify_gate` (``rescore=False``) says whether a PASS still holds: no module in the run directory named like
a standard-library or installed package (``hashing.shadowing_modules``: RUN/math_verify.py would replace the real
one; train.py's ``check_no_shadows()`` refuses the same), the bound hashes, every extra input (one that appears
after the PASS — acks.json, confirmation.json — voids it too), the score report's own binding
(``score.report_is_current``) and a re-judgement of the bound files (an edited FAIL status stays a FAIL). With
``rescore=True`` (``config render``, ``data filter``) the re-judgement re-runs the bound rewards on the bound
samples, isolated and caches off, so a hand-assembled gate.json with every hash recomputed fails there;
``status`` checks hashes only. ``inspect gate`` runs under the run directory's lock, snapshots the bound hashes
before judging and FAILs when any differs after its re-score; it PASSes only when its own re-score
(:func:`rescore_differences`) equals scored.jsonl and score_report.json. A FAIL (or a re-score the reward code
aborts) replaces an earlier PASS: the latest judgement holds. A PASS on a reading that was not blind stays a PASS
(blindness cannot be proven while scored.jsonl is readable), but ``inspect gate`` prints so first and offers the
fresh set. Every field of gate.json: references/formats.md.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from finetune import __version__, commit, jsonio, rundir
from finetune.errors import UserError
from finetune.hashing import INSPECTION, SAMPLING, bound_hashes, sha256_file
from finetune.inspect import bounds as B
from finetune.inspect import readingset
from finetune.inspect import verdicts as V
from finetune.inspect.gaterecord import (
    Blind,
    Bound,
    Cause,
    Counts,
    Disagreement,
    GatedAgreement,
    GateRecord,
    HistoryEntry,
    Paths,
    Replaced,
    Samples,
    load_record,
    old_schema,
)
from finetune.rewards.lib.rewards_meta import RewardMeta

if TYPE_CHECKING:
    from finetune.spec import RunSpec

# Files the gate judged but that the gate-record contract does not bind; recorded and re-checked by verify_gate too,
# so editing the samples or the report behind the gate's back is caught.
EXTRA_INPUTS = (rundir.SAMPLES, rundir.BASE_SAMPLES, rundir.SCORE_REPORT, V.CONFIRMATION, V.ACKS, readingset.FILE)
# The person's acts and the records that state them: a config rendered while they said one thing is void once any
# changes (the rendered train.py refuses, `inspect verify` and `status` say so); the diagnosis carries the licence.
PERSON_ACTS = (rundir.GATE, rundir.VERDICTS, V.ACKS, V.CONFIRMATION, rundir.DIAGNOSIS)


Row = dict[str, Any]  # a scored.jsonl row / score-report entry (their shapes: runfiles.py)


@dataclass
class GateCheck:
    """Whether a PASS gate record still holds for the files in the run directory."""

    ok: bool
    reason: str
    record: GateRecord | None = field(default=None)


def _snapshot(run_dir: Path, spec: RunSpec) -> tuple[dict[str, str], dict[str, str]]:
    """(bound hashes, extra input hashes) of the files now."""
    return bound_hashes(run_dir, spec.reward_section(), **spec.binding()), _input_hashes(run_dir)


def _moved(run_dir: Path, spec: RunSpec, hashes: dict[str, str], inputs: dict[str, str]) -> list[str]:
    """The files whose hash differs from the snapshot ``(hashes, inputs)`` taken before judging."""
    now_h, now_i = _snapshot(run_dir, spec)
    return sorted({k for a, b in ((hashes, now_h), (inputs, now_i)) for k in set(a) | set(b) if a.get(k) != b.get(k)})


def _input_hashes(run_dir: Path) -> dict[str, str]:
    return {n: sha256_file(run_dir / n) for n in EXTRA_INPUTS if (run_dir / n).is_file()}


def person_acts(run_dir: str | Path, licensed: bool = True) -> dict[str, str | None]:
    """sha256 of each of :data:`PERSON_ACTS` now (None: absent): what a render binds into train.py. The diagnosis
    only when the render took a licence from it (``licensed``): re-diagnosing a base run voids nothing."""
    run_dir = Path(run_dir)
    names = [n for n in PERSON_ACTS if licensed or n != rundir.DIAGNOSIS]
    return {n: sha256_file(run_dir / n) if (run_dir / n).is_file() else None for n in names}


def render_void(run_dir: str | Path) -> str:
    """'' when config/train.py was rendered from the person's acts as they are now (or there is no config, or it is
    an ungated preview); else one line naming what changed after the render."""
    import ast

    path = Path(run_dir) / rundir.CONFIG_DIR / "train.py"
    if not path.is_file():
        return ""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        rendered = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                        and any(isinstance(t, ast.Name) and t.id == "PERSON_ACTS" for t in n.targets))
    except (OSError, SyntaxError, ValueError, StopIteration):
        return f"{path} states no PERSON_ACTS (rendered by another version, or edited): re-run `finetune config render`"
    if not isinstance(rendered, dict) or not rendered:
        return ""  # an ungated preview binds no person's act (its train.py refuses beyond a smoke test anyway)
    now = person_acts(run_dir, licensed=rundir.DIAGNOSIS in rendered)
    changed = sorted(k for k in set(rendered) | set(now) if rendered.get(k) != now.get(k))
    if not changed:
        return ""
    return (f"{', '.join(changed)} changed after config/ was rendered: a verdict, acknowledgement, confirmation or "
            "licence that changes voids the render; re-run `finetune inspect gate` and `finetune config render`")


def _versions() -> dict[str, str]:
    out = {"llm-finetuning": __version__}
    for pkg in ("trl", "transformers", "torch"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def listing(items: list[str], limit: int = 8) -> str:
    """``items`` joined, complete or ending "and N more — see gate.json" (never silently cut)."""
    shown = ", ".join(items[:limit])
    return shown if len(items) <= limit else f"{shown} and {len(items) - limit} more — see gate.json"


def group_causes(disagreements: list[Row], rows: dict[str, Row],
                 metas: list[RewardMeta] | None = None) -> list[Row]:
    """Disagreements grouped by cause: kind, reward and the reason id the reward logged
    for the row (``<name>/why``), largest group first, each with example ids, the human text and the
    spec field that changes that judgement (or that the reward needs ``type: python``)."""
    from finetune.rewards.registry import explain

    types = {m.name: m.type for m in metas or []}
    groups: dict[tuple[str, str, str], list[str]] = {}
    for d in disagreements:
        for name in d["rewards"] or ["?"]:
            why = (rows.get(d["id"], {}).get("why") or {}).get(name) or "unexplained"
            ids = groups.setdefault((d["kind"], name, why), [])
            if d["id"] not in ids:
                ids.append(d["id"])
    out = []
    for (kind, name, why), ids in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        reward_type = types.get(name)
        if why == "unexplained" and reward_type is None:
            text, fix = "the reward logged no reason for these rows", "read the reward's code (rewards.py)"
        else:
            text, fix = explain(why, reward_type)  # the fix for that reward kind
        words = kind.replace("_", " ") + ("s" if len(ids) > 1 else "")
        out.append({"kind": kind, "reward": name, "reason": why, "count": len(ids), "examples": ids[:5],
                    "text": text, "fix": fix,
                    "summary": f"{len(ids)} {words} of '{name}': {text} (e.g. {', '.join(ids[:3])}) — {fix}"})
    return out


def mirrors_rewards(read: list[V.Verdict], by_id: dict[str, Row], metas: list[RewardMeta]) -> bool:
    """Is the reading the rewards' view, field for field, on every sample, with not one note?

    scored.jsonl is readable by whoever reads, so a blind reading cannot be proven; a reading that is a copy
    of the rewards' passes (every role's field given and equal, no note anywhere) is what copying looks like,
    and the gate says so for the person who confirms it."""
    if not read or any(v.note.strip() for v in read):
        return False
    for v in read:
        row = by_id[v.id]
        passes = row.get("passes", {})
        if v.accept != bool(row.get("all_pass")):
            return False
        for attr, role in (("correct", "correctness"), ("well_formed", "format")):
            names = [m.name for m in metas if m.role == role]
            said = getattr(v, attr)
            if names and (said is None or said != all(bool(passes.get(n)) for n in names)):
                return False
    return True


def _blind_record(run_dir: Path, read: list[V.Verdict]) -> dict[str, Any]:
    """Which read samples' scores the reader saw before or after judging (reveals.json + the verdicts).

    judged_after_reveal: the recorded verdict is newer than the reveal and carries no first (blind)
    verdict; changed_after_reveal: the reader changed a blind verdict after seeing the rewards."""
    reveals = V.load_reveals(run_dir)
    after = [v.id for v in read if v.id in reveals and v.first_verdict is None
             and V.later(v.time, reveals[v.id].time)]
    return {"revealed": sum(v.id in reveals for v in read), "judged_after_reveal": after,
            "changed_after_reveal": [v.id for v in read if v.changed_after_reveal]}


def _canonical(value: Any) -> str:
    """JSON text for comparing a re-score with what was written (non-finite numbers as null, as written)."""
    def clean(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {str(k): clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        return v

    return json.dumps(clean(value), sort_keys=True, ensure_ascii=True)


def rescore_differences(run_dir: Path, spec: RunSpec, rows: list[Row], report: Row) -> list[str]:
    """Re-run the scoring (isolated, caches off) and say where scored.jsonl / score_report.json differ.

    The gate trusts neither file: a PASS needs the reward, run now, to give exactly the scores the
    reader's verdicts were compared with, and exactly the report's flags and probes.
    """
    from finetune.inspect.score import compute_isolated

    new_rows, new_report = compute_isolated(run_dir, spec, caches=False)
    out: list[str] = []
    written = {str(r.get("id")): r for r in rows}
    fresh = {str(r.get("id")): r for r in new_rows}
    differing = sorted(k for k in set(written) | set(fresh)
                       if k not in written or k not in fresh or _canonical(written[k]) != _canonical(fresh[k]))
    if differing or len(rows) != len(new_rows):
        example = differing[0] if differing else "-"
        fields = sorted(f for f in set(written.get(example, {})) | set(fresh.get(example, {}))
                        if _canonical(written.get(example, {}).get(f)) != _canonical(fresh.get(example, {}).get(f)))
        out.append(f"{rundir.SCORED} does not match the gate's own re-score of rewards.py on {len(differing)} "
                   f"sample(s) (e.g. {example}: {', '.join(fields) or 'missing'}); re-run `finetune inspect score`")
    keys = [k for k in dict.fromkeys([*report, *new_report]) if k != "scored_sha256"]
    bad = [k for k in keys if _canonical(report.get(k)) != _canonical(new_report.get(k))]
    if bad:
        out.append(f"{rundir.SCORE_REPORT} does not match the gate's own re-score ({', '.join(bad)} differ); "
                   "re-run `finetune inspect score`")
    return out


@dataclass
class Reading:
    """The verdicts that count (each for the very sample it judged) and how they compare with the rewards, and
    the history of the samples read (every verdict recorded on them, and the disagreements a later one replaced)."""

    read: list[V.Verdict]
    stale: list[str]
    disagreements: list[Row] = field(default_factory=list)
    gated_agreements: list[Row] = field(default_factory=list)
    causes: list[Row] = field(default_factory=list)
    history: list[Replaced] = field(default_factory=list)


def _score_reasons(run_dir: Path, spec: RunSpec, rows: list[Row], report: Row, rescore: bool) -> list[str]:
    """The score report must match the files now, and (with ``rescore``) a fresh isolated re-score."""
    from finetune.inspect.score import report_is_current

    changed = report_is_current(run_dir, spec, report)
    if changed:
        return [f"the score report is stale ({changed}); re-run `finetune inspect score`"]
    return rescore_differences(run_dir, spec, rows, report) if rescore else []


def verdicts_against(run_dir: Path, by_id: dict[str, Row], metas: list[RewardMeta]) -> Reading:
    """A verdict counts only for the very sample it judged (same prompt, completion and gold)."""
    lines = V.verdict_history(run_dir)
    verdicts = V.effective(lines)
    read = [v for k, v in verdicts.items() if k in by_id and v.sample_sha256 == V.sample_digest(by_id[k])]
    out = Reading(read, sorted(set(verdicts) - {v.id for v in read}))
    for v in read:
        out.disagreements.extend(V.compare(by_id[v.id], v, metas))
        out.gated_agreements.extend(V.gated_notes(by_id[v.id], v, metas))
    out.causes = group_causes(out.disagreements, by_id, metas)
    out.history = _history(lines, read, by_id, metas)
    return out


def _history(lines: list[V.Verdict], read: list[V.Verdict], by_id: dict[str, Row],
             metas: list[RewardMeta]) -> list[Replaced]:
    """Every sample read on which more than one verdict was recorded (on the sample as it is now): each verdict in
    order, who recorded it and how, and the disagreements with the rewards that a later verdict replaced."""
    out = []
    for v in read:
        same = [x for x in lines if x.id == v.id and x.sample_sha256 == v.sample_sha256]
        if len(same) < 2:
            continue
        now = {_said(d) for d in V.compare(by_id[v.id], v, metas)}
        entries, gone = [], []
        for x in same:
            said = [_said(d) for d in V.compare(by_id[v.id], x, metas)]
            gone += [d for d in said if d not in now and d not in gone]
            entries.append(HistoryEntry(accept=x.accept, correct=x.correct, well_formed=x.well_formed, reader=x.reader,
                                        via=x.via, by=x.by, time=x.time, person=V.is_person(x), counts=x is v,
                                        disagreed=said))
        out.append(Replaced(id=v.id, verdicts=entries, replaced_disagreements=gone))
    return out


def _said(d: Row) -> str:
    return f"{d['kind']}:{d['field']}:{','.join(d['rewards'])}"


def _reading_reasons(n_rows: int, reading: Reading, min_read: int, current: set[str]) -> list[str]:
    """``current``: the ids the reading covers (all but the held-back samples, or those after `review --fresh`);
    min_read counts verdicts there, disagreements count on every sample read."""
    reasons: list[str] = []
    if n_rows < min_read:
        reasons.append(f"only {n_rows} samples in the reading but {min_read} must be read; sample more "
                       "(inspection.prompts × inspection.per_prompt)")
    if sum(v.id in current for v in reading.read) < min_read:
        stale = reading.stale
        reasons.append(f"{sum(v.id in current for v in reading.read)} of the required {min_read} samples read"
                       + (f" ({len(stale)} verdict(s) judged samples that changed or are gone since)" if stale else ""))
    if reading.disagreements:
        fp = sum(d["kind"] == "false_positive" for d in reading.disagreements)
        fn = len(reading.disagreements) - fp
        reasons.append(f"{len(reading.disagreements)} disagreement(s) between reward and reading: {fp} false "
                       f"positive (reward-hacking risk), {fn} false negative (lost signal); fix the reward first")
        reasons += [c["summary"] for c in reading.causes]
    return reasons


def reading_bounds(reading: Reading, by_id: dict[str, Row], metas: list[RewardMeta], spec: RunSpec,
                   current: set[str]) -> list[Bound]:
    """Per reward and verdict field, exact one-sided bounds on precision and recall from the verdicts on the
    current reading (drawn uniformly, independent of the rewards' verdicts: what an exact bound needs), with the
    spec's floors and how much more reading they need."""
    read = [v for v in reading.read if v.id in current]
    ins = spec.inspection
    return [Bound(**B.bound_entry(t, ins.min_recall, ins.min_precision)) for t in B.tallies(read, by_id, metas)]


def _flag_statuses(run_dir: Path, report: Row) -> tuple[list[Row], list[str]]:
    """Each flag open or acknowledged (acks schema-checked, signed by the person, bound to the flag as stated,
    never unwaivable)."""
    acks = V.acks_for(run_dir, report.get("flags", []))
    flags = []
    for f in report.get("flags", []):
        ack = acks.get(f["id"])
        flags.append({**f, "status": "acknowledged" if ack else "open",
                      **({"ack": ack.model_dump(mode="json", exclude_none=True)} if ack else {})})
    open_flags = [f["id"] for f in flags if f["status"] == "open"]
    if not open_flags:
        return flags, []
    return flags, [f"{len(open_flags)} red flag(s) neither fixed nor acknowledged: {listing(open_flags)}"]


def _probe_statuses(report: Row) -> tuple[list[Row], list[str]]:
    probes = [{k: p.get(k) for k in ("id", "probe", "row", "target", "passing", "passed_by", "scores")}
              for p in report.get("probes", [])]
    passing = [p["id"] for p in probes if p["passing"]]
    if not passing:
        return probes, []
    return probes, [f"{len(passing)} hack probe(s) pass a reward (cannot be waived): {listing(passing)}"]


def _confirmation(run_dir: Path, agents: int) -> tuple[V.Confirmation | None, bool, list[str]]:
    """(confirmation record, confirmed?, reasons): an agent's reading needs the person's confirmation of
    exactly these verdicts, signed by the person's key (their own command recorded it)."""
    confirmation = V.load_confirmation(run_dir)
    if not agents:
        return confirmation, False, []
    if not confirmation:
        return None, False, [(f"{agents} verdict(s) were read by an agent and the user has not confirmed the "
                             "reading: the person runs `finetune inspect confirm RUN --user NAME` after checking it")]
    if confirmation.verdicts_sha256 != sha256_file(run_dir / rundir.VERDICTS):
        return confirmation, False, ["the user's confirmation predates the current verdicts; confirm again"]
    if not confirmation.signed():
        return confirmation, False, [f"{V.CONFIRMATION} is not signed by the person's key (only `finetune inspect "
                                     "confirm`, run by the person, records a confirmation); the person confirms again"]
    return confirmation, True, []


def _paths(read: list[V.Verdict]) -> Paths:
    """Which path each counted verdict was recorded through: a person's (``human-verdict``, ``terminal``, signed)
    or the agent's pre-approved ``verdict`` (also where a line says ``human`` or names a person's path without the
    person's signature)."""
    by_path: dict[str, list[str]] = {}
    for v in read:
        by_path.setdefault(str(v.via) if V.is_person(v) else V.AGENT_PATH, []).append(v.id)
    declared = [v.id for v in read if (v.reader == "human" or v.via in V.PERSON_PATHS) and not V.is_person(v)]
    return Paths(counts={k: len(ids) for k, ids in sorted(by_path.items())}, ids=by_path,
                 human_declared_not_established=declared)


def _counts(n_rows: int, reading: Reading, min_read: int, humans: int) -> Counts:
    read = reading.read
    return Counts(scored=n_rows, read=len(read), min_read=min_read, stale_verdicts=len(reading.stale),
                  agreed=len(read) - len({d["id"] for d in reading.disagreements}),
                  disagreements=len(reading.disagreements), gated_agreements=len(reading.gated_agreements),
                  human=humans, agent=len(read) - humans,
                  replaced=sum(len(h.verdicts) - 1 for h in reading.history))


def samples_source(run_dir: Path) -> Samples:
    """Where the samples came from (sample_info.json): an import names its file and whether the agent could write
    it; an unreadable or missing info is ``unknown``."""
    path = run_dir / readingset.SAMPLE_INFO
    try:
        info = V.load_json(path) if path.is_file() else None
    except UserError:
        info = None
    if not isinstance(info, dict):
        return Samples(source="unknown")
    imported = info.get("imported")
    if not isinstance(imported, dict):
        return Samples(source="sampled")
    writable = imported.get("agent_writable")
    return Samples(source="imported", file=str(imported.get("file")), sha256=str(imported.get("sha256")),
                   agent_writable=writable if isinstance(writable, bool) else None)


def evaluate(run_dir: str | Path, spec: RunSpec, rescore: bool = True,
             extra_reasons: Sequence[str] = ()) -> GateRecord:
    """Judge the run directory; return the gate record (status PASS or FAIL with reasons).

    With ``rescore`` (always, from the CLI) rewards.py is run again on the samples in an isolated
    child and must reproduce scored.jsonl and score_report.json exactly. ``extra_reasons`` are the
    caller's own reasons to FAIL (a checkpoint set whose reward copy is not the run's).
    """
    from finetune.inspect.score import load_report, load_scored, report_metas

    run_dir = Path(run_dir)
    # what is bound is read before anything is judged, and again after the re-score: a file swapped while
    # the gate ran (the re-score takes seconds) FAILs it, so the record never binds bytes it did not judge
    hashes, inputs = _snapshot(run_dir, spec)
    report = load_report(run_dir)
    rows = load_scored(run_dir)
    by_id = {r["id"]: r for r in rows}
    # the reading, the acknowledgements and the confirmation are read (a bad one refused in one line) before the
    # re-score, which takes seconds: bad input is refused at once
    metas = report_metas(report, run_dir)
    reading = verdicts_against(run_dir, by_id, metas)
    min_read = spec.inspection.min_read
    current = readingset.reading_ids(run_dir, [str(r["id"]) for r in rows])
    flags, flag_reasons = _flag_statuses(run_dir, report)
    probes, probe_reasons = _probe_statuses(report)
    humans = sum(V.is_person(v) for v in reading.read)
    agents = len(reading.read) - humans
    confirmation, confirmed, confirm_reasons = _confirmation(run_dir, agents)
    reasons = _score_reasons(run_dir, spec, rows, report, rescore)
    moved = _moved(run_dir, spec, hashes, inputs)
    if moved:
        reasons.append(f"{', '.join(moved)} changed while the gate ran; run `finetune inspect gate` again")
    reasons += _reading_reasons(len(current), reading, min_read, current)
    reward_bounds = reading_bounds(reading, by_id, metas, spec, current)
    reasons += B.floor_reasons([b.model_dump() for b in reward_bounds])
    reasons += flag_reasons + probe_reasons + confirm_reasons + _sampled_with(run_dir, spec) + list(extra_reasons)
    blind = Blind(**_blind_record(run_dir, reading.read),
                  **readingset.blind_record(run_dir, reading.read, current).model_dump(),
                  mirrors_rewards=mirrors_rewards(reading.read, by_id, metas))
    return GateRecord(
        status="FAIL" if reasons else "PASS", reasons=reasons, hashes=hashes, inputs=inputs,
        sampling=spec.sampling_binding(),  # what hashes[SAMPLING] binds, so a change can be named
        counts=_counts(len(rows), reading, min_read, humans),
        disagreements=[Disagreement(**d) for d in reading.disagreements],
        causes=[Cause(**c) for c in reading.causes], bounds=reward_bounds,
        gated_agreements=[GatedAgreement(**g) for g in reading.gated_agreements],
        history=reading.history, blind=blind, flags=flags, probes=probes,
        base_success=report.get("base_success"),
        tests=report.get("tests", []),  # visible / hidden tests per row of each unit_tests reward
        readers=sorted({"human" if V.is_person(v) else "agent" for v in reading.read}),
        paths=_paths(reading.read), samples=samples_source(run_dir),
        confirmation=confirmation if agents else None, confirmed=confirmed, versions=_versions(), time=V.now())


# files judged from a gate record and committed with it (a checkpoint set's comparison): (write, remove)
Companions = Callable[[GateRecord], tuple[Mapping[str, str], tuple[str, ...]]]


def write_gate_record(run_dir: str | Path, record: GateRecord, files: Mapping[str, str | bytes] | None = None,
                      remove: tuple[str, ...] = ()) -> Path:
    """Write gate.json (a FAIL replaces an earlier PASS: the latest judgement holds) together with ``files``
    derived from it and without ``remove``, as one commit (:func:`finetune.commit.commit_files`)."""
    run_dir = Path(run_dir)
    commit.commit_files(run_dir, {rundir.GATE: jsonio.json_text(run_dir / rundir.GATE, record.dump()),
                                  **(files or {})}, remove=remove)
    return run_dir / rundir.GATE


def verify_gate(run_dir: str | Path, spec: RunSpec, rescore: bool = False) -> GateCheck:
    """Does a PASS gate record still hold? Re-hashes everything the record binds.

    With ``rescore`` (what config render and data filter ask) the bound rewards are run again on the bound
    samples, isolated and caches off, as the gate did: hashes alone are forgeable by anyone who can write
    the run folder (copy a good run's scored files, recompute every hash), a re-score is not."""
    run_dir = Path(run_dir)
    path = run_dir / rundir.GATE
    if not path.is_file():
        return GateCheck(False, f"no gate record ({path}); run `finetune inspect gate {run_dir}`")
    try:
        data = V.load_json(path)
        stale = old_schema(data)
        if stale:
            return GateCheck(False, stale)
        record = load_record(path)
    except UserError as exc:
        return GateCheck(False, f"unreadable gate record: {exc.line()}")
    if record.status != "PASS":
        return GateCheck(False, f"the gate record says {record.status}, not PASS", record)
    from finetune.hashing import shadowing_modules

    shadows = shadowing_modules(run_dir)
    if shadows:
        return GateCheck(False, f"{', '.join(shadows)} in {run_dir} would stand in for the library of that name in "
                         "a reward process; remove it (a reward's own code lives in the spec)", record)
    bound = record.hashes
    now_hashes = bound_hashes(run_dir, spec.reward_section(), **spec.binding())
    changed = sorted(k for k in set(bound) | set(now_hashes) if bound.get(k) != now_hashes.get(k))
    inputs = record.inputs
    now_inputs = _input_hashes(run_dir)  # a file added after the PASS (acks.json, confirmation.json) counts too
    changed += sorted(k for k in set(inputs) | set(now_inputs) if inputs.get(k) != now_inputs.get(k))
    if SAMPLING in changed:
        return GateCheck(False, sampling_changed(record, spec), record)
    if INSPECTION in changed:
        return GateCheck(False, inspection_changed(), record)
    if changed:
        return GateCheck(False, "changed since the gate PASSed: " + ", ".join(changed)
                         + "; re-run `finetune inspect score` and `finetune inspect gate`", record)
    stale = _report_binding(run_dir, spec)
    if stale:
        return GateCheck(False, f"the score report no longer matches the files it scored ({stale}); re-run "
                         "`finetune inspect score` and `finetune inspect gate`", record)
    try:  # re-judge from the bound files: a FAIL record whose status was edited stays a FAIL
        again = evaluate(run_dir, spec, rescore=rescore)
    except UserError as exc:
        return GateCheck(False, f"the gate's inputs cannot be re-read: {exc.line()}", record)
    if again.status != "PASS":
        return GateCheck(False, "the files the record binds do not PASS the gate: " + "; ".join(again.reasons),
                         record)
    return GateCheck(True, "gate PASS holds: rewards, scored samples, verdicts and reward spec unchanged", record)


def inspection_changed() -> str:
    """One line: the inspection section (training's live hacking stop) is not the one the gate PASSed with."""
    return ("the spec's inspection section changed since the gate PASSed (spec:inspection: inspection.every_steps "
            "sets how often training's live hacking stop samples); restore it, or re-run `finetune inspect gate`")


def sampling_changed(record: GateRecord, spec: RunSpec) -> str:
    """One line: which of the system prompt / generation settings differ from what the gate PASSed with."""
    was = record.sampling
    if not isinstance(was, dict):
        return ("this gate record predates the binding of the system prompt and generation settings; re-run "
                "`finetune inspect gate` (re-sample with `finetune inspect sample` first if they changed)")
    now = spec.sampling_binding()
    recorded = was.get("generation")
    generation: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
    flat_was = {"dataset.system_prompt": was.get("system_prompt"),
                **{f"generation.{k}": v for k, v in generation.items()}}
    flat_now = {"dataset.system_prompt": now["system_prompt"],
                **{f"generation.{k}": v for k, v in now["generation"].items()}}
    diffs = [f"{k} {flat_was.get(k)!r} → {flat_now.get(k)!r}" for k in flat_now if flat_was.get(k) != flat_now.get(k)]
    what = ", ".join(diffs) or "the system prompt or generation settings"
    return (f"the samples the gate PASSed were drawn with other sampling settings ({what}); re-sample "
            "(`finetune inspect sample`), re-score, read and re-run `finetune inspect gate`, or restore the spec")


def _sampled_with(run_dir: Path, spec: RunSpec) -> list[str]:
    """A reason when sample_info.json records generation settings other than the spec's (imports record none)."""
    path = run_dir / "sample_info.json"
    if not path.is_file():
        return []
    try:
        info = V.load_json(path)
    except UserError:
        return []  # the score report's binding re-checks the samples; an unreadable info is not a sampling record
    recorded = info.get("generation") if isinstance(info, dict) else None
    if not isinstance(recorded, dict) or recorded == spec.generation.model_dump(mode="json"):
        return []
    keys = sorted(k for k in set(recorded) | set(spec.generation.model_dump(mode="json"))
                  if recorded.get(k) != getattr(spec.generation, k, None))
    return [f"samples.jsonl was drawn with generation settings other than the spec's ({', '.join(keys)}); "
            "re-sample (`finetune inspect sample`) and score again"]


def _report_binding(run_dir: Path, spec: RunSpec) -> str:
    """'' when score_report.json was computed from the rewards, spec section and samples there now."""
    from finetune.inspect.score import load_report, report_is_current

    try:
        return report_is_current(run_dir, spec, load_report(run_dir))
    except UserError as exc:
        return exc.what
    except (AttributeError, TypeError):
        return f"{rundir.SCORE_REPORT} is not a score report"


def run_gate(run_dir: str | Path, spec: RunSpec, extra_reasons: Sequence[str] = (),
             companions: Companions | None = None) -> GateRecord:
    """Judge and write gate.json; ``companions(record)`` names files committed with it (a set's comparison)."""
    from finetune import locks

    with locks.file_lock(Path(run_dir)):  # no score, verdict, confirm or ack lands while the gate judges
        return _run_gate_locked(run_dir, spec, extra_reasons, companions)


def _run_gate_locked(run_dir: str | Path, spec: RunSpec, extra_reasons: Sequence[str],
                     companions: Companions | None) -> GateRecord:
    from finetune.inspect.isolate import RewardAborted

    try:
        record = evaluate(run_dir, spec, extra_reasons=extra_reasons)
    except RewardAborted as exc:
        # the re-score could not run (the reward code exited): an earlier PASS must not survive it
        if (Path(run_dir) / rundir.GATE).is_file():
            failed = GateRecord(status="FAIL", reasons=[exc.line()], versions=_versions(), time=V.now())
            write_gate_record(run_dir, failed, *(companions(failed) if companions else ({}, ())))
        raise
    write_gate_record(run_dir, record, *(companions(record) if companions else ({}, ())))
    return record
