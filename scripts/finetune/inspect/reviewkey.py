"""``finetune inspect review RUN --key``: the rewards' view of the reading sheet's samples (review_key.md).

The sheet (review.md) is blind; this key is what the reader opens after recording verdicts: each
reward's score, threshold and pass per sample, the rewards' combined view, the red flags, the hack
probes and base success, and — where a verdict is already recorded — whether it agrees with the
rewards. Writing the key records every listed sample as revealed (reveals.json), so a verdict given
afterwards is reported by the gate as given after the reveal.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from finetune import atomic, rundir
from finetune.inspect import review as R
from finetune.inspect import verdicts as V
from finetune.inspect.score import load_scored
from finetune.literals import md
from finetune.rewards.lib.rewards_meta import RewardMeta

if TYPE_CHECKING:
    from finetune.spec import RunSpec


def _header(run_dir: Path, items: list[dict[str, Any]], meta: dict[str, Any],
            verdicts: dict[str, V.Verdict]) -> list[str]:
    unread = [it["id"] for it in items if it["id"] not in verdicts]
    lines = [f"# Reward key — {meta['run']}", "",
             f"The rewards' view of the {len(items)} samples on {rundir.REVIEW_MD} ({R.coverage(meta)}), in the "
             "sheet's order. Written for comparing with verdicts already recorded: writing it marked these samples "
             f"as revealed ({V.REVEALS}), and the gate reports verdicts recorded after this point.", ""]
    if unread:
        lines += [f"**{len(unread)} of {len(items)} samples had no verdict when this key was written** — a verdict "
                  "given now is not blind.", ""]
    lines += ["## What the verdicts mean", ""] + R.how_to_judge(meta)
    lines += ["", "## Rewards", "", "| reward | type | role | pass threshold | weight | gated on format |",
              "|---|---|---|---|---|---|"]
    for m in meta["rewards"]:
        lines.append(f"| {m['name']} | {m['type']} | {m['role']} | {R._fmt(m['threshold'])} | {R._fmt(m['weight'])} "
                     f"| {'yes' if m['gated'] else 'no'} |")
    lines += ["", "## Red flags and probes", ""]
    lines += [f"- **{f['id']}** — {md(f['message'])}" for f in meta["flags"]]  # a message may quote a sample
    if meta["passing_probes"]:
        lines.append("- **passing hack probes** (cannot be waived; fix the reward): "
                     f"{', '.join(meta['passing_probes'])}")
    if not meta["flags"] and not meta["passing_probes"]:
        lines.append("- none")
    lines += ["", f"Base success: {meta['base_success']['message']}", "",
              f"Next: `{R.command('inspect', 'gate', run_dir)}`.", "", "## Samples", ""]
    return lines


def _sample(i: int, it: dict[str, Any], row: dict[str, Any], verdict: V.Verdict | None,
            metas: list[RewardMeta]) -> list[str]:
    lines = [f"### {i}. {R._code(it['id'])}" + (f" — flags: {', '.join(it['flags'])}" if it["flags"] else ""), "",
             "| reward | role | score | threshold | passes |", "|---|---|---|---|---|"]
    for r in it["rewards"]:
        # the error (already visible: marked) made one table cell: no line break, pipe, HTML or emphasis
        score = f"error: {md(r['error'])}" if r["error"] else R._fmt(r["score"])
        lines.append(f"| {r['name']} | {r['role']} | {score} | {R._fmt(r['threshold'])} "
                     f"| {'yes' if r['pass'] else 'no'} |")
    if it["marks"]:
        lines += ["", f"Marked on the sheet: {it['marks']}."]
    lines += ["", f"Rewards' view: **{'accept' if it['reward_view'] else 'reject'}**"]
    if verdict is None:
        lines += ["", "Your verdict: none recorded yet", ""]
        return lines
    said = ", ".join(f"{k}: {str(getattr(verdict, k)).lower()}" for k in ("accept", "correct", "well_formed")
                     if getattr(verdict, k) is not None)
    lines += ["", f"Your verdict ({verdict.reader}): {said}"]
    diffs = V.compare(row, verdict, metas)
    lines += [f"- **disagreement**: {d['kind'].replace('_', ' ')} on `{d['field']}` — {', '.join(d['rewards'])}"
              for d in diffs]
    lines += [f"- agreement: {g['note']}" for g in V.gated_notes(row, verdict, metas)]
    if not diffs:
        lines.append("- agrees with the rewards")
    return lines + [""]


def write_key(run_dir: str | Path, spec: RunSpec, n: int | None = None) -> tuple[Path, int]:
    """Write review_key.md for the sheet's selection; record the reveal. Returns (path, samples without a verdict)."""
    run_dir = Path(run_dir)
    items, meta = R.review_items(run_dir, spec, n)
    rows = {r["id"]: r for r in load_scored(run_dir)}
    digests = {i: V.sample_digest(r) for i, r in rows.items()}
    # a verdict counts for the key only while it judged the very sample shown (as in the gate)
    verdicts = {k: v for k, v in V.load_verdicts(run_dir).items() if digests.get(k) == v.sample_sha256}
    lines = _header(run_dir, items, meta, verdicts)
    metas = [RewardMeta.of(m) for m in meta["rewards"]]
    for i, it in enumerate(items, 1):
        lines += _sample(i, it, rows[it["id"]], verdicts.get(it["id"]), metas)
    # the reveal first: a kill between the two leaves a recorded reveal without a key, never a key whose
    # scores the gate does not know were seen
    V.record_reveals(run_dir, [it["id"] for it in items], "key")
    path = atomic.write_text(run_dir / rundir.REVIEW_KEY, "\n".join(lines))
    return path, sum(it["id"] not in verdicts for it in items)
