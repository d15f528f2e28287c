"""`config render` sizes the adapters the rendered LoraConfig trains, refuses target modules the model lacks, and
its estimate and suggestions use the LM head the run will use (TRL 1.16's fused head; cast_lm_head_to_fp32)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from render_fixtures import write_run

from finetune.config.build import build_plan
from finetune.memory.formulas import GIB
from finetune.models import load_model_info
from finetune.spec import load_spec


def _model(tiny_run: Path) -> str:
    return str(yaml.safe_load(tiny_run.read_text())["model"])


@pytest.mark.parametrize("targets", [["q_proj", "v_proj"], r".*\.layers\.0\..*_proj"], ids=str)
def test_render_sizes_and_writes_the_spec_targets(cli, tiny_run: Path, tmp_path: Path,
                                                  targets: str | list[str]) -> None:
    model = _model(tiny_run)
    spec_path = write_run(tmp_path / "r", model, method="lora", lora={"r": 4, "target_modules": targets})
    plan = build_plan(load_spec(spec_path), spec_path.parent, no_gate=True)
    info = load_model_info(model)
    assert plan.estimate.gib_of("adapters") * GIB == 4 * info.lora_params(4, targets) < 4 * info.lora_params(4)
    assert plan.recommendation.estimate.gib_of("adapters") == plan.estimate.gib_of("adapters")
    assert cli("config", "render", spec_path, "--no-gate").code == 0
    rendered = yaml.safe_load((spec_path.parent / "config" / "grpo_config.yaml").read_text())
    assert rendered["lora_target_modules"] == targets


@pytest.mark.parametrize("targets, needle", [(["q_proj", "attn_q"], "'attn_q': no layer"),
                                             (["lm_head"], "fused LM head"), ("q_proj", "matches no layer")])
@pytest.mark.parametrize("method", ["lora", "full"])
def test_render_refuses_targets_the_model_lacks(cli, tiny_run: Path, tmp_path: Path, targets: str | list[str],
                                                needle: str, method: str) -> None:
    spec_path = write_run(tmp_path / "r", _model(tiny_run), method=method, lora={"target_modules": targets})
    res = cli("config", "render", spec_path, "--no-gate")
    assert res.code == 2, res
    lines = [ln for ln in res.err.strip().splitlines() if not ln.startswith("WARNING: --no-gate")]
    assert len(lines) == 1 and "lora.target_modules" in lines[0] and needle in lines[0], res.err
    assert "q_proj" in lines[0].split("fix", 1)[-1]  # the fix names the model's real layers
    assert not (spec_path.parent / "config").exists()


def test_render_estimate_uses_the_cast_lm_head(tiny_run: Path, tmp_path: Path) -> None:
    model = _model(tiny_run)
    plain = build_plan(load_spec(write_run(tmp_path / "a", model, method="lora")), tmp_path / "a", no_gate=True)
    # LoRA loads bf16 weights: TRL's cast makes the head's (tied: the embedding's) weight fp32
    spec_path = write_run(tmp_path / "b", model, method="lora", overrides={"cast_lm_head_to_fp32": True})
    cast = build_plan(load_spec(spec_path), spec_path.parent, no_gate=True)
    assert plain.estimate.component("lm_head_fp32") is None
    assert cast.estimate.settings["cast_lm_head_to_fp32"] is True and cast.estimate.settings["fused_lm_head"] is True
    assert cast.recommendation.estimate.settings["cast_lm_head_to_fp32"] is True
    info = load_model_info(model)
    assert cast.estimate.gib_of("lm_head_fp32") * GIB == info.vocab * info.hidden * 2
