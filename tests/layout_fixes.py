"""Helpers for the layout tests (tests/test_vllm_layout.py, tests/placement/): a refusal's fixes as spec edits, and
the spec a fix gives, so that a test re-renders every fix a refusal offers (imported as a plain module)."""

from __future__ import annotations

import copy
import re
from typing import Any

# "set a.b: 1 and c.d: x" groups, alternatives separated by " or "
_GROUP = re.compile(r"set ((?:[a-z_]+(?:\.[a-z_]+)*: [\w.-]+)(?: and [a-z_]+(?:\.[a-z_]+)*: [\w.-]+)*)")
_EDIT = re.compile(r"([a-z_]+(?:\.[a-z_]+)*): ([\w.-]+)")


def _value(text: str) -> Any:
    return int(text) if text.isdigit() else text


def fixes_of(exc: Exception) -> list[dict[str, Any]]:
    """Every fix a refusal offers, each a set of spec edits applied together ({"hardware.gpus": 8, ...})."""
    text = getattr(exc, "fix", None) or str(exc)
    text = text[text.index("fix:"):] if "fix:" in text else text
    return [{k: _value(v) for k, v in _EDIT.findall(group)} for group in _GROUP.findall(text)]


def apply_fix(changes: dict[str, Any], fix: dict[str, Any]) -> dict[str, Any]:
    """``write_run`` keyword changes with ``fix`` applied (a dotted path `hardware.gpus` → changes["hardware"])."""
    out = copy.deepcopy(changes)
    for dotted, value in fix.items():
        section, _, field = dotted.partition(".")
        if not field:
            out[section] = value
        else:
            out[section] = {**(out.get(section) or {}), field: value}
    return out
