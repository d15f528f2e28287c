"""The held-out split: carved from the training data (seeded, at most a tenth, none Phase 1 sampled) or a file of the
person's own (minus prompts the training data or Phase 1 hold); bound by the gate record; re-derived by eval."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from finetune import hashing, heldout, rundir
from finetune.errors import UserError
from finetune.spec import load_spec


def _run(tmp_path: Path, n: int = 40, **heldout_section) -> Path:
    run = tmp_path / "run"
    (run / "data").mkdir(parents=True)
    rows = [{"prompt": f"What is {i} plus 1?", "answer": str(i + 1)} for i in range(n)]
    (run / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = {"name": "held", "model": "Qwen/Qwen2.5-0.5B-Instruct",
            "dataset": {"path": "data/train.jsonl", "heldout": heldout_section or {"prompts": 64}},
            "rewards": [{"name": "correct", "type": "exact_match", "answer_column": "answer"}]}
    (run / rundir.SPEC).write_text(yaml.safe_dump(spec))
    return run


def _phase1(run: Path, prompts: list[str]) -> None:
    lines = [{"id": f"p{i:05d}-s00", "row": i, "prompt": p, "completion": "x", "conversational": False,
              "columns": {}} for i, p in enumerate(prompts)]
    (run / rundir.SAMPLES).write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_a_carve_is_seeded_capped_at_a_tenth_and_skips_what_phase1_sampled(tmp_path):
    run = _run(tmp_path, n=40)
    _phase1(run, [f"What is {i} plus 1?" for i in range(0, 40, 2)])  # Phase 1 sampled every even row
    spec = load_spec(run / rundir.SPEC)
    split = heldout.carve(spec, run)
    assert split.source == "carved" and len(split.rows) == 4  # a tenth of 40, though 64 were asked
    assert all(r % 2 == 1 for r in split.rows) and split.excluded == {"phase1": 20} and split.eligible == 20
    assert heldout.carve(spec, run) == split  # deterministic
    rows = heldout.split_rows(spec, split)
    assert [r["prompt"] for r in rows] == [f"What is {i} plus 1?" for i in split.rows]


def test_a_file_of_its_own_drops_prompts_the_training_data_or_phase1_hold(tmp_path):
    run = _run(tmp_path, n=10, prompts=3, path="data/heldout.jsonl")
    held = [{"prompt": p, "answer": "0"} for p in ("What is 3 plus 1?", "fresh a", "fresh b", "seen", "fresh c",
                                                   "fresh d")]
    (run / "data" / "heldout.jsonl").write_text("".join(json.dumps(r) + "\n" for r in held))
    _phase1(run, ["seen"])
    split = heldout.carve(load_spec(run / rundir.SPEC), run)
    assert split.source == "file" and split.rows == [1, 2, 4]  # the first 3 eligible rows
    assert split.excluded == {"phase1": 1, "training": 1}


def test_the_split_is_bound_by_the_gate_hashes(tmp_path):
    run = _run(tmp_path, n=40)
    spec = load_spec(run / rundir.SPEC)
    first = hashing.bound_hashes(run, spec.reward_section(), **spec.binding())
    data = yaml.safe_load((run / rundir.SPEC).read_text())
    data["dataset"]["heldout"] = {"prompts": 8}
    (run / rundir.SPEC).write_text(yaml.safe_dump(data))
    spec2 = load_spec(run / rundir.SPEC)
    second = hashing.bound_hashes(run, spec2.reward_section(), **spec2.binding())
    assert first[hashing.HELDOUT_SECTION] != second[hashing.HELDOUT_SECTION]
    assert {k for k in first if first[k] != second.get(k)} == {hashing.HELDOUT_SECTION}


def test_eval_refuses_a_split_that_is_not_the_rendered_one(tmp_path):
    run = _run(tmp_path, n=40)
    spec = load_spec(run / rundir.SPEC)
    with pytest.raises(UserError, match="heldout.json is missing"):
        heldout.current(spec, run)
    (run / rundir.CONFIG_DIR).mkdir()
    record = heldout.carve(spec, run).record()
    (run / rundir.CONFIG_DIR / rundir.HELDOUT).write_text(json.dumps(record))
    assert heldout.current(spec, run).rows == record["rows"]
    _phase1(run, [f"What is {i} plus 1?" for i in record["rows"]])  # Phase 1 now holds those prompts
    with pytest.raises(UserError, match="not the one the run directory gives now"):
        heldout.current(spec, run)


def test_an_empty_split_is_one_line_naming_the_fix(tmp_path):
    run = _run(tmp_path, n=8)  # a tenth of 8 rows is none
    spec = load_spec(run / rundir.SPEC)
    (run / rundir.CONFIG_DIR).mkdir()
    (run / rundir.CONFIG_DIR / rundir.HELDOUT).write_text(json.dumps(heldout.carve(spec, run).record()))
    with pytest.raises(UserError, match="held-out split is empty") as err:
        heldout.current(spec, run)
    assert "dataset.heldout.path" in err.value.fix


def test_prompt_keys_ignore_the_none_entries_arrow_adds():
    assert heldout.prompt_key([{"role": "user", "content": "hi", "name": None}]) == \
        heldout.prompt_key([{"content": "hi", "role": "user"}])
