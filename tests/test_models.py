"""finetune.models: exact parameter counts on the meta device, bundled configs, local configs, errors."""

from __future__ import annotations

import json
import time

import pytest

from finetune.errors import UserError
from finetune.models import bundled_models, load_model_info, scale_class_of

# Published sizes: parameter counts of the hub configs, built with transformers 5.24 on the meta device.
PUBLISHED = {
    "Qwen/Qwen2.5-0.5B": (0.494, 12, "≤3B"), "Qwen/Qwen2.5-1.5B": (1.544, 28, "≤3B"),
    "Qwen/Qwen2.5-3B": (3.086, 36, "≤3B"), "Qwen/Qwen2.5-7B": (7.616, 56, "7-8B"),
    "Qwen/Qwen2.5-14B": (14.770, 192, "14B"), "Qwen/Qwen2.5-32B": (32.764, 256, "32B"),
    "Qwen/Qwen2.5-72B": (72.706, 320, "70B"), "meta-llama/Llama-3.1-8B": (8.030, 128, "7-8B"),
    "meta-llama/Llama-3.1-70B": (70.554, 320, "70B"), "Qwen/Qwen3-0.6B": (0.596, 112, "≤3B"),
    "Qwen/Qwen3-1.7B": (1.721, 112, "≤3B"), "Qwen/Qwen3-4B": (4.022, 144, "≤3B"),
    "Qwen/Qwen3-8B": (8.191, 144, "7-8B"), "Qwen/Qwen3-14B": (14.768, 160, "14B"),
    "Qwen/Qwen3-32B": (32.762, 256, "32B"), "Qwen/Qwen3-30B-A3B": (30.532, 96, "MoE"),
    "google/gemma-2-9b": (9.242, 336, "7-8B"),  # scripts/finetune/data/model_configs/SOURCES.md
}


def test_every_model_of_the_table_is_bundled():
    assert set(bundled_models()) == set(PUBLISHED)


@pytest.mark.parametrize("hub_id", sorted(PUBLISHED))
def test_param_totals_and_kv_match_the_published_table(hub_id):
    billions, kv_kib, scale = PUBLISHED[hub_id]
    info = load_model_info(hub_id)
    assert round(info.params / 1e9, 3) == billions
    assert info.kv_bytes_per_token() == kv_kib * 1024
    assert info.scale_class == scale


def test_tied_embedding_counted_once():
    # accelerate.init_empty_weights() would give 0.630 B here (the embedding counted twice).
    info = load_model_info("Qwen/Qwen2.5-0.5B")
    assert info.tied and info.lm_head_params == 0
    assert info.params == 494_032_768
    untied = load_model_info("Qwen/Qwen2.5-7B")
    assert not untied.tied and untied.lm_head_params == untied.embedding_params == 152064 * 3584


def test_lora_param_counts_on_seven_projections():
    # r · (d_in + d_out) per adapted projection: q, k, v, o, gate, up, down.
    assert round(load_model_info("Qwen/Qwen2.5-7B").lora_params(16) / 1e6, 1) == 40.4
    assert round(load_model_info("meta-llama/Llama-3.1-8B").lora_params(16) / 1e6, 1) == 41.9
    llama = load_model_info("meta-llama/Llama-3.1-8B")
    assert llama.lora_params(16, ["q_proj", "v_proj"]) == 32 * 16 * ((4096 + 4096) + (4096 + 1024))


def test_moe_facts():
    moe = load_model_info("Qwen/Qwen3-30B-A3B")
    assert moe.is_moe and moe.num_experts == 128 and moe.experts_per_token == 8
    assert round(moe.active_params / 1e9, 2) == 3.35
    # fused expert tensors are the largest "layer" DeepSpeed gathers: 128 × 3 × 2048 × 768
    assert moe.largest_layer_params == 128 * 3 * 2048 * 768


def test_hub_id_variants_resolve_to_the_bundled_base_config():
    assert load_model_info("Qwen/Qwen2.5-7B-Instruct").params == load_model_info("Qwen/Qwen2.5-7B").params
    assert load_model_info("llama-3.1-8b").params == load_model_info("meta-llama/Llama-3.1-8B").params


def test_local_model_folder(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    info = load_model_info(str(tiny_model_dir))
    real = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert info.params == sum(p.numel() for p in real.parameters())
    assert info.tied and info.layers == 2 and info.hidden == 64


def test_local_moe_folder(tiny_moe_model_dir):
    info = load_model_info(str(tiny_moe_model_dir))
    assert info.is_moe and info.num_experts == 4 and info.experts_per_token == 2
    assert info.scale_class == "MoE"


def test_model_config_relative_to_base_dir(tmp_path):
    cfg = json.loads(open(load_model_info("Qwen/Qwen3-0.6B").source, encoding="utf-8").read())
    cfg["num_hidden_layers"] = 2
    (tmp_path / "my.json").write_text(json.dumps(cfg))
    info = load_model_info("my-org/private-model", model_config="my.json", base_dir=tmp_path)
    assert info.layers == 2 and info.name == "my-org/private-model"


def test_vision_language_config_is_flagged(tmp_path):
    from transformers import Qwen2VLConfig

    cfg = Qwen2VLConfig(text_config=dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                         num_key_value_heads=2, intermediate_size=128, vocab_size=1000),
                        vision_config=dict(depth=1, embed_dim=32, hidden_size=64, num_heads=2))
    cfg.save_pretrained(tmp_path)
    info = load_model_info(str(tmp_path))
    assert info.is_vlm and info.layers == 2 and info.vocab == 1000


def test_unknown_model_names_the_field_to_set():
    with pytest.raises(UserError) as err:
        load_model_info("some-org/never-heard-of-it")
    assert err.value.where == "model" and "model_config:" in err.value.fix


def test_missing_local_path_and_bad_model_config(tmp_path):
    with pytest.raises(UserError, match="no config.json"):
        load_model_info("./nope")
    with pytest.raises(UserError) as err:
        load_model_info("x/y", model_config="missing/config.json", base_dir=tmp_path)
    assert err.value.where == "model_config"
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(UserError, match="invalid JSON"):
        load_model_info("x/y", model_config=str(bad))


def test_scale_class_boundaries():
    assert [scale_class_of(p) for p in (0.5e9, 4.9e9, 5e9, 12e9, 30e9, 72e9)] == \
        ["≤3B", "≤3B", "7-8B", "14B", "32B", "70B"]
    assert scale_class_of(3e9, is_moe=True) == "MoE"


def test_70b_is_fast_and_cached():
    from finetune.models import _load_cached

    _load_cached.cache_clear()
    start = time.perf_counter()
    first_info = load_model_info("meta-llama/Llama-3.1-70B")
    first = time.perf_counter() - start
    start = time.perf_counter()
    assert load_model_info("meta-llama/Llama-3.1-70B") == first_info  # served from the in-process cache
    assert time.perf_counter() - start < 0.05
    assert first < 5, f"building a 70B config on the meta device took {first:.1f} s"


def test_disk_cache_is_used_and_survives_corruption(tmp_path, monkeypatch):
    from finetune.models import _load_cached, cache_dir

    monkeypatch.setenv("FINETUNE_CACHE_DIR", str(tmp_path))
    assert cache_dir() == tmp_path
    _load_cached.cache_clear()
    real = load_model_info("Qwen/Qwen3-0.6B")
    [entry] = list(tmp_path.glob("*.json"))
    data = json.loads(entry.read_text())
    data["params"] = 123  # a planted value proves the next load reads the disk, not the meta model
    entry.write_text(json.dumps(data))
    _load_cached.cache_clear()
    assert load_model_info("Qwen/Qwen3-0.6B").params == 123
    entry.write_text("{corrupt")
    _load_cached.cache_clear()
    assert load_model_info("Qwen/Qwen3-0.6B") == real
    monkeypatch.setenv("FINETUNE_CACHE_DIR", "off")
    assert cache_dir() is None
    _load_cached.cache_clear()


def test_hub_cache_and_adapter_folders(tmp_path, monkeypatch):
    from finetune.models import resolve_config_path

    cfg = json.loads(open(load_model_info("Qwen/Qwen3-0.6B").source, encoding="utf-8").read())
    cfg["num_hidden_layers"] = 3
    snapshot = tmp_path / "hub" / "models--acme--tuned-0.6b" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "hub" / "models--acme--tuned-0.6b" / "refs").mkdir()
    (tmp_path / "hub" / "models--acme--tuned-0.6b" / "refs" / "main").write_text("abc123")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert load_model_info("acme/tuned-0.6b").layers == 3  # found offline in the hub cache, not bundled
    adapter = tmp_path / "my-adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "Qwen/Qwen2.5-7B"}))
    assert resolve_config_path("my-adapter", base_dir=tmp_path).parent.name == "Qwen2.5-7B"
    assert load_model_info(str(adapter)).params == load_model_info("Qwen/Qwen2.5-7B").params
