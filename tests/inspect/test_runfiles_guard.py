"""The top-level guard and the run-file readers: OSError / decode errors / malformed run files are one
line and exit 2, never a traceback."""

from __future__ import annotations

import errno
import json
import subprocess
import sys

import pytest
from inspect_helpers import craft_samples, write_jsonl


def _one_line(r, *needles):
    assert r.code == 2 and "Traceback" not in r.err and len(r.err.strip().splitlines()) == 1, r
    assert all(n in r.err for n in needles), r


def _scored(make_run):
    run = make_run("good")
    rows = [{k: v for k, v in r.items() if k != "kind"} for r in craft_samples()]
    write_jsonl(run / "scored.jsonl", [{**r, "rewards": {"format_ok": 1.0}, "errors": {}, "passes": {"format_ok": True},
                                        "all_pass": True, "success": True, "total": 1.0, "flags": []} for r in rows])
    return run, rows


@pytest.mark.parametrize("code,needle", [(errno.EACCES, "permission denied"), (errno.ENOSPC, "no space left"),
                                         (errno.EROFS, "read-only file system"), (errno.EEXIST, "already exists")])
def test_os_errors_while_writing_name_the_path(cli, make_run, monkeypatch, code, needle):
    run, rows = _scored(make_run)
    import finetune.atomic as atomic

    def refuse(path, data, mode=None):
        raise OSError(code, "simulated", str(path))

    monkeypatch.setattr(atomic, "write_bytes", refuse)
    r = cli("inspect", "verdict", run, "--id", rows[0]["id"], "--accept", "--reader", "agent")
    _one_line(r, needle, str(run / "verdicts.jsonl"))
    assert not (run / "verdicts.jsonl").exists()


def test_a_directory_where_a_file_is_expected(cli, make_run, tmp_path):
    run, _ = _scored(make_run)
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    (tmp_path / "d").mkdir()
    _one_line(cli("inspect", "verdict", run, "--file", tmp_path / "d"), "is a directory")
    _one_line(cli("inspect", "sample", run, "--import", tmp_path / "d"), "is a directory")
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before


def test_out_naming_an_existing_file(cli, tmp_path):
    (tmp_path / "spec.yaml").write_text("name: x\nmodel: Qwen/Qwen2.5-7B\ndataset: {path: d.jsonl}\nrewards:\n"
                                        "  - {name: f, type: format, pattern: answer_tag}\n")
    (tmp_path / "taken").write_text("mine")
    r = cli("memory", tmp_path / "spec.yaml", "-o", tmp_path / "taken")
    _one_line(r, str(tmp_path / "taken"))
    assert (tmp_path / "taken").read_text() == "mine"


@pytest.mark.parametrize("edit,needle", [
    (lambda rows: rows[3].pop("id"), "scored.jsonl:4"),
    (lambda rows: rows[0].update(rewards=[1]), "rewards"),
    (lambda rows: rows[1].update(passes={"format_ok": "yes"}), "passes.format_ok"),
    (lambda rows: rows[2].update(id=rows[1]["id"]), "duplicate id"),
])
def test_malformed_scored_rows(cli, make_run, edit, needle):
    run, rows = _scored(make_run)
    scored = [json.loads(line) for line in (run / "scored.jsonl").read_text().splitlines()]
    edit(scored)
    write_jsonl(run / "scored.jsonl", scored)
    _one_line(cli("inspect", "verdict", run, "--id", rows[5]["id"], "--accept", "--reader", "agent"), needle)
    assert not (run / "verdicts.jsonl").exists()


@pytest.mark.parametrize("report", ['[1]', '{"rewards": 5}', '{"rewards": []}', b'{"x": "\xff"}'])
def test_malformed_score_report(cli, make_run, report):
    run, _ = _scored(make_run)
    (run / "score_report.json").write_bytes(report if isinstance(report, bytes) else report.encode())
    for verb in (("gate",), ("review",), ("ack", "some_flag", "--reason", "a long enough reason for the ack")):
        _one_line(cli("inspect", verb[0], run, *verb[1:]), "score_report.json")
    assert not (run / "gate.json").exists() and not (run / "review.md").exists() and not (run / "acks.json").exists()


@pytest.mark.parametrize("row", [[1, 2], {"a": 1}, True, 1.5])
def test_import_rows_with_a_bad_row_field(cli, make_run, tmp_path, row):
    run = make_run("good")
    before = (run / "samples.jsonl").read_bytes()
    write_jsonl(tmp_path / "imp.jsonl", [{"prompt": "p", "completion": "c", "row": row}])
    _one_line(cli("inspect", "sample", run, "--import", tmp_path / "imp.jsonl"), "imp.jsonl:1", "'row'")
    assert (run / "samples.jsonl").read_bytes() == before


def test_import_good_with_bad_base_writes_nothing(cli, make_run, tmp_path):
    run = make_run("good")
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    write_jsonl(tmp_path / "good.jsonl", [{"prompt": "p", "completion": "c"}])
    (tmp_path / "bad.jsonl").write_text('{"prompt": "p", "completion": "c"}\n{"prompt": \n')
    _one_line(cli("inspect", "sample", run, "--import", tmp_path / "good.jsonl", "--import-base",
                  tmp_path / "bad.jsonl"), "bad.jsonl:2")
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before


def test_terminal_review_on_eof_is_one_line(make_run, tmp_path):
    """A real process with stdin closed: the terminal review cannot read an answer."""
    run, _ = _scored(make_run)
    from finetune.inspect.verdicts import jsonio  # a valid report so the review gets as far as asking

    jsonio.write_json(run / "score_report.json", {
        "inputs": {}, "scored_sha256": "0" * 64, "samples": 64, "base_success": {"verdict": "learnable"},
        "rewards": [{"name": "format_ok", "role": "format", "threshold": 1.0}], "flags": [], "probes": []})
    r = subprocess.run([sys.executable, "-m", "finetune", "inspect", "review", str(run), "--format", "terminal"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "stdin" in r.stderr, r.stderr[-2000:]
