"""The reading sheets: selection, Markdown, the terminal review, and the HTML page in real Chromium."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from inspect_helpers import craft_samples, write_jsonl
from person_helpers import person_verdicts

from finetune.inspect import verdicts as V
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


def _honest(kind: str) -> dict:
    """What a careful reader says about a crafted sample, blind (correct-but-malformed included)."""
    return {"accept": kind == "right", "correct": kind in ("right", "malformed_right"),
            "well_formed": kind in ("right", "wrong")}


def _gated_run(cli, make_run, samples=None):
    """A run scored by the rendered rewards.py (exact match gated on the answer-tag format)."""
    run = make_run("good", samples=samples)
    assert cli("rewards", "render", run / "spec.yaml").code == 0
    assert cli("inspect", "score", run).code == 0
    return run


def _sheet_command(md: str, verb: str) -> list[str]:
    """The sheet's example command for `inspect <verb>`, split as a shell would."""
    import shlex

    line = next(m for m in re.findall(r"`([^`]+)`", md) if f" inspect {verb} " in m)
    return shlex.split(line)


@pytest.mark.slow
def test_markdown_sheet_is_blind_and_its_commands_run(cli, make_run):
    run = _scored_run(cli, make_run, "substring")  # flags and passing probes: none of it on the sheet
    r = cli("inspect", "review", run)
    assert r.code == 0, r
    md = (run / "review.md").read_text()
    assert md.count("\n### ") == 64 and "All 64 scored samples" in md and "Read at least 50" in md
    report = json.loads((run / "score_report.json").read_text())
    # no reward score, pass, view, flag, probe or base-success figure anywhere on the sheet
    for leak in ["| score |", "| passes |", "threshold", "Rewards' view", "rewards say", "Base success", "hedged",
                 *[f["id"] for f in report["flags"]], *[p["probe"] for p in report["probes"] if p["passing"]]]:
        assert leak not in md, leak
    for k, v in V.DEFINITIONS.items():
        assert f"**{k}** — {v}" in md
    # each sample's verdict line shows its id as JSON and leaves accept to the reader (not a string to copy)
    assert md.count('Verdict line: `{"id": "') == 64 and md.count('"accept": …}`') == 64 and '"…"' not in md

    # the sheet's commands, run as printed (the venv's console script, not a bare `finetune`), in real processes
    verdict_cmd = _sheet_command(md, "verdict")
    assert Path(verdict_cmd[0]).is_file() and verdict_cmd[-2:] == ["--reader", "agent"]
    reading = Path(verdict_cmd[verdict_cmd.index("--file") + 1])
    write_jsonl(reading, [{"id": s["id"], **_honest(s["kind"]), "note": s["kind"]} for s in craft_samples()])
    done = subprocess.run(verdict_cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "recorded 64 verdict(s)" in done.stdout
    done = subprocess.run(_sheet_command(md, "review"), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    key = (run / "review_key.md").read_text()
    assert key.count("\n### ") == 64 and "| score |" in key and "passing hack probes" in key
    assert "correct_without_answer:correctness" in key and "no verdict" not in key
    r = cli("inspect", "review", run, "-n", "20")
    assert r.code == 2 and "outside 50..100" in r.err


@pytest.mark.slow
def test_key_after_verdicts_and_a_verdict_after_the_key_is_reported(cli, make_run):
    run = _gated_run(cli, make_run)
    samples = craft_samples()
    write_jsonl(run / "reading.jsonl", [{"id": s["id"], **_honest(s["kind"])} for s in samples[:60]])
    assert person_verdicts(cli, run, run / "reading.jsonl").code == 0
    r = cli("inspect", "review", run, "--key")
    assert r.code == 0 and "4 sample(s) on the sheet have no verdict yet" in r.out
    key = (run / "review_key.md").read_text()
    assert "4 of 64 samples had no verdict" in key and key.count("Your verdict: none recorded yet") == 4
    assert "agreement: reader: correct but malformed" in key and "**disagreement**" not in key
    reveals = json.loads((run / "reveals.json").read_text())
    assert set(reveals) == {s["id"] for s in samples} and {e["via"] for e in reveals.values()} == {"key"}
    # the four left are read after the key was opened, at once (no pause: one-second time stamps let a verdict
    # recorded within the key's second pass as blind): the gate records them as judged after the reveal
    write_jsonl(run / "late.jsonl", [{"id": s["id"], **_honest(s["kind"])} for s in samples[60:]])
    assert person_verdicts(cli, run, run / "late.jsonl").code == 0
    r = cli("inspect", "gate", run)
    assert r.code == 0, r
    gate = json.loads((run / "gate.json").read_text())
    assert sorted(gate["blind"]["judged_after_reveal"]) == sorted(s["id"] for s in samples[60:])
    assert "4 verdict(s) recorded after the reader saw the rewards" in r.out


@pytest.mark.slow  # a scoring child (it imports torch for the zero-std prediction): 2-3.5 s CPU
def test_coverage_above_100_is_stratified_and_keeps_every_flagged_sample(cli, make_run):
    samples = craft_samples(n_prompts=30, per_prompt=4)  # 120 scored samples
    run = make_run("substring", samples=samples)
    assert cli("inspect", "score", run).code == 0
    assert cli("inspect", "review", run).code == 0
    md = (run / "review.md").read_text()
    on_sheet = set(re.findall(r"^### \d+\. `([^`]+)`", md, re.M))
    flagged = {json.loads(line)["id"] for line in (run / "scored.jsonl").read_text().splitlines()
               if json.loads(line)["flags"]}
    assert len(on_sheet) == 100 and "100 of 120 scored samples" in md
    assert flagged and flagged <= on_sheet


@pytest.mark.slow  # a scoring child (it imports torch for the zero-std prediction): 2-3.5 s CPU
def test_terminal_review_verdict_first_then_reveal_then_resumable(cli, make_run, monkeypatch):
    import io

    run = _gated_run(cli, make_run)
    # sample 1: accept (note), keep; sample 2: reject, correct, malformed, keep; sample 3: reject, then change
    # to accept after the reveal; then quit. A second session continues where it stopped.
    answers = "a\nlooks fine\nk\nr\ny\nn\nno tag\nk\nr\n?\n?\n\nc\na\n\nq\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(answers))
    r = cli("inspect", "review", run, "--format", "terminal")
    assert r.code == 2 and "not one" in r.err and not (run / "verdicts.jsonl").exists()  # no terminal, no person
    monkeypatch.setattr("finetune.cli.inspect.on_a_terminal", lambda: True)  # a person at a terminal
    r = cli("inspect", "review", run, "--format", "terminal")
    assert r.code == 0, r
    # blind: the first sample's completion is shown before any score, and its scores only after the verdict
    first = r.out.index("completion")
    assert "the rewards say" not in r.out[:first] and r.out.index("accept or reject") < r.out.index("the rewards say")
    from finetune.inspect import verdicts as V

    lines = [json.loads(line) for line in (run / "verdicts.jsonl").read_text().splitlines()]
    assert [v["reader"] for v in lines] == ["human"] * 4  # the third's blind verdict stays in the history
    assert lines[2]["accept"] is False and lines[3]["accept"] is True
    counted = V.load_verdicts(run)
    got = [counted[i].model_dump() for i in dict.fromkeys(v["id"] for v in lines)]
    assert len(got) == 3 and all(V.is_person(counted[v["id"]]) for v in lines) and got[0]["note"] == "looks fine"
    assert got[0]["correct"] is True and got[0]["well_formed"] is True  # accept means both
    assert got[1]["accept"] is False and got[1]["correct"] is True and got[1]["well_formed"] is False
    assert got[2]["changed_after_reveal"] is True and got[2]["first_verdict"]["accept"] is False
    assert got[2]["accept"] is True
    assert len(json.loads((run / "reveals.json").read_text())) == 3
    monkeypatch.setattr("sys.stdin", io.StringIO("s\nq\n"))
    r = cli("inspect", "review", run, "--format", "terminal")
    assert r.code == 0 and "3 of 64 already read; 61 to go" in r.out


@pytest.mark.browser
def test_html_page_blind_then_reveal_mouse_keys_export_then_gate(cli, make_run, tmp_path):
    from playwright.sync_api import sync_playwright

    run = _gated_run(cli, make_run)
    assert cli("inspect", "review", run, "--format", "html").code == 0
    page_path = run / "review.html"
    assert "http://" not in page_path.read_text() and "https://" not in page_path.read_text()
    select = {True: "true", False: "false", None: ""}

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
            assert len(items) == 64
            changed_id = None
            for n, it in enumerate(items):
                assert page.locator("#title").inner_text().endswith(it["id"])
                # blind: before the verdict no score, view or flag of this sample is on the page
                assert not page.locator("#key").is_visible() and page.locator("#scores tr").count() == 0
                assert "The rewards say" not in page.locator("body").inner_text()
                h = _honest(KIND[it["id"]])
                if n == 0:  # a note typed with the keyboard
                    page.keyboard.press("e")
                    page.keyboard.type("checked the sum by hand")
                    page.keyboard.press("Escape")
                if n % 2:  # mouse: the selects and the buttons
                    if not h["accept"]:
                        page.select_option("#correct", select[h["correct"]])
                        page.select_option("#well_formed", select[h["well_formed"]])
                    page.click("#accept" if h["accept"] else "#reject")
                else:  # keyboard: c / w cycle ? → yes → no → ?
                    if not h["accept"]:
                        for field, key in (("correct", "c"), ("well_formed", "w")):
                            for _ in range(1 if h[field] else 2):
                                page.keyboard.press(key)
                    page.keyboard.press("a" if h["accept"] else "r")
                # revealed after the verdict: the scores, the rewards' view, agreement with the reading
                assert page.locator("#key").is_visible() and page.locator("#scores tr").count() == 2
                assert page.locator("#view").inner_text() == ("ACCEPT" if it["view"] else "REJECT")
                if changed_id is None and KIND[it["id"]] == "wrong":  # a verdict changed after the reveal
                    page.keyboard.press("a")
                    assert "changed your verdict after the reveal" in page.locator("#agreement").inner_text()
                    page.keyboard.press("r")
                    page.keyboard.press("c")  # correct ? → yes → no again: the same judgement as first given
                    page.keyboard.press("c")
                    page.keyboard.press("c")
                    page.keyboard.press("a")  # and finally accept: changed after the reveal
                    changed_id = it["id"]
                page.keyboard.press("j")
            assert page.locator("#progress").inner_text().startswith("read 64 / 64")
            assert page.locator("#summary").is_visible()  # the run's flags/base success once all are read
            page.reload()  # verdicts survive a reload (resumable)
            assert page.locator("#progress").inner_text().startswith("read 64 / 64")
            with page.expect_download() as dl:
                page.keyboard.press("x")
            exported = tmp_path / "verdicts.jsonl"
            dl.value.save_as(exported)
            assert errors == []
        finally:
            browser.close()

    lines = {v["id"]: v for v in map(json.loads, exported.read_text().splitlines())}
    assert len(lines) == 64 and all(v["reader"] == "human" and v["revealed"] for v in lines.values())
    assert sum(v["note"] == "checked the sum by hand" for v in lines.values()) == 1
    assert [i for i, v in lines.items() if v["changed_after_reveal"]] == [changed_id]
    assert lines[changed_id]["first_verdict"] == {"accept": False, "correct": False, "well_formed": True}
    # the page's own export, bound to it (its digest on every line), recorded by the person as exported
    assert all(v["page"] and v["sample_sha256"] for v in lines.values())
    # the changed verdict accepts a wrong answer: the gate sees that disagreement and the change
    r = cli("inspect", "human-verdict", run, "--file", exported, "--yes")
    assert r.code == 0, r
    r = cli("inspect", "gate", run)
    assert r.code == 1 and f"{changed_id}: false negative" in r.out and "changed after the reveal" in r.out
    assert "correct-but-malformed sample(s) count as agreement" in r.out
    # corrected back to the honest reading, the same page export passes
    lines[changed_id].update(accept=False, correct=False)
    write_jsonl(tmp_path / "fixed.jsonl", list(lines.values()))
    assert cli("inspect", "human-verdict", run, "--file", tmp_path / "fixed.jsonl", "--yes").code == 0
    r = cli("inspect", "gate", run)
    assert r.code == 0, r
    assert verify_gate(run, load_spec(run / "spec.yaml")).ok
    assert set(json.loads((run / "reveals.json").read_text())) == set(lines)


def test_a_json_gold_is_shown_as_json_not_python_repr():
    import doctest

    from finetune.inspect import review

    assert doctest.testmod(review).failed == 0
    assert review._gold_text({"vendor": "Café", "n": None, "ok": True}) == '{"vendor": "Café", "n": null, "ok": true}'
