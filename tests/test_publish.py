"""`finetune publish`: the model card carries every provenance field of the gate (hashes, reading, blind statement,
bounds, acknowledged flags and why, probes, variant and its licence, the held-out evaluation with its interval), Hub
metadata through huggingface_hub's ModelCard, nothing of the run's data unless asked; the push goes through HfApi
(a fake that records the calls here), private unless --public; bad input is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gated_helpers import HELD, gated_run

from finetune import publish, rundir


class FakeApi:
    """Records what publish asks of huggingface_hub.HfApi (and what the uploaded folder held)."""

    def __init__(self):
        self.calls: list[tuple[str, dict]] = []

    def create_repo(self, repo_id, *, private, exist_ok, repo_type):
        self.calls.append(("create_repo", {"repo_id": repo_id, "private": private, "exist_ok": exist_ok,
                                           "repo_type": repo_type}))

    def upload_folder(self, *, repo_id, folder_path, commit_message, repo_type):
        files = sorted(p.name for p in Path(folder_path).iterdir())
        card = (Path(folder_path) / publish.CARD).read_text()
        self.calls.append(("upload_folder", {"repo_id": repo_id, "files": files, "card": card,
                                             "message": commit_message, "repo_type": repo_type}))

        class Info:
            oid = "0123abcd"

        return Info


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory, tiny_model_dir):
    from finetune.evaluate import evaluate

    run = gated_run(tmp_path_factory.mktemp("publish") / "run", str(tiny_model_dir))
    ckpt = run / "train"
    ckpt.mkdir()
    for p in Path(tiny_model_dir).iterdir():  # the checkpoint: a saved model folder (the tiny model's own files)
        if p.is_file():
            (ckpt / p.name).write_bytes(p.read_bytes())
    (ckpt / "optimizer.pt").write_bytes(b"not for the hub")
    evaluate(run, str(ckpt), name="final", k=1, backend="transformers")
    return run


@pytest.mark.slow
def test_dry_run_card_has_every_provenance_field_and_no_private_data(evaluated, cli):
    r = cli("publish", evaluated, "--repo", "me/tiny-grpo", "--license", "apache-2.0", "--eval", "final",
            "--dataset", "me/arith", "--dry-run")
    assert r.code == 0, r
    target = evaluated / publish.PUBLISH_DIR / "me--tiny-grpo"
    card = (target / publish.CARD).read_text()
    gate = json.loads((evaluated / rundir.GATE).read_text())
    from huggingface_hub import ModelCard

    meta = ModelCard(card).data.to_dict()
    assert meta["license"] == "apache-2.0" and meta["datasets"] == ["me/arith"] and "reward-gated" in meta["tags"]
    assert "base_model" not in meta  # a local model folder is not a Hub id: its path stays out
    assert f"Gate: **PASS** at {gate['time']}" in card
    assert publish._sha256(evaluated / rundir.GATE) in card
    for key, digest in gate["hashes"].items():  # every bound file and spec section with its sha256
        assert f"`{key}`: `{digest}`" in card
    read = gate["counts"]["read"]
    assert f"Reading: {read} samples read" in card and f"{gate['counts']['agreed']} agreed" in card
    assert f"Blind: {gate['blind']['statement']}" in card
    from finetune.inspect import bounds

    assert gate["bounds"] and all(bounds.line(b) in card for b in gate["bounds"])  # each as the gate says it
    assert "Red flags acknowledged: none" in card and "Hack probes:" in card
    assert "Variant: grpo — licensed by the base recipe" in card
    assert "| accept |" in card and "bootstrap interval" in card and "sign test" in card
    assert str(evaluated) not in card and not any(h["prompt"] in card for h in HELD)  # nothing from the run's data
    plan = json.loads((target / publish.PLAN).read_text())
    assert plan["private"] is True and plan["dry_run"] is True and plan["pushed"] is None
    assert "optimizer.pt" not in plan["files"] and "model.safetensors" in plan["files"]


@pytest.mark.slow
def test_push_creates_a_private_repo_and_uploads_weights_and_card(evaluated):
    api = FakeApi()
    plan, _ = publish.publish(evaluated, "me/tiny-grpo", eval_name="final", license="mit", api=api)
    (kind1, create), (kind2, upload) = api.calls
    assert (kind1, kind2) == ("create_repo", "upload_folder")
    assert create == {"repo_id": "me/tiny-grpo", "private": True, "exist_ok": True, "repo_type": "model"}
    assert upload["repo_id"] == "me/tiny-grpo" and publish.CARD in upload["files"]
    assert "model.safetensors" in upload["files"] and "optimizer.pt" not in upload["files"]
    assert "Gate: **PASS**" in upload["card"] and plan["pushed"] == {"commit": "0123abcd"}
    api = FakeApi()
    publish.publish(evaluated, "me/tiny-grpo", license="mit", public=True, examples=2, eval_name="final", api=api)
    assert api.calls[0][1]["private"] is False
    assert "Examples of the trained model's held-out answers" in api.calls[1][1]["card"]


@pytest.mark.slow
def test_bad_input_is_one_line_and_writes_nothing(evaluated, cli):
    before = sorted(p.relative_to(evaluated) for p in evaluated.rglob("*"))
    for args in (["--repo", "not a repo", "--license", "mit"],
                 ["--repo", "me/x", "--license", "mit", "--weights", "adapter"],  # a full model is no adapter
                 ["--repo", "me/x", "--license", "mit", "--eval", "missing"],
                 ["--repo", "me/x", "--license", "mit", "--checkpoint", str(evaluated / "nope")]):
        r = cli("publish", evaluated, *args, "--dry-run")
        assert r.code == 2 and r.err.startswith("error:") and len(r.err.strip().splitlines()) == 1, (args, r)
    assert sorted(p.relative_to(evaluated) for p in evaluated.rglob("*")) == before


def test_acknowledged_flags_carry_their_written_reason():
    gate = {"flags": [{"id": "length_correlated:correct", "status": "acknowledged",
                       "ack": {"reason": "longer proofs are the correct ones here", "by": "ana", "time": "t"}},
                      {"id": "truncated", "status": "open"}]}
    assert publish.acknowledged(gate) == [{"flag": "length_correlated:correct",
                                           "reason": "longer proofs are the correct ones here", "by": "ana",
                                           "time": "t"}]


def test_the_command_is_the_persons_and_never_pre_approved(repo_root):
    text = (repo_root / "commands" / "finetune.md").read_text()
    front = text.split("---")[1]
    assert "publish" not in front  # allowed-tools pre-approves no publish
    assert publish.GUARD_DENIED == ("publish",)
    # the plugin's PreToolUse guard refuses it to the agent, in any spelling (tests/hostile/test_hook.py drives it)
    import importlib.util

    spec = importlib.util.spec_from_file_location("llm_finetuning_guard_publish", repo_root / "hooks" / "guard.py")
    assert spec is not None and spec.loader is not None
    guard = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(guard)
    assert publish.GUARD_DENIED in [prefix for prefix, _ in guard.PERSON_COMMANDS]
    for args in (["publish", "runs/x", "--dry-run"], ["--quiet", "publish", "runs/x", "--repo", "me/m"]):
        assert guard.person_command(args), args
