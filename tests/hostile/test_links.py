"""Symbolic and hard links planted in a run directory: nothing the plugin writes goes through them.

A careless agent or an attacker with write access to the run folder can replace a file the plugin
appends to, or a folder it re-renders, by a link to a file elsewhere (a shell profile, another run's
log). Appends refuse links (O_NOFOLLOW, one hard link), atomic writes replace the link itself, and a
re-rendered folder that is a link is replaced by a real folder without reading through it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from finetune import atomic, commit
from finetune.errors import UserError

PROFILE = "export PATH=/usr/bin\n"


@pytest.fixture
def outside(tmp_path) -> Path:
    """A file outside the run dir (a stand-in for ~/.bashrc) and the run dir beside it."""
    victim = tmp_path / "home" / ".bashrc"
    victim.parent.mkdir()
    victim.write_text(PROFILE)
    (tmp_path / "run" / "data").mkdir(parents=True)
    return victim


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
def test_data_filter_append_refuses_a_link(outside, tmp_path, link):
    from finetune.datafilter import append_line

    rates = tmp_path / "run" / "data" / "pass_rates.jsonl"
    (rates.symlink_to if link == "symlink" else rates.hardlink_to)(outside)
    with pytest.raises(UserError) as err:
        append_line(rates, {"row": 0, "rate": 0.5})
    assert str(rates) in str(err.value)
    assert outside.read_text() == PROFILE


def test_data_filter_append_writes_its_own_file(tmp_path):
    from finetune.datafilter import append_line

    rates = tmp_path / "pass_rates.jsonl"
    append_line(rates, {"row": 0})
    append_line(rates, {"row": 1})
    assert [json.loads(x)["row"] for x in rates.read_text().splitlines()] == [0, 1]


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
def test_inspection_log_append_refuses_a_link(outside, tmp_path, link):
    from finetune.watch import _append

    index = tmp_path / "run" / "data" / "index.jsonl"
    (index.symlink_to if link == "symlink" else index.hardlink_to)(outside)
    with pytest.raises(OSError):
        _append(index, ['{"step": 1}'])
    assert outside.read_text() == PROFILE


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
def test_atomic_write_replaces_the_link_not_its_target(outside, tmp_path, link):
    gate = tmp_path / "run" / "gate.json"
    (gate.symlink_to if link == "symlink" else gate.hardlink_to)(outside)
    atomic.write_text(gate, '{"status": "FAIL"}\n')
    assert outside.read_text() == PROFILE and not gate.is_symlink() and gate.read_text() == '{"status": "FAIL"}\n'


def test_rerendered_folder_that_is_a_link_is_replaced_without_reading_through_it(tmp_path):
    """config/ (or diagnosis/) planted as a link to a folder elsewhere: the new folder replaces the link, the
    folder elsewhere keeps exactly its files, and none of them is copied into the run."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "id_rsa").write_text("secret")
    run = tmp_path / "run"
    run.mkdir()
    (run / "config").symlink_to(elsewhere, target_is_directory=True)
    with commit.staged_dir(run / "config") as stage:
        (stage / "train.py").write_text("print('train')\n")
    assert sorted(os.listdir(elsewhere)) == ["id_rsa"] and (elsewhere / "id_rsa").read_text() == "secret"
    assert not (run / "config").is_symlink() and sorted(os.listdir(run / "config")) == ["train.py"]
    assert sorted(p.name for p in run.iterdir()) == ["config"]  # no leftover stage holding the link
