"""Hostile content from samples, logs, model configs and pages: one line, exit 2, naming file and line.

Each case is what a model, a careless export or an attacker can put in a file the plugin reads; the
rule is the one of ``cases.check`` (exit 2, one ``error:`` line naming the place, no traceback, nothing
written), or, for outputs, that the output stays well-formed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cases import Case, check

IMPORT = ("inspect", "sample", "{spec}", "--import", "{tmp}/bad.jsonl")
GOOD = {"prompt": "What is 2+2?", "completion": "\\boxed{4}", "answer": "4"}


def _bad_import(second_line: str):
    """bad.jsonl beside the run: a good first line, then the hostile one (so the error must say line 2)."""
    def damage(run: Path) -> None:
        (run.parent / "bad.jsonl").write_text(json.dumps(GOOD) + "\n" + second_line + "\n", encoding="utf-8")
    return damage


def _nested(depth: int) -> str:
    """A good row with an extra column nested ``depth`` lists deep."""
    return json.dumps({**GOOD, "extra": ""}).replace('"extra": ""', '"extra": ' + "[" * depth + "]" * depth)


IMPORT_CASES = [
    Case("6-import", IMPORT, _bad_import(_nested(500)), "bad.jsonl:2", name="nested_500_extra_column"),
    Case("6-import", IMPORT, _bad_import(_nested(100_000)), "bad.jsonl:2", name="nested_100000"),
    Case("6-import", IMPORT, _bad_import(json.dumps({**GOOD, "columns": {"meta": "[" * 40 + "]" * 40}})
                                         .replace('"' + "[" * 40 + "]" * 40 + '"', "[" * 40 + "]" * 40)),
         "nested more than", name="nested_40_in_columns"),
    Case("6-import", IMPORT, _bad_import(json.dumps({**GOOD, "truncated": "yes"})), "'truncated'",
         name="truncated_string"),
    Case("6-import", IMPORT, _bad_import(json.dumps({**GOOD, "completion_tokens": -5})), "'completion_tokens'",
         name="negative_tokens"),
    Case("6-import", IMPORT, _bad_import(json.dumps({**GOOD, "completion_tokens": 3.5})), "'completion_tokens'",
         name="fractional_tokens"),
    Case("6-import", IMPORT, _bad_import(json.dumps({**GOOD, "completion_tokens": True})), "'completion_tokens'",
         name="bool_tokens"),
    Case("6-import", IMPORT, _bad_import(json.dumps({**GOOD, "source": {"x": 1}})), "'source'", name="source_object"),
    Case("6-import", IMPORT, _bad_import('{"prompt": "p", "completion": "a \\ud800 b", "answer": "4"}'),
         "bad.jsonl:2", name="unpaired_surrogate_completion"),
    Case("6-import", IMPORT, _bad_import('{"prompt": "p", "completion": "c", "answer": "\\udfff"}'),
         "bad.jsonl:2", name="unpaired_surrogate_column"),
    Case("6-import", IMPORT, _bad_import('{"prompt": "p", "completion": "c", "\\ud83d": "4", "answer": "4"}'),
         "bad.jsonl:2", name="unpaired_surrogate_key"),
]


@pytest.mark.parametrize("case", IMPORT_CASES, ids=lambda c: c.id)
def test_hostile_import_is_one_line_naming_file_and_line(case, damaged):
    run, spec, side = damaged(case)
    problem = check(case, run, spec, side)
    assert not problem, problem


def test_sandbox_names_import_from_the_package_without_recursion():
    """`from finetune.sandbox import SandboxPool` in a fresh interpreter (the lazy __getattr__ recursed)."""
    import subprocess
    import sys

    scripts = str(Path(__file__).resolve().parents[2] / "scripts")
    out = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {scripts!r}); "
                          "from finetune.sandbox import SandboxPool, StdioJob; print(SandboxPool.__name__)"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "SandboxPool", out.stderr[-500:]


# ------------------------------------------------------------------------------------- review.html --

# What a model (or a prompt author) can write that an HTML5 parser treats specially inside <script>.
HOSTILE_TEXTS = [
    "<!--<script>", "x <!-- <script> y", "<!--<script></script>-->", "</script><script>document.title='pwned'</script>",
    "</SCRIPT >", "</script\n>", "<![CDATA[ ]]>", "--><script>", "&lt;&amp;&#x3c;", "\u2028\u2029 line separators",
    "<!-- unclosed comment <script src=x>", "<img src=x onerror=alert(1)>",
]


@pytest.mark.browser
def test_review_page_parses_whole_with_hostile_completions(base_run, tmp_path):
    """Chromium (an HTML5 parser) loads review.html built from completions, prompts and gold answers holding
    the strings above: no page error, every sample present, and each string shown exactly as written."""
    import shutil

    from playwright.sync_api import sync_playwright

    from finetune.cli import main

    run = tmp_path / "run"
    shutil.copytree(base_run, run)
    rows = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    for row, text in zip(rows, HOSTILE_TEXTS):
        row["completion"] = f"{text}\n<answer>{text}</answer>"
        row["prompt"] = row["prompt"] + " " + text
    rows[0]["columns"]["answer"] = HOSTILE_TEXTS[0]
    (run / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["inspect", "score", str(run)]) == 0
    assert main(["inspect", "review", str(run), "--format", "html", "-n", str(len(rows))]) == 0
    page_text = (run / "review.html").read_text()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto((run / "review.html").as_uri())
            shown = page.evaluate("ITEMS.map(i => [i.id, i.completion, i.prompt])")
            scripts = page.evaluate("document.scripts.length")
            title = page.title()
        finally:
            browser.close()
    assert errors == [] and scripts == 2 and title != "pwned"
    by_id = {r["id"]: r for r in rows}
    assert len(shown) == len(rows)
    for sid, completion, prompt in shown:
        assert completion == by_id[sid]["completion"] and prompt == by_id[sid]["prompt"]
    assert "<!--" not in page_text.split('<script id="data"')[1].split("</script>")[0]
