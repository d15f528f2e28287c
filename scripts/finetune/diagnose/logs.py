"""Reading a run's training logs: any TRL log (our live ``metrics.jsonl``, TRL's ``trainer_state.json``
or a checkpoint's, a JSONL of logged dicts) as one series per metric, and the reward roles a plain TRL
run's reward names suggest when nothing declares them.

Malformed, truncated or empty input is a :class:`~finetune.errors.UserError` (what, where, how to fix).
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from finetune import jsonio, rundir
from finetune.diagnose import trackiodb
from finetune.errors import UserError

# TRL 1.16's GRPOTrainer log keys
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

# True of every TRL log, so it never changes a reading: kept in diagnosis.json, not printed.
STANDING_CAVEAT = ("reward_std is the std over the whole batch, not within groups: it is not used to judge group "
                   "variance")


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


def load_logs(run: str | Path, trackio_run: str | None = None) -> Logs:
    """Read the training entries of a run's log history (a Trackio project's database too: ``trackio_run`` names
    one of its runs, default the newest). Malformed, truncated or empty → UserError."""
    path = choose_log_file(Path(run))
    tracked = trackiodb.is_db(path)
    if trackio_run is not None and not tracked:
        raise UserError("--trackio-run names a run of a Trackio project, but this log is not one", where=str(path),
                        fix="pass the project's <project>.db (train/trackio/ in the run directory)")
    rows, notes = trackiodb.read(path, trackio_run) if tracked else (_parse_json_file(path), [])

    def where(i: int) -> str:
        return f"{path}: entry {i + 1}"

    by_step: dict[int, dict[str, Any]] = {}
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
# reward roles read off the names

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
