"""benchmarks/gpu_check.py (issue 14 item 7): its CPU dry path runs the rendered config's GRPO steps for
both architectures and reports each phase beside the estimator. The GPU path is the same code with
figures; it is never run here (no accelerator)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_dry_path_runs_both_models(tmp_path):
    out = tmp_path / "rows.json"
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--dry", "--json", str(out)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    rows = json.loads(out.read_text())
    assert [r["model"] for r in rows] == ["Qwen/Qwen2.5-0.5B", "Qwen/Qwen2.5-1.5B"]
    for r in rows:
        assert r["steps"] == 1 and r["generation_backend"] == "transformers" and not r["cuda"]
        for phase in ("generation", "training"):
            p = r["phases"][phase]
            assert p["calls"] >= 1 and p["estimate_gib"] > 0 and p["measured_gib"] is None
        assert r["phases"]["training"]["estimate_gib"] > r["phases"]["generation"]["estimate_gib"] * 0.5
    table = res.stdout[res.stdout.index("| model | backend"):]
    assert table.count("| Qwen/Qwen2.5-") == 4 and "n/a (no GPU)" in table
