"""LoRA sizing on exactly the modules a spec targets (PEFT's target_modules semantics, counted against PEFT itself
on the tiny local model), the refusal of names the model lacks, and the LM head every estimate and suggestion
sizes (TRL 1.16's fused head, the spec's cast_lm_head_to_fp32)."""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path

import pytest

from finetune.errors import UserError
from finetune.hardware import resolve_hardware
from finetune.loratargets import lora_target_problem
from finetune.memory.estimate import Knobs, estimate, rendered_lm_head, workload_of
from finetune.memory.formulas import GIB
from finetune.memory.recommend import recommend
from finetune.models import ModelInfo, load_model_info
from finetune.spec import parse_spec

# PEFT's three forms: the shorthand, a list of names / dotted suffixes, one regular expression over full names
TARGETS: list[str | list[str]] = [
    ["q_proj", "v_proj"],
    "all-linear",
    "ALL-LINEAR",
    ["self_attn.q_proj", "down_proj"],
    ["model.layers.0.self_attn.k_proj"],
    r".*\.layers\.1\..*_proj",
    r".*\.(q|k)_proj",
]


@pytest.fixture(scope="module")
def tiny(tiny_model_dir: Path) -> ModelInfo:
    return load_model_info(str(tiny_model_dir))


def _peft_trainable(model_dir: Path, r: int, target_modules: str | list[str]) -> int:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        peft_model = get_peft_model(model, LoraConfig(r=r, target_modules=target_modules, task_type="CAUSAL_LM"))
    trainable, _ = peft_model.get_nb_trainable_parameters()
    return int(trainable)


@pytest.mark.parametrize("target_modules", TARGETS, ids=str)
def test_lora_params_equal_peft_on_the_tiny_model(tiny_model_dir: Path, tiny: ModelInfo,
                                                  target_modules: str | list[str]) -> None:
    assert tiny.lora_params(8, target_modules) == _peft_trainable(tiny_model_dir, 8, target_modules)


# transformers 5 fuses MoE experts into (E, d1, d2) tensors; PEFT 0.21 maps the old names onto them
# (target_parameters), gate_proj + up_proj at twice the rank, and resolves a regex to leaf names first
MOE_TARGETS: list[str | list[str]] = [
    "all-linear", ["q_proj", "v_proj"], ["gate_proj", "up_proj", "down_proj"], ["down_proj"], ["gate"],
    ["mlp.gate", "q_proj"], ["experts.down_proj"], r".*\.layers\.1\..*_proj", r".*\.layers\.1\.self_attn\.q_proj",
    ".*down_proj",
]


@pytest.fixture(scope="module")
def tiny_moe(tiny_moe_model_dir: Path) -> ModelInfo:
    return load_model_info(str(tiny_moe_model_dir))


@pytest.mark.parametrize("target_modules", MOE_TARGETS, ids=str)
def test_lora_params_equal_peft_on_the_tiny_moe_model(tiny_moe_model_dir: Path, tiny_moe: ModelInfo,
                                                      target_modules: str | list[str]) -> None:
    assert tiny_moe.lora_params(4, target_modules) == _peft_trainable(tiny_moe_model_dir, 4, target_modules)


def test_moe_all_linear_adapts_every_expert(tiny_moe: ModelInfo) -> None:
    # by hand: per layer gate_up (E 4 × (h 64 + 2I 256)) at 2r, down (4 × (128 + 64)) at r, router r·(64 + 4)
    r, layers = 4, tiny_moe.layers
    attention = tiny_moe.lora_params(r, ["q_proj", "k_proj", "v_proj", "o_proj"])
    experts = layers * (2 * r * 4 * (64 + 256) + r * 4 * (128 + 64) + r * (64 + 4))
    assert tiny_moe.lora_params(r, "all-linear") == attention + experts


def test_half_a_fused_pair_is_refused_as_peft_does(tiny_moe_model_dir: Path, tiny_moe: ModelInfo) -> None:
    problem = lora_target_problem(tiny_moe, ["gate_proj", "q_proj"])
    assert problem is not None and "without up_proj" in problem[0] and "gate_up_proj" in problem[0]
    with pytest.raises(ValueError, match="without also targeting up_proj"):
        _peft_trainable(tiny_moe_model_dir, 4, ["gate_proj", "q_proj"])


@pytest.mark.slow
def test_qwen3_moe_lora_equals_peft_on_the_meta_model() -> None:
    """Qwen3-30B-A3B (bundled config, built on the meta device): all-linear LoRA r=16 is ~1 B parameters with the
    experts, not the attention's 13 M."""
    import json

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig, AutoModelForCausalLM

    from finetune.models import resolve_config_path

    info = load_model_info("Qwen/Qwen3-30B-A3B")
    raw = json.loads(resolve_config_path("Qwen/Qwen3-30B-A3B").read_text())
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**raw))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        peft_model = get_peft_model(model, LoraConfig(r=16, target_modules="all-linear", task_type="CAUSAL_LM"))
    trainable = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    assert info.lora_params(16) == trainable == 996_507_648


def test_q_v_only_is_smaller_than_all_linear_by_the_config_shapes(tiny_model_dir: Path, tiny: ModelInfo) -> None:
    qv, every = tiny.lora_params(8, ["q_proj", "v_proj"]), tiny.lora_params(8, "all-linear")
    # by hand from the config: q 64→(4 heads × 16), v 64→(2 KV heads × 16), per layer, 2 layers
    h, q, kv = tiny.hidden, tiny.q_dim, tiny.kv_dim
    assert qv == tiny.layers * 8 * ((h + q) + (h + kv)) == _peft_trainable(tiny_model_dir, 8, ["q_proj", "v_proj"])
    assert qv < every


def test_estimate_sizes_adapters_gradients_and_optimizer_on_the_targets() -> None:
    qwen7 = load_model_info("Qwen/Qwen2.5-7B")
    h100 = resolve_hardware("h100-80gb")
    qv = estimate(qwen7, h100, Knobs("lora", lora_target_modules=["q_proj", "v_proj"]), suggest=False)
    every = estimate(qwen7, h100, Knobs("lora"), suggest=False)
    L = qwen7.lora_params(16, ["q_proj", "v_proj"])
    # Qwen2.5-7B: 28 layers, q 3584→3584, v 3584→512 → 28 × 16 × (7168 + 4096)
    assert L == 28 * 16 * ((3584 + 3584) + (3584 + 512))
    assert qv.gib_of("adapters") * GIB == 4 * L and qv.gib_of("gradients") * GIB == 4 * L
    assert qv.gib_of("optimizer") * GIB == 8 * L
    assert every.gib_of("adapters") * GIB == 4 * qwen7.lora_params(16)
    assert "on q_proj, v_proj (fp32)" in qv.component("adapters").label  # type: ignore[union-attr]
    assert qv.settings["lora_target_modules"] == ["q_proj", "v_proj"]


SPEC = {
    "name": "lora-targets", "model": "Qwen/Qwen2.5-7B", "method": "lora", "dataset": {"path": "data.jsonl"},
    "rewards": [{"name": "format_ok", "type": "format", "pattern": "answer_tag"}],
    "hardware": {"profile": "rtx-4090-24gb"},
    "lora": {"target_modules": ["q_proj", "v_proj"]},
}


def test_recommend_sizes_the_spec_targets_not_all_linear(tmp_path: Path) -> None:
    spec = parse_spec(SPEC, tmp_path / "spec.yaml")
    w = workload_of(spec)
    assert w.lora_target_modules == ["q_proj", "v_proj"] and w.fused_lm_head and not w.cast_lm_head_to_fp32
    model = load_model_info("Qwen/Qwen2.5-7B")
    rec = recommend(model, resolve_hardware("rtx-4090-24gb"), "lora", w)
    assert rec.estimate.gib_of("adapters") * GIB == 4 * model.lora_params(16, ["q_proj", "v_proj"])
    assert rec.reasons["method"].startswith("LoRA r=16 on q_proj, v_proj: peak")
    # every candidate recommend() weighed carried the targets: the chosen one equals a direct estimate of it
    direct = estimate(model, rec.estimate.hardware, replace(w, method="lora", **_rec_knobs(rec)), suggest=False)
    assert direct.total_gib == rec.estimate.total_gib


def _rec_knobs(rec: object) -> dict[str, object]:
    s = rec.estimate.settings  # type: ignore[attr-defined]
    keep = ("per_device_train_batch_size", "gradient_accumulation_steps", "steps_per_generation",
            "gradient_checkpointing", "optimizer", "zero_stage", "use_vllm", "vllm_mode",
            "vllm_gpu_memory_utilization", "vllm_enable_sleep_mode", "model_dtype")
    return {k: s[k] for k in keep}


@pytest.mark.parametrize("target_modules, needle", [
    (["q_proj", "qproj"], "'qproj': no layer"),
    ("q_proj", "matches no layer"),  # a lone string is a regex over full names, as in PEFT
    (["lm_head"], "fused LM head"),
    (".*(q_proj|lm_head)", "fused LM head"),
])
def test_bad_targets_are_refused_with_the_model_names(tiny: ModelInfo, target_modules: str | list[str],
                                                      needle: str) -> None:
    problem = lora_target_problem(tiny, target_modules)
    assert problem is not None and needle in problem[0]
    assert "q_proj" in problem[1] and "v_proj" in problem[1]
    with pytest.raises(UserError) as err:
        tiny.lora_params(16, target_modules)
    assert err.value.where == "lora.target_modules"


def test_trl_fused_head_leaves_an_lm_head_adapter_untrained(tiny_model_dir: Path) -> None:
    """Why lm_head is refused: the fused head TRL 1.16 patches reads lm_head.weight, bypassing PEFT's adapter."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        peft_model = get_peft_model(model, LoraConfig(r=4, target_modules=["lm_head", "q_proj"],
                                                      task_type="CAUSAL_LM", init_lora_weights=False))
    add_fused_lm_head(peft_model.get_base_model())  # as GRPOTrainer does, after wrapping
    ids = torch.randint(0, 50, (2, 8))
    peft_model(input_ids=ids, labels=ids, fused_lm_head=True).log_probs.sum().backward()
    grads = {n: p.grad for n, p in peft_model.named_parameters() if "lora_B" in n}
    head = [g for n, g in grads.items() if "lm_head" in n]
    q = [g for n, g in grads.items() if "q_proj" in n]
    assert head and all(g is None for g in head)
    assert q and all(g is not None and float(g.abs().sum()) > 0 for g in q)


@pytest.mark.parametrize("spec_targets", [["q_proj", "nope"], "(unclosed"])
def test_cli_memory_refuses_bad_targets_in_one_line(cli, tmp_path: Path, spec_targets: str | list[str]) -> None:
    import yaml

    (tmp_path / "spec.yaml").write_text(yaml.safe_dump({**SPEC, "lora": {"target_modules": spec_targets}}))
    res = cli("memory", tmp_path / "spec.yaml")
    assert res.code == 2 and res.err.count("\n") == 1 and "Traceback" not in res.err, res
    assert "target_modules" in res.err
    assert not (tmp_path / "memory.md").exists()


@pytest.mark.parametrize("value, needle", [([], "adapts nothing"), (["q_proj", "all-linear"], "shorthand"),
                                           ([""], "empty module name"), ("(", "regular expression")])
def test_spec_load_refuses_malformed_targets(tmp_path: Path, value: object, needle: str) -> None:
    with pytest.raises(UserError) as err:
        parse_spec({**SPEC, "lora": {"target_modules": value}}, tmp_path / "spec.yaml")
    assert needle in err.value.what and "lora.target_modules" in err.value.what


# ------------------------------------------------------------------------------------------- the LM head

def test_rendered_lm_head_is_trl_fused_with_the_spec_cast() -> None:
    assert rendered_lm_head({}) == {"fused_lm_head": True, "cast_lm_head_to_fp32": False}
    assert rendered_lm_head({"cast_lm_head_to_fp32": True})["cast_lm_head_to_fp32"] is True


@pytest.mark.parametrize("head", [{"fused_lm_head": False}, {"cast_lm_head_to_fp32": True}], ids=str)
def test_suggestions_re_estimate_with_the_same_lm_head(head: dict[str, bool]) -> None:
    llama8 = load_model_info("meta-llama/Llama-3.1-8B")
    hw = resolve_hardware("h100-80gb")
    knobs = Knobs("full", per_device_train_batch_size=8, max_completion_length=4096, zero_stage=0,
                  lora_target_modules=["q_proj", "v_proj"], **head)  # type: ignore[arg-type]
    est = estimate(llama8, hw, knobs)
    assert est.verdict != "fits" and est.suggestions
    assert {k: est.settings[k] for k in head} == head
    checked = 0
    for sug in est.suggestions:
        if set(sug.change) <= {"per_device_train_batch_size", "gradient_accumulation_steps", "steps_per_generation",
                               "max_completion_length", "method", "optimizer"}:
            after = estimate(llama8, hw, replace(knobs, model_dtype=None, **sug.change), suggest=False)
            assert sug.total_after_gib == pytest.approx(after.total_gib), sug.action
            checked += 1
    assert checked >= 3
    lora = next(s for s in est.suggestions if s.change.get("method") == "lora")
    assert lora.action.startswith("LoRA r=16 on q_proj, v_proj")


def test_cast_lm_head_to_fp32_costs_the_head_in_fp32() -> None:
    qwen = load_model_info("Qwen/Qwen2.5-1.5B")
    hw = resolve_hardware("h100-80gb")
    plain = estimate(qwen, hw, Knobs("lora"), suggest=False)
    cast = estimate(qwen, hw, Knobs("lora", cast_lm_head_to_fp32=True), suggest=False)
    assert cast.gib_of("lm_head_fp32") * GIB == qwen.vocab * qwen.hidden * 2
    assert cast.gib_of("lm_head") > plain.gib_of("lm_head") and plain.component("lm_head_fp32") is None


def test_lora_suggestion_for_a_full_run_uses_the_spec_rank_and_targets() -> None:
    llama8 = load_model_info("meta-llama/Llama-3.1-8B")
    hw = resolve_hardware("h100-80gb")
    knobs = Knobs("full", lora_r=32, lora_target_modules=["q_proj", "v_proj"])
    est = estimate(llama8, hw, knobs)
    lora = next(s for s in est.suggestions if s.change.get("method") == "lora")
    assert lora.action.startswith("LoRA r=32 on q_proj, v_proj")
    after = estimate(llama8, hw, replace(knobs, method="lora"), suggest=False)
    assert lora.total_after_gib == pytest.approx(after.total_gib)
    assert after.gib_of("adapters") * GIB == 4 * llama8.lora_params(32, ["q_proj", "v_proj"])


def test_targets_in_words_come_from_the_model_names(tiny: ModelInfo) -> None:
    from finetune.memory.estimate import lora_targets_text

    assert lora_targets_text(tiny, "all-linear") == "all linear layers"
    assert lora_targets_text(tiny, ["v_proj", "self_attn.q_proj"]) == "q_proj, v_proj"
    assert lora_targets_text(tiny, r".*\.layers\.1\.self_attn\.(q|v)_proj") == "q_proj, v_proj (2 of 4 such layers)"
    hostile = r".*\.(?:q_proj|" + "<script>x</script>" + ")"  # the spec's string never reaches the text
    assert lora_targets_text(tiny, hostile) == "q_proj"


def test_cli_target_modules_for_a_model_and_a_spec(cli, tmp_path: Path) -> None:
    import json

    import yaml

    qwen7 = load_model_info("Qwen/Qwen2.5-7B")
    res = cli("memory", "--model", "Qwen/Qwen2.5-7B", "--method", "lora", "--target-modules", "q_proj,v_proj", "--json")
    assert res.code == 0, res
    est = json.loads(res.out)["estimate"]
    adapters = next(c for c in est["components"] if c["key"] == "adapters")
    assert adapters["gib"] * GIB == pytest.approx(4 * qwen7.lora_params(16, ["q_proj", "v_proj"]))
    assert est["settings"]["lora_target_modules"] == ["q_proj", "v_proj"]
    # the option overrides the spec's targets
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump({**SPEC, "lora": {"target_modules": "all-linear"}}))
    res = cli("memory", tmp_path / "spec.yaml", "--target-modules", "q_proj,v_proj", "--json")
    assert res.code == 0, res
    assert json.loads(res.out)["estimate"]["settings"]["lora_target_modules"] == ["q_proj", "v_proj"]


@pytest.mark.parametrize("value, needle", [("q_proj,qq", "'qq': no layer"), ("q_proj,", "empty module name"),
                                           ("lm_head", "fused LM head")])
def test_cli_bad_target_modules_is_one_line_exit_2(cli, value: str, needle: str) -> None:
    res = cli("memory", "--model", "Qwen/Qwen2.5-7B", "--target-modules", value)
    assert res.code == 2 and needle in res.err and res.err.count("\n") == 1 and "Traceback" not in res.err, res


def test_targets_in_words_name_fused_moe_tensors(tiny_moe: ModelInfo) -> None:
    from finetune.memory.estimate import lora_targets_text

    assert lora_targets_text(tiny_moe, ["gate_proj", "up_proj", "down_proj"]) == \
        "experts.gate_up_proj, experts.down_proj"
    assert lora_targets_text(tiny_moe, "all-linear") == "all linear layers and the fused experts"
