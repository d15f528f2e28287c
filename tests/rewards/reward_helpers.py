"""Helpers the reward tests import by name (conftest.py is not importable as a module): validate spec reward
dicts, and render a spec's rewards.py into a folder and import it as TRL would (by file path, with its folder
on sys.path)."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from finetune.rewards.registry import RewardSpec
from finetune.rewards.render import render_sources

_ADAPTER = TypeAdapter(RewardSpec)
_COUNTER = itertools.count()


def reward_specs(entries: list[dict[str, Any]]) -> list[Any]:
    return [_ADAPTER.validate_python(e) for e in entries]


def render_module(entries: list[dict[str, Any]], folder: Path, max_completion_length: int = 1024):
    """Render ``entries`` (spec reward dicts) into ``folder`` and import its rewards.py under a fresh name."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in render_sources(reward_specs(entries), run_name="test",
                                     max_completion_length=max_completion_length).items():
        (folder / name).write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"_rendered_rewards_{next(_COUNTER)}", folder / "rewards.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
