"""Fixtures for the inspection gate: run directories with real reward modules and real samples."""

from __future__ import annotations

import shutil
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from inspect_helpers import CORRECTNESS, MODULES, SPEC, Judge, craft_samples, write_jsonl


@pytest.fixture
def make_run(tmp_path):
    """make_run(module, correctness_type='exact_match', samples=None) -> run dir with spec, rewards.py, samples."""

    def make(module: str, correctness: str = "exact_match", samples: list[dict] | None = None,
             name: str = "run", spec_text: str | None = None) -> Path:
        run = tmp_path / name
        run.mkdir()
        (run / "spec.yaml").write_text(spec_text or SPEC.format(correctness=CORRECTNESS[correctness]))
        shutil.copy(MODULES / f"{module}.py", run / "rewards.py")
        rows = craft_samples() if samples is None else samples
        write_jsonl(run / "samples.jsonl", [{k: v for k, v in r.items() if k != "kind"} for r in rows])
        return run

    return make


@pytest.fixture
def judge_endpoint(monkeypatch):
    """Start the local judge; yields a setter for noisy mode. JUDGE_ENDPOINT points at it."""
    handler = type("Judge", (Judge,), {"noisy": False})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("JUDGE_ENDPOINT", f"http://127.0.0.1:{server.server_port}/v1")
    yield handler
    server.shutdown()
    server.server_close()
