"""Isolated execution of untrusted code for unit-test rewards.

The implementation is one standalone, stdlib-only module, :mod:`finetune.sandbox.runner`, which the
rewards renderer copies verbatim beside ``rewards.py`` as ``rewards_sandbox.py`` (the rendered rewards
never import this plugin). :func:`runner_source` returns that text. The public names of the runner
(``SandboxPool``, the job types, ``detect_isolation`` ...) are importable from here too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

RENDERED_NAME = "rewards_sandbox.py"


def runner_source() -> str:
    """The runner module's exact text, to be written beside rewards.py as ``rewards_sandbox.py``."""
    return Path(__file__).with_name("runner.py").read_text(encoding="utf-8")


def __getattr__(name: str) -> Any:
    # Lazy, so ``python -m finetune.sandbox.runner`` does not import the runner twice. By import_module,
    # not ``from finetune.sandbox import runner``: that form asks this very __getattr__ for "runner" first
    # and recursed without end while the submodule was not yet imported.
    import importlib

    if name.startswith("__"):
        raise AttributeError(name)
    runner = importlib.import_module("finetune.sandbox.runner")
    if name in runner.__all__:
        return getattr(runner, name)
    raise AttributeError(name)
