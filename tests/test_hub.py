"""Hub ids resolve the way transformers resolves them (finetune.hub), fully offline.

The HF cache is a temp folder laid out exactly as huggingface_hub caches a download (conftest's
``hf_home``), so the real snapshot / cache look-up code runs; HF_HUB_OFFLINE=1 throughout.
"""

from __future__ import annotations

import json

import pytest
from hfcache_helpers import HUB_REPO_ID, install_in_hf_cache

from finetune.errors import UserError


def test_hub_id_resolves_to_the_cached_snapshot_and_loads(hf_home, tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from finetune import hub

    folder = hub.resolve_model(HUB_REPO_ID)
    assert folder.parent.parent.name == "models--finetune-tests--tiny-qwen3" and folder.parent.name == "snapshots"
    assert (folder / "config.json").is_symlink()  # the cache's blob links, not a copy of the model folder
    model = AutoModelForCausalLM.from_pretrained(str(folder))
    tok = AutoTokenizer.from_pretrained(str(folder))
    assert model.config.num_hidden_layers == 2 and tok.decode(tok("12+3")["input_ids"]) == "12+3"
    assert hub.resolve_config(HUB_REPO_ID) == folder / "config.json"


def test_local_folder_wins_and_relative_paths_use_the_spec_folder(hf_home, tiny_model_dir, tmp_path):
    from finetune import hub

    assert hub.resolve_model(str(tiny_model_dir)) == tiny_model_dir
    assert hub.resolve_model(tiny_model_dir.name, base_dir=tiny_model_dir.parent) == tiny_model_dir
    # a folder named like a hub id under the spec's folder is the user's folder, not the cache's
    shadow = tmp_path / "finetune-tests" / "tiny-qwen3"
    shadow.mkdir(parents=True)
    (shadow / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    assert hub.resolve_model(HUB_REPO_ID, base_dir=tmp_path) == shadow
    assert hub.resolve_config(HUB_REPO_ID, base_dir=tmp_path) is None  # models.py reads the local one


def test_model_info_of_a_hub_id_comes_from_the_cached_config(hf_home):
    from finetune.models import load_model_info

    info = load_model_info(HUB_REPO_ID)
    assert info.layers == 2 and info.hidden == 64 and str(hf_home) in info.source


def test_missing_hub_id_offline_is_one_line_naming_id_and_offline(hf_home, monkeypatch):
    from finetune import hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for call in (hub.resolve_model, hub.resolve_config):
        with pytest.raises(UserError) as err:
            call("nobody-here/absent-model")
        line = err.value.line()
        assert "nobody-here/absent-model" in line and "HF_HUB_OFFLINE" in line and "\n" not in line
        assert str(hf_home / "hub") in line  # says which cache it looked in


def test_a_cache_holding_only_config_json_serves_estimates_not_sampling(hf_home, tiny_model_dir, tmp_path):
    from finetune import hub
    from finetune.models import load_model_info

    only_config = tmp_path / "cfg"
    only_config.mkdir()
    (only_config / "config.json").write_bytes((tiny_model_dir / "config.json").read_bytes())
    install_in_hf_cache(only_config, hf_home / "hub", "finetune-tests/config-only")
    assert load_model_info("finetune-tests/config-only").layers == 2  # what a memory estimate fetches
    assert hub.cached_model("finetune-tests/config-only") is None
    with pytest.raises(UserError, match="not complete.*HF_HUB_OFFLINE"):
        hub.resolve_model("finetune-tests/config-only")


def test_cli_memory_and_sample_refuse_a_missing_hub_id_with_one_line(hf_home, cli, tmp_path):
    r = cli("memory", "--model", "nobody-here/absent-model", "--profile", "h100-80gb")
    assert r.code == 2 and "nobody-here/absent-model" in r.err and "HF_HUB_OFFLINE" in r.err
    assert "Traceback" not in r.err and len(r.err.strip().splitlines()) == 1
    r = cli("memory", "--model", HUB_REPO_ID, "--profile", "h100-80gb")
    assert r.code == 0, r


def test_not_a_path_nor_a_hub_id(tmp_path):
    from finetune import hub

    with pytest.raises(UserError, match="model not found"):
        hub.resolve_model("./absent-model", base_dir=tmp_path)
    assert hub.cached_model("./absent-model", base_dir=tmp_path) is None
    assert not hub.is_repo_id("a/b/c") and not hub.is_repo_id("./x") and hub.is_repo_id("Qwen/Qwen2.5-1.5B")
