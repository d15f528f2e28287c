"""What the gate record binds (DESIGN.md contract 5), computed one way everywhere.

The rendered train.py repeats this logic in plain Python (it may not import this plugin); a test
checks both agree.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from finetune import rundir


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def canonical_json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def reward_section_digest(reward_section: list[dict[str, Any]]) -> str:
    """sha256 of the spec's reward section (weights included), independent of YAML layout."""
    return hashlib.sha256(canonical_json(reward_section)).hexdigest()


def reward_files(run_dir: str | Path) -> list[Path]:
    """rewards.py and every helper rendered beside it (by convention named rewards_*.py)."""
    run_dir = Path(run_dir)
    main = run_dir / rundir.REWARDS
    helpers = sorted(p for p in run_dir.glob("rewards_*.py") if p.is_file())
    return ([main] if main.is_file() else []) + helpers


def bound_hashes(run_dir: str | Path, reward_section: list[dict[str, Any]]) -> dict[str, str]:
    """The hashes a gate record stores: reward files, scored samples, verdicts, reward section."""
    run_dir = Path(run_dir)
    out = {p.name: sha256_file(p) for p in reward_files(run_dir)}
    for name in (rundir.SCORED, rundir.VERDICTS):
        p = run_dir / name
        if p.is_file():
            out[name] = sha256_file(p)
    out["spec:rewards"] = reward_section_digest(reward_section)
    return out
