"""finetune.watch — the inspection callback's parts and the one reward-hacking rule.

Fast tests: the statistics equal scipy's, the rule diagnose names is the rule the callback stops with,
the recorder records what each reward call scored, the sample file is Phase 1's format, and the
real TrainerCallback (with transformers' own TrainerState / TrainerControl) writes its files and stops.
The real tiny GRPO runs are in test_watch_runs.py (slow).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from finetune import watch
from finetune.diagnose import diagnosis
from finetune.rewards.lib.rewards_meta import RewardMeta


def _meta(name: str, type_: str, role: str, weight: float = 1.0, **over: Any) -> RewardMeta:
    return RewardMeta(**{"name": name, "type": type_, "role": role, "weight": weight, "threshold": 1.0, "min": 0.0,
                         "max": 1.0, "gated": False, "episode": False, **over})


META = [_meta("fmt", "format", "format", 0.5), _meta("right", "exact_match", "correctness"),
        _meta("long", "judge", "shaping")]
WEIGHTS = [m.weight for m in META]


def test_statistics_equal_scipy():
    from scipy import stats

    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(3, 50)
        xs = [float(i) for i in range(n)]
        ys = [round(rng.random(), rng.choice([1, 3])) + 0.03 * i * rng.choice([0, 1]) for i in range(n)]
        if len(set(ys)) < 2:
            continue
        rho, p = stats.spearmanr(xs, ys)
        got_rho, got_p = watch.spearman_test(xs, ys)
        assert got_rho == pytest.approx(rho, abs=1e-12) and got_p == pytest.approx(p, abs=1e-10)
        assert watch.theil_sen(xs, ys) == pytest.approx(stats.theilslopes(ys, xs).slope, abs=1e-12)


def _history(n: int, total, right, long) -> list[dict[str, Any]]:
    return [{"step": s, "loss": 0.0, "reward": total(s), "rewards/right/mean": right(s), "rewards/long/mean": long(s),
             "rewards/fmt/mean": 1.0} for s in range(1, n + 1)]


def test_divergence_names_the_carrier_and_diagnose_uses_the_same_rule(tmp_path):
    hist = _history(20, lambda s: 1.5 + 0.04 * s, lambda s: 0.1 + 0.01 * (s % 3), lambda s: 0.04 * s)
    d = watch.divergence(watch.series_from_history(hist), META)
    assert d.status == "symptom" and d.carrier == "long" and d.window == (1, 20)
    # the diagnosis of the same log is this rule's finding, word for word
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in hist))
    (tmp_path / "rewards.py").write_text(f"REWARD_META = {tuple(META)!r}\n")  # RewardMeta(...) calls, as rendered
    doc = diagnosis.diagnose(tmp_path)[0]
    hack = next(s for s in doc["symptoms"] if s["name"] == "reward_hacking")
    assert hack["summary"] == d.why and hack["evidence"]["carrier"] == "long"


def test_divergence_is_clear_when_correctness_rises_and_not_evaluated_without_one():
    rising = _history(20, lambda s: 1.5 + 0.05 * s, lambda s: 0.02 * s, lambda s: 0.03 * s)
    assert watch.divergence(watch.series_from_history(rising), META).status == "clear"
    short = _history(watch.MIN_POINTS - 1, lambda s: s, lambda s: 0.0, lambda s: s)
    assert watch.divergence(watch.series_from_history(short), META).status == "not_evaluated"
    named = {"right": "shaping", "long": "shaping", "fmt": "format"}  # roles only (read off names): no meta
    assert watch.divergence(watch.series_from_history(rising), [], named).why == "no correctness reward identified"


def test_series_from_history_keeps_the_last_window_of_training_entries():
    hist = _history(50, float, lambda s: 0.0, lambda s: 0.0) + [{"step": 50, "train_runtime": 1.0}]
    hist.insert(10, {"step": 10, "reward": None})
    series = watch.series_from_history(hist, last=30)
    assert series["reward"][0] == list(range(21, 51)) and set(series) >= {"rewards/right/mean", "rewards/long/mean"}


def _fn(name: str, scores):
    def f(completions, **kwargs):
        return scores(completions)
    f.__name__ = name
    return f


def test_recorder_joins_every_reward_of_a_batch_and_never_raises():
    rec = watch.Recorder()
    fmt = rec.wrap(_fn("fmt", lambda cs: [1.0 if "<a>" in c else 0.0 for c in cs]))
    right = rec.wrap(_fn("right", lambda cs: [None for _ in cs]))

    async def long(completions, **kwargs):
        return [len(c) / 10 for c in completions]

    along = rec.wrap(long)
    assert (fmt.__name__, right.__name__, along.__name__) == ("fmt", "right", "long")
    state = type("S", (), {"global_step": 3})()
    for batch in (["<a>1", "x"], ["<a>22"]):
        kw = {"prompts": ["p"] * len(batch), "completions": batch, "completion_ids": [[1] * len(c) for c in batch],
              "answer": ["1"] * len(batch), "trainer_state": state, "log_metric": print}
        fmt(**kw), right(**kw), asyncio.run(along(**kw))
    rec.record("fmt", {"no completions": True}, [1.0])  # a malformed call is counted, not raised
    rows = rec.take(META)
    assert rec.errors == 1 and len(rows) == 3 and rec.take(META[:1]) == []
    assert rows[0]["scores"] == {"fmt": 1.0, "right": None, "long": 0.4} and rows[0]["total"] == pytest.approx(0.9)
    assert rows[2]["columns"] == {"answer": "1"} and rows[2]["completion_tokens"] == 5 and rows[2]["step"] == 3


def _rows(n: int, **over) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        r = {"step": 4, "prompt": [{"role": "user", "content": f"q{i % 3}"}], "completion": f"<a>{i}</a>",
             "conversational": True, "columns": {"answer": str(i)}, "completion_tokens": 4,
             "scores": {"fmt": 1.0, "right": float(i % 2), "long": i / n}, "total": 0.0}
        r.update(over)
        r["total"] = sum(w * (v or 0.0) for w, v in zip(WEIGHTS, r["scores"].values()))
        out.append(r)
    return out


def test_sample_file_is_phase1_format_with_the_top_completions(tmp_path):
    from finetune.inspect.samplesio import load_samples

    rows = _rows(40)
    sample = watch.pick_sample(rows, 12)
    top = sorted(rows, key=lambda r: -r["total"])[:watch.TOP_IN_SAMPLE]
    assert len(sample) == 12 and all(any(t is s for s in sample) for t in top)
    path = tmp_path / "step_5.jsonl"
    path.write_text("\n".join(watch.sample_lines(sample, 5, max_completion_length=4)) + "\n")
    loaded = load_samples(path)
    assert [r["id"] for r in loaded] == [f"step5-{k:04d}" for k in range(12)]
    assert loaded[0]["columns"] == {"answer": sample[0]["columns"]["answer"]} and loaded[0]["truncated"] is True
    assert loaded[0]["prompt"] == sample[0]["prompt"] and loaded[0]["conversational"] is True


def _settings(every: int = 5) -> watch.Settings:
    return watch.Settings(every_steps=every, sample_rows=50, max_completion_length=64, meta=META)


def test_a_probe_shaped_completion_passing_correctness_stops():
    rows = _rows(12)
    rows[3]["completion"], rows[3]["scores"]["right"] = "   ", 1.0
    reasons, metrics = watch.stop_reasons(10, rows, [], _settings(), watch.WatchState())
    assert [(r["rule"], r["reward"]) for r in reasons] == [("probe_passing", "right")]
    assert reasons[0]["evidence"]["probe"] == "empty_completion" and metrics["inspection/probes_passing"] == 1.0
    assert metrics["inspection/flag/empty_rewarded:right"] == 1.0


def test_top_completions_failing_the_format_stop_on_a_jump():
    state = watch.WatchState()
    assert watch.stop_reasons(5, _rows(16), [], _settings(), state)[0] == []
    assert state.format_baseline == 0.0
    broken = _rows(16)
    for r in broken:
        if r["scores"]["long"] > 0.5:  # the longest now skip the format and still win on length
            r["scores"]["fmt"], r["completion"] = 0.0, r["completion"].replace("<a>", "")
            r["total"] = r["scores"]["right"] + r["scores"]["long"]
    reasons, metrics = watch.stop_reasons(10, broken, [], _settings(), state)
    assert [(r["rule"], r["reward"]) for r in reasons] == [("format_jump", "fmt")]
    assert metrics["inspection/top_format_fail_share"] >= watch.FORMAT_JUMP


class _Trainer:
    def __init__(self) -> None:
        from collections import defaultdict

        self._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}


def test_the_callback_writes_the_step_file_and_stops(tmp_path):
    from transformers import TrainerControl, TrainerState

    rec = watch.Recorder()
    cb = watch.inspection_callback(_settings(every=5), rec)
    trainer = _Trainer()
    cb.attach(trainer)
    args = type("A", (), {"output_dir": str(tmp_path / "train")})()
    state, control = TrainerState(), TrainerControl()
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / watch.STOPPED).write_text("{}")  # an earlier launch's stop
    cb.on_train_begin(args, state, control)
    assert not (tmp_path / "train" / watch.STOPPED).exists()
    right = rec.wrap(_fn("right", lambda cs: [1.0 if not c.strip() else 0.0 for c in cs]))
    for fn in (rec.wrap(_fn("fmt", lambda cs: [1.0] * len(cs))), right, rec.wrap(_fn("long", lambda cs: [0.1] * len(cs)))):
        fn(prompts=["p"] * 3, completions=["<a>1</a>", "", "<a>2</a>"], answer=["1"] * 3)
    state.global_step = 4
    cb.on_step_end(args, state, control)
    assert not control.should_training_stop and not (tmp_path / "train" / "inspections").exists()
    state.global_step = 5
    cb.on_step_end(args, state, control)
    assert control.should_training_stop and control.should_log
    stopped = json.loads((tmp_path / "train" / watch.STOPPED).read_text())
    assert (stopped["rule"], stopped["step"], stopped["reward"]) == ("probe_passing", 5, "right")
    assert stopped["inspection_file"].endswith("inspections/step_5.jsonl") and stopped["evidence"]["count"] == 1
    lines = (tmp_path / "train" / "inspections" / "step_5.jsonl").read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[1])["completion"] == ""
    index = [json.loads(x) for x in (tmp_path / "train" / "inspections" / "index.jsonl").read_text().splitlines()]
    assert index[0]["step"] == 5 and index[0]["stop"][0]["rule"] == "probe_passing"
    assert trainer._metrics["train"]["inspection/stop"] == [1.0]  # into TRL's metrics for this step's log
    assert cb.stopped["rule"] == "probe_passing"


def test_instrument_returns_the_rewards_own_scores_and_draws_no_random_numbers(tmp_path):
    """The one wiring train.py and `finetune demo` share: the wrapped rewards score exactly as the rewards do,
    draw nothing from python's / torch's random streams (a demo run's numbers stay put), and feed the callback."""
    import torch
    from transformers import TrainerControl, TrainerState

    funcs = [_fn("fmt", lambda cs: [1.0 if "<a>" in c else 0.0 for c in cs]),
             _fn("right", lambda cs: [float(c == "<a>1</a>") for c in cs]), _fn("long", lambda cs: [len(c) / 9 for c in cs])]
    wrapped, cb = watch.instrument(funcs, meta=META, every_steps=2, sample_rows=50, max_completion_length=64)
    assert [f.__name__ for f in wrapped] == ["fmt", "right", "long"]
    kw = {"prompts": ["p"] * 3, "completions": ["<a>1</a>", "x", "<a>2</a>"], "answer": ["1"] * 3}
    random.seed(7)
    torch.manual_seed(7)
    py_state, torch_state = random.getstate(), torch.get_rng_state()
    assert [w(**kw) for w in wrapped] == [f(**kw) for f in funcs]
    args, state, control = type("A", (), {"output_dir": str(tmp_path)})(), TrainerState(), TrainerControl()
    cb.attach(_Trainer())
    state.global_step = 2
    cb.on_step_end(args, state, control)
    assert random.getstate() == py_state and torch.equal(torch.get_rng_state(), torch_state)
    assert not control.should_training_stop and not (tmp_path / watch.STOPPED).exists()
    rows = [json.loads(x) for x in (tmp_path / watch.INSPECTIONS / "step_2.jsonl").read_text().splitlines()]
    assert sorted(r["completion"] for r in rows) == ["<a>1</a>", "<a>2</a>", "x"]


# ------------------------------------------------------------------------------------------------
# rendered: the spec value, train.py, watch.py beside it, launch.sh's exit status


def _render(tmp_path: Path, **changes) -> Path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from render_fixtures import write_run

    from finetune.cli import main

    spec = write_run(tmp_path / "run", "Qwen/Qwen3-1.7B", hardware={"profile": "cpu", "gpus": 0, "nodes": 1},
                     **changes)
    assert main(["config", "render", str(spec), "--no-gate"]) == 0
    return spec.parent


def test_every_steps_defaults_to_five_log_intervals_and_is_reasoned(tmp_path):
    run = _render(tmp_path, training__logging_steps=2)
    train_py = (run / "config" / "train.py").read_text()
    assert "INSPECT_EVERY_STEPS = 10  # 5 × logging_steps (2)" in train_py
    assert (run / "config" / "watch.py").read_bytes() == Path(watch.__file__).read_bytes()
    assert "inspection.every_steps" in (run / "config" / "BRIEF.md").read_text()
    run = _render(tmp_path / "b", inspection={"every_steps": 3})
    assert "INSPECT_EVERY_STEPS = 3  # inspection.every_steps" in (run / "config" / "train.py").read_text()


@pytest.mark.parametrize("value", [0, -5, "often", 10_000_001])
def test_every_steps_out_of_range_is_bad_input(tmp_path, cli, value):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import yaml
    from render_fixtures import write_run

    spec = write_run(tmp_path / "run", "Qwen/Qwen3-1.7B")
    data = yaml.safe_load(spec.read_text())
    data["inspection"] = {"every_steps": value}
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    res = cli("config", "render", spec, "--no-gate")
    assert res.code == 2 and "inspection.every_steps" in res.err and "Traceback" not in res.err
    assert not (spec.parent / "config").exists()


def test_launch_exits_nonzero_when_the_run_was_stopped(tmp_path):
    run = _render(tmp_path)
    fake = tmp_path / "bin" / "python"
    fake.parent.mkdir()
    # a stand-in interpreter: env check passes; "training" writes STOPPED.json and exits 0
    fake.write_text("#!/bin/sh\ncase \"$1\" in config/train.py) mkdir -p train && "
                    "echo '{\"rule\": \"reward_divergence\"}' > train/STOPPED.json; exit 0;; esac\nexit 0\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    (run / "train").mkdir()
    (run / "train" / "STOPPED.json").write_text("{}")  # stale: removed before training starts
    env = {"PATH": "/usr/bin:/bin", "FINETUNE_PYTHON": str(fake)}
    res = subprocess.run(["bash", "config/launch.sh"], cwd=run, env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and "UNGATED" in res.stderr  # a --no-gate render: no start without the override
    from finetune.config.build import UNGATED_OVERRIDE

    env["FINETUNE_UNGATED_OVERRIDE"] = UNGATED_OVERRIDE
    res = subprocess.run(["bash", "config/launch.sh"], cwd=run, env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 3 and "STOPPED by the inspection callback" in res.stderr and "reward_divergence" in res.stderr
    fake.write_text("#!/bin/sh\nexit 0\n")  # a run that finished: no STOPPED.json, exit 0
    res = subprocess.run(["bash", "config/launch.sh"], cwd=run, env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and not (run / "train" / "STOPPED.json").exists()


def test_render_warns_when_inspections_cannot_judge_or_their_files_cannot_pass_the_gate(tmp_path, cli):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from render_fixtures import write_run

    # 8 completions per step (batch 8 × accumulation 1) × every 5 steps = 40 < min_read 50; 8 steps < first stop 15
    spec = write_run(tmp_path / "run", "Qwen/Qwen3-1.7B", hardware={"profile": "cpu", "gpus": 0, "nodes": 1},
                     training__gradient_accumulation_steps=1, training__num_generations=8,
                     training__per_device_train_batch_size=8, training__max_steps=8)
    res = cli("config", "render", spec, "--no-gate")
    assert res.code == 0, res
    assert "its first possible stop is step 15 of 8" in res.out
    assert "step file will hold 40 completions (5 steps × 8), fewer than inspection.min_read = 50" in res.out
    assert "set inspection.every_steps ≥ 7" in res.out
    spec.write_text(spec.read_text().replace("max_steps: 8", "max_steps: 4"))
    res = cli("config", "render", spec, "--no-gate")
    assert "inspection.every_steps = 5 exceeds the run's 4 optimiser steps" in res.out


def test_the_hand_written_docs_state_the_stop_exit_status_the_code_uses():
    """The exit status of a stopped run is a number in prose (DESIGN, skill, command, agent): drift-checked here."""
    root = Path(__file__).resolve().parents[2]
    for doc in ("DESIGN.md", "skills/grpo-rlvr-training/SKILL.md", "commands/finetune.md",
                "agents/llm-finetuning-training-engineer.md", "references/diagnosis.md"):
        said = re.findall(r"\bexits? (\d+)\b", (root / doc).read_text())
        assert str(watch.STOPPED_EXIT) in said, doc
        assert all(n in (str(watch.STOPPED_EXIT), "1", "2", "0") for n in said), (doc, said)


def _agree_worker(rank: int, port: int, out: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        mine = [{"rule": "probe_passing", "step": 5}] if rank == 0 else []  # only the main process saw it
        Path(out, f"rank{rank}.json").write_text(json.dumps(watch._agree(mine)))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_every_training_process_takes_the_main_process_decision(tmp_path):
    """Two real processes (torch.distributed, gloo): rank 1 saw nothing, yet stops at the same step as rank 0."""
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_agree_worker, args=(port, str(tmp_path)), nprocs=2, join=True)
    got = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert got[0] == got[1] == [{"rule": "probe_passing", "step": 5}]
    assert watch._agree([{"rule": "x"}]) == [{"rule": "x"}]  # one process: its own decision


def test_a_format_reward_learnt_a_little_is_not_a_carrier_on_a_real_healthy_log():
    """A real healthy toy run (tests/watch/data) that the rule once stopped: format_ok rose significantly but
    added 0.6% of the total's scale at weight 0.25, while correctness rose too (not significantly). A carrier
    must move the total by at least FLAT_GAIN of its scale; a reward that pays that much still is one."""
    data = json.loads((Path(__file__).parent / "data" / "healthy_format_learning.json").read_text())
    hist = [e for e in data["log_history"] if e["step"] < 20]  # what the callback saw when it stopped the run
    rewards = [_meta("format_ok", "format", "format", 0.25), _meta("correct", "exact_match", "correctness")]
    d = watch.divergence(watch.series_from_history(hist), rewards)
    assert d.status == "clear", d.why
    assert d.evidence["other_trends"]["rewards/format_ok/mean"]["p_value"] < watch.P_SIGNIFICANT  # it did rise
    paid = [dict(e, **{"rewards/format_ok/mean": 0.05 * e["step"],
                       "reward": e["rewards/correct/mean"] + 0.25 * 0.05 * e["step"]}) for e in hist]
    flat = [dict(e, **{"rewards/correct/mean": 0.5}) for e in paid]  # the same format rise, weighted enough to matter
    hacked = watch.divergence(watch.series_from_history(flat), rewards)
    assert hacked.status == "symptom" and hacked.carrier == "format_ok", hacked.why


def test_live_length_check_skips_a_reward_that_scores_an_environment_episode():
    """Longer completions scoring higher is a text reward's red flag; an environment's reward scores the episode it
    ran (its calls replayed), so the same pattern says nothing of it — Phase 1 lists the check as not applicable."""
    from finetune import watch

    rows = [{"completion": "x" * (10 * i), "completion_tokens": 10 * i, "scores": {"r": i / 20}} for i in range(1, 21)]
    text = [_meta("r", "python", "correctness")]
    flagged = {f["name"] for f in watch.live_flags(rows, text)}
    assert "length_correlated" in flagged
    episode = [_meta("r", "environment", "correctness", episode=True)]
    assert "length_correlated" not in {f["name"] for f in watch.live_flags(rows, episode)}

