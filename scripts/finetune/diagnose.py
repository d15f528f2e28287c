"""`finetune diagnose RUN`: read a GRPO run's logs, name its symptoms, pick at most one change.

The seed's rule: train plain GRPO first and switch to a variant only when its failure mode shows —
entropy collapse / degenerate long CoT → DAPO, reward or length rising regardless of quality →
Dr.GRPO, a mixture-of-experts model → GSPO (required, not optional). Never pre-emptively.

RUN is a TRL output directory (trainer_state.json; else the live ``metrics.jsonl`` the rendered
train.py appends at every logged step; else its newest checkpoint-*/), a run directory (its ``train/``
is the output directory), a ``trainer_state.json``, or a JSONL file of logged dicts.
Every symptom carries its evidence (steps, values, trend statistics) so a reader can check it; the
thresholds are module constants, named and explained below.

Writes ``DIR/diagnosis/{diagnosis.json, report.md, curves.png}`` together (all or nothing).
``--apply`` sets the recommended variant in the run spec (the original kept beside it) and
re-renders ``config/`` through :func:`finetune.config.render`.
"""

from __future__ import annotations

import ast
import datetime as _dt
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from finetune import atomic, jsonio, rundir, watch
from finetune.errors import UserError
from finetune.watch import FLAT_GAIN, MIN_POINTS, P_SIGNIFICANT, rises

if TYPE_CHECKING:
    from finetune.spec import RunSpec

# ----------------------------------------------------------------------------------------------
# names (DESIGN.md "Diagnosis") and the variant each licenses (finetune.variants.VARIANT_SYMPTOM)

ENTROPY_COLLAPSE = "entropy_collapse"
LENGTH_DRIFT = "length_drift"
MOE_WITHOUT_GSPO = "moe_without_gspo"
ZERO_VARIANCE = "zero_variance_groups"
TRUNCATION = "truncation"
FLAT_REWARD = "flat_reward"
KL_BLOWUP = "kl_blowup"
NAN = "nan"
REWARD_HACKING = "reward_hacking"
STALE_WEIGHTS = "stale_vllm_weights"



PAPERS: dict[str, dict[str, str]] = {
    "dapo": {
        "paper": "DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
        "arxiv": "2503.14476",
        "reason": "Clip-Higher decouples the clip bounds (epsilon_high 0.28 > epsilon 0.2) so low-probability "
                  "tokens can still be raised: with a symmetric clip the policy's entropy collapses and "
                  "exploration stops. The token-level loss keeps long responses from being under-weighted, "
                  "overlong filtering masks truncated completions, and the KL term is dropped (beta 0).",
    },
    "dr_grpo": {
        "paper": "Understanding R1-Zero-Like Training: A Critical Perspective (Dr. GRPO)",
        "arxiv": "2503.20783",
        "reason": "GRPO divides each sequence's loss by its length and the advantages by the group's reward "
                  "std; the length normalisation favours long wrong answers (their per-token penalty "
                  "shrinks), so length grows while correctness does not. Dr. GRPO removes both "
                  "normalisations (loss_type 'dr_grpo', scale_rewards 'none').",
    },
    "gspo": {
        "paper": "Group Sequence Policy Optimization",
        "arxiv": "2507.18071",
        "reason": "Token-level importance ratios are unstable under mixture-of-experts routing (the experts "
                  "a token uses change between the rollout and the update), which collapses MoE training. "
                  "GSPO clips one length-normalised sequence-level ratio instead; it is required for MoE, "
                  "and only acts off-policy (more than one optimiser step per generation).",
    },
}

# ----------------------------------------------------------------------------------------------
# thresholds (why each value: see the comment beside it)

# MIN_POINTS (fewer logged training steps cannot support a trend test: verdict "insufficient"),
# P_SIGNIFICANT (Spearman's test level for "this series trends"), FLAT_GAIN (reward not rising: no
# significant upward trend, gain under 5% of its scale) and WINDOW_FRACTION (start/end levels are
# medians over the first/last 20% of the points, >= 3) live in finetune.watch with the trend statistics
# and the reward-hacking rule, which the rendered train.py's inspection callback stops a run with.
# Entropy collapse: the token entropy ends at most half its starting level, and once the fall has
# settled the reward does not keep rising (a significant trend that also gains >= FLAT_GAIN): the
# policy stopped exploring without getting better. A fall that comes with a still-rising reward, or
# with the reward at its maximum, is learning / convergence, not collapse.
ENTROPY_DROP = 0.5
# The reward is judged after the fall has settled (entropy within 10% of the way from its final level
# to its start), over at least 5 points.
ENTROPY_SETTLED = 0.1
MIN_PLATEAU_POINTS = 5
# A reward within 5% of its known maximum after the drop is a solved task, not a collapse.
SOLVED_FRACTION = 0.95
# Length drift: mean completion length rises by >= 25% with a significant positive trend, tracks the
# total reward (Spearman rho >= 0.5), and the correctness reward does not rise significantly.
LENGTH_RISE = 0.25
LENGTH_REWARD_RHO = 0.5
# Run health, judged on the second half of the run (the state the run is in, not its warm-up).
ZERO_STD_MAJORITY = 0.5  # median frac_reward_zero_std above this: most groups give no gradient
CLIPPED_MAJORITY = 0.5  # median completions/clipped_ratio above this: most completions truncated
KL_LIMIT = 1.0  # nats per token (TRL logs the mean per-token k3 estimate); healthy runs stay far below
BASELINE_POINTS = 3  # length drift is measured from the median of the first logged steps: a drift in the
#                      first 20% of the run would otherwise hide inside the start window
CAP_REACHED = 0.9  # a mean length at >= 90% of max_completion_length has climbed to the cap
UNKNOWN_SETTING = "unknown (no config found)"


@dataclass(frozen=True)
class Detector:
    """One symptom: the single entry from which the checks, the report, the priority and the docs derive.

    The variant a symptom licenses is not kept here: it lives once, in finetune.variants.VARIANT_SYMPTOM.
    """

    name: str
    method: str  # the Diagnoser method that runs it
    remedy: str  # what the recommendation does when this symptom is the one addressed
    doc: str  # one line: what the detector reads and when it fires


# In priority order: when several symptoms show, the first one's change is recommended — a structural
# requirement first (MoE), then a broken run (NaN: nothing else can be trusted), then a reward that pays
# for the wrong thing (no variant fixes that: the reward goes back to Phase 1), then the variant
# symptoms, then run health.
DETECTORS: tuple[Detector, ...] = (
    Detector(MOE_WITHOUT_GSPO, "moe", "switch the variant (GSPO is required for MoE)",
             "the model routes tokens to experts and the run uses token-level importance ratios"),
    Detector(NAN, "nan", "find the first non-finite metric and fix it before reading anything else",
             "any logged value is NaN or inf"),
    Detector(STALE_WEIGHTS, "stale_weights", "fix the weight sync before reading the rest of the run: vLLM "
             "samples from weights the policy has left",
             f"TRL's {watch.K_SAMPLING_GAP} (logged with vllm_importance_sampling_correction on) after the first "
             f"step has a median of at least {watch.STALE_MIN_GAP} nats/token and {watch.STALE_RISE:g}x its first "
             "step's level (trl#5312)"),
    Detector(REWARD_HACKING, "reward_hacking", "fix the reward that carries the rise and take it back through "
             "Phase 1; never a variant",
             f"the total reward (or a non-correctness reward) rises significantly (p < {P_SIGNIFICANT}, gain ≥ "
             f"{FLAT_GAIN:.0%} of its scale) while every correctness reward stays flat or falls; names the reward "
             "carrying the rise"),
    Detector(ENTROPY_COLLAPSE, "entropy_collapse", "switch the variant",
             f"token entropy loses at least {ENTROPY_DROP:.0%} of its starting level and the reward plateaus after "
             "the fall"),
    Detector(LENGTH_DRIFT, "length_drift", "switch the variant",
             f"completion length rises by at least {LENGTH_RISE:.0%} from the median of the first "
             f"{BASELINE_POINTS} logged steps (significant trend; a climb to max_completion_length counts) while "
             "correctness does not rise"),
    Detector(KL_BLOWUP, "kl_blowup", "back to the base learning rate, else read completions for a hack",
             f"the 3-point running median of the KL to the reference passes {KL_LIMIT:g} nat/token"),
    Detector(TRUNCATION, "truncation", "raise max_completion_length (after checking memory)",
             f"in the second half a median of more than {CLIPPED_MAJORITY:.0%} of the completions hit the length cap"),
    Detector(ZERO_VARIANCE, "zero_variance", "more completions per prompt, or filter the prompts",
             f"in the second half a median of more than {ZERO_STD_MAJORITY:.0%} of the groups give every completion "
             "the same reward (no gradient)"),
    Detector(FLAT_REWARD, "flat_reward", "no config change: re-check base success and the reward",
             f"the total reward has no significant upward trend and gains under {FLAT_GAIN:.0%} of its scale"),
)
SYMPTOMS = tuple(d.name for d in DETECTORS)
PRIORITY = SYMPTOMS
DETECTOR = {d.name: d for d in DETECTORS}


def symptom_variant() -> dict[str, str]:
    """symptom → the variant it licenses, inverted from finetune.variants.VARIANT_SYMPTOM (kept once there)."""
    from finetune.variants import VARIANT_SYMPTOM

    return {symptom: variant for variant, symptom in VARIANT_SYMPTOM.items()}

# TRL 1.16 log keys (the names GRPOTrainer.log writes into trainer_state.json's log_history)
K_REWARD = "reward"
K_ENTROPY = "entropy"
K_LENGTH = "completions/mean_length"
K_CLIPPED = "completions/clipped_ratio"
K_ZERO_STD = "frac_reward_zero_std"
K_KL = "kl"
K_CLIP_REGION = "clip_ratio/region_mean"
TRAINING_KEYS = ("loss", K_REWARD, K_ENTROPY, K_LENGTH, K_KL, "grad_norm")
NOT_METRICS = {"step", "epoch", "learning_rate", "num_tokens", "step_time", "total_flos"}
SUMMARY_KEYS = {"train_runtime", "train_samples_per_second", "train_steps_per_second", "train_loss"}


# ----------------------------------------------------------------------------------------------
# reading the logs


@dataclass
class Series:
    """One logged metric over training steps (only the steps where it was logged)."""

    key: str
    steps: list[int]
    values: list[float]

    def __len__(self) -> int:
        return len(self.values)

    def finite(self) -> Series:
        keep = [(s, v) for s, v in zip(self.steps, self.values) if math.isfinite(v)]
        return Series(self.key, [s for s, _ in keep], [v for _, v in keep])


@dataclass
class Logs:
    """The training entries of a log history, as one series per metric."""

    source: Path
    entries: list[dict[str, Any]]
    series: dict[str, Series]
    notes: list[str] = field(default_factory=list)

    def get(self, key: str) -> Series | None:
        s = self.series.get(key)
        return s if s is not None and len(s) else None

    @property
    def steps(self) -> list[int]:
        return [int(e["step"]) for e in self.entries]


def _newest_checkpoint(folder: Path) -> Path | None:
    found = []
    for p in folder.glob("checkpoint-*/trainer_state.json"):
        m = re.fullmatch(r"checkpoint-(\d+)", p.parent.name)
        if m:
            found.append((int(m.group(1)), p))
    return max(found)[1] if found else None


def choose_log_file(run: Path) -> Path:
    """The log file behind RUN (a file, a TRL output dir, or a run dir whose train/ is one).

    Per folder: the final trainer_state.json (save_state at the end of training); else the live
    ``metrics.jsonl`` the rendered train.py appends at every logged step, unless a checkpoint's
    trainer_state.json is newer (a run not launched through train.py); else the newest checkpoint.
    """
    if run.is_file():
        return run
    if not run.is_dir():
        raise UserError(f"no such file or directory: {run}",
                        fix="pass a TRL output dir, a trainer_state.json or a JSONL of logged dicts")
    for folder in (run, run / rundir.TRAIN_DIR):
        if (folder / "trainer_state.json").is_file():
            return folder / "trainer_state.json"
        newest = _newest_checkpoint(folder) if folder.is_dir() else None
        live = folder / rundir.METRICS
        if live.is_file() and live.stat().st_size > 0 and (
                newest is None or live.stat().st_mtime_ns >= newest.stat().st_mtime_ns):
            return live
        if newest is not None:
            return newest
    raise UserError(f"no trainer_state.json or {rundir.METRICS} in {run} (nor in its train/ or checkpoint-*/ "
                    "folders)", where=str(run),
                    fix="pass the output_dir of a run that logged a step (the rendered train.py writes "
                        f"train/{rundir.METRICS} live), a trainer_state.json, or a JSONL of its logged dicts")


def _parse_json_file(path: Path) -> list[Any]:
    """The logged dicts of a trainer_state.json (its log_history), a JSON list, or a JSONL file."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"not UTF-8 text (byte {exc.start})", where=str(path), fix="pass the run's log file") from None
    if not text.strip():
        raise UserError("the log file is empty", where=str(path), fix="pass the log of a run that trained")
    if path.suffix != ".jsonl":
        try:
            doc = jsonio.loads(text, allow_nan=True)  # TRL writes NaN for a NaN loss: that is a symptom here
        except RecursionError:
            raise UserError(f"JSON nested too deep to read (over {sys.getrecursionlimit()} levels)", where=f"{path}:1",
                            fix="pass the run's own trainer_state.json or metrics.jsonl") from None
        except json.JSONDecodeError as exc:
            if exc.msg != "Extra data":  # "Extra data" after the first object: a JSONL under another name
                raise UserError(f"malformed or truncated JSON ({exc.msg})", where=f"{path}:{exc.lineno}",
                                fix="pass a complete trainer_state.json (copy it again once the run has saved "
                                    "it)") from None
        else:
            if isinstance(doc, dict) and "log_history" in doc:
                doc = doc["log_history"]
            if not isinstance(doc, list):
                raise UserError("no log_history list in this JSON", where=str(path),
                                fix="pass TRL's trainer_state.json, or a JSONL with one logged dict per line")
            return doc
    rows = []
    lines = text.split("\n")  # \n only: U+2028 inside a string is not a line break
    if path.name == rundir.METRICS and not text.endswith("\n"):
        lines = lines[:-1]  # the live log's last line is still being written: read up to the last whole one
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(jsonio.loads(line, allow_nan=True))
        except json.JSONDecodeError as exc:
            raise UserError(f"malformed or truncated JSON line ({exc.msg} at column {exc.colno})",
                            where=f"{path}:{n}", fix="remove or repair that line") from None
        except RecursionError:
            raise UserError("JSON line nested too deep to read", where=f"{path}:{n}",
                            fix="remove or repair that line") from None
    return rows


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value.strip().lower() in {"nan", "inf", "-inf", "infinity", "-infinity"}:
        return float(value.strip().lower().replace("infinity", "inf"))
    return None


def _is_read_metric(key: str) -> bool:
    """A TRL metric this diagnosis reads (a malformed value there is bad input, not noise)."""
    return key in TRAINING_KEYS or key in (K_CLIPPED, K_ZERO_STD, "reward_std") or key.startswith(
        ("rewards/", "completions/", "clip_ratio/"))


def load_logs(run: str | Path) -> Logs:
    """Read the training entries of a run's log history. Malformed, truncated or empty → UserError."""
    path = choose_log_file(Path(run))
    rows = _parse_json_file(path)

    def where(i: int) -> str:
        return f"{path}: entry {i + 1}"

    by_step: dict[int, dict[str, Any]] = {}
    notes: list[str] = []
    ignored: set[str] = set()
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise UserError(f"a logged entry is {type(row).__name__}, not a dict", where=where(i),
                            fix="each entry must be one dict of metrics, as TRL logs them")
        if SUMMARY_KEYS & row.keys() or not any(k in row for k in TRAINING_KEYS) \
                or all(k.startswith("eval_") for k in row if k not in NOT_METRICS):
            continue  # the end-of-training summary, eval entries and the like
        if "step" not in row:
            raise UserError("a training entry has no 'step'", where=where(i),
                            fix="log with TRL (trainer_state.json has step in every entry) or add the step")
        step = _number(row["step"])
        if step is None or not math.isfinite(step) or step < 0 or step != int(step):
            raise UserError(f"'step' is {row['step']!r}, not a non-negative integer", where=where(i),
                            fix="repair the entry")
        clean: dict[str, Any] = {"step": int(step)}
        for key, value in row.items():
            if key == "step" or key.startswith("eval_"):
                continue
            num = _number(value)
            if num is None and value is not None:
                if not _is_read_metric(key):  # something else's field (a string, a list): not ours to judge
                    ignored.add(key)
                    continue
                raise UserError(f"'{key}' is {value!r}, not a number", where=where(i),
                                fix="repair the entry (metrics are numbers; NaN may be written as NaN)")
            clean[key] = math.nan if num is None else num
        if int(step) in by_step:
            notes.append(f"step {int(step)} is logged twice (a resumed run?); the later entry is used")
        by_step[int(step)] = clean
    if not by_step:
        raise UserError("no training entries in the log (empty, or only summary / eval entries)", where=str(path),
                        fix="pass the log of a run that trained and logged (logging_steps)")
    if ignored:
        notes.append(f"non-numeric fields ignored (not metrics this diagnosis reads): {', '.join(sorted(ignored))}")
    entries = [by_step[s] for s in sorted(by_step)]
    keys = sorted({k for e in entries for k in e if k not in NOT_METRICS})
    series = {k: Series(k, [e["step"] for e in entries if k in e], [e[k] for e in entries if k in e]) for k in keys}
    return Logs(path, entries, series, notes)


# ----------------------------------------------------------------------------------------------
# the run around the logs: run directory, spec, config, reward roles, model


@dataclass
class RunContext:
    """What the diagnosis knows about the run besides its logs, and where each fact came from."""

    run_dir: Path
    spec_path: Path | None = None
    spec: RunSpec | None = None
    config: dict[str, Any] = field(default_factory=dict)
    config_source: str | None = None
    roles: dict[str, str] = field(default_factory=dict)
    maxima: dict[str, float] = field(default_factory=dict)
    minima: dict[str, float] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)
    roles_source: str | None = None
    assumed: dict[str, str] = field(default_factory=dict)  # roles guessed from names (ROLE_STEMS)
    unassumed: list[str] = field(default_factory=list)  # logged rewards whose role nothing says
    model: str | None = None
    model_info: Any = None
    model_source: str | None = None
    notes: list[str] = field(default_factory=list)


def _run_dir_of(run: Path, log_file: Path) -> Path:
    """The pipeline run directory: the one holding spec.yaml / config/ above the log, else the log's folder."""
    start = run if run.is_dir() else log_file.parent
    folder = start
    for _ in range(3):  # RUN, its train/ parent, a checkpoint's grandparent
        if (folder / rundir.SPEC).is_file() or (folder / rundir.CONFIG_DIR / "grpo_config.yaml").is_file():
            return folder
        if folder.parent == folder:
            break
        folder = folder.parent
    return start


def _read_yaml(path: Path) -> dict[str, Any]:
    from finetune.yamlio import load_with_lines

    data, _ = load_with_lines(path)
    if not isinstance(data, dict):
        raise UserError("expected a YAML mapping of GRPOConfig kwargs", where=str(path), fix="pass the run's config")
    return data


_SAFE_ARG_MODULES = ("transformers.", "trl.", "accelerate.", "peft.")
# TrainingArguments pickles accelerate's process state too (a plain attribute bag when unpickled).
_SAFE_ARG_CLASSES = {"accelerate.state.PartialState"}


def _training_args(path: Path) -> dict[str, Any] | None:
    """TRL's saved training_args.bin, read with torch's weights-only unpickler (no arbitrary code).

    Only dataclasses and enums defined by transformers / TRL / accelerate / peft are allowed, one by
    one as the unpickler names them; anything else leaves the config unknown.
    """
    import dataclasses
    import enum
    import importlib

    import torch

    allowed: list[Any] = []
    for _ in range(16):
        try:
            with torch.serialization.safe_globals(allowed):
                args = torch.load(path, weights_only=True)
            return args.to_dict() if hasattr(args, "to_dict") else None
        except Exception as exc:  # noqa: BLE001 — any failure means "config unknown", never a crash
            m = re.search(r"Unsupported global: GLOBAL ([\w.]+)\.(\w+)", str(exc))
            if not m or not m.group(1).startswith(_SAFE_ARG_MODULES):
                return None
            try:
                obj = getattr(importlib.import_module(m.group(1)), m.group(2))
            except (ImportError, AttributeError):
                return None
            named = f"{m.group(1)}.{m.group(2)}" in _SAFE_ARG_CLASSES
            if not (isinstance(obj, type) and (named or dataclasses.is_dataclass(obj) or issubclass(obj, enum.Enum))):
                return None
            allowed.append(obj)
    return None


def _reward_meta_from_rewards_py(path: Path) -> list[dict[str, Any]] | None:
    """REWARD_META of a rendered rewards.py, read as a literal (the file is never imported or run)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "REWARD_META"
                                                for t in node.targets):
            try:
                meta = ast.literal_eval(node.value)
            except ValueError:
                return None
            return meta if isinstance(meta, list) and all(isinstance(m, dict) for m in meta) else None
    return None


def _spec_config(spec: RunSpec) -> dict[str, Any]:
    """The GRPOConfig kwargs a spec implies where it states them (the renderer fills the rest)."""
    from finetune.variants import VARIANT_BETA, VARIANTS

    t, g = spec.training, spec.generation
    cfg: dict[str, Any] = {f: p.value for f, p in VARIANTS[spec.variant].items()}
    beta = VARIANT_BETA[spec.variant]
    cfg.update(learning_rate=t.learning_rate, beta=t.beta if beta is None else beta,
               num_generations=t.num_generations, num_iterations=t.num_iterations,
               max_completion_length=g.max_completion_length, temperature=g.temperature, top_p=g.top_p,
               reward_weights=[r.weight for r in spec.rewards])
    for name in ("per_device_train_batch_size", "gradient_accumulation_steps", "steps_per_generation"):
        if getattr(t, name) is not None:
            cfg[name] = getattr(t, name)
    return cfg


# Reward roles read off the logged names when nothing declares them (a plain TRL run: no spec, no
# REWARD_META): word stems matched at the start of a word of the name (snake_case, kebab-case and
# camelCase split). They cover TRL's accuracy_reward / think_format_reward and open-r1's format_reward,
# tag_count_reward, len_reward, cosine_scaled_reward, soft_overlong_punishment. A name matching two roles
# ("math_format") is left unassumed: guessing there could hide a hack behind a "correctness" reward.
ROLE_STEMS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("correctness", re.compile(r"\b(?:accura|correct|exact|math|verif|pass|tests?\b)")),
    ("format", re.compile(r"\b(?:format|tags?\b|xml|boxed)")),
    ("shaping", re.compile(r"\b(?:length|len\b|verbos|cosine|overlong)")),
)
ASSUMED_ROLES = "assumed from the reward names (no spec or REWARD_META declares them)"
ROLE_OVERRIDE = ("--correctness NAME (repeatable) names the correctness rewards instead of these guesses; "
                 "--spec SPEC, or the run's rewards.py (REWARD_META) beside the log, declares every role")


def role_from_name(name: str) -> str | None:
    """The role a reward's name suggests (ROLE_STEMS), None when it suggests none or several."""
    words = " ".join(re.findall(r"[a-z]+", re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name).lower()))
    roles = [role for role, stem in ROLE_STEMS if stem.search(words)]
    return roles[0] if len(roles) == 1 else None


def _assume_roles(ctx: RunContext, names: list[str], *, explicit: bool) -> None:
    """Fill the roles of logged rewards nobody declared from their names; with --correctness, that flag
    alone says which rewards are correctness (a name is then never guessed into that role)."""
    for name in names:
        if name in ctx.roles:
            continue
        role = role_from_name(name)
        if role is not None and not (explicit and role == "correctness"):
            ctx.roles[name] = role
            ctx.assumed[name] = role
        else:
            ctx.unassumed.append(name)
    if ctx.assumed:
        ctx.roles_source = ASSUMED_ROLES if ctx.roles_source is None else f"{ctx.roles_source}; others {ASSUMED_ROLES}"


def _read_roles(ctx: RunContext, log_file: Path, correctness: list[str] | None,
                logged_rewards: set[str] | None) -> None:
    """Reward roles: the spec > rewards.py's REWARD_META > --correctness > the names (ROLE_STEMS); only
    names the logs carry count."""
    meta_path = next((p for p in (ctx.run_dir / rundir.REWARDS, log_file.parent / rundir.REWARDS) if p.is_file()),
                     ctx.run_dir / rundir.REWARDS)
    meta = _reward_meta_from_rewards_py(meta_path) if meta_path.is_file() else None
    for m in meta or []:
        for src, dst in (("max", ctx.maxima), ("min", ctx.minima)):
            if isinstance(m.get("name"), str) and isinstance(m.get(src), (int, float)):
                dst[m["name"]] = float(m[src])
    spec_names = [r.name for r in ctx.spec.rewards] if ctx.spec is not None else []
    if ctx.spec is not None and spec_names and (logged_rewards is None or set(spec_names) & logged_rewards):
        for r in ctx.spec.rewards:
            ctx.roles[r.name] = r.effective_role
            ctx.weights[r.name] = r.weight
        ctx.roles_source = str(ctx.spec_path)
    elif meta:
        if spec_names:
            ctx.notes.append(f"the spec's rewards ({', '.join(spec_names)}) are not in the logs: reward roles "
                             f"taken from {meta_path} instead")
        weights = ctx.config.get("reward_weights") or [1.0] * len(meta)
        for m, w in zip(meta, weights):
            if isinstance(m.get("name"), str):
                ctx.roles[m["name"]] = str(m.get("role"))
                ctx.weights[m["name"]] = float(w)
        ctx.roles_source = f"{meta_path} (REWARD_META)"
    if correctness:
        for name in correctness:
            ctx.roles[name] = "correctness"
        ctx.roles_source = "--correctness"
    if ctx.roles_source in (None, "--correctness") and logged_rewards:
        _assume_roles(ctx, sorted(logged_rewards), explicit=bool(correctness))


def load_context(run: Path, log_file: Path, spec_path: Path | None = None,
                 model: str | None = None, correctness: list[str] | None = None,
                 logged_rewards: set[str] | None = None) -> RunContext:
    """Find the spec, the run's GRPOConfig kwargs, the reward roles and the model config.

    ``logged_rewards`` (the names behind ``rewards/<name>/mean`` in the logs) keeps a spec that
    does not describe this run's rewards from assigning roles to nothing.
    """
    from finetune.spec import load_spec

    ctx = RunContext(run_dir=_run_dir_of(run, log_file))
    candidate = spec_path or ctx.run_dir / rundir.SPEC
    if spec_path is not None and not spec_path.is_file():
        raise UserError(f"no such spec: {spec_path}", where="--spec", fix="pass the run's spec.yaml")
    if candidate.is_file():
        ctx.spec_path, ctx.spec = candidate, load_spec(candidate)

    # the config the run trained with: rendered > beside the logs > TRL's saved args > implied by the spec
    for path in (ctx.run_dir / rundir.CONFIG_DIR / "grpo_config.yaml", log_file.parent / "grpo_config.yaml"):
        if path.is_file():
            ctx.config, ctx.config_source = _read_yaml(path), str(path)
            break
    else:
        bin_path = log_file.parent / "training_args.bin"
        args = _training_args(bin_path) if bin_path.is_file() else None
        if args is not None:
            ctx.config, ctx.config_source = args, str(bin_path)
        elif ctx.spec is not None:
            ctx.config, ctx.config_source = _spec_config(ctx.spec), f"{ctx.spec_path} (implied by the spec)"
        else:
            ctx.notes.append("no grpo_config.yaml, training_args.bin or spec found: the current config is "
                             "unknown, so the recommended change is shown against the base GRPO recipe")

    _read_roles(ctx, log_file, correctness, logged_rewards)

    # the model: --model > the config's model_name_or_path > the spec's model > a config.json beside the logs
    ctx.model = model or ctx.config.get("model_name_or_path") or (ctx.spec.model if ctx.spec else None)
    base = ctx.spec_path.parent if ctx.spec_path else ctx.run_dir
    if ctx.model is None and (log_file.parent / "config.json").is_file():
        ctx.model = str(log_file.parent)
    if ctx.model is not None:
        from finetune.models import load_model_info

        model_config = ctx.spec.model_config_path if ctx.spec is not None and not model else None
        try:
            ctx.model_info = load_model_info(str(ctx.model), model_config, base_dir=base)
            ctx.model_source = str(ctx.model)
        except UserError as exc:
            ctx.notes.append(f"model config not read ({exc.what}): the MoE check was not made")
    else:
        ctx.notes.append("no model named (no --model, config model_name_or_path or spec): the MoE check was not made")
    return ctx


# ----------------------------------------------------------------------------------------------
# statistics


def _median(xs: list[float]) -> float:
    return watch.median(xs)


def _window(n: int) -> int:
    return watch.window(n)


def trend(s: Series) -> dict[str, Any]:
    """Spearman rho / p against the step, Theil-Sen slope, and start/end levels (finetune.watch.trend)."""
    f = s.finite()
    return watch.trend(s.key, f.steps, f.values)


def _correlation(a: Series, b: Series) -> dict[str, Any]:
    from scipy import stats

    common = {s: v for s, v in zip(a.steps, a.values) if math.isfinite(v)}
    pairs = [(common[s], v) for s, v in zip(b.steps, b.values) if s in common and math.isfinite(v)]
    if len(pairs) < 3 or len({x for x, _ in pairs}) < 2 or len({y for _, y in pairs}) < 2:
        return {"spearman_rho": 0.0, "p_value": 1.0, "points": len(pairs)}
    rho, p = stats.spearmanr([x for x, _ in pairs], [y for _, y in pairs])
    return {"spearman_rho": float(rho), "p_value": float(p), "points": len(pairs)}


def _after(s: Series, step: int) -> Series:
    keep = [(a, v) for a, v in zip(s.steps, s.values) if a >= step]
    return Series(s.key, [a for a, _ in keep], [v for _, v in keep])


def _second_half(s: Series) -> Series:
    f = s.finite()
    half = len(f) // 2
    return Series(s.key, f.steps[half:], f.values[half:])


def _r(x: Any, digits: int = 4) -> Any:
    """JSON-safe copy: floats to ``digits`` significant digits, non-finite values to null."""
    if isinstance(x, float):
        return None if not math.isfinite(x) else float(f"{x:.{digits}g}")
    if isinstance(x, dict):
        return {k: _r(v, digits) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_r(v, digits) for v in x]
    return x


# ----------------------------------------------------------------------------------------------
# detectors: each returns (status, detail) — status "symptom" | "clear" | "not_evaluated"


@dataclass
class Finding:
    """One detector's outcome. ``symptom`` carries name, summary, evidence and the marked window."""

    name: str
    status: str
    why: str
    evidence: dict[str, Any] = field(default_factory=dict)
    window: tuple[int, int] | None = None

    def symptom(self) -> dict[str, Any]:
        out = {"name": self.name, "summary": self.why, "evidence": _r(self.evidence)}
        if self.window is not None:
            out["window"] = {"from_step": self.window[0], "to_step": self.window[1]}
        return out


class Diagnoser:
    """Runs every detector over one run's logs and context."""

    def __init__(self, logs: Logs, ctx: RunContext):
        self.logs, self.ctx = logs, ctx
        self.caveats: list[str] = list(logs.notes) + list(ctx.notes)

    # -- helpers

    def correctness_keys(self) -> list[str]:
        return [f"rewards/{n}/mean" for n, role in self.ctx.roles.items()
                if role == "correctness" and self.logs.get(f"rewards/{n}/mean") is not None]

    def correctness_series(self) -> Series | None:
        """The correctness reward (weighted sum when several); None when no reward is known to be correctness."""
        keys = self.correctness_keys()
        if not keys:
            return None
        if len(keys) == 1:
            return self.logs.get(keys[0])
        parts = [self.logs.series[k] for k in keys]  # each logged: correctness_keys() checked
        steps = sorted(set.intersection(*(set(p.steps) for p in parts)))
        values: list[float] = []
        for st in steps:
            values.append(sum(self.ctx.weights.get(k.split("/")[1], 1.0) * p.values[p.steps.index(st)]
                              for k, p in zip(keys, parts)))
        return Series("+".join(keys), steps, values)

    def rewards(self) -> watch.Rewards:
        return watch.Rewards(dict(self.ctx.roles), dict(self.ctx.weights), dict(self.ctx.minima),
                             dict(self.ctx.maxima))

    def reward_scale(self, key: str) -> float:
        """Span of a reward series: from REWARD_META's min/max when known (weighted, for the total),
        else the observed range; never 0 (finetune.watch.Rewards.scale)."""
        s = self.logs.get(key)
        return self.rewards().scale(key, {key: (s.steps, s.values)} if s is not None else {})

    def unexplained_rise(self) -> dict[str, Any] | None:
        """The total reward and the completion length both rising significantly while no reward is known to
        be the correctness reward: learning and a length-paying reward look alike there, so no variant may
        be recommended. None when a correctness reward is known or the two do not rise together."""
        if self.correctness_keys():
            return None
        reward, length = self.logs.get(K_REWARD), self.logs.get(K_LENGTH)
        if not (self.enough(reward) and self.enough(length)):
            return None
        rt, lt = trend(reward), trend(length)
        gain = (rt["end"] - rt["start"]) / self.reward_scale(K_REWARD)
        if not (rises(rt) and gain >= FLAT_GAIN and rises(lt)):
            return None
        names = sorted(n for n in (watch.reward_name(k) for k in self.logs.series) if n)
        which = f" (logged: {', '.join(names)})" if names else ""
        return {"evidence": {"reward_trend": rt, "reward_gain_over_scale": gain, "length_trend": lt},
                "why": (f"the total reward ({rt['start']:.3g} → {rt['end']:.3g}) and the completion length "
                        f"({lt['start']:.3g} → {lt['end']:.3g}) rise together and no reward is known to check "
                        "correctness, so a length-paying reward cannot be told from learning"),
                "decide": (f"to decide, pass --correctness NAME for the reward that checks the answer{which}, or "
                           "--spec SPEC; no variant is recommended until then"),
                "caveat": ("the total reward and the completion length rise together with no correctness reward "
                           "identified: any variant a symptom would license is held back (a variant never fixes "
                           "a reward that pays for length)")}

    def enough(self, s: Series | None) -> TypeGuard[Series]:
        return s is not None and len(s.finite()) >= MIN_POINTS

    # -- detectors

    def nan(self) -> Finding:
        bad: dict[str, int] = {}
        for e in self.logs.entries:
            for k, v in e.items():
                if k != "step" and isinstance(v, float) and not math.isfinite(v) and k not in bad:
                    bad[k] = e["step"]
        if not bad:
            return Finding(NAN, "clear", "every logged value is finite")
        first = min(bad.values())
        keys = sorted(bad, key=lambda k: (bad[k], k))
        return Finding(NAN, "symptom", f"non-finite values from step {first} ({', '.join(keys[:6])})",
                       {"first_step": first, "first_step_per_key": {k: bad[k] for k in keys}},
                       (first, self.logs.steps[-1]))

    def stale_weights(self) -> Finding:
        s = self.logs.get(watch.K_SAMPLING_GAP)
        f = s.finite() if s is not None else None
        d = watch.stale_weights((f.steps, f.values) if f is not None and len(f) else None)
        if d.status == "not_evaluated" and self.ctx.config.get("use_vllm") is False:
            return Finding(STALE_WEIGHTS, "not_evaluated", "the run generates with transformers (use_vllm off)")
        return Finding(STALE_WEIGHTS, d.status, d.why, d.evidence, d.window)

    def moe(self) -> Finding:
        info = self.ctx.model_info
        if info is None:
            return Finding(MOE_WITHOUT_GSPO, "not_evaluated", "the model config was not found")
        if not getattr(info, "is_moe", False):
            return Finding(MOE_WITHOUT_GSPO, "clear", f"{info.architecture}: dense (no routed experts)")
        level = self.ctx.config.get("importance_sampling_level")
        ev = {"model": self.ctx.model_source, "architecture": info.architecture, "num_experts": info.num_experts,
              "experts_per_token": info.experts_per_token, "importance_sampling_level": level,
              "config_source": self.ctx.config_source}
        if level == "sequence":
            return Finding(MOE_WITHOUT_GSPO, "clear", "MoE model trained with sequence-level ratios (GSPO)", ev)
        known = "" if level is not None else " (the run's config was not found: assumed token-level)"
        return Finding(MOE_WITHOUT_GSPO, "symptom",
                       f"{info.architecture} routes each token to {info.experts_per_token} of {info.num_experts} "
                       f"experts, and the run uses importance_sampling_level={level or 'token'!r}{known}", ev)

    def entropy_collapse(self) -> Finding:
        ent = self.logs.get(K_ENTROPY)
        if not self.enough(ent):
            return Finding(ENTROPY_COLLAPSE, "not_evaluated", f"fewer than {MIN_POINTS} logged entropy values")
        e = ent.finite()
        t = trend(e)
        start = t["start"]
        if not start > 0:
            return Finding(ENTROPY_COLLAPSE, "not_evaluated", "the starting entropy is not positive")
        # first step where a 3-point running median is at or below half the starting level
        halved_at = None
        for i in range(len(e)):
            window = e.values[max(0, i - 1): i + 2]
            if _median(window) <= start * (1 - ENTROPY_DROP):
                halved_at = i
                break
        drop = 1 - t["end"] / start
        ev = {"entropy_trend": t, "drop_fraction": drop, "threshold_drop": ENTROPY_DROP}
        if halved_at is None or drop < ENTROPY_DROP:
            moved = f"lost {drop:.0%}" if drop >= 0 else f"rose {-drop:.0%}"
            return Finding(ENTROPY_COLLAPSE, "clear", f"entropy {start:.3g} → {t['end']:.3g} "
                           f"({moved}; a collapse loses ≥ {ENTROPY_DROP:.0%})", ev)
        step_halved = e.steps[halved_at]
        ev["halved_at_step"] = step_halved
        # where the fall settled: the running median within ENTROPY_SETTLED of the final level
        floor = t["end"] + ENTROPY_SETTLED * (start - t["end"])
        settled_at = next((i for i in range(halved_at, len(e))
                           if _median(e.values[max(0, i - 1): i + 2]) <= floor), len(e) - 1)
        step_settled = e.steps[settled_at]
        ev["settled_at_step"] = step_settled
        # the reward is judged after the fall settled; when too few points follow it (a fall still
        # going at the end of the log), after the halving; failing that, over the whole run
        judged_from = next(c for c in (settled_at, halved_at, 0) if len(e) - c >= MIN_PLATEAU_POINTS or c == 0)
        ev["reward_judged_from_step"] = e.steps[judged_from]
        reward = self.correctness_series() or self.logs.get(K_REWARD)
        if reward is None:
            return Finding(ENTROPY_COLLAPSE, "not_evaluated", "entropy halved but no reward was logged", ev)
        rt = trend(_after(reward, e.steps[judged_from]))
        ev["reward_after_fall"] = rt
        name = reward.key.split("/")[1] if reward.key.startswith("rewards/") else None
        maximum = sum(self.ctx.weights.get(n, 1.0) * self.ctx.maxima[n] for n in self.ctx.roles
                      if n in self.ctx.maxima) if reward.key == K_REWARD else self.ctx.maxima.get(name or "")
        if maximum and rt["end"] >= SOLVED_FRACTION * maximum:
            ev["reward_max"] = maximum
            return Finding(ENTROPY_COLLAPSE, "clear", f"entropy fell as the task was solved ({reward.key} "
                           f"{rt['end']:.3g} of max {maximum:.3g}): convergence, not collapse", ev)
        gain = (rt["end"] - rt["start"]) / self.reward_scale(reward.key)
        ev["reward_gain_after_over_scale"] = gain
        if rises(rt) and gain >= FLAT_GAIN:
            return Finding(ENTROPY_COLLAPSE, "clear", f"entropy fell but {reward.key} kept rising after step "
                           f"{e.steps[judged_from]} (rho {rt['spearman_rho']:.2f}, p {rt['p_value']:.2g}): learning",
                           ev)
        return Finding(ENTROPY_COLLAPSE, "symptom",
                       f"entropy fell {drop:.0%} ({start:.3g} → {t['end']:.3g}; halved by step {step_halved}, "
                       f"settled by step {step_settled}) and {reward.key} plateaued after it ({rt['start']:.3g} → "
                       f"{rt['end']:.3g}, rho {rt['spearman_rho']:.2f}, p {rt['p_value']:.2g})", ev,
                       (e.steps[0], step_settled))

    def length_drift(self) -> Finding:
        length, reward = self.logs.get(K_LENGTH), self.logs.get(K_REWARD)
        if not (self.enough(length) and self.enough(reward)):
            return Finding(LENGTH_DRIFT, "not_evaluated", f"fewer than {MIN_POINTS} logged lengths / rewards")
        lt = trend(length)
        f = length.finite()
        baseline = _median(f.values[:BASELINE_POINTS])
        lt["start"] = baseline  # from the first logged steps: an early drift is still a drift
        rise = lt["end"] / baseline - 1 if baseline > 0 else math.inf
        corr = _correlation(length, reward)
        cap: Any = self.ctx.config.get("max_completion_length")
        at_cap = bool(cap) and lt["end"] >= CAP_REACHED * float(cap) and baseline < CAP_REACHED * float(cap)
        ev = {"length_trend": lt, "length_rise": rise, "baseline_points": BASELINE_POINTS,
              "length_vs_reward": corr, "max_completion_length": cap if cap else UNKNOWN_SETTING,
              "climbed_to_cap": at_cap}
        if not (rises(lt) and rise >= LENGTH_RISE):
            return Finding(LENGTH_DRIFT, "clear", f"completion length {baseline:.3g} (first {BASELINE_POINTS} "
                           f"steps) → {lt['end']:.3g} ({rise:+.0%}; drift needs ≥ +{LENGTH_RISE:.0%} with a "
                           "significant trend)", ev)
        correct = self.correctness_series()
        if correct is None:
            self.caveats.append("length rises with the reward, but no reward is known to be the correctness "
                                "reward (spec / REWARD_META roles, or --correctness NAME), so length drift "
                                "could not be told apart from learning")
            return Finding(LENGTH_DRIFT, "not_evaluated", "no correctness reward identified", ev)
        ct = trend(correct)
        ev["correctness_trend"] = ct
        if rises(ct):
            return Finding(LENGTH_DRIFT, "clear", f"length rose with {correct.key}, which rose too "
                           f"(rho {ct['spearman_rho']:.2f}): longer answers are better answers", ev)
        # the window: from the start to where the length reached 90% of its rise
        target = lt["start"] + 0.9 * (lt["end"] - lt["start"])
        reached = next((s for s, v in zip(f.steps, f.values) if v >= target), f.steps[-1])
        ev["reached_step"] = reached
        tracks = (f", tracking the reward (rho {corr['spearman_rho']:.2f})"
                  if corr["spearman_rho"] >= LENGTH_REWARD_RHO and corr["p_value"] < P_SIGNIFICANT else "")
        capped = f", up to the cap max_completion_length={cap}" if at_cap else ""
        return Finding(LENGTH_DRIFT, "symptom",
                       f"completion length rose {rise:.0%} ({lt['start']:.3g} tokens over the first "
                       f"{BASELINE_POINTS} steps → {lt['end']:.3g} by step {reached}{capped}, rho "
                       f"{lt['spearman_rho']:.2f}){tracks} while {correct.key} stayed flat ({ct['start']:.3g} → "
                       f"{ct['end']:.3g}, p {ct['p_value']:.2g})", ev, (f.steps[0], reached))

    def reward_hacking(self) -> Finding:
        """The total (or a non-correctness) reward rises while every correctness reward is flat or falls:
        finetune.watch.divergence, the rule the rendered train.py's inspection callback stops a run with."""
        series = {k: (f.steps, f.values) for k, s in self.logs.series.items()
                  if (k == K_REWARD or watch.reward_name(k)) and len(f := s.finite())}
        d = watch.divergence(series, self.rewards())
        if d.status == "not_evaluated" and d.why == "no correctness reward identified":
            self.caveats.append("no reward is known to be the correctness reward (spec / REWARD_META roles, or "
                                "--correctness NAME), so a reward rising without correctness could not be checked")
        return Finding(REWARD_HACKING, d.status, d.why, d.evidence, d.window)

    def zero_variance(self) -> Finding:
        s = self.logs.get(K_ZERO_STD)
        if not self.enough(s):
            return Finding(ZERO_VARIANCE, "not_evaluated", f"fewer than {MIN_POINTS} logged {K_ZERO_STD} values")
        scale = self.ctx.config.get("scale_rewards")
        agg = self.ctx.config.get("multi_objective_aggregation")
        if scale not in (None, "group", "none") or agg not in (None, "sum_then_normalize"):
            return Finding(ZERO_VARIANCE, "not_evaluated",
                           f"{K_ZERO_STD} is per group only under scale_rewards group/none with sum_then_normalize "
                           f"(this run: scale_rewards={scale!r}, multi_objective_aggregation={agg!r}): batch-wide here")
        if scale is None or agg is None:
            self.caveats.append(f"{K_ZERO_STD} read as a per-group fraction, assuming scale_rewards 'group'/'none' "
                                "and sum_then_normalize (the run's config does not say)")
        half = _second_half(s)
        level = _median(half.values)
        ev = {"median_second_half": level, "threshold": ZERO_STD_MAJORITY, "trend": trend(s),
              "scale_rewards": scale, "multi_objective_aggregation": agg,
              "caveat": "reward_std is batch-wide and cannot show this; frac_reward_zero_std counts groups"}
        if level <= ZERO_STD_MAJORITY:
            return Finding(ZERO_VARIANCE, "clear", f"median {level:.2f} of groups had identical rewards in the "
                           "second half", ev)
        return Finding(ZERO_VARIANCE, "symptom", f"in the second half a median {level:.0%} of groups gave every "
                       "completion the same reward (no advantage, no gradient)", ev, (half.steps[0], half.steps[-1]))

    def truncation(self) -> Finding:
        s = self.logs.get(K_CLIPPED)
        if not self.enough(s):
            return Finding(TRUNCATION, "not_evaluated", f"fewer than {MIN_POINTS} logged {K_CLIPPED} values")
        half = _second_half(s)
        level = _median(half.values)
        cap: Any = self.ctx.config.get("max_completion_length")
        ev = {"median_second_half": level, "threshold": CLIPPED_MAJORITY, "trend": trend(s),
              "max_completion_length": cap if cap else UNKNOWN_SETTING}
        if level <= CLIPPED_MAJORITY:
            return Finding(TRUNCATION, "clear", f"median {level:.0%} of completions hit the length cap in the "
                           "second half", ev)
        climbed = ""
        length = self.logs.get(K_LENGTH)
        if length is not None and len(length.finite()) >= BASELINE_POINTS:
            lf = length.finite()
            first, last = _median(lf.values[:BASELINE_POINTS]), _median(lf.values[-_window(len(lf)):])
            if cap and first < CAP_REACHED * float(cap) <= last:
                ev["length_climbed_from"] = first
                climbed = (f"; the length climbed there from {first:.3g} tokens, so this is length drift plus "
                           "truncation, not a cap that is simply too low")
        return Finding(TRUNCATION, "symptom", f"a median {level:.0%} of completions hit max_completion_length="
                       f"{ev['max_completion_length']} in the second half (trl#5697: a too-low cap zeroes the "
                       f"reward){climbed}", ev, (half.steps[0], half.steps[-1]))

    def flat_reward(self) -> Finding:
        s = self.logs.get(K_REWARD)
        if not self.enough(s):
            return Finding(FLAT_REWARD, "not_evaluated", f"fewer than {MIN_POINTS} logged rewards")
        t = trend(s)
        scale = self.reward_scale(K_REWARD)
        gain = (t["end"] - t["start"]) / scale
        ev = {"reward_trend": t, "gain_over_scale": gain, "scale": scale, "threshold": FLAT_GAIN}
        if rises(t) or gain >= FLAT_GAIN:
            return Finding(FLAT_REWARD, "clear", f"reward {t['start']:.3g} → {t['end']:.3g} (rho "
                           f"{t['spearman_rho']:.2f}, p {t['p_value']:.2g})", ev)
        how = "fell" if t["spearman_rho"] < 0 and t["p_value"] < P_SIGNIFICANT else "flat"
        return Finding(FLAT_REWARD, "symptom", f"reward {how}: {t['start']:.3g} → {t['end']:.3g} ({gain:+.1%} of its "
                       f"scale, rho {t['spearman_rho']:.2f}, p {t['p_value']:.2g})", ev,
                       (t["first_step"], t["last_step"]))

    def kl_blowup(self) -> Finding:
        s = self.logs.get(K_KL)
        if s is None:
            beta = self.ctx.config.get("beta")
            return Finding(KL_BLOWUP, "not_evaluated", "no kl logged (TRL logs it only when beta != 0"
                           + (f"; beta={beta}" if beta is not None else "") + ")")
        f = s.finite()
        smoothed = [_median(f.values[max(0, i - 1): i + 2]) for i in range(len(f))]
        over = [i for i, v in enumerate(smoothed) if v > KL_LIMIT]
        ev = {"max": max(f.values) if f.values else None, "max_running_median": max(smoothed) if smoothed else None,
              "limit_nats_per_token": KL_LIMIT, "trend": trend(f) if len(f) else None}
        if not over:
            return Finding(KL_BLOWUP, "clear", f"KL ≤ {KL_LIMIT} nats/token (3-point running median; max "
                           f"{ev['max_running_median']:.3g})" if smoothed else "no finite kl values", ev)
        first = f.steps[over[0]]
        ev["first_step_over"] = first
        return Finding(KL_BLOWUP, "symptom", f"KL to the reference passed {KL_LIMIT} nats/token at step {first} "
                       f"(running-median max {ev['max_running_median']:.3g})", ev, (first, f.steps[-1]))

    def run_all(self) -> list[Finding]:
        return [getattr(self, d.method)() for d in DETECTORS]


# ----------------------------------------------------------------------------------------------
# the one recommended change


def _current(config: dict[str, Any], name: str, fallback: Any) -> tuple[Any, bool]:
    return (config[name], True) if name in config else (fallback, False)


def variant_delta(config: dict[str, Any], variant: str) -> dict[str, dict[str, Any]]:
    """The kwargs that change from the run's config to ``variant`` (finetune.variants is the recipe)."""
    from finetune.variants import VARIANT_BETA, VARIANTS

    base = {f: p.value for f, p in VARIANTS["grpo"].items()}
    target = {f: p.value for f, p in VARIANTS[variant].items()}
    if VARIANT_BETA[variant] is not None:
        target["beta"] = VARIANT_BETA[variant]
    ga = config.get("gradient_accumulation_steps")
    if variant == "gspo" and int(config.get("num_iterations") or 1) == 1:
        spg = config.get("steps_per_generation") or ga
        if ga is not None and (spg is None or spg <= ga):
            target["steps_per_generation"] = 2 * int(ga)
        elif ga is None:
            target["num_iterations"] = 2  # off-policy without knowing the accumulation
    delta: dict[str, dict[str, Any]] = {}
    for name, new in target.items():
        old, known = _current(config, name, base.get(name))
        if old != new or not known and name not in base:
            delta[name] = {"from": old, "to": new, **({} if known else {"from_assumed": "base GRPO recipe"})}
    return delta


def current_variant(config: dict[str, Any], spec: RunSpec | None = None) -> str:
    """The variant the run trained with: the spec's, else read off its config (grpo when unknown)."""
    if spec is not None:
        variant: str = spec.variant
        return variant
    if config.get("importance_sampling_level") == "sequence":
        return "gspo"
    if config.get("loss_type") == "dr_grpo":
        return "dr_grpo"
    if config.get("loss_type") == "dapo" and (config.get("epsilon_high") or 0) > (config.get("epsilon") or 0.2):
        return "dapo"
    return "grpo"


def recommended_change(findings: list[Finding], config: dict[str, Any],
                       current: str = "grpo") -> tuple[str, dict[str, Any] | None]:
    """(recommended_variant, recommended_change) for the highest-priority symptom; none → stay on ``current``."""
    from finetune.spec import BASE_LEARNING_RATE

    shown = {f.name: f for f in findings if f.status == "symptom"}
    if not shown:
        return current, None
    name = next(n for n in PRIORITY if n in shown)
    if name == REWARD_HACKING:  # never a variant: the reward pays for the wrong thing
        carrier = shown[name].evidence.get("carrier")
        target = f"the reward `{carrier}`" if carrier else "the rewards (the total rises without correctness)"
        return current, {"kind": "reward", "addresses": name, "reward": carrier, "variant": current, "kwargs": {},
                         "action": f"fix {target} and take it back through Phase 1 (`finetune inspect sample / "
                                   "score / review / gate`) on completions like the ones this run ends with; no "
                                   "variant fixes a reward that pays for something other than correctness"}
    variant = symptom_variant().get(name)
    if variant is not None:
        delta = variant_delta(config, variant)
        if variant != current or delta:
            return variant, {"kind": "variant", "addresses": name, "variant": variant, "kwargs": delta,
                             **PAPERS[variant],
                             "apply": "finetune diagnose RUN --apply "
                                      "(sets `variant` in the spec and re-renders config/)"}
        # already on the variant meant for this symptom: switching again changes nothing
        return current, {"kind": "health", "addresses": name, "variant": current, "kwargs": {},
                         "action": f"the run already trains with {variant}'s settings and still shows {name}: read "
                                   "its completions around the marked window and fix the reward or the data"}
    change: dict[str, Any] = {"kind": "health", "addresses": name, "kwargs": {}}
    if name == NAN:
        change["action"] = ("find the first non-finite metric (evidence.first_step_per_key): a reward returning "
                            "NaN/inf, or a diverging update; fix it before reading anything else in this run")
    elif name == STALE_WEIGHTS:
        change["action"] = ("the run trained against completions from stale vLLM weights, so its rewards say little "
                            "about the policy: check that TRL's weight sync reaches vLLM (sleep mode: trl#5312; "
                            "server mode: the NCCL group between trainer and `trl vllm-serve`) and re-run")
    elif name == KL_BLOWUP:
        lr = config.get("learning_rate")
        if lr is not None and lr > BASE_LEARNING_RATE:
            change["kwargs"] = {"learning_rate": {"from": lr, "to": BASE_LEARNING_RATE}}
            change["action"] = "return to the base recipe's learning rate: the policy is running away"
        else:
            change["action"] = ("the KL blew up at the base learning rate: read the completions near the first step "
                                "over the limit for a reward hack, and fix the reward (Phase 1)")
    elif name == TRUNCATION:
        cap = config.get("max_completion_length")
        if cap:
            change["kwargs"] = {"max_completion_length": {"from": cap, "to": 2 * int(cap)}}
        change["action"] = ("raise the completion cap (check memory with `finetune memory`); if the length itself "
                            "is the problem, read the completions first")
    elif name == ZERO_VARIANCE:
        g = config.get("num_generations")
        if g:
            change["kwargs"] = {"num_generations": {"from": g, "to": 2 * int(g)}}
        change["action"] = ("more completions per prompt give a group a chance to disagree; if base success is "
                            "near 0 or 1, filter the prompts instead (DAPO's dynamic sampling is not in TRL, trl#4764)")
    elif name == FLAT_REWARD:
        change["action"] = ("no config change: the reward is not moving. Re-check base success and the reward "
                            "(`finetune inspect`) before training longer")
    change["variant"] = current
    return current, change


def remedy_text(name: str) -> str:
    """The detector's remedy, naming the variant when the symptom licenses one (from finetune.variants)."""
    variant = symptom_variant().get(name)
    remedy = DETECTOR[name].remedy
    return f"{remedy}: {variant} ({PAPERS[variant]['paper']}, arXiv {PAPERS[variant]['arxiv']})" if variant else remedy


def diagnosis_doc() -> str:
    """references/diagnosis.md: every diagnose symptom and every Phase 1 red flag, from their tables."""
    from finetune.inspect.flags import RED_FLAGS

    lines = ["# Diagnosis symptoms and Phase 1 red flags", "",
             "<!-- Generated by `finetune docs` from finetune.diagnose.DETECTORS and finetune.inspect.flags."
             "RED_FLAGS — do not edit; `finetune docs --check` fails CI on drift. -->", "",
             "## `finetune diagnose` symptoms", "",
             "When several symptoms show, the change for the first in this table (highest priority) is the one "
             "recommended; each check in `diagnosis.json` carries its priority, remedy and this description.", "",
             "| priority | symptom | fires when | remedy |", "|---|---|---|---|"]
    for i, d in enumerate(DETECTORS, 1):
        lines.append(f"| {i} | `{d.name}` | {d.doc} | {remedy_text(d.name)} |")
    lines += ["", "Thresholds: " + ", ".join(f"{k} {v}" for k, v in _thresholds().items()) + ".", "",
              "## Phase 1 red flags (`finetune inspect score`)", "",
              "Each open flag blocks the gate until it is fixed or acknowledged with a reason "
              "(`finetune inspect ack`).", "", "| flag | fires when | remedy |", "|---|---|---|"]
    for name, flag in RED_FLAGS.items():
        lines.append(f"| `{name}` | {flag.doc} | {flag.remedy} |")
    return "\n".join(lines + inspection_doc()) + "\n"


def stopped_by_inspection(run_dir: Path) -> dict[str, Any] | None:
    """train/STOPPED.json when train.py's inspection callback stopped the run (rule, step, reward), else None.

    Read by the one reader ``finetune status`` uses (:func:`finetune.status.read_stop`), so a file that
    does not parse, is not an object or names no rule carries the same ``problem`` line in both."""
    from finetune import status

    stop = status.read_stop(run_dir)
    if stop is None:
        return None
    return {"file": str(run_dir / stop.file), "rule": stop.rule, "step": stop.step, "reward": stop.reward,
            "message": stop.message, "inspection_file": stop.inspection_file, "problem": stop.problem}


def inspection_doc() -> list[str]:
    """The during-training section: what train.py's inspection callback (finetune.watch) does and when it stops."""
    w = watch
    return ["", "## During training: the inspection callback (`config/train.py`)", "",
            "Every `inspection.every_steps` optimiser steps (default 5 × `training.logging_steps`) the callback in "
            "the rendered train.py (`config/watch.py`, a verbatim copy of `finetune/watch.py`) takes the completions "
            "the rewards scored since the last inspection, with each reward's score from the reward call itself "
            "(the gated functions are wrapped; nothing is generated twice), and:", "",
            f"- appends a stratified sample of `inspection.min_read` of them (the {w.TOP_IN_SAMPLE} top-reward ones "
            f"always included) to `train/inspections/step_<N>.jsonl` in Phase 1's sample format, and a summary line "
            "to `train/inspections/index.jsonl`;",
            "- runs the live red flags (`non_finite`, `all_none`, `out_of_range`, `empty_rewarded`, "
            "`length_correlated`, `truncated`: the Phase 1 flags above, on training completions) and the hack "
            "probes, and logs `inspection/*` into the step's log entry (`train/metrics.jsonl`, trainer_state.json);",
            "- stops the run (`control.should_training_stop`), writes `train/STOPPED.json` (rule, step, reward, "
            f"evidence) and makes train.py and launch.sh exit {w.STOPPED_EXIT} when a rule below fires.", "",
            "| rule | stops when |", "|---|---|",
            "| `reward_divergence` | the `reward_hacking` rule above (the same code: `finetune.watch.divergence`) "
            f"fires on the last {w.LIVE_WINDOW} logged steps at {w.CONFIRM} inspections in a row; names the reward "
            "carrying the rise |",
            "| `probe_passing` | a completion shaped like a Phase 1 hack probe ("
            + ", ".join(f"`{p}`" for p in w.PROBE_SHAPES) + ") passes a correctness reward |",
            f"| `format_jump` | the share of the top-reward completions (best {w.TOP_SHARE:.0%}, at least {w.MIN_TOP}) "
            f"failing a format-role reward rises {w.FORMAT_JUMP:.0%} or more over the first inspection's share |",
            f"| `stale_vllm_weights` | the `stale_vllm_weights` rule above (`finetune.watch.stale_weights`) fires at "
            f"{w.CONFIRM} inspections in a row |", "",
            "Review a mid-run file exactly like Phase 1's samples, in a review directory beside the run (its own "
            "gate record stays untouched): copy `spec.yaml`, `rewards*.py` and the data into it, then "
            "`finetune inspect sample REVIEW --import RUN/train/inspections/step_<N>.jsonl`, `inspect score`, "
            "`inspect review`, `inspect verdict`, `inspect gate`."]


def _thresholds() -> dict[str, Any]:
    return {"min_points": MIN_POINTS, "p_significant": P_SIGNIFICANT, "entropy_drop": ENTROPY_DROP,
            "entropy_settled": ENTROPY_SETTLED, "length_rise": LENGTH_RISE, "baseline_points": BASELINE_POINTS,
            "cap_reached": CAP_REACHED, "length_reward_rho": LENGTH_REWARD_RHO, "zero_std_majority": ZERO_STD_MAJORITY,
            "clipped_majority": CLIPPED_MAJORITY, "flat_gain": FLAT_GAIN, "kl_limit": KL_LIMIT,
            "stale_min_gap": watch.STALE_MIN_GAP, "stale_rise": watch.STALE_RISE}


# ----------------------------------------------------------------------------------------------
# the whole diagnosis

# True of every TRL log, so it never changes a reading: kept in diagnosis.json, not printed.
STANDING_CAVEAT = ("reward_std is the std over the whole batch, not within groups: it is not used to judge group "
                   "variance")


def held_variant(change: dict[str, Any], co_rise: dict[str, Any], current: str) -> dict[str, Any]:
    """The change that replaces a variant while reward and length rise together with no correctness reward
    to tell learning from a length-paying reward: no variant fixes a hacked reward, so none is recommended
    until a correctness reward is named."""
    return {"kind": "undecided", "addresses": change["addresses"], "variant": current, "kwargs": {},
            "held_variant": change["variant"], "evidence": co_rise["evidence"], "why": co_rise["why"],
            "action": co_rise["decide"]}


def _held(symptom: dict[str, Any], change: dict[str, Any] | None) -> dict[str, Any]:
    """A symptom whose variant is held back says so: it licenses no variant (config render reads this)."""
    if change is not None and change["kind"] == "undecided" and symptom["name"] == change["addresses"]:
        symptom["variant_held"] = change["why"]
    return symptom


def assumed_roles(ctx: RunContext) -> dict[str, Any] | None:
    """The roles guessed from reward names, the rewards left without one, and how to override them."""
    if not ctx.assumed and not (ctx.unassumed and not any(r == "correctness" for r in ctx.roles.values())):
        return None
    return {"roles": dict(ctx.assumed), "unassumed": list(ctx.unassumed), "override": ROLE_OVERRIDE}


def terminal_lines(doc: dict[str, Any]) -> list[str]:
    """What `finetune diagnose` prints: verdict, symptoms, the change, the roles it assumed (and how to
    override them) and every caveat that changes the reading (all but STANDING_CAVEAT)."""
    lines = [f"{doc['verdict']}: {doc['headline']}"]
    lines += [f"  - {s['name']}: {s['summary']}" for s in doc["symptoms"]]
    change = doc["recommended_change"]
    if change and change["kwargs"]:
        lines.append("  change: " + ", ".join(f"{k}: {v['from']!r} -> {v['to']!r}"
                                              for k, v in change["kwargs"].items()))
    assumed = doc.get("assumed_roles")
    if assumed:
        named = ", ".join(f"{n} = {r}" for n, r in assumed["roles"].items())
        none = f"no role for {', '.join(assumed['unassumed'])}" if assumed["unassumed"] else ""
        lines.append(f"reward roles assumed from their names: {'; '.join(x for x in (named, none) if x)}"
                     if named else f"reward roles: nothing declares them and no name suggests one ({none})")
        lines.append(f"  override: {assumed['override']}")
    caveats = [c for c in doc["caveats"] if c != STANDING_CAVEAT]
    if caveats:
        lines.append("caveats (they change how to read this diagnosis):")
        lines += [f"  - {c}" for c in caveats]
    return lines


def diagnose(run: str | Path, *, spec: str | Path | None = None, model: str | None = None,
             correctness: list[str] | None = None) -> tuple[dict[str, Any], Logs, RunContext, list[Finding]]:
    """Read RUN's logs and context, run every detector, and return the diagnosis document."""
    run = Path(run)
    logs = load_logs(run)
    logged = {k.split("/")[1] for k in logs.series if k.startswith("rewards/") and k.endswith("/mean")}
    ctx = load_context(run, logs.source, Path(spec) if spec else None, model, correctness, logged or None)
    d = Diagnoser(logs, ctx)
    findings = d.run_all()
    symptoms = [f for f in findings if f.status == "symptom"]
    if symptoms:
        verdict = "symptom"
    elif len(logs.entries) < MIN_POINTS or all(f.status == "not_evaluated" for f in findings
                                                if f.name in (ENTROPY_COLLAPSE, LENGTH_DRIFT, FLAT_REWARD)):
        verdict = "insufficient"
    else:
        verdict = "healthy"
    current = current_variant(ctx.config, ctx.spec)
    variant, change = recommended_change(findings, ctx.config, current)
    if verdict != "symptom":
        variant, change = current, None
    stay = "GRPO" if current == "grpo" else current
    co_rise = d.unexplained_rise()
    if change is not None and change["kind"] == "variant" and co_rise is not None \
            and change["addresses"] != MOE_WITHOUT_GSPO:
        variant, change = current, held_variant(change, co_rise, current)
    if change is not None and change["kind"] == "undecided":
        headline = (f"stay on {stay}: {change['addresses']} shows, but {change['why']}; "
                    f"{change['action']}")
    elif change is None:
        headline = (f"stay on {stay}: no symptom in the logs, so no variant is warranted (never pre-emptively)"
                    if verdict == "healthy" else
                    f"stay on {stay}: too little to judge ({len(logs.entries)} logged steps; "
                    f"{MIN_POINTS} needed for the trend tests)")
    elif change["kind"] == "variant":
        headline = f"switch to {variant}: {change['addresses']} (arXiv {change['arxiv']})"
    elif change["kind"] == "reward":
        fix = f"the reward {change['reward']}" if change["reward"] else "the rewards"
        headline = f"stay on {stay}; reward_hacking: fix {fix} (back to Phase 1), no variant"
    else:
        headline = f"stay on {stay}; fix {change['addresses']} first"
    from finetune import __version__

    caveats = d.caveats + ([co_rise["caveat"]] if co_rise is not None else [])
    if co_rise is not None and (change is None or change["kind"] != "undecided"):
        headline += f" — but {co_rise['why']}: {co_rise['decide']}"

    doc = {
        "verdict": verdict,
        "headline": headline,
        "symptoms": [_held(f.symptom(), change) for f in symptoms],
        "recommended_variant": variant,
        "recommended_change": _r(change, 6) if change else None,
        "checks": [{"name": f.name, "status": f.status, "why": f.why, "priority": PRIORITY.index(f.name) + 1,
                    "remedy": remedy_text(f.name), "detects": DETECTOR[f.name].doc} for f in findings],
        "caveats": list(dict.fromkeys(caveats)) + [STANDING_CAVEAT],
        "assumed_roles": assumed_roles(ctx),
        "run": {
            "log": str(logs.source), "logged_steps": len(logs.entries),
            "first_step": logs.steps[0], "last_step": logs.steps[-1], "run_dir": str(ctx.run_dir),
            "spec": str(ctx.spec_path) if ctx.spec_path else None, "config_source": ctx.config_source,
            "reward_roles": ctx.roles, "reward_roles_source": ctx.roles_source,
            "correctness_keys": d.correctness_keys(), "model": ctx.model_source,
            "current_variant": current, "stopped": stopped_by_inspection(ctx.run_dir),
        },
        "thresholds": _thresholds(),
        "plugin_version": __version__,
        "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    return doc, logs, ctx, findings


# ----------------------------------------------------------------------------------------------
# outputs: curves.png, report.md


PANELS = ((K_REWARD, "reward (total)"), ("correctness", "correctness reward"), (K_ENTROPY, "entropy (nats/token)"),
          (K_LENGTH, "completion length (tokens)"), (K_CLIPPED, "clip ratio"))


PLOT_LIMIT = 1e100  # matplotlib cannot place ticks on a span that overflows a float (±1e308 losses)


def _plottable(values: Any) -> list[float]:
    """Values as drawn: non-finite ones left out (NaN is a gap), magnitudes clipped to PLOT_LIMIT."""
    return [min(max(float(v), -PLOT_LIMIT), PLOT_LIMIT) if math.isfinite(float(v)) else math.nan for v in values]


def plot(logs: Logs, doc: dict[str, Any], d_correctness: Series | None, path: Path) -> None:
    """reward, correctness reward, entropy, completion length and clip ratio over steps; windows shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {ENTROPY_COLLAPSE: "tab:red", LENGTH_DRIFT: "tab:orange", TRUNCATION: "tab:purple",
               ZERO_VARIANCE: "tab:gray", FLAT_REWARD: "tab:olive", KL_BLOWUP: "tab:brown", NAN: "black",
               MOE_WITHOUT_GSPO: "tab:cyan"}
    fig, axes = plt.subplots(len(PANELS), 1, figsize=(9, 2.1 * len(PANELS)), sharex=True)
    for ax, (key, title) in zip(axes, PANELS):
        s = d_correctness if key == "correctness" else logs.get(key)
        if s is not None:
            ax.plot(s.steps, _plottable(s.values), lw=1.2, marker=".", ms=3, label=s.key)
        r = logs.get(K_CLIP_REGION)
        if key == K_CLIPPED and r is not None:
            ax.plot(r.steps, _plottable(r.values), lw=1, ls="--", label="PPO clip region (clip_ratio/region_mean)")
        if s is None:
            ax.text(0.5, 0.5, "not logged" if key != "correctness" else "no correctness reward identified",
                    transform=ax.transAxes, ha="center", va="center", color="gray")
        for sym in doc["symptoms"]:
            w = sym.get("window")
            if w:
                ax.axvspan(w["from_step"], max(w["to_step"], w["from_step"] + 0.5), alpha=0.15,
                           color=colours.get(sym["name"], "tab:red"), label=f"{sym['name']}")
        ax.set_ylabel(title, fontsize=8)
        handles, labels = ax.get_legend_handles_labels()
        if handles:  # the shaded windows are named in the first panel only
            uniq = {lab: h for lab, h in zip(labels, handles) if ax is axes[0] or lab not in SYMPTOMS}
            ax.legend(uniq.values(), uniq.keys(), fontsize=7, loc="best")
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("step")
    fig.suptitle(f"{doc['verdict']}: {doc['headline']}"[:110], fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _fmt(v: Any) -> str:
    return "`null`" if v is None else f"`{v}`"


def report_md(doc: dict[str, Any]) -> str:
    """A short Markdown report of the diagnosis (everything it states comes from ``doc``)."""
    run = doc["run"]
    lines = [f"# Diagnosis: {doc['verdict']}", "", f"**{doc['headline']}**", "",
             f"Log: `{run['log']}` — {run['logged_steps']} logged steps ({run['first_step']}–{run['last_step']}). "
             f"Config: {run['config_source'] or 'not found'}. Correctness reward: "
             f"{', '.join(run['correctness_keys']) or 'not identified'}.", ""]
    lines += ["## Symptoms", ""]
    if not doc["symptoms"]:
        lines += ["None.", ""]
    for s in doc["symptoms"]:
        w = s.get("window")
        span = f" (steps {w['from_step']}–{w['to_step']})" if w else ""
        lines += [f"- **{s['name']}**{span}: {s['summary']}"]
    lines += ["", "## Recommendation", ""]
    change = doc["recommended_change"]
    if change is None:
        lines += [f"Stay on `{doc['recommended_variant']}`. No variant is switched "
                  "without its symptom.", ""]
    else:
        lines += [f"One change, against `{change['addresses']}`:", ""]
        if change["kind"] == "variant":
            lines += [f"Switch `variant` to `{change['variant']}` — {change['paper']} (arXiv {change['arxiv']}).", "",
                      change["reason"], ""]
        else:
            lines += [change["action"], ""]
        if change["kwargs"]:
            lines += ["| kwarg | now | then |", "|---|---|---|"]
            for k, v in change["kwargs"].items():
                assumed = " (assumed)" if v.get("from_assumed") else ""
                lines += [f"| `{k}` | {_fmt(v['from'])}{assumed} | {_fmt(v['to'])} |"]
            lines += [""]
    lines += ["## Checks", "", "| check | status | why | remedy when it shows |", "|---|---|---|---|"]
    for c in doc["checks"]:
        lines += [f"| {c['name']} | {c['status']} | {c['why'].replace('|', '/')} | "
                  f"{c.get('remedy', '').replace('|', '/')} |"]
    lines += ["", "## Caveats", ""] + [f"- {c}" for c in doc["caveats"]]
    lines += ["", "![curves](curves.png)", ""]
    return "\n".join(lines)


def write_outputs(out_dir: Path, doc: dict[str, Any], logs: Logs, correctness: Series | None) -> Path:
    """DIR/diagnosis/{diagnosis.json, report.md, curves.png}, all three or none."""
    target = out_dir / rundir.DIAGNOSIS_DIR
    with atomic.staged_dir(target) as tmp:
        plot(logs, doc, correctness, tmp / "curves.png")
        (tmp / "report.md").write_text(report_md(doc), encoding="utf-8")
        # an evidence value that overflowed (a ±1e308 loss minus another) is null, not a crash
        (tmp / "diagnosis.json").write_text(jsonio.dumps(doc, indent=2, nonfinite="null") + "\n", encoding="utf-8")
    return target


# ----------------------------------------------------------------------------------------------
# --apply: set the variant in the spec (original kept) and re-render config/


def set_variant_text(text: str, variant: str, line: int | None) -> str:
    """The spec text with ``variant:`` set, comments and layout kept (only that one line changes)."""
    lines = text.splitlines(keepends=True)
    if line is not None:
        i = line - 1
        m = re.match(r"^(\s*variant\s*:\s*)([^#\n]*?)(\s*(#.*)?)(\r?\n)?$", lines[i])
        if m is None:
            raise UserError("cannot find the `variant:` value on its line", where=f"line {line}",
                            fix="write it as `variant: grpo` on one line")
        lines[i] = f"{m.group(1)}{variant}{m.group(3) or ''}{m.group(5) or ''}"
        return "".join(lines)
    sep = "" if not text or text.endswith("\n") else "\n"
    return f"{text}{sep}variant: {variant}  # set by `finetune diagnose --apply`\n"


def apply_variant(ctx: RunContext, doc: dict[str, Any], *, no_gate: bool = False) -> dict[str, Any]:
    """Write the spec with the recommended variant (keeping the original) and re-render config/."""
    from finetune.errors import CheckFailed
    from finetune.spec import parse_spec
    from finetune.yamlio import load_with_lines

    change = doc["recommended_change"]
    if change is None or change["kind"] != "variant":
        return {"applied": False, "why": "no variant to switch to: " + doc["headline"]}
    if ctx.spec_path is None:
        raise UserError("--apply needs the run spec", where="--spec",
                        fix="pass --spec SPEC (or keep spec.yaml in the run directory)")
    variant = change["variant"]
    spec_path = ctx.spec_path
    original = spec_path.read_bytes()
    data, lines = load_with_lines(spec_path)
    if data.get("variant") == variant:
        return {"applied": False, "why": f"the spec already says variant: {variant}"}
    new_text = set_variant_text(original.decode("utf-8"), variant, lines.get(("variant",)))
    import yaml

    parse_spec(yaml.safe_load(new_text), spec_path)  # the edited spec must still be valid
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    kept = spec_path.with_name(f"{spec_path.stem}.before-{variant}.{stamp}{spec_path.suffix}")
    atomic.write_bytes(kept, original)
    atomic.write_text(spec_path, new_text)
    from finetune import config as renderer

    try:
        # the renderer reads gate.json and this diagnosis from the run directory, wherever the spec lives
        out = None if spec_path.parent.resolve() == ctx.run_dir.resolve() else ctx.run_dir
        _, target = renderer.render(spec_path, out, no_gate=no_gate)
    except (UserError, CheckFailed):
        atomic.write_bytes(spec_path, original)  # the spec and config/ stay consistent with each other
        kept.unlink(missing_ok=True)
        raise
    return {"applied": True, "variant": variant, "spec": str(spec_path), "original_kept": str(kept),
            "config_dir": str(target)}


# ----------------------------------------------------------------------------------------------
# CLI


def carried_variant_licence(doc: dict[str, Any], previous_path: Path) -> dict[str, Any] | None:
    """Keep the evidence that licensed the run's current variant when its diagnosis is rewritten.

    A run already on DAPO / Dr.GRPO / GSPO is usually healthy on re-diagnosis (the variant fixed the
    symptom), so the new diagnosis.json no longer names the symptom that licensed it. Without carrying
    the licence forward, re-rendering that run's spec would be refused (variants contract). The licence keeps
    the original evidence, so it is still a diagnosis that names the symptom, never a pre-emptive switch.
    """
    from finetune.variants import VARIANT_SYMPTOM

    current = doc["run"].get("current_variant")
    if current not in VARIANT_SYMPTOM:
        return None
    symptom = VARIANT_SYMPTOM[current]
    if any(s.get("name") == symptom for s in doc["symptoms"]):
        return None  # this diagnosis itself names the symptom
    try:
        previous = jsonio.loads(previous_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(previous, dict):
        return None
    carried = previous.get("variant_licence")
    if isinstance(carried, dict) and carried.get("variant") == current and carried.get("symptom") == symptom:
        return carried
    for s in previous.get("symptoms") or []:
        if isinstance(s, dict) and s.get("name") == symptom:
            return {"variant": current, "symptom": symptom, "evidence": s,
                    "diagnosed": {"time": previous.get("time"), "log": (previous.get("run") or {}).get("log")}}
    return None


def diagnose_and_write(run: str | Path, *, out: str | Path | None = None, spec: str | Path | None = None,
                       model: str | None = None, correctness: list[str] | None = None,
                       for_apply: bool = False) -> tuple[dict[str, Any], Path, RunContext]:
    """Diagnose RUN and write OUT/diagnosis/ (default: the run directory), carrying the licence of the run's
    current variant forward. ``for_apply``: the diagnosis must land in the run directory (the renderer reads
    it there). Returns the diagnosis document, the folder written and the run's context."""
    doc, logs, ctx, _ = diagnose(run, spec=spec, model=model, correctness=correctness)
    out_dir = Path(out) if out else ctx.run_dir
    if for_apply and out_dir.resolve() != ctx.run_dir.resolve():
        raise UserError("--apply writes the run's spec and config/, but -o sends the diagnosis elsewhere",
                        where="-o", fix="drop -o when using --apply (the renderer reads the run directory)")
    series = Diagnoser(logs, ctx).correctness_series()
    licence = carried_variant_licence(doc, out_dir / rundir.DIAGNOSIS)
    if licence:
        doc["variant_licence"] = licence
    return doc, write_outputs(out_dir, doc, logs, series), ctx
