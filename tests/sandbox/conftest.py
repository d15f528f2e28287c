"""One sandbox pool per test module: starting zygotes costs ~0.3 s, the battery reuses them."""

from __future__ import annotations

import pytest

from finetune.sandbox.runner import SandboxPool


@pytest.fixture(scope="module")
def pool():
    """A two-worker pool at the best isolation this host grants (nothing here is meant to time out)."""
    with SandboxPool(workers=2, timeout_s=5.0, memory_mb=256, min_isolation="process") as p:
        yield p
