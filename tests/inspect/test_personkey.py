"""The person's key: made once, private, and the only thing that makes a signature check."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from finetune.errors import UserError
from finetune.inspect import personkey


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "llm-finetuning"


def test_sign_makes_a_private_key_once_and_verify_checks_it(home):
    assert not personkey.verify("verdict", {"id": "a"}, "0" * 64)  # no key yet: nothing is a person's
    sig = personkey.sign("verdict", {"id": "a", "accept": True})
    key = home / "person.key"
    assert key.stat().st_mode & 0o777 == 0o600 and home.stat().st_mode & 0o777 == 0o700
    assert personkey.verify("verdict", {"id": "a", "accept": True}, sig)
    assert personkey.sign("verdict", {"id": "a", "accept": True}) == sig and key.read_text().strip()
    assert not personkey.verify("verdict", {"id": "a", "accept": False}, sig)  # another payload
    assert not personkey.verify("ack", {"id": "a", "accept": True}, sig)  # another kind of act
    assert not personkey.verify("verdict", {"id": "a", "accept": True}, "é" * 64)  # never a crash


def test_a_key_others_can_read_or_a_link_is_refused(home, tmp_path):
    personkey.sign("ack", {"x": 1})
    key = home / "person.key"
    key.chmod(0o640)
    with pytest.raises(UserError, match="readable or writable by others"):
        personkey.sign("ack", {"x": 1})
    key.unlink()
    (tmp_path / "elsewhere").write_text("ab" * 32)
    (tmp_path / "elsewhere").chmod(0o600)
    key.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UserError, match="not a plain file"):
        personkey.verify("ack", {"x": 1}, "0" * 64)


def test_concurrent_first_signatures_share_one_key(home):
    code = "from finetune.inspect import personkey; print(personkey.sign('verdict', {'n': 1}))"
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=dict(os.environ))
             for _ in range(4)]
    sigs = {p.communicate(timeout=120)[0].strip() for p in procs}
    assert len(sigs) == 1 and personkey.verify("verdict", {"n": 1}, sigs.pop())
    assert [p.name for p in home.iterdir()] == ["person.key"]  # no staged key left behind


def test_person_setting_joins_userconfig_and_the_persons_shell(home, monkeypatch):
    monkeypatch.delenv("FINETUNE_JUDGE_HOSTS", raising=False)
    assert personkey.person_setting("judge_hosts") == []
    home.mkdir(parents=True)
    (home / "settings.json").write_text(json.dumps({"judge_hosts": ["a.example", "b.example,c.example"]}))
    monkeypatch.setenv("FINETUNE_JUDGE_HOSTS", "d.example, a.example")
    assert personkey.person_setting("judge_hosts") == ["d.example", "a.example", "b.example", "c.example"]
    (home / "settings.json").write_text("not json")
    assert personkey.person_setting("judge_hosts") == ["d.example", "a.example"]
