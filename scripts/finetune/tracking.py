"""Where a rendered run's metrics go besides its own files (train/metrics.jsonl, train/inspections/).

Local first: the rendered train.py logs to a Trackio project when trackio is importable on the training machine (the
``[train]`` extra pins it), its database inside the run directory (``train/trackio/<project>.db``, so it travels
back with the folder and ``finetune diagnose`` reads it); to Weights & Biases only when the person configured a W&B
project — the plugin's ``wandb_project`` userConfig, which its guard keeps in the person's folder where the agent's
tools cannot write, or ``FINETUNE_WANDB_PROJECT`` in the person's own shell — never through the spec or an
override an agent can set; else to the files alone. BRIEF.md states which, and the dashboard command.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from finetune.spec import RunSpec

TRACKIO_DIR = "train/trackio"  # relative to the run directory: train.py sets TRACKIO_DIR there unless set
WANDB_SETTING = "wandb_project"  # the plugin's userConfig key (.claude-plugin/plugin.json)
WANDB_ENV = "FINETUNE_WANDB_PROJECT"  # the person's own shell may set it instead
PERSON_DIR = "llm-finetuning"  # $XDG_CONFIG_HOME/llm-finetuning (~/.config/llm-finetuning): the person's folder
SETTINGS_FILE = "settings.json"


def _person_settings() -> dict[str, Any]:
    base = os.environ.get("XDG_CONFIG_HOME", "").strip()
    path = (Path(base) if base else Path.home() / ".config") / PERSON_DIR / SETTINGS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def wandb_project() -> str | None:
    """The W&B project the person configured (their userConfig, else their shell's FINETUNE_WANDB_PROJECT)."""
    value = _person_settings().get(WANDB_SETTING) or os.environ.get(WANDB_ENV, "")
    value = value[0] if isinstance(value, list) and value else value
    value = value.strip() if isinstance(value, str) else ""
    return value if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,127}", value) else None


def trackio_project(spec: RunSpec) -> str:
    """The Trackio project a run logs to: its name, as Trackio keeps it on disk ([A-Za-z0-9_-])."""
    return "finetune-" + (re.sub(r"[^A-Za-z0-9_-]", "-", spec.name) or "run")


def target(spec: RunSpec) -> dict[str, Any]:
    """What config render writes into train.py and BRIEF.md."""
    project = trackio_project(spec)
    return {"wandb_project": wandb_project(), "trackio_project": project, "trackio_dir": TRACKIO_DIR,
            "dashboard": f"TRACKIO_DIR={TRACKIO_DIR} trackio show --project {project}",
            "database": f"{TRACKIO_DIR}/{project}.db"}


def claim(run_dir: Path) -> None:
    """Point this process's Trackio at ``run_dir/train/trackio`` while trackio is not imported yet (importing TRL's
    GRPOTrainer imports it, and it reads TRACKIO_DIR once)."""
    import sys

    if "trackio" not in sys.modules:
        os.environ["TRACKIO_DIR"] = str((run_dir / TRACKIO_DIR).resolve())


def in_process(run_dir: Path, project: str) -> dict[str, Any]:
    """GRPOConfig kwargs for a run trained in this process (the demo's toy runs): Trackio when importable, its
    database in ``run_dir/train/trackio``; files only when trackio is missing or was already imported with another
    folder (Trackio reads TRACKIO_DIR once, at import)."""
    import importlib.util

    if importlib.util.find_spec("trackio") is None:
        return {"report_to": "none"}
    claim(run_dir)
    from trackio import utils

    if Path(utils.TRACKIO_DIR).resolve() != (run_dir / TRACKIO_DIR).resolve():
        return {"report_to": "none"}
    return {"report_to": "trackio", "project": project}
