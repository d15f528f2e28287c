"""Isolated execution of untrusted code: unit-test rewards and code-running tools.

The implementation is one standalone, stdlib-only module, :mod:`finetune.sandbox.runner`, which the
rewards renderer copies verbatim beside ``rewards.py`` as ``rewards_sandbox.py`` (the rendered rewards
never import this plugin). :func:`runner_source` returns that text. Import the runner's names (``SandboxPool``,
the job types, ``run_python`` ...) from ``finetune.sandbox.runner``: this package re-exports nothing, so
``python -m finetune.sandbox.runner`` and the plugin's imports load one module.
"""

from __future__ import annotations

from pathlib import Path

RENDERED_NAME = "rewards_sandbox.py"


def runner_source() -> str:
    """The runner module's exact text, to be written beside rewards.py as ``rewards_sandbox.py``."""
    return Path(__file__).with_name("runner.py").read_text(encoding="utf-8")
