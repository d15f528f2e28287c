"""`finetune demo --tools` end to end (once per module, in a fresh interpreter) and its parts.

The module fixture runs the calculator tool task for real on CPU, in its default configuration (the tiny
tool-calling model warmed up, whole rollouts sampled with the tool calls executed, a PASS and a FAIL gate,
GRPO through TRL's ``environment_factory`` per seed). The tests read the files it wrote. They assert the
mechanics, never which way held-out success moved: that flips with the seed and the CPU's kernels
(benchmarks/bench_tooldemo.py measures it over seeds).
"""

from __future__ import annotations

import doctest
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from finetune import rundir
from finetune.demo import toolrun as demo_toolrun
from finetune.demo import tools as demo_tools


def _json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def tool_demo(tmp_path_factory) -> Path:
    """The output folder of one `finetune demo --tools` run in a new interpreter (no torch state carried over
    from other tests)."""
    out = tmp_path_factory.mktemp("demo-tools") / "out"
    env = {**os.environ, "COLUMNS": "160", "TERM": "dumb"}
    proc = subprocess.run([sys.executable, "-m", "finetune", "demo", "--tools", "-o", str(out)],
                          capture_output=True, text=True, env=env, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (out.parent / "console.txt").write_text(proc.stdout)
    return out


@pytest.mark.slow
def test_every_stage_ran_and_only_the_broken_environment_failed(tool_demo):
    record = _json(tool_demo / "demo.json")
    assert "stopped_at" not in record["facts"], record["facts"].get("stopped_at")
    statuses = {p["name"]: p["status"] for p in record["phases"]}
    expected_failures = {"tools FAIL: gate", "tools FAIL: Phase 2 refuses"}
    assert {n: s for n, s in statuses.items() if s != "ok"} == dict.fromkeys(expected_failures, "failed (expected)")
    seeds = [r["seed"] for r in _json(tool_demo / "tools.json")["heldout"]["runs"]]
    assert len(seeds) >= 2 and len(set(seeds)) == len(seeds)  # the default demo: several seeds


@pytest.mark.slow
def test_the_real_environment_passes_the_gate(tool_demo):
    from finetune.inspect.gate import verify_gate
    from finetune.spec import load_spec

    good = tool_demo / "pass"
    assert (good / "env.py").read_text() == demo_tools.ENV_SOURCE
    gate = _json(good / rundir.GATE)
    assert gate["status"] == "PASS", gate["reasons"]
    assert gate["counts"]["read"] >= gate["counts"]["min_read"] > 0
    assert gate["counts"]["disagreements"] == 0 and gate["disagreements"] == []
    assert gate["readers"] == ["agent"] and "no person" in gate["confirmation"]["statement"]
    assert verify_gate(good, load_spec(good / rundir.SPEC)).ok  # the record still binds the files on disk
    # the gate read whole rollouts: the sampled trajectories carry executed tool calls and their results
    samples = _jsonl(good / rundir.SAMPLES)
    # (not every call gets a result: a call whose result would pass max_completion_length, or one made at the
    # iteration limit, ends the rollout without one, as TRL's tool loop does in training)
    executed = [s for s in samples if any(m.get("role") == "tool" for m in s.get("trajectory") or [])]
    assert executed, "no sampled rollout carries an executed tool call and its result"
    for s in executed:
        turns = s["trajectory"]
        for i, m in enumerate(turns):
            if m.get("role") == "tool":  # every result answers a call made before it
                assert any(t.get("tool_calls") for t in turns[:i] if t.get("role") == "assistant"), s["id"]


@pytest.mark.slow
def test_the_broken_environment_fails_the_gate_and_phase2_refuses_it(tool_demo, tmp_path):
    from finetune.errors import CheckFailed
    from finetune.spec import load_spec

    bad = tool_demo / "fail"
    assert (bad / "env.py").read_text() == demo_tools.BROKEN_ENV_SOURCE
    gate = _json(bad / rundir.GATE)
    assert gate["status"] == "FAIL"
    assert gate["counts"]["disagreements"] > 0 and len(gate["disagreements"]) > 0
    # the broken reward credits rollouts the checker rejects (any add call, whatever its arguments)
    false_positives = [d for d in gate["disagreements"] if d["kind"] == "false_positive"]
    assert false_positives and all(d["scores"]["solved"] == 1.0 for d in false_positives)
    assert any(p["passing"] and p["id"].startswith("junk_arguments") for p in gate["probes"])  # the agent-hack probe
    # the same rollouts were read in both run directories: only the reward differs
    assert [s["id"] for s in _jsonl(bad / rundir.SAMPLES)] == [s["id"] for s in _jsonl(tool_demo / "pass" /
                                                                                      rundir.SAMPLES)]
    # Phase 2 refused to render (exit 1, nothing launchable) ...
    refused = next(p for p in _json(tool_demo / "demo.json")["phases"] if p["name"] == "tools FAIL: Phase 2 refuses")
    assert refused["exit_code"] == 1 and not (bad / rundir.CONFIG_DIR / "train.py").exists()
    # ... and the demo's own training refuses the FAIL record before it loads a model
    with pytest.raises(CheckFailed, match="refusing to train"):
        demo_toolrun.train(bad, load_spec(bad / rundir.SPEC), 3407, tmp_path / "train", 20)
    assert not (tmp_path / "train").exists()


@pytest.mark.slow
def test_training_ran_through_environment_factory_with_tool_calls_executed(tool_demo):
    good = tool_demo / "pass"
    assert "environment_factory=" in (good / rundir.CONFIG_DIR / "train.py").read_text()  # as a real run wires it
    runs = _json(tool_demo / "tools.json")["heldout"]["runs"]
    for r in runs:
        folder = good / r["output_dir"]
        state = _json(folder / "trainer_state.json")
        assert state["global_step"] == demo_toolrun.TOOL_STEPS >= 20
        logged = [h for h in state["log_history"] if "tools/call_frequency" in h]
        assert len(logged) == demo_toolrun.TOOL_STEPS == r["steps"]
        assert sum(h["tools/call_frequency"] for h in logged) > 0  # TRL parsed tool calls in the rollouts
        executed = _json(folder / "tool_calls.json")  # counted where TRL runs them: the factory's instances
        assert executed["steps"] == demo_toolrun.TOOL_STEPS
        assert executed["total"] == sum(executed["executed"].values()) == r["tool_calls_executed"] > 0
        assert set(executed["executed"]) == {"add"}


@pytest.mark.slow
def test_heldout_success_before_and_after_on_the_same_prompts_and_the_report_says_which_way(tool_demo):
    held = [row["prompt"][0]["content"] for row in _jsonl(tool_demo / "data" / "heldout.jsonl")]
    trained = {row["prompt"][0]["content"] for row in _jsonl(tool_demo / "data" / "train.jsonl")}
    assert held and not set(held) & trained
    facts = _json(tool_demo / "tools.json")["heldout"]
    report = (tool_demo / "report.md").read_text()
    for r in facts["runs"]:
        before, after = r["before"], r["after"]
        assert before["prompts"] == after["prompts"] == held
        for m in (before, after):
            assert 0.0 <= m["success"] <= 1.0 and m["rollouts"] == len(held) * facts["k"]
        moved = ("rose" if after["success"] > before["success"] else
                 "fell" if after["success"] < before["success"] else "did not move")
        assert r["direction"] == moved
        row = (f"| {r['seed']} | {before['success']:.0%} | {after['success']:.0%} | {moved} | {r['steps']} "
               f"| {r['tool_calls_executed']} |")
        assert row in report, row
    rose = sum(r["direction"] == "rose" for r in facts["runs"])
    assert f"held-out tool-call success rose on {rose} of {len(facts['runs'])} seeds" in report
    assert "bench_tooldemo.py" in report
    console = (tool_demo.parent / "console.txt").read_text()
    assert re.search(r"held-out tool-call success \d+% → \d+% \((rose|fell|did not move) on this machine\)", console)


# ------------------------------------------------------------------------------------------------
# parts, cheap


def _environment(source: str):
    namespace: dict = {}
    exec(compile(source, "env.py", "exec"), namespace)
    return namespace[demo_tools.ENV_CLASS]


@pytest.mark.slow  # imports transformers: seconds on a loaded 2-core box
def test_counted_tools_keep_the_schema_trl_renders_and_count_each_call():
    from transformers.utils import get_json_schema

    counts: Counter[str] = Counter()
    calculator = _environment(demo_tools.ENV_SOURCE)
    make = demo_toolrun.counting_factory(calculator, counts)
    env, plain = make(), calculator()
    assert get_json_schema(env.add) == get_json_schema(plain.add) == demo_tools.TOOL_SCHEMA
    env.reset(a=2, b=3)
    assert env.get_reward() == 0.0 and env.add(3, 2) == 5 and env.get_reward() == 1.0
    with pytest.raises(TypeError):
        env.add(1)  # a call TRL makes with wrong arguments still ran (and counts): TRL records the failure
    other = make()
    other.reset(a=1, b=1)
    other.add(a=1, b=1)
    assert counts == Counter({"add": 3}) and env.calls == [(3, 2)] and other.calls == [(1, 1)]


def test_heldout_direction_is_stated_whichever_way():
    assert [demo_toolrun.direction({"success": b}, {"success": a}) for b, a in ((0.1, 0.3), (0.3, 0.1), (0.2, 0.2))] \
        == ["rose", "fell", "did not move"]
    result = doctest.testmod(demo_toolrun)
    assert result.attempted > 0 and result.failed == 0


def test_the_effect_benchmark_loads_and_its_sign_test_needs_five_seeds(repo_root):
    """benchmarks/bench_tooldemo.py carries the tool demo's effect claim; fewer than 5 seeds can never show it."""
    import importlib.util

    loaded = importlib.util.spec_from_file_location("bench_tooldemo", repo_root / "benchmarks" / "bench_tooldemo.py")
    assert loaded is not None and loaded.loader is not None
    bench = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(bench)
    assert bench.sign_test_p(5, 5) < 0.05 < bench.sign_test_p(4, 4)
