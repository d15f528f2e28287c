"""finetune.jsonio: the one JSON(L) writer/reader — line separators, non-finite numbers, bad lines."""

from __future__ import annotations

import math

import pytest

from finetune import jsonio
from finetune.errors import UserError

BREAKS = ["\u2028", "\u2029", "\u0085", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\r", "\n"]


@pytest.mark.parametrize("ch", BREAKS, ids=[f"U+{ord(c):04X}" for c in BREAKS])
def test_every_splitlines_break_is_escaped_and_round_trips(tmp_path, ch):
    rows = [{"id": "a", "note": f"x{ch}y"}, {"id": "b", "note": "plain"}]
    path = jsonio.write_jsonl(tmp_path / "v.jsonl", rows)
    text = path.read_text(encoding="utf-8")
    # the file has exactly one physical line per row, whichever splitter a reader uses
    assert len(text.splitlines()) == 2
    assert [obj for _, obj in jsonio.read_jsonl(path)] == rows


def test_reader_splits_only_on_newline(tmp_path):
    path = tmp_path / "raw.jsonl"
    # written by another tool with a raw U+2028 inside a string: still one JSON value
    path.write_text('{"note": "a\u2028b"}\n{"note": "c"}\n', encoding="utf-8")
    assert [n for n, _ in jsonio.read_jsonl(path)] == [1, 2]
    assert jsonio.read_jsonl(path)[0][1]["note"] == "a\u2028b"


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_refused_with_where(tmp_path, bad):
    with pytest.raises(UserError) as exc:
        jsonio.write_jsonl(tmp_path / "s.jsonl", [{"id": "a", "rewards": {"r": bad}}])
    assert "$.rewards.r" in exc.value.line() and "s.jsonl" in exc.value.line()
    assert not list(tmp_path.iterdir())  # nothing written, no temp file


def test_non_finite_null_where_documented(tmp_path):
    path = jsonio.write_json(tmp_path / "r.json", {"a": [1.0, math.nan], "b": math.inf}, nonfinite="null")
    assert jsonio.read_json(path) == {"a": [1.0, None], "b": None}
    assert jsonio.finite_or_null({"x": (math.nan,)}) == {"x": [None]}


@pytest.mark.parametrize("text,msg", [
    ('{"a": NaN}\n', "non-finite"),
    ('{"a": Infinity}\n', "non-finite"),
    ('{"a": 1}\n{"a": \n', "invalid JSON"),
    ("[" * 100000 + "\n", "invalid JSON"),
])
def test_bad_lines_name_file_and_line(tmp_path, text, msg):
    path = tmp_path / "x.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserError) as exc:
        jsonio.read_jsonl(path)
    assert msg in exc.value.line() and f"{path}:" in exc.value.line()


def test_foreign_logs_may_hold_nan(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"loss": NaN}\n', encoding="utf-8")
    assert math.isnan(jsonio.read_jsonl(path, allow_nan=True)[0][1]["loss"])


@pytest.mark.parametrize("setup,msg", [
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: p.write_bytes(b'{"a": "\xff"}'), "not UTF-8"),
    (lambda p: None, "file not found"),
    (lambda p: p.write_text("[1]"), "must be a JSON object"),
])
def test_read_json_object_problems_are_one_line(tmp_path, setup, msg):
    path = tmp_path / "gate.json"
    setup(path)
    with pytest.raises(UserError) as exc:
        jsonio.read_json_object(path, what="the gate record")
    assert msg in exc.value.line() and "\n" not in exc.value.line()


def test_atomic_writers_go_through_jsonio(tmp_path):

    path = jsonio.write_jsonl(tmp_path / "a.jsonl", [{"n": "a\u2028b"}])
    assert "\\u2028" in path.read_text(encoding="utf-8")
    with pytest.raises(UserError):
        jsonio.write_json(tmp_path / "b.json", {"x": math.nan})


def test_verdict_note_with_line_separator_keeps_the_run_usable(tmp_path):
    """`inspect verdict --note $'a\\u2028b'` used to corrupt verdicts.jsonl."""
    from finetune.inspect import verdicts as V

    run = tmp_path / "run"
    run.mkdir()
    jsonio.write_jsonl(run / "scored.jsonl", [{
        "id": "p0", "row": 0, "prompt": "q", "completion": "c\u0085d", "columns": {}, "rewards": {"r": 1.0},
        "passes": {"r": True}, "all_pass": True, "success": True, "total": 1.0}])
    V.record_verdicts(run, [V.Verdict(id="p0", accept=True, note="a\u2028b\u0085c", reader="human")], via="human-verdict")
    V.record_verdicts(run, [V.Verdict(id="p0", accept=False, note="again\u2029", reader="human")], via="human-verdict")
    got = V.load_verdicts(run)
    # the later verdict counts; the first stays in the history, and every line still parses
    assert got["p0"].note == "again\u2029" and len((run / "verdicts.jsonl").read_text().splitlines()) == 2
