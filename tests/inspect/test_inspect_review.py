"""The reading sheets: selection, Markdown, the terminal review, and the HTML page in real Chromium."""

from __future__ import annotations

import json

import pytest

from inspect_helpers import craft_samples
from finetune.inspect.gate import verify_gate
from finetune.inspect.review import select
from finetune.spec import load_spec

KIND = {s["id"]: s["kind"] for s in craft_samples()}


def _scored_run(cli, make_run, module="good"):
    run = make_run(module)
    assert cli("inspect", "score", run).code == 0
    return run


def test_selection_is_stratified_and_keeps_every_flagged_sample():
    rows = []
    for i in range(200):
        value = 1.0 if i % 10 == 0 else 0.0  # 20 passing, 180 failing
        rows.append({"id": f"s{i}", "rewards": {"correctness": value}, "flags": ["x"] if i in (3, 5) else []})
    picked = select(rows, 60, seed=1)
    ids = {r["id"] for r in picked}
    assert len(picked) == 60 and {"s3", "s5"} <= ids
    assert sum(r["rewards"]["correctness"] == 1.0 for r in picked) == 20  # the rare stratum is not drowned
    assert [r["id"] for r in select(rows, 60, seed=1)] == [r["id"] for r in picked]


def test_markdown_sheet(cli, make_run):
    run = _scored_run(cli, make_run, "substring")
    r = cli("inspect", "review", run)
    assert r.code == 0, r
    md = (run / "review.md").read_text()
    assert md.count("\n### ") == 60 and "Read at least 50" in md
    assert "passing hack probes" in md and "hedged" in md and "correct_without_answer:correctness" in md
    assert f"finetune inspect verdict {run} --id " in md and "--reader agent" in md
    from finetune.invocation import runnable

    assert f"`{runnable()} inspect verdict {run} --id " in md  # the venv's script: runs as printed
    r = cli("inspect", "review", run, "-n", "20")
    assert r.code == 2 and "outside 50..100" in r.err


def test_terminal_review_is_resumable(cli, make_run, monkeypatch):
    import io

    run = _scored_run(cli, make_run)
    # agree with the rewards on three samples, then quit; a second session continues where it stopped
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n\ny\nlooks fine\nn\nformat is wrong\nq\n"))
    assert cli("inspect", "review", run, "--format", "terminal").code == 0
    first = [json.loads(line) for line in (run / "verdicts.jsonl").read_text().splitlines()]
    assert [v["reader"] for v in first] == ["human"] * 3 and first[1]["note"] == "looks fine"
    monkeypatch.setattr("sys.stdin", io.StringIO("s\nq\n"))
    r = cli("inspect", "review", run, "--format", "terminal")
    assert r.code == 0 and "3 of 60 already read; 57 to go" in r.out


@pytest.mark.browser
def test_html_page_in_chromium_mouse_keys_export_then_gate(cli, make_run, tmp_path):
    from playwright.sync_api import sync_playwright

    run = _scored_run(cli, make_run)
    assert cli("inspect", "review", run, "--format", "html").code == 0
    page_path = run / "review.html"
    assert "http://" not in page_path.read_text() and "https://" not in page_path.read_text()

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                                          "--disable-dev-shm-usage", "--no-first-run"])
        try:
            page = browser.new_context(accept_downloads=True).new_page()
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(page_path.as_uri())
            items = page.evaluate("ITEMS.map(i => ({id: i.id, view: i.reward_view}))")
            assert len(items) == 60
            for n, it in enumerate(items):
                assert page.locator("#title").inner_text().endswith(it["id"])
                agree = (KIND[it["id"]] == "right") == it["view"]
                if n == 0:  # a note typed with the keyboard, then a correctness mark
                    page.keyboard.press("e")
                    page.keyboard.type("checked the sum by hand")
                    page.keyboard.press("Escape")
                    page.keyboard.press("c")
                    if KIND[it["id"]] in ("wrong", "malformed_wrong"):
                        page.keyboard.press("c")  # yes → no
                    elif KIND[it["id"]] == "malformed_right":
                        page.keyboard.press("c")
                        page.keyboard.press("c")  # back to unset: the reward needs the tag to see it
                if n % 2:
                    page.click("#agree" if agree else "#disagree")
                else:
                    page.keyboard.press("y" if agree else "n")
            assert page.locator("#progress").inner_text().startswith("read 60 / 60")
            page.reload()  # verdicts survive a reload (resumable)
            assert page.locator("#progress").inner_text().startswith("read 60 / 60")
            with page.expect_download() as dl:
                page.keyboard.press("x")
            exported = tmp_path / "verdicts.jsonl"
            dl.value.save_as(exported)
            assert errors == []
        finally:
            browser.close()

    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    assert len(lines) == 60 and all(v["reader"] == "human" for v in lines)
    assert sum(v["note"] == "checked the sum by hand" for v in lines) == 1
    r = cli("inspect", "verdict", run, "--file", exported)
    assert r.code == 0, r
    r = cli("inspect", "gate", run)
    assert r.code == 0, r
    assert verify_gate(run, load_spec(run / "spec.yaml")).ok
