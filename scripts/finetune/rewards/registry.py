"""One entry per reward kind: spec model, template, imports, helpers, doc text, probes.

Everything that varies by reward kind is read from :data:`finetune.rewards.kinds.KINDS`: the spec union
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

from finetune.rewards import specs  # its decorated models fill KINDS: import it before reading the table
from finetune.rewards.kinds import KINDS

LIB = Path(__file__).resolve().parent / "lib"

# helper name -> (file written beside rewards.py, source copied verbatim)
HELPERS: dict[str, tuple[str, Path]] = {
    "answers": ("rewards_answers.py", LIB / "rewards_answers.py"),
    "mathpool": ("rewards_mathpool.py", LIB / "rewards_mathpool.py"),
    "code": ("rewards_code.py", LIB / "rewards_code.py"),
    "jsonmatch": ("rewards_jsonmatch.py", LIB / "rewards_jsonmatch.py"),
    "toolcall": ("rewards_toolcall.py", LIB / "rewards_toolcall.py"),
    "sandbox": ("rewards_sandbox.py", Path(__file__).resolve().parents[1] / "sandbox" / "runner.py"),
}


# Each kind's entry (`kinds.Kind`) sits on its spec model in specs.py (`@kind(...)`); this module derives the rest.
TYPE_ORDER = tuple(KINDS)
# a Union built from the registry at import time: `X | Y` spelling cannot express it
if typing.TYPE_CHECKING:
    # what every kind's model shares (name, weight, role, ...); pydantic sees the discriminated union below
    RewardSpec = specs.RewardBase
else:
    RewardSpec = Annotated[Union[tuple(k.spec for k in KINDS.values())], Field(discriminator="type")]  # noqa: UP007
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
    "unexplained": "the reward logged no reason for these rows",
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
    "no_entry_point": "entry_point_column (the function the tests call)",
    "unusable_tests": "tests_column / hidden_tests_column / test_format",
    "no_code": "extract / code_blocks (where the code is)",
    # json_match: each field's judgement has a field of its own in the spec
    "wrong_value": "fields.<field> (match: text | number with tolerance | date with day_first | code | exact)",
    "missing_field": "required (a field the gold may lack), or the gold column",
    "hallucinated_key": "extra_keys: allow, or name the key in fields",
    "hallucinated_value": "the gold column (a field it leaves null)",
    "schema": "fields.<field> (the derived shape), schema (given), or extra_keys",
    "not_strict_json": "none needed when right: json.loads refuses trailing commas (the format role's rule)",
    "only_in_think": "none: the answer after </think> holds no JSON (a refusal or nothing)",
    "several_objects": "none: several different objects are a hedge",
    # tool_call
    "several_calls": "which: last (the final call after reasoning is the answer)",
    "no_expected": "expected_column (the row's expected call)",
}


def reasons() -> dict[str, str]:
    """Every reason id a reward can log per row, with its meaning."""
    import importlib.util

    found: dict[str, str] = {}
    for helper in ("jsonmatch", "toolcall", "answers", "code"):  # the standalone readers declare their own reason ids
        spec = importlib.util.spec_from_file_location(f"_finetune_rewards_{helper}", HELPERS[helper][1])
        assert spec is not None and spec.loader is not None  # a .py path always has a source loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        found.update(module.REASONS)
    return {**found, **EXTRA_REASONS}


def explain(reason_id: str, reward_type: str | None = None) -> tuple[str, str]:
    """(human text, the spec field that changes this judgement or what to do instead). A json_match
    reason ``<id>:<field>`` names the field at fault: the text and the fix name it too. With ``reward_type``,
    a reason no field answers (``ok`` on a row the reader rejects, ``unexplained``) gets that kind's fix."""
    base, _, field = reason_id.partition(":")
    text = reasons().get(base, f"reward-specific reason '{reason_id}'")
    fix = _FIXES.get(base)
    if field:
        text = f"{text} (field '{field}')"
        fix = fix.replace("<field>", field) if fix else fix
    entry = KINDS.get(reward_type) if reward_type is not None else None
    if entry is not None:
        text = entry.reason_text.get(base, text)  # e.g. `ok`: "the reward passed these rows", not the reader's text
        fix = entry.reason_fixes.get(base, fix)
        if fix is None or base == "unexplained":
            fix = entry.fix
    if fix is None:
        fix = ("no spec field changes this reading: if the reader is right, the reward needs "
               "`type: python` (your own checker)")
    return text, fix


def _union_members() -> tuple[type[Any], ...]:
    return typing.get_args(typing.get_args(RewardSpec)[0])
