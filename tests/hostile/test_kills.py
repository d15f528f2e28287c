"""kill -9 at arbitrary moments of `config render`: config/ is always the whole old folder or the whole new
one, never a mix, and the next verb leaves no stage behind.

tests/test_commit.py kills at each named commit step (FINETUNE_TEST_CRASH_AT) and
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from render_fixtures import write_run  # noqa: E402

HUB_MODEL = "Qwen/Qwen3-1.7B"  # bundled config: no weights needed to render


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _render(spec: Path) -> subprocess.Popen:
    gated = (spec.parent / "gate.json").is_file()  # a gated render re-scores the bound rewards first (seconds)
    return subprocess.Popen([sys.executable, "-m", "finetune", "config", "render", str(spec),
                             *(() if gated else ("--no-gate",))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)


def _set_gpus(spec: Path, gpus: int) -> None:
    data = yaml.safe_load(spec.read_text())
    data["hardware"] = {"profile": "h100-80gb", "gpus": gpus, "nodes": 1}
    spec.write_text(yaml.safe_dump(data, sort_keys=False))


@pytest.mark.slow
@pytest.mark.parametrize("gated", [False, True], ids=["no-gate", "gated"])
def test_config_render_killed_at_random_moments(tmp_path, cli, gated):
    spec = write_run(tmp_path / "run", HUB_MODEL)
    run = spec.parent
    if gated:
        from render_fixtures import pass_phase1

        assert cli("rewards", "render", spec).code == 0
        pass_phase1(cli, spec)
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


def _filter(spec: Path, prompts: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "finetune", "data", "filter", str(spec), "--k", "2", "--max-prompts",
                             str(prompts), "--check-prompts", "4", "--keep", "0-1", "--device", "cpu",
                             "--backend", "transformers"],  # the tiny model solves nothing: keep every prompt
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
                            env=dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1"))


@pytest.mark.slow
def test_data_filter_killed_at_random_moments(tmp_path, tiny_model_dir, cli):
    """kill -9 of `data filter` spread over its wall time (sampling, scoring, the commit): afterwards the run is
    the gated one before the filter or the filtered one, never a spec naming a filter whose file or binding is
    missing; the gate holds for whichever it is, and `data filter` again completes."""
    import json
    import shutil

    from render_fixtures import pass_phase1

    from finetune.commit import recover
    from finetune.inspect.gate import verify_gate
    from finetune.spec import load_spec

    spec = write_run(tmp_path / "base" / "run", str(tiny_model_dir), hardware={"profile": "cpu", "gpus": 0, "nodes": 1})
    rows = [{"prompt": f"What is {a} plus {b}? Answer in <answer></answer>.", "answer": str(a + b)}
            for a in range(8) for b in range(6)]
    (spec.parent / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert cli("rewards", "render", spec).code == 0
    pass_phase1(cli, spec)
    base = spec.parent
    timing = tmp_path / "timing" / "run"
    shutil.copytree(base, timing)
    started = time.monotonic()
    proc = _filter(timing / "spec.yaml", len(rows))
    assert proc.wait(timeout=600) == 0, proc.stderr.read().decode()[-2000:]
    took = time.monotonic() - started
    for i, fraction in enumerate((0.35, 0.6, 0.8, 0.9, 0.97)):
        run = tmp_path / f"kill{i}" / "run"
        shutil.copytree(base, run)
        spec_before = (run / "spec.yaml").read_bytes()
        proc = _filter(run / "spec.yaml", len(rows))
        time.sleep(took * fraction)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        recover(run)  # what the next verb does first (finetune.rundir.resolve)
        spec_now = load_spec(run / "spec.yaml")  # parses: never half a spec
        check = verify_gate(run, spec_now)
        assert check.ok, (fraction, check.reason)  # the binding matches whichever state it is
        if spec_now.dataset.filter is None:
            assert (run / "spec.yaml").read_bytes() == spec_before and not (run / "data" / "filtered.jsonl").exists()
        else:
            assert (run / spec_now.dataset.filter.path).is_file()
        assert not [p.name for p in run.rglob("*") if ".stage" in p.name or p.name.endswith((".journal", ".tmp"))]
        again = _filter(run / "spec.yaml", len(rows))
        assert again.wait(timeout=600) == 0, again.stderr.read().decode()[-2000:]
        spec_now = load_spec(run / "spec.yaml")
        assert spec_now.dataset.filter is not None and verify_gate(run, spec_now).ok
