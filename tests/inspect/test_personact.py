"""What a person's command accepts and shows: only the review page's export, and where samples came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from finetune.errors import UserError
from finetune.inspect import personact
from finetune.inspect.verdicts import Verdict


def _page(run: Path, digest: str) -> None:
    run.mkdir(exist_ok=True)
    (run / "review.html").write_text(f'<!doctype html>\n<meta charset="utf-8">\n'
                                     f'<meta name="finetune-page" content="{digest}">\n')


def test_only_an_export_of_the_page_there_now_is_taken(tmp_path):
    digest = personact.page_digest([("p0", "a" * 64), ("p1", "b" * 64)])
    assert digest == personact.page_digest([("p0", "a" * 64), ("p1", "b" * 64)]) != personact.page_digest(
        [("p1", "b" * 64), ("p0", "a" * 64)])
    line = Verdict(id="p0", accept=True, reader="human", page=digest, sample_sha256="a" * 64)
    with pytest.raises(UserError, match="no review page"):
        personact.check_export(tmp_path, [line], "v.jsonl")
    _page(tmp_path, digest)
    assert personact.check_export(tmp_path, [line], "v.jsonl") == digest
    with pytest.raises(UserError, match="not an export of the review page"):
        personact.check_export(tmp_path, [line.model_copy(update={"page": None})], "reading.jsonl")
    with pytest.raises(UserError, match="another review page"):
        personact.check_export(tmp_path, [line, line.model_copy(update={"page": "c" * 64})], "v.jsonl")
    with pytest.raises(UserError, match="names no sample digest"):
        personact.check_export(tmp_path, [line.model_copy(update={"sample_sha256": None})], "v.jsonl")


def test_agent_writable_follows_the_commands_write_rules(tmp_path, monkeypatch):
    rules = personact.agent_write_rules()
    assert rules and "runs/*/reading.jsonl" in rules
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "x" / "requests").mkdir(parents=True)
    for rel, writable in (("runs/x/reading.jsonl", True), ("runs/x/spec.yaml", True),
                          ("elsewhere/reading.jsonl", True), ("runs/x/requests/samples.jsonl", False)):
        assert personact.agent_writable(tmp_path / rel) is writable, rel
