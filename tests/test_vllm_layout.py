"""vLLM tensor × data parallel layouts: vLLM's TP checks (heads, KV heads, MLP / expert sizes) on published configs,
every layout the renderer writes is one vLLM accepts, and every refusal's fix renders (the grid over real models ×
GPUs × nodes)."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from layout_fixes import apply_fix, fixes_of
from render_fixtures import write_run

from finetune.config.build import build_plan
from finetune.errors import CheckFailed, UserError
from finetune.models import load_model_info
from finetune.spec import load_spec
from finetune.vllm_layout import Shapes, VllmCheckUnavailable, check_with_vllm, tp_allowed, tp_choices, tp_refusal

# (model, attention heads, KV heads, intermediate size, TPs ≤ 8 vLLM 0.30 accepts, why) — from the published
# config.json (shared model-configs table); a TP is accepted when it divides the heads
# (ModelConfig.verify_with_parallel_config), divides the KV heads or is a multiple of them (QKVParallelLinear's
# `divide`) and divides the MLP's intermediate size (MergedColumnParallelLinear / RowParallelLinear's `divide`).
PUBLISHED = [
    ("Qwen/Qwen2.5-0.5B", 14, 2, 4864, [1, 2], "4 and 8 do not divide 14 heads; 7 divides 14 but is no multiple of 2"),
    ("Qwen/Qwen2.5-1.5B", 12, 2, 8960, [1, 2, 4], "6 passes the head rules, but 8960 % 6 = 2: vLLM's MLP asserts"),
    ("Qwen/Qwen2.5-7B", 28, 4, 18944, [1, 2, 4], "7 divides 28 heads but not the 4 KV heads"),
    ("Qwen/Qwen2.5-14B", 40, 8, 13824, [1, 2, 4, 8], "5 divides 40 but not 8 KV heads"),
    ("Qwen/Qwen2.5-72B", 64, 8, 29568, [1, 2, 4, 8], "powers of two up to the 8 KV heads"),
    ("meta-llama/Llama-3.1-8B", 32, 8, 14336, [1, 2, 4, 8], "GQA 32 / 8"),
    ("Qwen/Qwen3-30B-A3B", 32, 4, 6144, [1, 2, 4, 8], "8 is a multiple of 4 KV heads; experts' 768 divides by 8"),
    ("google/gemma-2-9b", 16, 8, 14336, [1, 2, 4, 8], "16 / 8 heads, 14336 = 2^11 × 7"),
]
GRID_MODELS = ["Qwen/Qwen2.5-0.5B", "Qwen/Qwen2.5-1.5B", "Qwen/Qwen2.5-3B", "Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-14B",
               "Qwen/Qwen2.5-32B", "Qwen/Qwen2.5-72B", "meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B",
               "Qwen/Qwen3-30B-A3B"]


@pytest.mark.parametrize(("model", "heads", "kv", "mlp", "allowed", "why"), PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_tp_rule_on_published_configs(model, heads, kv, mlp, allowed, why):
    info = load_model_info(model)
    assert (info.heads, info.kv_heads, info.intermediate) == (heads, kv, mlp)  # the bundled config is the published
    assert tp_choices(info, 8) == allowed, why


def test_tp_rule_edges():
    qwen7 = Shapes(28, 4, 18944)
    assert not tp_allowed(28, qwen7) and not tp_allowed(14, qwen7)  # 18944 % 14 and % 28 ≠ 0: only MLP refuses 28
    assert "intermediate_size 18944" in tp_refusal(28, qwen7) and "KV heads" in tp_refusal(14, qwen7)
    assert tp_allowed(28, Shapes(28, 4)) and not tp_allowed(14, Shapes(28, 4))  # the head rules alone
    assert tp_allowed(3, Shapes(6, 6)) and tp_allowed(4, Shapes(4, 2))  # divides both; a multiple of the KV heads
    assert not tp_allowed(2, Shapes(6, 3))  # divides the 6 heads, below the 3 KV heads without dividing them
    assert not tp_allowed(0, Shapes(4, 2)) and tp_allowed(1, Shapes(7, 7))
    moe = Shapes(32, 4, 6144, is_moe=True, moe_intermediate=768)  # experts shard over TP × DP (no expert parallel)
    assert tp_allowed(4, moe, dp=2) and not tp_allowed(4, Shapes(32, 4, 6144, True, 100), dp=2)
    assert "TP × DP" in tp_refusal(2, Shapes(32, 4, 6144, True, 6), dp=2)


@pytest.mark.slow
def test_vllm_itself_agrees_with_the_rule():
    """Where vLLM is installed (the vLLM tier's environment), its own config classes accept exactly the TPs the
    rule allows: Qwen2.5-7B (28 / 4) at TP 1..8, 14 and 28, and a DP that fills 8 GPUs."""
    from finetune.models import resolve_config_path
    from finetune.vllm_layout import vllm_importable

    if not vllm_importable():
        pytest.skip("vLLM is not installed here: the vLLM tier runs this")
    config = resolve_config_path("Qwen/Qwen2.5-7B")
    info = load_model_info("Qwen/Qwen2.5-7B")
    for tp in [*range(1, 9), 14, 28]:
        refusal = check_with_vllm(config, tp, 1)
        assert (refusal is None) == tp_allowed(tp, info), (tp, refusal)
    assert check_with_vllm(config, 1, 8) is None and check_with_vllm(config, 4, 2) is None


def test_check_with_vllm_is_silent_without_vllm():
    from finetune.vllm_layout import vllm_importable

    if vllm_importable():
        pytest.skip("vLLM installed: the vLLM tier runs check_with_vllm for real")
    assert check_with_vllm(Path("/nonexistent/config.json"), 7, 1) is None
    assert issubclass(VllmCheckUnavailable, Exception)


def _plan(tmp_path: Path, name: str, model: str, **changes):
    if "30B-A3B" in model:
        changes.setdefault("variant", "gspo")  # MoE must start on GSPO (the renderer refuses GRPO)
    spec = write_run(tmp_path / name, model, **changes)
    return build_plan(load_spec(spec), spec.parent, no_gate=True)


def _assert_valid_layout(plan) -> None:
    t, info = plan.topology, plan.model_info
    if not t.use_vllm:  # QLoRA generates with transformers (placement.layout.QLORA_VLLM)
        assert plan.kwargs["_method"].value == "qlora" and "vllm_tensor_parallel_size" not in plan.kwargs
        return
    if t.vllm_mode != "server":
        assert t.training_processes % int(plan.kwargs["vllm_tensor_parallel_size"].value) == 0
        return
    assert tp_allowed(t.vllm_tp, info, t.vllm_dp), (t.vllm_tp, info.heads, info.kv_heads, info.intermediate)
    assert t.vllm_dp >= 1 and t.vllm_serving_gpus <= t.vllm_gpus
    assert f"TP {t.vllm_tp} × DP {t.vllm_dp}" in t.reason and t.layout_reason.startswith(f"TP {t.vllm_tp} ")
    if t.nodes > 1:
        assert t.vllm_gpus == t.gpus_per_node and t.training_processes == (t.nodes - 1) * t.gpus_per_node
    else:
        assert t.vllm_serving_gpus == t.vllm_gpus  # one node: no generation GPU idle


@pytest.mark.slow
def test_grid_every_published_model_renders_or_refuses_with_a_fix_that_renders(tmp_path):
    """10 published configs × 1/2/4/8 GPUs per node × 1/2/4 nodes (H100 80GB)."""
    refused = []
    for model, gpus, nodes in itertools.product(GRID_MODELS, (1, 2, 4, 8), (1, 2, 4)):
        hardware = {"profile": "h100-80gb", "gpus": gpus, "nodes": nodes}
        name = f"{model.split('/')[1]}-{gpus}x{nodes}"
        try:
            _assert_valid_layout(_plan(tmp_path, name, model, hardware=hardware))
            continue
        except (UserError, CheckFailed) as exc:
            fixes = fixes_of(exc)
            refused.append((name, str(exc)))
        assert fixes, f"{name}: refused without a fix that can be applied: {refused[-1][1]}"
        for i, fix in enumerate(fixes):
            assert {k.split(".")[0] for k in fix} <= {"hardware", "method"}, (name, fix)
            _assert_valid_layout(_plan(tmp_path, f"{name}-fix{i}", model, **apply_fix({"hardware": hardware}, fix)))
    # what is refused: models of 30 B parameters and more where the hardware cannot hold them at some moment
    assert all(re.search(r"(72B|70B|32B|30B-A3B)-", n) for n, _ in refused), [n for n, _ in refused]


@pytest.mark.parametrize("model", ["Qwen/Qwen2.5-7B", "tiny"])
def test_two_nodes_of_eight_render_with_data_parallel_replicas(cli, tmp_path, tiny_model_dir, model):
    """The issue's case: 28 / 4 heads and the demo's tiny model (4 heads) on 2 × 8 H100 render, and the launch
    files start `trl vllm-serve` with the layout the BRIEF explains."""
    model = str(tiny_model_dir) if model == "tiny" else model
    spec = write_run(tmp_path / "r", model, hardware={"profile": "h100-80gb", "gpus": 8, "nodes": 2})
    res = cli("config", "render", spec, "--no-gate")
    assert res.code == 0, res
    config = spec.parent / "config"
    for launch in ("launch.sh", "launch.slurm"):
        text = (config / launch).read_text()
        assert "--tensor-parallel-size 1 --data-parallel-size 8" in text, launch
    assert 'VLLM_GPUS="$(pick_gpus 0 1 2 3 4 5 6 7)"' in (config / "launch.sh").read_text()
    brief = (config / "BRIEF.md").read_text()
    assert "**vLLM layout:** TP 1 (vLLM: TP divides the" in brief and "× DP 8" in brief


def test_multinode_vllm_gpus_refusal_fix_renders(tmp_path):
    """vllm_gpus 4 on 2 × 8: refused with one fix (the whole node), and that fix renders (no circle)."""
    hw = {"profile": "h100-80gb", "gpus": 8, "nodes": 2}
    with pytest.raises(UserError) as exc:
        _plan(tmp_path, "four", "Qwen/Qwen2.5-7B", hardware={**hw, "vllm_gpus": 4})
    assert fixes_of(exc.value) == [{"hardware.vllm_gpus": 8}]
    _assert_valid_layout(_plan(tmp_path, "eight", "Qwen/Qwen2.5-7B", hardware={**hw, "vllm_gpus": 8}))


def test_one_node_vllm_gpus_that_would_idle_is_refused_with_counts_that_render(tmp_path):
    """Llama-3.1-70B's engine needs TP ≥ 2 on an H200 (131 GiB of bf16 weights over a 0.9 share): 3 server GPUs
    split only as TP 1 (64 heads, 3 does not divide them), so no layout of 3 starts; the counts offered instead
    each render, as TP 2 replicas."""
    hw = {"profile": "h200-141gb", "gpus": 8, "nodes": 1}
    with pytest.raises(CheckFailed) as exc:
        _plan(tmp_path, "three", "meta-llama/Llama-3.1-70B", hardware={**hw, "vllm_gpus": 3})
    assert "binding moment: vLLM engine start" in str(exc.value) and "cannot hold the engine at TP 1" in str(exc.value)
    fixes = fixes_of(exc.value)
    assert fixes == [{"hardware.vllm_gpus": 2}, {"hardware.vllm_gpus": 4}]
    for fix in fixes:
        n = fix["hardware.vllm_gpus"]
        plan = _plan(tmp_path, f"fix{n}", "meta-llama/Llama-3.1-70B", hardware={**hw, "vllm_gpus": n})
        _assert_valid_layout(plan)
        assert (plan.topology.vllm_tp, plan.topology.vllm_dp) == (2, n // 2)
    # a dense 7B splits 3 GPUs into 3 replicas at TP 1
    plan = _plan(tmp_path, "seven", "Qwen/Qwen2.5-7B", hardware={**hw, "vllm_gpus": 3})
    assert (plan.topology.vllm_tp, plan.topology.vllm_dp) == (1, 3)


def test_colocate_tensor_parallel_override_held_to_trl_and_vllm(tmp_path):
    hw = {"profile": "h100-80gb", "gpus": 4, "nodes": 1, "vllm_gpus": 0}
    with pytest.raises(UserError) as exc:  # TRL: 3 does not divide 4 training processes
        _plan(tmp_path, "tp3", "Qwen/Qwen2.5-7B", hardware=hw, overrides={"vllm_tensor_parallel_size": 3})
    assert "divide the 4 training process(es)" in str(exc.value)
    fixes = [fix["overrides.vllm_tensor_parallel_size"] for fix in fixes_of(exc.value)]
    assert fixes == [1, 2, 4]
    for n in fixes:
        plan = _plan(tmp_path, f"tp{n}", "Qwen/Qwen2.5-7B", hardware=hw, overrides={"vllm_tensor_parallel_size": n})
        assert plan.kwargs["vllm_tensor_parallel_size"].value == n
        # the override is fed back into the memory model: the recommendation and the estimate size TP n
        assert plan.topology.vllm_tp == plan.recommendation.layout.vllm_tp == plan.estimate.vllm.tensor_parallel_size == n
    with pytest.raises(UserError) as exc:  # server mode: the field would do nothing
        _plan(tmp_path, "srv", "Qwen/Qwen2.5-7B", hardware={**hw, "vllm_gpus": 2},
              overrides={"vllm_tensor_parallel_size": 2})
    assert "does nothing in server mode" in str(exc.value)


def test_batch_rule_fixes_all_render_with_the_layout(tmp_path):
    """Llama-3.1-70B at TP 2 on 2 of 8 H200s, 1 × 6 × 1 completions: each proposed fix (batch, accumulation, or
    another generation GPU count that splits into whole TP-2 replicas) renders."""
    hw = {"profile": "h200-141gb", "gpus": 8, "nodes": 1, "vllm_gpus": 2}
    small = {"per_device_train_batch_size": 1, "gradient_accumulation_steps": 1, "logging_steps": 1}
    with pytest.raises(UserError) as exc:
        _plan(tmp_path, "batch", "meta-llama/Llama-3.1-70B", hardware=hw, training=small)
    fixes = re.findall(r"((?:training|hardware)\.\w+): (\d+)", exc.value.fix)
    assert {k for k, _ in fixes} == {"training.per_device_train_batch_size", "training.gradient_accumulation_steps",
                                     "hardware.vllm_gpus"}
    for key, value in fixes:
        section, field = key.split(".")
        changes = {"hardware": {**hw, field: int(value)}} if section == "hardware" else {
            "hardware": hw, "training": {**small, field: int(value)}}
        if section == "hardware":
            changes["training"] = small
        _assert_valid_layout(_plan(tmp_path, f"fix-{field}", "meta-llama/Llama-3.1-70B", **changes))
