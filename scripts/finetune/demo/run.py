"""`finetune demo [-o DIR]`: every phase of /finetune on the embedded toy task, on CPU, in minutes.

The demo calls the product's own stages (in-process, through :func:`finetune.cli.main`) on a task
that needs no download — copy three digits into ``<answer>...</answer>`` — and a tiny model built
and warmed up locally (:mod:`finetune.demo.task`):

route → render rewards → sample → score (red flags, hack probes, base success) → review → verdicts →
gate PASS → memory fit + config render → a short GRPO run per seed, held-out reward measured before
and after → diagnose (with the PNG) → report.md + report.html linking every artefact. A second run
directory shows a FAIL: a deliberately broken reward (substring match) caught by the gate, after
which Phase 2 refuses to render.

This module is the task's orchestrator: the steps in /finetune's order. The machinery they run on (phases,
the demo folder, the checker's reading, who reads the samples) is :mod:`finetune.demo.runner`; the toy GRPO
run and its CPU profile (the base-recipe contract's one demo departure) :mod:`finetune.demo.train`; the
report :mod:`finetune.demo.report`.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from finetune import atomic, jsonio, rundir
from finetune.demo.report import write_report
from finetune.demo.runner import (
    CHECKER_STATEMENT,
    CHECKER_USER,
    DemoResult,
    Phase,
    Runner,
    Stop,
    checker_verdicts,
    evaluate_stage,
    interval_facts,
    prepare_out,
    progress_bar,
    quiet_libraries,
)
from finetune.demo.train import (
    DEMO_STEPS,
    EARLY_STEPS,
    brief_addendum,
    inspection_record,
    measured_zero_std,
    reward_gain,
    stop_words,
    train_toy,
)

if TYPE_CHECKING:
    from rich.console import Console

    from finetune.spec import RunSpec

DATA = Path(__file__).resolve().parents[1] / "data" / "demo"
DEFAULT_SEEDS = (3407, 3408)
HELDOUT_PROMPTS = 64
HELDOUT_K = 8
# the difficulty filter on the toy dataset: every training prompt (800 × 8 samples, seconds on this CPU), so the
# filtered run never repeats a prompt within its steps; k = the spec's num_generations (8), the filter's default
FILTER_K = 8


def run_demo(out: str | Path, *, reader: str = "auto", seeds: tuple[int, ...] = DEFAULT_SEEDS,
             steps: int = DEMO_STEPS, console: Console | None = None, filter_k: int | None = FILTER_K) -> DemoResult:
    """Run every phase into ``out``; return what happened (the report is written either way).

    ``filter_k=None`` skips the difficulty filter (benchmarks/bench_filter.py trains both ways itself)."""
    import torch
    from rich.console import Console

    # bound to the real stdout now: stage output is redirected into logs/, the progress bars are not
    console = console or Console(highlight=False, file=sys.stdout)
    out = Path(out).resolve()
    prepare_out(out)
    from finetune import tracking

    tracking.claim(out / "pass")  # the toy runs log to the PASS run's local Trackio project
    interactive = reader == "terminal"
    if reader == "auto" and sys.stdin.isatty() and sys.stdout.isatty():
        from rich.prompt import Prompt

        # the rule: on a terminal the user reads; the user may hand it to the checker instead
        interactive = Prompt.ask("Phase 1 needs 50-100 samples read. Who reads them: you (terminal review, a few "
                                 "minutes) or the demo's independent checker (not a person)?",
                                 choices=["you", "checker"], default="you", console=console) == "you"
    from finetune.demo.checker import READER_LABEL

    result = DemoResult(out=out, reader="user (terminal review)" if interactive else f"{READER_LABEL}")
    run = Runner(result, console)
    threads = torch.get_num_threads()
    # a tiny model gains nothing from a second thread, and on a shared box two threads thrash
    torch.set_num_threads(1)
    console.rule("finetune demo — the embedded toy task, every phase on CPU")
    console.print(f"output: {out}\nreader: {result.reader}", highlight=False)
    try:
        with quiet_libraries():
            _phases(run, result, out, interactive, seeds, steps, console, filter_k)
    except Stop as stop:
        result.facts["stopped_at"] = {"phase": stop.phase.name, "status": stop.phase.status,
                                      "detail": stop.phase.detail}
        console.print(f"[red]stopped:[/red] phase '{stop.phase.name}' is {stop.phase.status}: {stop.phase.detail}")
    finally:
        torch.set_num_threads(threads)
        result.facts["wall_seconds"] = round(time.perf_counter() - result.started, 1)
        write_report(result)
    console.print(f"report: {out / 'report.md'} and {out / 'report.html'} ({result.facts['wall_seconds']} s)")
    return result


def _phases(run: Runner, result: DemoResult, out: Path, interactive: bool, seeds: tuple[int, ...], steps: int,
            console: Any, filter_k: int | None) -> None:
    """The demo's phases in /finetune's order; each step records itself in ``result``."""
    good, bad = out / "pass", out / "fail"
    facts = result.facts
    held_strings = _task_and_model(run, out, (good, bad), facts, console)
    spec = _phase1(run, good, facts, interactive, console)
    if filter_k is not None:
        spec = _difficulty_filter(run, good, facts, filter_k)
    _fail_demo(run, good, bad, facts, console)
    spec_path = good / rundir.SPEC
    run.stage("Phase 2: memory fit", ["memory", str(spec_path)])
    run.stage("Phase 2: render the validated config", ["config", "render", str(spec_path)])
    _phase3(run, good, spec, held_strings, seeds, steps, facts, console)
    _phase4(run, good, facts)


def _task_and_model(run: Runner, out: Path, run_dirs: tuple[Path, Path], facts: dict[str, Any],
                    console: Any) -> list[str]:
    """What a user brings: a dataset and an SFT checkpoint. Returns the held-out digit strings."""
    from finetune.demo import task as demo_task

    train_strings, held_strings = demo_task.splits()

    def make_task(p: Phase) -> str:
        demo_task.write_dataset(out / "data" / "train.jsonl", train_strings)
        demo_task.write_dataset(out / "data" / "heldout.jsonl", held_strings)
        for d in run_dirs:
            d.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(DATA / "spec.yaml", d / rundir.SPEC)
        return f"{len(train_strings)} training prompts, {len(held_strings)} held-out prompts (never trained on)"

    run.step("task: write the dataset and run specs", make_task)

    def make_model(p: Phase) -> str:
        recipe = demo_task.WarmupRecipe()
        with progress_bar(console) as b:
            t = b.add_task("warm-up of the tiny model", total=recipe.steps)
            demo_task.build_demo_model(out / "model", train_strings, recipe, lambda i, n: b.update(t, completed=i))
        info = jsonio.read_json(out / "model" / "DEMO_MODEL.json")
        facts["model"] = info
        return (f"2-layer Qwen3 (hidden {recipe.hidden}), {recipe.steps} noisy warm-up steps, loss "
                f"{info['loss_first']:.2f} → {info['loss_last']:.2f}")

    run.step("model: build the tiny model and warm it up (noisy SFT)", make_model)
    return held_strings


def _phase1(run: Runner, good: Path, facts: dict[str, Any], interactive: bool, console: Any) -> Any:
    """Phase 0 and Phase 1 on the good reward, up to its gate (a FAIL there stops the demo). Returns the spec."""
    from finetune.spec import load_spec

    run.stage("Phase 0: route", ["route", "--verifiable", "yes", "--signal-kind", "exact_match",
                                 "--demonstrations", "no", "--preference-pairs", "no", "--human-judged", "no",
                                 "--base-success", "sometimes", "-o", str(good)])
    spec_path = good / rundir.SPEC
    run.stage("Phase 1: render rewards", ["rewards", "render", str(spec_path)])
    with progress_bar(console) as b:
        b.add_task("sampling completions and base-success samples", total=None)
        run.stage("Phase 1: sample", ["inspect", "sample", str(spec_path)])
    run.stage("Phase 1: score (flags, probes, base success)", ["inspect", "score", str(good)])
    report = jsonio.read_json(good / rundir.SCORE_REPORT)
    base = report["base_success"]
    facts["base_success"] = {k: base.get(k) for k in ("mean_success", "verdict", "temperature", "samples", "prompts")}
    facts["sampled_success"] = next((r["pass_rate"] for r in report["rewards"] if r["role"] == "correctness"), None)
    facts["flags"] = [f["id"] for f in report["flags"]]
    facts["probes"] = {"total": len(report["probes"]), "passing": sum(bool(p["passing"]) for p in report["probes"])}
    run.stage("Phase 1: review sheet (Markdown)", ["inspect", "review", str(good), "--format", "md"])
    run.stage("Phase 1: review page (HTML)", ["inspect", "review", str(good), "--format", "html"])
    spec = load_spec(spec_path)
    if interactive:
        console.print("Read the samples: y = agree with the rewards, n = disagree (at least "
                      f"{spec.inspection.min_read}).")
        run.stage("Phase 1: you read the samples (terminal review)", ["inspect", "review", str(good), "--format",
                                                                         "terminal"], interactive=True)
    else:
        _checker_reads(run, good, spec, facts, "pass")
    run.stage("Phase 1: gate", ["inspect", "gate", str(good)])  # a FAIL here stops the demo, as it stops /finetune
    facts["gate_pass"] = jsonio.read_json(good / rundir.GATE)
    return spec


def _difficulty_filter(run: Runner, good: Path, facts: dict[str, Any], filter_k: int) -> Any:
    """Keep only prompts that can teach; re-binds dataset.filter into the gate record. Returns the new spec."""
    from finetune.spec import load_spec

    spec_path = good / rundir.SPEC
    run.stage("Phase 1: difficulty filter", ["data", "filter", str(spec_path), "--k", str(filter_k),
                                             "--device", "cpu", "--backend", "transformers"])
    summary = jsonio.read_json(good / "data" / "filter_summary.json")
    facts["filter"] = {k: summary[k] for k in ("k", "assessed", "kept", "dropped_never", "dropped_always",
                                              "predicted_zero_std_before", "predicted_zero_std_after",
                                              "predicted_zero_std_after_in_sample", "check_prompts",
                                              "predicted_zero_std_after_interval", "dispersion",
                                              "num_generations")}
    return load_spec(spec_path)  # now names data/filtered.jsonl


def _fail_demo(run: Runner, good: Path, bad: Path, facts: dict[str, Any], console: Any) -> None:
    """The same samples, a deliberately broken reward: the gate FAILs and Phase 2 refuses."""
    from finetune.spec import load_spec

    bad_spec = bad / rundir.SPEC
    run.stage("FAIL demo: render rewards", ["rewards", "render", str(bad_spec)])

    def break_reward(p: Phase) -> str:
        rewards_py = bad / rundir.REWARDS
        atomic.write_text(rewards_py, rewards_py.read_text() + (DATA / "broken_correctness.py").read_text())
        return "rewards.py hand-edited: `correct` is now a substring match (Visual-RFT#176)"

    run.step("FAIL demo: break the correctness reward", break_reward)
    run.stage("FAIL demo: import the same samples", ["inspect", "sample", str(bad_spec), "--import",
                                                     str(good / rundir.SAMPLES), "--import-base",
                                                     str(good / rundir.BASE_SAMPLES)])
    run.stage("FAIL demo: score", ["inspect", "score", str(bad)])
    run.stage("FAIL demo: review sheet", ["inspect", "review", str(bad), "--format", "md"])
    _checker_reads(run, bad, load_spec(bad_spec), facts, "fail")
    fail_gate = run.stage("FAIL demo: gate", ["inspect", "gate", str(bad)], expect=1)
    facts["gate_fail"] = jsonio.read_json(bad / rundir.GATE)
    fail_gate.detail = "FAIL — " + "; ".join(r.split(":")[0] for r in facts["gate_fail"]["reasons"])
    console.print(f"{'':>17}  the broken reward is caught: {fail_gate.detail}", highlight=False)
    run.stage("FAIL demo: Phase 2 refuses", ["config", "render", str(bad_spec)], expect=1)


def _phase3(run: Runner, good: Path, spec: Any, held_strings: list[str], seeds: tuple[int, ...], steps: int,
            facts: dict[str, Any], console: Any) -> None:
    """The toy GRPO run per seed, then `finetune eval` of its saved model on the held-out split (before: the base
    model, after: the checkpoint, with the paired interval); BRIEF.md gains the CPU profile."""
    from finetune.config.build import inspection_settings

    every = inspection_settings(spec)["every_steps"]
    facts["inspection_every"] = {"value": every.value, "reason": every.reason}
    held = held_strings[:HELDOUT_PROMPTS]
    g = spec.generation
    runs: list[dict[str, Any]] = []
    for n, seed in enumerate(seeds):
        target = good / (rundir.TRAIN_DIR if n == 0 else f"{rundir.TRAIN_DIR}_seed{seed}")
        record: dict[str, Any] = {"seed": seed, "output_dir": str(target.relative_to(good))}

        def train_one(p: Phase, seed: int = seed, target: Path = target, record: dict[str, Any] = record) -> str:
            with progress_bar(console) as b:
                t = b.add_task(f"GRPO seed {seed}", total=steps)
                _, changes = train_toy(good, spec, seed, target, steps,
                                       lambda i, total: b.update(t, completed=i, total=total))
            record.update({"measured_zero_std": measured_zero_std(target),
                           "measured_zero_std_early": measured_zero_std(target, EARLY_STEPS),
                           "inspection": inspection_record(target, good)})
            if spec.dataset.filter is not None:
                record.update(_unfiltered_baseline(good, spec, seed, steps, console, target))
            facts["profile_changes"] = changes
            p.command = f"GRPOTrainer (TRL) with config/grpo_config.yaml + DEMO_CPU_PROFILE, seed {seed}"
            detail = f"{steps} steps"
            if "unfiltered_zero_std" in record:
                detail += (f"; frac_reward_zero_std {record['measured_zero_std']:.3f} filtered vs "
                           f"{record['unfiltered_zero_std']:.3f} unfiltered")
            return detail + stop_words(record.get("inspection"), "") + stop_words(
                record.get("unfiltered_inspection"), " unfiltered")

        run.step(f"Phase 3: toy GRPO run, seed {seed}", train_one)
        runs.append(_evaluated(run, good, spec, target, seed, held, record))
    facts["heldout"] = {"prompts": len(held), "k": HELDOUT_K, "temperature": g.temperature, "runs": runs}
    jsonio.write_json(good / "heldout.json", facts["heldout"])
    brief = good / rundir.CONFIG_DIR / "BRIEF.md"
    atomic.write_text(brief, brief.read_text() + brief_addendum(facts.get("profile_changes", [])))


def _evaluated(run: Runner, good: Path, spec: Any, target: Path, seed: int, held: list[str],
               record: dict[str, Any]) -> dict[str, Any]:
    """`finetune eval` of one seed's model: before / after as the demo reports them (the gated rewards' scores and
    the independent checker on eval's own samples) and eval's paired interval per measure."""
    from finetune.demo import task as demo_task

    doc, sides = evaluate_stage(run, good, target, seed, HELDOUT_K, "Phase 3")
    rewards = [(r.name, r.weight) for r in spec.rewards]
    t = spec.generation.temperature
    before, after = (demo_task.heldout_from_eval(sides[s], held, t, seed, rewards) for s in ("before", "after"))
    phase = run.result.phases[-1]
    ci = doc["results"]["correct"]
    phase.detail = (f"held-out reward {before.reward:.3f} → {after.reward:.3f}; checker accepts "
                    f"{before.checker_accept:.0%} → {after.checker_accept:.0%}; correct {ci['change'] * 100:+.1f} "
                    f"pts [{ci['interval'][0] * 100:+.1f}, {ci['interval'][1] * 100:+.1f}]")
    return {**record, "before": dataclasses.asdict(before), "after": dataclasses.asdict(after),
            "eval": interval_facts(doc, ("accept", "correct", "format_ok", "total"))}


def _unfiltered_baseline(good: Path, spec: Any, seed: int, steps: int, console: Any,
                         filtered_dir: Path) -> dict[str, Any]:
    """The same seed on the unfiltered dataset: TRL's frac_reward_zero_std without the filter."""
    target = good / f"{rundir.TRAIN_DIR}_unfiltered_seed{seed}"
    with progress_bar(console) as b:
        t = b.add_task(f"GRPO seed {seed}, unfiltered baseline", total=steps)
        train_toy(good, spec, seed, target, steps, lambda i, total: b.update(t, completed=i, total=total),
                  unfiltered=True)
    return {"unfiltered_output_dir": str(target.relative_to(good)), "unfiltered_zero_std": measured_zero_std(target),
            "unfiltered_zero_std_early": measured_zero_std(target, EARLY_STEPS),
            "unfiltered_inspection": inspection_record(target, good),
            "reward_gain": reward_gain(filtered_dir),
            "unfiltered_reward_gain": reward_gain(target)}


def _phase4(run: Runner, good: Path, facts: dict[str, Any]) -> None:
    """Diagnose the toy run's logs."""
    run.stage("Phase 4: diagnose", ["diagnose", str(good)])
    diag = good / rundir.DIAGNOSIS
    if diag.is_file():
        d = jsonio.read_json(diag)
        facts["diagnosis"] = {"verdict": d.get("verdict"), "symptoms": [s.get("name") for s in d.get("symptoms", [])],
                              "recommended_variant": d.get("recommended_variant")}


def _checker_reads(run: Runner, run_dir: Path, spec: RunSpec, facts: dict[str, Any], key: str) -> None:
    from finetune.demo.checker import READER_LABEL

    holder: dict[str, Any] = {}

    def read(p: Phase) -> str:
        holder["path"], counts = checker_verdicts(run_dir, spec)
        facts.setdefault("checker", {})[key] = counts
        return f"read {counts['read']} samples: {counts['accept']} accept, {counts['reject']} reject — {READER_LABEL}"

    run.step(f"{'Phase 1' if key == 'pass' else 'FAIL demo'}: the checker reads the review sheet", read)
    run.stage(f"{'Phase 1' if key == 'pass' else 'FAIL demo'}: record the verdicts",
              ["inspect", "verdict", str(run_dir), "--file", str(holder["path"])])
    run.stage(f"{'Phase 1' if key == 'pass' else 'FAIL demo'}: confirmation (the demo's own, no person)",
              ["inspect", "confirm", str(run_dir), "--user", CHECKER_USER, "--statement", CHECKER_STATEMENT, "--yes"])
