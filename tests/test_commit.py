"""Crash injection: SIGKILL between each step of a multi-file commit leaves the old or
the new config/ and rewards files — never a mix — and the next run leaves no temp file behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from render_fixtures import write_run

from finetune import atomic, commit

ROOT = Path(__file__).resolve().parents[1]
HUB_MODEL = "Qwen/Qwen3-1.7B"  # bundled config: no weights needed to render


def _snapshot(folder: Path, pattern: str = "*") -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob(pattern)) if p.is_file()}


def _leftovers(run: Path) -> list[str]:
    return sorted(p.name for p in run.rglob(".*") if p.name.endswith((".tmp", ".stage", ".old", ".journal")))


def _finetune(*args, crash: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **({atomic.CRASH_ENV: crash} if crash else {})}
    env.pop(atomic.CRASH_ENV, None) if not crash else None
    return subprocess.run([sys.executable, "-m", "finetune", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=600)


def _set_rewards(spec: Path, rewards: list[dict]) -> None:
    data = yaml.safe_load(spec.read_text())
    data["rewards"] = rewards
    spec.write_text(yaml.safe_dump(data, sort_keys=False))


MATH = [{"name": "format_ok", "type": "format", "pattern": "answer_tag", "weight": 0.2},
        {"name": "correct", "type": "math", "answer_column": "answer", "extract": "answer_tag", "weight": 1.0}]
TESTS = [{"name": "format_ok", "type": "format", "pattern": "answer_tag", "weight": 0.2},
         {"name": "passes", "type": "unit_tests", "tests_column": "answer", "weight": 1.0}]


@pytest.mark.slow
@pytest.mark.parametrize("step", ["files:staged", "files:journal", "files:rename:rewards.py",
                                  "files:rename:rewards_sandbox.py", "files:renamed"])
def test_rewards_render_killed_at_each_step(tmp_path, cli, step):
    spec = write_run(tmp_path / "run", HUB_MODEL)
    run = spec.parent
    _set_rewards(spec, MATH)
    assert _finetune("rewards", "render", spec).returncode == 0
    old = _snapshot(run, "rewards*.py")
    assert set(old) == {"rewards.py", "rewards_answers.py", "rewards_mathpool.py", "rewards_meta.py"}
    _set_rewards(spec, TESTS)
    r = _finetune("rewards", "render", spec, crash=step)
    assert r.returncode == -9, r.stderr[-2000:]
    cli("inspect", "gate", run)  # the next run of any verb recovers first (exit 2 here: nothing scored)
    after = _snapshot(run, "rewards*.py")
    assert _leftovers(run) == []
    assert _finetune("rewards", "render", spec).returncode == 0
    new = _snapshot(run, "rewards*.py")
    assert set(new) == {"rewards.py", "rewards_answers.py", "rewards_code.py", "rewards_meta.py", "rewards_sandbox.py"}
    assert after in (old, new), (step, sorted(after))
    # before the journal nothing changed; after it, the next run finished the commit
    assert after == (old if step == "files:staged" else new)


@pytest.mark.slow
@pytest.mark.parametrize("step", ["config:staged", "config:switched"])
def test_config_render_killed_at_each_step(tmp_path, cli, step):
    spec = write_run(tmp_path / "run", HUB_MODEL)
    run = spec.parent
    assert _finetune("config", "render", spec, "--no-gate").returncode == 0
    old = _snapshot(run / "config")
    data = yaml.safe_load(spec.read_text())
    data["hardware"] = {"profile": "h100-80gb", "gpus": 8, "nodes": 1}
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    r = _finetune("config", "render", spec, "--no-gate", crash=step)
    assert r.returncode == -9, r.stderr[-2000:]
    cli("inspect", "gate", run)
    after = _snapshot(run / "config")
    assert _leftovers(run) == []
    assert _finetune("config", "render", spec, "--no-gate").returncode == 0
    new = _snapshot(run / "config")
    assert "accelerate.yaml" in new and "accelerate.yaml" not in old and old != new
    assert after == (old if step == "config:staged" else new)


def test_stale_temp_files_of_dead_writers_are_removed(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".scored.jsonl.{dead.pid}.k3j_x9.tmp"
    live = tmp_path / f".verdicts.jsonl.{os.getpid()}.ab12cd.tmp"
    unowned_old = tmp_path / ".gate.json.x8y7z6.tmp"
    unowned_new = tmp_path / ".acks.json.q1w2e3.tmp"
    stage = tmp_path / f".config.{dead.pid}.0a1b2c3d.stage"
    for p in (stale, live, unowned_old, unowned_new):
        p.write_bytes(b"x" * 1024)
    stage.mkdir()
    (stage / "train.py").write_text("old")
    os.utime(unowned_old, (1, 1))
    commit.recover(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, unowned_new.name])


@pytest.mark.slow  # a scoring child (it imports torch for the zero-std prediction): 2-3.5 s CPU
def test_inspect_score_killed_mid_write_leaves_nothing_after_the_next_run(tmp_path):
    """kill -9 during `inspect score` used to leave 12-43 MB .scored.jsonl.*.tmp files forever."""
    sys.path.insert(0, str(ROOT / "tests" / "inspect"))
    import shutil

    from inspect_helpers import CORRECTNESS, MODULES, SPEC, craft_samples, write_jsonl

    run = tmp_path / "run"
    run.mkdir()
    (run / "spec.yaml").write_text(SPEC.format(correctness=CORRECTNESS["exact_match"]))
    shutil.copy(MODULES / "good.py", run / "rewards.py")
    write_jsonl(run / "samples.jsonl", [{k: v for k, v in r.items() if k != "kind"} for r in craft_samples()])
    r = _finetune("inspect", "score", run, crash="files:staged")  # scored.jsonl + score_report.json: one commit
    assert r.returncode == -9
    stages = [p for p in run.iterdir() if p.name.startswith(".files.") and p.name.endswith(".stage")]
    assert len(stages) == 1 and sorted(p.name for p in stages[0].iterdir()) == ["score_report.json", "scored.jsonl"]
    assert not (run / "scored.jsonl").exists()
    r = _finetune("inspect", "gate", run)  # the next run
    assert r.returncode == 2 and _leftovers(run) == []


def test_switch_without_renameat2_is_journalled(tmp_path, monkeypatch):
    monkeypatch.setattr(commit, "_exchange", lambda a, b: False)
    target = tmp_path / "config"
    with commit.staged_dir(target) as stage:
        (stage / "a").write_text("1")
    with commit.staged_dir(target, keep=lambda n: False) as stage:
        (stage / "b").write_text("2")
    assert _snapshot(target) == {"b": b"2"} and _leftovers(tmp_path) == []


COMMIT_IN_CHILD = """
import sys
from finetune import commit
commit.commit_files(sys.argv[1], {"data/filtered.jsonl": "{}\\n", "filter_report.md": "# report\\n",
                                  "data/pass_rates.png": bytes(range(256))})
"""


def test_commit_files_into_a_sub_folder_killed_mid_switch_rolls_forward(tmp_path):
    """Names may name a sub-folder (a data filter's data/filtered.jsonl beside its report): same commit."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "filter_report.md").write_text("old\n")
    r = subprocess.run([sys.executable, "-c", COMMIT_IN_CHILD, str(run)], capture_output=True, text=True,
                       env={**os.environ, atomic.CRASH_ENV: "files:rename:data/filtered.jsonl"})
    assert r.returncode == -9, r.stderr
    assert (run / "filter_report.md").read_text() == "old\n" and commit.pending(run) == [
        "filter_report.md", "data/pass_rates.png"]
    commit.recover(run)
    assert (run / "data" / "filtered.jsonl").read_text() == "{}\n" and (run / "filter_report.md").read_text() == \
        "# report\n" and (run / "data" / "pass_rates.png").read_bytes() == bytes(range(256))
    assert _leftovers(run) == [] and commit.pending(run) == []


@pytest.mark.parametrize("name", ["../escape.txt", "/tmp/abs.txt", "data/../../x", ""])
def test_commit_files_refuses_names_outside_the_run_directory(tmp_path, name):
    with pytest.raises(ValueError, match="not a path inside the run directory"):
        commit.commit_files(tmp_path / "run", {name: "x"})
    assert not (tmp_path / "run").exists() and not (tmp_path / "escape.txt").exists()
