"""`finetune status RUN` — where a run directory stands, and the phase /finetune resumes at.

Each step of /finetune's Phases 0-4 is checked against the files it writes, in the command's order; the
first step whose output is missing, stale or failed is where the run resumes. What a check depends on
is re-derived, not trusted: rewards.py is compared with what the spec renders now, the score report's
input hashes and the gate record's bound hashes are recomputed, config/ is compared with what the
renderer would write now, and logs newer than the diagnosis make it stale. Nothing is written.

A RUN that does not exist yet is a new run (it resumes at Phase 0). The report starts with a
``machine:`` line (CUDA GPUs here, or none: /finetune then offers ``inspect sample --emit-requests``).
Exit 0 with the report (``--json`` for machine output); 2 when RUN is a file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from finetune import rundir
from finetune.errors import UserError

if TYPE_CHECKING:
    from finetune.spec import RunSpec

OK, MISSING, STALE, FAILED, ELSEWHERE = "ok", "missing", "stale", "failed", "other route"


@dataclass(frozen=True)
class StepState:
    """One step of /finetune: its phase heading, what it runs, its state and why."""

    phase: str  # "Phase 0" ... "Phase 4", as the command's headings
    step: str
    state: str  # ok | missing | stale | failed | other route
    detail: str


class _Run:
    """The run directory and its spec, loaded once (None when absent or invalid)."""

    def __init__(self, run_dir: Path):
        self.dir = run_dir
        self.spec: RunSpec | None = None
        self.spec_error = ""
        if (run_dir / rundir.SPEC).is_file():
            from finetune.spec import load_spec

            try:
                self.spec = load_spec(run_dir / rundir.SPEC)
            except UserError as exc:
                self.spec_error = exc.line()

    def path(self, name: str) -> Path:
        return self.dir / name

    @property
    def loaded(self) -> RunSpec:
        """The spec, for the steps after `spec.yaml` (they run only once it loaded)."""
        assert self.spec is not None
        return self.spec

    def newer(self, a: str, b: str) -> bool:
        """Is file ``a`` modified after file ``b``?"""
        return self.path(a).stat().st_mtime > self.path(b).stat().st_mtime


def _route(run: _Run) -> tuple[str, str]:
    if not run.path(rundir.ROUTE).is_file():
        return MISSING, "no route.json: ask the routing questions, write answers.yaml, run `finetune route`"
    if run.path("answers.yaml").is_file() and run.newer("answers.yaml", rundir.ROUTE):
        return STALE, "answers.yaml changed after route.json: run `finetune route` again"
    try:
        decision = json.loads(run.path(rundir.ROUTE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        return STALE, f"route.json is unreadable ({exc}): run `finetune route` again"
    route = decision.get("route") if isinstance(decision, dict) else None
    if route != "grpo-rlvr-training":
        return ELSEWHERE, f"the route is {route}: hand over to skills/{route}/SKILL.md"
    return OK, "route: grpo-rlvr-training"


def _spec(run: _Run) -> tuple[str, str]:
    if run.spec_error:
        return FAILED, f"spec.yaml does not load: {run.spec_error}"
    if run.spec is None:
        return MISSING, "no spec.yaml: write it with the user (references/run-spec.md)"
    return OK, f"spec.yaml loads (model {run.spec.model})"


def _rewards(run: _Run) -> tuple[str, str]:
    from finetune.rewards.render import spec_sources

    if not run.path(rundir.REWARDS).is_file():
        return MISSING, "no rewards.py: run `finetune rewards render`"
    try:
        files = spec_sources(run.loaded)
    except UserError as exc:
        return FAILED, f"the spec's rewards do not render: {exc.line()}"
    differ = sorted(n for n, text in files.items()
                    if not run.path(n).is_file() or run.path(n).read_text(encoding="utf-8") != text)
    if differ:
        return STALE, f"{', '.join(differ)} differ from what spec.yaml renders now: run `finetune rewards render`"
    return OK, f"{', '.join(sorted(files))} match spec.yaml"


def _same_model(sampled: Path, now: Path) -> bool:
    """The same path, or (a run directory copied elsewhere) a model folder with the same config and weights' names."""
    if sampled == now:
        return True
    cfg_a, cfg_b = sampled / "config.json", now / "config.json"
    if not (cfg_a.is_file() and cfg_b.is_file()):
        return False

    def weights(d: Path) -> list[tuple[str, int]]:
        return sorted((p.name, p.stat().st_size) for p in d.glob("*.safetensors"))

    return cfg_a.read_bytes() == cfg_b.read_bytes() and weights(sampled) == weights(now)


def _samples(run: _Run) -> tuple[str, str]:
    from finetune.inspect.sample import SAMPLE_INFO

    if not run.path(rundir.SAMPLES).is_file() or not run.path(SAMPLE_INFO).is_file():
        return MISSING, "no samples: run `finetune inspect sample` (or --import completions sampled elsewhere)"
    info = json.loads(run.path(SAMPLE_INFO).read_text(encoding="utf-8"))
    if "imported" in info or "generation" not in info:
        return OK, f"{info.get('samples', '?')} imported samples"
    spec = run.loaded
    if not _same_model(Path(str(info.get("model"))), spec.resolve_path(spec.model)):
        return STALE, f"sampled from {info.get('model')}, the spec's model is {spec.model}: sample again"
    if info.get("generation") != spec.generation.model_dump(mode="json"):
        return STALE, "the spec's generation settings changed since sampling: sample again"
    return OK, f"{info.get('samples')} samples of {spec.model}"


def _score(run: _Run) -> tuple[str, str]:
    from finetune.inspect.score import report_is_current

    if not run.path(rundir.SCORE_REPORT).is_file() or not run.path(rundir.SCORED).is_file():
        return MISSING, "not scored: run `finetune inspect score`"
    report = json.loads(run.path(rundir.SCORE_REPORT).read_text(encoding="utf-8"))
    changed = report_is_current(run.dir, run.loaded, report)
    if changed:
        return STALE, f"the score report is stale ({changed}): run `finetune inspect score`"
    return OK, "score report matches the rewards and samples"


def _verdicts(run: _Run) -> tuple[str, str]:
    if not run.path(rundir.VERDICTS).is_file():
        return MISSING, "no verdicts: write the reading sheet (`finetune inspect review`) and record a reading"
    if run.newer(rundir.SCORED, rundir.VERDICTS):
        return STALE, "the samples were scored again after the last verdict: read the new sheet"
    return OK, "verdicts recorded"


def _gate(run: _Run) -> tuple[str, str]:
    from finetune.inspect.gate import verify_gate

    if not run.path(rundir.GATE).is_file():
        return MISSING, "no gate record: run `finetune inspect gate`"
    check = verify_gate(run.dir, run.loaded)
    if check.ok:
        return OK, "gate PASS holds"
    record = check.record or {}
    if record.get("status") == "FAIL" or "not PASS" in check.reason:
        reasons = "; ".join(str(r) for r in (record.get("reasons") or [])[:3])
        return FAILED, f"the gate says FAIL{': ' + reasons if reasons else ''} — fix the reward, repeat Phase 1"
    return STALE, check.reason


def _config(run: _Run) -> tuple[str, str]:
    from finetune import config

    cfg = run.path(rundir.CONFIG_DIR)
    if not run.path(rundir.MEMORY).is_file() or not (cfg / "train.py").is_file():
        return MISSING, "no memory.md / config/: run `finetune memory` and `finetune config render`"
    try:
        files = config.render_files(config.build_plan(run.loaded, run.dir))
    except UserError as exc:
        return FAILED, f"the config no longer renders: {exc.line()}"
    differ = sorted(n for n, text in files.items()
                    if not (cfg / n).is_file() or (cfg / n).read_text(encoding="utf-8") != text)
    if differ:
        return STALE, f"config/{', config/'.join(differ)} differ from what renders now: run `finetune config render`"
    return OK, f"config/ matches the spec and the gate ({len(files)} files)"


TRAINER_STATE = f"{rundir.TRAIN_DIR}/trainer_state.json"


def _train(run: _Run) -> tuple[str, str]:
    if not run.path(TRAINER_STATE).is_file():
        return MISSING, "no train/trainer_state.json: hand config/BRIEF.md to the training engineer"
    if run.newer(f"{rundir.CONFIG_DIR}/train.py", TRAINER_STATE):
        return STALE, "config/ was rendered again after the last run: hand the new brief to the training engineer"
    return OK, "training logs present"


def _diagnose(run: _Run) -> tuple[str, str]:
    if not run.path(rundir.DIAGNOSIS).is_file():
        return MISSING, "not diagnosed: run `finetune diagnose` once 10 steps are logged"
    if run.newer(TRAINER_STATE, rundir.DIAGNOSIS):
        return STALE, "the run logged more since the diagnosis: run `finetune diagnose` again"
    verdict = json.loads(run.path(rundir.DIAGNOSIS).read_text(encoding="utf-8")).get("verdict")
    return OK, f"diagnosis: {verdict}"


# /finetune's steps in the command's order: (phase heading, what runs, check).
STEPS: tuple[tuple[str, str, Callable[[_Run], tuple[str, str]]], ...] = (
    ("Phase 0", "route", _route),
    ("Phase 0", "spec.yaml", _spec),
    ("Phase 1", "rewards render", _rewards),
    ("Phase 1", "inspect sample", _samples),
    ("Phase 1", "inspect score", _score),
    ("Phase 1", "inspect review + verdict", _verdicts),
    ("Phase 1", "inspect gate", _gate),
    ("Phase 2", "memory + config render", _config),
    ("Phase 3", "training", _train),
    ("Phase 4", "diagnose", _diagnose),
)


def run_status(run_dir: str | Path) -> tuple[list[StepState], StepState | None]:
    """Every step's state, and the first step that is not ok (None: every phase is done and current)."""
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise UserError(f"not a run directory: {run_dir}", where="RUN",
                        fix="pass the folder that holds (or will hold) spec.yaml, e.g. runs/my-task")
    run = _Run(run_dir)
    states: list[StepState] = []
    resume: StepState | None = None
    for phase, step, check in STEPS:
        if resume is not None:
            states.append(StepState(phase, step, "pending", f"after {resume.phase} {resume.step}"))
            continue
        state, detail = check(run)
        st = StepState(phase, step, state, detail)
        states.append(st)
        if state != OK:
            resume = st
    return states, resume


def machine() -> str:
    """This machine's accelerators, as /finetune needs to know them (sample here, or --emit-requests)."""
    try:
        import torch
    except ImportError:
        return "no torch"
    if torch.cuda.is_available():
        n = torch.cuda.device_count()
        return f"{n} CUDA GPU(s): {torch.cuda.get_device_name(0)}"
    return "no CUDA GPU (sample on the GPU machine: inspect sample --emit-requests)"
