"""The plugin as Claude Code and the Agent Skills reference see it: manifest, validators, skill shape, and
the GRPO skill's recipe block (every algorithm-defining field explicit, and accepted by the installed TRL)."""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import finetune
from finetune import lint

CLAUDE_CODE_VERSION = "2.1.328"  # the version the Makefile pins; the validator works offline from the npm cache
SKILLS = ("finetuning-method-selection", "grpo-rlvr-training", "lora-qlora-recipes", "preference-optimization",
          "eval-harness-first")
# DESIGN.md's explicit-fields contract: never left to the installed TRL's default.
ALGORITHM_FIELDS = (
    "loss_type", "scale_rewards", "beta", "epsilon", "epsilon_high", "delta", "importance_sampling_level",
    "num_iterations", "steps_per_generation", "num_generations", "temperature", "top_p", "top_k", "min_p",
    "mask_truncated_completions", "top_entropy_quantile", "multi_objective_aggregation", "reward_weights",
    "vllm_importance_sampling_correction", "max_completion_length", "gradient_checkpointing",
)


def test_manifest(repo_root):
    manifest = json.loads((repo_root / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "llm-finetuning"
    assert manifest["version"] == finetune.__version__
    pyproject = (repo_root / "pyproject.toml").read_text()
    assert re.search(rf'^version = "{re.escape(finetune.__version__)}"$', pyproject, re.M)
    assert manifest["license"] == "Apache-2.0"
    assert "Apache License" in (repo_root / "LICENSE").read_text()[:200]
    for key in ("description", "author", "keywords", "repository", "homepage", "$schema"):
        assert manifest.get(key), key


def test_claude_plugin_validate_strict(repo_root):
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip("npx (Node.js) is not installed, so Claude Code's plugin validator cannot run here")
    cmd = [npx, "--yes", f"@anthropic-ai/claude-code@{CLAUDE_CODE_VERSION}", "plugin", "validate", "--strict",
           "--profile", "directory", str(repo_root)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "Validation passed" in out.stdout
    # the directory profile's advice (e.g. "no line installs the plugin from a marketplace") must be empty
    assert "Advice" not in out.stdout, out.stdout[out.stdout.find("Advice"):]
    assert f"Validating marketplace manifest: {repo_root / '.claude-plugin' / 'marketplace.json'}" in out.stdout


def test_marketplace_lists_this_plugin_and_readme_installs_it(repo_root):
    market = json.loads((repo_root / ".claude-plugin" / "marketplace.json").read_text())
    manifest = json.loads((repo_root / ".claude-plugin" / "plugin.json").read_text())
    [entry] = [p for p in market["plugins"] if p["name"] == manifest["name"]]
    assert entry["source"] == "./" and entry["version"] == manifest["version"]
    assert entry["description"] == manifest["description"]
    owner_repo = manifest["repository"].removeprefix("https://github.com/")
    readme = (repo_root / "README.md").read_text()
    assert f"/plugin install {manifest['name']} --marketplace {owner_repo}" in readme
    assert f"/plugin marketplace add {owner_repo}" in readme
    assert f"/plugin install {manifest['name']}@{market['name']}" in readme


@pytest.mark.parametrize("skill", SKILLS)
def test_agentskills_validate(repo_root, skill):
    exe = shutil.which("agentskills") or str(Path(sys.executable).parent / "agentskills")
    if not Path(exe).exists():
        pytest.skip("agentskills (PyPI skills-ref, in the [test] extra) is not installed")
    out = subprocess.run([exe, "validate", str(repo_root / "skills" / skill)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_skills_present_and_frontmatter_minimal(repo_root):
    assert sorted(p.name for p in (repo_root / "skills").iterdir() if p.is_dir()) == sorted(SKILLS)
    for skill in SKILLS:
        text = (repo_root / "skills" / skill / "SKILL.md").read_text()
        raw, body, _ = lint.split_frontmatter(text)
        import yaml

        data = yaml.safe_load(raw)
        assert set(data) == {"name", "description", "license"}, skill
        assert len(body.splitlines()) < 400, f"{skill}: keep SKILL.md well under 500 lines"


def recipe_block(repo_root: Path) -> str:
    region = (repo_root / "references" / "grpo-recipe.md").read_text()
    skill = (repo_root / "skills" / "grpo-rlvr-training" / "SKILL.md").read_text()
    assert "](../../references/grpo-recipe.md)" in skill and "GRPOConfig(" not in skill  # linked, not copied
    blocks = [b for b in lint.code_blocks(region) if b.lang == "python"]
    assert len(blocks) == 1
    return blocks[0].text


def grpo_config_call(source: str) -> ast.Call:
    calls = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)
             and getattr(n.func, "id", None) == "GRPOConfig"]
    assert len(calls) == 1
    return calls[0]


def literal_kwargs(call: ast.Call) -> dict:
    """The call's keywords whose values are literals (the generated block computes a few, e.g. `bf16=True and
    not cpu`; those are left out)."""
    out = {}
    for kw in call.keywords:
        try:
            out[kw.arg] = ast.literal_eval(kw.value)
        except ValueError:
            continue
    return out


def test_recipe_block_writes_every_algorithm_field(repo_root):
    call = grpo_config_call(recipe_block(repo_root))
    given = {kw.arg for kw in call.keywords}
    missing = [f for f in ALGORITHM_FIELDS if f not in given]
    assert not missing, f"left to TRL's defaults: {missing}"
    assert {"use_vllm", "vllm_mode", "bf16", "seed", "learning_rate", "logging_steps"} <= given
    # the seed's base recipe, and plain GRPO said out loud
    literal = literal_kwargs(call)
    assert literal["loss_type"] == "grpo"
    assert literal["learning_rate"] == 5e-7 and literal["beta"] == 0.01 and literal["seed"] == 3407
    assert literal["num_generations"] >= 8
    assert literal["vllm_mode"] in {"colocate", "server"}
    assert literal["importance_sampling_level"] == "token"
    assert literal["vllm_importance_sampling_correction"] is False


def test_recipe_block_is_accepted_by_installed_trl(repo_root, tmp_path):
    """Build the recipe's GRPOConfig for real (CPU-safe substitutions only): TRL's own __post_init__ checks
    the batch arithmetic and value ranges."""
    from trl import GRPOConfig

    kwargs = literal_kwargs(grpo_config_call(recipe_block(repo_root)))
    kwargs.update(use_vllm=False, bf16=False, use_cpu=True, report_to="none", reward_weights=[0.2, 1.0],
                  output_dir=str(tmp_path / "train"))
    config = GRPOConfig(**kwargs)
    assert config.loss_type == "grpo" and config.num_generations >= 8
    assert config.generation_batch_size % config.num_generations == 0


@pytest.mark.parametrize("skill, cls_name", [
    ("lora-qlora-recipes", "SFTConfig"), ("lora-qlora-recipes", "LoraConfig"),
    ("preference-optimization", "DPOConfig"), ("preference-optimization", "LoraConfig"),
])
def test_sibling_recipes_build_in_installed_trl(repo_root, tmp_path, skill, cls_name):
    """The SFT / DPO / LoRA configs the sibling skills show are accepted by TRL's and peft's own checks."""
    import peft
    import trl

    cls = getattr(peft if cls_name == "LoraConfig" else trl, cls_name)
    text = (repo_root / "skills" / skill / "SKILL.md").read_text()
    calls = [node for block in lint.code_blocks(text) if block.lang == "python"
             for node in ast.walk(ast.parse(block.text))
             if isinstance(node, ast.Call) and lint._called_name(node.func) == cls_name]
    assert calls, f"{skill} shows no {cls_name}"
    for call in calls:
        kwargs = literal_kwargs(call)
        if cls_name != "LoraConfig":
            kwargs.update(bf16=False, use_cpu=True, output_dir=str(tmp_path / "out"))
        config = cls(**kwargs)  # raises on a value TRL / peft reject (their __post_init__ checks)
        if "learning_rate" in kwargs:
            assert config.learning_rate == kwargs["learning_rate"]


def skill_calls(repo_root: Path, skill: str, cls_name: str) -> list[ast.Call]:
    text = (repo_root / "skills" / skill / "SKILL.md").read_text()
    return [node for block in lint.code_blocks(text) if block.lang == "python"
            for node in ast.walk(ast.parse(block.text))
            if isinstance(node, ast.Call) and lint._called_name(node.func) == cls_name]


# What a 2-step CPU run on the tiny local model must change in the skills' recipes, and why.
CPU_SMOKE = dict(bf16=False, use_cpu=True, report_to="none", max_steps=2, eval_strategy="no", save_strategy="no",
                 logging_steps=1, per_device_train_batch_size=2, gradient_accumulation_steps=1, max_length=64,
                 gradient_checkpointing=False)


@pytest.mark.slow
def test_sft_and_dpo_recipes_train_on_the_tiny_model(repo_root, tiny_model_dir, tmp_path):
    """The LoRA SFT and DPO recipes of the sibling skills, with their own settings, train for 2 steps on CPU.
    Substitutions: CPU_SMOKE, and no assistant-only loss (the tiny chat template has no generation markers)."""
    from datasets import Dataset
    from peft import LoraConfig
    from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer

    lora = LoraConfig(**literal_kwargs(skill_calls(repo_root, "lora-qlora-recipes", "LoraConfig")[0]))
    sft_kwargs = literal_kwargs(skill_calls(repo_root, "lora-qlora-recipes", "SFTConfig")[0])
    sft_kwargs.update(CPU_SMOKE, assistant_only_loss=False, output_dir=str(tmp_path / "sft"))
    rows = [{"prompt": [{"role": "user", "content": f"What is {a} plus {b}"}],
             "completion": [{"role": "assistant", "content": f"<answer>{a + b}</answer>"}]}
            for a in range(3) for b in range(3)]
    sft = SFTTrainer(model=str(tiny_model_dir), args=SFTConfig(**sft_kwargs), train_dataset=Dataset.from_list(rows),
                     peft_config=lora)
    sft_out = sft.train()
    assert sft.state.global_step == 2 and sft_out.training_loss > 0

    dpo_kwargs = literal_kwargs(skill_calls(repo_root, "preference-optimization", "DPOConfig")[0])
    dpo_kwargs.update(CPU_SMOKE, output_dir=str(tmp_path / "dpo"))
    pairs = [{"prompt": [{"role": "user", "content": f"What is {a} plus {b}"}],
              "chosen": [{"role": "assistant", "content": f"<answer>{a + b}</answer>"}],
              "rejected": [{"role": "assistant", "content": f"{a + b + 1}"}]} for a in range(3) for b in range(3)]
    dpo_lora = LoraConfig(**literal_kwargs(skill_calls(repo_root, "preference-optimization", "LoraConfig")[0]))
    dpo = DPOTrainer(model=str(tiny_model_dir), args=DPOConfig(**dpo_kwargs), train_dataset=Dataset.from_list(pairs),
                     peft_config=dpo_lora)
    dpo.train()
    assert dpo.state.global_step == 2
    assert any("rewards/accuracies" in k for entry in dpo.state.log_history for k in entry)
