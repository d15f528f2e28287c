"""The layouts of the GPU-layout issue rendered from published config.json files (bundled in
scripts/finetune/data/model_configs; gemma-2-9b's source is in SOURCES.md there): each is either rendered with every
moment — load, vLLM engine start, weight sync, step — within the card, or refused with fixes that each render so.
No render says it fits where a moment exceeds the card."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from layout_fixes import apply_fix, fixes_of
from render_fixtures import write_run

from finetune.config.build import build_plan
from finetune.errors import CheckFailed, UserError
from finetune.spec import load_spec

# the seed's lengths, and no batch pinned: every per-scale value is memory.recommend()'s
SEED = {"generation": {"max_prompt_length": 512, "max_completion_length": 1024}, "training": {"logging_steps": 1}}
CASES: list[tuple[str, dict, dict]] = [
    *[(model, {"profile": profile, "gpus": gpus}, {})
      for model, profile, gpus in itertools.product(("Qwen/Qwen2.5-72B", "Qwen/Qwen2.5-32B"),
                                                    ("h100-80gb", "a100-40gb"), (2, 4, 8))],
    ("google/gemma-2-9b", {"profile": "rtx-4090-24gb", "gpus": 2}, {}),
    ("meta-llama/Llama-3.1-8B", {"profile": "h100-80gb", "gpus": 8}, {"method": "qlora"}),
    ("Qwen/Qwen2.5-1.5B", {"profile": "h100-80gb", "gpus": 6, "vllm_gpus": 0},
     {"overrides": {"vllm_tensor_parallel_size": 6}}),
]


def _plan(tmp_path: Path, name: str, model: str, **changes):
    spec = write_run(tmp_path / name, model, **{**SEED, **changes})
    return build_plan(load_spec(spec), spec.parent, no_gate=True)


def _assert_every_moment_fits(plan) -> None:
    est = plan.estimate
    over = [m for m in est.moments if m.gib > m.limit_gib]
    assert not over and est.verdict != "does not fit", [(m.key, m.gib, m.limit_gib) for m in over]
    # every vLLM layout sizes all four; QLoRA generates with transformers (no engine, no weight sync)
    assert {m.key for m in est.moments} == ({"load", "engine", "sync", "step"} if plan.topology.use_vllm else
                                            {"load", "step"})
    assert est.binding is not None and est.layout is plan.topology  # the estimate sized placement's layout
    if plan.topology.quant_storage:
        assert plan.kwargs["_method"].value == "qlora" and plan.zero_stage == 3


@pytest.mark.slow  # ~20 renders of 8-72 B layouts, each refusal's fixes re-rendered
@pytest.mark.parametrize(("model", "hardware", "changes"), CASES,
                         ids=[f"{m.split('/')[1]}-{h['gpus']}x{h['profile']}" + ("-" + "-".join(c) if c else "")
                              for m, h, c in CASES])
def test_each_layout_renders_within_the_card_or_refuses_with_fixes_that_render(tmp_path, model, hardware, changes):
    try:
        plan = _plan(tmp_path, "run", model, hardware=hardware, **changes)
    except (UserError, CheckFailed) as exc:
        fixes = fixes_of(exc)
        assert fixes, f"refused without a fix: {exc}"
        for i, fix in enumerate(fixes):
            fixed = apply_fix({"hardware": hardware, **changes}, fix)
            if "overrides.vllm_tensor_parallel_size" in fix:
                fixed["overrides"] = {"vllm_tensor_parallel_size": fix["overrides.vllm_tensor_parallel_size"]}
            _assert_every_moment_fits(_plan(tmp_path, f"fix{i}", model, **fixed))
        return
    _assert_every_moment_fits(plan)


def test_qlora_with_a_server_is_refused_with_fixes_that_render(tmp_path):
    """QLoRA pinned to `trl vllm-serve` GPUs: refused naming TRL #4973; each fix offered (colocate, or LoRA) renders
    with every moment within the card."""
    hardware = {"profile": "h100-80gb", "gpus": 4, "vllm_gpus": 2}
    with pytest.raises(UserError) as exc:
        _plan(tmp_path, "run", "Qwen/Qwen2.5-7B", hardware=hardware, method="qlora")
    assert "#4973" in str(exc.value) and exc.value.where == "hardware.vllm_gpus"
    fixes = fixes_of(exc.value)
    assert fixes == [{"hardware.vllm_gpus": 0}, {"method": "lora"}]
    for i, fix in enumerate(fixes):
        _assert_every_moment_fits(_plan(tmp_path, f"fix{i}", "Qwen/Qwen2.5-7B",
                                        **apply_fix({"hardware": hardware, "method": "qlora"}, fix)))
