"""`finetune demo --tools`: the calculator tool task (:mod:`finetune.demo.tools`) end to end on CPU.

The same product stages as the digit task, on a spec with an ``environment``: render rewards (env.py copied
and bound) → ``inspect sample`` generates whole rollouts (tool calls executed) → score → the demo's
independent tool checker reads the review sheet (it reads the two numbers from the prompt text and the call
from the trajectory, sharing no code with the environment) → gate PASS. A second run directory carries the
broken environment (any ``add`` call is rewarded): the same rollouts imported, the gate FAILs and Phase 2
refuses. Then GRPO through TRL's ``environment_factory`` per seed, tool calls executed, with the held-out
tool-call success (the environment's own reward on fresh rollouts of prompts never trained on) measured
before and after — reported whichever way it moves.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from finetune import atomic, jsonio, rundir
from finetune.demo import tools as demo_tools
from finetune.demo.runner import evaluate_stage, interval_facts

if TYPE_CHECKING:
    from finetune.demo.runner import Phase, Runner
    from finetune.spec import RunSpec

TOOL_STEPS = 20
HELDOUT_K = 4
TOOL_LR = 2e-4  # DEMO ONLY: a toy model does not move at 5e-7; at 1e-3 it stops calling by step 4
_QUESTION = re.compile(r"What is (\d+) plus (\d+)\?")
_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)


def spec_doc() -> dict[str, Any]:
    return {
        "name": "demo-calculator", "model": "../model",
        "dataset": {"path": "../data/train.jsonl", "prompt_column": "prompt",
                    # the pairs `finetune eval` measures before / after on: never trained on
                    "heldout": {"path": "../data/heldout.jsonl", "prompts": 20}},
        "environment": {"file": "env.py", "class": demo_tools.ENV_CLASS, "max_tool_calling_iterations": 2},
        "rewards": [{"name": "solved", "type": "environment"}],
        "hardware": {"profile": "rtx-4090-24gb", "gpus": 1, "nodes": 1},
        "generation": {"max_prompt_length": 64, "max_completion_length": 64, "temperature": 1.0},
        "training": {"num_generations": 8, "seed": 3407, "logging_steps": 1},
        "inspection": {"prompts": 16, "per_prompt": 4, "min_read": 50, "probe_prompts": 4,
                       "base_success": {"prompts": 8, "samples_per_prompt": 8, "temperature": 0.3}},
    }


def splits() -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(training pairs, held-out pairs): all 100 single-digit pairs, a fixed fifth held out."""
    import random

    pairs = [(a, b) for a in range(10) for b in range(10)]
    random.Random(7).shuffle(pairs)
    return pairs[20:], pairs[:20]


def _row(a: int, b: int) -> dict[str, Any]:
    return {"prompt": demo_tools.question(a, b), "a": a, "b": b}


def check(prompt: Any, completion: str) -> tuple[bool, str]:
    """The tool checker: accept when the trajectory called add with the prompt's two numbers (either order)."""
    text = prompt if isinstance(prompt, str) else " ".join(m.get("content", "") for m in prompt)
    asked = _QUESTION.search(text)
    if asked is None:
        return False, "no question in the prompt"
    want = sorted(int(x) for x in asked.groups())
    calls = []
    for block in _CALL.findall(completion):
        try:
            calls.append(json.loads(block))
        except ValueError:
            continue
    if not calls:
        return False, "no parseable tool call"
    for c in calls:
        args = c.get("arguments") if isinstance(c, dict) else None
        if c.get("name") == "add" and isinstance(args, dict) and sorted(
                [args.get("a"), args.get("b")], key=str) == sorted(want, key=str):
            return True, f"add called with {want[0]} and {want[1]}"
    return False, f"no add call with {want[0]} and {want[1]} ({len(calls)} call(s))"


def _tool_reading(row: dict[str, Any], item: dict[str, Any]) -> tuple[bool, bool, bool, str]:
    """The tool task's checker for demo_runner.checker_verdicts: the call read from the prompt's two numbers."""
    ok, note = check(row["prompt"], row["completion"])
    return ok, ok, "<tool_call>" in row["completion"], note


def counting_factory(factory: Callable[[], Any], counts: Counter[str]) -> Callable[[], Any]:
    """The gated ``environment_factory`` with every tool call TRL executes counted in ``counts`` (name -> calls).

    TRL looks each tool up on the instance (``getattr(env, name)``), so the count wraps the instance's bound
    methods; the wrapper keeps the method's name, docstring, signature and annotations (``functools.wraps``:
    ``inspect.signature`` and ``typing.get_type_hints`` follow ``__wrapped__``), so TRL renders the same tool
    schema and the environment's own state is untouched."""

    def make() -> Any:
        env = factory()
        for name, method in _tool_methods(env).items():
            setattr(env, name, _counted(method, name, counts))
        return env

    return make


def _tool_methods(env: Any) -> dict[str, Any]:
    """The tools TRL exposes for ``env``: public functions of its class other than reset / get_reward."""
    return {name: getattr(env, name) for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
            if not name.startswith("_") and name not in ("reset", "get_reward")}


def _counted(method: Callable[..., Any], name: str, counts: Counter[str]) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        counts[name] += 1  # counted before the call: a call that raises was still executed (TRL records a failure)
        return method(*args, **kwargs)

    return call


def train(run_dir: Path, spec: RunSpec, seed: int, output_dir: Path,
          steps: int) -> tuple[Any, list[dict[str, Any]], dict[str, int]]:
    """GRPO with the gated rewards.py's environment_factory (the rendered config + the demo CPU profile); saves the
    trained model in ``output_dir`` (where `finetune eval` reads it) and returns (trainer, profile changes, tool
    name -> calls executed), the counts also in ``output_dir/tool_calls.json``."""
    import warnings

    from datasets import load_dataset
    from trl import GRPOConfig, GRPOTrainer

    from finetune.demo.train import demo_training_kwargs
    from finetune.errors import CheckFailed
    from finetune.inspect.gate import verify_gate
    from finetune.inspect.rewardmod import load_rewards

    gate = verify_gate(run_dir, spec)
    if not gate.ok:
        raise CheckFailed(f"refusing to train: {gate.reason}")
    kwargs, changes = demo_training_kwargs(run_dir, seed, output_dir, steps)
    kwargs["learning_rate"] = TOOL_LR
    changes.append({"field": "learning_rate", "rendered": "(the profile's 3e-4)", "demo": TOOL_LR,
                    "why": "the tool task's 20-step toy run (at 1e-3 the tiny model stops calling within 4 steps)"})
    module = load_rewards(run_dir, [r.name for r in spec.rewards]).module
    assert spec.environment is not None
    kwargs["max_tool_calling_iterations"] = spec.environment.max_tool_calling_iterations
    dataset = load_dataset("json", data_files=str(spec.training_data_path()), split="train")
    counts: Counter[str] = Counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = GRPOTrainer(model=str(spec.resolve_path(spec.model)), args=GRPOConfig(**kwargs),
                              reward_funcs=list(module.REWARD_FUNCS), train_dataset=dataset,
                              environment_factory=counting_factory(module.environment_factory, counts))
        module.environment_tokenizer(trainer.processing_class)
        from transformers.trainer_callback import PrinterCallback, ProgressCallback

        for callback in (PrinterCallback, ProgressCallback):
            trainer.remove_callback(callback)
        trainer.train()
    trainer.save_model(str(output_dir))  # the trained policy (and tokenizer): what `finetune eval` reads as "after"
    trainer.save_state()
    jsonio.write_json(output_dir / "tool_calls.json", {
        "note": "tool calls executed through TRL's environment_factory during training, counted by the demo's "
                "wrapper of the gated environment's tools (finetune.demo.toolrun.counting_factory)",
        "steps": trainer.state.global_step, "executed": dict(sorted(counts.items())), "total": sum(counts.values())})
    return trainer, changes, dict(counts)


def _prepare(out: Path) -> tuple[Path, Path, list[tuple[int, int]]]:
    train_pairs, held = splits()
    jsonio.write_jsonl(out / "data" / "train.jsonl", [_row(a, b) for a, b in train_pairs])
    jsonio.write_jsonl(out / "data" / "heldout.jsonl", [_row(a, b) for a, b in held])
    good, bad = out / "pass", out / "fail"
    for d, source in ((good, demo_tools.ENV_SOURCE), (bad, demo_tools.BROKEN_ENV_SOURCE)):
        d.mkdir(parents=True, exist_ok=True)
        atomic.write_text(d / "env.py", source)
        atomic.write_text(d / rundir.SPEC, yaml.safe_dump(spec_doc(), sort_keys=False))
    return good, bad, held


def _reads(run: Runner, run_dir: Path, facts: dict[str, Any], key: str) -> None:
    from finetune.demo.runner import CHECKER_STATEMENT, CHECKER_USER, checker_verdicts
    from finetune.spec import load_spec

    holder: dict[str, Any] = {}

    def read(p: Phase) -> str:
        holder["path"], counts = checker_verdicts(run_dir, load_spec(run_dir / rundir.SPEC), _tool_reading)
        facts.setdefault("checker", {})[key] = counts
        return f"read {counts['read']} trajectories: {counts['accept']} accept, {counts['reject']} reject"

    label = f"tools {key.upper()}"
    run.step(f"{label}: the tool checker reads the review sheet", read)
    run.stage(f"{label}: record the verdicts", ["inspect", "verdict", str(run_dir), "--file", str(holder["path"])])
    run.stage(f"{label}: confirmation (the demo's own, no person)",
              ["inspect", "confirm", str(run_dir), "--user", CHECKER_USER, "--statement", CHECKER_STATEMENT, "--yes"])


def run_tool_phases(run: Runner, out: Path, seeds: tuple[int, ...], steps: int = TOOL_STEPS) -> dict[str, Any]:
    """Every stage of the tool task into ``out`` (its own pass/ and fail/ run directories); returns the facts."""
    from finetune.spec import load_spec

    facts: dict[str, Any] = {}
    good, bad, held = _prepare(out)

    def make_model(p: Phase) -> str:
        recipe = demo_tools.ToolWarmup()
        losses: list[float] = []
        demo_tools.warm_up(demo_tools.build_base(out / "model", recipe), recipe, lambda i, loss: losses.append(loss))
        facts["model"] = {"recipe": {k: getattr(recipe, k) for k in recipe.__dataclass_fields__},
                          "loss_first": losses[0], "loss_last": losses[-1]}
        return f"tool-calling tiny Qwen3, {recipe.steps} noisy warm-up steps, loss {losses[0]:.2f} → {losses[-1]:.2f}"

    run.step("tools: build the calculator model and warm it up (noisy SFT on trajectories)", make_model)
    spec_path = good / rundir.SPEC
    run.stage("tools PASS: render rewards (env.py bound)", ["rewards", "render", str(spec_path)])
    run.stage("tools PASS: sample whole rollouts (tool calls executed)", ["inspect", "sample", str(spec_path)])
    samples = [row for _, row in jsonio.read_jsonl(good / rundir.SAMPLES)]
    facts["sampled"] = {"rollouts": len(samples), "with_tool_calls": sum(
        any(m.get("tool_calls") for m in s.get("trajectory") or []) for s in samples),
        "checker_accept": sum(check(s["prompt"], s["completion"])[0] for s in samples) / len(samples)}
    run.stage("tools PASS: score", ["inspect", "score", str(good)])
    run.stage("tools PASS: review sheet", ["inspect", "review", str(good), "--format", "md"])
    _reads(run, good, facts, "pass")
    run.stage("tools PASS: gate", ["inspect", "gate", str(good)])
    facts["gate_pass"] = jsonio.read_json(good / rundir.GATE)["status"]

    bad_spec = bad / rundir.SPEC
    run.stage("tools FAIL: render rewards (broken env.py)", ["rewards", "render", str(bad_spec)])
    run.stage("tools FAIL: import the same rollouts", ["inspect", "sample", str(bad_spec), "--import",
                                                       str(good / rundir.SAMPLES), "--import-base",
                                                       str(good / rundir.BASE_SAMPLES)])
    run.stage("tools FAIL: score", ["inspect", "score", str(bad)])
    run.stage("tools FAIL: review sheet", ["inspect", "review", str(bad), "--format", "md"])
    _reads(run, bad, facts, "fail")
    gate = run.stage("tools FAIL: gate", ["inspect", "gate", str(bad)], expect=1)
    fail = jsonio.read_json(bad / rundir.GATE)
    facts["gate_fail"] = {"status": fail["status"], "reasons": [r.split(":")[0] for r in fail["reasons"]]}
    gate.detail = "FAIL — " + "; ".join(facts["gate_fail"]["reasons"])
    run.stage("tools FAIL: Phase 2 refuses", ["config", "render", str(bad_spec)], expect=1)

    run.stage("tools PASS: render the validated config", ["config", "render", str(spec_path)])
    _train_seeds(run, good, load_spec(spec_path), held, seeds, steps, facts)
    jsonio.write_json(out / "tools.json", facts)
    return facts


def _train_seeds(run: Runner, good: Path, spec: RunSpec, held: list[tuple[int, int]], seeds: tuple[int, ...],
                 steps: int, facts: dict[str, Any]) -> None:
    runs: list[dict[str, Any]] = []
    for n, seed in enumerate(seeds):
        target = good / (rundir.TRAIN_DIR if n == 0 else f"{rundir.TRAIN_DIR}_seed{seed}")
        record: dict[str, Any] = {"seed": seed, "output_dir": str(target.relative_to(good))}

        def train_one(p: Phase, seed: int = seed, target: Path = target, record: dict[str, Any] = record) -> str:
            trainer, changes, executed_calls = train(good, spec, seed, target, steps)
            log = [e for e in trainer.state.log_history if "tools/call_frequency" in e]
            executed = sum(e["tools/call_frequency"] for e in log)
            record.update({"steps": len(log), "tool_call_frequency_sum": executed,
                           "tool_calls_executed": sum(executed_calls.values()),
                           "reward_first": log[0].get("reward") if log else None,
                           "reward_last": log[-1].get("reward") if log else None, "profile_changes": changes})
            return (f"{len(log)} GRPO steps, {sum(executed_calls.values())} tool calls executed (call frequency "
                    f"{executed / max(1, len(log)):.2f} per rollout)")

        run.step(f"tools: GRPO with environment_factory, seed {seed}", train_one)
        doc, sides = evaluate_stage(run, good, target, seed, HELDOUT_K, "tools")
        before, after = (heldout_from_eval(sides[side], spec.rewards[0].name) for side in ("before", "after"))
        record.update({"before": before, "after": after, "direction": direction(before, after),
                       "eval": interval_facts(doc, ("accept", spec.rewards[0].name))})
        detail = (f"held-out tool-call success {before['success']:.0%} → {after['success']:.0%} "
                  f"({direction(before, after)} on this machine)")
        run.result.phases[-1].detail = detail  # the eval stage printed before it was measured: say it now
        run.console.print(f"{'':>17}  seed {seed}: {detail}", highlight=False, soft_wrap=True)
        runs.append(record)
    facts["heldout"] = {"prompts": len(held), "k": HELDOUT_K, "runs": runs}


def heldout_from_eval(samples: list[dict[str, Any]], reward: str) -> dict[str, Any]:
    """One side of `finetune eval`'s rollouts as the tool demo reports them: the environment's reward, the tool
    calls made per rollout and the prompts asked (in the held-out split's order)."""
    calls = [sum(len(m.get("tool_calls") or []) for m in s.get("trajectory") or [] if m.get("role") == "assistant")
             for s in samples]
    prompts = list(dict.fromkeys(s["prompt"][0]["content"] for s in samples))
    scores = [float(s["scores"].get(reward) or 0.0) for s in samples]
    return {"success": sum(scores) / len(scores), "calls_per_rollout": sum(calls) / len(calls),
            "rollouts": float(len(samples)), "prompts": prompts}


def direction(before: dict[str, Any], after: dict[str, Any]) -> str:
    """Which way held-out success moved: ``rose``, ``fell`` or ``did not move``."""
    return ("rose" if after["success"] > before["success"] else
            "fell" if after["success"] < before["success"] else "did not move")


def outcome(runs: list[dict[str, Any]]) -> str:
    """What this machine measured, whichever way it came out (the effect is claimed by a benchmark's seeds).

    >>> outcome([{"direction": "rose"}, {"direction": "fell"}])
    'On this machine held-out tool-call success rose on 1 of 2 seeds (fell on 1, did not move on 0).'
    """
    n = {d: sum(r["direction"] == d for r in runs) for d in ("rose", "fell", "did not move")}
    return (f"On this machine held-out tool-call success rose on {n['rose']} of {len(runs)} "
            f"seed{'s' if len(runs) != 1 else ''} (fell on {n['fell']}, did not move on {n['did not move']}).")


def _report(result: Any) -> str:
    f = result.facts
    lines = ["# finetune demo --tools — the calculator tool task", "",
             f"Wall time: {f.get('wall_seconds', '?')} s. Reader: {result.reader} (no person read these "
             "trajectories; a real run needs the user's reading or confirmation).", "",
             "| phase | status | seconds | detail |", "|---|---|---|---|"]
    lines += [f"| {p.name} | {p.status} | {p.seconds:.1f} | {(p.detail or p.command or '').replace('|', '/')} |"
              for p in result.phases]
    held = f.get("heldout", {})
    if held.get("runs"):
        lines += ["", f"Held-out tool-call success ({held['prompts']} prompts never trained on × {held['k']} "
                      "rollouts, the environment's own reward, the same prompts before and after):", "",
                  "| seed | before | after | direction | GRPO steps | tool calls executed in training |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {r['seed']} | {r['before']['success']:.0%} | {r['after']['success']:.0%} | {r['direction']} "
                  f"| {r['steps']} | {r['tool_calls_executed']} |" for r in held["runs"]]
        lines += ["", outcome(held["runs"]) + " A few seeds on one machine show a direction, not an effect: "
                  "floating point (CPU kernels, threads) moves each run; benchmarks/bench_tooldemo.py measures the "
                  "effect over seeds with a sign test."]
    if "stopped_at" in f:
        lines += ["", f"Stopped at '{f['stopped_at']['phase']}': {f['stopped_at']['detail']}"]
    return "\n".join(lines) + "\n"


def run_tool_demo(out: str | Path, *, seeds: tuple[int, ...], steps: int = TOOL_STEPS,
                  console: Any = None) -> Any:
    """`finetune demo --tools`: the tool task into ``out`` with its report (report.md, tools.json)."""
    import sys
    import time

    import torch
    from rich.console import Console

    from finetune.demo.checker import READER_LABEL
    from finetune.demo.runner import DemoResult, Runner, Stop, prepare_out, quiet_libraries

    console = console or Console(highlight=False, file=sys.stdout)
    out = Path(out).resolve()
    prepare_out(out)
    result = DemoResult(out=out, reader=READER_LABEL)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    console.rule("finetune demo --tools — the calculator tool task on CPU")
    try:
        with quiet_libraries():
            result.facts.update(run_tool_phases(Runner(result, console), out, seeds, steps))
    except Stop as stop:
        result.facts["stopped_at"] = {"phase": stop.phase.name, "detail": stop.phase.detail}
    finally:
        torch.set_num_threads(threads)
        result.facts["wall_seconds"] = round(time.perf_counter() - result.started, 1)
        atomic.write_text(out / "report.md", _report(result))
        jsonio.write_json(out / "demo.json", {"reader": result.reader, "facts": result.facts,
                                              "phases": [dataclasses.asdict(p) for p in result.phases]})
    console.print(f"report: {out / 'report.md'} ({result.facts['wall_seconds']} s)")
    return result
