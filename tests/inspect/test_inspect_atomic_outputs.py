"""Phase 1's multi-file outputs switch atomically.

`inspect sample` (samples.jsonl, base_samples.jsonl, sample_info.json) and `inspect score`
(scored.jsonl, score_report.json) each commit through :func:`finetune.commit.commit_files`. These
tests run the real command in a subprocess and SIGKILL it between two of its file writes, through the
crash hook the helper already has (``FINETUNE_TEST_CRASH_AT``, :func:`finetune.atomic.crash_point`).
Then: before any recovery `finetune status` never calls a half-switched pair current; the next verb
(`inspect gate`) finishes or discards the commit, leaving exactly the old or exactly the new files and
no staging leftovers; and `status` and `gate` then agree on the state.

Pausing (for the concurrency tests) has no hook in the helper, so those children monkeypatch
``atomic.crash_point`` (and commit's name for it) in the child itself (``python -c PRELUDE``, then the real ``finetune.cli.main``):
a step can leave a marker file and wait there for a release file. Nothing in the package knows of it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from inspect_helpers import CORRECTNESS, MODULES, SPEC, craft_samples, write_jsonl
from person_helpers import page_export, person_verdicts

from finetune import atomic, commit, rundir, status
from finetune.inspect.score import report_is_current
from finetune.spec import load_spec

SAMPLE_FILES = ("samples.jsonl", "base_samples.jsonl", "sample_info.json")
SCORE_FILES = ("scored.jsonl", "score_report.json")

# The child's own monkeypatch: a marker per step reached, and a wait at one step until released.
PRELUDE = """
import os, sys, time
from pathlib import Path
from finetune import atomic, commit
_real = atomic.crash_point
def crash_point(step):
    marks = os.environ.get("ATOMIC_TEST_MARKS")
    if marks:
        Path(marks, step.replace(":", "_")).touch()
    if step == os.environ.get("ATOMIC_TEST_PAUSE_AT"):
        release, deadline = Path(os.environ["ATOMIC_TEST_RELEASE"]), time.time() + 300
        while not release.exists() and time.time() < deadline:
            time.sleep(0.05)
    _real(step)
commit.crash_point = atomic.crash_point = crash_point
from finetune.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _rows(seed: int) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "kind"} for r in craft_samples(seed=seed)]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != atomic.CRASH_ENV}
    return {**env, **extra}


def _finetune(*args: object, crash: str | None = None) -> subprocess.CompletedProcess[str]:
    env = _env(**({atomic.CRASH_ENV: crash} if crash else {}))
    return subprocess.run([sys.executable, "-m", "finetune", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=600)


def _visible(run: Path, names: tuple[str, ...]) -> dict[str, object]:
    """The named files as a reader sees them; sample_info's clock stamp left out (it differs per run)."""
    out: dict[str, object] = {}
    for name in names:
        p = run / name
        if p.is_file():
            out[name] = {k: v for k, v in json.loads(p.read_text()).items() if k != "time"} \
                if name == "sample_info.json" else p.read_bytes()
    return out


def _leftovers(run: Path) -> list[str]:
    return sorted(p.name for p in run.iterdir() if p.name.startswith(".")
                  and p.name.endswith((".tmp", ".stage", ".old", ".journal")))


def _states(run: Path) -> dict[str, tuple[str, str]]:
    states, _ = status.run_status(run)
    return {s.step: (s.state, s.detail) for s in states}


def _gate_reasons(cli, run: Path) -> list[str]:
    r = cli("inspect", "gate", run)  # every verb first finishes or clears a crashed commit (rundir.resolve)
    assert r.code == 1, r  # FAIL: nothing has been read
    return json.loads((run / "gate.json").read_text())["reasons"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Template run directories: `old` (A imported and scored), `sampled` (then B imported, unscored),
    `scored` (B scored) — built once with the real commands; each test copies the ones it needs."""
    from finetune.cli import main

    root = tmp_path_factory.mktemp("atomic")
    write_jsonl(root / "a.jsonl", _rows(0))
    write_jsonl(root / "a_base.jsonl", _rows(2))
    write_jsonl(root / "b.jsonl", _rows(1))
    write_jsonl(root / "b_base.jsonl", _rows(3))
    old = root / "old"
    old.mkdir()
    (old / "spec.yaml").write_text(SPEC.format(correctness=CORRECTNESS["exact_match"]))
    (old / "route.json").write_text(json.dumps({"route": "grpo-rlvr-training"}))
    for argv in (["rewards", "render", old / "spec.yaml"],
                 ["inspect", "sample", old, "--import", root / "a.jsonl", "--import-base", root / "a_base.jsonl"],
                 ["inspect", "score", old]):
        assert main([str(a) for a in argv]) == 0, argv
    sampled = root / "sampled"
    shutil.copytree(old, sampled)
    assert main(["inspect", "sample", str(sampled), "--import", str(root / "b.jsonl"),
                 "--import-base", str(root / "b_base.jsonl")]) == 0
    scored = root / "scored"
    shutil.copytree(sampled, scored)
    assert main(["inspect", "score", str(scored)]) == 0
    return root


def _copy(runs: Path, name: str, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(runs / name, run)
    return run


def test_templates_differ_where_the_kill_tests_need_them(runs):
    """Without this, 'old or new' below could hold trivially."""
    assert _visible(runs / "old", SAMPLE_FILES) != _visible(runs / "sampled", SAMPLE_FILES)
    for a, b in (("old", "sampled"), ("sampled", "scored")):
        assert {n: _visible(runs / a, SAMPLE_FILES)[n] != _visible(runs / b, SAMPLE_FILES)[n] for n in SAMPLE_FILES} \
            == ({n: True for n in SAMPLE_FILES} if a == "old" else {n: False for n in SAMPLE_FILES})
    assert all(_visible(runs / "sampled", SCORE_FILES)[n] != _visible(runs / "scored", SCORE_FILES)[n]
               for n in SCORE_FILES)
    assert _states(runs / "old")["inspect score"][0] == "ok"
    assert _states(runs / "sampled")["inspect score"][0] == "stale"


# what a reader sees right after the kill, before anything recovers: the journal is the commit point
SAMPLE_STEPS = {"files:staged": "old", "files:journal": "old", "files:rename:samples.jsonl": "mixed",
                "files:rename:base_samples.jsonl": "mixed", "files:renamed": "new"}
SCORE_STEPS = {"files:staged": "old", "files:journal": "old", "files:rename:scored.jsonl": "mixed",
               "files:renamed": "new"}


def _seen(visible: dict[str, object], old: dict[str, object], new: dict[str, object]) -> str:
    return "old" if visible == old else "new" if visible == new else "mixed"


@pytest.mark.slow
@pytest.mark.parametrize("step", list(SAMPLE_STEPS))
def test_inspect_sample_import_killed_between_writes(runs, tmp_path, cli, step):
    run = _copy(runs, "old", tmp_path)
    old, new = _visible(run, SAMPLE_FILES), _visible(runs / "sampled", SAMPLE_FILES)
    r = _finetune("inspect", "sample", run, "--import", runs / "b.jsonl", "--import-base", runs / "b_base.jsonl",
                  crash=step)
    assert r.returncode == -9, r.stderr[-2000:]
    # before any recovery: the stage is hidden, and status (which writes nothing) calls the score current
    # only while no commit is pending and every sample file is still the one it was computed from
    assert _leftovers(run)
    assert _seen(_visible(run, SAMPLE_FILES), old, new) == SAMPLE_STEPS[step]
    states = _states(run)
    state, _ = states["inspect score"]
    assert (state == "ok") == (step == "files:staged"), states
    # the first step status calls not current says why: sample_info.json no longer describes the sample files
    # beside it (status.py re-derives their sha256), or the score's inputs changed — a pending commit named
    detail = next((d for s, d in (states["inspect sample"], states["inspect score"]) if s != "ok"), "")
    assert ("interrupted write" in detail) == bool(commit.pending(run)) == (SAMPLE_STEPS[step] != "new"
                                                                             and step != "files:staged")

    reasons = _gate_reasons(cli, run)
    after = _visible(run, SAMPLE_FILES)
    assert _leftovers(run) == [] and commit.pending(run) == []
    assert after == (old if step == "files:staged" else new)  # only the journal decides: before it, old
    info = json.loads((run / "sample_info.json").read_text())  # sample_info names the very files beside it
    assert info["sha256"] == {n: hashlib.sha256((run / n).read_bytes()).hexdigest() for n in SAMPLE_FILES[:2]}
    score_state, detail = _states(run)["inspect score"]
    stale = any(x.startswith("the score report is stale") for x in reasons)
    assert (score_state == "stale") == stale == (after == new), (score_state, detail, reasons)


@pytest.mark.slow
@pytest.mark.parametrize("step", list(SCORE_STEPS))
def test_inspect_score_killed_between_writes(runs, tmp_path, cli, step):
    run = _copy(runs, "sampled", tmp_path)
    old, new = _visible(run, SCORE_FILES), _visible(runs / "scored", SCORE_FILES)
    r = _finetune("inspect", "score", run, crash=step)
    assert r.returncode == -9, r.stderr[-2000:]
    assert _leftovers(run)  # the killed commit's stage (and journal) are there ...
    seen = _seen(_visible(run, SCORE_FILES), old, new)
    assert seen == SCORE_STEPS[step]
    state, detail = _states(run)["inspect score"]  # ... and status, which writes nothing, is not fooled
    assert (state == "ok") == (seen == "new"), (state, detail)
    assert ("interrupted write" in detail) == bool(commit.pending(run)) == (step in ("files:journal",
                                                                                       "files:rename:scored.jsonl"))

    reasons = _gate_reasons(cli, run)
    after = _visible(run, SCORE_FILES)
    assert _leftovers(run) == [] and commit.pending(run) == []
    assert after == (old if step == "files:staged" else new)
    stale = any(x.startswith("the score report is stale") for x in reasons)
    assert (_states(run)["inspect score"][0] == "stale") == stale == (after == old)


@pytest.mark.slow
def test_inspect_sample_generating_killed_mid_switch_rolls_forward(cli, tiny_model_dir, tmp_path):
    """The default mode (generation on the tiny model) commits the same way."""
    from test_sample_local import _run

    run = _run(tmp_path, tiny_model_dir)
    write_jsonl(run / "samples.jsonl", _rows(0))  # an older imported set, with its info
    (run / "sample_info.json").write_text(json.dumps({"imported": {"file": "x"}, "samples": 64}))
    r = _finetune("inspect", "sample", run, crash="files:rename:base_samples.jsonl")
    assert r.returncode == -9, r.stderr[-2000:]
    assert json.loads((run / "sample_info.json").read_text())["samples"] == 64  # the info is not switched yet
    assert commit.pending(run) == ["sample_info.json"]
    assert cli("inspect", "score", run).code == 2  # any verb finishes the commit first (no rewards.py here)
    info = json.loads((run / "sample_info.json").read_text())
    assert info["backend"] == "transformers" and info["samples"] == 6 and commit.pending(run) == []
    assert info["sha256"] == {n: hashlib.sha256((run / n).read_bytes()).hexdigest() for n in SAMPLE_FILES[:2]}
    assert _leftovers(run) == []


def _paused(run: Path, marks: Path, pause_at: str, release: Path, **env: str) -> subprocess.Popen[str]:
    marks.mkdir()
    return subprocess.Popen([sys.executable, "-c", PRELUDE, "inspect", "score", str(run)], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_env(ATOMIC_TEST_MARKS=str(marks), ATOMIC_TEST_PAUSE_AT=pause_at,
                                     ATOMIC_TEST_RELEASE=str(release), **env))


def _wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 300) -> None:
    deadline = time.time() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline, f"{path.name} never reached"
        time.sleep(0.05)


# format_ok scaled by ATOMIC_TEST_SCALE: two scorings of the same run differ only by their environment
SCALED = """
import os
_format_ok = format_ok
def format_ok(prompts, completions, **kwargs):
    return [v * float(os.environ["ATOMIC_TEST_SCALE"]) for v in _format_ok(prompts, completions, **kwargs)]
REWARD_FUNCS = [format_ok, correctness]
"""


@pytest.mark.slow
def test_two_scores_at_once_commit_one_after_the_other(make_run, tmp_path):
    run = make_run("good")
    (run / "rewards.py").write_text((MODULES / "good.py").read_text() + SCALED)
    go1, go2 = tmp_path / "go1", tmp_path / "go2"
    second = _paused(run, tmp_path / "m2", "score:computed", go2, ATOMIC_TEST_SCALE="0.25")
    first = None
    try:
        _wait_for(tmp_path / "m2" / "score_computed", second)  # scored; its commit not begun
        first = _paused(run, tmp_path / "m1", "files:rename:scored.jsonl", go1, ATOMIC_TEST_SCALE="0.5")
        _wait_for(tmp_path / "m1" / "files_rename_scored.jsonl", first)  # mid-switch, holding the run's lock
        go2.touch()
        time.sleep(2)
        # the second cannot begin its commit while the first is between its two renames
        assert second.poll() is None and not (tmp_path / "m2" / "files_staged").exists()
    finally:
        go1.touch()
        go2.touch()
    outs = [p.communicate(timeout=300) for p in (first, second) if p is not None]
    assert (first.returncode if first else None, second.returncode) == (0, 0), outs
    assert (tmp_path / "m2" / "files_renamed").exists()
    report = json.loads((run / "score_report.json").read_text())
    assert report["scored_sha256"] == hashlib.sha256((run / "scored.jsonl").read_bytes()).hexdigest()
    assert report_is_current(run, load_spec(run / "spec.yaml"), report) == ""
    rows = [json.loads(line) for line in (run / "scored.jsonl").read_text().splitlines()]
    assert {r["rewards"]["format_ok"] for r in rows} == {0.0, 0.25}  # the pair is the second scoring, whole
    assert _leftovers(run) == []


@pytest.mark.slow
def test_samples_replaced_while_scoring_write_nothing(make_run, tmp_path, cli):
    run = make_run("good")
    assert cli("inspect", "score", run).code == 0
    before = _visible(run, SCORE_FILES)
    release = tmp_path / "release"
    proc = _paused(run, tmp_path / "m", "score:computed", release)
    try:
        _wait_for(tmp_path / "m" / "score_computed", proc)  # scored the old samples, not yet committed
        write_jsonl(tmp_path / "b.jsonl", _rows(1))
        assert cli("inspect", "sample", run, "--import", tmp_path / "b.jsonl").code == 0
    finally:
        release.touch()
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 2 and "samples.jsonl changed while scoring; nothing written" in err, (out, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert _visible(run, SCORE_FILES) == before and _leftovers(run) == []


@pytest.mark.slow
def test_verdict_killed_between_verdicts_and_reveals_keeps_both_or_neither(make_run, tmp_path, cli):
    """verdicts.jsonl + reveals.json are one commit: a verdict given after its scores were seen is never on
    disk without the record that they were seen (the gate would take it for a blind reading)."""
    from inspect_helpers import verdicts_for

    from finetune.inspect import verdicts as V

    run = make_run("good")
    assert cli("inspect", "score", run).code == 0
    given = [{**v, "revealed": True} for v in verdicts_for(craft_samples(), reader="human", n=6)]
    exported = page_export(run, given, tmp_path / "v.jsonl")
    ids = sorted(v["id"] for v in given)
    r = _finetune("inspect", "human-verdict", run, "--file", exported, "--yes", crash="files:rename:verdicts.jsonl")
    assert r.returncode == -9, r.stderr[-2000:]
    assert (run / "verdicts.jsonl").is_file() and not (run / "reveals.json").exists()  # half switched ...
    assert commit.pending(run) == ["reveals.json"]
    assert cli("status", run).code == 0 and commit.pending(run) == ["reveals.json"]  # status writes nothing
    cli("inspect", "gate", run)  # ... until the next verb finishes the commit
    assert sorted(V.load_verdicts(run)) == ids and sorted(V.load_reveals(run)) == ids
    assert _leftovers(run) == [] and commit.pending(run) == []
    r = _finetune("inspect", "human-verdict", run, "--file", exported, "--yes", crash="files:staged")
    assert r.returncode == -9 and _leftovers(run)
    cli("inspect", "gate", run)
    assert sorted(V.load_verdicts(run)) == ids and _leftovers(run) == []  # the next verb cleared the stage


@pytest.mark.slow
def test_review_key_killed_before_its_write_has_recorded_the_reveal(make_run, cli):
    """review_key.md (the scores) + reveals.json: the reveal is recorded first, so a kill between the two
    never leaves a key the reader can open while the gate still counts their next verdicts as blind."""
    from finetune.inspect import verdicts as V

    run = make_run("good")
    assert cli("inspect", "score", run).code == 0
    assert cli("inspect", "review", run).code == 0  # the sheet the key belongs to
    r = _finetune("inspect", "review", run, "--key", crash="write:review_key.md")
    assert r.returncode == -9, r.stderr[-2000:]
    assert not (run / "review_key.md").exists() and V.load_reveals(run)
    assert all(e.via == "key" for e in V.load_reveals(run).values())


@pytest.mark.slow
@pytest.mark.parametrize("step", ["ck:staged", "ck:switched"])
def test_checkpoint_set_import_killed_mid_switch(runs, tmp_path, cli, step):
    """`inspect sample RUN --import FILE --name ck` writes the set folder whole (commit.staged_dir): killed
    before or after its one exchange, the set is the old or the new one, and the stage folder it leaves
    (holding the new set, or the old one after the exchange) is never taken for a set of its own."""
    from finetune.inspect import checkpoint

    run = _copy(runs, "scored", tmp_path)
    assert cli("inspect", "sample", run, "--import", runs / "a.jsonl", "--name", "ck").code == 0
    ck = run / "inspect" / "checkpoints" / "ck"
    old = _visible(ck, ("samples.jsonl",))
    r = _finetune("inspect", "sample", run, "--import", runs / "b.jsonl", "--name", "ck", crash=step)
    assert r.returncode == -9, r.stderr[-2000:]
    stages = [p for p in ck.parent.iterdir() if p.name.startswith(".ck.")]
    assert len(stages) == 1 and (stages[0] / checkpoint.SET_INFO).is_file()
    assert not rundir.is_set(stages[0])
    assert [s.name for s in status.checkpoint_sets(status._Run(run))] == ["ck"]
    after, held = _visible(ck, ("samples.jsonl",)), _visible(stages[0], ("samples.jsonl",))
    assert old != after if step == "ck:switched" else old == after != held  # the stage: the new set, unswitched
    r = cli("inspect", "score", stages[0])  # not a set, not a run directory: refused, nothing written
    assert r.code == 2 and not (stages[0] / "scored.jsonl").exists()
    assert cli("inspect", "sample", run, "--import", runs / "b.jsonl", "--name", "ck").code == 0
    assert [p.name for p in ck.parent.iterdir()] == ["ck"]  # the next write of a set clears the leftover
    new = _visible(ck, ("samples.jsonl",))
    assert (after, held) == ((new, old) if step == "ck:switched" else (old, new))  # whole sets, never a mix


def test_emit_requests_switches_requests_whole_and_drops_what_it_no_longer_writes(cli, tiny_model_dir, tmp_path):
    from test_sample_local import _run

    run = _run(tmp_path, tiny_model_dir)
    assert cli("inspect", "sample", run / "spec.yaml", "--emit-requests").code == 0
    req = run / "requests"
    (req / "samples.jsonl").write_text("{}\n")  # copied back from the GPU machine by the user
    assert cli("inspect", "sample", run / "spec.yaml", "--emit-requests", "--no-base").code == 0
    assert sorted(p.name for p in req.iterdir()) == ["README.md", "requests.jsonl", "sample_vllm.py", "samples.jsonl"]
    assert (req / "samples.jsonl").read_text() == "{}\n" and _leftovers(run) == []


# ------------------------------------------------------------------------------------------------
# checkpoint sets (assignment atomic2): the gate with its comparison, and the reward copy, are one commit each

SET_GATE_STEPS = ["write:gate.json", "files:staged", "files:journal", "files:rename:gate.json",
                  "files:rename:comparison.json", "files:renamed"]


def _set_of(run: Path) -> Path:
    return run / "inspect" / "checkpoints" / "ck"


@pytest.fixture(scope="module")
def set_runs(runs):
    """`gated`: the scored run with a scored set `ck` whose gate (nothing read) wrote gate.json + comparison;
    `rewarded`: the same with a reward helper, then both reward files edited in the run after the set's score."""
    from finetune.cli import main

    gated = runs / "gated"
    shutil.copytree(runs / "scored", gated)
    rewarded = runs / "rewarded"
    shutil.copytree(runs / "scored", rewarded)
    (rewarded / "rewards_extra.py").write_text("VERSION = 1\n")
    for run in (gated, rewarded):
        for argv in (["inspect", "sample", run, "--import", runs / "a.jsonl", "--name", "ck"],
                     ["inspect", "score", _set_of(run)]):
            assert main([str(a) for a in argv]) == 0, argv
    assert main(["inspect", "gate", str(_set_of(gated))]) == 1  # FAIL: nothing read yet
    for name, text in (("rewards.py", (rewarded / "rewards.py").read_text() + "\n# edited\n"),
                       ("rewards_extra.py", "VERSION = 2\n")):
        (rewarded / name).write_text(text)
    return runs


def _pair(ck: Path) -> tuple[int, str, int, str]:
    """(gate.json's read count and status, comparison.json's checkpoint side read count and gate)."""
    gate, comparison = (json.loads((ck / n).read_text()) for n in ("gate.json", "comparison.json"))
    return gate["counts"]["read"], gate["status"], comparison["checkpoint"]["read"], comparison["checkpoint"]["gate"]


@pytest.mark.slow
@pytest.mark.parametrize("step", SET_GATE_STEPS)
def test_set_gate_killed_keeps_gate_and_comparison_together(set_runs, tmp_path, cli, step):
    """`inspect gate SET` commits gate.json with comparison.json/.md: killed at any step, once the commit is
    finished or discarded the comparison states the very gate record beside it (both old or both new)."""
    from inspect_helpers import verdicts_for

    run = _copy(set_runs, "gated", tmp_path)
    ck = _set_of(run)
    assert _pair(ck) == (0, "FAIL", 0, "FAIL")
    write_jsonl(tmp_path / "v.jsonl", verdicts_for(craft_samples(seed=0), reader="human", n=3))
    assert person_verdicts(cli, ck, tmp_path / "v.jsonl").code == 0
    r = _finetune("inspect", "gate", ck, crash=step)
    assert r.returncode in (-9, 1), r.stderr[-2000:]  # killed, or (a step it never reaches) a whole FAIL
    before = _pair(ck)
    assert before[:2] == before[2:] or commit.pending(ck), before  # a mixed pair only while a commit is pending
    commit.recover(ck)  # what the next verb does first (rundir.resolve)
    assert _leftovers(ck) == [] and commit.pending(ck) == []
    read, status_, c_read, c_gate = _pair(ck)
    assert (read, status_) == (c_read, c_gate) and read in (0, 3)
    md = (ck / "comparison.md").read_text()
    assert f"- checkpoint: {c_read} of " in md and f"gate {c_gate}," in md  # the .md switched with its .json
    [state] = status.checkpoint_sets(status._Run(run))
    assert (state.comparison_state == "current") == (read == 3), (state.comparison_state, state.comparison_detail)


REWARD_COPY_STEPS = ["write:rewards.py", "write:rewards_extra.py", "files:staged", "files:journal",
                     "files:rename:rewards.py", "files:rename:rewards_extra.py", "files:renamed"]


@pytest.mark.slow
@pytest.mark.parametrize("step", REWARD_COPY_STEPS)
def test_set_score_killed_while_copying_rewards_leaves_them_old_or_new_whole(set_runs, tmp_path, cli, step):
    """`inspect score SET` copies the run's reward files in as one commit: killed at any step of the copy, the
    set's reward files are (after the next verb) the set's old ones or the run's, never some of each."""
    run = _copy(set_runs, "rewarded", tmp_path)
    ck = _set_of(run)
    names = ("rewards.py", "rewards_extra.py")
    old, new = _visible(ck, names), _visible(run, names)
    assert old.keys() == new.keys() == set(names) and all(old[n] != new[n] for n in names)
    r = _finetune("inspect", "score", ck, crash=step)
    assert r.returncode in (-9, 0), r.stderr[-2000:]  # killed, or (a step it never reaches) scored whole
    reasons = _gate_reasons(cli, ck)  # the next verb finishes or discards the killed commit first
    after = _visible(ck, names)
    assert _leftovers(ck) == [] and commit.pending(ck) == []
    assert after in (old, new), {n: after[n] == new[n] for n in names}
    if after == old:  # the copy never committed: the gate says the set judges another reward than the run's
        assert any("reward files changed since this set was scored" in x for x in reasons), reasons
    elif r.returncode == -9:  # copied, not (re)scored: the score is stale against the rewards now there
        assert any(x.startswith("the score report is stale") for x in reasons), reasons


@pytest.mark.slow
def test_set_gate_without_a_comparison_removes_the_old_one_in_its_commit(set_runs, tmp_path, cli):
    """When Phase 1 cannot be compared (its score is gone), the set's new gate record is committed without
    the old comparison, which states the old gate: no comparison is better than one about another gate."""
    run = _copy(set_runs, "gated", tmp_path)
    ck = _set_of(run)
    (run / "scored.jsonl").unlink()
    r = cli("inspect", "gate", ck)
    assert r.code == 1 and "no comparison with Phase 1:" in r.out, r
    assert json.loads((ck / "gate.json").read_text())["status"] == "FAIL"
    assert not (ck / "comparison.json").exists() and not (ck / "comparison.md").exists()
    assert _leftovers(ck) == []


@pytest.mark.slow
def test_compare_racing_a_set_gate_writes_nothing(set_runs, tmp_path, cli):
    """`inspect compare SET` compared against the old gate.json while `inspect gate SET` committed a new pair:
    its commit is refused (one line, exit 2), so the comparison on disk still states the gate beside it."""
    from inspect_helpers import verdicts_for

    run = _copy(set_runs, "gated", tmp_path)
    ck = _set_of(run)
    marks, release = tmp_path / "m", tmp_path / "release"
    marks.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", PRELUDE, "inspect", "compare", str(ck)], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_env(ATOMIC_TEST_MARKS=str(marks), ATOMIC_TEST_PAUSE_AT="comparison:computed",
                                     ATOMIC_TEST_RELEASE=str(release)))
    try:
        _wait_for(marks / "comparison_computed", proc)  # compared against the gate with nothing read
        write_jsonl(tmp_path / "v.jsonl", verdicts_for(craft_samples(seed=0), reader="human", n=3))
        assert person_verdicts(cli, ck, tmp_path / "v.jsonl").code == 0
        assert cli("inspect", "gate", ck).code == 1
    finally:
        release.touch()
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 2 and "gate.json changed while comparing; nothing written" in err, (out, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert _pair(ck) == (3, "FAIL", 3, "FAIL") and _leftovers(ck) == []
