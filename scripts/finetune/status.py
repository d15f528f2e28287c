"""`finetune status RUN` — where a run directory stands, and the phase /finetune resumes at.

Each step of /finetune's Phases 0-4 is checked against the files it writes, in the command's order; the
first step whose output is missing, stale or failed is where the run resumes. What a check depends on
is re-derived, not trusted: rewards.py is compared with what the spec renders now, the score report's
input hashes and the gate record's bound hashes are recomputed, config/ is compared with what the
renderer would write now, and logs newer than the diagnosis make it stale. Nothing is written.

Two things beside the steps. A run the inspection callback stopped (``train/STOPPED.json``, written by
``config/watch.py``; launch.sh exited 3) resumes at Phase 3 with the rule, step and reward the file names and
what /finetune does next (read the step's inspection file, ``finetune diagnose``, fix that reward in Phase 1,
re-gate); a file that does not parse or names no rule is reported as such. A run the watchdog stopped
(``train/STALLED.json``, written by ``config/watchdog.py``; launch.sh exited 4) is Phase 3 failed, with the
moment, its likely causes and where the stacks are. And every checkpoint sample set
under ``inspect/checkpoints/`` is listed with its gate state (re-derived as Phase 1's) and, when its
comparison.json exists, the comparison with Phase 1 recomputed (a file that no longer matches is stale).

A RUN that does not exist yet is a new run (it resumes at Phase 0). The report starts with a
``machine:`` line (CUDA GPUs here, or none: /finetune then offers ``inspect sample --emit-requests``).
Exit 0 with the report (``--json`` for machine output); 2 when RUN is a file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from finetune import jsonio, rundir, watch, watchdog
from finetune.errors import UserError

if TYPE_CHECKING:
    from finetune.spec import RunSpec

OK, MISSING, STALE, FAILED, ELSEWHERE = "ok", "missing", "stale", "failed", "other route"
STOPPED = "stopped"  # the inspection callback stopped training (train/STOPPED.json)


@dataclass(frozen=True)
class StepState:
    """One step of /finetune: its phase heading, what it runs, its state and why."""

    phase: str  # "Phase 0" ... "Phase 4", as the command's headings
    step: str
    state: str  # ok | missing | stale | failed | other route | stopped
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

    def read(self, name: str) -> tuple[dict[str, Any], str]:
        """A JSON object the phases wrote: (it, "") or ({}, one line saying why it cannot be read)."""
        try:
            return jsonio.read_json_object(self.path(name), what=name), ""
        except UserError as exc:
            return {}, one_line(f"{name}: {exc.what}", 240)

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
    info, problem = run.read(SAMPLE_INFO)
    if problem:
        return STALE, f"{problem}: sample again"
    mismatch = _not_described(run, info)
    if mismatch:
        from finetune import commit

        unsettled = commit.pending(run.dir)
        if unsettled:  # the same words as the score step's currency check (inspect.score.report_is_current)
            return STALE, (f"an interrupted write of {', '.join(unsettled)} is unfinished "
                           "(any finetune command on the run finishes it)")
        return STALE, f"{SAMPLE_INFO} describes other samples than {mismatch} on disk (edited?): sample again"
    if "imported" in info or "imported_base" in info:
        return OK, f"{info.get('samples', '?')} imported samples"
    if not isinstance(info.get("generation"), dict):
        return STALE, f"{SAMPLE_INFO} records neither an import nor the generation settings: sample again"
    spec = run.loaded
    if not _same_model(Path(str(info.get("model"))), spec.resolve_path(spec.model)):
        return STALE, f"sampled from {info.get('model')}, the spec's model is {spec.model}: sample again"
    if info.get("generation") != spec.generation.model_dump(mode="json"):
        return STALE, "the spec's generation settings changed since sampling: sample again"
    return OK, f"{info.get('samples')} samples of {spec.model}"


def _not_described(run: _Run, info: dict[str, Any]) -> str | None:
    """The first sample file whose sha256 differs from the one sample_info.json recorded (written in one commit
    with it); None when all match or the record predates the hashes."""
    from finetune.hashing import sha256_file

    recorded = info.get("sha256")
    if not isinstance(recorded, dict):
        return None
    for name, digest in sorted(recorded.items()):
        if Path(str(name)).name != name:  # a record names files beside it, never a path elsewhere
            return str(name)
        path = run.path(str(name))
        if not path.is_file() or sha256_file(path) != digest:
            return str(name)
    return None


def _score(run: _Run) -> tuple[str, str]:
    from finetune.inspect.score import load_report, report_is_current

    if not run.path(rundir.SCORE_REPORT).is_file() or not run.path(rundir.SCORED).is_file():
        return MISSING, "not scored: run `finetune inspect score`"
    try:
        report = load_report(run.dir)
    except UserError as exc:
        return STALE, one_line(f"{rundir.SCORE_REPORT}: {exc.what}: run `finetune inspect score`", 300)
    changed = report_is_current(run.dir, run.loaded, report)
    if changed:
        return STALE, f"the score report is stale ({changed}): run `finetune inspect score`"
    return OK, "score report matches the rewards and samples"


def _verdicts(run: _Run) -> tuple[str, str]:
    if not run.path(rundir.VERDICTS).is_file():
        return MISSING, "no verdicts: write the reading sheet (`finetune inspect review`) and record a reading"
    if run.newer(rundir.SCORED, rundir.VERDICTS):
        if _seen_scores(run):
            from finetune.inspect.readingset import fresh_offer

            return STALE, ("the samples were scored again after the last verdict, and their reward scores were "
                           "shown to the reader (reveals.json): re-reading them is not blind — for a blind reading "
                           "of the fixed reward offer " + fresh_offer(run.dir))
        return STALE, "the samples were scored again after the last verdict: read the new sheet"
    return OK, "verdicts recorded"


def _seen_scores(run: _Run) -> bool:
    """Did a reader see the reward scores of samples that are still in scored.jsonl (key, terminal review)?"""
    from finetune.inspect.verdicts import load_reveals

    try:
        revealed = set(load_reveals(run.dir))
        scored = run.path(rundir.SCORED).read_text(encoding="utf-8")
    except (OSError, UserError, ValueError):
        return False
    return any(f'"id": "{i}"' in scored or f'"id":"{i}"' in scored for i in revealed)


def gate_state(folder: Path, spec: RunSpec, fix: str = "fix the reward, repeat Phase 1") -> tuple[str, str]:
    """A gate record's state, re-derived (``verify_gate``: the bound hashes, the score report's binding and a
    re-judgement of the bound files): ok (the PASS holds), missing, failed (the record or its files FAIL) or
    stale. Phase 1's run directory and a checkpoint sample set alike."""
    from finetune.inspect.gate import verify_gate

    if not (folder / rundir.GATE).is_file():
        return MISSING, "no gate record: run `finetune inspect gate`"
    check = verify_gate(folder, spec)
    if check.ok:
        return OK, "gate PASS holds"
    record = check.record
    if (record is not None and record.status == "FAIL") or "not PASS" in check.reason:
        reasons = "; ".join(record.reasons[:3]) if record is not None else ""
        return FAILED, one_line(f"the gate says FAIL{': ' + reasons if reasons else ''} — {fix}", 400)
    return STALE, check.reason


def _gate(run: _Run) -> tuple[str, str]:
    from finetune.inspect.gaterecord import load_record

    state, detail = gate_state(run.dir, run.loaded)
    record = load_record(run.path(rundir.GATE)) if state == OK else None  # a PASS holds: its record loads
    blind = record.blind if record else None
    if blind is not None and not blind.reading_blind:  # a PASS holds, but say plainly what it rests on
        from finetune.inspect.readingset import fresh_offer

        return OK, one_line(f"gate PASS holds on a reading that was NOT BLIND ({blind.statement}); "
                            f"offer the user {fresh_offer(run.dir)}", 900)
    if record is not None and record.bounds:
        from finetune.inspect.bounds import line

        # one line per reward: the detail is printed as given (`_print_check`), newlines included
        return state, "\n".join([detail, *(f"  {line(b.model_dump())}" for b in record.bounds)])
    return state, detail


def _config(run: _Run) -> tuple[str, str]:
    from finetune.config import build as config
    from finetune.config import render as config_render
    from finetune.inspect.gate import render_void

    cfg = run.path(rundir.CONFIG_DIR)
    if not run.path(rundir.MEMORY).is_file() or not (cfg / "train.py").is_file():
        return MISSING, "no memory.md / config/: run `finetune memory` and `finetune config render`"
    void = render_void(run.dir)
    if void:
        return STALE, "VOID: " + void
    try:
        files = config_render.render_files(config.build_plan(run.loaded, run.dir))
    except UserError as exc:
        return FAILED, f"the config no longer renders: {exc.line()}"
    differ = sorted(n for n, text in files.items()
                    if not (cfg / n).is_file() or (cfg / n).read_text(encoding="utf-8") != text)
    if differ:
        return STALE, f"config/{', config/'.join(differ)} differ from what renders now: run `finetune config render`"
    return OK, f"config/ matches the spec and the gate ({len(files)} files)"


TRAINER_STATE = f"{rundir.TRAIN_DIR}/trainer_state.json"
STOPPED_FILE = f"{rundir.TRAIN_DIR}/{watch.STOPPED}"


def one_line(text: str, limit: int = 200) -> str:
    """A value from a file, fit for one line of a terminal: control characters and line breaks as spaces."""
    flat = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@dataclass(frozen=True)
class Stop:
    """train/STOPPED.json as re-read here: what stopped the run, or what is wrong with the file."""

    file: str
    rule: str | None
    step: int | None
    reward: str | None
    message: str
    inspection_file: str | None
    problem: str  # "" when the file parses and names a rule; else one line saying what is wrong
    next: list[str] = field(default_factory=list)  # what /finetune does now, in order

    def summary(self) -> str:
        if self.problem:
            return f"stopped by the inspection callback, but {self.problem}"
        at = f" at step {self.step}" if self.step is not None else ""
        on = f" on reward {self.reward}" if self.reward else ""
        return one_line(f"stopped by the inspection callback{at}: {self.rule}{on}"
                        + (f" — {self.message}" if self.message else ""), 300)


def _text(doc: dict[str, Any], key: str, limit: int = 120) -> str | None:
    value = doc.get(key)
    return one_line(value, limit) if isinstance(value, str) and value.strip() else None


def _stop_problem(path: Path) -> tuple[dict[str, Any], str]:
    """(the parsed file, "") or ({}, one line: it does not parse, is not an object, or names no rule)."""
    try:  # the callback writes it with the standard library's json: NaN evidence is allowed
        doc = jsonio.read_json(path, allow_nan=True)
    except UserError as exc:
        return {}, f"{STOPPED_FILE} does not parse ({one_line(exc.what, 120)})"
    if not isinstance(doc, dict):
        return {}, f"{STOPPED_FILE} is not a JSON object (found {type(doc).__name__})"
    if _text(doc, "rule") is None:
        return doc, f"{STOPPED_FILE} names no rule"
    return doc, ""


def _inspection_file(run_dir: Path, doc: dict[str, Any], step: int | None) -> str | None:
    """The step's sample file, relative to the run when it lies inside it (the callback writes it absolute)."""
    named = doc.get("inspection_file")
    candidates = [run_dir / named] if isinstance(named, str) and named else []  # train.py runs in the run dir
    if step is not None:  # a run directory copied elsewhere: the callback named it by its old absolute path
        candidates.append(run_dir / rundir.TRAIN_DIR / watch.INSPECTIONS / f"step_{step}.jsonl")
    path = next((p for p in candidates if p.is_file()), None)
    if path is None:
        return None
    try:
        return str(path.resolve().relative_to(run_dir.resolve()))
    except ValueError:
        return one_line(str(path), 300)


def _next_steps(run_dir: Path, stop: Stop) -> list[str]:
    """What /finetune does after a stop (commands/finetune.md, Phase 3): read, diagnose, fix, re-gate."""
    from finetune.invocation import command

    read = (f"show the user {STOPPED_FILE}, then read {stop.inspection_file} as in Phase 1, in a review directory "
            "beside the run (Phase 3: inspect sample REVIEW --import that file, score, review, verdict, gate)"
            if stop.inspection_file else
            f"show the user {STOPPED_FILE} and read the last inspection under {rundir.TRAIN_DIR}/{watch.INSPECTIONS}/ "
            "(index.jsonl names each step's file) as in Phase 1, in a review directory beside the run")
    what = f"the reward {stop.reward}" if stop.reward else "the reward the stop names"
    return [read, f"{command('diagnose', run_dir)} (diagnosis.json's run.stopped carries the stop)",
            f"fix {what} in spec.yaml and repeat Phase 1 from `finetune rewards render` to a PASS gate "
            "(no variant fixes a reward the policy exploits), then render config/ again and hand the new brief"]


def read_stop(run_dir: Path) -> Stop | None:
    """train/STOPPED.json re-read and checked (None: the run was not stopped by the inspection callback)."""
    path = run_dir / STOPPED_FILE
    if not path.is_file():
        return None
    doc, problem = _stop_problem(path)
    step = doc.get("step")
    step = step if isinstance(step, int) and not isinstance(step, bool) and step >= 0 else None
    stop = Stop(file=STOPPED_FILE, rule=_text(doc, "rule"), step=step, reward=_text(doc, "reward"),
                message=_text(doc, "message", 240) or "", inspection_file=_inspection_file(run_dir, doc, step),
                problem=problem)
    return replace(stop, next=_next_steps(run_dir, stop))


STALLED_FILE = f"{rundir.TRAIN_DIR}/{watchdog.STALLED}"


def read_stall(run_dir: Path) -> str | None:
    """train/STALLED.json (config/watchdog.py stopped a moment that outlived its budget) as one line: the moment, how
    long it ran, its likely causes, where the stacks are and what to do; None when the watchdog stopped nothing."""
    path = run_dir / STALLED_FILE
    if not path.is_file():
        return None
    try:
        doc = jsonio.read_json(path)
    except UserError as exc:
        return f"stopped by the watchdog, but {STALLED_FILE} does not parse ({one_line(exc.what, 120)})"
    if not isinstance(doc, dict) or _text(doc, "moment") is None:
        return f"stopped by the watchdog, but {STALLED_FILE} names no moment"
    cause = _text(doc, "cause", 400) or watchdog.MOMENTS.get(str(doc["moment"]), "")
    stacks = _text(doc, "stacks", 300)
    return one_line(f"stopped by the watchdog: {_text(doc, 'message', 300) or _text(doc, 'moment')}"
                    + (f" — likely: {cause}" if cause else "") + (f"; stacks: {stacks}" if stacks else "")
                    + "; fix the cause, time the moments with `bash config/launch.sh --dry-run`, then launch again",
                    900)


def _train(run: _Run) -> tuple[str, str]:
    stop = read_stop(run.dir)
    if stop is not None:
        if run.newer(f"{rundir.CONFIG_DIR}/train.py", STOPPED_FILE):  # launch.sh removes it on the next launch
            return STALE, ("config/ was rendered again after the inspection callback stopped the run: hand the new "
                           "brief to the training engineer")
        return STOPPED, stop.summary()
    stall = read_stall(run.dir)
    if stall is not None and not run.newer(f"{rundir.CONFIG_DIR}/train.py", STALLED_FILE):
        return FAILED, stall  # launch.sh removes the file on the next launch, as it does STOPPED.json
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
    doc, problem = run.read(rundir.DIAGNOSIS)
    if problem:
        return STALE, f"{problem}: run `finetune diagnose` again"
    verdict = doc.get("verdict")
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


def _open(run_dir: str | Path) -> _Run:
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise UserError(f"not a run directory: {run_dir}", where="RUN",
                        fix="pass the folder that holds (or will hold) spec.yaml, e.g. runs/my-task")
    return _Run(run_dir)


def run_status(run_dir: str | Path) -> tuple[list[StepState], StepState | None]:
    """Every step's state, and the first step that is not ok (None: every phase is done and current)."""
    return _steps(_open(run_dir))


def _steps(run: _Run) -> tuple[list[StepState], StepState | None]:
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


# ---------------------------------------------------------------------------------------------
# checkpoint sample sets (RUN/inspect/checkpoints/NAME): their gate, and their comparison with Phase 1

GATE_LABEL = {OK: "PASS", FAILED: "FAIL", MISSING: "missing", STALE: "stale"}


@dataclass(frozen=True)
class SetState:
    """One checkpoint sample set: its gate (PASS | FAIL | missing | stale) and the comparison with Phase 1."""

    name: str
    dir: str
    gate: str
    detail: str
    comparison: dict[str, Any] | None  # per reward agreement / success Phase 1 -> checkpoint (recomputed)
    comparison_state: str  # "none" (no comparison.json) | "current" | "stale" | "unreadable"
    comparison_detail: str


def _set_gate(folder: Path, spec: RunSpec) -> tuple[str, str]:
    """Phase 1's gate check on the set, and the set's own rule: its gate judged the run's reward files as they
    are now (``checkpoint.reward_drift``; ``inspect gate`` FAILs a set while they differ)."""
    from finetune.inspect import checkpoint

    state, detail = gate_state(folder, spec, fix="read comparison.md: a new false positive is the policy "
                                                 "exploiting the reward; fix it in Phase 1")
    drift = checkpoint.reward_drift(folder)
    if state == OK and drift:
        return STALE, (f"the run's {', '.join(drift)} changed since this set was scored: run "
                       f"`finetune inspect score` and `finetune inspect gate` on it")
    return state, detail


def _summary(c: dict[str, Any]) -> dict[str, Any]:
    """What status shows of a comparison: per reward agreement, and success, Phase 1 -> checkpoint."""
    rewards = [{k: r.get(k) for k in ("name", "role", "agreement_phase1", "agreement_checkpoint",
                                     "success_rate_phase1", "success_rate_checkpoint")}
               for r in c.get("rewards", []) if isinstance(r, dict)]
    news = [d for d in c.get("new_disagreements") or [] if isinstance(d, dict)]
    return {"rewards": rewards, "new_disagreements": len(news), "new_disagreement_samples": len({
        str(d.get("id")) for d in news})}


def _comparable(c: dict[str, Any]) -> dict[str, Any]:
    """A comparison without what depends on when and from where it was made (its time, the folders as the
    command line spelled them)."""
    out = {k: v for k, v in c.items() if k != "time"}
    for side in ("phase1", "checkpoint"):
        if isinstance(out.get(side), dict):
            out[side] = {k: v for k, v in out[side].items() if k != "dir"}
            out[side]["gate"] = str(out[side].get("gate")).split(":")[0]  # "not PASS: <why, naming the path>"
    return out


def _comparison(folder: Path, spec: RunSpec) -> tuple[dict[str, Any] | None, str, str]:
    """comparison.json recomputed (``checkpoint.compare``, nothing written) and checked against the file."""
    from finetune.inspect import checkpoint

    path = folder / checkpoint.COMPARISON
    if not path.is_file():
        return None, "none", "no comparison.json: `finetune inspect gate` or `inspect compare` on the set writes it"
    try:
        fresh = json.loads(jsonio.dumps(checkpoint.compare(folder, spec)))
    except UserError as exc:
        return None, "unreadable", one_line(f"the comparison cannot be recomputed: {exc.line()}", 300)
    try:
        saved = jsonio.read_json_object(path, what=checkpoint.COMPARISON)
    except UserError as exc:
        return _summary(fresh), "stale", one_line(f"{exc.line()} — recomputed here", 300)
    same = _comparable(saved) == _comparable(fresh)
    if not same:
        return _summary(fresh), "stale", (f"{checkpoint.COMPARISON} no longer matches the set and Phase 1 (recomputed "
                                          "here): run `finetune inspect compare` on the set")
    return _summary(fresh), "current", f"{checkpoint.COMPARISON} matches the set and Phase 1"


def checkpoint_sets(run: _Run) -> list[SetState]:
    """Every set under RUN/inspect/checkpoints/ (a folder ``checkpoint.run_of`` places in this run)."""
    from finetune.inspect import checkpoint

    root = checkpoint.sets_dir(run.dir)
    if not root.is_dir() or run.spec is None:
        return []
    sets = []
    for folder in sorted(p for p in root.iterdir() if rundir.run_of(p) is not None):
        gate, detail = _set_gate(folder, run.spec)
        comparison, cstate, cdetail = _comparison(folder, run.spec)
        sets.append(SetState(folder.name, str(folder), GATE_LABEL[gate], detail, comparison, cstate, cdetail))
    return sets


@dataclass(frozen=True)
class Report:
    """Everything `finetune status` says about a run directory."""

    steps: list[StepState]
    resume: StepState | None
    stopped: Stop | None
    checkpoints: list[SetState]
    ungated: str | None = None


def ungated(run_dir: Path) -> str | None:
    """A line when config/ is an ungated preview (rendered with --no-gate: its train.py checks no gate)."""
    import re

    train_py = run_dir / rundir.CONFIG_DIR / "train.py"
    try:
        text = train_py.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    if not re.search(r"^GATE_REQUIRED = False\b", text, re.M):
        return None
    return ("UNGATED: config/ was rendered with --no-gate (a preview: no one read these rewards' scores); it "
            "cannot train - pass the Phase 1 gate and run `finetune config render` again")


def report(run_dir: str | Path) -> Report:
    """The steps and where /finetune resumes, the inspection callback's stop, and the checkpoint sample sets."""
    run = _open(run_dir)
    steps, resume = _steps(run)
    return Report(steps, resume, read_stop(run.dir), checkpoint_sets(run), ungated(run.dir))


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
