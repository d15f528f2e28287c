"""Isolated execution of untrusted code for unit-test rewards.

The implementation is one standalone, stdlib-only module, :mod:`finetune.sandbox.runner`, which the
rewards renderer copies verbatim beside ``rewards.py`` as ``rewards_sandbox.py`` (the rendered rewards
never import this plugin). :func:`runner_source` returns that text.
"""

from __future__ import annotations

from pathlib import Path

from finetune.sandbox.runner import (  # noqa: F401 - re-exported API
    ISOLATION_LEVELS, AssertJob, CallJob, CallTest, Isolation, Result, SandboxError, SandboxPool,
    SandboxUnavailable, StdioJob, StdioTest, detect_isolation,
)

RENDERED_NAME = "rewards_sandbox.py"


def runner_source() -> str:
    """The runner module's exact text, to be written beside rewards.py as ``rewards_sandbox.py``."""
    return (Path(__file__).with_name("runner.py")).read_text(encoding="utf-8")
