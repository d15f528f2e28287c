"""One entry per reward kind: spec model, template, imports, helpers, doc text, probes.

Everything that varies by reward kind is read from :data:`KINDS`: the spec union
(:data:`RewardSpec`), the render order, the imports of a rendered rewards.py, the helpers copied
beside it, and the reward reference (references/reward-functions.md). Each kind's entry is declared
on its spec model (``@kind(...)`` in specs.py), so adding a kind = one decorated model in specs.py + its
template ``templates/<type>.py.j2`` (and, when it needs library code, a module under ``rewards/lib/``).

Per-row reasons: every answer-reading reward explains each score with a reason id
(``rewards_answers.REASONS`` and :data:`EXTRA_REASONS`); :func:`explain` turns an id into the human
text and the spec field that changes that judgement (or says the reward needs ``type: python``).
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Annotated, Any, Union

from pydantic import Field

from finetune.rewards import specs
from finetune.rewards.specs import Kind

LIB = Path(__file__).resolve().parent / "lib"

# helper name -> (file written beside rewards.py, source copied verbatim)
HELPERS: dict[str, tuple[str, Path]] = {
    "answers": ("rewards_answers.py", LIB / "rewards_answers.py"),
    "mathpool": ("rewards_mathpool.py", LIB / "rewards_mathpool.py"),
    "toolcall": ("rewards_toolcall.py", LIB / "rewards_toolcall.py"),
    "sandbox": ("rewards_sandbox.py", Path(__file__).resolve().parents[1] / "sandbox" / "runner.py"),
}


# Each kind's entry (`Kind`) sits on its spec model in specs.py (`@kind(...)`); this module derives the rest.
KINDS: dict[str, Kind] = specs.KINDS

TYPE_ORDER = tuple(KINDS)
# a Union built from the registry at import time: `X | Y` spelling cannot express it
RewardSpec = Annotated[Union[tuple(k.spec for k in KINDS.values())], Field(discriminator="type")]  # type: ignore  # noqa: UP007
REWARD_TYPES: dict[str, type[Any]] = {t: k.spec for t, k in KINDS.items()}

# ------------------------------------------------------------------------------------ reasons --

# Reason ids beyond rewards_answers.REASONS (set by the reward wrappers, not by the answer reader).
EXTRA_REASONS = {
    "not_equal": "the final answer differs from the gold answer",
    "no_gold": "the row has no gold answer (not applicable)",
    "unusable_gold": "no reading of the gold answer accounts for all of it (not applicable)",
    "format_failed": "a format reward failed, so correctness scores 0 (format gate)",
    "timeout": "scoring ran past its deadline",
    "error": "scoring raised an error",
}

# reason id -> the spec field that changes that judgement (None: needs type: python, or the reward is right)
_FIXES = {
    "trailing_text": "trailing_text: allow",
    "no_container": "extract / pattern (where the final answer is)",
    "format_failed": "the format reward's pattern / trailing_text",
    "unusable_gold": "answer_column (a column whose gold answers parse)",
    "no_gold": "answer_column",
    "not_equal": "normalize (exact_match) or type: math",
    "timeout": "timeout_s",
}


def reasons() -> dict[str, str]:
    """Every reason id a reward can log per row, with its meaning."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_finetune_rewards_answers", HELPERS["answers"][1])
    assert spec is not None and spec.loader is not None  # a .py path always has a source loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {**module.REASONS, **EXTRA_REASONS}


def explain(reason_id: str) -> tuple[str, str]:
    """(human text, the spec field that changes this judgement or what to do instead)."""
    text = reasons().get(reason_id, f"reward-specific reason '{reason_id}'")
    fix = _FIXES.get(reason_id)
    if fix is None:
        fix = ("no spec field changes this reading: if the reader is right, the reward needs "
               "`type: python` (your own checker)")
    return text, fix


def _union_members() -> tuple[type[Any], ...]:
    return typing.get_args(typing.get_args(RewardSpec)[0])
