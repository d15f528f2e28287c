"""What the gate record binds (DESIGN.md's gate-record contract), computed one way everywhere.

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


# modules Python's `site` imports at every start-up when found on sys.path (not in sys.stdlib_module_names)
STARTUP_HOOKS = frozenset({"sitecustomize", "usercustomize"})


def shadowing_modules(run_dir: str | Path) -> list[str]:
    """Modules in the run directory's top level that would stand in for a library the rewards import.

    A process started in the run directory (or with it on sys.path) finds ``RUN/math_verify.py`` before the
    real package: its ``verify`` is then the reward's. Any ``NAME.py`` or ``NAME/`` package there (other than
    the reward files) whose name is a standard-library module or an installed distribution's top-level
    module is such a stand-in, and so are ``sitecustomize.py`` / ``usercustomize.py``, which Python's ``site``
    imports at start-up from anywhere on the documented ``PYTHONPATH=.``; the rendered train.py runs the same
    check (no plugin import there)."""
    import sys
    from importlib import metadata

    run_dir = Path(run_dir)
    known = set(sys.stdlib_module_names) | set(metadata.packages_distributions()) | STARTUP_HOOKS
    ours = {p.name for p in reward_files(run_dir)}
    out = []
    for p in sorted(run_dir.iterdir()) if run_dir.is_dir() else []:
        name = p.stem if p.suffix == ".py" else p.name if (p / "__init__.py").is_file() else None
        if name and name in known and p.name not in ours:
            out.append(p.name)
    return out


FILTER_SECTION = "spec:dataset.filter"  # the spec's dataset.filter section (after `finetune data filter`)
FILTERED_FILE = "dataset.filter:file"  # the filtered file train.py trains on, re-hashed from disk
INSPECTION = "spec:inspection"  # the spec's inspection section: how often training's live hacking stop looks
HELDOUT_SECTION = "spec:dataset.heldout"  # the held-out split's settings (`finetune eval` measures on it)
HELDOUT_FILE = "dataset.heldout:file"  # a held-out file of the person's own, re-hashed from disk
SAMPLING = "spec:sampling"  # dataset.system_prompt and the generation section the gated samples were drawn with


def sampling_digest(sampling: dict[str, Any]) -> str:
    """sha256 of the system prompt + generation settings (RunSpec.sampling_binding), independent of YAML layout."""
    return hashlib.sha256(canonical_json(sampling)).hexdigest()


def bound_hashes(run_dir: str | Path, reward_section: list[dict[str, Any]], data_filter: dict[str, Any] | None = None,
                 filtered_file: str | Path | None = None, sampling: dict[str, Any] | None = None,
                 inspection: dict[str, Any] | None = None, heldout: dict[str, Any] | None = None,
                 heldout_file: str | Path | None = None) -> dict[str, str]:
    """The hashes a gate record stores: reward files, scored samples, verdicts, reward section, the system
    prompt and generation settings the samples were drawn with (``sampling``), and — once `finetune data
    filter` ran — the spec's dataset.filter section and the filtered file itself."""
    run_dir = Path(run_dir)
    out = {p.name: sha256_file(p) for p in reward_files(run_dir)}
    for name in (rundir.SCORED, rundir.VERDICTS):
        p = run_dir / name
        if p.is_file():
            out[name] = sha256_file(p)
    out["spec:rewards"] = reward_section_digest(reward_section)
    if sampling is not None:
        out[SAMPLING] = sampling_digest(sampling)
    if inspection is not None:
        out[INSPECTION] = hashlib.sha256(canonical_json(inspection)).hexdigest()
    if data_filter is not None:
        out[FILTER_SECTION] = hashlib.sha256(canonical_json(data_filter)).hexdigest()
        path = Path(filtered_file) if filtered_file is not None else None
        out[FILTERED_FILE] = sha256_file(path) if path is not None and path.is_file() else "missing"
    if heldout is not None:  # the held-out split `finetune eval` measures on (spec dataset.heldout)
        out[HELDOUT_SECTION] = hashlib.sha256(canonical_json(heldout)).hexdigest()
        if heldout_file is not None:
            held = Path(heldout_file)
            out[HELDOUT_FILE] = sha256_file(held) if held.is_file() else "missing"
    return out
