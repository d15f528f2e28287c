"""Rendered configs re-validated: every algorithm field explicit per variant (explicit-fields contract), goldens for
four targets, and the launch / accelerate / DeepSpeed files checked structurally.

Regenerate the goldens after an intended change with ``FINETUNE_REGEN_GOLDEN=1``.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import re
import subprocess
import warnings
from pathlib import Path

import pytest
import yaml
from render_fixtures import write_run

from finetune.diagnose.licence import approve
from finetune.variants import ALGORITHM_FIELDS, VARIANT_SYMPTOM, VARIANTS

GOLDEN = Path(__file__).parent / "golden"
REGEN = os.environ.get("FINETUNE_REGEN_GOLDEN") == "1"
HUB_MODEL = "Qwen/Qwen3-1.7B"  # bundled config: no weights, no tokenizer needed to render
TARGETS = {
    "h100-1gpu": {"hardware": {"profile": "h100-80gb", "gpus": 1, "nodes": 1}},
    "h100-8gpu": {"hardware": {"profile": "h100-80gb", "gpus": 8, "nodes": 1}},
    "h100-2node-8gpu": {"hardware": {"profile": "h100-80gb", "gpus": 8, "nodes": 2}},
    "dgx-spark": {"hardware": {"profile": "dgx-spark", "gpus": 1, "nodes": 1}},
}
# DeepSpeed's documented configuration keys (deepspeed.ai/docs/config-json: batch size, gradient
# clipping, bf16, ZeRO optimizations, logging) — the subset a ZeRO-2/3 config may use here.
DS_TOP = {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "gradient_clipping",
          "bf16", "fp16", "zero_optimization", "steps_per_print", "wall_clock_breakdown", "optimizer", "scheduler"}
DS_ZERO = {"stage", "allgather_partitions", "allgather_bucket_size", "overlap_comm", "reduce_scatter",
           "reduce_bucket_size", "contiguous_gradients", "offload_param", "offload_optimizer",
           "stage3_max_live_parameters", "stage3_max_reuse_distance", "stage3_prefetch_bucket_size",
           "stage3_param_persistence_threshold", "sub_group_size", "stage3_gather_16bit_weights_on_model_save",
           "round_robin_gradients", "zero_hpz_partition_size", "zero_quantized_weights", "zero_quantized_gradients"}
DS_STAGE3_ONLY = {k for k in DS_ZERO if k.startswith("stage3_")} | {"offload_param"}
DS_OFFLOAD = {"device", "pin_memory", "nvme_path", "buffer_count", "fast_init", "ratio", "buffer_size", "max_in_cpu"}


def _render(cli, tmp_path: Path, name: str, model: str = HUB_MODEL, **changes) -> Path:
    spec = write_run(tmp_path / name, model, **changes)
    res = cli("config", "render", spec, "--no-gate")
    assert res.code == 0, res
    return spec.parent / "config"


def _grpo_fields() -> set[str]:
    from trl import GRPOConfig

    return {f.name for f in dataclasses.fields(GRPOConfig)}


def _train_py_kwargs(train_py: str) -> dict[str, ast.expr]:
    tree = ast.parse(train_py)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "GRPOConfig"]
    assert len(calls) == 1
    return {kw.arg: kw.value for kw in calls[0].keywords}


def _build_grpo_config(cfg: dict, processes: int):
    """The real GRPOConfig from the rendered YAML, with only the CPU-safe substitutions."""
    import tempfile

    from trl import GRPOConfig

    from finetune.config.build import cpu_safe

    fields = _grpo_fields()
    kwargs = cpu_safe({k: v for k, v in cfg.items() if k in fields}, processes)
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return GRPOConfig(**dict(kwargs, output_dir=tmp))


def revalidate(config_dir: Path) -> None:
    """Everything a rendered config/ must satisfy, whatever the target."""
    cfg = yaml.safe_load((config_dir / "grpo_config.yaml").read_text())
    missing = [f for f in ALGORITHM_FIELDS if f not in cfg]
    assert not missing, f"left to TRL's defaults: {missing}"
    unknown = [k for k in cfg if k not in _grpo_fields() and k not in
               {"model_name_or_path", "dtype", "datasets", "dataset_train_split", "reward_funcs", "use_peft",
                "lora_r", "lora_alpha", "lora_dropout", "lora_target_modules", "load_in_4bit",
                "bnb_4bit_quant_type", "use_bnb_nested_quant"}]
    assert not unknown, unknown
    # TRL's own CLI parser takes the YAML as-is (only the CPU substitutions added), no key unknown to it
    from trl.scripts.grpo import make_parser

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        script, training, model, _data = make_parser().parse_args_and_config(
            args=["--config", str(config_dir / "grpo_config.yaml"), "--use_cpu", "true", "--bf16", "false",
                  "--use_vllm", "false", "--output_dir", str(config_dir.parent / "parsed")],
            fail_with_unknown_args=True)[:4]
    assert script.reward_funcs == [f"rewards.{n}" for n in ("format_ok", "correct")]
    assert model.model_name_or_path == cfg["model_name_or_path"]
    for f in ALGORITHM_FIELDS:
        if f != "steps_per_generation":
            assert getattr(training, f) == cfg[f], f
    processes = 1
    acc_path = config_dir / "accelerate.yaml"
    if acc_path.exists():
        from accelerate.commands.config.config_args import load_config_from_file

        acc = load_config_from_file(str(acc_path))
        processes = acc.num_processes
        if acc.distributed_type == "MULTI_GPU":  # memory.recommend() chose plain DDP (zero_stage 0)
            assert not list(config_dir.glob("deepspeed_zero*.json"))
        else:
            assert acc.distributed_type == "DEEPSPEED"
            ds_file = Path(acc.deepspeed_config["deepspeed_config_file"])
            assert ds_file.parent.name == "config"
            check_deepspeed(json.loads((config_dir / ds_file.name).read_text()))
    # TRL's batch rule for the target's training processes, then the real GRPOConfig
    assert (cfg["per_device_train_batch_size"] * processes * cfg["steps_per_generation"]) % cfg["num_generations"] == 0
    built = _build_grpo_config(cfg, processes)
    for f in ALGORITHM_FIELDS:
        if f != "steps_per_generation":  # the check restates it as generation_batch_size for one process
            assert getattr(built, f) == cfg[f], f
    assert built.generation_batch_size == cfg["per_device_train_batch_size"] * processes * cfg["steps_per_generation"]
    # train.py writes the same kwargs, every algorithm field among them
    train_py = (config_dir / "train.py").read_text()
    compile(train_py, "train.py", "exec")
    kws = _train_py_kwargs(train_py)
    assert set(ALGORITHM_FIELDS) <= set(kws)
    for key, node in kws.items():
        try:
            value = ast.literal_eval(node)
        except ValueError:
            continue  # the --cpu / --max-steps expressions
        assert key in cfg or key == "model_init_kwargs", key
        if key in cfg:
            assert value == cfg[key], key
    launch = config_dir / "launch.sh"
    subprocess.run(["bash", "-n", str(launch)], check=True)
    text = launch.read_text()
    visible = re.findall(r"CUDA_VISIBLE_DEVICES=([\d,]+)", text)
    if len(visible) == 2:  # server mode on one node: disjoint generation and training GPUs
        serve, train = (set(v.split(",")) for v in visible)
        assert not serve & train and len(train) == processes
    if "--num_processes" in text:
        assert f"--num_processes {processes}" in text


def check_deepspeed(ds: dict) -> None:
    assert set(ds) <= DS_TOP, set(ds) - DS_TOP
    zero = ds["zero_optimization"]
    assert set(zero) <= DS_ZERO, set(zero) - DS_ZERO
    assert zero["stage"] in (2, 3)
    if zero["stage"] != 3:
        assert not set(zero) & DS_STAGE3_ONLY
    for key in ("offload_param", "offload_optimizer"):
        if key in zero:
            assert set(zero[key]) <= DS_OFFLOAD and zero[key]["device"] in ("none", "cpu", "nvme")
    for key in ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"):
        assert ds[key] == "auto" or isinstance(ds[key], int)  # "auto": filled from GRPOConfig by transformers
    assert ds["bf16"]["enabled"] in (True, False, "auto")


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_golden(cli, tmp_path, target):
    # per-scale values left to finetune.memory.recommend(), realistic lengths
    config_dir = _render(cli, tmp_path, target, hardware=TARGETS[target]["hardware"],
                         training__per_device_train_batch_size=None, training__gradient_accumulation_steps=None,
                         generation__max_prompt_length=256, generation__max_completion_length=1024)
    revalidate(config_dir)
    rendered = {p.name: p.read_text() for p in sorted(config_dir.iterdir())}
    # env_check.py is a verbatim copy of finetune.env.check: compared with its source, not kept as a golden
    from finetune.env import check

    assert rendered.pop("env_check.py") == Path(check.__file__).read_text()
    from finetune import watch  # watch.py too: a verbatim copy of finetune.watch

    assert rendered.pop("watch.py") == Path(watch.__file__).read_text()
    from finetune import watchdog  # and watchdog.py, of finetune.watchdog

    assert rendered.pop("watchdog.py") == Path(watchdog.__file__).read_text()
    from finetune import preflight  # and preflight.py, of finetune.preflight

    assert rendered.pop("preflight.py") == Path(preflight.__file__).read_text()
    gold = GOLDEN / target
    if REGEN:
        gold.mkdir(parents=True, exist_ok=True)
        for old in gold.iterdir():
            old.unlink()
        for name, text in rendered.items():
            (gold / name).write_text(text)
    expected = {p.name: p.read_text() for p in sorted(gold.iterdir())} if gold.is_dir() else {}
    assert sorted(rendered) == sorted(expected), "set FINETUNE_REGEN_GOLDEN=1 after an intended change"
    for name in rendered:
        assert _comparable(rendered[name]) == _comparable(expected[name]), (
            f"{target}/{name} differs from its golden (FINETUNE_REGEN_GOLDEN=1 after an intended change)")


def _comparable(text: str) -> str:
    """A rendered file minus what other modules own: the memory estimator's figures (its own tests pin
    them) and the reward-section digest (finetune.hashing's). Every value and layout decision stays."""
    text = re.sub(r"(## Memory fit[^\n]*\n).*?(?=\n## )", r"\1<memory table>\n", text, flags=re.S)
    text = re.sub(r"\d+(\.\d+)? (GiB|GB/s|tokens/s)", r"<n> \2", text)
    text = re.sub(r"\(\d+%\)|\d+\.\d+ of \d+\.\d+", "<share>", text)
    text = re.sub(r"^RENDERED_PYTHON=\S+", "RENDERED_PYTHON=<the rendering interpreter>", text, flags=re.M)
    return re.sub(r"REWARD_SECTION_SHA256 = '[0-9a-f]{64}'", "REWARD_SECTION_SHA256 = <digest>", text)


def test_golden_targets_have_the_expected_layout():
    def cfg(t):
        return yaml.safe_load((GOLDEN / t / "grpo_config.yaml").read_text())

    assert cfg("h100-1gpu")["vllm_mode"] == "colocate" and not (GOLDEN / "h100-1gpu" / "accelerate.yaml").exists()
    assert cfg("dgx-spark")["vllm_mode"] == "colocate"
    assert cfg("h100-8gpu")["vllm_mode"] == "server"
    launch = (GOLDEN / "h100-2node-8gpu" / "launch.sh").read_text()
    assert "--num_machines 1 --num_processes 8" in launch and "NODE_RANK" in launch
    # Qwen3-1.7B (16 / 8 heads) fits one GPU: the generation node holds 8 replicas at TP 1
    assert '"$BIN/trl" vllm-serve' in launch and "--tensor-parallel-size 1 --data-parallel-size 8" in launch


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_algorithm_field_explicit_per_variant(cli, tmp_path, variant):
    run = tmp_path / variant
    changes = {"variant": variant}
    if variant != "grpo":
        (run / "diagnosis").mkdir(parents=True)
        (run / "diagnosis" / "diagnosis.json").write_text(json.dumps(approve(  # the person approved the licence
            {"verdict": "symptom", "symptoms": [{"name": VARIANT_SYMPTOM[variant], "evidence": "test"}]}, "Ada")))
    config_dir = _render(cli, tmp_path, variant, **changes)
    revalidate(config_dir)
    cfg = yaml.safe_load((config_dir / "grpo_config.yaml").read_text())
    built = _build_grpo_config(cfg, 1)
    for field, pinned in VARIANTS[variant].items():
        assert field in cfg, f"{field} left to TRL's default"
        assert cfg[field] == pinned.value and getattr(built, field) == pinned.value, field
    expected_beta = 0.01 if variant == "grpo" else 0.0
    assert cfg["beta"] == built.beta == expected_beta
    if variant == "gspo":
        assert cfg["steps_per_generation"] > cfg["gradient_accumulation_steps"]
    else:
        assert cfg["steps_per_generation"] == cfg["gradient_accumulation_steps"]
    # an explicit value that happens to equal TRL's default still counts only because the key is there
    from trl import GRPOConfig

    defaults = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    assert any(cfg[f] == defaults[f] for f in ALGORITHM_FIELDS if f in defaults)


def test_zero3_for_a_model_that_needs_sharding(cli, tmp_path):
    config_dir = _render(cli, tmp_path, "14b", model="Qwen/Qwen3-14B", hardware={"profile": "h100-80gb", "gpus": 8},
                         training__per_device_train_batch_size=None, training__gradient_accumulation_steps=None)
    assert (config_dir / "deepspeed_zero3.json").exists()
    revalidate(config_dir)
    zero = json.loads((config_dir / "deepspeed_zero3.json").read_text())["zero_optimization"]
    assert zero["stage"] == 3 and zero["stage3_gather_16bit_weights_on_model_save"] is True


def test_sharding_stage_is_the_memory_recommendation(cli, tmp_path):
    """The per-scale contract: the renderer takes memory.recommend()'s ZeRO stage as-is. LoRA on 8 GPUs keeps only
    adapter states, so the recommendation is plain DDP: no DeepSpeed config is rendered."""
    from finetune.hardware import resolve_hardware
    from finetune.memory.estimate import Knobs
    from finetune.memory.recommend import recommend
    from finetune.models import load_model_info
    from finetune.spec import HardwareSpec

    hw = resolve_hardware(HardwareSpec(profile="h100-80gb", gpus=8))
    rec = recommend(load_model_info(HUB_MODEL), hw, "lora", Knobs(max_prompt_length=64, max_completion_length=16))
    config_dir = _render(cli, tmp_path, "lora8", method="lora", hardware={"profile": "h100-80gb", "gpus": 8})
    acc = yaml.safe_load((config_dir / "accelerate.yaml").read_text())
    if rec.zero_stage == 0:
        assert acc["distributed_type"] == "MULTI_GPU" and not list(config_dir.glob("deepspeed_zero*.json"))
        assert "plain DDP" in (config_dir / "BRIEF.md").read_text()
    else:
        assert acc["distributed_type"] == "DEEPSPEED" and (config_dir / f"deepspeed_zero{rec.zero_stage}.json").exists()
    revalidate(config_dir)


def test_cpu_target_has_no_vllm(cli, tmp_path):
    config_dir = _render(cli, tmp_path, "cpu", hardware={"profile": "cpu", "gpus": 0})
    cfg = yaml.safe_load((config_dir / "grpo_config.yaml").read_text())
    assert cfg["use_vllm"] is False and cfg["use_cpu"] is True and cfg["bf16"] is False
    revalidate(config_dir)


def test_several_gpus_with_vllm_colocated(cli, tmp_path):
    config_dir = _render(cli, tmp_path, "coloc", hardware={"profile": "a100-80gb", "gpus": 4, "vllm_gpus": 0})
    cfg = yaml.safe_load((config_dir / "grpo_config.yaml").read_text())
    assert cfg["vllm_mode"] == "colocate" and "vllm_server_host" not in cfg
    assert "--num_processes 4" in (config_dir / "launch.sh").read_text()
    revalidate(config_dir)


def test_qlora_on_a_24gb_card(cli, tmp_path):
    config_dir = _render(cli, tmp_path, "qlora", model="Qwen/Qwen3-8B", method="qlora",
                         hardware={"profile": "rtx-4090-24gb", "gpus": 1},
                         training__per_device_train_batch_size=None, training__gradient_accumulation_steps=None)
    revalidate(config_dir)
    cfg = yaml.safe_load((config_dir / "grpo_config.yaml").read_text())
    assert cfg["load_in_4bit"] is True and cfg["use_peft"] is True
    assert "BitsAndBytesConfig(load_in_4bit=True" in (config_dir / "train.py").read_text()


def test_memory_sizes_the_placement_config_render_lays_out_on_two_nodes(cli, tmp_path):
    """Two nodes: render makes node 0 the generation node and trains on node 1 only (8 processes). The standalone
    `finetune memory` must size that placement too, not 15 training GPUs (ZeRO shards over 15 would understate
    the optimizer states per GPU by about half)."""
    spec = write_run(tmp_path / "r", HUB_MODEL, hardware={"profile": "h100-80gb", "gpus": 8, "nodes": 2})
    mem = cli("memory", spec, "--json")
    assert mem.code == 0, mem
    data = json.loads(mem.out)
    rec, est = data["recommendation"], data["estimate"]
    assert rec["training_processes"] == 8 and rec["vllm_gpus"] == 8 and est["settings"]["vllm_gpus"] == 8
    assert cli("config", "render", spec, "--no-gate").code == 0
    brief = (spec.parent / "config" / "BRIEF.md").read_text()
    assert f"during training: **{est['training_peak_gib']:.1f} GiB**" in brief and "node 1 trains (8 processes)" in brief
    assert est["layout"]["training_processes"] == 8 and est["binding_moment"] in ("load", "sync", "step")
    accelerate = yaml.safe_load((spec.parent / "config" / "accelerate.yaml").read_text())
    assert accelerate["num_processes"] == rec["training_processes"]
    bad = cli("memory", spec, "--vllm-gpus", "3")
    assert bad.code == 2 and "generation node" in bad.err and bad.err.count("\n") == 1


def test_qlora_under_zero3_renders_the_quant_storage(tmp_path):
    """Whenever a layout puts QLoRA under ZeRO-3, train.py's BitsAndBytesConfig carries bnb_4bit_quant_storage
    (PEFT's QLoRA + ZeRO-3 guide: DeepSpeed cannot partition packed 4-bit weights otherwise) and BRIEF.md says why;
    without ZeRO-3 it is left out."""
    from finetune.config.build import build_plan
    from finetune.config.render import render_files
    from finetune.placement import arrange
    from finetune.spec import load_spec

    spec = write_run(tmp_path / "r", HUB_MODEL, method="qlora", hardware={"profile": "a100-40gb", "gpus": 4,
                                                                          "vllm_gpus": 0})
    plan = build_plan(load_spec(spec), spec.parent, no_gate=True)
    assert plan.topology.quant_storage is None and "bnb_4bit_quant_storage" not in render_files(plan)["train.py"]
    plan.topology = arrange(plan.model_info, plan.hardware, "qlora", plan.topology.request().pinned(zero_stage=3))
    plan.zero_stage = plan.topology.zero_stage
    files = render_files(plan)
    assert "bnb_4bit_quant_storage=torch.bfloat16)" in files["train.py"]
    ast.parse(files["train.py"])
    assert "`bnb_4bit_quant_storage=bfloat16`" in files["BRIEF.md"] and "deepspeed_zero3.json" in files


@pytest.mark.slow  # one config render with the environment's tool schemas measured (~20 s on a shared box)
def test_trl_grpo_claimed_only_where_trls_script_can_run_the_config(cli, tmp_path):
    """TRL's `trl grpo` (trl/scripts/grpo.py, main) builds GRPOTrainer without environment_factory: for a spec
    with an environment, grpo_config.yaml and BRIEF.md send the person to train.py instead of claiming it."""
    from finetune.demo import tools as demo_tools

    assert "trl grpo --config config/grpo_config.yaml" in (GOLDEN / "h100-1gpu" / "grpo_config.yaml").read_text()
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "env.py").write_text(demo_tools.ENV_SOURCE)
    config_dir = _render(cli, tmp_path, "env", environment={"file": "env.py", "class": demo_tools.ENV_CLASS},
                         rewards=[{"name": "solved", "type": "environment"}],
                         dataset__system_prompt="Use the add tool.", dataset__answer_column=None,
                         generation__max_prompt_length=512)
    grpo = (config_dir / "grpo_config.yaml").read_text()
    assert "trl grpo --config" not in grpo and "NOT for TRL's own CLI" in grpo and "config/train.py" in grpo
    assert "for `trl grpo --config`" not in (config_dir / "BRIEF.md").read_text()
    assert "environment_factory=rewards.environment_factory" in (config_dir / "train.py").read_text()
