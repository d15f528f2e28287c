"""Shared run files under a lock: concurrent writers, real processes, none lost."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from inspect_helpers import craft_samples, write_jsonl

WRITERS = 10


def _scored_run(make_run):
    run = make_run("good")
    rows = [{k: v for k, v in r.items() if k != "kind"} for r in craft_samples()]
    write_jsonl(run / "scored.jsonl", [{**r, "rewards": {"format_ok": 1.0}, "passes": {"format_ok": True},
                                        "all_pass": True, "success": True, "total": 1.0} for r in rows])  # what `inspect verdict` checks ids and digests against
    return run, [r["id"] for r in rows]


@pytest.mark.slow
def test_concurrent_verdict_commands_lose_nothing(make_run):
    run, ids = _scored_run(make_run)
    procs = [subprocess.Popen([sys.executable, "-m", "finetune", "inspect", "verdict", str(run), "--id", ids[i],
                               "--accept" if i % 2 else "--reject", "--note", f"w{i}\u2028", "--reader", "agent"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(WRITERS)]
    outs = [p.communicate(timeout=240) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    lines = (run / "verdicts.jsonl").read_text(encoding="utf-8").split("\n")
    saved = {json.loads(line)["id"]: json.loads(line) for line in lines if line}
    assert set(saved) == set(ids[:WRITERS])  # every "recorded" is on disk
    assert all(saved[ids[i]]["note"] == f"w{i}\u2028" and saved[ids[i]]["accept"] == bool(i % 2)
               for i in range(WRITERS))
    assert not [p.name for p in run.iterdir() if p.name.endswith(".tmp")]


ACK_WRITER = """
import sys
from finetune.inspect import verdicts as V
flags = [{"id": f"flag{i}", "message": f"m{i}", "sample_ids": []} for i in range(%d)]
i = int(sys.argv[1])
V.acknowledge(sys.argv[2], f"flag{i}", f"writer {i} read every sample and accepts it", f"w{i}", flags, [])
"""


@pytest.mark.slow  # several writer interpreters, each importing the inspect stack: 2.5 s CPU
def test_concurrent_acks_lose_nothing(tmp_path):
    code = ACK_WRITER % WRITERS
    procs = [subprocess.Popen([sys.executable, "-c", code, str(i), str(tmp_path)], stderr=subprocess.PIPE, text=True)
             for i in range(WRITERS)]
    errs = [p.communicate(timeout=240)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errs
    from finetune.inspect import verdicts as V

    acks = V.load_acks(tmp_path)
    assert sorted(acks) == sorted(f"flag{i}" for i in range(WRITERS))
    assert all(acks[f"flag{i}"].by == f"w{i}" and acks[f"flag{i}"].signed(f"flag{i}") for i in range(WRITERS))


def test_lock_is_reentrant_and_writes_nothing(tmp_path):
    from finetune import locks

    before = sorted(tmp_path.iterdir())
    with locks.file_lock(tmp_path / "verdicts.jsonl"):
        with locks.file_lock(tmp_path / "acks.json"):  # same run directory: no self-deadlock
            pass
    assert sorted(tmp_path.iterdir()) == before == []


def test_lock_excludes_another_process(tmp_path):
    from finetune import locks

    probe = ("import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)\n"
             "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB); print('free')\n"
             "except BlockingIOError:\n    print('held')")
    with locks.file_lock(tmp_path / "verdicts.jsonl"):
        held = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True).stdout
    free = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True).stdout
    assert (held.strip(), free.strip()) == ("held", "free")
