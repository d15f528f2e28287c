#!/usr/bin/env python3
"""GRPO training for run 'tiny-e2e' (variant: grpo), rendered by llm-finetuning 0.1.0.

Re-render with `finetune config render` instead of editing: every value was validated for
8 GPUs: `trl vllm-serve` on 1 GPU(s) as TP 1 × DP 1, training on 7 (server mode: generation and training do not contend for one device).
Standalone: needs only trl==1.16.0 (with transformers, accelerate, datasets, vllm)
and the rendered rewards.py beside the run; it never imports the llm-finetuning plugin.

    python config/train.py                      # as launch.sh runs it (or under `accelerate launch`)
    python config/train.py --cpu --max-steps 2  # smoke test on a CPU box: no vLLM, no bf16
    python config/train.py --dry-run            # one step timing model load, vLLM start, first sync and generation

!!! UNGATED: RENDERED WITH --no-gate, a preview: these rewards never passed the Phase 1 gate. !!!
It runs only a CPU smoke test (--cpu --max-steps 2 or fewer) unless a person sets
FINETUNE_UNGATED_OVERRIDE=I train on rewards no one read
"""

from __future__ import annotations

import os
import sys

# Python puts this script's folder (config/) first on sys.path, and '' under `python -c`: neither is an
# import location here, so a json.py / trl.py / math_verify.py left beside train.py cannot stand in for a
# package (os and sys, imported above, are built in).
sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != os.path.dirname(os.path.abspath(__file__))]

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
from pathlib import Path  # noqa: E402

RUN_DIR = Path(__file__).resolve().parent.parent
MODEL = 'Qwen/Qwen3-1.7B'  # relative paths are relative to the run directory
DATASET = {'format': 'jsonl', 'path': 'data/train.jsonl', 'split': 'train', 'prompt_column': 'prompt'}
# the system prompt and generation settings the gated samples were drawn with; the gate binds their hash
SAMPLING = {'system_prompt': None, 'generation': {'max_prompt_length': 256, 'max_completion_length': 1024, 'temperature': 1.0, 'top_p': 1.0, 'top_k': 0, 'min_p': None, 'repetition_penalty': 1.0}}
INSPECTION = {'prompts': 16, 'per_prompt': 4, 'min_read': 50, 'held_back_prompts': 0, 'min_recall': None, 'min_precision': None, 'probe_prompts': 4, 'every_steps': None, 'base_success': {'prompts': 16, 'samples_per_prompt': 16, 'temperature': 0.3}}  # the spec's inspection section the gate bound (spec:inspection)
SYSTEM_PROMPT = SAMPLING["system_prompt"]
REWARD_NAMES = ['format_ok', 'correct']  # TRL logs rewards/<name>/mean
REWARD_WEIGHTS_RENDERED = [0.2, 1.0]

TRL_VERSION = '1.16.0'  # every algorithm field below assumes this TRL's semantics

# --- the Phase 1 gate record this config relies on (DESIGN.md's gate-record contract) ---
GATE_REQUIRED = False
UNGATED_OVERRIDE = 'I train on rewards no one read'  # without a gate: FINETUNE_UNGATED_OVERRIDE must say exactly this to train
UNGATED_SMOKE_STEPS = 2  # without a gate: --cpu --max-steps at most this (a smoke test)
GATE_HASHES = {}
SCORE_REPORT_SHA256 = None  # the score report the gate judged (its binding is re-checked)
# the person's acts this render rests on (gate record, verdicts, acks, confirmation, diagnosis: sha256, None absent):
# one that changes after the render voids it
PERSON_ACTS = {}
REWARD_SECTION_SHA256 = 'a4ec549c44c3a23c85e8075c1d34951618d90ded26b66d39eb79e6ffcfade1d3'  # sha256 of the spec's reward section (weights included)
DATA_FILTER_SHA256 = None  # sha256 of the spec's dataset.filter (finetune data filter), or None
# --- the held-out split `finetune eval` measures on (config/heldout.json); the gate binds its settings
HELDOUT_SHA256 = 'ce290fce8b3004d3415126550ab56d53ed1b5d0b21ab6fcbc115d1ddc5052929'  # sha256 of the spec's dataset.heldout section
HELDOUT_PATH = None  # a held-out file of the person's own (bound by the gate), or None
HELDOUT_ROWS = []  # carved rows: never trained on
HELDOUT_PROMPTS_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'  # their prompts, as carved

# --- continuous inspection (config/watch.py; train/inspections/, train/STOPPED.json)
INSPECT_EVERY_STEPS = 5  # 5 × logging_steps (1): each inspection sees 5 new log points; the reward-hacking rule runs on the last 30 log points and stops a run when it fires on 2 inspections in a row
INSPECT_SAMPLE_ROWS = 50  # inspection.min_read: a step file holds as many completions as the gate needs read (the top-reward ones always among them)
MAX_COMPLETION_LENGTH = 1024  # a completion this long was truncated
WATCH_SHA256 = '3f8adbe12f08ceece1637e0d4837f491997a30e98b3cebf56e6c167c77fabcc2'  # config/watch.py as rendered: an edited inspection callback does not train
STOPPED_EXIT = 3  # exit status when the inspection callback stopped the run (launch.sh passes it on)
WATCHDOG_SHA256 = 'eed4cb849580c1ac5f2b9027619a17d0b1487359d28b3bb30fc8fdd4f2f145a6'  # config/watchdog.py as rendered (the stall watchdog, the dry run)
PREFLIGHT_SHA256 = 'c3d386a8ef03608cb179cc09770106fd9c61947a5e3a747444b421437390abf7'  # config/preflight.py as rendered (the completion-mask check)
MASK_TRUNCATED = False  # GRPOConfig.mask_truncated_completions below
SEQ_LEN = 256 + 1024  # prompt + completion tokens

# --- tracking (BRIEF.md "Tracking"): W&B when the person configured it, else Trackio when importable, else files only
WANDB_PROJECT = None  # the person's setting (userConfig), never the spec's
TRACKIO_PROJECT = 'finetune-tiny-e2e'  # its database: train/trackio/<project>.db unless TRACKIO_DIR is set

# --- the reward sandbox's CPU sizing (config/target.json "sandbox"; None: no sandboxed reward). Workers per pool are
# set through FINETUNE_SANDBOX_WORKERS from the host's CPUs: outside the gated rewards, so sizing never voids a PASS
SANDBOX = None
SANDBOX_MAX_WORKERS = 128  # the runner's most workers per pool (rewards_sandbox.py)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def bound_hashes(run_dir: Path) -> dict:
    """What the gate binds: rewards.py, each rewards_*.py, scored.jsonl, verdicts.jsonl, the reward section,
    the system prompt and generation settings (SAMPLING)."""
    files = [run_dir / "rewards.py"] if (run_dir / "rewards.py").is_file() else []
    files += sorted(p for p in run_dir.glob("rewards_*.py") if p.is_file())
    out = {p.name: sha256_file(p) for p in files}
    for name in ("scored.jsonl", "verdicts.jsonl"):
        if (run_dir / name).is_file():
            out[name] = sha256_file(run_dir / name)
    out["spec:rewards"] = REWARD_SECTION_SHA256
    for key, section in (("spec:sampling", SAMPLING), ("spec:inspection", INSPECTION)):
        out[key] = hashlib.sha256(json.dumps(section, sort_keys=True, separators=(",", ":"),
                                             ensure_ascii=False).encode("utf-8")).hexdigest()
    out["spec:dataset.heldout"] = HELDOUT_SHA256
    if HELDOUT_PATH is not None:
        held = Path(HELDOUT_PATH) if Path(HELDOUT_PATH).is_absolute() else run_dir / HELDOUT_PATH
        out["dataset.heldout:file"] = sha256_file(held) if held.is_file() else "missing"
    if DATA_FILTER_SHA256 is not None:  # train on exactly the filtered file the gate record binds
        out["spec:dataset.filter"] = DATA_FILTER_SHA256
        data = Path(DATASET["path"]) if Path(DATASET["path"]).is_absolute() else run_dir / DATASET["path"]
        out["dataset.filter:file"] = sha256_file(data) if data.is_file() else "missing"
    return out


def check_trl() -> None:
    """Refuse another TRL: a renamed field crashes, a changed default silently trains another algorithm."""
    try:
        import trl
    except ImportError as exc:
        sys.exit(f"refusing to train: TRL is not importable ({exc}) — fix: {sys.executable} -m pip install "
                 f"'trl=={TRL_VERSION}'")
    found = getattr(trl, "__version__", "unknown")
    if found != TRL_VERSION:
        sys.exit(f"refusing to train: TRL {found} is installed but this config was rendered for TRL {TRL_VERSION} "
                 f"— fix: {sys.executable} -m pip install 'trl=={TRL_VERSION}' (or re-render under TRL {found})")


def check_gate(cpu: bool = False, max_steps: int = 0) -> None:
    """Refuse to train unless the PASS gate record still binds exactly these rewards."""
    if not GATE_REQUIRED:
        smoke = cpu and 0 < max_steps <= UNGATED_SMOKE_STEPS
        if not smoke and os.environ.get("FINETUNE_UNGATED_OVERRIDE") != UNGATED_OVERRIDE:
            sys.exit(f"refusing to train: UNGATED preview (rendered with --no-gate; no one read these rewards' "
                     f"scores). It runs a smoke test only (--cpu --max-steps {UNGATED_SMOKE_STEPS} or fewer); pass the "
                     f"Phase 1 gate and re-render, or a person sets FINETUNE_UNGATED_OVERRIDE='{UNGATED_OVERRIDE}'")
        print("!" * 78 + "\n!!! UNGATED (--no-gate): " + ("smoke test" if smoke else "training, by a person's override")
              + " on rewards that NEVER passed the Phase 1 gate\n" + "!" * 78, file=sys.stderr)
        return
    path = RUN_DIR / "gate.json"
    try:
        gate = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        sys.exit(f"refusing to train: no readable gate record at {path} ({exc})")
    if not isinstance(gate, dict):  # a hand-edited `[1]` is a refusal with the path, not a traceback
        sys.exit(f"refusing to train: {path} is not a gate record (a JSON object); re-run `finetune inspect gate`")
    if gate.get("status") != "PASS":
        sys.exit(f"refusing to train: {path} says {gate.get('status')!r}, not PASS")
    if gate.get("hashes") != GATE_HASHES:
        sys.exit(f"refusing to train: {path} changed since this config was rendered; re-render config/")
    acts = {n: sha256_file(RUN_DIR / n) if (RUN_DIR / n).is_file() else None for n in PERSON_ACTS}
    void = sorted(n for n in PERSON_ACTS if acts[n] != PERSON_ACTS[n])
    if void:
        sys.exit(f"refusing to train: {', '.join(void)} changed after this config was rendered (a verdict, "
                 "acknowledgement, confirmation or licence that changes voids the render); re-run "
                 "`finetune inspect gate` and `finetune config render`")
    current = bound_hashes(RUN_DIR)
    changed = sorted(k for k in set(current) | set(GATE_HASHES) if current.get(k) != GATE_HASHES.get(k))
    if "spec:sampling" in changed:
        sys.exit("refusing to train: SAMPLING (system prompt, generation settings) is not what the gated samples were "
                 "drawn with (spec:sampling changed since the gate PASSed); re-render config/ from the gated spec, or "
                 "re-sample (`finetune inspect sample`), re-score, read and re-gate")
    if "spec:inspection" in changed:
        sys.exit("refusing to train: INSPECTION (the spec's inspection section: how often the live hacking stop "
                 "looks) is not what the gate PASSed (spec:inspection changed); re-render config/ from the gated spec")
    if changed:
        sys.exit(f"refusing to train: {', '.join(changed)} changed since the gate PASSed; re-run Phase 1")
    check_score_report(current)


def check_score_report(current: dict) -> None:
    """The score report the gate judged is still there and still binds these rewards and scores."""
    path = RUN_DIR / "score_report.json"
    if SCORE_REPORT_SHA256 is None or not path.is_file() or sha256_file(path) != SCORE_REPORT_SHA256:
        sys.exit(f"refusing to train: {path} is not the score report the gate PASSed; re-run Phase 1")
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
        inputs, scored = report["inputs"], report["scored_sha256"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        sys.exit(f"refusing to train: unreadable score report {path} ({exc})")
    stale = sorted(k for k in current if k.endswith(".py") and inputs.get(k) != current[k])
    if scored != current.get("scored.jsonl") or stale:
        sys.exit(f"refusing to train: {path} does not bind the current rewards and scores; re-run Phase 1")


def check_sampling(grpo_args) -> None:
    """The GRPOConfig samples with exactly the generation settings the gate bound (SAMPLING), nothing else."""
    for key, want in SAMPLING["generation"].items():
        if hasattr(grpo_args, key) and getattr(grpo_args, key) != want:
            sys.exit(f"refusing to train: GRPOConfig.{key} is {getattr(grpo_args, key)!r} but the gated samples were "
                     f"drawn with {want!r}; re-render config/ (`finetune config render`)")
    if getattr(grpo_args, "generation_kwargs", None):
        sys.exit("refusing to train: generation_kwargs would override the gated sampling settings; re-render config/")


def check_no_shadows() -> None:
    """Refuse a run directory holding a module that would stand in for a library the rewards use.

    RUN/math_verify.py (or any NAME.py / NAME/__init__.py there named like a standard-library module or an
    installed package) is found before the real one by a process started in the run directory: its code
    would become the reward's; sitecustomize.py / usercustomize.py run at every start-up on PYTHONPATH=. The
    plugin's `config render` and `status` refuse the same files."""
    from importlib import metadata

    known = set(sys.stdlib_module_names) | set(metadata.packages_distributions()) | {"sitecustomize", "usercustomize"}
    found = []
    for p in sorted(RUN_DIR.iterdir()):
        name = p.stem if p.suffix == ".py" else p.name if (p / "__init__.py").is_file() else None
        if name and name in known and not (p.name == "rewards.py" or p.name.startswith("rewards_")):
            found.append(p.name)
    if found:
        sys.exit(f"refusing to train: {', '.join(found)} in {RUN_DIR} would stand in for the library of that name "
                 "in a reward process; remove it")


def load_by_path(name: str, path: Path, data: bytes):
    """Execute ``data`` (the bytes read from ``path``) as module ``name``: never found by module search."""
    import importlib.abc
    import importlib.util

    class BytesLoader(importlib.abc.Loader):
        def create_module(self, spec):
            return None

        def exec_module(self, module):
            exec(compile(data, module.__spec__.origin, "exec"), module.__dict__)

    spec = importlib.util.spec_from_file_location(name, path, loader=BytesLoader())
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_gated_rewards():
    """rewards.py and its rewards_*.py helpers, executed from the exact bytes checked against the gate.

    Loaded by path (importlib.util.spec_from_file_location with a loader that runs the bytes read
    here), never by module search: a `rewards/` package, a stray module on sys.path or a file
    swapped after the check cannot stand in for the gated code.
    """
    paths = [RUN_DIR / "rewards.py"] + sorted(p for p in RUN_DIR.glob("rewards_*.py") if p.is_file())
    blobs = {}
    for p in paths:
        try:
            blobs[p.name] = p.read_bytes()
        except OSError as exc:
            sys.exit(f"refusing to train: cannot read {p} ({exc})")
    if GATE_REQUIRED:
        got = {name: hashlib.sha256(data).hexdigest() for name, data in blobs.items()}
        want = {k: v for k, v in GATE_HASHES.items() if k.endswith(".py")}
        if got != want:
            changed = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
            sys.exit(f"refusing to train: {', '.join(changed)} differ from what the gate PASSed; re-run Phase 1")
    # Agent-written files (a verifier, the environment, their own modules) are never executed here: rewards.py runs
    # them in the sandbox (rewards_sandbox's agent host), from the bytes checked above, handed over before it loads.
    agent = {n: blobs.pop(n) for n in list(blobs) if n.startswith(("rewards_user_", "rewards_lib_"))
             or n == "rewards_env.py"}
    for name in sorted(blobs, key=lambda n: n == "rewards.py"):  # library helpers first, rewards.py last
        if name == "rewards.py" and agent:
            sys.modules["rewards_sandbox"].provide_sources(RUN_DIR, agent)
        load_by_path(name[:-3], RUN_DIR / name, blobs[name])
    return sys.modules["rewards"]


def check_agent_sandbox(rewards) -> None:
    """Agent-written code runs only in the sandbox: a machine that cannot build it refuses here, in one line,
    before anything trains (never an unsandboxed fallback, never a run of None rewards)."""
    if not hasattr(rewards, "agent_host"):
        return
    try:
        rewards.agent_host().start()
    except Exception as exc:
        if not getattr(exc, "agent_code_refused", False):
            raise
        sys.exit(f"refusing to train: {exc}; {exc.fix}")


def rescore(func, rows: list) -> list:
    """``func`` on the scored rows as `finetune inspect score` calls it (batches of 32; a batch that raises is
    scored row by row, a row that raises gets None), each value a float or None (non-finite: None)."""
    import asyncio
    import math

    def call(batch):
        keys = sorted({k for r in batch for k in (r.get("columns") or {})} - {"prompts", "completions"})
        out = func(prompts=[r["prompt"] for r in batch],
                   completions=[[{"role": "assistant", "content": r["completion"]}] if r.get("conversational")
                                else r["completion"] for r in batch],
                   completion_ids=None, trainer_state=None, log_extra=lambda *a: None, log_metric=lambda *a: None,
                   **{k: [(r.get("columns") or {}).get(k) for r in batch] for k in keys})
        out = asyncio.run(out) if asyncio.iscoroutine(out) else list(out)
        if len(out) != len(batch):
            raise TypeError("one value per completion")
        return [None if v is None or not math.isfinite(float(v)) else float(v) for v in out]

    values = []
    for start in range(0, len(rows), 32):
        batch = rows[start:start + 32]
        try:
            values += call(batch)
        except Exception:  # as the scorer does: find the rows that raise
            for row in batch:
                try:
                    values += call([row])
                except Exception:
                    values.append(None)
    return values


def check_rescore(reward_funcs) -> None:
    """Before the first step, the gated rewards score the gated samples again and must give scored.jsonl's
    scores exactly: a gate.json assembled by hand (a good run's scored files copied beside a broken reward,
    every hash recomputed) binds scores these rewards never gave, and only a re-score shows it."""
    import math

    path = RUN_DIR / "scored.jsonl"
    try:
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        wanted = [{k: (None if v is None or not math.isfinite(float(v)) else float(v))
                   for k, v in (row.get("rewards") or {}).items()} for row in rows]
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        sys.exit(f"refusing to train: cannot re-read {path} ({exc}); re-run Phase 1")
    differ = []
    for func in reward_funcs:
        for row, want, got in zip(rows, wanted, rescore(func, rows)):
            if want.get(func.__name__) != got:
                differ.append(f"{row.get('id')}: {func.__name__} {got} (scored {want.get(func.__name__)})")
    if differ:
        sys.exit(f"refusing to train: the gated rewards do not give scored.jsonl's scores on {len(differ)} "
                 f"sample score(s) (e.g. {differ[0]}): this PASS was not computed on these rewards; re-run Phase 1 "
                 "(`finetune inspect score`, read, `finetune inspect gate`)")


def load_watch():
    """config/watch.py, the inspection callback rendered beside this file (by path, like the rewards)."""
    path = Path(__file__).resolve().parent / "watch.py"
    try:
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != WATCH_SHA256:
            sys.exit(f"refusing to train: {path} differs from the inspection callback rendered with this train.py; "
                     "re-render config/ (`finetune config render`)")
        watch = load_by_path("finetune_watch", path, data)
    except (OSError, SyntaxError) as exc:
        sys.exit(f"refusing to train: cannot load {path} ({exc}); re-render config/")
    if not hasattr(watch, "instrument"):
        sys.exit(f"refusing to train: {path} is not the inspection module this train.py needs; re-render config/")
    return watch


def load_verified(name: str, sha256: str, what: str):
    """config/<name> loaded by path from bytes whose sha256 must be ``sha256``, and those bytes."""
    path = Path(__file__).resolve().parent / name
    try:
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != sha256:
            sys.exit(f"refusing to train: {path} differs from the {what} rendered with this train.py; re-render "
                     "config/ (`finetune config render`)")
        return load_by_path("finetune_" + name[:-3], path, data), data
    except (OSError, SyntaxError) as exc:
        sys.exit(f"refusing to train: cannot load {path} ({exc}); re-render config/")


def check_completion_mask(preflight) -> None:
    """On a gated sample rendered as TRL renders it, the loss mask TRL builds is not empty and leaves every tool
    result out (config/preflight.py); refused before the model loads."""
    found = preflight.episode(RUN_DIR, SYSTEM_PROMPT)
    if found is None:
        print("pre-flight: no conversational gated sample beside the run: the completion mask is not checked",
              file=sys.stderr)
        return
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(MODEL)
    except (OSError, ValueError) as exc:  # not downloaded / not a model: one line, not transformers' traceback
        why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        sys.exit(f"refusing to train: cannot load the tokenizer of {MODEL} to check the completion mask ({why}); "
                 "download the model or fix `model:` in spec.yaml and re-render")
    if not getattr(tokenizer, "chat_template", None):
        return  # plain text: TRL stops a completion at the tokenizer's own EOS
    res = preflight.completion_mask_check(tokenizer, found[0], preflight.eos_ids(MODEL), MASK_TRUNCATED, found[1])
    if not res.ok:
        sys.exit(f"refusing to train: on {res.source}, {res.why} — fix: make the model's generation_config.json "
                 "eos_token_id include the token its chat template ends a turn with, or use a chat template TRL "
                 "renders tool calls with (trl/chat_templates)")
    print(f"pre-flight: completion mask on {res.source}: {res.why}", file=sys.stderr)


def parse_budgets(watchdog, given: list) -> dict:
    """--budget MOMENT=SECONDS, each checked before anything runs (one line naming the moments otherwise)."""
    try:
        return dict(watchdog.parse_budget(b) for b in given)
    except ValueError as exc:
        sys.exit(f"error: {exc}")


def start_watchdog(watchdog, source: bytes, dry_run: bool, overrides: dict):
    """The stall watchdog of this process: the dry run holds the start-up budgets; a real run the bounds its dry
    run measured (train/dryrun.json of this very train.py), else the module's defaults; --budget overrides."""
    this = watchdog.file_sha256(Path(__file__).resolve())
    record = None if dry_run else watchdog.read_dry_run(RUN_DIR / "train" / watchdog.DRY_RUN, this)
    budgets = watchdog.budgets_from(overrides, record)
    enabled = os.environ.get(watchdog.OFF_ENV, "").lower() != "off"
    if int(os.environ.get("RANK", "0")) == 0:  # a stall of an earlier launch says nothing about this one
        (RUN_DIR / "train" / watchdog.STALLED).unlink(missing_ok=True)
    dog = watchdog.Watchdog(budgets, RUN_DIR / "train", rank=int(os.environ.get("RANK", "0")), enabled=enabled,
                            memory=dry_run)  # a dry run also records each moment's peak GPU memory
    return dog.start(source), this


def finish_dry_run(watchdog, dog, this: str, used: list, attention: dict) -> None:
    """train/dryrun.json and the table of each moment's first duration beside the bound the real run gets, and the
    attention implementation the policy runs (eager: the T² softmax the memory estimate does not count)."""
    record = dict(watchdog.dry_run_record(dog, this, used), attention=attention)
    print(f"attention: {attention['implementation']}" + (f" — {attention['note']}" if "note" in attention else ""))
    if int(os.environ.get("RANK", "0")) == 0:
        out = RUN_DIR / "train" / watchdog.DRY_RUN
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        print("dry run: one optimiser step; first duration of each moment and the bound the run will be held to "
              f"(train/{watchdog.DRY_RUN}):\n" + watchdog.dry_run_table(record, dog.budgets))
    dog.close()


def size_sandbox() -> None:
    """Workers per sized sandbox pool in this process from THIS host's CPUs and the training processes sharing
    them (the rule of env_check.py's sandbox_workers), never more than rendered for the target; a value a person
    set in FINETUNE_SANDBOX_WORKERS is kept."""
    if not SANDBOX or not SANDBOX["sized_pools"] or os.environ.get("FINETUNE_SANDBOX_WORKERS"):
        return
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    local = int(os.environ.get("LOCAL_WORLD_SIZE") or SANDBOX["processes_per_node"])
    share = (cpus - SANDBOX["reserved_cpus"]) // max(local, 1) - 1 - SANDBOX["fixed_workers"]
    workers = max(1, min(SANDBOX_MAX_WORKERS, share // SANDBOX["sized_pools"]))
    if SANDBOX["workers_per_pool"]:
        workers = min(workers, SANDBOX["workers_per_pool"])
    os.environ["FINETUNE_SANDBOX_WORKERS"] = str(workers)


def report_to() -> tuple[str, str]:
    """Where TRL's metrics and the inspection's findings go besides train/ (GRPOConfig.report_to), and the line
    that says so (printed once the refusals have had their say: a refusal stays one line)."""
    import importlib.util

    if WANDB_PROJECT:
        if importlib.util.find_spec("wandb") is None:
            sys.exit(f"refusing to train: the person chose Weights & Biases (project {WANDB_PROJECT}) but wandb is not "
                     f"importable — fix: {sys.executable} -m pip install wandb (and `wandb login`)")
        os.environ.setdefault("WANDB_PROJECT", WANDB_PROJECT)
        return "wandb", f"tracking: Weights & Biases project {WANDB_PROJECT} (the person's setting)"
    if importlib.util.find_spec("trackio") is not None:
        os.environ.setdefault("TRACKIO_DIR", str(RUN_DIR / "train" / "trackio"))  # read when trackio is imported
        return "trackio", (f"tracking: Trackio project {TRACKIO_PROJECT} in {os.environ['TRACKIO_DIR']} — dashboard: "
                           f"TRACKIO_DIR={os.environ['TRACKIO_DIR']} trackio show --project {TRACKIO_PROJECT}")
    return "none", "tracking: files only (train/metrics.jsonl, train/inspections/); pip install trackio for a dashboard"


def gate_summary() -> dict:
    """What the run's tracker records of the gate: status, reading, blind statement, the rewards' digest."""
    if not GATE_REQUIRED:
        return {"status": "UNGATED (--no-gate preview)"}
    gate = json.loads((RUN_DIR / "gate.json").read_text(encoding="utf-8"))  # check_gate read it already
    counts, blind = gate.get("counts") or {}, gate.get("blind") or {}
    return {"status": gate.get("status"), "read": counts.get("read"), "agreed": counts.get("agreed"),
            "readers": ",".join(gate.get("readers") or []), "blind": blind.get("statement"),
            "rewards_sha256": GATE_HASHES.get("rewards.py"), "time": gate.get("time")}


def report_stop(callback) -> None:
    """A run the inspection callback stopped exits STOPPED_EXIT with the reason (train/STOPPED.json)."""
    if callback.stopped:
        why = callback.stopped
        print(f"STOPPED at step {why['step']} by the inspection callback ({why['rule']}, reward {why.get('reward')}): "
              f"{why['message']} — see train/STOPPED.json and train/inspections/", file=sys.stderr)
        sys.exit(STOPPED_EXIT)


METRICS_FILE = "metrics.jsonl"  # in output_dir: every logged step, live (finetune diagnose reads it mid-run)


def metrics_callback(path: Path):
    """A TrainerCallback appending each logged step to ``path`` as one JSON line.

    TRL writes trainer_state.json only when it saves a checkpoint (save_steps); this file lets
    `finetune diagnose` read a run after its first logged steps. Each line goes out in one write() on
    an O_APPEND descriptor, so a reader (or a kill) never sees two half lines interleaved; only the
    main process writes. A fresh run (global_step 0) starts the file anew; a resumed run appends.
    """
    import math

    from transformers import TrainerCallback

    def finite_or_text(value):
        # NaN / inf are not JSON: written as strings, which finetune diagnose reads back as numbers
        return str(value) if isinstance(value, float) and not math.isfinite(value) else value

    class MetricsJsonl(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                path.parent.mkdir(parents=True, exist_ok=True)
                flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | (os.O_TRUNC if state.global_step == 0 else 0)
                os.close(os.open(path, flags, 0o644))
                marker = path.parent / "provenance.json"  # the config these logs come from (finetune diagnose)
                if state.global_step == 0 or not marker.is_file():
                    marker.write_text(json.dumps({"train_py_sha256": sha256_file(Path(__file__)),
                                                  "person_acts": PERSON_ACTS}) + "\n", encoding="utf-8")

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or not logs:
                return
            row = {"step": state.global_step, "epoch": state.epoch}
            row.update({k: finite_or_text(v) for k, v in logs.items()})
            line = (json.dumps(row, default=str) + "\n").encode("utf-8")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, line)  # one write per line: appends never interleave
            finally:
                os.close(fd)

    return MetricsJsonl()


def prompt_key(value) -> str:
    """sha256 of a raw prompt value, as `config render` keyed the held-out rows (finetune.heldout.prompt_key)."""
    def norm(v):
        if isinstance(v, dict):
            return {str(k): norm(x) for k, x in v.items() if x is not None}
        return [norm(x) for x in v] if isinstance(v, list) else v

    text = json.dumps(norm(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def without_heldout(dataset):
    """The training rows minus the held-out ones `config render` carved; refused when those rows changed."""
    if not HELDOUT_ROWS:
        return dataset
    keys = [prompt_key(dataset[i][DATASET["prompt_column"]]) if i < len(dataset) else "" for i in HELDOUT_ROWS]
    if hashlib.sha256("\n".join(keys).encode("ascii")).hexdigest() != HELDOUT_PROMPTS_SHA256:
        sys.exit("refusing to train: the training data's held-out rows are not the ones config render carved (the "
                 "data changed); re-render config/ (`finetune config render`)")
    held = set(HELDOUT_ROWS)
    return dataset.select([i for i in range(len(dataset)) if i not in held])


def load_train_dataset():
    from datasets import load_dataset, load_from_disk

    path = str(Path(DATASET["path"]) if Path(DATASET["path"]).is_absolute() else RUN_DIR / DATASET["path"])
    if DATASET["format"] == "hf_disk":
        dataset = load_from_disk(path)
        dataset = dataset[DATASET["split"]] if hasattr(dataset, "keys") else dataset
    else:
        builder = {"jsonl": "json", "parquet": "parquet"}[DATASET["format"]]
        dataset = load_dataset(builder, data_files=path, split="train")
    dataset = without_heldout(dataset)
    if DATASET["prompt_column"] != "prompt":
        dataset = dataset.rename_column(DATASET["prompt_column"], "prompt")
    if SYSTEM_PROMPT:
        def with_system(row):
            prompt = row["prompt"]
            if isinstance(prompt, str):
                prompt = [{"role": "user", "content": prompt}]
            return {"prompt": [{"role": "system", "content": SYSTEM_PROMPT}] + list(prompt)}
        dataset = dataset.map(with_system)
    return dataset


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="smoke test on CPU: use_cpu, no bf16, no vLLM")
    parser.add_argument("--max-steps", type=int, default=-1, help="stop after N optimiser steps")
    parser.add_argument("--dry-run", action="store_true",
                        help="one optimiser step timing model load, vLLM start, the first weight sync and the first "
                        "generation (stops naming the moment that exceeds its budget); writes train/dryrun.json, the "
                        "watchdog's bounds for the real run")
    parser.add_argument("--budget", action="append", default=[], metavar="MOMENT=SECONDS",
                        help="the watchdog's budget of one moment (model_load, vllm_start, weight_sync, generation, "
                        "step), repeatable")
    parser.add_argument("--vllm-server-host", default='127.0.0.1',
                        help="address of the `trl vllm-serve` process (launch.sh starts it on this node)")
    args, _ = parser.parse_known_args(argv)
    cpu = args.cpu
    os.chdir(RUN_DIR)  # output_dir and data paths are relative to the run directory
    # before TRL is imported: trackio reads TRACKIO_DIR on import
    tracked, tracking_line = ("none", "") if args.dry_run else report_to()
    check_trl()
    check_gate(cpu, 1 if args.dry_run else args.max_steps)
    check_no_shadows()
    if tracking_line:
        print(tracking_line, file=sys.stderr)
    size_sandbox()  # before the rewards start their pools (the re-score below already uses them)
    watchdog, watchdog_source = load_verified("watchdog.py", WATCHDOG_SHA256, "watchdog")
    budgets = parse_budgets(watchdog, args.budget)
    preflight, _ = load_verified("preflight.py", PREFLIGHT_SHA256, "pre-flight checks")

    rewards = load_gated_rewards()
    REWARD_FUNCS, REWARD_WEIGHTS = rewards.REWARD_FUNCS, rewards.REWARD_WEIGHTS
    check_agent_sandbox(rewards)

    if [f.__name__ for f in REWARD_FUNCS] != REWARD_NAMES or list(REWARD_WEIGHTS) != REWARD_WEIGHTS_RENDERED:
        sys.exit("refusing to train: rewards.py does not match the spec this config was rendered for; re-render")
    if GATE_REQUIRED:
        check_rescore(REWARD_FUNCS)  # the gate's scores, recomputed from the bound samples and rewards
    check_completion_mask(preflight)  # after the gate's checks: it loads the tokenizer, they need nothing

    # each gated reward wrapped so what it scores is recorded; the callback inspects every INSPECT_EVERY_STEPS, reading
    # each reward's role, weight, threshold, range and episode mark from rewards.py's REWARD_META (as rendered)
    REWARD_FUNCS, inspector = load_watch().instrument(
        REWARD_FUNCS, meta=rewards.REWARD_META, every_steps=INSPECT_EVERY_STEPS,
        sample_rows=INSPECT_SAMPLE_ROWS, max_completion_length=MAX_COMPLETION_LENGTH,
        gate_summary=gate_summary())
    dataset = load_train_dataset()
    # every refusal above has had its say: from here on the sidecar holds the clock of each moment
    dog, this_sha256 = start_watchdog(watchdog, watchdog_source, args.dry_run, budgets)
    watchdog.watch_trl(dog)  # TRL's trainer start, vLLM start, weight sync and generation become timed moments

    # --- recipe:start (the GRPO recipe; skills/grpo-rlvr-training/SKILL.md shows this block)
    from trl import GRPOConfig, GRPOTrainer

    grpo_args = GRPOConfig(
        # algorithm: variant 'grpo' (the base recipe); every field pinned (explicit-fields contract)
        loss_type='grpo',  # sequence-mean GRPO loss (TRL 1.16's default is 'dapo')
        scale_rewards='group',  # advantages scaled by the group's reward std, as in the GRPO paper
        beta=0.01,  # the seed's base recipe: KL coefficient 0.01 vs the reference policy (base-recipe contract)
        epsilon=0.2,  # PPO clip range of the GRPO paper
        epsilon_high=0.2,  # symmetric clipping (decoupled clipping is DAPO)
        delta=None,  # no two-sided (INTELLECT-2) clipping: none of these recipes uses it
        importance_sampling_level='token',  # token-level ratios (sequence level is GSPO)
        num_iterations=1,  # policy updates per generation batch
        steps_per_generation=1,  # one generation per optimiser step (on-policy)
        num_generations=8,  # completions per prompt; 8 is the floor (fewer starves the group-relative baseline)
        temperature=1.0,  # generation.temperature (same as Phase 1 sampling)
        top_p=1.0,  # generation.top_p (same as Phase 1 sampling)
        top_k=0,  # generation.top_k (0 = off; same as Phase 1 sampling)
        min_p=None,  # generation.min_p (same as Phase 1 sampling)
        repetition_penalty=1.0,  # generation.repetition_penalty
        mask_truncated_completions=False,  # truncated completions still get their reward
        top_entropy_quantile=1.0,  # train on every token, not only the high-entropy ones
        multi_objective_aggregation='sum_then_normalize',  # weighted sum of the rewards, then group-normalised: the composite format + correctness reward
        reward_weights=[0.2, 1.0],  # the spec's reward weights, in reward order
        vllm_importance_sampling_correction=False,  # the recipe's loss has no vLLM/trainer importance-sampling correction (TRL 1.16 turns it on by default)
        vllm_importance_sampling_mode='sequence_mask',  # written so the field is not inherited; inactive while the correction is off
        vllm_importance_sampling_clip_min=None,  # inactive while the correction is off
        vllm_importance_sampling_clip_max=3.0,  # inactive while the correction is off
        off_policy_mask_threshold=None,  # no off-policy sequence masking in these recipes
        use_bias_correction_kl=False,  # the k3 KL estimator of the GRPO paper, without TRL 1.16's importance-weighted correction
        entropy_coef=0.0,  # no entropy bonus in the loss
        use_adaptive_entropy=False,  # no adaptive entropy bonus
        max_completion_length=1024,  # generation.max_completion_length, checked against the dataset's answers
        gradient_checkpointing=False,  # memory.recommend(): off: activations fit without recomputation (faster)
        # optimisation
        learning_rate=5e-07,  # the seed's settled GRPO learning rate (base-recipe contract)
        lr_scheduler_type='constant_with_warmup',  # flat after a short warm-up: RL rewards move slowly
        warmup_steps=10,  # training.warmup_steps: a short warm-up before the flat learning rate (the run-length check keeps it within 20% of the steps)
        weight_decay=0.0,  # no decay: the update is already KL/clip-bounded
        max_grad_norm=1.0,  # clip gradient spikes from rare high-advantage groups
        optim='adamw_torch',  # memory.recommend(): AdamW with fp32 states fits
        seed=3407,  # the seed's reference seed
        disable_dropout=True,  # dropout makes the policy's log-probs disagree with the sampler's
        # batch (validated for the target's training processes)
        per_device_train_batch_size=8,  # memory.recommend(): 8 completions per micro-batch: peak 45.9 GiB of 79.6 (58%) (LM head 1.5 GiB, activations 30.2 GiB)
        gradient_accumulation_steps=1,  # memory.recommend(): 8 × 7 process(es) × 1 = 56 completions per generation round = 7 prompts × 8 generations (divisible by num_generations)
        num_train_epochs=1.0,  # training.num_train_epochs
        max_steps=1 if args.dry_run else args.max_steps,  # training.max_steps (-1: run the epochs); rendered -1
        gradient_checkpointing_kwargs={'use_reentrant': False},  # non-reentrant checkpointing works with ZeRO-3 and PEFT
        # precision and model loading
        bf16=True and not cpu,  # bf16 mixed precision (the seed's recipe) (off for --cpu)
        use_cpu=False or cpu,  # GPU target
        model_init_kwargs={"dtype": "float32" if cpu else 'bfloat16'},  # memory.recommend(): bf16 weights; DeepSpeed keeps the fp32 master copy
        remove_unused_columns=False,  # reward functions receive every dataset column (answers, tests)
        shuffle_dataset=True,  # shuffle prompts each epoch
        # generation (vLLM)
        use_vllm=True and not cpu,  # 8 GPUs: `trl vllm-serve` on 1 GPU(s) as TP 1 × DP 1, training on 7 (server mode: generation and training do not contend for one device) (off for --cpu)
        vllm_mode='server',  # 8 GPUs: `trl vllm-serve` on 1 GPU(s) as TP 1 × DP 1, training on 7 (server mode: generation and training do not contend for one device)
        vllm_max_model_length=1280,  # max_prompt_length + max_completion_length (256 + 1024)
        vllm_server_host=args.vllm_server_host,  # the vllm-serve process on this node
        vllm_server_port=8000,  # launch.sh starts `trl vllm-serve` on this port
        vllm_server_timeout=600.0,  # large models take minutes to load in vllm-serve
        # logging and checkpoints (diagnose reads trainer_state.json)
        output_dir='train' + ("/dryrun" if args.dry_run else ""),  # the run directory's train/ (relative to the run directory) (a dry run: train/dryrun)
        logging_steps=1,  # training.logging_steps
        logging_first_step=True,  # log step 1: a broken reward shows immediately
        save_strategy="no" if args.dry_run else 'steps',  # checkpoints (with trainer_state.json) every save_steps (none in a dry run)
        save_steps=200,  # training.save_steps
        report_to=tracked,  # train.py chooses at start: W&B when the person configured it, else Trackio when importable, else files only (BRIEF.md: Tracking); trainer_state.json and train/metrics.jsonl are what diagnose licenses from
        project=TRACKIO_PROJECT,  # the Trackio project (BRIEF.md: Tracking)
        log_completions=True,  # print sample completions: keep reading outputs during training
        num_completions_to_print=2,  # a couple per logging step
        # stall bounds (config/watchdog.py also times each moment)
        ddp_timeout=1800,  # torch.distributed collectives between training processes abort after this many seconds (NCCL's watchdog); TRL 1.16's weight sync to vLLM has no timeout of its own: config/watchdog.py bounds it
    )
    check_sampling(grpo_args)
    callbacks = [metrics_callback(Path(grpo_args.output_dir) / METRICS_FILE), inspector,
                 watchdog.step_callback(dog)]  # append your own
    trainer = GRPOTrainer(
        model=MODEL,  # hub id
        args=grpo_args,
        reward_funcs=REWARD_FUNCS,  # rewards.py: format_ok, correct
        train_dataset=dataset,  # prompt-only: GRPO generates its own completions
        callbacks=callbacks,  # train/metrics.jsonl (every logged step); inspection every INSPECT_EVERY_STEPS
        peft_config=None,  # method: full (memory.recommend(): full fine-tuning fits: peak 45.9 GiB of 79.6 (58%))
    )
    inspector.attach(trainer)  # its inspection/* metrics go into the trainer's log
    trainer.train()
    # --- recipe:end

    if args.dry_run:
        attention = preflight.attention_check(trainer.model, grpo_args.per_device_train_batch_size, SEQ_LEN,
                                              bool(grpo_args.gradient_checkpointing))
        return finish_dry_run(watchdog, dog, this_sha256, [m for m in watchdog.MOMENTS if m in dog.durations],
                              attention)
    dog.close()
    trainer.save_model(grpo_args.output_dir)
    trainer.save_state()  # trainer_state.json (log history) for `finetune diagnose`
    report_stop(inspector)


if __name__ == "__main__":
    main()
