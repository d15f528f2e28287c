"""`finetune data filter` on the demo's toy task (its PASS run, its warmed-up tiny model), on CPU, k = 4.

The kept / dropped prompts are checked against an independent re-score of the very completions the
filter sampled (the demo's checker, written apart from the reward templates); a run killed mid-way
resumes without re-sampling the prompts it finished; a reward edited after the gate makes it refuse.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow
K = 4


def _pass_run(demo_run, tmp: Path) -> Path:
    """A private copy of the demo's PASS run directory (its model and data shared read-only)."""
    for name in ("model", "data"):
        (tmp / name).symlink_to(demo_run.out / name)
    shutil.copytree(demo_run.out / "pass", tmp / "pass",
                    ignore=shutil.ignore_patterns("train", "config", "diagnosis", "data", "spec.yaml.orig"))
    return _unfiltered(tmp / "pass")


def _unfiltered(run: Path) -> Path:
    """The demo filtered its PASS run; put back the spec it gated and the gate's pre-filter binding."""
    from finetune.hashing import bound_hashes
    from finetune.inspect.gate import write_gate_record
    from finetune.inspect.gaterecord import load_record
    from finetune.spec import load_spec

    spec_path = run / "spec.yaml"
    data = yaml.safe_load(spec_path.read_text())
    data["dataset"].pop("filter", None)
    spec_path.write_text(yaml.safe_dump(data, sort_keys=False))
    record = load_record(run / "gate.json")
    spec = load_spec(spec_path)
    write_gate_record(run, record.model_copy(update={
        "dataset_filter": None, "hashes": bound_hashes(run, spec.reward_section(), **spec.binding())}))
    return spec_path


def _args(spec: Path, *extra: str) -> list[str]:
    return ["data", "filter", str(spec), "--k", str(K), "--device", "cpu", "--backend", "transformers", *extra]


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_filter_drops_exactly_the_0_of_k_and_k_of_k_prompts(demo_run, tmp_path, cli):
    from finetune.demo.checker import check
    from finetune.inspect.gate import verify_gate
    from finetune.spec import load_spec

    spec_path = _pass_run(demo_run, tmp_path)
    run = spec_path.parent
    r = cli(*_args(spec_path, "--max-prompts", "24"))
    assert r.code == 0, r
    assert "predicted frac_reward_zero_std" in r.out and "fresh samples of" in r.out and "95%" in r.out
    source = [json.loads(x) for x in (tmp_path / "data" / "train.jsonl").read_text().splitlines() if x.strip()]
    rates = _lines(run / "data" / "pass_rates.jsonl")
    assert sorted(e["row"] for e in rates) == list(range(24)) and all(e["k"] == K for e in rates)
    # independent re-score of the completions the filter sampled
    independent = {e["row"]: sum(check(source[e["row"]]["prompt"], c, source[e["row"]].get("answer")).accept
                                 for c in e["completions"]) for e in rates}
    assert independent == {e["row"]: e["successes"] for e in rates}
    mixed = [row for row in range(24) if 0 < independent[row] < K]
    assert 0 < len(mixed) < 24, independent  # the toy task has both kinds of prompt to drop
    filtered = _lines(run / "data" / "filtered.jsonl")
    assert filtered == [source[row] for row in mixed]  # same rows, same columns, same order

    spec = load_spec(spec_path)
    assert spec.dataset.filter.rows == len(mixed) and spec.dataset.filter.k == K
    assert spec.training_data_path() == (run / "data" / "filtered.jsonl").resolve()
    check_ = verify_gate(run, spec)
    assert check_.ok, check_.reason  # the gate record now binds the filter and the filtered file
    report = (run / "data" / "filter_report.md").read_text()
    assert "predicted `frac_reward_zero_std`" in report and (run / "data" / "filter_pass_rates.png").stat().st_size > 0
    summary = json.loads((run / "data" / "filter_summary.json").read_text())
    # predicted as TRL logs it: enumerate every group of G drawn from each prompt's K scored completions
    # (with replacement when G > K) and count those TRL's own code path calls zero std
    from test_zerostd import trl_zero_std

    spec0 = load_spec(spec_path)
    g, weights = spec0.training.num_generations, [r.weight for r in spec0.rewards]
    assert all(len(e["scores"]) == K for e in rates)
    by_row = {e["row"]: e["scores"] for e in rates}
    draws = itertools.combinations if g <= K else itertools.product
    want = {}
    for name, rows in (("before", range(24)), ("after", mixed)):
        shares = []
        for row in rows:
            groups = list(draws(by_row[row], g) if g <= K else draws(by_row[row], repeat=g))
            shares.append(sum(trl_zero_std([list(t) for t in groups], weights)) / len(groups))
        want[name] = sum(shares) / len(shares)
    assert summary["predicted_zero_std_before"] == pytest.approx(want["before"])
    assert summary["predicted_zero_std_after_in_sample"] == pytest.approx(want["after"])
    _check_fresh_prediction(run, source, mixed, summary, g, weights, spec0.training.seed)

    # train.py trains on exactly the filtered file; editing it voids the gate
    assert cli("config", "render", spec_path).code == 0
    train_py = (run / "config" / "train.py").read_text()
    assert "data/filtered.jsonl" in train_py
    brief = (run / "config" / "BRIEF.md").read_text()
    before, after = spec.dataset.filter.predicted_frac_reward_zero_std
    from finetune.literals import md

    assert "## Difficulty filter" in brief and f"| predicted `frac_reward_zero_std` | {md(before)} | {md(after)} |" in brief
    assert f"fresh samples of {spec.dataset.filter.check_prompts} kept prompts" in brief
    assert f"| prompts | {len(source)} | {len(mixed)} |" in brief
    print(report, brief[brief.index("## Difficulty filter"):brief.index("## Memory fit")])
    with open(run / "data" / "filtered.jsonl", "a") as fh:
        fh.write(json.dumps(source[0]) + "\n")
    assert not verify_gate(run, load_spec(spec_path)).ok


def _check_fresh_prediction(run: Path, source: list, mixed: list[int], summary: dict, g: int, weights: list,
                            seed: int) -> None:
    """'After' is predicted on fresh groups of G for a seeded subset of the kept prompts, re-derived here."""
    from test_zerostd import trl_zero_std

    from finetune.datafilter import DEFAULT_CHECK_PROMPTS, check_subset, wilson
    from finetune.demo.checker import check

    fresh = _lines(run / "data" / "zero_std_check.jsonl")
    subset = check_subset(mixed, DEFAULT_CHECK_PROMPTS, seed)
    assert [e["row"] for e in fresh] == subset and all(e["k"] == g for e in fresh)
    assessed = {e["row"]: e for e in _lines(run / "data" / "pass_rates.jsonl")}
    assert any(e["completions"] != assessed[e["row"]]["completions"][:g] for e in fresh)  # another seed: new samples
    for e in fresh:  # scored by the gated rewards, re-scored independently
        assert e["successes"] == sum(check(source[e["row"]]["prompt"], c, source[e["row"]]["answer"]).accept
                                     for c in e["completions"])
    zero = [trl_zero_std([e["scores"]], weights)[0] for e in fresh]
    assert summary["check_prompts"] == len(fresh)
    assert summary["predicted_zero_std_after"] == pytest.approx(sum(zero) / len(zero))
    assert summary["predicted_zero_std_after_interval"] == pytest.approx(list(wilson(sum(zero), len(zero))))
    report = (run / "data" / "filter_report.md").read_text()
    assert f"fresh samples of {len(fresh)} kept prompts" in report and "biased low" in report


def test_check_prompts_zero_predicts_in_sample_and_says_so(demo_run, tmp_path, cli):
    spec_path = _pass_run(demo_run, tmp_path)
    run = spec_path.parent
    bad = cli(*_args(spec_path, "--max-prompts", "8", "--check-prompts", "-1"))
    assert bad.code == 2 and "--check-prompts" in bad.err and len(bad.err.strip().splitlines()) == 1, bad
    assert not (run / "data").exists()
    r = cli(*_args(spec_path, "--max-prompts", "16", "--check-prompts", "0"))
    assert r.code == 0, r
    assert "(in-sample, biased low)" in r.out
    summary = json.loads((run / "data" / "filter_summary.json").read_text())
    assert summary["check_prompts"] == 0 and summary["predicted_zero_std_after_interval"] is None
    assert summary["predicted_zero_std_after"] == summary["predicted_zero_std_after_in_sample"]
    assert not (run / "data" / "zero_std_check.jsonl").exists()
    assert "in-sample only (`--check-prompts 0`)" in (run / "data" / "filter_report.md").read_text()


def test_a_killed_filter_resumes_without_resampling(demo_run, tmp_path, cli):
    N = 256  # enough prompts that the kill lands mid-run: the tiny model samples 32 in about a second
    spec_path = _pass_run(demo_run, tmp_path)
    rates = spec_path.parent / "data" / "pass_rates.jsonl"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-m", "finetune", *_args(spec_path, "--max-prompts", str(N))], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not rates.is_file() or rates.read_text().count("\n") < 8:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    before = rates.read_text()
    whole = before[: before.rfind("\n") + 1]
    assert 8 <= whole.count("\n") < N and not (spec_path.parent / "data" / "filtered.jsonl").exists()
    r = cli(*_args(spec_path, "--max-prompts", str(N)))
    assert r.code == 0, r
    after = rates.read_text()
    assert after.startswith(whole)  # finished prompts kept as they were: not sampled again
    rows = [e["row"] for e in _lines(rates)]
    assert sorted(rows) == list(range(N))  # each prompt exactly once


def test_rewards_edited_after_the_gate_refuse(demo_run, tmp_path, cli):
    spec_path = _pass_run(demo_run, tmp_path)
    run = spec_path.parent
    with open(run / "rewards.py", "a") as fh:
        fh.write("\n# edited after the gate\n")
    r = cli(*_args(spec_path))
    assert r.code == 1 and "refusing to filter" in r.err and "rewards.py" in r.err, r
    assert not (run / "data").exists() and "filter" not in yaml.safe_load(spec_path.read_text())["dataset"]


def test_the_fresh_check_resumes_and_samples_only_new_rows(demo_run, tmp_path, cli):
    """A re-run re-samples nothing; a wider keep range samples only the check rows not yet in the file."""
    from finetune.datafilter import DEFAULT_CHECK_PROMPTS, SUMMARY, check_subset

    spec_path = _pass_run(demo_run, tmp_path)
    check_file = spec_path.parent / "data" / "zero_std_check.jsonl"
    assert cli(*_args(spec_path, "--max-prompts", "32", "--keep", "0.5-0.75")).code == 0
    first = check_file.read_text()
    assert cli(*_args(spec_path, "--max-prompts", "32", "--keep", "0.5-0.75")).code == 0
    assert check_file.read_text() == first  # nothing sampled again
    assert cli(*_args(spec_path, "--max-prompts", "32", "--keep", "0.25-1")).code == 0
    rates = {e["row"]: e["successes"] / K for e in _lines(spec_path.parent / "data" / "pass_rates.jsonl")}
    kept = [r for r in sorted(rates) if 0.25 <= rates[r] <= 1]
    summary = json.loads((spec_path.parent / SUMMARY).read_text())
    # a range that includes k/k keeps those prompts: none is counted as dropped, and the counts add up
    assert summary["kept"] == len(kept) and summary["dropped_always"] == 0
    assert summary["kept"] + summary["dropped_never"] + summary["dropped_other"] == summary["assessed"] == 32
    subset = check_subset(kept, DEFAULT_CHECK_PROMPTS, 3407)
    lines = _lines(check_file)
    assert check_file.read_text().startswith(first)  # earlier lines kept as they were
    assert sorted(e["row"] for e in lines) == sorted(set(subset) | {e["row"] for e in map(json.loads, first.splitlines())})


@pytest.mark.parametrize("step", ["files:staged", "files:journal", "files:rename:data/filter_report.md",
                                  "files:renamed"])
def test_a_kill_while_writing_leaves_the_run_before_or_after_the_filter(demo_run, tmp_path, step):
    """The outputs (filtered file, report, summary, PNG, spec, gate record) switch as one commit: killed before
    its commit point the run is untouched and its gate still holds; killed after it, the next command finishes
    the switch. Either way `data filter` again completes without re-sampling."""
    from finetune.atomic import CRASH_ENV
    from finetune.inspect.gate import verify_gate
    from finetune.spec import load_spec

    spec_path = _pass_run(demo_run, tmp_path)
    run = spec_path.parent
    spec_before, gate_before = spec_path.read_text(), (run / "gate.json").read_text()
    argv = [sys.executable, "-m", "finetune", *_args(spec_path, "--max-prompts", "8", "--check-prompts", "4")]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    killed = subprocess.run(argv, env={**env, CRASH_ENV: step}, capture_output=True, text=True, timeout=600)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    rates = (run / "data" / "pass_rates.jsonl").read_text()
    if step == "files:staged":  # before the commit point: nothing the filter makes is visible
        assert spec_path.read_text() == spec_before and (run / "gate.json").read_text() == gate_before
        assert not (run / "data" / "filtered.jsonl").exists() and not (run / "data" / "filter_report.md").exists()
        assert verify_gate(run, load_spec(spec_path)).ok
    else:  # committed: whatever the kill left, the gate never holds for a spec and file that disagree
        spec = load_spec(spec_path)
        check = verify_gate(run, spec)
        assert not check.ok or (spec.dataset.filter is not None and (run / "data" / "filtered.jsonl").is_file())
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (run / "data" / "pass_rates.jsonl").read_text() == rates  # nothing sampled again
    spec = load_spec(spec_path)
    assert spec.dataset.filter is not None and verify_gate(run, spec).ok
    filtered = _lines(run / "data" / "filtered.jsonl")
    summary = json.loads((run / "data" / "filter_summary.json").read_text())
    assert len(filtered) == spec.dataset.filter.rows == summary["kept"]
    assert not [p.name for p in run.rglob("*") if ".stage" in p.name or p.name.endswith(".journal")]
