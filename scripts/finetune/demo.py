"""`finetune demo [-o DIR]`: every phase of /finetune on the embedded toy task, on CPU, in minutes.

The demo calls the product's own stages (in-process, through :func:`finetune.cli.main`) on a task
that needs no download — copy three digits into ``<answer>...</answer>`` — and a tiny model built
and warmed up locally (:mod:`finetune.demo_task`):

route → render rewards → sample → score (red flags, hack probes, base success) → review → verdicts →
gate PASS → memory fit + config render → a short GRPO run per seed, held-out reward measured before
and after → diagnose (with the PNG) → report.md + report.html linking every artefact. A second run
directory shows a FAIL: a deliberately broken reward (substring match) caught by the gate, after
which Phase 2 refuses to render.

Who reads the samples (gate-record contract): on a terminal the user reads them (terminal review) unless they
hand the reading to the checker when asked; otherwise the demo's independent checker
(:mod:`finetune.demo_checker`) reads them, recorded as reader
``agent`` with every note saying "independent checker (demo), not a person", and the demo records
the confirmation itself under the name ``finetune demo (no person)``. The gate therefore PASSes on
a reading no person made; every output says so, and a real run needs the user's confirmation.

lr/beta (base-recipe contract): the rendered config is the base recipe for the target GPU (lr 5e-7,
beta 0.01) and stays so. The toy run on this CPU uses that config with the fields of
:data:`DEMO_CPU_PROFILE` replaced — hardware fields, a larger learning rate, a step budget and
logging — stated field by field in config/BRIEF.md (a section the demo adds, marked as such), in
``train/demo_profile.json`` and in the report. The profile lives only here: `finetune config
render` never writes it, and a user's run cannot get it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from finetune import atomic, jsonio, literals, rundir
from finetune.errors import CheckFailed, UserError

if TYPE_CHECKING:
    from rich.console import Console
    from transformers import TrainerControl, TrainerState, TrainingArguments
    from trl import GRPOTrainer

    from finetune.spec import RunSpec

DATA = Path(__file__).parent / "data" / "demo"
MARKER = "DEMO_RUN.json"
CHECKER_USER = "finetune demo (no person)"
CHECKER_STATEMENT = (
    "DEMO ONLY: no person read or confirmed these samples. The reader was the demo's independent checker "
    "(finetune/demo_checker.py: it reads the digits from the prompt, not from the reward code), recorded as "
    "reader 'agent'; `finetune demo` records this confirmation itself so the gate can be shown end to end. "
    "A real run needs the user's own reading or confirmation.")
DEFAULT_SEEDS = (3407, 3408)
DEMO_STEPS = 40
HELDOUT_PROMPTS = 64
HELDOUT_K = 8
# the difficulty filter on the toy dataset: every training prompt (800 × 8 samples, seconds on this CPU), so the
# filtered run never repeats a prompt within its steps; k = the spec's num_generations (8), the filter's default
FILTER_K = 8
EARLY_STEPS = 5  # frac_reward_zero_std of the first steps: the policy the filter sampled, before GRPO moves it

# The toy run's departures from the rendered base recipe: field -> (value, why). Everything else —
# every algorithm-defining field (loss_type, beta, epsilon, scale_rewards, num_generations,
# temperature, max_completion_length, ...) and the batch arithmetic — comes from config/grpo_config.yaml.
DEMO_CPU_PROFILE: dict[str, tuple[Any, str]] = {
    "use_cpu": (True, "the demo trains on this machine's CPU, not the target GPU"),
    "bf16": (False, "no bf16 on CPU"),
    "use_vllm": (False, "no vLLM on CPU: TRL generates with transformers"),
    "model_init_kwargs": ({"dtype": "float32"}, "fp32 weights on CPU"),
    "learning_rate": (3e-4, "DEMO ONLY, outside the base-recipe contract: at 5e-7 a 2-layer toy model does "
                            "not move in 40 steps (at 1e-3 it learns the whole task in 20, and every group turns "
                            "all-correct); a real run keeps 5e-7 until a PASS gate and a healthy diagnosis of "
                            "its base run"),
    "lr_scheduler_type": ("constant", "a 40-step run has no room for a warm-up"),
    "warmup_steps": (0, "see lr_scheduler_type"),
    "max_steps": (DEMO_STEPS, "a demo-sized budget (the rendered config runs whole epochs)"),
    "save_strategy": ("no", "no checkpoints; the demo saves the final model and trainer_state.json itself"),
    "log_completions": (False, "keeps the demo's console readable"),
    "disable_tqdm": (True, "the demo draws its own progress bar"),
}


@dataclass
class Phase:
    """One step of the demo as it happened."""

    name: str
    status: str = "pending"  # ok | failed (expected) | unavailable | error
    seconds: float = 0.0
    detail: str = ""
    log: str | None = None
    command: str | None = None
    exit_code: int | None = None


@dataclass
class DemoResult:
    """Everything the report shows; also written to DIR/demo.json."""

    out: Path
    reader: str
    phases: list[Phase] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)


# ----------------------------------------------------------------------------------------------
# running the product's stages


class _Runner:
    """Runs the phases in order, records each one, and stops at the first that cannot go on."""

    def __init__(self, result: DemoResult, console: Console) -> None:
        self.result, self.console = result, console
        self.logs = result.out / "logs"

    def _announce(self, p: Phase) -> None:
        colour = {"ok": "green", "failed (expected)": "yellow", "unavailable": "magenta",
                  "error": "red"}.get(p.status, "white")
        self.console.print(f"[{colour}]{p.status:>17}[/{colour}]  {p.name} ({p.seconds:.1f} s)"
                           + (f" — {p.detail}" if p.detail else ""), highlight=False)

    def _shown(self, arg: str) -> str:
        """An argument as the report shows it: paths relative to the demo folder, long texts elided."""
        arg = str(arg).replace(str(self.result.out) + os.sep, "")
        return _shell_quote(arg if len(arg) <= 80 else arg[:60] + "…")

    def stage(self, name: str, argv: list[str], *, expect: int = 0, interactive: bool = False) -> Phase:
        """Run ``finetune <argv>`` in-process; its output goes to logs/NN-name.log (the terminal when interactive)."""
        from finetune.cli import GROUPS, main

        p = Phase(name, command="finetune " + " ".join(self._shown(a) for a in argv))
        self.result.phases.append(p)
        module = GROUPS.get(argv[0], ("?",))[0]
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
        log = self.logs / f"{len(self.result.phases):02d}-{slug}.log"
        p.log = str(log.relative_to(self.result.out))
        started = time.perf_counter()
        buf = io.StringIO()
        try:
            if interactive:
                code = main(argv)
            else:
                with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
                    code = main(argv)
        except ImportError as exc:  # a stage whose module has not landed: say so, never pretend
            p.status, p.detail = "unavailable", f"{module} cannot be imported ({exc})"
            code = None
        p.seconds = time.perf_counter() - started
        p.exit_code = code
        atomic.write_text(log, f"$ {p.command}\n{buf.getvalue()}" + (f"\n(exit {code})\n" if code is not None else ""))
        if code is not None:
            if code == expect:
                p.status = "ok" if expect == 0 else "failed (expected)"
                if expect:
                    said = [ln.strip() for ln in buf.getvalue().splitlines() if ln.strip()]
                    p.detail = (said[-1] if said else "").replace(str(self.result.out) + os.sep, "")
            else:
                p.status = "error"
                tail = [ln for ln in buf.getvalue().splitlines() if ln.strip()][-3:]
                p.detail = f"exit {code}, expected {expect}: " + " | ".join(tail)
        self._announce(p)
        if p.status in ("error", "unavailable"):
            raise _Stop(p)
        return p

    def step(self, name: str, fn: Callable[[Phase], str | None]) -> Phase:
        """Run a demo-internal step (no CLI stage): fn returns a detail line."""
        p = Phase(name)
        self.result.phases.append(p)
        started = time.perf_counter()
        try:
            p.detail = fn(p) or ""
            p.status = "ok"
        except ImportError as exc:
            p.status, p.detail = "unavailable", f"cannot be imported ({exc})"
        except (CheckFailed, UserError) as exc:  # e.g. training refused because the gate no longer holds
            p.status, p.detail = "error", str(exc)
        p.seconds = time.perf_counter() - started
        self._announce(p)
        if p.status != "ok":
            raise _Stop(p)
        return p


class _Stop(Exception):
    def __init__(self, phase: Phase):
        super().__init__(phase.name)
        self.phase = phase


@contextlib.contextmanager
def _quiet_libraries() -> Iterator[None]:
    """Silence transformers / hub progress bars and warnings while the demo draws its own."""
    import warnings

    import datasets
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
    from transformers.utils import logging as hf_logging

    hub_was_disabled = are_progress_bars_disabled()
    datasets_were_enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    verbosity = hf_logging.get_verbosity()
    disable_progress_bars()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        hf_logging.set_verbosity(verbosity)
        hf_logging.enable_progress_bar()
        if datasets_were_enabled:
            datasets.enable_progress_bars()
        if not hub_was_disabled:
            enable_progress_bars()


def _shell_quote(arg: str) -> str:
    import shlex

    return shlex.quote(str(arg))


# ----------------------------------------------------------------------------------------------
# the reader: the independent checker (non-interactive) or the user (terminal review)


# what a checker makes of one scored row and its review item: (accept, correct, well_formed, note)
CheckerReading = Callable[[dict[str, Any], dict[str, Any]], tuple[bool, bool, bool, str]]


def _digits_reading(row: dict[str, Any], item: dict[str, Any]) -> tuple[bool, bool, bool, str]:
    from finetune import demo_checker

    c = demo_checker.check(row["prompt"], row["completion"], item["gold"])
    return c.accept, c.correct, c.well_formed, c.note


def checker_verdicts(run_dir: Path, spec: RunSpec,
                     read: CheckerReading = _digits_reading) -> tuple[Path, dict[str, int]]:
    """The checker reads the review selection; returns (verdicts JSONL for `inspect verdict --file`, counts).
    ``read`` is the task's checker (the digits task's by default; the tool task passes its own)."""
    from finetune import demo_checker
    from finetune.inspect import review

    items, _ = review.review_items(run_dir, spec)
    scored = {row["id"]: row for _, row in jsonio.read_jsonl(run_dir / rundir.SCORED)}
    rows, counts = [], {"read": 0, "accept": 0, "reject": 0}
    for it in items:
        accept, correct, well_formed, note = read(scored[it["id"]], it)
        rows.append({"id": it["id"], "accept": accept, "correct": correct, "well_formed": well_formed,
                     "note": f"[{demo_checker.READER_LABEL}] {note}", "reader": "agent"})
        counts["read"] += 1
        counts["accept" if accept else "reject"] += 1
    path = jsonio.write_jsonl(run_dir / "checker_verdicts.jsonl", rows)
    return path, counts


# ----------------------------------------------------------------------------------------------
# the toy GRPO run: the rendered config + DEMO_CPU_PROFILE, after the gate still holds


def demo_training_kwargs(run_dir: Path, seed: int, output_dir: Path,
                         steps: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(GRPOConfig kwargs, the profile's changes as rows) from config/grpo_config.yaml + DEMO_CPU_PROFILE."""
    import yaml
    from trl import GRPOConfig

    rendered = yaml.safe_load((run_dir / rundir.CONFIG_DIR / "grpo_config.yaml").read_text(encoding="utf-8"))
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    kwargs = {k: v for k, v in rendered.items() if k in fields}
    changes = []
    profile = dict(DEMO_CPU_PROFILE)
    profile["max_steps"] = (steps, profile["max_steps"][1])
    if seed != rendered.get("seed"):
        profile["seed"] = (seed, "the second seed of the before/after measurement")
    profile["output_dir"] = (str(output_dir), "this seed's folder in the run directory")
    for key, (value, why) in profile.items():
        if key not in fields:
            continue
        if kwargs.get(key, "(TRL default)") != value:
            changes.append({"field": key, "rendered": kwargs.get(key, "(not rendered)"), "demo": value, "why": why})
        kwargs[key] = value
    kwargs["report_to"] = "none"
    return kwargs, changes


def train_toy(run_dir: Path, spec: RunSpec, seed: int, output_dir: Path, steps: int,
              on_step: Callable[[int, int], None], *,
              unfiltered: bool = False) -> tuple[GRPOTrainer, list[dict[str, Any]]]:
    """Verify the gate, then train with TRL's GRPOTrainer on CPU; returns (trainer, profile changes).

    ``unfiltered``: train on dataset.path instead of the difficulty-filtered file — the demo's baseline for
    what the filter changed (same gated rewards, same seed); a real run trains on what the gate binds."""
    from datasets import load_dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from finetune.inspect.gate import verify_gate
    from finetune.inspect.rewardmod import load_rewards

    check = verify_gate(run_dir, spec)  # the rendered train.py refuses the same way
    if not check.ok:
        raise CheckFailed(f"refusing to train: {check.reason}")
    kwargs, changes = demo_training_kwargs(run_dir, seed, output_dir, steps)
    rewards = load_rewards(run_dir, [r.name for r in spec.rewards])
    reward_funcs, inspector = inspection_wiring(spec, rewards.module, kwargs)
    data = spec.resolve_path(spec.dataset.path) if unfiltered else spec.training_data_path()
    dataset = load_dataset("json", data_files=str(data), split="train")

    class _Progress(TrainerCallback):
        def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                        **kw: Any) -> None:
            on_step(state.global_step, state.max_steps)

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = GRPOTrainer(model=str(spec.resolve_path(spec.model)), args=GRPOConfig(**kwargs),
                              reward_funcs=reward_funcs, train_dataset=dataset, callbacks=[_Progress(), inspector])
        inspector.attach(trainer)  # its inspection/* metrics go into the trainer's log, as in train.py
        from transformers.trainer_callback import PrinterCallback, ProgressCallback

        for callback in (PrinterCallback, ProgressCallback):  # the demo draws its own progress bar
            trainer.remove_callback(callback)
        trainer.train()
    trainer.save_model(str(output_dir))
    trainer.save_state()
    jsonio.write_json(output_dir / "demo_profile.json", {
        "note": "DEMO CPU PROFILE — the toy run's departures from config/grpo_config.yaml "
                "(finetune.demo.DEMO_CPU_PROFILE)",
        "dataset": str(data), "changes": changes})
    return trainer, changes


def inspection_wiring(spec: RunSpec, module: Any, kwargs: dict[str, Any]) -> tuple[list[Any], Any]:
    """The gated rewards wrapped and the inspection callback, as config/train.py wires them: `watch.instrument`
    with the values `config render` put in train.py (`config.inspection_settings`) and the run's
    max_completion_length. The wrappers return the rewards' own scores and draw no random numbers."""
    from finetune import config, watch

    settings = config.inspection_settings(spec)
    return watch.instrument(list(module.REWARD_FUNCS), meta=module.REWARD_META, weights=module.REWARD_WEIGHTS,
                            every_steps=int(settings["every_steps"].value),
                            sample_rows=int(settings["sample_rows"].value),
                            max_completion_length=kwargs.get("max_completion_length"))


def inspection_record(output_dir: Path, base: Path) -> dict[str, Any]:
    """What the inspection callback left in a toy run's folder: each inspection (inspections/index.jsonl),
    the stop rules and live red flags it fired, and a stop (STOPPED.json: the rule, step, reward and why).
    Paths are relative to ``base``."""
    from finetune import watch

    folder = output_dir / watch.INSPECTIONS
    index = [row for _, row in jsonio.read_jsonl(folder / "index.jsonl")] if (folder / "index.jsonl").is_file() \
        else []
    stop = None
    if (output_dir / watch.STOPPED).is_file():
        doc = jsonio.read_json(output_dir / watch.STOPPED)
        doc = doc if isinstance(doc, dict) else {}
        stop = {k: doc.get(k) for k in ("rule", "step", "reward", "message")}
    rel = str(folder.relative_to(base))
    return {"dir": rel, "inspections": len(index), "steps": [row.get("step") for row in index],
            "files": [{"step": row.get("step"), "path": f"{rel}/{row['file']}"} for row in index if row.get("file")],
            "rules_fired": sorted({r.get("rule") for row in index for r in row.get("stop") or []}),
            "flags": _flag_steps(index),
            "stopped": stop}


def _brief_addendum(changes: list[dict[str, Any]]) -> str:
    lines = ["", "", "## Demo CPU profile (added by `finetune demo` — NOT rendered, NOT for a real run)", "",
             "Everything above is the rendered base recipe for the target GPU and is what a real run uses. The "
             "demo's toy run on this CPU replaced only these fields (`finetune.demo.DEMO_CPU_PROFILE`); every "
             "algorithm-defining field and the batch arithmetic are as rendered. The learning rate departs from "
             "the base-recipe contract for the demo only: a real run keeps 5e-7 until a PASS gate and a healthy "
             "diagnosis of its base run.", "", "| field | rendered | demo | why |", "|---|---|---|---|"]
    for c in changes:
        if c["field"] in ("output_dir", "seed"):
            continue
        lines.append(f"| `{c['field']}` | `{c['rendered']}` | `{c['demo']}` | {c['why']} |")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------
# the demo


def _prepare_out(out: Path) -> None:
    """Refuse a folder the demo did not make (never lose a user's files); clear an earlier demo's."""
    if out.exists() and not out.is_dir():
        raise UserError(f"{out} is a file", where="-o", fix="name a folder for the demo")
    if out.is_dir() and any(out.iterdir()):
        if not (out / MARKER).is_file():
            raise UserError(f"{out} is not empty and was not made by `finetune demo`", where="-o",
                            fix="name a new or empty folder (the demo never overwrites other files)")
        for child in out.iterdir():
            shutil.rmtree(child) if child.is_dir() else child.unlink()
    out.mkdir(parents=True, exist_ok=True)
    jsonio.write_json(out / MARKER, {"made_by": "finetune demo",
                                     "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})


def run_demo(out: str | Path, *, reader: str = "auto", seeds: tuple[int, ...] = DEFAULT_SEEDS,
             steps: int = DEMO_STEPS, console: Console | None = None, filter_k: int | None = FILTER_K) -> DemoResult:
    """Run every phase into ``out``; return what happened (the report is written either way).

    ``filter_k=None`` skips the difficulty filter (benchmarks/bench_filter.py trains both ways itself)."""
    import torch
    from rich.console import Console

    # bound to the real stdout now: stage output is redirected into logs/, the progress bars are not
    console = console or Console(highlight=False, file=sys.stdout)
    out = Path(out).resolve()
    _prepare_out(out)
    interactive = reader == "terminal"
    if reader == "auto" and sys.stdin.isatty() and sys.stdout.isatty():
        from rich.prompt import Prompt

        # the rule: on a terminal the user reads; the user may hand it to the checker instead
        interactive = Prompt.ask("Phase 1 needs 50-100 samples read. Who reads them: you (terminal review, a few "
                                 "minutes) or the demo's independent checker (not a person)?",
                                 choices=["you", "checker"], default="you", console=console) == "you"
    from finetune.demo_checker import READER_LABEL

    result = DemoResult(out=out, reader="user (terminal review)" if interactive else f"{READER_LABEL}")
    run = _Runner(result, console)
    threads = torch.get_num_threads()
    # a tiny model gains nothing from a second thread, and on a shared box two threads thrash
    torch.set_num_threads(1)
    console.rule("finetune demo — the embedded toy task, every phase on CPU")
    console.print(f"output: {out}\nreader: {result.reader}", highlight=False)
    try:
        with _quiet_libraries():
            _phases(run, result, out, interactive, seeds, steps, console, filter_k)
    except _Stop as stop:
        result.facts["stopped_at"] = {"phase": stop.phase.name, "status": stop.phase.status,
                                      "detail": stop.phase.detail}
        console.print(f"[red]stopped:[/red] phase '{stop.phase.name}' is {stop.phase.status}: {stop.phase.detail}")
    finally:
        torch.set_num_threads(threads)
        result.facts["wall_seconds"] = round(time.perf_counter() - result.started, 1)
        write_report(result)
    console.print(f"report: {out / 'report.md'} and {out / 'report.html'} ({result.facts['wall_seconds']} s)")
    return result


def _bar(console: Any) -> Any:
    """A transient progress bar on the demo's console (stage output goes to logs/)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=True)


def _phases(run: _Runner, result: DemoResult, out: Path, interactive: bool, seeds: tuple[int, ...], steps: int,
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


def _task_and_model(run: _Runner, out: Path, run_dirs: tuple[Path, Path], facts: dict[str, Any],
                    console: Any) -> list[str]:
    """What a user brings: a dataset and an SFT checkpoint. Returns the held-out digit strings."""
    from finetune import demo_task

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
        with _bar(console) as b:
            t = b.add_task("warm-up of the tiny model", total=recipe.steps)
            demo_task.build_demo_model(out / "model", train_strings, recipe, lambda i, n: b.update(t, completed=i))
        info = jsonio.read_json(out / "model" / "DEMO_MODEL.json")
        facts["model"] = info
        return (f"2-layer Qwen3 (hidden {recipe.hidden}), {recipe.steps} noisy warm-up steps, loss "
                f"{info['loss_first']:.2f} → {info['loss_last']:.2f}")

    run.step("model: build the tiny model and warm it up (noisy SFT)", make_model)
    return held_strings


def _phase1(run: _Runner, good: Path, facts: dict[str, Any], interactive: bool, console: Any) -> Any:
    """Phase 0 and Phase 1 on the good reward, up to its gate (a FAIL there stops the demo). Returns the spec."""
    from finetune.spec import load_spec

    run.stage("Phase 0: route", ["route", "--verifiable", "yes", "--signal-kind", "exact_match",
                                 "--demonstrations", "no", "--preference-pairs", "no", "--human-judged", "no",
                                 "--base-success", "sometimes", "-o", str(good)])
    spec_path = good / rundir.SPEC
    run.stage("Phase 1: render rewards", ["rewards", "render", str(spec_path)])
    with _bar(console) as b:
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


def _difficulty_filter(run: _Runner, good: Path, facts: dict[str, Any], filter_k: int) -> Any:
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


def _fail_demo(run: _Runner, good: Path, bad: Path, facts: dict[str, Any], console: Any) -> None:
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


def _phase3(run: _Runner, good: Path, spec: Any, held_strings: list[str], seeds: tuple[int, ...], steps: int,
            facts: dict[str, Any], console: Any) -> None:
    """The toy GRPO run, per seed, with the held-out reward before and after; BRIEF.md gains the CPU profile."""
    from finetune import demo_task
    from finetune.config import inspection_settings
    from finetune.inspect.rewardmod import load_rewards

    rewards = load_rewards(good, [r.name for r in spec.rewards])
    every = inspection_settings(spec)["every_steps"]
    facts["inspection_every"] = {"value": every.value, "reason": every.reason}
    held = held_strings[:HELDOUT_PROMPTS]
    prompts = [demo_task.digits_prompt(s) for s in held]
    model_dir = spec.resolve_path(spec.model)
    g = spec.generation
    runs: list[dict[str, Any]] = []

    def heldout(model: Any, seed: int) -> Any:
        return demo_task.score_heldout(demo_task.sample_completions(
            model, model_dir, prompts, HELDOUT_K, g.temperature, g.max_completion_length, seed),
            held, rewards, g.temperature, seed)

    for n, seed in enumerate(seeds):
        target = good / (rundir.TRAIN_DIR if n == 0 else f"{rundir.TRAIN_DIR}_seed{seed}")

        def train_one(p: Phase, seed: int = seed, target: Path = target) -> str:
            before = heldout(model_dir, seed)
            with _bar(console) as b:
                t = b.add_task(f"GRPO seed {seed}", total=steps)
                trainer, changes = train_toy(good, spec, seed, target, steps,
                                             lambda i, total: b.update(t, completed=i, total=total))
            after = heldout(trainer.model, seed)
            run: dict[str, Any] = {"seed": seed, "output_dir": str(target.relative_to(good)),
                   "before": dataclasses.asdict(before), "after": dataclasses.asdict(after),
                   "measured_zero_std": measured_zero_std(target),
                   "measured_zero_std_early": measured_zero_std(target, EARLY_STEPS),
                   "inspection": inspection_record(target, good)}
            if spec.dataset.filter is not None:
                run.update(_unfiltered_baseline(good, spec, seed, steps, console, target))
            runs.append(run)
            facts["profile_changes"] = changes
            p.command = f"GRPOTrainer (TRL) with config/grpo_config.yaml + DEMO_CPU_PROFILE, seed {seed}"
            detail = (f"held-out reward {before.reward:.3f} → {after.reward:.3f}; checker accepts "
                      f"{before.checker_accept:.0%} → {after.checker_accept:.0%}")
            if "unfiltered_zero_std" in run:
                detail += (f"; frac_reward_zero_std {run['measured_zero_std']:.3f} filtered vs "
                           f"{run['unfiltered_zero_std']:.3f} unfiltered")
            return detail + _stop_words(run.get("inspection"), "") + _stop_words(run.get("unfiltered_inspection"),
                                                                                 " unfiltered")

        run.step(f"Phase 3: toy GRPO run, seed {seed} (held-out before/after)", train_one)
    facts["heldout"] = {"prompts": len(held), "k": HELDOUT_K, "temperature": g.temperature, "runs": runs}
    jsonio.write_json(good / "heldout.json", facts["heldout"])
    brief = good / rundir.CONFIG_DIR / "BRIEF.md"
    atomic.write_text(brief, brief.read_text() + _brief_addendum(facts.get("profile_changes", [])))


def _unfiltered_baseline(good: Path, spec: Any, seed: int, steps: int, console: Any,
                         filtered_dir: Path) -> dict[str, Any]:
    """The same seed on the unfiltered dataset: TRL's frac_reward_zero_std without the filter."""
    target = good / f"{rundir.TRAIN_DIR}_unfiltered_seed{seed}"
    with _bar(console) as b:
        t = b.add_task(f"GRPO seed {seed}, unfiltered baseline", total=steps)
        train_toy(good, spec, seed, target, steps, lambda i, total: b.update(t, completed=i, total=total),
                  unfiltered=True)
    return {"unfiltered_output_dir": str(target.relative_to(good)), "unfiltered_zero_std": measured_zero_std(target),
            "unfiltered_zero_std_early": measured_zero_std(target, EARLY_STEPS),
            "unfiltered_inspection": inspection_record(target, good),
            "reward_gain": _reward_gain(filtered_dir),
            "unfiltered_reward_gain": _reward_gain(target)}


def _flag_steps(index: list[dict[str, Any]]) -> dict[str, list[int]]:
    """Each live red flag an inspection raised -> the steps of the inspections that raised it."""
    out: dict[str, list[int]] = {}
    for row in index:
        for flag in row.get("flags") or []:
            out.setdefault(str(flag.get("id")), []).append(int(row["step"]))
    return dict(sorted(out.items()))


def _stop_words(record: dict[str, Any] | None, which: str) -> str:
    """A stop by the inspection callback, in the phase's detail line (not an error of the demo: the report says why)."""
    stop = (record or {}).get("stopped")
    if not stop:
        return ""
    return f"; the{which} run was stopped at step {stop.get('step')} by the inspection callback ({stop.get('rule')})"


def _reward_gain(output_dir: Path, window: int = 10) -> float | None:
    """TRL's logged `reward`, mean of the last ``window`` steps minus the first ``window``."""
    state = jsonio.read_json(output_dir / "trainer_state.json")
    values = [float(e["reward"]) for e in state.get("log_history", []) if "reward" in e]
    if len(values) < 2 * window:
        return None
    return sum(values[-window:]) / window - sum(values[:window]) / window


def _phase4(run: _Runner, good: Path, facts: dict[str, Any]) -> None:
    """Diagnose the toy run's logs."""
    run.stage("Phase 4: diagnose", ["diagnose", str(good)])
    diag = good / rundir.DIAGNOSIS
    if diag.is_file():
        d = jsonio.read_json(diag)
        facts["diagnosis"] = {"verdict": d.get("verdict"), "symptoms": [s.get("name") for s in d.get("symptoms", [])],
                              "recommended_variant": d.get("recommended_variant")}


def measured_zero_std(output_dir: Path, first: int | None = None) -> float | None:
    """TRL's logged frac_reward_zero_std of a run, averaged over its logged steps or the ``first`` of them
    (None if never logged)."""
    state = jsonio.read_json(output_dir / "trainer_state.json")
    values = [e["frac_reward_zero_std"] for e in state.get("log_history", []) if "frac_reward_zero_std" in e]
    values = values[:first] if first is not None else values
    return sum(values) / len(values) if values else None


def _checker_reads(run: _Runner, run_dir: Path, spec: RunSpec, facts: dict[str, Any], key: str) -> None:
    from finetune.demo_checker import READER_LABEL

    holder: dict[str, Any] = {}

    def read(p: Phase) -> str:
        holder["path"], counts = checker_verdicts(run_dir, spec)
        facts.setdefault("checker", {})[key] = counts
        return f"read {counts['read']} samples: {counts['accept']} accept, {counts['reject']} reject — {READER_LABEL}"

    run.step(f"{'Phase 1' if key == 'pass' else 'FAIL demo'}: the checker reads the review sheet", read)
    run.stage(f"{'Phase 1' if key == 'pass' else 'FAIL demo'}: record the verdicts",
              ["inspect", "verdict", str(run_dir), "--file", str(holder["path"])])
    run.stage(f"{'Phase 1' if key == 'pass' else 'FAIL demo'}: confirmation (the demo's own, no person)",
              ["inspect", "confirm", str(run_dir), "--user", CHECKER_USER, "--statement", CHECKER_STATEMENT])


# ----------------------------------------------------------------------------------------------
# the report


def _link(out: Path, rel: str) -> str:
    return f"[`{rel}`]({rel})" if (out / rel).exists() else f"`{rel}` (not written)"


def _artefacts(out: Path) -> list[tuple[str, list[str]]]:
    def existing(base: str, names: list[str]) -> list[str]:
        return [f"{base}/{n}" if base else n for n in names if (out / base / n).exists()]

    good = ["spec.yaml", "route.json", "rewards.py", "samples.jsonl", "base_samples.jsonl", "sample_info.json",
            "scored.jsonl", "score_report.json", "review.md", "review.html", "checker_verdicts.jsonl", "verdicts.jsonl",
            "confirmation.json", "gate.json", "memory.md", "config/BRIEF.md", "config/grpo_config.yaml",
            "config/train.py", "config/launch.sh", "heldout.json", "diagnosis/diagnosis.json",
            "diagnosis/report.md", "diagnosis/curves.png"]
    trains = sorted(p.name for p in (out / "pass").glob(f"{rundir.TRAIN_DIR}*") if p.is_dir())
    train_files = [f"{t}/{n}" for t in trains for n in ("trainer_state.json", "demo_profile.json",
                                                            "inspections/index.jsonl", "STOPPED.json")]
    bad = ["spec.yaml", "rewards.py", "samples.jsonl", "scored.jsonl", "score_report.json", "review.md",
           "checker_verdicts.jsonl", "verdicts.jsonl", "confirmation.json", "gate.json"]
    logs = sorted(f"logs/{p.name}" for p in (out / "logs").glob("*.log"))
    return [("task and model", existing("", ["data/train.jsonl", "data/heldout.jsonl", "model/DEMO_MODEL.json",
                                             "model/config.json"])),
            ("PASS run (`pass/`)", existing("pass", good + train_files)),
            ("FAIL run (`fail/`, the broken reward)", existing("fail", bad)),
            ("stage logs", logs)]


def _example_cell(example: dict[str, Any]) -> str:
    text = example["completion"].replace("`", "'").replace("\n", " ")
    shown = f"`{text}`" if text.strip() else "(empty)"
    return f"{shown} — {example['checker']}".replace("|", "\\|")


def _cell(text: str) -> str:
    """Demo-made text (a stage's detail, a command) inside a table cell: one line, pipes escaped."""
    return text.replace("|", "\\|").replace("\n", " ")


def _phase_rows(result: DemoResult) -> list[dict[str, str]]:
    return [{"name": p.name, "status": p.status, "seconds": f"{p.seconds:.1f}",
             "detail": _cell(p.detail or (f"`{p.command}`" if p.command else "")),
             "log": f"[log]({p.log})" if p.log and (result.out / p.log).exists() else ""} for p in result.phases]


def _model_facts(f: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The task and model section, and the base-success line under it."""
    model = base = None
    if "model" in f:
        m = f["model"]
        model = {"task": m["task"], "train_prompts": m["train_prompts"], "steps": m["recipe"]["steps"],
                 "mix": "; ".join(f"{tier} prompts (first digit {'/'.join(firsts)}): "
                                  + ", ".join(f"{k} {v:.0%}" for k, v in mix.items())
                                  for tier, (firsts, mix) in m["recipe"]["tiers"].items()),
                 "seconds": m["seconds"]}
    if "base_success" in f:
        b = f["base_success"]
        base = {"samples": b["samples"], "temperature": b["temperature"], "mean": f"{b['mean_success']:.0%}",
                "verdict": b["verdict"], "sampled": f"{f.get('sampled_success', 0):.0%}"}
    return model, base


def _gate_facts(f: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The PASS gate of pass/ and the FAIL gate of fail/ as report.md states them."""
    ok = bad = None
    if "gate_pass" in f:
        g, c = f["gate_pass"], f["gate_pass"]["counts"]
        ok = {"status": g["status"], "read": c["read"], "scored": c["scored"], "min_read": c["min_read"],
              "disagreements": c["disagreements"], "flags": len(g["flags"]),
              "probes_passing": sum(bool(p["passing"]) for p in g["probes"]), "probes": len(g["probes"]),
              "readers": ", ".join(g["readers"]),
              "reader_kind": f.get("checker", {}).get("pass", {}) and "the demo checker" or "the user",
              "confirmed_by": (g.get("confirmation") or {}).get("user", "not needed (human reading)")}
    if "gate_fail" in f:
        g = f["gate_fail"]
        passing = sorted({p["id"].split("@")[0] for p in g["probes"] if p["passing"]})
        bad = {"status": g["status"], "false_positives": sum(d["kind"] == "false_positive" for d in g["disagreements"]),
               "passing": ", ".join(passing) or "none", "reasons": list(g["reasons"])}
    return ok, bad


def _filter_facts(f: dict[str, Any]) -> dict[str, Any] | None:
    """The filter's prediction next to what TRL measured with and without it."""
    if "filter" not in f:
        return None
    flt = f["filter"]
    runs = f.get("heldout", {}).get("runs", []) or [{"seed": "–", "measured_zero_std": None}]
    rows = [{"seed": r["seed"], "measured": _fraction(r.get("measured_zero_std")),
             "early": _fraction(r.get("measured_zero_std_early")),
             "unfiltered": _fraction(r.get("unfiltered_zero_std")),
             "unfiltered_early": _fraction(r.get("unfiltered_zero_std_early")),
             "gain": _fraction(r.get("reward_gain")), "unfiltered_gain": _fraction(r.get("unfiltered_reward_gain"))}
            for r in runs]
    interval = flt.get("predicted_zero_std_after_interval")
    disp = (flt.get("dispersion") or {}).get("index")
    return {**{k: flt[k] for k in ("k", "assessed", "kept", "dropped_never", "dropped_always", "num_generations",
                                  "check_prompts")},
            "before": f"{flt['predicted_zero_std_before']:.3f}", "after": f"{flt['predicted_zero_std_after']:.3f}",
            "in_sample": f"{flt['predicted_zero_std_after_in_sample']:.3f}",
            "interval": f"{interval[0]:.3f}–{interval[1]:.3f}" if interval else "n/a",
            "dispersion": "n/a" if disp is None else f"{disp:.2f}",
            "dispersion_words": ("far more than sampling noise alone" if disp and disp >= 2 else
                                 "little beyond sampling noise"),
            "early_steps": EARLY_STEPS, "rows": rows, "outcome": filter_outcome(runs)}


def filter_outcome(runs: list[dict[str, Any]]) -> str:
    """What this machine measured, whichever way it came out — and no more than its seeds can show.

    A seed's zero-std fraction moves with floating point (CPU kernels, thread count), so two seeds cannot
    carry an effect claim; benchmarks/bench_filter.py measures the effect over 8 seeds with a sign test.

    >>> filter_outcome([{"measured_zero_std": 0.3, "unfiltered_zero_std": 0.4},
    ...                 {"measured_zero_std": 0.41, "unfiltered_zero_std": 0.38}])
    'On this machine the filtered run logged fewer zero-std groups than the unfiltered one on 1 of 2 seeds.'
    >>> filter_outcome([{"measured_zero_std": None}])
    'No seed measured both runs.'
    """
    paired = [r for r in runs if r.get("measured_zero_std") is not None and r.get("unfiltered_zero_std") is not None]
    if not paired:
        return "No seed measured both runs."
    lower = sum(r["measured_zero_std"] < r["unfiltered_zero_std"] for r in paired)
    return (f"On this machine the filtered run logged fewer zero-std groups than the unfiltered one on {lower} of "
            f"{len(paired)} seed{'s' if len(paired) != 1 else ''}.")


def _fraction(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _heldout_facts(out: Path, f: dict[str, Any]) -> dict[str, Any] | None:
    if not f.get("heldout", {}).get("runs"):
        return None
    h = f["heldout"]
    runs = [{"seed": r["seed"], "before": f"{r['before']['reward']:.3f}", "after": f"{r['after']['reward']:.3f}",
             "accept_before": f"{r['before']['checker_accept']:.0%}",
             "accept_after": f"{r['after']['checker_accept']:.0%}",
             "link": _link(out, "pass/" + r["output_dir"] + "/trainer_state.json")} for r in h["runs"]]
    first = h["runs"][0]
    examples = [{"prompt": b["prompt"], "before": _example_cell(b), "after": _example_cell(a)}
                for b, a in zip(first["before"]["examples"], first["after"]["examples"])]
    return {"prompts": h["prompts"], "k": h["k"], "temperature": h["temperature"], "runs": runs,
            "first_seed": first["seed"], "examples": examples}


def _inspection_facts(f: dict[str, Any]) -> dict[str, Any] | None:
    """Per toy run (filtered and unfiltered): inspections made, stop rules and live red flags fired, the step
    files; a stop (STOPPED.json) as the callback's decision with its rule and why, never as a demo error."""
    runs = f.get("heldout", {}).get("runs", [])
    found = [(r["seed"], r.get(out_key, ""), r[key]) for r in runs
             for key, out_key in (("inspection", "output_dir"), ("unfiltered_inspection", "unfiltered_output_dir"))
             if key in r]
    if not found:
        return None
    rows, stops = [], []
    for seed, output_dir, rec in found:
        run = f"pass/{output_dir}"
        flags = [f"{flag} (step {', '.join(map(str, steps))})" for flag, steps in rec["flags"].items()]
        rows.append({"run": run, "seed": seed, "inspections": rec["inspections"],
                     "fired": ", ".join(rec["rules_fired"]) or "none", "flags": "; ".join(flags) or "none",
                     "files": [(str(x["step"]), f"pass/{x['path']}") for x in rec["files"]],
                     "index": f"pass/{rec['dir']}/index.jsonl"})
        if rec.get("stopped"):
            stops.append({"run": run, "file": f"{run}/STOPPED.json", **rec["stopped"]})
    every = f.get("inspection_every", {})
    return {"every": every.get("value", "?"), "reason": every.get("reason", ""), "rows": rows, "stops": stops}


def _diagnosis_facts(out: Path, f: dict[str, Any]) -> dict[str, Any] | None:
    if "diagnosis" not in f:
        return None
    d = f["diagnosis"]
    return {"verdict": d["verdict"], "symptoms": ", ".join(d["symptoms"]) or "none",
            "variant": d["recommended_variant"] or "none (stay on GRPO)",
            "curves": (out / "pass/diagnosis/curves.png").exists()}


def report_markdown(result: DemoResult) -> str:
    """report.md (templates/demo-report.md.j2): what ran, what it showed, and a link to every artefact
    (relative to DIR)."""
    out, f = result.out, result.facts
    model, base = _model_facts(f)
    gate_pass, gate_fail = _gate_facts(f)
    changes = [c for c in f.get("profile_changes", []) if c["field"] not in ("output_dir", "seed")]
    env = literals.environment(Path(__file__).resolve().parent / "templates")
    text = env.get_template("demo-report.md.j2").render(
        wall=f.get("wall_seconds", "?"), reader=result.reader, terminal="terminal" in result.reader,
        checker_user=CHECKER_USER, stopped=f.get("stopped_at"), phases=_phase_rows(result), model=model, base=base,
        gate_pass=gate_pass, gate_fail=gate_fail, profile_changes=changes if "profile_changes" in f else None,
        filter=_filter_facts(f), heldout=_heldout_facts(out, f), inspection=_inspection_facts(f),
        diagnosis=_diagnosis_facts(out, f),
        artefacts=[(title, [_link(out, p) for p in paths]) for title, paths in _artefacts(out)])
    return text.rstrip() + "\n"


def report_html(markdown_text: str) -> str:
    """report.html: the same report as a self-contained page (links and the plot are relative)."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(markdown_text)
    style = ("body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;line-height:1.45}"
             "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.25rem .5rem;vertical-align:top}"
             "code{background:#f4f4f4;padding:0 .2rem}img{max-width:100%}blockquote{border-left:4px solid #e0a000;"
             "margin-left:0;padding-left:1rem;background:#fff8e6}")
    return (f"<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>finetune demo — report</title>"
            f"<style>{style}</style></head><body>\n{body}</body></html>\n")


def write_report(result: DemoResult) -> None:
    md = report_markdown(result)
    atomic.write_text(result.out / "report.md", md)
    atomic.write_text(result.out / "report.html", report_html(md))
    jsonio.write_json(result.out / "demo.json", {
        "reader": result.reader, "facts": result.facts,
        "phases": [dataclasses.asdict(p) for p in result.phases]})


# ----------------------------------------------------------------------------------------------
# CLI
