"""`finetune demo` end to end (once per session, `demo_run` in conftest.py) and its parts.

The session fixture runs every phase for real on CPU: the warmed-up tiny model, the product's stage
commands in-process, TRL's GRPOTrainer for two seeds, diagnose with matplotlib. These tests read
what it left on disk.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
from pathlib import Path

import pytest

from finetune import rundir
from finetune.demo import checker as demo_checker
from finetune.demo import report as demo_report
from finetune.demo import run as demo
from finetune.demo import runner as demo_runner
from finetune.demo import train as demo_train

LABEL = demo_checker.READER_LABEL


def _json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


# ------------------------------------------------------------------------------------------------
# the whole demo


@pytest.mark.slow
def test_every_phase_ran(demo_run):
    assert not demo_run.facts.get("stopped_at"), demo_run.facts.get("stopped_at")
    statuses = {p.name: p.status for p in demo_run.phases}
    assert statuses["FAIL demo: gate"] == "failed (expected)"
    assert statuses["FAIL demo: Phase 2 refuses"] == "failed (expected)"
    others = {n: s for n, s in statuses.items() if not n.startswith("FAIL demo: gate") and "refuses" not in n}
    assert set(others.values()) == {"ok"}, others
    for prefix in ("Phase 0", "Phase 1", "Phase 2", "Phase 3", "Phase 4"):
        assert any(n.startswith(prefix) for n in statuses), prefix


@pytest.mark.slow
def test_base_success_is_partial(demo_run):
    """RL's precondition: the base model sometimes succeeds (5-60%), at inspection and at low temperature."""
    facts = demo_run.facts
    assert 0.05 <= facts["sampled_success"] <= 0.60, facts["sampled_success"]
    assert 0.05 <= facts["base_success"]["mean_success"] <= 0.60, facts["base_success"]
    assert facts["base_success"]["verdict"] == "learnable"
    heldout_before = [r["before"]["per_reward"]["correct"] for r in facts["heldout"]["runs"]]
    assert all(0.05 <= b <= 0.60 for b in heldout_before), heldout_before


@pytest.mark.slow
def test_gate_passes_for_the_composite_reward(demo_run):
    from finetune.inspect.gate import verify_gate
    from finetune.spec import load_spec

    good = demo_run.out / "pass"
    gate = _json(good / rundir.GATE)
    assert gate["status"] == "PASS", gate["reasons"]
    assert gate["counts"]["read"] >= 50 and gate["counts"]["disagreements"] == 0
    assert not any(p["passing"] for p in gate["probes"]) and gate["probes"]
    assert gate["readers"] == ["agent"]
    assert gate["confirmation"]["user"] == "finetune demo (no person)"
    assert "no person" in gate["confirmation"]["statement"]
    assert verify_gate(good, load_spec(good / rundir.SPEC)).ok
    verdicts = [json.loads(line) for line in (good / rundir.VERDICTS).read_text().splitlines()]
    assert len(verdicts) >= 50 and all(v["note"].startswith(f"[{LABEL}]") for v in verdicts)


@pytest.mark.slow
def test_gate_catches_the_broken_reward(demo_run):
    bad = demo_run.out / "fail"
    assert "substring" in (bad / rundir.REWARDS).read_text()
    gate = _json(bad / rundir.GATE)
    assert gate["status"] == "FAIL"
    kinds = {(d["kind"], d["field"]) for d in gate["disagreements"]}
    assert ("false_positive", "correct") in kinds, kinds
    passing = {p["probe"] for p in gate["probes"] if p["passing"]}
    assert "hedged" in passing, passing
    assert all(p["passed_by"] == ["correct"] for p in gate["probes"] if p["passing"])
    assert not (bad / rundir.CONFIG_DIR / "train.py").exists()  # Phase 2 refused: nothing launchable


@pytest.mark.slow
def test_rendered_config_is_the_base_recipe_and_valid(demo_run):
    import dataclasses as dc
    import py_compile

    import yaml
    from trl import GRPOConfig

    config = demo_run.out / "pass" / rundir.CONFIG_DIR
    rendered = yaml.safe_load((config / "grpo_config.yaml").read_text())
    assert rendered["learning_rate"] == 5e-7 and rendered["beta"] == 0.01  # the base-recipe contract: the config stays base
    assert rendered["loss_type"] == "grpo" and rendered["num_generations"] == 8
    fields = {f.name for f in dc.fields(GRPOConfig)}
    kwargs = {k: v for k, v in rendered.items() if k in fields}
    kwargs.update(use_cpu=True, bf16=False, use_vllm=False, output_dir=str(demo_run.out / "tmp-config-check"))
    GRPOConfig(**kwargs)  # TRL accepts the rendered kwargs (CPU substitutions only)
    py_compile.compile(str(config / "train.py"), doraise=True)
    brief = (config / "BRIEF.md").read_text()
    assert "## Demo CPU profile (added by `finetune demo`" in brief
    assert "| `learning_rate` | `5e-07` | `0.0003` |" in brief


@pytest.mark.slow
def test_training_raised_heldout_reward_on_both_seeds(demo_run):
    runs = demo_run.facts["heldout"]["runs"]
    assert [r["seed"] for r in runs] == [3407, 3408]
    for r in runs:
        before, after = r["before"], r["after"]
        assert after["reward"] > before["reward"] + 0.2, r
        assert after["checker_accept"] > before["checker_accept"] + 0.2, r
        state = _json(demo_run.out / "pass" / r["output_dir"] / "trainer_state.json")
        rewards = [h["reward"] for h in state["log_history"] if "reward" in h]
        assert len(rewards) >= 40
        assert sum(rewards[-10:]) / 10 > sum(rewards[:10]) / 10  # the training reward rose too
        profile = _json(demo_run.out / "pass" / r["output_dir"] / "demo_profile.json")
        assert {"field": "learning_rate", "rendered": 5e-7, "demo": 3e-4} == \
            {k: v for k, v in next(c for c in profile["changes"] if c["field"] == "learning_rate").items() if k != "why"}
    assert _json(demo_run.out / "pass" / "heldout.json")["runs"] == runs


@pytest.mark.slow
def test_before_after_come_from_finetune_eval_with_an_interval(demo_run):
    from finetune import evaluate

    good = demo_run.out / "pass"
    for r in demo_run.facts["heldout"]["runs"]:
        doc = evaluate.read(good, r["eval"]["name"])  # RUN/eval/<the seed's folder>/eval.json
        assert doc["checkpoint"] == str((good / r["output_dir"]).resolve()) and doc["k"] == demo.HELDOUT_K
        assert doc["heldout"]["source"] == "file" and doc["heldout"]["prompts"] == demo.HELDOUT_PROMPTS
        correct = doc["results"]["correct"]
        lo, hi = correct["interval"]
        assert lo <= correct["change"] <= hi and 0.0 <= correct["p_sign_test"] <= 1.0
        assert r["eval"]["results"]["correct"] == {k: correct[k] for k in r["eval"]["results"]["correct"]}
        samples = [json.loads(x) for x in (good / "eval" / doc["name"] / evaluate.SAMPLES).read_text().splitlines()]
        after = [s for s in samples if s["side"] == "after"]
        assert r["after"]["reward"] == pytest.approx(sum(s["total"] for s in after) / len(after))
        assert f"[`pass/eval/{doc['name']}/report.md`]" in (demo_run.out / "report.md").read_text()


@pytest.mark.slow
def test_the_toy_runs_log_to_the_runs_local_trackio_project_and_diagnose_reads_it(demo_run, cli, tmp_path):
    from finetune.diagnose import trackiodb

    db = demo_run.out / "pass" / "train" / "trackio" / "finetune-demo-copy-digits.db"
    assert trackiodb.is_db(db) and len(trackiodb.runs(db)) == len(demo_run.facts["heldout"]["runs"])
    r = cli("diagnose", db, "-o", tmp_path)
    assert r.code == 0, r
    doc = _json(tmp_path / rundir.DIAGNOSIS)
    assert doc["run"]["log_kind"] == "trackio" and doc["run"]["licenses"] is False
    assert doc["run"]["logged_steps"] == demo_train.DEMO_STEPS


@pytest.mark.slow
def test_diagnosis_report_and_plot(demo_run):
    diag = demo_run.out / "pass" / "diagnosis"
    d = _json(diag / "diagnosis.json")
    assert d["verdict"] in ("healthy", "symptom", "insufficient")
    assert d["verdict"] == demo_run.facts["diagnosis"]["verdict"]
    assert (diag / "report.md").read_text().strip()
    png = (diag / "curves.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


@pytest.mark.slow
def test_report_links_resolve(demo_run):
    out = demo_run.out
    md = (out / "report.md").read_text()
    links = re.findall(r"\]\(([^)]+)\)", md)
    assert len(links) > 40
    for link in links:
        assert (out / link).exists(), link
    html = (out / "report.html").read_text()
    refs = re.findall(r'(?:href|src)="([^"]+)"', html)
    assert set(refs) == set(links)
    for ref in refs:
        assert (out / ref).exists(), ref
    for needed in ("pass/gate.json", "fail/gate.json", "pass/config/grpo_config.yaml", "pass/train/trainer_state.json",
                   "pass/diagnosis/curves.png", "pass/review.md", "pass/memory.md"):
        assert needed in links, needed
    assert LABEL in md and "not a person" in html


@pytest.mark.slow
def test_console_labels_the_reader(demo_run):
    text = demo_run.console_text
    assert f"reader: {LABEL}" in text
    assert "FAIL demo: gate" in text and "report:" in text


# ------------------------------------------------------------------------------------------------
# parts, cheap


@pytest.mark.parametrize("completion,well_formed,correct", [
    ("<answer>071</answer>", True, True),
    ("  <answer> 071 </answer>\n", True, True),
    ("Copying: <answer>071</answer>", True, True),
    ("<answer>71</answer>", True, False),  # digits, not a number
    ("<answer>071 or 170</answer>", True, False),  # a hedge
    ("Answer 071", False, False),
    ("<answer>071</answer> done", False, False),
    ("<answer>071</answer><answer>071</answer>", False, False),
    ("<answer>071", False, False),
    ("<answer></answer>", False, False),
    ("", False, False),
])
def test_checker_judges_from_the_prompt(completion, well_formed, correct):
    prompt = [{"role": "user", "content": "Copy the digits 0 7 1"}]
    c = demo_checker.check(prompt, completion, gold="071")
    assert (c.well_formed, c.correct, c.accept) == (well_formed, correct, well_formed and correct)


def test_checker_reads_the_prompt_not_the_gold():
    c = demo_checker.check("Copy the digits 4 7 1", "<answer>471</answer>", gold="999")
    assert c.accept and "differs" in c.note
    assert demo_checker.expected_digits("What is 2 plus 2") is None


@pytest.mark.slow
def test_model_build_is_deterministic(tmp_path):
    from finetune.demo import task as demo_task
    from finetune.hashing import sha256_file

    recipe = demo_task.WarmupRecipe(steps=3, batch=4)
    train, held = demo_task.splits()
    assert not set(train) & set(held) and len(train) + len(held) == 1000
    a = demo_task.build_demo_model(tmp_path / "a", train, recipe)
    b = demo_task.build_demo_model(tmp_path / "b", train, recipe)
    assert sha256_file(a / "model.safetensors") == sha256_file(b / "model.safetensors")


def test_demo_refuses_a_folder_it_did_not_make(cli, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    r = cli("demo", "-o", tmp_path)
    assert r.code == 2 and "not made by `finetune demo`" in r.err
    assert (tmp_path / "notes.txt").read_text() == "mine" and len(list(tmp_path.iterdir())) == 1
    r = cli("demo", "-o", tmp_path / "new", "--steps", "5")
    assert r.code == 2 and not (tmp_path / "new").exists()


def test_an_unavailable_stage_is_named_not_pretended(tmp_path, monkeypatch):
    from rich.console import Console

    from finetune import cli as cli_mod

    monkeypatch.setitem(cli_mod.GROUPS, "diagnose", ("finetune.not_landed_yet", "Phase 4"))
    result = demo_runner.DemoResult(out=tmp_path, reader=LABEL)
    runner = demo_runner.Runner(result, Console(file=io.StringIO()))
    with pytest.raises(demo_runner.Stop) as stop:
        runner.stage("Phase 4: diagnose", ["diagnose", str(tmp_path)])
    assert stop.value.phase.status == "unavailable" and "finetune.not_landed_yet" in stop.value.phase.detail
    result.facts["stopped_at"] = dataclasses.asdict(stop.value.phase) | {"phase": "Phase 4: diagnose"}
    demo_report.write_report(result)
    md = (tmp_path / "report.md").read_text()
    assert "stopped at 'Phase 4: diagnose' (unavailable)" in md and "finetune.not_landed_yet" in md


@pytest.mark.slow
def test_toy_training_refuses_once_the_gate_no_longer_holds(demo_run, tmp_path):
    """The demo trains only while the PASS still binds the files, as the rendered train.py does."""
    import shutil

    from finetune.errors import CheckFailed
    from finetune.spec import load_spec

    run_dir = tmp_path / "pass"
    shutil.copytree(demo_run.out / "pass", run_dir, ignore=shutil.ignore_patterns("train*", "diagnosis"))
    spec_text = (run_dir / "spec.yaml").read_text().replace("../model", str(demo_run.out / "model")) \
        .replace("../data/", str(demo_run.out / "data") + "/")
    (run_dir / "spec.yaml").write_text(spec_text)
    with (run_dir / rundir.REWARDS).open("a") as fh:
        fh.write("\n# edited after the gate PASSed\n")
    with pytest.raises(CheckFailed, match="refusing to train: changed since the gate PASSed: rewards.py"):
        demo_train.train_toy(run_dir, load_spec(run_dir / "spec.yaml"), 3407, run_dir / "train", 10, lambda i, n: None)
    assert not (run_dir / "train").exists()


@pytest.mark.slow
def test_a_person_reading_in_the_terminal_needs_no_confirmation(tmp_path, monkeypatch):
    """--reader terminal: the user reads the samples blind (here: answers as the task statement defines,
    through the terminal review's own questions, before each sample's scores are shown)."""
    from rich.console import Console
    from rich.prompt import Prompt

    from finetune.demo.run import run_demo

    run_dir = tmp_path / "demo" / "pass"
    seen: dict[str, demo_checker.Check] = {}

    def person(question, choices=None, default=None, console=None, **_):
        scored = {r["id"]: r for r in map(json.loads, (run_dir / rundir.SCORED).read_text().splitlines())}
        sid = question.split(":", 1)[0]
        if question.endswith("accept or reject? (a/r; s skip, q quit)"):
            row = scored[sid]
            seen[sid] = demo_checker.check(row["prompt"], row["completion"], None)
            return "a" if seen[sid].accept else "r"
        if "is the answer correct" in question:
            return "y" if seen[sid].correct else "n"
        if "well-formed" in question:
            return "y" if seen[sid].well_formed else "n"
        return default  # the note (empty) and "keep your verdict?" (keep)

    monkeypatch.setattr(Prompt, "ask", person)
    monkeypatch.setattr("finetune.cli.inspect.on_a_terminal", lambda: True)  # the person's own terminal
    result = run_demo(tmp_path / "demo", reader="terminal", seeds=(3407,), steps=10,
                      console=Console(file=io.StringIO(), width=160))
    assert not result.facts.get("stopped_at"), result.facts.get("stopped_at")
    gate = _json(tmp_path / "demo" / "pass" / rundir.GATE)
    assert gate["status"] == "PASS" and gate["readers"] == ["human"] and gate["confirmation"] is None
    assert not (tmp_path / "demo" / "pass" / "confirmation.json").exists()
    assert _json(tmp_path / "demo" / "fail" / rundir.GATE)["status"] == "FAIL"
    md = (tmp_path / "demo" / "report.md").read_text()
    assert "Reader of the samples: user (terminal review)" in md and "read by the demo's independent checker" in md


@pytest.mark.slow
def test_demo_filters_and_shows_predicted_beside_measured_zero_std(demo_run):
    """The GRPO run trained on the filtered prompts; report.md puts the filter's prediction next to TRL's log."""
    from finetune.spec import load_spec

    good = demo_run.out / "pass"
    flt = demo_run.facts["filter"]
    spec = load_spec(good / rundir.SPEC)
    assert spec.dataset.filter is not None and spec.dataset.filter.rows == flt["kept"] < flt["assessed"]
    assert spec.training_data_path() == (good / "data" / "filtered.jsonl").resolve()
    assert [round(flt["predicted_zero_std_before"], 4), round(flt["predicted_zero_std_after"], 4)] == \
        spec.dataset.filter.predicted_frac_reward_zero_std
    md = (demo_run.out / "report.md").read_text()
    assert "## Difficulty filter: predicted and measured `frac_reward_zero_std`" in md
    runs = demo_run.facts["heldout"]["runs"]
    for r in runs:
        measured = {}
        for key, folder in (("measured", r["output_dir"]), ("unfiltered", r["unfiltered_output_dir"])):
            state = _json(good / folder / "trainer_state.json")
            logged = [h["frac_reward_zero_std"] for h in state["log_history"] if "frac_reward_zero_std" in h]
            measured[key] = (sum(logged) / len(logged), sum(logged[:demo_train.EARLY_STEPS]) / demo_train.EARLY_STEPS)
        assert (r["measured_zero_std"], r["measured_zero_std_early"]) == pytest.approx(measured["measured"])
        assert (r["unfiltered_zero_std"], r["unfiltered_zero_std_early"]) == pytest.approx(measured["unfiltered"])
        assert (f"| seed {r['seed']} | {flt['predicted_zero_std_before']:.3f} | {flt['predicted_zero_std_after']:.3f} "
                f"| {r['unfiltered_zero_std']:.3f} | **{r['measured_zero_std']:.3f}** "
                f"| {r['unfiltered_zero_std_early']:.3f} | {r['measured_zero_std_early']:.3f} |") in md
        # the unfiltered baseline trained on every prompt, the filtered run on the kept ones only
        trained_on = {key: _json(good / r[key] / "demo_profile.json")["dataset"]
                      for key in ("output_dir", "unfiltered_output_dir")}
        assert trained_on == {"output_dir": str(spec.training_data_path()),
                              "unfiltered_output_dir": str(spec.resolve_path(spec.dataset.path))}
    # the report states what this machine measured, whichever way it came out; the effect itself is claimed
    # only by benchmarks/bench_filter.py (8 seeds, sign test): per seed it moves with the CPU's floating point
    lower = sum(r["measured_zero_std"] < r["unfiltered_zero_std"] for r in runs)
    assert f"fewer zero-std groups than the unfiltered one on {lower} of {len(runs)} seeds." in md
    assert "bench_filter.py" in md
    # the kept prompts were predicted on fresh samples (not the ones that chose them), with an interval
    assert flt["check_prompts"] > 0 and flt["predicted_zero_std_after_in_sample"] <= flt["predicted_zero_std_after"]
    lo, hi = flt["predicted_zero_std_after_interval"]
    assert lo <= flt["predicted_zero_std_after"] <= hi
    # the toy task is heterogeneous like a real dataset: the tiers show in the filter's own pass rates
    from finetune.demo.task import WarmupRecipe

    recipe, source = WarmupRecipe(), [json.loads(x) for x in (demo_run.out / "data" / "train.jsonl").open()]
    by_tier: dict[str, list[int]] = {}
    for e in map(json.loads, (good / "data" / "pass_rates.jsonl").open()):
        by_tier.setdefault(recipe.tier_of(source[e["row"]]["answer"]), []).append(e["successes"])
    mean = {t: sum(v) / len(v) / flt["k"] for t, v in by_tier.items()}
    assert mean["mastered"] > 0.7 and 0.15 < mean["partial"] < 0.6 and mean["beyond"] < 0.15, mean
    assert flt["dispersion"]["index"] > 2
    assert flt["k"] == demo.FILTER_K == spec.training.num_generations


# ------------------------------------------------------------------------------------------------
# inspection during training: every toy run trains with config/train.py's callback (finetune.watch)


def _toy_runs(facts) -> list[tuple[str, dict]]:
    """(folder in pass/, its inspection record) of every toy run: each seed filtered and unfiltered."""
    return [(r[folder], r[record]) for r in facts["heldout"]["runs"]
            for folder, record in (("output_dir", "inspection"), ("unfiltered_output_dir", "unfiltered_inspection"))]


@pytest.mark.slow
def test_every_toy_run_inspects_itself_during_training(demo_run):
    """Step files at every inspection step in Phase 1's sample format (what those steps scored), inspection/*
    metrics in trainer_state.json, and no stop on this healthy task."""
    import yaml

    from finetune import watch
    from finetune.inspect.samplesio import load_samples
    from finetune.spec import load_spec

    good = demo_run.out / "pass"
    spec = load_spec(good / rundir.SPEC)
    every = demo_run.facts["inspection_every"]["value"]
    expected = list(range(every, demo_train.DEMO_STEPS + 1, every))
    assert every == 5 * spec.training.logging_steps and len(expected) == 8
    config = yaml.safe_load((good / rundir.CONFIG_DIR / "grpo_config.yaml").read_text())
    per_step = config["per_device_train_batch_size"] * config["gradient_accumulation_steps"]
    runs = _toy_runs(demo_run.facts)
    assert len(runs) == 4
    for folder, record in runs:
        out = good / folder
        on_disk = sorted(int(p.stem.removeprefix("step_")) for p in (out / watch.INSPECTIONS).glob("step_*.jsonl"))
        assert on_disk == expected == record["steps"], folder
        for step in expected:
            rows = load_samples(out / watch.INSPECTIONS / f"step_{step}.jsonl")
            assert len(rows) == min(spec.inspection.min_read, every * per_step), (folder, step)
            assert all(r["id"].startswith(f"step{step}-") and r["columns"]["answer"] for r in rows)
            sources = {int(r["source"].removeprefix("training step ")) for r in rows}
            assert sources <= set(range(step - every + 1, step + 1)), (folder, step, sources)
        logged = {h["step"]: h for h in _json(out / "trainer_state.json")["log_history"]
                  if "inspection/completions" in h}
        assert sorted(logged) == expected, folder
        assert all(h["inspection/completions"] == every * per_step and h["inspection/stop"] == 0.0
                   and h["inspection/probes_passing"] == 0.0 for h in logged.values()), folder
        assert not (out / watch.STOPPED).exists() and record["stopped"] is None and record["rules_fired"] == []


@pytest.mark.slow
def test_report_shows_the_inspections_of_every_toy_run(demo_run):
    md = (demo_run.out / "report.md").read_text()
    section = md.split("## Inspection during training\n", 1)[1].split("\n## ", 1)[0]
    assert "every **5** steps" in section and "was stopped by the inspection callback" not in section
    for folder, record in _toy_runs(demo_run.facts):
        run = f"pass/{folder}"
        row = next(line for line in section.splitlines() if line.startswith(f"| [{run}]({run}/inspections/index.jsonl) |"))
        assert f"| {record['inspections']} | none |" in row
        assert all(f"[{s}]({run}/inspections/step_{s}.jsonl)" in row for s in record["steps"])


def test_a_stopped_toy_run_is_reported_as_the_callbacks_decision_not_a_demo_error(tmp_path):
    """A run the callback stopped (here: an empty completion passes the correctness reward, a hack probe's
    shape) is shown with its rule, step, reward and why, and the phase stays ok."""
    from transformers import TrainerControl, TrainerState

    from finetune import watch

    def correct(completions, **kwargs):
        return [1.0] * len(completions)

    from finetune.rewards.lib.rewards_meta import RewardMeta

    meta = [RewardMeta(name="correct", type="exact_match", role="correctness", weight=1.0, threshold=1.0, min=0.0,
                       max=1.0, gated=False, episode=False)]
    wrapped, cb = watch.instrument([correct], meta=meta, every_steps=5, sample_rows=50, max_completion_length=16)
    out = tmp_path / "pass" / "train_seed3408"
    args, state, control = type("A", (), {"output_dir": str(out)})(), TrainerState(), TrainerControl()
    cb.on_train_begin(args, state, control)
    wrapped[0](prompts=["p", "p"], completions=["<answer>1</answer>", ""], answer=["1", "1"])
    state.global_step = 5
    cb.on_step_end(args, state, control)
    assert control.should_training_stop
    record = demo_train.inspection_record(out, tmp_path / "pass")
    assert record["rules_fired"] == ["probe_passing"] and record["steps"] == [5]
    assert record["stopped"]["rule"] == "probe_passing" and record["stopped"]["reward"] == "correct"
    assert demo_train.stop_words(record, "").endswith("stopped at step 5 by the inspection callback (probe_passing)")
    measured = {"reward": 0.5, "checker_accept": 0.5, "examples": []}
    facts = {"inspection_every": {"value": 5, "reason": "the test's"},
             "heldout": {"prompts": 1, "k": 1, "temperature": 1.0, "runs": [
                 {"seed": 3408, "output_dir": "train_seed3408", "before": measured, "after": measured,
                  "inspection": record}]}}
    md = demo_report.report_markdown(demo_runner.DemoResult(out=tmp_path, reader="checker", facts=facts))
    assert ("> **pass/train_seed3408 was stopped by the inspection callback at step 5**: rule `probe_passing`, "
            "reward correct — 1 completion(s) shaped like the 'empty_completion' hack probe pass correct "
            "([STOPPED.json](pass/train_seed3408/STOPPED.json)). This is the callback doing its job, not an error "
            "of the demo") in md
    assert "| [pass/train_seed3408](pass/train_seed3408/inspections/index.jsonl) | 3408 | 1 | probe_passing | empty_rewarded:correct (step 5) |" in md


def test_demo_runs_the_digit_task_then_the_tool_task_unless_told_one(cli, tmp_path, monkeypatch):
    """`finetune demo`: the digit task into DIR, then the tool task into DIR/tools; --no-tools / --tools run one;
    a stopped digit task stops the demo before the tool task (exit 1). The tasks themselves run for real in the
    session fixture (--no-tools) and in tests/demo/test_demo_tools.py (--tools)."""
    from finetune.cli import demo as cli_demo
    from finetune.demo import toolrun as demo_toolrun

    ran: list[tuple[str, Path, tuple[int, ...], int]] = []
    stop: dict = {}

    def digits(out, *, reader, seeds, steps):
        ran.append(("digits", Path(out), seeds, steps))
        return demo_runner.DemoResult(out=Path(out).resolve(), reader=reader, facts=dict(stop))

    def tools(out, *, seeds, steps):
        ran.append(("tools", Path(out), seeds, steps))
        return demo_runner.DemoResult(out=Path(out), reader=LABEL)

    monkeypatch.setattr(cli_demo, "run_demo", digits)
    monkeypatch.setattr(demo_toolrun, "run_tool_demo", tools)
    out = tmp_path / "d"
    assert cli("demo", "-o", out).code == 0
    assert ran == [("digits", out, (3407, 3408), demo_train.DEMO_STEPS),
                   ("tools", out.resolve() / "tools", (3407, 3408), demo_toolrun.TOOL_STEPS)]
    ran.clear()
    assert cli("demo", "-o", out, "--no-tools", "--seeds", "1").code == 0
    assert ran == [("digits", out, (3407,), demo_train.DEMO_STEPS)]
    ran.clear()
    assert cli("demo", "-o", out, "--tools").code == 0
    assert ran == [("tools", out, (3407, 3408), demo_toolrun.TOOL_STEPS)]
    ran.clear()
    stop["stopped_at"] = {"phase": "Phase 1: gate"}
    r = cli("demo", "-o", out)
    assert r.code == 1 and "demo stopped at 'Phase 1: gate'" in r.err and [t for t, *_ in ran] == ["digits"]
