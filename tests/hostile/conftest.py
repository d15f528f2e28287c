"""A complete run directory (spec, data, rewards.py, samples, scored, report, verdicts, acks,
confirmation), built once per session by the real commands; each case damages a copy."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "inspect"))


@pytest.fixture(scope="session")
def base_run(tmp_path_factory) -> Path:
    from cases import SPEC
    from inspect_helpers import MODULES, craft_samples, verdicts_for, write_jsonl

    from finetune.cli import main

    run = tmp_path_factory.mktemp("hostile-base") / "run"
    run.mkdir()
    (run / "spec.yaml").write_text(SPEC)
    samples = [s for s in craft_samples(per_prompt=8) if s["kind"] == "right"]  # constant rewards: flags to ack
    rows = [{k: v for k, v in r.items() if k != "kind"} for r in samples]
    write_jsonl(run / "data.jsonl", [{"prompt": r["prompt"], "answer": r["columns"]["answer"]} for r in rows])
    shutil.copy(MODULES / "good.py", run / "rewards.py")
    write_jsonl(run / "samples.jsonl", rows)
    assert main(["inspect", "score", str(run)]) == 0
    write_jsonl(run.parent / "v.jsonl", verdicts_for(samples, reader="agent"))
    assert main(["inspect", "verdict", str(run), "--file", str(run.parent / "v.jsonl")]) == 0
    (run.parent / "v.jsonl").unlink()
    assert main(["inspect", "confirm", str(run), "--user", "Ada"]) == 0
    assert main(["inspect", "ack", str(run), "base_saturated", "--reason",
                 "a curated easy split: the full set varies"]) == 0
    return run


@pytest.fixture
def damaged(base_run, tmp_path):
    """damaged(case) -> (run dir copy, spec path, folder for side files), with the case's damage applied."""
    def make(case):
        side = tmp_path / "side"
        side.mkdir()
        run = side / "run"
        shutil.copytree(base_run, run)
        import json

        (side / "good.jsonl").write_text(json.dumps({"prompt": "p", "completion": "c"}) + "\n")
        case.damage(run)
        return run, run / "spec.yaml", side

    return make
