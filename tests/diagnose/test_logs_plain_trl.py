"""`finetune diagnose` on logs it did not write: the output folder of a plain TRL run (trainer_state.json
only — no spec, no rewards.py with REWARD_META, no config), from the REAL short GRPO runs make_runs.py trains.

Roles are then read off the reward names (finetune.diagnose.logs.ROLE_STEMS), said on the terminal with how to
override them, every caveat that changes the reading is printed, and no variant is recommended while the
total reward and the length rise together with no correctness reward to tell learning from a hack."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from finetune.diagnose.logs import STANDING_CAVEAT, role_from_name


def _plain(grpo_runs: dict[str, Path], scenario: str, folder: Path, history=None) -> Path:
    """What a plain TRL output_dir holds after trainer.save_state(): trainer_state.json, nothing of ours."""
    folder.mkdir(parents=True)
    src = grpo_runs[scenario] / "train" / "trainer_state.json"
    if history is None:
        shutil.copy(src, folder / "trainer_state.json")
    else:
        state = json.loads(src.read_text())
        state["log_history"] = history
        (folder / "trainer_state.json").write_text(json.dumps(state))
    return folder


def _doc(folder: Path) -> dict:
    return json.loads((folder / "diagnosis" / "diagnosis.json").read_text())


def _names(doc: dict) -> list[str]:
    return [s["name"] for s in doc["symptoms"]]


def _renamed(history: list[dict], names: dict[str, str]) -> list[dict]:
    out = []
    for e in history:
        row = {}
        for k, v in e.items():
            for old, new in names.items():
                k = k.replace(f"rewards/{old}/", f"rewards/{new}/")
            row[k] = v
        out.append(row)
    return out


def _history(grpo_runs: dict[str, Path], scenario: str) -> list[dict]:
    return json.loads((grpo_runs[scenario] / "train" / "trainer_state.json").read_text())["log_history"]


def _printed_caveats(doc: dict, out: str) -> None:
    reading = [c for c in doc["caveats"] if c != STANDING_CAVEAT]
    assert reading, "a plain TRL log always has caveats (no config, no model)"
    for c in reading:
        assert f"  - {c}" in out
    assert STANDING_CAVEAT not in out  # true of every log: kept in diagnosis.json only


@pytest.mark.parametrize(("name", "role"), [
    ("accuracy_reward", "correctness"),  # TRL's trl.rewards.accuracy_reward
    ("think_format_reward", "format"),  # TRL's trl.rewards.think_format_reward
    ("format_reward", "format"), ("tag_count_reward", "format"), ("len_reward", "shaping"),  # open-r1
    ("cosine_scaled_reward", "shaping"), ("soft_overlong_punishment", "shaping"),
    ("correctness", "correctness"), ("exact_match", "correctness"), ("math_verify", "correctness"),
    ("verifier_score", "correctness"), ("pass_rate", "correctness"), ("unit_tests", "correctness"),
    ("xmlcount_reward", "format"), ("strict_xml", "format"), ("boxed", "format"), ("answerFormat", "format"),
    ("length_pay", "shaping"), ("verbosity", "shaping"),
    ("lottery", None), ("closeness", None), ("latest", None), ("contest", None), ("lenient", None),
    ("incorrect_penalty", None),
    ("math_format", None),  # two roles at once: no guess (a wrong "correctness" would hide a hack)
])
def test_role_from_name(name, role):
    assert role_from_name(name) == role


@pytest.mark.slow
def test_plain_length_hack_is_reward_hacking_with_the_assumed_roles_printed(grpo_runs, tmp_path, cli):
    run = _plain(grpo_runs, "length", tmp_path / "out")
    result = cli("diagnose", run)
    assert result.code == 0
    doc = _doc(run)
    assert doc["run"]["spec"] is None and doc["run"]["config_source"] is None
    assert doc["assumed_roles"]["roles"] == {"correctness": "correctness", "verbosity": "shaping"}
    assert "reward_hacking" in _names(doc) and doc["recommended_change"]["kind"] == "reward"
    hack = next(s for s in doc["symptoms"] if s["name"] == "reward_hacking")
    assert hack["evidence"]["carrier"] == "verbosity" and doc["recommended_variant"] == "grpo"
    first = result.out.splitlines()[0]
    assert first.startswith("symptom: ") and "reward_hacking: fix the reward verbosity" in first
    assert "reward roles assumed from their names: correctness = correctness, verbosity = shaping" in result.out
    assert "override: --correctness NAME" in result.out
    _printed_caveats(doc, result.out)


@pytest.mark.slow
def test_plain_healthy_run_stays_healthy(grpo_runs, tmp_path, cli):
    run = _plain(grpo_runs, "healthy", tmp_path / "out")
    result = cli("diagnose", run)
    assert result.code == 0
    doc = _doc(run)
    assert doc["verdict"] == "healthy" and doc["recommended_change"] is None, doc["headline"]
    assert doc["assumed_roles"]["roles"] == {"answer_format": "format"}
    assert doc["assumed_roles"]["unassumed"] == ["closeness"]
    assert "no role for closeness" in result.out and "--correctness NAME" in result.out
    _printed_caveats(doc, result.out)


@pytest.mark.slow
def test_plain_collapse_is_still_entropy_collapse(grpo_runs, tmp_path, cli):
    """Its length falls as the entropy does: nothing rises with the reward unexplained, so the variant stands;
    the caveat that no correctness reward is known is printed."""
    run = _plain(grpo_runs, "collapse", tmp_path / "out")
    result = cli("diagnose", run)
    assert result.code == 0
    doc = _doc(run)
    assert "entropy_collapse" in _names(doc) and doc["recommended_variant"] == "dapo"
    assert "reward roles: nothing declares them and no name suggests one (no role for lottery)" in result.out
    assert any("no reward is known to be the correctness reward" in c for c in doc["caveats"])
    _printed_caveats(doc, result.out)


@pytest.mark.slow
def test_no_variant_while_reward_and_length_rise_unexplained(grpo_runs, tmp_path, cli):
    """The length-paying run's real log under reward names that suggest no role, with the collapse run's real
    entropy fall in place of its own (its first 32 steps spread over the length run's 24, so the fall settles
    while the paid length sits at the cap): entropy collapse shows, but so do reward and length rising together
    with nothing known to check correctness — the log of the issue that was told "switch to dapo". No variant:
    the terminal says what to pass."""
    entropy = {e["step"]: e["entropy"] for e in _history(grpo_runs, "collapse") if "entropy" in e}
    history = _renamed(_history(grpo_runs, "length"), {"correctness": "r_answer", "verbosity": "r_len"})
    for e in history:
        if "entropy" in e:
            e["entropy"] = entropy[min(max(entropy), round(e["step"] * 4 / 3))]
    run = _plain(grpo_runs, "length", tmp_path / "out", history)
    result = cli("diagnose", run)
    assert result.code == 0
    doc = _doc(run)
    assert "entropy_collapse" in _names(doc)
    change = doc["recommended_change"]
    assert change["kind"] == "undecided" and change["held_variant"] == "dapo" and change["kwargs"] == {}
    assert doc["recommended_variant"] == "grpo"
    held = next(s for s in doc["symptoms"] if s["name"] == "entropy_collapse")
    assert "rise together" in held["variant_held"]  # config render licenses no variant with it
    first = result.out.splitlines()[0]
    assert "switch to" not in first and "--correctness NAME" in first and "r_answer, r_len" in first
    _printed_caveats(doc, result.out)
    # what the terminal said to pass decides it: the answer reward is flat, the length reward carries the rise
    out2 = tmp_path / "decided"
    assert cli("diagnose", run, "--correctness", "r_answer", "-o", out2).code == 0
    decided = _doc(out2)
    assert decided["recommended_change"]["kind"] == "reward" and decided["recommended_change"]["reward"] == "r_len"
    assert decided["run"]["reward_roles_source"].startswith("--correctness; others assumed")


def test_a_held_symptom_licenses_no_variant(tmp_path):
    """config render's licence check (variants contract) skips a symptom whose variant diagnose held back."""
    from types import SimpleNamespace

    from finetune.config.build import _check_variant
    from finetune.diagnose.licence import approve
    from finetune.errors import CheckFailed

    spec, dense = SimpleNamespace(variant="dapo"), SimpleNamespace(is_moe=False)
    shown = approve({"symptoms": [{"name": "entropy_collapse"}]}, "Ada")  # the person approved what it licenses
    assert "entropy_collapse" in _check_variant(spec, dense, shown, tmp_path)
    held = approve({"symptoms": [{"name": "entropy_collapse", "variant_held": "reward and length rise together"}]},
                   "Ada")
    with pytest.raises(CheckFailed):
        _check_variant(spec, dense, held, tmp_path)
