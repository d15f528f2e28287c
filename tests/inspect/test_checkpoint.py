"""Re-inspecting a trained checkpoint: `finetune inspect sample RUN --model CKPT`.

Phase 1's prompts are re-sampled from a real checkpoint into RUN/inspect/checkpoints/NAME/, and the
Phase 1 verbs (score, review, verdict, confirm, ack, gate, compare) run on that folder unchanged.
The slow test uses the demo's run (a Phase 1 PASS reached by the demo's independent checker) and
the policy its real 40-step GRPO run saved; the comparison is checked against a recount made here
from the verdicts and from rewards.py called directly.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from inspect_helpers import craft_samples, verdicts_for, write_jsonl
from person_helpers import person_verdicts

from finetune import rundir
from finetune.inspect import checkpoint

HUB_ID = "finetune-tests/tiny-qwen3"  # hfcache_helpers.HUB_REPO_ID, installed by the hf_home fixture


def _tree(folder: Path) -> dict[str, str | None]:
    """Every path under ``folder`` with its content digest (None for a folder)."""
    return {str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None)
            for p in sorted(folder.rglob("*"))}


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# ------------------------------------------------------------------------------------------------
# a hub id, resolved from the HF cache (offline), on Phase 1's crafted prompts


@pytest.mark.slow
def test_hub_checkpoint_resamples_phase1_prompts_into_its_own_set(cli, make_run, hf_home, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    run = make_run("good", samples=craft_samples(n_prompts=4, per_prompt=3))
    phase1 = _lines(run / rundir.SAMPLES)
    before = _tree(run)
    r = cli("inspect", "sample", run, "--model", HUB_ID)
    assert r.code == 0, r
    target = run / "inspect" / "checkpoints" / "finetune-tests--tiny-qwen3"
    assert rundir.run_of(target) == run and rundir.is_set(target) and not rundir.is_set(run)
    after = _tree(run)
    assert {k: v for k, v in after.items() if not k.startswith("inspect")} == before  # Phase 1 untouched

    samples = _lines(target / rundir.SAMPLES)
    # the same prompts, ids, rows and columns as Phase 1, in Phase 1's order; new completions
    keep = ("id", "row", "prompt", "columns")
    assert [{k: s[k] for k in keep} for s in samples] == [{k: p[k] for k in keep} for p in phase1]
    assert all(s["source"] == "checkpoint" and 1 <= s["completion_tokens"] <= 64 for s in samples)
    info = json.loads((target / "sample_info.json").read_text())
    assert info["model_arg"] == HUB_ID and str(hf_home) in info["model"]
    assert "imported" in info["settings_from"] and info["generation"]["max_completion_length"] == 64
    record = json.loads((target / checkpoint.SET_INFO).read_text())
    assert record["phase1"][rundir.SAMPLES] == hashlib.sha256((run / rundir.SAMPLES).read_bytes()).hexdigest()
    assert (target / rundir.REWARDS).read_bytes() == (run / rundir.REWARDS).read_bytes()

    # the set scores with the run's reward as it is now: an edit in the run is copied in by `score`
    (run / rundir.REWARDS).write_text((run / rundir.REWARDS).read_text() + "\n# edited after sampling\n")
    assert checkpoint.reward_drift(target) == [rundir.REWARDS]
    r = cli("inspect", "score", target)
    assert r.code == 0, r
    assert "reward files copied from the run: rewards.py" in r.out
    assert checkpoint.reward_drift(target) == [] and (target / rundir.SCORED).is_file()
    assert not (run / rundir.SCORED).exists()  # Phase 1 was never scored here, and still is not

    # the same prompts sampled again under another name: a second set beside the first
    r = cli("inspect", "sample", run, "--model", HUB_ID, "--name", "again")
    assert r.code == 0, r
    assert _lines(run / "inspect" / "checkpoints" / "again" / rundir.SAMPLES) == samples  # same seed, same text


# ------------------------------------------------------------------------------------------------
# completions sampled elsewhere (a GPU machine, a mid-run inspection file) imported as a set


@pytest.mark.slow
def test_imported_set_through_the_gate_against_a_passing_phase1(cli, make_run):
    run = make_run("good")
    assert cli("inspect", "score", run).code == 0
    write_jsonl(run / "phase1.jsonl", verdicts_for(craft_samples(), reader="human", n=56))
    assert person_verdicts(cli, run, run / "phase1.jsonl").code == 0
    assert cli("inspect", "gate", run).code == 0
    phase1 = _tree(run)

    later = [{**s, "id": "m" + s["id"]} for s in craft_samples(seed=7)]  # other prompts, other ids
    write_jsonl(run.parent / "step_40.jsonl", [{k: v for k, v in s.items() if k != "kind"} for s in later])
    r = cli("inspect", "sample", run, "--import", run.parent / "step_40.jsonl", "--name", "step-40")
    assert r.code == 0 and "not Phase 1's prompts" in r.out, r
    target = run / "inspect" / "checkpoints" / "step-40"
    assert json.loads((target / checkpoint.SET_INFO).read_text())["same_prompts_as_phase1"] is False
    assert cli("inspect", "score", target).code == 0
    write_jsonl(target.parent / "reading.jsonl", verdicts_for(later, reader="human"))
    assert person_verdicts(cli, target, target.parent / "reading.jsonl").code == 0
    r = cli("inspect", "gate", target)
    assert r.code == 0 and "gate PASS" in r.out, r
    c = json.loads((target / checkpoint.COMPARISON).read_text())
    assert c["new_disagreements"] == [] and c["checkpoint"]["read"] == len(later)
    success = _recount_success(target)
    for rw in c["rewards"]:
        assert rw["agreement_phase1"] == rw["agreement_checkpoint"] == 1.0
        assert rw["success_rate_checkpoint"] == pytest.approx(success[rw["name"]])
    # the right answers the crafted reader accepts are exactly what the correctness reward passes
    assert success["correctness"] == pytest.approx(sum(s["kind"] == "right" for s in later) / len(later))
    assert {k: v for k, v in _tree(run).items() if not k.startswith("inspect")} == phase1
    # Phase 1's own file imported under another name: the same prompts under the same ids
    assert cli("inspect", "sample", run, "--import", run / rundir.SAMPLES, "--name", "same").code == 0
    info = json.loads((run / "inspect" / "checkpoints" / "same" / checkpoint.SET_INFO).read_text())
    assert info["same_prompts_as_phase1"] is True


# ------------------------------------------------------------------------------------------------
# bad input: one line, exit 2, nothing written


def _not_a_model(kind: str, tiny: Path, where: Path) -> Path:
    folder = where / kind
    folder.mkdir()
    if kind == "no_config":
        (folder / "weights.txt").write_text("x")
    elif kind == "adapter":
        (folder / "adapter_config.json").write_text("{}")
        (folder / "adapter_model.safetensors").write_bytes(b"x")
    elif kind == "no_weights":
        shutil.copy(tiny / "config.json", folder / "config.json")
        shutil.copy(tiny / "tokenizer.json", folder / "tokenizer.json")
    elif kind == "no_tokenizer":
        for f in ("config.json", "model.safetensors"):
            shutil.copy(tiny / f, folder / f)
    elif kind == "broken_weights":
        for f in tiny.iterdir():
            shutil.copy(f, folder / f.name)
        (folder / "model.safetensors").write_bytes(b"not safetensors")
    return folder


CASES = {  # name -> (argv after `inspect sample RUN`, phrase in the one error line)
    "missing_dir": (["--model", "{tmp}/no-such-checkpoint"], "model not found"),
    "no_config": (["--model", "{model:no_config}"], "has no config.json"),
    "adapter": (["--model", "{model:adapter}"], "LoRA adapter"),
    "no_weights": (["--model", "{model:no_weights}"], "no model weights"),
    "no_tokenizer": (["--model", "{model:no_tokenizer}"], "no tokenizer"),
    "broken_weights": (["--model", "{model:broken_weights}"], "cannot load the model"),
    "prompts_absent": (["--model", "{tiny}"], "no Phase 1 prompts"),
    "bad_name": (["--model", "{tiny}", "--name", "../escape"], "not a plain folder name"),
    "name_alone": (["--name", "x"], "use it with --model"),
    "with_import_no_name": (["--model", "{tiny}", "--import", "{run}/samples.jsonl"], "name the set"),
    "with_import_base": (["--model", "{tiny}", "--import-base", "{run}/samples.jsonl"], "--import-base does not apply"),
    "bad_import_line": (["--import", "{tmp}/bad.jsonl", "--name", "mid"], "bad.jsonl:2"),
    "hub_offline": (["--model", "nobody-here/absent-model"], "HF_HUB_OFFLINE"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_exit_2_and_writes_nothing(case, cli, make_run, tiny_model_dir, tmp_path,
                                                         monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    run = make_run("good")
    if case == "prompts_absent":
        (run / rundir.SAMPLES).unlink()
    (tmp_path / "bad.jsonl").write_text('{"prompt": "p", "completion": "c", "answer": "1"}\n{"prompt": 3}\n')
    argv, phrase = CASES[case]
    args = []
    for a in argv:
        if a.startswith("{model:"):
            a = str(_not_a_model(a[7:-1], tiny_model_dir, tmp_path))
        args.append(a.format(tmp=tmp_path, tiny=tiny_model_dir, run=run))
    before = _tree(run)
    r = cli("inspect", "sample", run, *args)
    assert r.code == 2, r
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and phrase in lines[0] and "Traceback" not in r.err, r.err
    assert _tree(run) == before


def test_a_run_directory_is_never_taken_for_a_set(cli, make_run):
    run = make_run("good")
    inner = run / "inspect" / "checkpoints" / "x"
    inner.mkdir(parents=True)
    (inner / checkpoint.SET_INFO).write_text("{}")
    (inner / rundir.SPEC).write_text((run / rundir.SPEC).read_text())  # a spec of its own: a run, not a set
    assert rundir.run_of(inner) is None and rundir.run_of(run) is None
    (inner / rundir.SPEC).unlink()
    assert rundir.run_of(inner) == run
    r = cli("inspect", "compare", run)
    assert r.code == 2 and "not a checkpoint sample set" in r.err


# ------------------------------------------------------------------------------------------------
# the demo's PASS run and its trained policy: sample → score → review → verdict → gate → compare


def _copy_demo(demo_out: Path, tmp: Path) -> Path:
    for name in ("pass", "model", "data"):  # the spec names ../model and ../data
        shutil.copytree(demo_out / name, tmp / name, symlinks=True)
    return tmp / "pass"


def _recount_success(set_path: Path) -> dict[str, float]:
    """Each reward's pass rate on the set's samples, calling rewards.py directly as TRL would."""
    samples = _lines(set_path / rundir.SAMPLES)
    spec = importlib.util.spec_from_file_location("ckpt_recount_rewards", set_path / rundir.REWARDS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    columns = {c: [s["columns"][c] for s in samples] for c in samples[0]["columns"]}
    out = {}
    from finetune.rewards.lib.rewards_meta import RewardMeta

    # a hand-written rewards.py (tests/inspect/reward_modules) lists its metas as dicts, a rendered one as RewardMeta
    metas = [RewardMeta.of(m) for m in module.REWARD_META]
    for func, meta in zip(module.REWARD_FUNCS, metas):
        scores = func(prompts=[s["prompt"] for s in samples],
                      completions=[[{"role": "assistant", "content": s["completion"]}] if s["conversational"]
                                   else s["completion"] for s in samples],
                      completion_ids=None, trainer_state=None, log_extra=None, log_metric=None, **columns)
        out[meta.name] = sum(v is not None and v >= meta.threshold - 1e-9 for v in scores) / len(samples)
    return out


def _recount_agreement(set_path: Path, metas: dict[str, dict]) -> dict[str, tuple[float, set[str]]]:
    """Per reward: (share of read samples whose verdict agrees with it, ids where it does not), from
    verdicts.jsonl and the scored passes, by the rule of DESIGN.md's reward-roles contract written out here."""
    scored = {r["id"]: r for r in _lines(set_path / rundir.SCORED)}
    # the verdict that counts per sample: verdicts.jsonl keeps every line; here the last one per id is it
    verdicts = list({v["id"]: v for v in _lines(set_path / rundir.VERDICTS)}.values())
    out = {}
    for name, meta in metas.items():
        role = meta["role"]
        against = set()
        for v in verdicts:
            row = scored[v["id"]]
            passed = row["passes"][name]
            if role in ("format", "correctness") and v["accept"] != row["all_pass"] and passed == row["all_pass"]:
                against.add(v["id"])
            said = v.get({"correctness": "correct", "format": "well_formed"}.get(role, ""))
            # correct but malformed against a format-gated correctness reward is agreement (reward-roles contract)
            excused = role == "correctness" and meta["gated"] and said is True and \
                v.get("well_formed") is False
            if said is not None and said != passed and not excused and row["rewards"][name] is not None:
                against.add(v["id"])
        out[name] = ((len(verdicts) - len(against)) / len(verdicts), against)
    return out


@pytest.mark.slow
def test_trained_checkpoint_through_the_gate_against_phase1(cli, demo_run, tmp_path):
    from finetune.demo.runner import checker_verdicts
    from finetune.inspect.gate import verify_gate
    from finetune.spec import load_spec

    run = _copy_demo(demo_run.out, tmp_path)
    spec = load_spec(run / rundir.SPEC)
    assert verify_gate(run, spec).ok
    phase1 = {k: v for k, v in _tree(run).items()}

    assert cli("inspect", "sample", run, "--model", run / "train", "--name", "step-40").code == 0
    target = run / "inspect" / "checkpoints" / "step-40"
    for argv in (("score", target), ("review", target), ("review", target, "--format", "html")):
        r = cli("inspect", *argv)
        assert r.code == 0, r
    # the demo's independent checker reads the checkpoint's samples (as it read Phase 1's)
    reading, counts = checker_verdicts(target, spec)
    assert counts["read"] == len(_lines(target / rundir.SAMPLES))
    assert cli("inspect", "verdict", target, "--file", reading, "--reader", "agent").code == 0
    assert cli("inspect", "confirm", target, "--user", "test reader", "--yes").code == 0
    for flag in json.loads((target / rundir.SCORE_REPORT).read_text())["flags"]:
        assert not flag["name"].startswith("base_")  # a trained policy's success is no flag about the reward
        assert cli("inspect", "ack", target, flag["id"], "--reason",
                   "seen on the trained policy's samples; read and judged in this test", "--yes").code == 0
    r = cli("inspect", "gate", target)
    assert r.code == 0, r
    assert "Checkpoint `step-40` against Phase 1" in r.out and "gate PASS" in r.out

    metas = {m["name"]: m for m in json.loads((run / rundir.SCORE_REPORT).read_text())["rewards"]}
    roles = {n: m["role"] for n, m in metas.items()}
    comparison = json.loads((target / checkpoint.COMPARISON).read_text())
    success = _recount_success(target)
    agreement = _recount_agreement(target, metas)
    phase1_agree = _recount_agreement(run, metas)
    phase1_success = {n: sum(r["passes"][n] for r in _lines(run / rundir.SCORED)) / len(_lines(run / rundir.SCORED))
                      for n in roles}
    for rw in comparison["rewards"]:
        assert rw["success_rate_checkpoint"] == pytest.approx(success[rw["name"]])
        assert rw["success_rate_phase1"] == pytest.approx(phase1_success[rw["name"]])
        assert rw["agreement_checkpoint"] == pytest.approx(agreement[rw["name"]][0])
        assert rw["agreement_phase1"] == pytest.approx(phase1_agree[rw["name"]][0])
    # the trained policy passes the correctness reward far more often than the base model did
    correct = next(rw for rw in comparison["rewards"] if roles[rw["name"]] == "correctness")
    assert correct["success_rate_checkpoint"] > correct["success_rate_phase1"] + 0.2
    assert comparison["phase1"]["gate"] == "PASS (holds)" and comparison["checkpoint"]["gate"] == "PASS"

    # a reader who finds three passing completions wrong: new false positives the comparison names
    passing = [r for r in _lines(target / rundir.SCORED) if r["all_pass"]][:3]
    assert person_verdicts(cli, target, [{"id": row["id"], "accept": False, "correct": False, "well_formed": True,
                                          "note": "not what the prompt asked"} for row in passing]).code == 0
    r = cli("inspect", "gate", target)
    assert r.code == 1 and "disagreement" in r.err
    comparison = json.loads((target / checkpoint.COMPARISON).read_text())
    flipped = {row["id"] for row in passing}
    assert {d["id"] for d in comparison["new_disagreements"]} == flipped
    assert all(d["kind"] == "false_positive" for d in comparison["new_disagreements"])
    agreement = _recount_agreement(target, metas)
    for rw in comparison["rewards"]:
        assert rw["agreement_checkpoint"] == pytest.approx(agreement[rw["name"]][0])
        assert set(rw["new_false_positive"]) == agreement[rw["name"]][1] == flipped
    md = (target / checkpoint.COMPARISON_MD).read_text()
    assert all(i in md for i in flipped) and f"on {len(flipped)} sample(s))" in md

    # Phase 1: every file byte-identical, its gate record still PASS and still holding
    assert {k: v for k, v in _tree(run).items() if not k.startswith("inspect")} == phase1
    assert json.loads((run / rundir.GATE).read_text())["status"] == "PASS" and verify_gate(run, spec).ok
