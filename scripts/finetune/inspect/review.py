"""``finetune inspect review RUN``: choose 50–100 scored samples and present them for reading.

Selection is stratified over the rewards' values (each distinct score pattern gets its share) and
always includes every flagged sample; it is seeded, so the Markdown sheet (for the agent), the
HTML page and the terminal review (for a person) show the same samples. Scores are shown
role-wise against each reward's pass threshold, with the rewards' combined view (accept = every
format and correctness reward passes), so agreeing or disagreeing has one meaning.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

from finetune import atomic, rundir
from finetune.errors import UserError
from finetune.inspect import verdicts as V
from finetune.inspect.probes import gold_column
from finetune.inspect.score import load_report, load_scored

MAX_READ = 100
DEFAULT_READ = 60


def _stratum(row: dict[str, Any]) -> tuple:
    return tuple(sorted((k, None if v is None else round(float(v), 3)) for k, v in row["rewards"].items()))


def select(rows: list[dict[str, Any]], n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` samples stratified over reward values, every flagged sample included, in a seeded order."""
    rng = random.Random(seed)
    chosen = {r["id"]: r for r in rows if r.get("flags")}
    strata: dict[tuple, list[dict[str, Any]]] = {}
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


def _count(spec, rows: list[dict[str, Any]], n: int | None) -> int:
    min_read = spec.inspection.min_read
    if n is not None and not (min_read <= n <= MAX_READ):
        raise UserError(f"-n {n} is outside {min_read}..{MAX_READ}", where="-n",
                        fix=f"read between inspection.min_read ({min_read}) and {MAX_READ} samples")
    return min(len(rows), n or max(min_read, DEFAULT_READ))


def prompt_text(prompt: Any) -> str:
    if isinstance(prompt, list):
        return "\n\n".join(f"[{m.get('role')}] {m.get('content')}" for m in prompt)
    return str(prompt)


def review_items(run_dir: Path, spec, n: int | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The selected samples as plain dicts for the sheets, plus page metadata."""
    report = load_report(run_dir)
    rows = load_scored(run_dir)
    metas = report["rewards"]
    gcol = gold_column(spec)
    picked = select(rows, _count(spec, rows, n), spec.training.seed)
    items = []
    for r in picked:
        columns = r.get("columns") or {}
        items.append({
            "id": r["id"], "sha": V.sample_digest(r), "prompt": prompt_text(r["prompt"]), "completion": r["completion"],
            "gold": None if gcol is None or columns.get(gcol) is None else str(columns[gcol]),
            "columns": {k: v for k, v in columns.items() if k != gcol},
            "rewards": [{"name": m["name"], "role": m["role"], "score": r["rewards"].get(m["name"]),
                         "threshold": m["threshold"], "pass": bool(r["passes"].get(m["name"])),
                         "error": r.get("errors", {}).get(m["name"])} for m in metas],
            "reward_view": bool(r["all_pass"]), "flags": r.get("flags", []),
            "truncated": r.get("truncated"),
        })
    meta = {"run": spec.name, "min_read": spec.inspection.min_read, "selected": len(items), "scored": len(rows),
            "rewards": metas, "flags": report.get("flags", []),
            "passing_probes": sorted({p["probe"] for p in report.get("probes", []) if p["passing"]}),
            "base_success": {k: report["base_success"].get(k) for k in ("verdict", "message", "mean_success")}}
    return items, meta


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}text\n{text}\n{ticks}"


def _fmt(v: Any) -> str:
    return "None" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v)


def markdown(run_dir: Path, items: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """The agent's reading sheet: instructions, flags and probes, then each sample with the command
    that records its verdict (the venv's console script, so the agent can run it as printed)."""
    from finetune.invocation import runnable

    lines = [f"# Reward inspection sheet — {meta['run']}", "",
             f"{meta['selected']} of {meta['scored']} scored samples (stratified over reward values; every "
             f"flagged sample included). Read at least {meta['min_read']}.", "",
             "For each sample decide, from the prompt and the gold answer alone, whether the completion fully "
             "does what the task asks (`--accept` / `--reject`); add `--correct`/`--incorrect` and "
             "`--well-formed`/`--malformed` when you can tell, and a note saying why. Then compare with the "
             "rewards' view: a reward passing what you reject is a false positive (reward-hacking risk); "
             "a reward failing what you accept is a false negative (lost signal). If they disagree, fix the "
             "reward first.", "",
             "An agent's reading passes the gate only after the user confirms it: "
             f"`{runnable()} inspect confirm {run_dir} --user NAME`.", "", "## Rewards", "",
             "| reward | type | role | pass threshold | weight |", "|---|---|---|---|---|"]
    for m in meta["rewards"]:
        lines.append(f"| {m['name']} | {m['type']} | {m['role']} | {_fmt(m['threshold'])} | {_fmt(m['weight'])} |")
    lines += ["", "## Red flags and probes", ""]
    for f in meta["flags"]:
        lines.append(f"- **{f['id']}** — {f['message']}")
    if meta["passing_probes"]:
        lines.append(f"- **passing hack probes** (cannot be waived; fix the reward): {', '.join(meta['passing_probes'])}")
    if not meta["flags"] and not meta["passing_probes"]:
        lines.append("- none")
    lines += ["", f"Base success: {meta['base_success']['message']}", "", "## Samples", ""]
    for i, it in enumerate(items, 1):
        lines += [f"### {i}. `{it['id']}`" + (f" — flags: {', '.join(it['flags'])}" if it["flags"] else ""), "",
                  "**Prompt**", "", _fence(it["prompt"]), ""]
        if it["gold"] is not None:
            lines += [f"**Gold answer:** {_fence(it['gold']) if chr(10) in it['gold'] else '`' + it['gold'] + '`'}", ""]
        if it["columns"]:
            lines += [f"**Other columns:** `{json.dumps(it['columns'], ensure_ascii=False)[:500]}`", ""]
        lines += ["**Completion**" + (" (truncated at max_completion_length)" if it["truncated"] else ""), "",
                  _fence(it["completion"]), "", "| reward | role | score | threshold | passes |", "|---|---|---|---|---|"]
        for r in it["rewards"]:
            score = f"error: {r['error']}".replace("|", "\\|") if r["error"] else _fmt(r["score"])
            lines.append(f"| {r['name']} | {r['role']} | {score} | {_fmt(r['threshold'])} | {'yes' if r['pass'] else 'no'} |")
        lines += ["", f"Rewards' view: **{'accept' if it['reward_view'] else 'reject'}**", "",
                  f"`{runnable()} inspect verdict {run_dir} --id {it['id']} --accept|--reject [--correct|--incorrect] "
                  "[--well-formed|--malformed] --note \"...\" --reader agent`", ""]
    return "\n".join(lines)


def environment():
    """The review page's Jinja environment: HTML autoescape, strict names, the project's escaping filters."""
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    from finetune import literals

    return literals.register(Environment(loader=PackageLoader("finetune.inspect", "templates"),
                                         autoescape=select_autoescape(["html"]), undefined=StrictUndefined))


def html(items: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """A self-contained page: no network, data embedded, verdicts kept in localStorage and exported."""
    env = environment()
    data = json.dumps({"items": items, "meta": meta}, ensure_ascii=False).replace("</", "<\\/")
    return env.get_template("review.html.j2").render(meta=meta, data=data)


def write_review(run_dir: str | Path, spec, fmt: str, n: int | None = None) -> Path:
    run_dir = Path(run_dir)
    items, meta = review_items(run_dir, spec, n)
    if fmt == "md":
        return atomic.write_text(run_dir / rundir.REVIEW_MD, markdown(run_dir, items, meta))
    return atomic.write_text(run_dir / rundir.REVIEW_HTML, html(items, meta))


def terminal_review(run_dir: str | Path, spec, console, n: int | None = None, ask=None) -> int:
    """Read the selection in the terminal; each answer is saved at once (resumable). Returns verdicts saved."""
    from rich.panel import Panel
    from rich.prompt import Prompt
    from rich.table import Table

    run_dir = Path(run_dir)
    ask = ask or (lambda question, choices=None, default=None: Prompt.ask(question, choices=choices, default=default,
                                                                         console=console))
    items, meta = review_items(run_dir, spec, n)
    done = {k for k, v in V.load_verdicts(run_dir).items() if v.reader == "human"}
    todo = [it for it in items if it["id"] not in done]
    console.print(f"{len(done & {it['id'] for it in items})} of {len(items)} already read; {len(todo)} to go "
                  f"(at least {meta['min_read']} needed). y = agree with the rewards, n = disagree, s = skip, q = quit.")
    saved = 0
    for i, it in enumerate(todo, 1):
        console.rule(f"{it['id']} ({i}/{len(todo)})" + (f" flags: {', '.join(it['flags'])}" if it["flags"] else ""))
        console.print(Panel(it["prompt"], title="prompt", expand=False), markup=False)
        if it["gold"] is not None:
            console.print(f"gold: {it['gold']}", markup=False)
        console.print(Panel(it["completion"] or "(empty)", title="completion", expand=False), markup=False)
        t = Table()
        for col in ("reward", "role", "score", "threshold", "passes"):
            t.add_column(col)
        for r in it["rewards"]:
            t.add_row(r["name"], r["role"], f"error: {r['error']}" if r["error"] else _fmt(r["score"]),
                      _fmt(r["threshold"]), "yes" if r["pass"] else "no")
        console.print(t)
        console.print(f"the rewards say: {'ACCEPT' if it['reward_view'] else 'REJECT'}")
        answer = ask("agree?", choices=["y", "n", "s", "q"], default="y")
        if answer == "q":
            break
        if answer == "s":
            continue
        note = ask("note (enter to skip)", default="") or ""
        accept = it["reward_view"] if answer == "y" else not it["reward_view"]
        V.record_verdicts(run_dir, [V.Verdict(id=it["id"], accept=accept, note=note, reader="human")], "terminal")
        saved += 1
    console.print(f"saved {saved} verdict(s) to {run_dir / rundir.VERDICTS}")
    return saved
