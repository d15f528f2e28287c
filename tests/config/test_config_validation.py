"""`finetune config render` refuses what would break on the target, before writing anything."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
import yaml
from render_fixtures import pass_phase1, write_run

from finetune.diagnose.licence import approve


def _config_files(run: Path) -> list[str]:
    d = run / "config"
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


def _one_line(err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if not ln.startswith("WARNING: --no-gate")]
    assert len(lines) == 1, err
    return lines[0]


def _write_pass_gate(cli, run: Path, spec_path: Path) -> dict:
    assert spec_path.parent == run
    return pass_phase1(cli, spec_path)


def _load_train_module(run: Path):
    spec = importlib.util.spec_from_file_location("rendered_train", run / "config" / "train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_refuses_without_gate_and_writes_nothing(cli, tiny_run):
    res = cli("config", "render", tiny_run)
    assert res.code == 1, res
    assert "Phase 2 refused" in res.err and "gate" in res.err
    assert _config_files(tiny_run.parent) == []


@pytest.mark.slow
def test_pass_gate_renders_and_train_py_rechecks_the_same_hashes(cli, tiny_run):
    from finetune import hashing
    from finetune.spec import load_spec

    run = tiny_run.parent
    record = _write_pass_gate(cli, run, tiny_run)
    res = cli("config", "render", tiny_run)
    assert res.code == 0, res
    brief = (run / "config" / "BRIEF.md").read_text()
    assert "**PASS**" in brief and "--no-gate" not in brief
    assert "56 samples read (56 by a person, 0 by an agent)" in brief
    assert "'correct' on correct: recall ≥ " in brief and "read correct answers; precision ≥ " in brief
    assert f"{len(record['probes'])} hack probe(s)" in brief
    base = record["base_success"]
    line = next(x for x in brief.splitlines() if x.startswith("Base success"))
    assert f"over {base['samples']} sample(s) of {base['prompts']} prompt(s)" in line, line
    assert ("**PROVISIONAL**" in line) is bool(base.get("provisional")), line
    for gap in base.get("missing", []):
        assert gap.split(" (")[0][:40] in line, (gap, line)
    train = _load_train_module(run)
    assert train.GATE_REQUIRED is True
    # the standalone re-check computes exactly what finetune.hashing binds
    spec = load_spec(tiny_run)
    assert train.bound_hashes(run) == hashing.bound_hashes(run, spec.reward_section(), **spec.binding()) == record["hashes"]
    train.check_gate()  # holds
    with open(run / "rewards.py", "a") as fh:
        fh.write("\n# edited after the gate\n")
    with pytest.raises(SystemExit, match="rewards.py changed"):
        train.check_gate()
    res = cli("config", "render", tiny_run)
    assert res.code == 1 and "rewards.py" in res.err


def test_num_generations_floor(cli, tiny_run, tmp_path):
    spec = write_run(tmp_path / "r", yaml.safe_load(tiny_run.read_text())["model"], training__num_generations=4)
    res = cli("config", "render", spec, "--no-gate")
    assert res.code == 2
    line = _one_line(res.err)
    assert "training.num_generations" in line and "floor of 8" in line and "baseline" in line
    assert _config_files(spec.parent) == []


def test_server_mode_batch_rule_open_r1_249(cli, tiny_run, tmp_path):
    """8 GPUs, one for `trl vllm-serve`: 7 training processes × 1 × 1 is not divisible by 8."""
    model = yaml.safe_load(tiny_run.read_text())["model"]
    spec = write_run(tmp_path / "r", model, hardware__gpus=8, hardware__vllm_gpus=1,
                     training__per_device_train_batch_size=1, training__gradient_accumulation_steps=1)
    res = cli("config", "render", spec, "--no-gate")
    assert res.code == 2, res
    line = _one_line(res.err)
    assert "1 per device × 7 training processes × 1 steps per generation = 7" in line
    assert "divisible by num_generations (8)" in line
    fixes = re.findall(r"training\.(\w+): (\d+)", line.split("nearest valid settings:")[1])
    assert fixes and _config_files(spec.parent) == []
    # every proposed fix renders
    for field, value in fixes:
        changes = {"training__per_device_train_batch_size": 1, "training__gradient_accumulation_steps": 1,
                   f"training__{field}": int(value)}
        fixed = write_run(tmp_path / f"fix-{field}", model, hardware__gpus=8, hardware__vllm_gpus=1, **changes)
        assert cli("config", "render", fixed, "--no-gate").code == 0, (field, value)


def test_unknown_override_names_trl_version_and_closest_field(cli, tiny_run, tmp_path):
    model = yaml.safe_load(tiny_run.read_text())["model"]
    spec = write_run(tmp_path / "r", model, overrides={"warmup_step": 5})
    res = cli("config", "render", spec, "--no-gate")
    assert res.code == 2
    line = _one_line(res.err)
    assert "overrides.warmup_step" in line and "TRL 1.16.0" in line and "'warmup_steps'" in line


def test_override_cannot_change_algorithm_fields(cli, tiny_run, tmp_path):
    model = yaml.safe_load(tiny_run.read_text())["model"]
    spec = write_run(tmp_path / "r", model, overrides={"loss_type": "dapo"})
    res = cli("config", "render", spec, "--no-gate")
    assert res.code == 2 and "overrides.loss_type" in res.err and "explicit-fields contract" in res.err


@pytest.mark.parametrize("alias", ["vllm_importance_sampling_cap", "gradient_checkpointing_kwargs"])
def test_override_cannot_set_a_field_through_its_deprecated_alias(cli, tiny_run, tmp_path, alias):
    """TRL copies a deprecated alias over its field after every check that names the field (the cap becomes the
    importance-sampling clip_max, an algorithm-defining field), so the alias itself is refused."""
    from finetune.config.overrides import deprecated_aliases

    target = deprecated_aliases()[alias]
    model = yaml.safe_load(tiny_run.read_text())["model"]
    spec = write_run(tmp_path / "r", model, overrides={alias: 10.0 if "cap" in alias else {"use_reentrant": True}})
    res = cli("config", "render", spec, "--no-gate")
    assert res.code == 2 and not (spec.parent / "config").exists()
    line = _one_line(res.err)
    assert f"overrides.{alias}" in line and f"'{target}'" in line and "deprecated alias" in line


def test_valid_override_is_rendered(cli, tiny_run, tmp_path):
    model = yaml.safe_load(tiny_run.read_text())["model"]
    spec = write_run(tmp_path / "r", model, overrides={"save_total_limit": 3})
    assert cli("config", "render", spec, "--no-gate").code == 0
    assert yaml.safe_load((spec.parent / "config" / "grpo_config.yaml").read_text())["save_total_limit"] == 3


def test_bad_spec_is_one_line_with_field_path(cli, tiny_run):
    text = tiny_run.read_text().replace("logging_steps: 1", "logging_step: 1")
    tiny_run.write_text(text)
    res = cli("config", "render", tiny_run, "--no-gate")
    assert res.code == 2
    line = _one_line(res.err)
    assert "training.logging_step" in line and "spec.yaml:" in line
    assert _config_files(tiny_run.parent) == []


def test_completion_cap_below_answer_lengths_is_refused(cli, tiny_run, tmp_path):
    model = yaml.safe_load(tiny_run.read_text())["model"]
    spec = write_run(tmp_path / "r", model, generation__max_completion_length=4)
    rows = [{"prompt": "What is 1 plus 1?", "answer": "The sum of 1 and 1 is 2 so the answer is 2"}] * 8
    (spec.parent / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = cli("config", "render", spec, "--no-gate")
    assert res.code == 2
    line = _one_line(res.err)
    assert "generation.max_completion_length" in line and "trl#5697" in line and "95th percentile" in line


def test_prompt_longer_than_max_prompt_length_is_refused(cli, tiny_run, tmp_path):
    model = yaml.safe_load(tiny_run.read_text())["model"]
    spec = write_run(tmp_path / "r", model, generation__max_prompt_length=3)
    res = cli("config", "render", spec, "--no-gate")
    assert res.code == 2 and "generation.max_prompt_length" in res.err


def test_vllm_max_model_length_must_hold_prompt_and_completion(cli, tiny_run, tmp_path):
    model = yaml.safe_load(tiny_run.read_text())["model"]
    spec = write_run(tmp_path / "r", model, overrides={"vllm_max_model_length": 40})
    res = cli("config", "render", spec, "--no-gate")
    assert res.code == 2 and "vllm_max_model_length 40 < max_prompt_length + max_completion_length (80)" in res.err
    cli_ok = write_run(tmp_path / "ok", model)
    assert cli("config", "render", cli_ok, "--no-gate").code == 0
    cfg = yaml.safe_load((cli_ok.parent / "config" / "grpo_config.yaml").read_text())
    assert cfg["vllm_max_model_length"] == 64 + 16


def test_moe_requires_gspo_rendered_off_policy(cli, tiny_moe_model_dir, tmp_path):
    spec = write_run(tmp_path / "grpo", str(tiny_moe_model_dir))
    res = cli("config", "render", spec, "--no-gate")
    assert res.code == 2 and "mixture-of-experts" in res.err and "variant: gspo" in res.err
    spec = write_run(tmp_path / "gspo", str(tiny_moe_model_dir), variant="gspo")
    assert cli("config", "render", spec, "--no-gate").code == 0
    cfg = yaml.safe_load((spec.parent / "config" / "grpo_config.yaml").read_text())
    assert cfg["importance_sampling_level"] == "sequence" and cfg["loss_type"] == "grpo"
    assert cfg["steps_per_generation"] > cfg["gradient_accumulation_steps"]  # off-policy


def test_vlm_is_refused_with_reference_only_explanation(cli, tiny_run, tmp_path):
    from transformers import Qwen2VLConfig

    vlm = tmp_path / "vlm"
    cfg = Qwen2VLConfig(text_config=dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                         num_key_value_heads=2, intermediate_size=128, vocab_size=256),
                        vision_config=dict(depth=1, embed_dim=32, hidden_size=64, num_heads=2))
    cfg.save_pretrained(vlm)
    spec = write_run(tmp_path / "r", yaml.safe_load(tiny_run.read_text())["model"], model_config=str(vlm / "config.json"))
    res = cli("config", "render", spec, "--no-gate")
    assert res.code == 2, res
    line = _one_line(res.err)
    assert "vision-language" in line and "reference-only" in line and "ignoring the image" in line


def test_variant_needs_diagnosis_naming_its_symptom(cli, tiny_run, tmp_path):
    model = yaml.safe_load(tiny_run.read_text())["model"]
    spec = write_run(tmp_path / "r", model, variant="dapo")
    res = cli("config", "render", spec, "--no-gate")
    assert res.code == 1 and "entropy_collapse" in res.err and "pre-emptively" in res.err
    diag = spec.parent / "diagnosis"
    diag.mkdir()
    (diag / "diagnosis.json").write_text(json.dumps(approve({"verdict": "symptom", "symptoms": [
        {"name": "length_drift", "evidence": "..."}], "recommended_variant": "dr_grpo"}, "Ada")))
    assert cli("config", "render", spec, "--no-gate").code == 1  # wrong symptom for dapo
    unlicensed = {"verdict": "symptom", "symptoms": [{"name": "entropy_collapse", "evidence": "entropy 2.2 -> 0.15"}],
                  "recommended_variant": "dapo"}
    (diag / "diagnosis.json").write_text(json.dumps(unlicensed))  # no log of this run's training, no approval
    res = cli("config", "render", spec, "--no-gate")
    assert res.code == 1 and "licenses nothing" in res.err, res
    (diag / "diagnosis.json").write_text(json.dumps(approve(unlicensed, "Ada")))  # the person approved it
    res = cli("config", "render", spec, "--no-gate")
    assert res.code == 0, res
    cfg = yaml.safe_load((spec.parent / "config" / "grpo_config.yaml").read_text())
    assert (cfg["loss_type"], cfg["epsilon_high"], cfg["mask_truncated_completions"]) == ("dapo", 0.28, True)


@pytest.mark.slow
def test_lr_change_needs_pass_gate_and_healthy_diagnosis(cli, tiny_run, tmp_path):
    model = yaml.safe_load(tiny_run.read_text())["model"]
    spec = write_run(tmp_path / "r", model, training__learning_rate=1e-6)
    res = cli("config", "render", spec, "--no-gate")
    assert res.code == 1 and "base-recipe contract" in res.err
    _write_pass_gate(cli, spec.parent, spec)
    assert cli("config", "render", spec).code == 1  # a gate alone is not enough
    diag = spec.parent / "diagnosis"
    diag.mkdir()
    (diag / "diagnosis.json").write_text(json.dumps({"verdict": "healthy", "symptoms": []}))
    res = cli("config", "render", spec)
    assert res.code == 1 and "licenses nothing" in res.err, res  # healthy, but of no log this run trained
    (diag / "diagnosis.json").write_text(json.dumps(approve({"verdict": "healthy", "symptoms": []}, "Ada")))
    res = cli("config", "render", spec)
    assert res.code == 0, res
    assert yaml.safe_load((spec.parent / "config" / "grpo_config.yaml").read_text())["learning_rate"] == 1e-6


def test_preview_writes_only_the_brief(cli, tiny_run):
    res = cli("config", "render", tiny_run, "--preview")
    assert res.code == 0, res
    assert _config_files(tiny_run.parent) == ["BRIEF.md"]
    brief = (tiny_run.parent / "config" / "BRIEF.md").read_text()
    assert brief.startswith("> **PREVIEW — not launchable.**")
    assert "Memory fit" in brief and "GiB" in brief


def test_no_gate_is_loud_everywhere(cli, tiny_run):
    res = cli("config", "render", tiny_run, "--no-gate")
    assert res.code == 0 and "WARNING: --no-gate" in res.err
    d = tiny_run.parent / "config"
    assert (d / "BRIEF.md").read_text().startswith("> **UNGATED")
    assert "UNGATED: RENDERED WITH --no-gate" in (d / "train.py").read_text()
    assert "GATE_REQUIRED = False" in (d / "train.py").read_text()
    assert "UNGATED: RENDERED WITH --no-gate" in (d / "grpo_config.yaml").read_text()
    assert "UNGATED: RENDERED WITH --no-gate" in (d / "launch.sh").read_text()


def test_rerender_for_another_target_removes_stale_launch_files(cli, tiny_run, tmp_path):
    model = yaml.safe_load(tiny_run.read_text())["model"]
    spec = write_run(tmp_path / "r", model, hardware__gpus=8)
    assert cli("config", "render", spec, "--no-gate").code == 0
    assert "accelerate.yaml" in _config_files(spec.parent)
    (spec.parent / "config" / "notes.txt").write_text("the engineer's own file")
    spec = write_run(tmp_path / "r", model)
    assert cli("config", "render", spec, "--no-gate").code == 0
    assert _config_files(spec.parent) == ["BRIEF.md", "env_check.py", "grpo_config.yaml", "heldout.json", "launch.sh",
                                          "notes.txt", "preflight.py", "target.json", "train.py", "watch.py",
                                          "watchdog.py"]


@pytest.mark.parametrize("fmt", ["parquet", "hf_disk", "hf_disk_dict"])
def test_parquet_and_saved_datasets_load_in_train_py_and_trl(cli, tiny_run, tmp_path, fmt):
    import datasets
    from render_fixtures import ROWS
    from trl import DatasetMixtureConfig, get_dataset

    model = yaml.safe_load(tiny_run.read_text())["model"]
    ds = datasets.Dataset.from_list(ROWS)
    name = {"parquet": "data/train.parquet", "hf_disk": "data/saved", "hf_disk_dict": "data/saved_dict"}[fmt]
    spec = write_run(tmp_path / fmt, model, dataset__path=name)
    target = spec.parent / name
    if fmt == "parquet":
        ds.to_parquet(str(target))
    elif fmt == "hf_disk":
        ds.save_to_disk(str(target))
    else:
        datasets.DatasetDict({"train": ds}).save_to_disk(str(target))
    res = cli("config", "render", spec, "--no-gate")
    assert res.code == 0, res
    train = _load_train_module(spec.parent)
    loaded = train.load_train_dataset()
    assert loaded["prompt"] == [r["prompt"] for r in ROWS]
    cfg = yaml.safe_load((spec.parent / "config" / "grpo_config.yaml").read_text())
    import os

    cwd = os.getcwd()
    os.chdir(spec.parent)  # `trl grpo` runs from the run directory
    try:
        mixture = DatasetMixtureConfig(datasets=cfg["datasets"])
        via_trl = get_dataset(mixture)["train"]
    finally:
        os.chdir(cwd)
    assert via_trl["answer"] == [r["answer"] for r in ROWS]


def test_user_batch_gets_a_matching_accumulation(cli, tiny_run, tmp_path):
    model = yaml.safe_load(tiny_run.read_text())["model"]
    spec = write_run(tmp_path / "r", model, hardware__gpus=8, hardware__vllm_gpus=1,
                     training__per_device_train_batch_size=1, training__gradient_accumulation_steps=None)
    res = cli("config", "render", spec, "--no-gate")
    assert res.code == 0, res
    cfg = yaml.safe_load((spec.parent / "config" / "grpo_config.yaml").read_text())
    assert (1 * 7 * cfg["gradient_accumulation_steps"]) % 8 == 0 and cfg["steps_per_generation"] == cfg["gradient_accumulation_steps"]


def test_length_checks_without_a_local_tokenizer_only_warn(cli, tmp_path):
    spec = write_run(tmp_path / "r", "Qwen/Qwen3-1.7B", generation__max_prompt_length=4)
    res = cli("config", "render", spec, "--no-gate")
    assert res.code == 0, res
    assert "estimate only" in res.out and "max_prompt_length" in res.out


def test_batch_valid_for_two_processes_is_refused_on_one_gpu_as_trl_would(cli, tiny_run, tmp_path):
    """2 per device × 2 steps: a full group of 8 with 2 training processes, half a group with one."""
    import tempfile

    from trl import GRPOConfig

    model = yaml.safe_load(tiny_run.read_text())["model"]
    two = write_run(tmp_path / "two", model, hardware={"profile": "h100-80gb", "gpus": 3, "vllm_gpus": 1},
                    training__per_device_train_batch_size=2, training__gradient_accumulation_steps=2)
    assert cli("config", "render", two, "--no-gate").code == 0
    one = write_run(tmp_path / "one", model, training__per_device_train_batch_size=2,
                    training__gradient_accumulation_steps=2)
    res = cli("config", "render", one, "--no-gate")
    assert res.code == 2 and "= 4) must be divisible by num_generations (8)" in res.err
    with tempfile.TemporaryDirectory() as out, pytest.raises(ValueError, match="divisible by num_generations"):
        GRPOConfig(output_dir=out, use_cpu=True, bf16=False, per_device_train_batch_size=2,
                   gradient_accumulation_steps=2, num_generations=8)  # TRL itself, one process
