"""Multi-turn rollouts on the reading sheets: the HTML page (real Chromium) and the terminal sheet show every
turn, tool call and tool result of a trajectory, as text — a tool result holding HTML or a script is shown,
never run — and the verdicts read from the page pass the gate's reading check."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from finetune.demo import tools as demo_tools

HOSTILE = '<script>window.PWNED=1</script><img src=x onerror="window.PWNED=2"></pre><b>bold</b> [/] [red]x'


def _rollout(a: int, b: int, k: int) -> list[dict]:
    result = str(a + b + k) + (" " + HOSTILE if k else "")
    return [{"role": "assistant", "content": f"Let me add {a} and {b}.", "tool_calls": [
        {"type": "function", "function": {"name": "add", "arguments": {"a": a, "b": b + k}}}]},
        {"role": "tool", "name": "add", "content": result},
        {"role": "assistant", "content": f"The answer is {a + b + k}."}]


@pytest.fixture
def tool_run(tmp_path: Path, cli) -> Path:
    run = tmp_path / "run"
    (run / "data").mkdir(parents=True)
    rows = demo_tools.rows(8, seed=1)
    (run / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "env.py").write_text(demo_tools.ENV_SOURCE)
    spec = {"name": "rv", "model": "Qwen/Qwen2.5-0.5B-Instruct",
            "dataset": {"path": "data/train.jsonl", "prompt_column": "prompt"},
            "environment": {"file": "env.py", "class": demo_tools.ENV_CLASS, "max_tool_calling_iterations": 2},
            "rewards": [{"name": "solved", "type": "environment"}],
            "hardware": {"profile": "h100-80gb", "gpus": 1, "nodes": 1},
            "inspection": {"prompts": 4, "per_prompt": 2, "min_read": 50, "probe_prompts": 2}}
    (run / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    samples = [{"id": f"p{i}-s{k}", "row": i, "prompt": r["prompt"], "completion": _rollout(r["a"], r["b"], k),
                "columns": {"a": r["a"], "b": r["b"], "expected_call": r["expected_call"]}}
               for i, r in enumerate(rows[:4]) for k in (0, 1)]
    (run / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    assert cli("rewards", "render", run / "spec.yaml").code == 0
    assert cli("inspect", "score", run).code == 0
    return run


def _turns(a: int, b: int, k: int) -> list[str]:
    """What a reader must see of a rollout, in order."""
    return [f"Let me add {a} and {b}.", '"name": "add"', f'"arguments": {{"a": {a}, "b": {b + k}}}',
            "<tool_response> add", str(a + b + k) + (" " + HOSTILE if k else ""), f"The answer is {a + b + k}."]


def _in_order(text: str, parts: list[str]) -> bool:
    pos = 0
    for part in parts:
        pos = text.find(part, pos)
        if pos < 0:
            return False
        pos += len(part)
    return True


def test_terminal_sheet_shows_every_turn_as_text(tool_run, cli, monkeypatch):
    monkeypatch.setattr("finetune.cli.inspect.on_a_terminal", lambda: True)  # a person at a terminal
    monkeypatch.setenv("COLUMNS", "400")  # one turn per line: nothing wrapped
    monkeypatch.setattr("sys.stdin", io.StringIO("r\n?\n?\nthe tool result holds markup\nk\nq\n"))
    out = cli("inspect", "review", tool_run, "--format", "terminal").out
    rows = {f"p{i}-s{k}": (r["a"], r["b"], k) for i, r in enumerate(demo_tools.rows(8, seed=1)[:4]) for k in (0, 1)}
    first = out[:out.index("accept or reject")]
    shown = [i for i in rows if i in first]
    assert len(shown) == 1 and _in_order(first, _turns(*rows[shown[0]])), first
    verdicts = [json.loads(line) for line in (tool_run / "verdicts.jsonl").read_text().splitlines()]
    assert [(v["id"], v["accept"], v["reader"]) for v in verdicts] == [(shown[0], False, "human")]


@pytest.mark.browser
def test_html_page_shows_rollouts_as_text_and_runs_nothing_from_a_tool_result(tool_run, cli, tmp_path):
    from playwright.sync_api import sync_playwright

    assert cli("inspect", "review", tool_run, "--format", "html").code == 0
    rows = {f"p{i}-s{k}": (r["a"], r["b"], k) for i, r in enumerate(demo_tools.rows(8, seed=1)[:4]) for k in (0, 1)}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                                          "--disable-dev-shm-usage", "--no-first-run"])
        try:
            page = browser.new_context(accept_downloads=True).new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto((tool_run / "review.html").as_uri())
            ids = page.evaluate("ITEMS.map(i => i.id)")
            assert sorted(ids) == sorted(rows)
            for item_id in ids:
                assert page.locator("#title").inner_text().endswith(item_id)
                shown = page.locator("#completion").inner_text()
                assert _in_order(shown, _turns(*rows[item_id])), shown
                page.keyboard.press("r" if rows[item_id][2] else "a")
                page.keyboard.press("j")
            assert page.evaluate("typeof window.PWNED") == "undefined"
            assert page.locator("img").count() == 0 and page.locator("#completion b").count() == 0
            assert page.locator("#progress").inner_text().startswith("read 8 / 8")
            with page.expect_download() as dl:
                page.keyboard.press("x")
            exported = tmp_path / "verdicts.jsonl"
            dl.value.save_as(exported)
            assert errors == []
        finally:
            browser.close()
    verdicts = [json.loads(line) for line in exported.read_text().splitlines()]
    assert {v["id"]: v["accept"] for v in verdicts} == {i: not rows[i][2] for i in rows}
    assert cli("inspect", "human-verdict", tool_run, "--file", exported, "--yes").code == 0  # the page's own export
