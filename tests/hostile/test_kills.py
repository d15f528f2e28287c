"""kill -9 at arbitrary moments of `config render`: config/ is always the whole old folder or the whole new
one, never a mix, and the next verb leaves no stage behind.

tests/render/test_commit.py kills at each named commit step (FINETUNE_TEST_CRASH_AT) and
tests/test_datafilter.py does the same for `data filter`; here the kill comes from outside, at moments
spread over a real render's wall time, as an OOM killer or a closed laptop would deliver it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "render"))
from render_fixtures import write_run  # noqa: E402

HUB_MODEL = "Qwen/Qwen3-1.7B"  # bundled config: no weights needed to render


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _render(spec: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "finetune", "config", "render", str(spec), "--no-gate"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)


def _set_gpus(spec: Path, gpus: int) -> None:
    data = yaml.safe_load(spec.read_text())
    data["hardware"] = {"profile": "h100-80gb", "gpus": gpus, "nodes": 1}
    spec.write_text(yaml.safe_dump(data, sort_keys=False))


@pytest.mark.slow
def test_config_render_killed_at_random_moments(tmp_path):
    spec = write_run(tmp_path / "run", HUB_MODEL)
    run = spec.parent
    _set_gpus(spec, 8)
    started = time.monotonic()
    assert _render(spec).wait(timeout=600) == 0
    took = time.monotonic() - started
    for fraction in (0.3, 0.6, 0.85, 0.95, 1.0):
        _set_gpus(spec, 1)  # the old config, then a render towards the new one killed part-way
        assert _render(spec).wait(timeout=600) == 0
        old = _snapshot(run / "config")
        _set_gpus(spec, 8)
        proc = _render(spec)
        time.sleep(took * fraction)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        after = _snapshot(run / "config")
        assert _render(spec).wait(timeout=600) == 0  # the next render recovers first, then renders anew
        new = _snapshot(run / "config")
        assert old != new and "accelerate.yaml" in new and "accelerate.yaml" not in old
        assert after in (old, new), (fraction, sorted(k for k in set(after) | set(new) if after.get(k) != new.get(k)))
        assert not [p.name for p in run.rglob(".*") if p.name.endswith((".stage", ".old", ".journal", ".tmp"))]
