"""``finetune inspect review RUN``: present the scored samples for a blind reading, then the key.

Blind first, then the key: the reading sheet (review.md), the HTML page and the terminal review
show the prompt, the gold answer and the completion only; the rewards' view (scores, passes,
flags) is in the key (``--key`` → review_key.md, written by :mod:`finetune.inspect.reviewkey`),
on the page after the sample's verdict is given, and in the terminal after the verdict is recorded.
Reveals are recorded (reveals.json), so the gate can say which verdicts were given after the reader
saw the rewards.

What is shown is what the rewards read: every control, bidi, zero-width or invisible character of a prompt,
gold, column, completion (tool results included) or reward error is written as a mark (``⟦ESC⟧[2K``, ``⟦CR⟧``,
``⟦RLO⟧``; :func:`finetune.literals.visible`, the one display escape of every sheet), and each sample with marks
says so. Sample ids are plain names (checked when samples are read, ``samplesio.check_id``).

Coverage: with at most ``MAX_READ`` scored samples the sheet holds all of them; above that the
selection is stratified over the rewards' values and always includes every flagged sample. It is
seeded, so the sheet, the key, the page and the terminal review show the same samples.
"""

from __future__ import annotations

import json
import random
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from finetune import atomic, rundir
from finetune.errors import UserError
from finetune.inspect import verdicts as V
from finetune.inspect.probes import gold_column
from finetune.inspect.score import load_report, load_scored
from finetune.literals import MARK_CLOSE, MARK_OPEN, marks_note, visible
from finetune.rewards.kind import kind_of
from finetune.rewards.lib.rewards_meta import RewardMeta

if TYPE_CHECKING:
    from jinja2 import Environment
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from finetune.spec import RunSpec

MAX_READ = 100  # the seed's 50-100: at most this many scored samples → the sheet holds them all


def _stratum(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(sorted((k, None if v is None else round(float(v), 3)) for k, v in row["rewards"].items()))


def select(rows: list[dict[str, Any]], n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` samples stratified over reward values, every flagged sample included, in a seeded order."""
    rng = random.Random(seed)
    chosen = {r["id"]: r for r in rows if r.get("flags")}
    strata: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        if r["id"] not in chosen:
            strata.setdefault(_stratum(r), []).append(r)
    pools = [strata[k] for k in sorted(strata, key=repr)]
    for pool in pools:
        rng.shuffle(pool)
    while len(chosen) < n and any(pools):
        for pool in pools:
            if pool and len(chosen) < n:
                r = pool.pop()
                chosen[r["id"]] = r
    out = list(chosen.values())
    rng.shuffle(out)
    return out


def _count(spec: RunSpec, rows: list[dict[str, Any]], n: int | None) -> int:
    min_read = spec.inspection.min_read
    if n is not None and not (min_read <= n <= MAX_READ):
        raise UserError(f"-n {n} is outside {min_read}..{MAX_READ}", where="-n",
                        fix=f"read between inspection.min_read ({min_read}) and {MAX_READ} samples")
    return min(len(rows), n or MAX_READ)


def finetune_command() -> str:
    """The CLI as this interpreter runs it, so a sheet's example commands run as printed (the plugin's
    venv is not on PATH) — one definition, in finetune.invocation."""
    from finetune.invocation import runnable

    return runnable()


def command(*args: Any) -> str:
    """A runnable ``finetune`` command line with every argument shell-quoted."""
    return " ".join([finetune_command(), *(shlex.quote(str(a)) for a in args)])


def prompt_text(prompt: Any) -> str:
    if isinstance(prompt, list):
        return "\n\n".join(f"[{m.get('role')}] {m.get('content')}" for m in prompt)
    return str(prompt)


def review_items(run_dir: Path, spec: RunSpec, n: int | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The selected samples as plain dicts for the sheets, plus page metadata. Every text a sheet shows is
    already :func:`visible` (marked), with ``marks`` saying which characters were marked; ``id`` and ``sha``
    are the sample's own (ids are plain names)."""
    from finetune.inspect import readingset

    report = load_report(run_dir)
    every = load_scored(run_dir)
    current = readingset.reading_ids(run_dir, [str(r["id"]) for r in every])
    rows = [r for r in every if r["id"] in current]  # held-back samples stay unseen until `review --fresh`
    metas = report["rewards"]
    gcol = gold_column(spec, [RewardMeta.of(m) for m in metas])
    picked = select(rows, _count(spec, rows, n), spec.training.seed)
    items = []
    for r in picked:
        columns = r.get("columns") or {}
        prompt, completion = prompt_text(r["prompt"]), r["completion"]
        gold = None if gcol is None or columns.get(gcol) is None else _gold_text(columns[gcol])
        others = {k: v for k, v in columns.items() if k != gcol}
        others_text = json.dumps(others, ensure_ascii=False)[:500] if others else ""
        errors = r.get("errors", {})
        items.append({
            "id": r["id"], "sha": V.sample_digest(r), "prompt": visible(prompt), "completion": visible(completion),
            "gold": None if gold is None else visible(gold), "columns": visible(others_text),
            "marks": marks_note(prompt, gold or "", others_text, completion),
            "rewards": [{"name": m["name"], "role": m["role"], "score": r["rewards"].get(m["name"]),
                         "threshold": m["threshold"], "pass": bool(r["passes"].get(m["name"])),
                         "error": None if errors.get(m["name"]) is None else visible(errors[m["name"]])}
                        for m in metas],
            "reward_view": bool(r["all_pass"]), "flags": r.get("flags", []),
            "truncated": r.get("truncated"),
        })
    meta = {"run": spec.name, "min_read": spec.inspection.min_read, "selected": len(items), "scored": len(rows),
            "held_back": len(every) - len(rows), "fresh": readingset.switched(run_dir) is not None,
            "rewards": metas,
            "flags": [{**f, "message": visible(f.get("message", ""))} for f in report.get("flags", [])],
            "passing_probes": sorted({p["probe"] for p in report.get("probes", []) if p["passing"]}),
            "base_success": {k: report["base_success"].get(k)
                             for k in ("verdict", "message", "mean_success", "provisional", "missing")},
            "definitions": V.DEFINITIONS, "gated": [m["name"] for m in metas if m["gated"]],
            # a JSON answer compared field by field with a gold object (its kind's gold hook says so)
            "structured": any((g := kind_of(r).gold(r, spec.dataset)) is not None and g.shape == "object" and g.read
                              for r in spec.rewards),
            "imported": _imported(run_dir)}
    return items, meta


def _imported(run_dir: Path) -> str | None:
    """A plain line when the samples were imported, not sampled here (sample_info.json), else None."""
    from finetune.inspect.gate import samples_source

    found = samples_source(run_dir)
    if found.source != "imported":
        return None
    return (f"IMPORTED samples: they come from {found.file}, not from this plugin's sampler"
            + ("" if found.agent_writable is False else ", a file the agent's tools can write (it may have written "
               "them)"))


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}text\n{text}\n{ticks}"


def _code(text: str) -> str:
    """``text`` (one line, already visible) as an inline code span no backtick in it can close."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _shown_inline(text: str) -> str:
    """A gold or column text on the sheet: a fenced block when it spans lines, else a code span."""
    return _fence(text) if "\n" in text else _code(text)


MARKED = (f"Characters a terminal or browser would act on or not show (controls, ANSI escapes, bidi and zero-width "
          f"characters) are written as {MARK_OPEN}NAME{MARK_CLOSE} marks — {MARK_OPEN}ESC{MARK_CLOSE}, "
          f"{MARK_OPEN}CR{MARK_CLOSE}, {MARK_OPEN}RLO{MARK_CLOSE}, {MARK_OPEN}ZWJ{MARK_CLOSE}, "
          f"{MARK_OPEN}U+XXXX{MARK_CLOSE} — exactly where the rewards read them.")


def _fmt(v: Any) -> str:
    return "None" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v)


def coverage(meta: dict[str, Any]) -> str:
    which = "held-back samples (a fresh blind reading)" if meta.get("fresh") else "scored samples"
    aside = (f" ({meta['held_back']} other samples are not in this reading)" if meta.get("fresh") else
             f" ({meta['held_back']} more held back for a fresh blind reading after a reward fix)"
             ) if meta.get("held_back") else ""
    if meta["selected"] == meta["scored"]:
        return f"All {meta['scored']} {which}{aside}"
    return (f"{meta['selected']} of {meta['scored']} {which} (stratified over the rewards' values; every "
            f"flagged sample included){aside}")


def how_to_judge(meta: dict[str, Any]) -> list[str]:
    """The verdict definitions and the correct-but-malformed rule, as Markdown lines (sheet and key)."""
    lines = [f"- **{k}** — {v}" for k, v in meta["definitions"].items()]
    if meta["gated"]:
        lines += ["", f"Correct but malformed: {', '.join(f'`{g}`' for g in meta['gated'])} gives no credit to a "
                  "completion that fails the format (by design: correct and formatted > formatted but wrong > "
                  "malformed). Judge what you see anyway: a right answer without the required format is "
                  "`\"correct\": true, \"well_formed\": false, \"accept\": false`; the gate counts it as "
                  "agreement with a note, not as a false negative."]
    if meta.get("structured"):  # a structured answer: the rule field by field
        lines += ["", STRUCTURED]
    return lines


STRUCTURED = ("A JSON answer, field by field: `correct` when every field names the gold value however written "
              "(capitals, accents, a final period, a total as the string \"1,234.50\", a date in the document's own "
              "format); a missing, invented or different field is incorrect. `well_formed` when it is one strict JSON "
              "object after any `<think>` block (no trailing comma, no comment), each field in the schema's shape (a "
              "number, an ISO `YYYY-MM-DD` date, a code such as `EUR`) and no extra key. So a non-ISO date of the "
              "right day is correct but malformed; the gold JSON only inside `<think>`, then a refusal, is neither.")


def markdown(run_dir: Path, items: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """The blind reading sheet: instructions, definitions, then each sample's prompt, gold and
    completion — no reward score, pass or flag (those are in the key, opened after the verdicts)."""
    reading = run_dir / "reading.jsonl"
    lines = [f"# Reward inspection sheet — {meta['run']}", "",
             *([f"**{meta['imported']}.**", ""] if meta.get("imported") else []),
             f"{coverage(meta)}. Read at least {meta['min_read']}.", "",
             "## How to read: blind first, then the key", "",
             "This sheet shows what the task gave and what the model wrote, and nothing the rewards said. Judge "
             "each sample from the prompt and the gold answer alone, then record the whole reading in one call. "
             "Only after that open the key (the rewards' scores and red flags) and compare; opening it is "
             "recorded, and verdicts given after it are reported as such by the gate.", ""]
    lines += how_to_judge(meta)
    lines += ["", MARKED]
    lines += ["", f"1. Write one JSON line per sample to `{reading}`, e.g.", "",
              '   `{"id": "<id>", "accept": false, "correct": true, "well_formed": false, "note": "right sum, '
              'no answer tag"}`', "",
              "   (`correct` / `well_formed` may be left out when you cannot tell; a note says why.)", "",
              f"2. Record it: `{command('inspect', 'verdict', run_dir, '--file', reading, '--reader', 'agent')}`", "",
              f"3. Then, and only then, write and open the key: `{command('inspect', 'review', run_dir, '--key')}` "
              f"→ `{run_dir / rundir.REVIEW_KEY}`. A reward passing what you reject is a false positive "
              "(reward-hacking risk); a reward failing what you accept is a false negative (lost signal). If they "
              "disagree, fix the reward first.", "",
              "An agent's reading passes the gate only after the user has checked it and confirms it: "
              f"`{command('inspect', 'confirm', run_dir, '--user', 'NAME')}` (the user's act, not the agent's).", "",
              "## Rewards being checked", "", "| reward | type | role | gated on format |", "|---|---|---|---|"]
    for m in meta["rewards"]:
        lines.append(f"| {m['name']} | {m['type']} | {m['role']} | {'yes' if m['gated'] else 'no'} |")
    lines += ["", "## Samples", ""]
    for i, it in enumerate(items, 1):
        lines += [f"### {i}. {_code(it['id'])}", "", "**Prompt**", "", _fence(it["prompt"]), ""]
        if it["gold"] is not None:
            lines += [f"**Gold answer:** {_shown_inline(it['gold'])}", ""]
        if it["columns"]:
            lines += [f"**Other columns:** {_shown_inline(it['columns'])}", ""]
        lines += ["**Completion**" + (" (truncated at max_completion_length)" if it["truncated"] else ""), "",
                  _fence(it["completion"]), ""]
        if it["marks"]:
            lines += [f"**Marked:** {it['marks']}.", ""]
        verdict_line = '{"id": ' + json.dumps(it["id"]) + ', "accept": …}'
        lines += [f"Verdict line: {_code(verdict_line)}", ""]
    return "\n".join(lines)


def environment() -> Environment:
    """The review page's Jinja environment: HTML autoescape, strict names, the project's escaping filters."""
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    from finetune import literals

    env: Environment = literals.register(Environment(loader=PackageLoader("finetune.inspect", "templates"),
                                                     autoescape=select_autoescape(["html"]),
                                                     undefined=StrictUndefined))
    return env


def html(items: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """A self-contained page: no network, data embedded, verdicts kept in localStorage and exported."""
    env = environment()
    # Every "<" (and ">", "&") in the data is a JSON \u003c-style escape: inside a <script> element an HTML5 parser
    # reacts to "</script", and to "<!--" followed by "<script" (the double-escaped state swallows the
    # rest of the page); a completion may hold any of them. JSON.parse restores the characters unchanged.
    data = (json.dumps({"items": items, "meta": meta}, ensure_ascii=False)
            .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))
    return env.get_template("review.html.j2").render(meta=meta, data=data)


def write_review(run_dir: str | Path, spec: RunSpec, fmt: str, n: int | None = None) -> Path:
    run_dir = Path(run_dir)
    items, meta = review_items(run_dir, spec, n)
    if fmt == "md":
        return atomic.write_text(run_dir / rundir.REVIEW_MD, markdown(run_dir, items, meta))
    # the page is read by a person: their verdicts are recorded by their path (the agent's `verdict` would not count);
    # its export carries the page's digest, which `inspect human-verdict` checks against this file
    from finetune.inspect.personact import page_digest

    meta["verdict_command"] = command("inspect", "human-verdict", run_dir, "--file", "verdicts.jsonl")
    meta["page"] = page_digest([(it["id"], it["sha"]) for it in items])
    return atomic.write_text(run_dir / rundir.REVIEW_HTML, html(items, meta))


def marked(text: str) -> Text:
    """Sheet text for the terminal: a rich Text (never read as console markup or emoji codes) with every
    ⟦mark⟧ shown in reverse video, so a mark stands out from text that merely looks like one."""
    from rich.text import Text

    shown = Text(text)
    shown.highlight_regex(f"{MARK_OPEN}[^{MARK_OPEN}{MARK_CLOSE}]*{MARK_CLOSE}", "reverse")
    return shown


def _score_table(it: dict[str, Any]) -> Table:
    from rich.table import Table

    t = Table()
    for col in ("reward", "role", "score", "threshold", "passes"):
        t.add_column(col)
    for r in it["rewards"]:
        t.add_row(r["name"], r["role"], marked(f"error: {r['error']}") if r["error"] else _fmt(r["score"]),
                  _fmt(r["threshold"]), "yes" if r["pass"] else "no")
    return t


def _ask_verdict(ask: Callable[..., str], sid: str) -> V.Judgement | None:
    """accept → correct and well-formed by definition; reject → ask which. None: skip; raises _Quit."""
    answer = ask(f"{sid}: accept or reject? (a/r; s skip, q quit)", choices=["a", "r", "s", "q"], default="s")
    if answer == "q":
        raise _Quit
    if answer == "s":
        return None
    if answer == "a":
        return V.Judgement(accept=True, correct=True, well_formed=True)
    tri = {"y": True, "n": False, "?": None}
    correct = ask(f"{sid}: is the answer correct? (y/n/? cannot tell)", choices=["y", "n", "?"], default="?")
    well = ask(f"{sid}: is it well-formed? (y/n/? cannot tell)", choices=["y", "n", "?"], default="?")
    return V.Judgement(accept=False, correct=tri[correct], well_formed=tri[well])


class _Quit(Exception):
    pass


def _reveal(console: Console, run_dir: Path, it: dict[str, Any], verdict: V.Verdict, row: dict[str, Any],
            metas: list[RewardMeta]) -> None:
    """After the verdict is saved: the rewards' scores, their view, and whether they agree with it."""
    V.record_reveals(run_dir, [it["id"]], "terminal")
    console.print(_score_table(it))
    console.print(f"the rewards say: {'ACCEPT' if it['reward_view'] else 'REJECT'}" + (
        f"; flags: {', '.join(it['flags'])}" if it["flags"] else ""))
    diffs = V.compare(row, verdict, metas)
    for d in diffs:
        console.print(f"disagreement: {d['kind'].replace('_', ' ')} on {d['field']} ({', '.join(d['rewards'])})",
                      markup=False)
    for g in V.gated_notes(row, verdict, metas):
        console.print(f"agreement: {g['note']}", markup=False)
    if not diffs:
        console.print("your verdict and the rewards agree")


def terminal_review(run_dir: str | Path, spec: RunSpec, console: Console, n: int | None = None,
                    ask: Callable[..., str] | None = None, by: str | None = None) -> int:
    """Read the selection in the terminal, blind: prompt, gold and completion; the verdict is saved;
    then the rewards' scores are revealed and the reader may change the verdict (recorded as changed
    after the reveal). Each answer is saved at once (resumable). Returns verdicts saved."""
    from rich.panel import Panel
    from rich.prompt import Prompt

    run_dir = Path(run_dir)
    ask = ask or (lambda question, choices=None, default=None: Prompt.ask(question, choices=choices, default=default,
                                                                         console=console))
    items, meta = review_items(run_dir, spec, n)
    rows = {r["id"]: r for r in load_scored(run_dir)}
    done = {k for k, v in V.load_verdicts(run_dir).items() if V.is_person(v)}
    todo = [it for it in items if it["id"] not in done]
    console.print(f"{len(done & {it['id'] for it in items})} of {len(items)} already read; {len(todo)} to go "
                  f"(at least {meta['min_read']} needed). Judge each completion before you see the rewards:",
                  markup=False)
    for k, v in meta["definitions"].items():
        console.print(f"  {k}: {v}", markup=False)
    saved = 0
    console.print(MARKED, markup=False)
    for i, it in enumerate(todo, 1):
        console.rule(marked(f"{it['id']} ({i}/{len(todo)})"))
        console.print(Panel(marked(it["prompt"]), title="prompt", expand=False))
        if it["gold"] is not None:
            console.print(marked(f"gold: {it['gold']}"))
        console.print(Panel(marked(it["completion"] or "(empty)"), title="completion", expand=False))
        if it["marks"]:
            console.print(marked(f"marked: {it['marks']}"))
        try:
            first = _ask_verdict(ask, it["id"])
        except _Quit:
            break
        if first is None:
            continue
        note = ask("note (enter to skip)", default="") or ""
        verdict = V.Verdict(id=it["id"], **first.model_dump(), note=note, reader="human")
        V.record_verdicts(run_dir, [verdict], "terminal", via="terminal", by=by)
        saved += 1
        _reveal(console, run_dir, it, verdict, rows[it["id"]], [RewardMeta.of(m) for m in meta["rewards"]])
        if ask(f"{it['id']}: keep your verdict? (k keep, c change)", choices=["k", "c"], default="k") == "c":
            try:
                again = _ask_verdict(ask, it["id"])
            except _Quit:
                break
            if again is not None:
                note = ask("note (enter keeps the last one)", default="") or note
                V.record_verdicts(run_dir, [V.Verdict(
                    id=it["id"], **again.model_dump(), note=note, reader="human", revealed=True,
                    first_verdict=first, changed_after_reveal=again != first)], "terminal", via="terminal", by=by)
    console.print(f"saved {saved} verdict(s) to {run_dir / rundir.VERDICTS}")
    return saved


def _gold_text(gold: object) -> str:
    """The gold as the reader should see it: a JSON object or list as JSON (what the model is asked to write),
    not Python's repr ('None', single quotes).

    >>> _gold_text({"total": 12.5, "number": None}), _gold_text("42")
    ('{"total": 12.5, "number": null}', '42')
    """
    import json

    return json.dumps(gold, ensure_ascii=False) if isinstance(gold, (dict, list)) else str(gold)
