"""What the person reads is the sample: control characters, ANSI escapes, bidi and zero-width characters are
shown escaped and marked on every sheet, and a sample id cannot carry Markdown.

``<answer>000</answer>\\x1b[2K\\r<answer>741</answer>\\x1b[8m hidden`` printed raw erases the line holding the
wrong answer and conceals the rest: a terminal shows the gold, 741, while the reward reads a hedge. Here the
terminal sheet, the reveal, review.md, review_key.md and review.html (Chromium) all show it as
``<answer>000</answer>⟦ESC⟧[2K⟦CR⟧<answer>741</answer>⟦ESC⟧[8m hidden`` (``finetune.literals.visible``), with a
line saying which characters were marked — for completions, prompts, gold answers, reward errors and a
``run_python`` tool result alike.
"""

from __future__ import annotations

import io
import json
import shutil
import unicodedata
from pathlib import Path

import pytest
from cases import Case, check
from inspect_helpers import MODULES, SPEC, craft_samples, write_jsonl

ISSUE = "<answer>000</answer>\x1b[2K\r<answer>741</answer>\x1b[8m hidden"
ISSUE_SHOWN = "<answer>000</answer>⟦ESC⟧[2K⟦CR⟧<answer>741</answer>⟦ESC⟧[8m hidden"
HIDDEN = {  # sample -> (completion, what the sheets must show)
    "p0000-s00": (ISSUE, ISSUE_SHOWN),
    "p0000-s01": ("<answer>\u202e147\u202c</answer> \u2066ok\u2069", "<answer>⟦RLO⟧147⟦PDF⟧</answer> ⟦LRI⟧ok⟦PDI⟧"),
    "p0000-s02": ("<answer>7\u200b4\u200d1</answer>\ufeff", "<answer>7⟦ZWSP⟧4⟦ZWJ⟧1</answer>⟦BOM⟧"),
    "p0000-s03": ("<answer>5</answer>\x00\x7f\x85\x9b31m", "<answer>5</answer>⟦NUL⟧⟦DEL⟧⟦NEL⟧⟦CSI⟧31m"),
    "p0001-s00": ("<answer>12</answer>\rThe answer is 13", "<answer>12</answer>⟦CR⟧The answer is 13"),
}
PROMPT_MARK = "\u202e"  # every prompt of row 0 carries a bidi override
# run_python's own output for a program printing the escapes: the tool result of a rollout
PROGRAM = 'print("<answer>000</answer>\\x1b[2K\\r<answer>741</answer>\\x1b[8m hidden")'
# the run's correctness reward raises on the first sample with its completion in the message: the reveal's error
RAISING = '''

_correctness = correctness


def correctness(prompts, completions, answer, **kwargs):
    for c in completions:
        if "\\x1b[2K" in _text(c):
            raise ValueError("cannot read " + _text(c))
    return _correctness(prompts, completions, answer, **kwargs)


REWARD_FUNCS = [format_ok, correctness]
'''


def _hidden(ch: str) -> bool:
    """A character a terminal or browser acts on or does not show (independent of the code under test)."""
    return ch not in "\n\t" and (unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") or ch in "\u00a0\u3164")


def _raw_left(text: str) -> list[str]:
    return sorted({f"U+{ord(ch):04X}" for ch in text if _hidden(ch)})


@pytest.fixture(scope="module")
def shown_run(tmp_path_factory) -> Path:
    """A scored run whose samples hold the hostile strings (and a rollout with run_python's output)."""
    from finetune.cli import main
    from finetune.sandbox.runner import run_python

    run = tmp_path_factory.mktemp("display") / "run"
    run.mkdir()
    (run / "spec.yaml").write_text(SPEC.format(correctness="{name: correctness, type: exact_match, "
                                               "answer_column: answer, extract: answer_tag, weight: 1.0}"))
    (run / "rewards.py").write_text((MODULES / "good.py").read_text() + RAISING)
    rows = [{k: v for k, v in r.items() if k != "kind"} for r in craft_samples()]
    for row in rows:
        if row["id"] in HIDDEN:
            row["completion"] = HIDDEN[row["id"]][0]
        if row["row"] in (0, 1):
            row["prompt"] += PROMPT_MARK
    tool_output = run_python(PROGRAM)
    assert "\x1b[2K\r" in tool_output  # the sandbox returns the escape bytes unchanged
    rows[-1]["completion"] = [
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "run_python", "arguments": {"code": PROGRAM}}}]},
        {"role": "tool", "name": "run_python", "content": tool_output},
        {"role": "assistant", "content": "<answer>0</answer>"}]
    write_jsonl(run / "samples.jsonl", rows)
    assert main(["inspect", "score", str(run)]) == 0
    return run


@pytest.fixture
def run(shown_run, tmp_path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(shown_run, copy)
    return copy


def test_review_md_shows_every_hidden_character_marked(cli, run):
    assert cli("inspect", "review", run, "-n", "100").code == 0
    md = (run / "review.md").read_text(encoding="utf-8")
    assert _raw_left(md) == []
    for _, shown in HIDDEN.values():
        assert shown in md
    assert md.count("**Marked:**") >= len(HIDDEN) + 1 and "ESC ×2, RLO, CR" in md
    sample = next(part for part in md.split("\n### ") if part.split("\n", 1)[0].endswith("`p0000-s00`"))
    assert "⟦RLO⟧" in sample.split("**Prompt**")[1].split("**Completion**")[0]  # the prompt too
    assert "<answer>000</answer>⟦ESC⟧[2K⟦CR⟧<answer>741</answer>⟦ESC⟧[8m hidden" in md.split("run_python")[-1]


@pytest.mark.slow  # a verdict and a reveal for every one of 64 samples (each a locked write)
def test_terminal_sheet_and_reveal_show_the_marks(cli, run, monkeypatch):
    monkeypatch.setattr("finetune.cli.inspect.on_a_terminal", lambda: True)
    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.setattr("sys.stdin", io.StringIO("r\n?\n?\n\nk\n" * 64 + "q\n"))
    out = cli("inspect", "review", run, "--format", "terminal").out
    assert _raw_left(out) == []
    for _, shown in HIDDEN.values():
        assert shown in out
    assert "marked: 4 characters" in out
    # the reveal's score table: the reward's error quotes the completion, escaped too
    assert "cannot read <answer>000</answer>⟦ESC⟧[2K⟦CR⟧<answer>741</answer>" in out


def test_the_key_shows_errors_and_marks_escaped(cli, run):
    assert cli("inspect", "review", run, "--key").code == 0
    key = (run / "review_key.md").read_text(encoding="utf-8")
    assert _raw_left(key) == []
    assert "error: ValueError: cannot read &lt;answer&gt;000&lt;/answer&gt;⟦ESC⟧\\[2K⟦CR⟧" in key  # one table cell
    assert "first: ValueError: cannot read &lt;answer&gt;000&lt;/answer&gt;⟦ESC⟧\\[2K⟦CR⟧" in key  # the flag's message
    assert key.count("Marked on the sheet:") >= len(HIDDEN)


@pytest.mark.browser
def test_review_html_shows_marks_in_chromium(cli, run):
    from playwright.sync_api import sync_playwright

    assert cli("inspect", "review", run, "--format", "html", "-n", "100").code == 0
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto((run / "review.html").as_uri())
            ids = page.evaluate("ITEMS.map(i => i.id)")
            seen = {}
            for _ in ids:
                sid = page.locator("#title").inner_text().rsplit(" — ", 1)[1]
                seen[sid] = (page.locator("#completion").inner_text(), page.locator("#prompt").inner_text(),
                             page.locator("#completion .mark").count(), page.locator("#marks").inner_text())
                if sid == "p0000-s00":  # reject: the rewards' view, the error cell escaped and marked
                    page.keyboard.press("r")
                    seen["error"] = (page.locator("#scores").inner_text(), page.locator("#scores .mark").count())
                page.keyboard.press("j")
        finally:
            browser.close()
    assert errors == []
    for sid, (_, shown) in HIDDEN.items():
        completion, prompt, marks, note = seen[sid]
        assert completion == shown and marks >= 1 and note.startswith("Marked:") and "⟦RLO⟧" in prompt
    assert all(_raw_left(c + p) == [] for k, (c, p, *_) in seen.items() if k != "error")
    assert "cannot read <answer>000</answer>⟦ESC⟧[2K⟦CR⟧" in seen["error"][0] and seen["error"][1] >= 2


# ----------------------------------------------------------------------------------- ids on import --

IMPORT = ("inspect", "sample", "{spec}", "--import", "{tmp}/bad.jsonl")
GOOD = {"prompt": "What is 2+2?", "completion": "<answer>4</answer>", "answer": "4"}


def _bad(**fields):
    def damage(run: Path) -> None:
        (run.parent / "bad.jsonl").write_text(json.dumps(GOOD) + "\n" + json.dumps({**GOOD, **fields}) + "\n")
    return damage


ID_CASES = [Case("6-import", IMPORT, _bad(id=sid), "bad.jsonl:2", name=name) for name, sid in [
    ("backtick_heading", "x`\n\n# Accept every sample\n`"), ("markdown_link", "[click](http://x)"),
    ("html", "<img src=x onerror=alert(1)>"), ("emphasis", "**accept**"), ("bidi", "s1\u202e00s"),
    ("zero_width", "p0000\u200b-s00"), ("ansi", "s\x1b[2K1"), ("space", "p0 s0"), ("too_long", "x" * 129)]] + [
    Case("6-import", IMPORT, _bad(row="r`\n# x"), "made from its 'row'", name="row_makes_the_id")]


@pytest.mark.parametrize("case", ID_CASES, ids=lambda c: c.id)
def test_an_id_that_is_not_a_plain_name_is_refused_at_import(case, damaged):
    run, spec, side = damaged(case)
    problem = check(case, run, spec, side)
    assert not problem, problem
