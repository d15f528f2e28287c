"""What the gate's PASS binds beyond the reward files: the system prompt and generation settings the gated
samples were drawn with (the GRPOConfig fields `overrides` could use to sample otherwise are refused:
tests/hostile/test_ungated.py), and scores only the gate's re-score could have made (train.py re-scores).

A spec edited after a PASS (a system prompt added, temperature lowered, top_k set) must void the PASS
for every consumer — verify_gate (config render, data filter, status) and the rendered train.py — with
one line that names what changed and says to re-sample and re-gate.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from finetune.inspect import gate
from finetune.spec import load_spec


@pytest.fixture(scope="module")
def passed_run(base_run, tmp_path_factory) -> Path:
    """The hostile suite's run with a PASS gate record (agent reading, the user's confirmation)."""
    from finetune.cli import main

    run = tmp_path_factory.mktemp("bound") / "run"
    shutil.copytree(base_run, run)
    for flag in ("constant_reward:format_ok", "constant_reward:correctness"):  # every crafted sample is right
        assert main(["inspect", "ack", str(run), flag, "--reason", "crafted rows: all right by construction", "--yes"]) == 0
    assert main(["inspect", "gate", str(run)]) == 0
    assert json.loads((run / "gate.json").read_text())["status"] == "PASS"
    return run


@pytest.fixture
def run_copy(passed_run, tmp_path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(passed_run, run)
    return run


def _edit_spec(run: Path, **changes: dict) -> None:
    data = yaml.safe_load((run / "spec.yaml").read_text())
    for section, values in changes.items():
        data.setdefault(section, {}).update(values)
    (run / "spec.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


SAMPLING_EDITS = {  # name: (spec section, values, the field the one line must name)
    "system_prompt": ("dataset", {"system_prompt": "Always answer 7."}, "dataset.system_prompt"),
    "temperature": ("generation", {"temperature": 0.05}, "generation.temperature"),
    "top_k": ("generation", {"top_k": 1}, "generation.top_k"),
    "top_p": ("generation", {"top_p": 0.5}, "generation.top_p"),
    "min_p": ("generation", {"min_p": 0.3}, "generation.min_p"),
    "repetition_penalty": ("generation", {"repetition_penalty": 1.3}, "generation.repetition_penalty"),
    "max_completion_length": ("generation", {"max_completion_length": 48}, "generation.max_completion_length"),
}


@pytest.mark.parametrize("edit", list(SAMPLING_EDITS))
def test_a_sampling_setting_changed_after_the_pass_voids_it(run_copy, edit):
    section, values, field = SAMPLING_EDITS[edit]
    assert gate.verify_gate(run_copy, load_spec(run_copy / "spec.yaml")).ok
    _edit_spec(run_copy, **{section: values})
    check = gate.verify_gate(run_copy, load_spec(run_copy / "spec.yaml"))
    assert not check.ok
    assert field in check.reason and "re-sample" in check.reason and "\n" not in check.reason, check.reason


def test_a_record_from_before_the_sampling_binding_asks_for_a_new_gate(run_copy):
    """A gate.json written before the system prompt / generation settings were bound holds no PASS for them."""
    record = json.loads((run_copy / "gate.json").read_text())
    record.pop("sampling")
    record["hashes"].pop("spec:sampling")
    (run_copy / "gate.json").write_text(json.dumps(record))
    check = gate.verify_gate(run_copy, load_spec(run_copy / "spec.yaml"))
    assert not check.ok and "predates" in check.reason and "finetune inspect gate" in check.reason, check.reason


def test_sampling_change_refused_by_config_render_data_filter_and_status(run_copy, cli):
    from finetune.status import gate_state

    _edit_spec(run_copy, dataset={"system_prompt": "You are terse."})
    spec = run_copy / "spec.yaml"
    before = {p.name: p.read_bytes() for p in run_copy.iterdir() if p.is_file()}
    for argv in (("config", "render", spec), ("data", "filter", spec, "--k", "2")):
        r = cli(*argv)
        assert r.code == 1 and "dataset.system_prompt" in r.err and "re-sample" in r.err, r
        assert "Traceback" not in r.err
    _, detail = gate_state(run_copy, load_spec(spec))
    assert "dataset.system_prompt" in detail and "PASS holds" not in detail
    assert {p.name: p.read_bytes() for p in run_copy.iterdir() if p.is_file()} == before
    assert not (run_copy / "config").exists()


def test_samples_drawn_with_other_settings_fail_the_gate(run_copy):
    """sample_info.json says the samples were drawn at temperature 0.2, the spec trains at 1.0: no PASS."""
    info = {"generation": {**load_spec(run_copy / "spec.yaml").generation.model_dump(mode="json"), "temperature": 0.2}}
    (run_copy / "sample_info.json").write_text(json.dumps(info))
    record = gate.evaluate(run_copy, load_spec(run_copy / "spec.yaml"), rescore=False)
    assert record.status == "FAIL" and any("temperature" in r and "re-sample" in r for r in record.reasons)


@pytest.mark.slow
def test_train_py_refuses_sampling_other_than_the_gate_bound(run_copy, cli):
    """The rendered train.py hashes its own SAMPLING as the gate did: one edited there refuses to train."""
    assert cli("config", "render", run_copy / "spec.yaml").code == 0
    train = run_copy / "config" / "train.py"
    text = train.read_text()
    assert "'temperature': 1.0" in text
    train.write_text(text.replace("'temperature': 1.0", "'temperature': 0.05", 1))
    r = subprocess.run([sys.executable, str(train), "--cpu", "--max-steps", "1"], cwd=run_copy, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 1 and "spec:sampling changed since the gate PASSed" in r.stderr, r.stderr[-2000:]
    assert not (run_copy / "train").exists()


# ------------------------------------------------------------------ a hand-assembled gate record --

@pytest.mark.slow
def test_train_py_rescores_a_hand_assembled_gate_record(passed_run, tmp_path, cli, monkeypatch):
    """The good run's scored / verdict / gate files beside a broken reward (its correctness credits nothing),
    every hash recomputed, and a config rendered from it by a hash-only check (the re-score of config
    render taken away): train.py re-scores before the first step and refuses."""
    from inspect_helpers import MODULES

    from finetune.hashing import bound_hashes

    run = tmp_path / "forged"
    shutil.copytree(passed_run, run)
    broken = (MODULES / "good.py").read_text() + (
        "\n\ndef correctness(prompts, completions, answer, **kwargs):  # gives credit to nothing\n"
        "    return [0.0 for _ in completions]\n\n\nREWARD_FUNCS = [format_ok, correctness]\n")
    (run / "rewards.py").write_text(broken)
    spec = load_spec(run / "spec.yaml")
    report = json.loads((run / "score_report.json").read_text())
    report["inputs"]["rewards.py"] = gate.sha256_file(run / "rewards.py")
    (run / "score_report.json").write_text(json.dumps(report))
    record = json.loads((run / "gate.json").read_text())
    record["hashes"] = bound_hashes(run, spec.reward_section(), **spec.binding())
    record["inputs"] = gate._input_hashes(run)
    (run / "gate.json").write_text(json.dumps(record))
    assert gate.verify_gate(run, spec).ok  # every hash holds
    assert not gate.verify_gate(run, spec, rescore=True).ok  # config render's re-score does not
    monkeypatch.setattr(gate, "rescore_differences", lambda *a, **k: [])
    assert cli("config", "render", run / "spec.yaml").code == 0
    r = subprocess.run([sys.executable, "config/train.py", "--cpu", "--max-steps", "1"], cwd=run, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 1 and "do not give scored.jsonl's scores" in r.stderr, r.stderr[-2000:]
    assert not (run / "train").exists()


# ------------------------------------------------------------------ the inspection section --

def test_the_inspection_section_is_bound_by_the_gate(run_copy, cli):
    """inspection.every_steps: 1000000 after a PASS would turn training's live hacking stop off: verify_gate
    (config render, data filter, status) refuses it in one line naming the section."""
    _edit_spec(run_copy, inspection={"every_steps": 1_000_000})
    check = gate.verify_gate(run_copy, load_spec(run_copy / "spec.yaml"))
    assert not check.ok and "inspection" in check.reason and "every_steps" in check.reason, check.reason
    assert "\n" not in check.reason
    r = cli("config", "render", run_copy / "spec.yaml")
    assert r.code == 1 and "spec:inspection" in r.err and not (run_copy / "config").exists(), r.err


def test_a_startup_hook_in_the_run_folder_voids_the_pass(run_copy):
    """sitecustomize.py / usercustomize.py run at every start-up from the documented PYTHONPATH=.: shadows."""
    for name in ("sitecustomize.py", "usercustomize.py"):
        (run_copy / name).write_text("import builtins\n")
        check = gate.verify_gate(run_copy, load_spec(run_copy / "spec.yaml"))
        assert not check.ok and name in check.reason and "stand in" in check.reason, check.reason
        (run_copy / name).unlink()


def test_rewards_render_does_not_overwrite_a_users_own_module(run_copy, cli):
    """A rewards_*.py the user wrote beside the rewards (not in render's manifest) is neither removed nor
    overwritten: one line, exit 2, the file unchanged."""
    mine = run_copy / "rewards_mine.py"
    mine.write_text("def helper():\n    return 1\n")
    r = cli("rewards", "render", run_copy / "spec.yaml")
    assert r.code == 2 and "rewards_mine.py" in r.err and "was not written by" in r.err, r.err
    assert len(r.err.strip().splitlines()) == 1 and mine.read_text() == "def helper():\n    return 1\n"
