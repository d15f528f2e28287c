"""The person's side of the suite: their page export and their commands, as the person runs them.

A person reads review.html and exports their verdicts with its button; `page_export` writes the page exactly as
`finetune inspect review RUN --format html` does and stamps each line as the page's export does (the page's
digest and the sample's digest; tests/inspect/test_review.py exports from the real page in Chromium). The person
then runs `inspect human-verdict` / `confirm` / `ack` in their own terminal and says yes to what it shows: `--yes`.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path


def page_export(run: Path, lines: list[dict] | Path, out: Path | None = None) -> Path:
    """``lines`` (dicts, or a JSONL file of them) as review.html's export of the page written now."""
    from finetune.cli.inspect import _run_dir_and_spec
    from finetune.inspect import personact, review
    from finetune.inspect import verdicts as V
    from finetune.inspect.score import load_scored

    if isinstance(lines, Path):
        lines = [json.loads(x) for x in lines.read_text().splitlines() if x.strip()]
    spec, run_dir = _run_dir_and_spec(str(run))
    review.write_review(run_dir, spec, "html")
    page = personact.page_of(run_dir)
    digests = {r["id"]: V.sample_digest(r) for r in load_scored(run_dir)}
    exported = [{**line, "reader": "human", "page": page, "sample_sha256": digests.get(line["id"])} for line in lines]
    out = out or Path(tempfile.mkdtemp(prefix="page-export-")) / "verdicts.jsonl"  # the browser's download
    out.write_text("".join(json.dumps(v) + "\n" for v in exported))
    return out


def person_verdicts(cli, run: Path, lines: list[dict] | Path, *extra: str):
    """The person records their page export of ``lines`` (saying yes to what the command shows)."""
    return cli("inspect", "human-verdict", run, "--file", page_export(run, lines), "--yes", *extra)
