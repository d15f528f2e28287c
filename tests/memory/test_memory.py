"""finetune.memory: the formula checks of memory-figures.md, the estimate's components and verdicts,
recommend() (per-scale contract), the CLI and the generated reference doc."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finetune.errors import UserError
from finetune.hardware import PROFILES, resolve_hardware
from finetune.memory.estimate import Knobs, estimate
from finetune.memory.formulas import GIB, kv_cache_bytes, logits_bytes
from finetune.memory.recommend import accumulation_for, recommend
from finetune.models import load_model_info


@pytest.fixture(scope="module")
def llama8b():
    return load_model_info("meta-llama/Llama-3.1-8B")


@pytest.fixture(scope="module")
def qwen7b():
    return load_model_info("Qwen/Qwen2.5-7B")


def test_unsloth_logits_and_kv_figures(llama8b):
    # Unsloth GRPO blog: 8 generations × 20,480 tokens → logits 78.3 GiB, KV 2.5 GiB (their GB are GiB).
    assert round(logits_bytes(8, 20_480, llama8b.vocab) / GIB, 1) == 78.3
    assert kv_cache_bytes(llama8b, 20_480) / GIB == 2.5
    naive = estimate(llama8b, resolve_hardware("h200-141gb"), Knobs("lora", per_device_train_batch_size=8,
                                                                    max_prompt_length=1, max_completion_length=20_480,
                                                                    fused_lm_head=False))
    assert round(naive.gib_of("lm_head"), 1) == 78.3
    # TRL 1.16 never materialises them: one 4096 × 32768 bf16 tile + fp32 ∇hidden for 163,840 tokens
    fused = estimate(llama8b, resolve_hardware("h200-141gb"), Knobs("lora", per_device_train_batch_size=8,
                                                                    max_prompt_length=1, max_completion_length=20_480))
    assert fused.gib_of("lm_head") * GIB == 4096 * 32768 * 2 + 8 * 20_480 * 4096 * 4 + 8 * 4 * 8 * 20_480


def test_hardware_profiles_and_resolution():
    assert {"h100-80gb", "a100-80gb", "a100-40gb", "rtx-4090-24gb", "l40s-48gb", "h200-141gb", "dgx-spark",
            "cpu"} <= set(PROFILES)
    spark = PROFILES["dgx-spark"]
    assert spark.unified and spark.memory_gib == 119.7 and spark.bandwidth_gbs == 273
    hw = resolve_hardware({"profile": "a100-40gb", "gpus": 4, "nodes": 2, "gpu_memory_gib": 38, "vllm_gpus": 2})
    assert (hw.total_gpus, hw.vllm_gpus, hw.memory_gib) == (8, 2, 38)  # where they go is placement's
    with pytest.raises(UserError) as err:
        resolve_hardware({"profile": "tpu-v5"})
    assert err.value.where == "hardware.profile"
    with pytest.raises(UserError):
        resolve_hardware({"profile": "h100-80gb", "gpus": 2, "vllm_gpus": 2})


# ------------------------------------------------------------------------------------------- components

@pytest.fixture(scope="module")
def qwen72():
    return load_model_info("Qwen/Qwen2.5-72B")


def h100(**kw):
    return resolve_hardware({"profile": "h100-80gb", **kw})


def test_full_fine_tuning_without_deepspeed_is_16_bytes_per_param_plus_reference(qwen7b):
    est = estimate(qwen7b, h100(gpus=1), Knobs("full", beta=0.01, use_vllm=False))
    P = qwen7b.params
    assert est.settings["model_dtype"] == "float32"  # TRL's default; lr 5e-7 needs fp32 weights here
    states = sum(est.gib_of(k) for k in ("policy_weights", "gradients", "optimizer"))
    assert states * GIB == pytest.approx(16 * P)
    assert est.gib_of("reference_model") * GIB == pytest.approx(4 * P)
    assert estimate(qwen7b, h100(), Knobs("full", beta=0.0, use_vllm=False)).component("reference_model") is None


def test_lora_has_no_reference_copy_and_fp32_adapter_states(qwen7b):
    est = estimate(qwen7b, h100(), Knobs("lora", beta=0.04, lora_r=16))
    L = qwen7b.lora_params(16)
    assert est.component("reference_model") is None  # TRL disables the adapters instead
    assert est.gib_of("policy_weights") * GIB == pytest.approx(2 * qwen7b.params)
    assert est.gib_of("adapters") * GIB == pytest.approx(4 * L)
    assert est.gib_of("optimizer") * GIB == pytest.approx(8 * L)
    eight = estimate(qwen7b, h100(), Knobs("lora", optimizer="adamw_8bit"))
    assert eight.gib_of("optimizer") * GIB == pytest.approx(2 * L)


def test_qlora_quantizes_linear_weights_only(qwen7b):
    from finetune.memory.formulas import QLORA_BYTES_PER_PARAM

    est = estimate(qwen7b, h100(), Knobs("qlora"))
    q = qwen7b.quantizable_params
    assert est.gib_of("policy_weights") * GIB == pytest.approx(q * QLORA_BYTES_PER_PARAM + (qwen7b.params - q) * 2)
    # vLLM 0.30 has no bitsandbytes, which TRL would start a colocated engine with: QLoRA generates with transformers
    assert est.vllm is None and est.settings["use_vllm"] is False and est.component("generate_kv")
    with pytest.raises(UserError, match="Unknown quantization method"):
        estimate(qwen7b, h100(), Knobs("qlora", use_vllm=True))


def test_zero3_matches_deepspeed_formula(qwen72):
    # deepspeed memory.rst: ZeRO-3 per GPU = 18·P/N + 4 × largest layer (model states, no offload)
    n = 16
    est = estimate(qwen72, h100(gpus=8, nodes=2), Knobs("full", zero_stage=3, beta=0.0, use_vllm=False))
    states = sum(est.gib_of(k) for k in ("policy_weights", "gradients", "master_weights", "optimizer", "zero3_gather"))
    assert states * GIB == pytest.approx(18 * qwen72.params / n + 4 * qwen72.largest_layer_params)
    z2 = estimate(qwen72, h100(gpus=8, nodes=2), Knobs("full", zero_stage=2, beta=0.0, use_vllm=False))
    states2 = sum(z2.gib_of(k) for k in ("policy_weights", "gradients", "master_weights", "optimizer"))
    assert states2 * GIB == pytest.approx(4 * qwen72.params + 16 * qwen72.params / n)


def test_logits_and_activations_scale_with_the_micro_batch(llama8b):
    one = estimate(llama8b, h100(), Knobs("lora", per_device_train_batch_size=1))
    four = estimate(llama8b, h100(), Knobs("lora", per_device_train_batch_size=4))
    naive = dict(per_device_train_batch_size=1, fused_lm_head=False)
    naive4 = Knobs("lora", **{**naive, "per_device_train_batch_size": 4})
    assert estimate(llama8b, h100(), naive4).gib_of("lm_head") == \
        pytest.approx(4 * estimate(llama8b, h100(), Knobs("lora", **naive)).gib_of("lm_head"))
    assert four.gib_of("activations") == pytest.approx(4 * one.gib_of("activations"))
    no_gc = estimate(llama8b, h100(), Knobs("lora", per_device_train_batch_size=4, gradient_checkpointing=False))
    assert no_gc.gib_of("activations") > 10 * four.gib_of("activations")


def test_vllm_colocate_share_kv_and_sleep_mode(llama8b):
    awake = estimate(llama8b, h100(), Knobs("lora", vllm_gpu_memory_utilization=0.3, per_device_train_batch_size=8,
                                            gradient_accumulation_steps=4, max_prompt_length=512,
                                            max_completion_length=1024))
    v = awake.vllm
    assert v.share_gib == pytest.approx(0.3 * 79.6)
    assert v.max_num_seqs == 8 * 1 * 4  # TRL: per_device_train_batch_size × TP × steps_per_generation
    assert v.kv_needed_gib * GIB == pytest.approx(32 * 1536 * 128 * 1024)
    assert v.weights_gib * GIB == pytest.approx(2 * llama8b.params)
    asleep = estimate(llama8b, h100(), Knobs("lora", vllm_gpu_memory_utilization=0.3, vllm_enable_sleep_mode=True))
    assert asleep.generation_peak_gib == pytest.approx(awake.generation_peak_gib)
    assert awake.training_peak_gib - asleep.training_peak_gib == pytest.approx(v.share_gib - 0.8)
    tp2 = estimate(llama8b, h100(gpus=2), Knobs("lora", vllm_tensor_parallel_size=2))
    assert tp2.vllm.weights_gib == pytest.approx(v.weights_gib / 2)


def test_vllm_share_too_small_or_not_free_at_start_is_a_problem(qwen7b):
    tiny = estimate(qwen7b, h100(), Knobs("lora", vllm_gpu_memory_utilization=0.1))
    assert tiny.verdict == "does not fit" and any("cannot hold its weights" in p for p in tiny.problems)
    crowded = estimate(qwen7b, h100(), Knobs("full", vllm_gpu_memory_utilization=0.5))
    assert any("start-up check" in p for p in crowded.problems)


def test_server_mode_takes_gpus_out_of_training(llama8b):
    est = estimate(llama8b, h100(gpus=8), Knobs("lora", vllm_mode="server", vllm_gpus=2, vllm_tensor_parallel_size=2,
                                                per_device_train_batch_size=4, gradient_accumulation_steps=2))
    assert est.layout.training_processes == 6 and est.layout.training_gpu_ids == (2, 3, 4, 5, 6, 7)
    assert est.component("vllm") is None  # the training GPU holds no engine
    assert est.vllm.mode == "server" and est.vllm.utilization == 0.9
    assert est.vllm.max_num_seqs == 4 * 6 * 2
    assert est.vllm.weights_gib * GIB == pytest.approx(llama8b.params)  # 2 B / TP 2


def test_an_estimate_re_estimates_from_its_own_settings(qwen7b):
    """Each suggestion changes one knob of the estimate's resolved settings (memory._knobs_of): those settings,
    unchanged, must give the same estimate back — a Knobs field missing from Estimate.settings would not."""
    from finetune.memory.estimate import _knobs_of

    for knobs, hw in ((Knobs("lora"), h100()),
                      (Knobs("full", zero_stage=3, vllm_mode="server", vllm_gpus=2, vllm_tensor_parallel_size=2,
                             per_device_train_batch_size=2), h100(gpus=4)),
                      (Knobs("qlora", use_vllm=False, gradient_checkpointing=False, lora_r=8), h100(gpus=2)),
                      (Knobs("full", vllm_enable_sleep_mode=True, vllm_gpu_memory_utilization=0.2), h100())):
        est = estimate(qwen7b, hw, knobs, suggest=False)
        again = estimate(qwen7b, est.hardware, _knobs_of(est), suggest=False)
        assert again.settings == est.settings
        assert again.components == est.components and again.total_gib == est.total_gib


def test_suggestions_are_re_estimated_and_ordered(qwen7b):
    est = estimate(qwen7b, resolve_hardware("rtx-4090-24gb"), Knobs("lora", vllm_gpu_memory_utilization=0.9,
                                                                    gradient_checkpointing=False))
    assert est.verdict == "does not fit" and est.suggestions
    actions = [s.action for s in est.suggestions]
    assert actions[0].startswith("vLLM sleep mode")
    for sug in est.suggestions:
        if sug.action.startswith("twice the GPUs"):
            continue
        kw = dict(est.settings)
        kw.pop("round_sequences")
        kw.update(sug.change)
        after = estimate(qwen7b, est.hardware, Knobs(**kw), suggest=False)
        assert sug.total_after_gib == pytest.approx(after.total_gib)
        assert sug.saves_gib == pytest.approx(est.total_gib - after.total_gib)
    assert estimate(qwen7b, h100(), Knobs("qlora")).suggestions == ()  # nothing to suggest when it fits


def test_dgx_spark_bound_and_freeze_warning():
    from finetune.memory.formulas import decode_bound_tokens_per_s

    qwen3_8 = load_model_info("Qwen/Qwen3-8B")
    bound = decode_bound_tokens_per_s(qwen3_8, 273, context_tokens=0)
    assert bound == pytest.approx(273e9 / (2 * qwen3_8.params))
    assert 16 < bound < 17.5  # memory-figures.md: "bound ~17", measured 13.1
    est = estimate(qwen3_8, resolve_hardware("dgx-spark"), Knobs("lora"))
    assert any("freeze" in w for w in est.warnings)
    assert any("bandwidth-bound" in w for w in est.warnings)
    assert est.fit_limit_gib == pytest.approx(0.85 * 119.7)
    moe = load_model_info("Qwen/Qwen3-30B-A3B")
    assert decode_bound_tokens_per_s(moe, 273, context_tokens=0) == pytest.approx(273e9 / (2 * moe.active_params))


def test_bad_arguments_are_user_errors(qwen7b):
    with pytest.raises(UserError) as err:
        estimate(qwen7b, h100(), Knobs("dora"))
    assert err.value.where == "method"
    with pytest.raises(UserError):
        estimate(qwen7b, h100(), Knobs("lora", optimizer="sgd"))
    with pytest.raises(UserError):
        estimate(qwen7b, resolve_hardware("cpu"), Knobs("lora", use_vllm=True))
    with pytest.raises(UserError):
        estimate(qwen7b, h100(), Knobs("lora", vllm_gpu_memory_utilization=1.5))


# ------------------------------------------------------------------------------------------- recommend

def test_accumulation_keeps_generation_batch_divisible():
    assert accumulation_for(8, 1, 8) == 4  # the seed's 8 × 4 on one GPU
    assert accumulation_for(8, 7, 8) == 1
    assert accumulation_for(3, 1, 8) == 16
    assert accumulation_for(1, 3, 16) == 32


def test_seed_recipe_for_a_7b_lora_on_one_h100(qwen7b):
    rec = recommend(qwen7b, h100(), "lora")
    assert (rec.per_device_train_batch_size, rec.gradient_accumulation_steps) == (8, 4)
    assert rec.vllm_mode == "colocate" and rec.fits and rec.gradient_checkpointing
    assert rec.estimate.vllm.kv_available_gib >= rec.estimate.vllm.kv_needed_gib
    for key in ("method", "per_device_train_batch_size", "gradient_accumulation_steps", "gradient_checkpointing",
                "optimizer", "vllm_gpu_memory_utilization", "vllm_enable_sleep_mode"):
        assert rec.reasons[key]
    kw = rec.grpo_kwargs()
    assert kw["model_init_kwargs"] == {"dtype": "bfloat16"} and kw["vllm_gpu_memory_utilization"] == 0.3


@pytest.mark.parametrize("hub_id", ["Qwen/Qwen3-0.6B", "Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-32B", "meta-llama/Llama-3.1-70B",
                                    "Qwen/Qwen3-30B-A3B"])
def test_recommendations_are_consistent_everywhere(hub_id):
    model = load_model_info(hub_id)
    for profile in ("rtx-4090-24gb", "a100-40gb", "h100-80gb", "dgx-spark"):
        for gpus in (1, 2, 8):
            if profile == "dgx-spark" and gpus > 1:
                continue
            hw = resolve_hardware({"profile": profile, "gpus": gpus})
            for method in (None, "lora", "qlora"):
                rec = recommend(model, hw, method, Knobs(num_generations=8))
                gen_batch = rec.per_device_train_batch_size * rec.training_processes * rec.steps_per_generation
                assert gen_batch % 8 == 0, (hub_id, profile, gpus, method)
                if rec.fits:
                    assert rec.estimate.total_gib <= rec.estimate.memory_gib
                else:
                    assert "fits" in rec.reasons
                if gpus > 1 and rec.vllm_mode == "server":
                    assert rec.training_processes == gpus - rec.vllm_gpus >= 1


def test_small_models_get_full_fine_tuning_and_big_ones_adapters():
    assert recommend(load_model_info("Qwen/Qwen3-0.6B"), h100()).method == "full"
    assert recommend(load_model_info("Qwen/Qwen2.5-14B"), h100()).method in ("lora", "qlora")
    assert recommend(load_model_info("Qwen/Qwen2.5-32B"), resolve_hardware("rtx-4090-24gb")).fits is False


def test_cpu_profile_uses_transformers_generate_in_fp32(tiny_model_dir):
    rec = recommend(load_model_info(str(tiny_model_dir)), resolve_hardware("cpu"))
    assert rec.use_vllm is False and rec.bf16 is False and rec.model_dtype == "float32" and rec.method == "full"


# ------------------------------------------------------------------------------------------- CLI + doc

SPEC = """\
name: mem-test
model: Qwen/Qwen2.5-7B
dataset: {path: data.jsonl}
rewards:
  - {name: format_ok, type: format, pattern: answer_tag, weight: 0.2}
hardware: {profile: rtx-4090-24gb, gpus: 1}
generation: {max_prompt_length: 256, max_completion_length: 512}
"""


def test_cli_with_a_spec_writes_memory_md(cli, tmp_path):
    (tmp_path / "spec.yaml").write_text(SPEC)
    res = cli("memory", tmp_path / "spec.yaml")
    assert res.code == 0, res
    text = (tmp_path / "memory.md").read_text()
    assert "Qwen/Qwen2.5-7B" in text and "Verdict:" in text and "## Recommended values" in text
    assert "| `per_device_train_batch_size` |" in text
    assert not list(tmp_path.glob(".memory.md*"))  # no temp file left behind


def test_cli_explicit_values_win_over_the_recommendation(cli):
    import json

    res = cli("memory", "--model", "Qwen/Qwen2.5-7B", "--profile", "h100-80gb", "--method", "lora", "--batch", "2",
              "--no-gradient-checkpointing", "--json")
    assert res.code == 0, res
    data = json.loads(res.out)
    s = data["estimate"]["settings"]
    assert s["per_device_train_batch_size"] == 2 and s["gradient_checkpointing"] is False
    assert s["gradient_accumulation_steps"] == 16  # recomputed: 2 × 1 × 16 = 32, divisible by 8


@pytest.mark.parametrize("argv, needle", [
    (["memory"], "give a run spec or --model"),
    (["memory", "--model", "acme/unknown-13b"], "model_config"),
    (["memory", "--model", "Qwen/Qwen2.5-7B", "--profile", "tpu"], "unknown hardware profile"),
])
def test_cli_bad_input_is_one_line_exit_2(cli, argv, needle):
    res = cli(*argv)
    assert res.code == 2 and needle in res.err and res.err.count("\n") == 1 and "Traceback" not in res.err


def test_cli_bad_spec_writes_nothing(cli, tmp_path):
    (tmp_path / "spec.yaml").write_text(SPEC.replace("Qwen/Qwen2.5-7B", "acme/secret-model"))
    res = cli("memory", tmp_path / "spec.yaml")
    assert res.code == 2 and "model_config" in res.err
    assert not (tmp_path / "memory.md").exists()


def test_grpo_memory_doc_is_committed_and_current(repo_root):
    from finetune.memory.doc import grpo_memory_doc

    committed = (repo_root / "references" / "grpo-memory.md").read_text(encoding="utf-8")
    from finetune.docs import with_toc

    assert committed == with_toc(grpo_memory_doc()), "references/grpo-memory.md drifted: run `finetune docs`"


def test_published_checks_meet_the_targets():
    from finetune.memory.published import published_checks

    checks = published_checks()
    scored = sorted(abs(c.error) for c in checks if c.scored)
    assert len(scored) >= 8
    assert scored[len(scored) // 2] <= 0.15 and scored[-1] <= 0.35
    assert {c.key for c in checks} >= {"unsloth-logits", "unsloth-kv", "msswift3848", "trl3162-vllm-kv"}


def test_spec_can_pin_colocate_or_server(qwen7b):
    colocate = recommend(qwen7b, resolve_hardware({"profile": "h100-80gb", "gpus": 4, "vllm_gpus": 0}), "lora")
    assert colocate.vllm_mode == "colocate" and colocate.training_processes == 4
    server = recommend(qwen7b, resolve_hardware({"profile": "h100-80gb", "gpus": 4, "vllm_gpus": 2}), "lora")
    assert server.vllm_mode == "server" and server.vllm_gpus == 2 and server.training_processes == 2
    assert recommend(qwen7b, resolve_hardware({"profile": "h100-80gb", "gpus": 4}), "lora").vllm_mode == "server"


@pytest.mark.parametrize("hub_id", ["Qwen/Qwen2.5-0.5B", "Qwen/Qwen3-0.6B", "google/gemma-2-9b"])
def test_activation_formula_matches_what_autograd_saves(hub_id):
    """gemma-2 runs eager attention (no SDPA with soft-capping): its T² scores are measured at two lengths, so the
    quadratic term is checked, not only the linear one."""
    from finetune.memory.formulas import activation_bytes, eager_attention_bytes, measure_saved_activation_bytes
    from finetune.models import resolve_config_path

    for tokens in (128, 256) if "gemma" in hub_id else (128,):
        measured, cut = measure_saved_activation_bytes(str(resolve_config_path(hub_id)), layers=2, tokens=tokens,
                                                       narrow=4 if "gemma" in hub_id else 1)
        predicted = activation_bytes(cut, 1, tokens, checkpointing=False) + eager_attention_bytes(cut, 1, tokens, False)
        assert cut.layers == 2 and measured > 0
        assert (cut.attn_implementation == "eager") == ("gemma" in hub_id)
        assert abs(predicted / measured - 1) < 0.10, (tokens, predicted, measured)


def test_spec_values_win_over_recommended_ones(tmp_path):
    from finetune.memory.run import estimate_for_spec
    from finetune.spec import load_spec

    (tmp_path / "spec.yaml").write_text(SPEC + "training: {per_device_train_batch_size: 2, optimizer: adamw_8bit}\n"
                                        "method: lora\n")
    rec, est = estimate_for_spec(load_spec(tmp_path / "spec.yaml"))
    s = est.settings
    assert (s["method"], s["per_device_train_batch_size"], s["optimizer"]) == ("lora", 2, "adamw_8bit")
    assert s["gradient_accumulation_steps"] == 16 and (2 * 1 * 16) % 8 == 0
    assert s["max_prompt_length"] == 256 and s["max_completion_length"] == 512
    assert rec.method == "lora"  # the recommendation is for the spec's method
    assert not (tmp_path / "memory.md").exists()  # estimate_for_spec writes nothing


def test_markdown_and_dict_forms(qwen7b):
    import json

    est = estimate(qwen7b, resolve_hardware("a100-40gb"), Knobs("lora"))
    md = est.to_markdown("t")
    assert md.startswith("# t\n") and "| policy weights (bfloat16) |" in md and f"**Verdict: {est.verdict}**" in md
    json.dumps(est.to_dict())
    assert est.to_dict()["verdict"] == est.verdict


def test_generation_phase_without_vllm_holds_the_kv_cache(qwen7b):
    est = estimate(qwen7b, h100(), Knobs("lora", use_vllm=False, per_device_train_batch_size=4,
                                         gradient_accumulation_steps=8, max_prompt_length=512,
                                         max_completion_length=512))
    assert est.gib_of("generate_kv") * GIB == 4 * 8 * 1024 * qwen7b.kv_bytes_per_token()
    assert est.component("vllm") is None


@settings(max_examples=40, deadline=None)
@given(method=st.sampled_from(["full", "lora", "qlora"]), batch=st.integers(1, 16), acc=st.integers(1, 8),
       prompt=st.integers(16, 4096), completion=st.integers(16, 8192), gpus=st.sampled_from([1, 2, 4, 8]),
       zero=st.sampled_from([0, 2, 3]), gc=st.booleans(), sleep=st.booleans(),
       optimizer=st.sampled_from(["adamw_torch", "adamw_8bit", "paged_adamw_8bit"]),
       mode=st.sampled_from(["colocate", "server", None]), beta=st.sampled_from([0.0, 0.01]))
def test_estimate_invariants(method, batch, acc, prompt, completion, gpus, zero, gc, sleep, optimizer, mode, beta):
    model = load_model_info("Qwen/Qwen2.5-1.5B")
    if mode == "server" and gpus == 1:
        mode = "colocate"
    if method == "qlora":  # placement: no vLLM 0.30 layout takes a 4-bit policy
        mode = None
    est = estimate(model, h100(gpus=gpus), Knobs(method, per_device_train_batch_size=batch,
                                                 gradient_accumulation_steps=acc, max_prompt_length=prompt,
                                                 max_completion_length=completion, zero_stage=zero,
                                                 gradient_checkpointing=gc, vllm_enable_sleep_mode=sleep,
                                                 optimizer=optimizer, use_vllm=mode is not None,
                                                 vllm_mode=mode or "colocate",
                                                 vllm_gpus=1 if mode == "server" else None, beta=beta))
    assert all(c.gib >= 0 for c in est.components)
    assert est.total_gib >= est.step_gib == max(est.training_peak_gib, est.generation_peak_gib)
    assert est.total_gib == max([est.step_gib] + [m.gib for m in est.moments if m.headroom])
    assert (est.verdict == "does not fit") == bool(est.problems or any(m.gib > m.limit_gib for m in est.moments)
                                                   or est.total_gib > est.memory_gib)
    assert est.training_allocated_gib <= est.total_gib
    assert est.verdict in ("fits", "tight", "does not fit")
    assert all(s.saves_gib > 0.05 or s.fits_after for s in est.suggestions)
    if method != "full" or beta == 0:
        assert est.component("reference_model") is None


def test_training_allocated_excludes_the_engine_and_context(llama8b):
    est = estimate(llama8b, h100(), Knobs("lora", vllm_gpu_memory_utilization=0.3))
    torch_side = sum(c.gib for c in est.components if c.phase == "resident") + max(
        sum(c.gib for c in est.components if c.phase == "training"), 0.0)
    assert est.training_allocated_gib == pytest.approx(torch_side)
    assert est.total_gib - est.training_allocated_gib >= 0.3 * 79.6 + 1.0 - 1e-6  # engine awake + CUDA context


def test_server_data_parallel_replicas_split_the_sequences(llama8b):
    est = estimate(llama8b, h100(gpus=8), Knobs("lora", vllm_mode="server", vllm_gpus=4, vllm_tensor_parallel_size=2,
                                                per_device_train_batch_size=8, gradient_accumulation_steps=1))
    assert est.vllm.max_num_seqs == 8 * 4 * 1 // 2  # 4 training processes, 2 replicas of TP 2


def test_fused_head_matches_installed_trl():
    """The chunked head's tile sizes are TRL's, and its autograd saves no [N × V] tensor."""
    import torch
    from trl.kernels.chunked_logprob import TOKEN_CHUNK_SIZE, ChunkedLogProbFunction

    from finetune.memory.formulas import TRL_HEAD_TOKEN_TILE, fused_head_bytes

    assert TRL_HEAD_TOKEN_TILE == TOKEN_CHUNK_SIZE
    n, h, v = 300, 64, 5000
    hidden = torch.randn(n, h, requires_grad=True)
    weight = torch.randn(v, h)
    saved: list[int] = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: (saved.append(t.numel()), t)[1], lambda t: t):
        logps, _, _, _, _ = ChunkedLogProbFunction.apply(hidden, weight, None, torch.randint(0, v, (n,)), 1.0, 1024,
                                                          None, 1.0, ("log_probs",))
    assert max(saved) < n * v  # hidden and weight are kept, never the logits
    logps.sum().backward()
    assert hidden.grad.shape == (n, h)
    tiny = load_model_info("Qwen/Qwen3-0.6B")
    assert fused_head_bytes(tiny, 10, head_trainable=True) > fused_head_bytes(tiny, 10, head_trainable=False)


def test_trl_vocab_tile_constant():
    from trl.trainer.utils import _CHUNKED_LOGPROB_CHUNK_SIZE

    from finetune.memory.formulas import TRL_HEAD_VOCAB_TILE

    assert TRL_HEAD_VOCAB_TILE == _CHUNKED_LOGPROB_CHUNK_SIZE


def test_memory_says_which_config_it_used_for_a_hub_id(cli, tmp_path):
    result = cli("memory", "--model", "Qwen/Qwen2.5-1.5B-Instruct", "--profile", "a100-80gb", "-o", tmp_path)
    assert result.code == 0, result
    line = "the bundled config.json of Qwen/Qwen2.5-1.5B, used for Qwen/Qwen2.5-1.5B-Instruct"
    assert line in result.out and line in (tmp_path / "memory.md").read_text()
    exact = cli("memory", "--model", "Qwen/Qwen2.5-1.5B", "--profile", "a100-80gb")
    assert "model config: the bundled config.json of Qwen/Qwen2.5-1.5B\n" in exact.out
