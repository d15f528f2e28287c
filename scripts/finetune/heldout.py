"""The held-out split: the prompts `finetune eval` measures success on, before (the base policy) and after training.

Never trained on, never read in Phase 1. With ``dataset.heldout.path`` the person brings a file of their own (its
first ``prompts`` rows, minus any prompt the training data or Phase 1 also holds); otherwise `config render` carves
the split from the training data: a seeded choice (``training.seed``) of ``dataset.heldout.prompts`` rows, at most a
tenth of them, none whose prompt Phase 1 sampled (samples.jsonl, base_samples.jsonl). The rendered train.py leaves
the carved rows out (``HELDOUT_ROWS``, checked against ``HELDOUT_PROMPTS_SHA256`` so a changed file is refused),
and ``config/heldout.json`` records the split for `finetune eval`, which re-derives it and refuses a mismatch.

The spec's ``dataset.heldout`` section (and a file of its own) is bound by the gate record
(:func:`finetune.hashing.bound_hashes`), so changing the split after a PASS voids it.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from finetune import jsonio, rundir
from finetune.errors import UserError

if TYPE_CHECKING:
    from finetune.spec import RunSpec

MAX_SHARE = 0.1  # a carved split takes at most this share of the training rows
SEED_OFFSET = 3  # seeded apart from Phase 1's picks (seed, seed + 1, seed + 2)


def _norm(value: Any) -> Any:
    """A prompt as both sides read it: a dict's None entries dropped (Arrow fills absent struct keys with None)."""
    if isinstance(value, dict):
        return {str(k): _norm(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_norm(v) for v in value]
    return value


def prompt_key(value: Any) -> str:
    """sha256 of a raw prompt column value (train.py computes the same, see templates/train.py.j2)."""
    text = json.dumps(_norm(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def rows_digest(keys: list[str]) -> str:
    """One digest of the held-out rows' prompt keys, in row order."""
    return hashlib.sha256("\n".join(keys).encode("ascii")).hexdigest()


@dataclass(frozen=True)
class Split:
    """The held-out rows and where they come from."""

    source: str  # "carved" (from the training data; train.py leaves them out) | "file" (dataset.heldout.path)
    path: str  # the file the rows are read from, as the spec names it (relative to the spec's folder)
    rows: list[int]  # row indices in that file
    prompts_sha256: str  # rows_digest of the rows' prompt keys
    eligible: int  # rows it could choose from
    excluded: dict[str, int]  # why others were not eligible: phase1 (sampled in Phase 1), training (a file's row
    # that the training data also holds)

    def record(self) -> dict[str, Any]:
        return asdict(self)


def _phase1_keys(spec: RunSpec, run_dir: Path) -> set[str]:
    """The prompts Phase 1 sampled (read, held back or base-success), as the training prompt keys of their rows."""
    from finetune.inspect.samplesio import load_samples

    keys: set[str] = set()
    for name in (rundir.SAMPLES, rundir.BASE_SAMPLES):
        path = run_dir / name
        if path.is_file():
            keys |= {prompt_key(s["prompt"]) for s in load_samples(path, spec.dataset.prompt_column)}
    return keys


def _training_form(spec: RunSpec, value: Any) -> str:
    """The key of a row's prompt as Phase 1 sampled it (with the system prompt, inspect.sample.training_prompt)."""
    system = spec.dataset.system_prompt
    if system:
        msgs = [{"role": "user", "content": value}] if isinstance(value, str) else list(value or [])
        return prompt_key([{"role": "system", "content": system}] + msgs)
    return prompt_key(value)


def carve(spec: RunSpec, run_dir: str | Path) -> Split:
    """The held-out split of this spec and run directory (deterministic: the same inputs give the same rows)."""
    from finetune.dataset import dataset_file, load_file_rows

    run_dir = Path(run_dir)
    h = spec.dataset.heldout
    column = spec.dataset.prompt_column
    phase1 = _phase1_keys(spec, run_dir)
    train_path, field = dataset_file(spec, training=True)
    train_rows = load_file_rows(spec, train_path, field) if h.prompts else []
    if h.path:
        rows = load_file_rows(spec, spec.resolve_path(h.path), "dataset.heldout.path")
        training = {prompt_key(r.get(column)) for r in train_rows}
        seen_phase1 = [i for i, r in enumerate(rows) if _training_form(spec, r.get(column)) in phase1]
        seen_training = [i for i, r in enumerate(rows) if prompt_key(r.get(column)) in training]
        eligible = [i for i in range(len(rows)) if i not in set(seen_phase1) | set(seen_training)]
        chosen = eligible[:h.prompts]
        excluded = {"phase1": len(seen_phase1), "training": len(seen_training)}
        return Split("file", h.path, chosen, rows_digest([prompt_key(rows[i].get(column)) for i in chosen]),
                     len(eligible), excluded)
    sampled = {i for i, r in enumerate(train_rows) if _training_form(spec, r.get(column)) in phase1}
    eligible = [i for i in range(len(train_rows)) if i not in sampled]
    n = min(h.prompts, int(len(train_rows) * MAX_SHARE), len(eligible))
    chosen = sorted(random.Random(spec.training.seed + SEED_OFFSET).sample(eligible, n)) if n > 0 else []
    shown = spec.dataset.filter.path if spec.dataset.filter else spec.dataset.path
    return Split("carved", shown, chosen, rows_digest([prompt_key(train_rows[i].get(column)) for i in chosen]),
                 len(eligible), {"phase1": len(sampled)})


def rendered(run_dir: Path) -> dict[str, Any]:
    """config/heldout.json as `config render` wrote it (UserError when missing or not a split record)."""
    path = run_dir / rundir.CONFIG_DIR / rundir.HELDOUT
    if not path.is_file():
        raise UserError(f"no held-out split: {path} is missing", where=str(run_dir),
                        fix="render the run (`finetune config render SPEC`): it carves the held-out split")
    doc = jsonio.read_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        raise UserError(f"{path} is not a held-out split record", where=str(path),
                        fix="re-render the run (`finetune config render SPEC`)")
    return doc


def current(spec: RunSpec, run_dir: Path) -> Split:
    """The split as config render recorded it, re-derived now; UserError when they differ or when it is empty."""
    split = carve(spec, run_dir)
    recorded = rendered(run_dir)
    if recorded.get("rows") != split.rows or recorded.get("prompts_sha256") != split.prompts_sha256:
        raise UserError("the held-out split config/ was rendered with is not the one the run directory gives now "
                        "(the data, Phase 1's samples or dataset.heldout changed)", where=str(run_dir),
                        fix="re-render the run (`finetune config render SPEC`) before training and evaluating")
    if not split.rows:
        raise UserError(f"the held-out split is empty ({split.eligible} eligible rows in {split.path}; a carve takes "
                        f"at most {MAX_SHARE:.0%} of the training rows, dataset.heldout.prompts "
                        f"{spec.dataset.heldout.prompts})", where="dataset.heldout",
                        fix="set dataset.heldout.path to a held-out file of your own, or a larger dataset")
    return split


def split_rows(spec: RunSpec, split: Split) -> list[dict[str, Any]]:
    """The held-out rows themselves, in the split's order."""
    from finetune.dataset import dataset_file, load_file_rows

    if split.source == "file":
        rows = load_file_rows(spec, spec.resolve_path(split.path), "dataset.heldout.path")
    else:
        path, field = dataset_file(spec, training=True)
        rows = load_file_rows(spec, path, field)
    return [rows[i] for i in split.rows]
