"""What a person's command will record, said to the person before it records (DESIGN.md, "The person's act").

Every route to a PASS that is not the agent's passes through one of the person's commands — ``inspect
human-verdict`` (their verdicts, from review.html's export), the terminal review, ``inspect confirm`` (their
confirmation of the agent's reading), ``inspect ack`` (their reason for waiving a red flag) — and each first shows
what it will record: how many verdicts, which disagree with the rewards, which earlier verdicts it replaces (and
which disagreements those held), where the file came from. The command then records only after the person says
yes (on their terminal, or ``--yes`` on the same command line after reading these lines).

``inspect human-verdict`` takes only an export of the review page as it is now (:func:`check_export`): each line
carries the page's digest (a ``<meta name="finetune-page">`` of review.html, over the ids and sample digests the
page showed) and the digest of the sample it judged. The agent's reading.jsonl is not such an export.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from finetune import rundir
from finetune.errors import UserError
from finetune.hashing import canonical_json
from finetune.inspect import verdicts as V

if TYPE_CHECKING:
    from finetune.inspect.gaterecord import GateRecord

PAGE_META = "finetune-page"
_META = re.compile(r'<meta name="finetune-page" content="([0-9a-f]{64})">')


def page_digest(shown: list[tuple[str, str]]) -> str:
    """The review page's digest: the ids it showed with the digest of each sample, in the page's order."""
    return hashlib.sha256(canonical_json([list(p) for p in shown])).hexdigest()


def page_of(run_dir: str | Path) -> str | None:
    """The digest review.html states now (None: no page, or one written before pages carried it)."""
    path = Path(run_dir) / rundir.REVIEW_HTML
    if not path.is_file():
        return None
    found = _META.search(path.read_text(encoding="utf-8", errors="replace")[:20000])
    return found.group(1) if found else None


def check_export(run_dir: str | Path, lines: list[V.Verdict], source: str) -> str:
    """Refuse anything but an export of the review page as it is now; return the page's digest."""
    page = page_of(run_dir)
    fix = ("the person reads review.html (`finetune inspect review RUN --format html`) and exports their verdicts "
           "with its button (x), or reads in the terminal review (`--format terminal`)")
    if page is None:
        raise UserError(f"no review page in {run_dir} to check the export against", where=source, fix=fix)
    strays = [v.id for v in lines if v.page != page]
    if strays:
        what = ("not an export of the review page (no page digest)" if all(v.page is None for v in lines)
                else f"{len(strays)} line(s) were exported from another review page than the one there now")
        raise UserError(f"{what}, e.g. '{strays[0]}'", where=source, fix=fix)
    unbound = [v.id for v in lines if not v.sample_sha256]
    if unbound:
        raise UserError(f"line for '{unbound[0]}' names no sample digest: not as the review page exports it",
                        where=source, fix=fix)
    return page


def _disagreeing(run_dir: Path, verdicts: list[V.Verdict]) -> tuple[list[str], list[str]]:
    """(false positives, false negatives) of ``verdicts`` against the scores now, as sample ids."""
    from finetune.inspect.score import load_report, load_scored, report_metas

    rows = {r["id"]: r for r in load_scored(run_dir)}
    metas = report_metas(load_report(run_dir), run_dir)
    fp: list[str] = []
    fn: list[str] = []
    for v in verdicts:
        for d in V.compare(rows[v.id], v, metas) if v.id in rows else []:
            (fp if d["kind"] == "false_positive" else fn).append(v.id)
    return sorted(set(fp)), sorted(set(fn))


def _ids(ids: list[str], limit: int = 6) -> str:
    return ", ".join(ids[:limit]) + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def verdict_lines(run_dir: str | Path, new: list[V.Verdict], by: str, source: str, page: str) -> list[str]:
    """What `inspect human-verdict` will record: counts, disagreements, the verdicts it replaces, reveals."""
    run_dir = Path(run_dir)
    accept = sum(v.accept for v in new)
    out = [f"to record: {len(new)} verdict(s) of {by} as the person's own reading of {run_dir} — {accept} accept, "
           f"{len(new) - accept} reject (from {source}, an export of review page {page[:12]})"]
    fp, fn = _disagreeing(run_dir, new)
    out.append(f"disagreeing with the rewards: {len(fp)} false positive(s) (a reward passes what you reject)"
               + (f": {_ids(fp)}" if fp else "") + f"; {len(fn)} false negative(s)" + (f": {_ids(fn)}" if fn else ""))
    before = V.load_verdicts(run_dir)
    replaced = [before[v.id] for v in new if v.id in before]
    if replaced:
        people = sum(V.is_person(v) for v in replaced)
        rfp, rfn = _disagreeing(run_dir, replaced)
        out.append(f"replaces {len(replaced)} earlier verdict(s) ({len(replaced) - people} of the agent, {people} of a "
                   f"person), which disagreed with the rewards on {len(set(rfp) | set(rfn))} sample(s)"
                   + (f": {_ids(sorted(set(rfp) | set(rfn)))}" if rfp or rfn else "")
                   + " — the earlier verdicts stay in verdicts.jsonl and the gate record's history")
    else:
        out.append("replaces no earlier verdict")
    changed = [v.id for v in new if v.changed_after_reveal]
    out.append(f"{len(changed)} changed after the rewards' scores were shown"
               + (f": {_ids(changed)}" if changed else "")
               + f"; {sum(v.first_verdict is not None for v in new)} carry the blind first verdict")
    return out


def confirm_lines(record: GateRecord) -> list[str]:
    """What `inspect confirm` will record, from the gate's judgement of the files now (no re-score)."""
    c = record.counts
    if c is None:
        return ["the gate could not judge the reading"]
    out = [f"to confirm: the agent's reading of {c.agent} sample(s) ({c.read} read, {c.min_read} required) — "
           f"{c.agreed} agree with the rewards, {c.disagreements} disagreement(s)"]
    out += [f"  disagreement: {d.id} {d.kind.replace('_', ' ')} on {d.field} ({', '.join(d.rewards)})"
            for d in record.disagreements[:10]]
    replaced = [h for h in record.history if h.replaced_disagreements]
    out.append(f"{c.replaced} earlier verdict(s) were replaced by later ones"
               + (f"; on {len(replaced)} sample(s) a disagreement with the rewards was replaced: "
                  f"{_ids([h.id for h in replaced])}" if replaced else ""))
    if record.blind is not None:
        out.append(f"blind: {record.blind.statement}" + (
            "; the reading equals the rewards' view field for field with no note (what copying looks like)"
            if record.blind.mirrors_rewards else ""))
    if record.samples is not None and record.samples.source == "imported":
        out.append(f"the samples are IMPORTED from {record.samples.file}"
                   + ("" if record.samples.agent_writable is False else " (a file the agent's tools can write)"))
    open_flags = [f["id"] for f in record.flags if f.get("status") == "open"]
    if open_flags:
        out.append(f"open red flags (not waived by confirming): {_ids(open_flags)}")
    return out


def ack_lines(flag: dict[str, Any], reason: str, by: str) -> list[str]:
    """What `inspect ack` will record: the flag as the score report states it, and the person's reason."""
    return [f"to record: {by} acknowledges the red flag {flag['id']}", f"  the flag: {flag.get('message', '')}",
            f"  the reason: {reason.strip()}"]


def agent_write_rules() -> list[str] | None:
    """The Write / Edit path patterns /finetune pre-approves for the agent (commands/finetune.md allowed-tools),
    None when that file cannot be read (then every file counts as one the agent may have written)."""
    import yaml

    path = Path(__file__).resolve().parents[3] / "commands" / "finetune.md"
    try:
        text = path.read_text(encoding="utf-8")
        front = yaml.safe_load(text.split("---\n", 2)[1])
    except (OSError, IndexError, yaml.YAMLError):
        return None
    tools = front.get("allowed-tools") if isinstance(front, dict) else None
    if not isinstance(tools, list):
        return None
    return [t[t.index("(") + 1:-1] for t in tools if isinstance(t, str) and t.startswith(("Write(", "Edit("))]


def agent_writable(path: str | Path) -> bool:
    """Could the agent's pre-approved tools have written ``path``? (its name or its place relative to the project
    folder matches a Write / Edit rule; unsure counts as yes)."""
    import fnmatch

    rules = agent_write_rules()
    if rules is None:
        return True
    src = Path(path).resolve()
    try:
        rel: str | None = src.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        rel = None
    return (src.name in {r.rsplit("/", 1)[-1] for r in rules}
            or (rel is not None and any(fnmatch.fnmatch(rel, r) for r in rules)))
