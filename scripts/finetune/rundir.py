"""The run directory: the only interface between pipeline stages.

Every stage reads the files named here and writes its own, atomically (temp file + rename), so a
crashed or refused stage never leaves a half-written file and the gate can bind files by hash.
"""

from __future__ import annotations

import re
from pathlib import Path

from finetune.errors import UserError

ROUTE = "route.json"
SPEC = "spec.yaml"
REWARDS = "rewards.py"
SAMPLES = "samples.jsonl"
BASE_SAMPLES = "base_samples.jsonl"
SCORED = "scored.jsonl"
SCORE_REPORT = "score_report.json"
REVIEW_MD = "review.md"
REVIEW_HTML = "review.html"
REVIEW_KEY = "review_key.md"  # the rewards' view of the sheet's samples, opened after the verdicts
VERDICTS = "verdicts.jsonl"
GATE = "gate.json"
CONFIG_DIR = "config"
MEMORY = "memory.md"
TRAIN_DIR = "train"
METRICS = "metrics.jsonl"  # in TRAIN_DIR: every logged step, appended live by the rendered train.py
DIAGNOSIS_DIR = "diagnosis"
HELDOUT = "heldout.json"  # in CONFIG_DIR: the held-out rows `config render` carved (train.py leaves them out)
EVAL_DIR = "eval"  # `finetune eval`: one folder per evaluated checkpoint
DIAGNOSIS = "diagnosis/diagnosis.json"


def resolve(spec_or_dir: str | Path, out: str | Path | None = None) -> tuple[Path | None, Path]:
    """Return (spec path or None, run directory) for a stage command's positional argument.

    Given a spec file, the run directory is the spec's folder unless ``out`` names another.
    Given a directory, it is the run directory and its spec is ``<dir>/spec.yaml`` if present.
    """
    p = Path(spec_or_dir)
    if p.is_dir():
        spec = p / SPEC
        run = Path(out) if out else p
        return (spec if spec.is_file() else None), _recovered(run)
    if p.is_file():
        return p, _recovered(Path(out) if out else p.parent)
    raise UserError(f"no such file or directory: {p}", fix="pass a run spec (spec.yaml) or a run directory")


def _recovered(run_dir: Path) -> Path:
    """Every verb resolves its run directory here, so each first finishes or clears what a crashed
    commit left (finetune.commit.recover): readers never see half a commit twice."""
    from finetune import commit

    commit.recover(run_dir)
    return run_dir


# ---------------------------------------------------------------------------------------------
# checkpoint sample sets (finetune.inspect.checkpoint): RUN/inspect/checkpoints/NAME, a run directory of its own
# for score / review / gate, told from a run directory by its place (the scorer and the CLI both ask)

SETS_DIR = ("inspect", "checkpoints")
SET_INFO = "checkpoint.json"  # the set's record: model, settings, Phase 1 files it re-sampled
_SET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def set_name_ok(name: str) -> bool:
    return bool(_SET_NAME.match(name)) and name not in (".", "..")


def run_of(path: Path) -> Path | None:
    """The run directory of set folder ``path`` (``RUN/inspect/checkpoints/NAME``), or None when
    ``path`` is not one: it must hold SET_INFO and no spec of its own, under a run that has a spec."""
    if not path.is_dir() or (path / SPEC).exists() or not (path / SET_INFO).is_file():
        return None
    if not set_name_ok(path.name):  # a killed write's stage folder (.NAME.<pid>.<token>.stage) is not a set
        return None
    run = path.parent.parent.parent
    if (path.parent.name, path.parent.parent.name) != tuple(reversed(SETS_DIR)):
        return None
    return run if (run / SPEC).is_file() else None


def is_set(run_dir: Path) -> bool:
    return run_of(Path(run_dir)) is not None
