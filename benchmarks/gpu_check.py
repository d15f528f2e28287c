"""GPU check: the rendered layout launched on this box, and measured peak memory beside finetune.memory's estimate.

Launch (first): renders a run for THIS box (its GPU count and the nearest hardware profile, one node), prints
the vLLM layout the renderer chose for it (colocate on one GPU; `trl vllm-serve` TP × DP + training GPUs on
several) and runs the rendered ``config/launch.sh --max-steps N`` — the very files a user runs — for a few
optimiser steps on Qwen2.5-0.5B (random weights, 14 / 2 heads). When the vLLM CPU test tier is present
(``tests/vllm/``) it runs next, with ``FINETUNE_GPU_LAYOUT`` (the layout as JSON) in its environment.
With ``--dry`` (no GPU) the layout is rendered for ``--gpus`` (default 8) H100s and the launch is not run.

Memory:

For Qwen2.5-0.5B and Qwen2.5-1.5B (bundled configs, random weights: memory does not depend on weight
values, so nothing is downloaded) this writes a run directory, renders it with `finetune config render`'s
own plan (per-scale values from memory.recommend() for the chosen profile, 1 GPU), and runs that
config's GRPOConfig for a few real GRPO steps — colocated vLLM when vllm is installed, else transformers
generation. Around TRL 1.16's ``_generate_and_score_completions`` and the rest of ``training_step`` it
records ``torch.cuda.max_memory_allocated`` and prints it per phase beside the estimator's figure for
the same phase as torch's allocator sees it (``Estimate.components`` without the CUDA context and the
vLLM engine pool, re-estimated for the generation backend actually used) and their ratio.

    python benchmarks/gpu_check.py                       # on a GPU: the launch, then both models, 2 steps each
    python benchmarks/gpu_check.py --dry                 # CPU path (CI): layout for 8 GPUs, shrunk models, 1 step
    python benchmarks/gpu_check.py --profile h200-141gb --models Qwen/Qwen2.5-0.5B --steps 3

Exit 0 when the launch and every model ran; 1 when one failed (its error is printed). ``--json FILE`` writes
the rows (the launch row first).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

MODELS = ("Qwen/Qwen2.5-0.5B", "Qwen/Qwen2.5-1.5B")
LAUNCH_MODEL = "Qwen/Qwen2.5-0.5B"  # 14 / 2 heads: vLLM allows TP 1, 2 or 14
GIB = 2**30
ROWS = [{"prompt": f"What is {a} plus {b}? Answer in <answer></answer>.", "answer": str(a + b)}
        for a in range(1, 13) for b in range(1, 13)]


def build_model(hub_id: str, out: Path, *, dry: bool) -> None:
    """Random weights from the bundled config (shrunk to 2 layers for --dry), saved with the tiny tokenizer."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from finetune.models import resolve_config_path
    from finetune.tinymodel import build_tokenizer

    config = AutoConfig.from_pretrained(str(resolve_config_path(hub_id).parent))
    if dry:  # the same architecture class and vocabulary, shrunk so a CPU step takes seconds
        config.update({"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
                       "num_key_value_heads": 2, "max_window_layers": 2})
        if getattr(config, "layer_types", None):
            config.layer_types = config.layer_types[:2]
    tokenizer = build_tokenizer()
    # ids of the tiny tokenizer lie inside the model's vocabulary; its eos ends a completion, which a
    # random model almost never samples: completions run to max_completion_length (the estimator's case)
    config.pad_token_id, config.eos_token_id, config.bos_token_id = tokenizer.pad_token_id, tokenizer.eos_token_id, None
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32 if dry else torch.bfloat16)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(out)
    (out / "gpu_check_model.json").write_text(json.dumps({"from": hub_id, "dry": dry}) + "\n")


def write_run(run: Path, model_dir: Path | str, *, profile: str, prompt_len: int, completion_len: int,
              dry: bool, gpus: int | None = None) -> Path:
    run.mkdir(parents=True, exist_ok=True)
    (run / "data").mkdir(exist_ok=True)
    (run / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    spec = {
        "name": f"gpu-check-{Path(model_dir).name}", "model": str(model_dir),
        "dataset": {"path": "data/train.jsonl", "prompt_column": "prompt", "answer_column": "answer"},
        "rewards": [{"name": "format_ok", "type": "format", "pattern": "answer_tag", "weight": 0.2},
                    {"name": "correct", "type": "exact_match", "answer_column": "answer", "extract": "answer_tag",
                     "weight": 1.0}],
        "hardware": {"profile": profile, "gpus": gpus if gpus is not None else 0 if profile == "cpu" else 1, "nodes": 1},
        "generation": {"max_prompt_length": prompt_len, "max_completion_length": completion_len},
        "training": {"logging_steps": 1, "warmup_steps": 0},
    }
    if dry:  # one group of 8 completions per step (per-scale values are the GPU path's subject)
        spec["training"].update(per_device_train_batch_size=8, gradient_accumulation_steps=1)
    path = run / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    from finetune.rewards.render import render_rewards
    from finetune.spec import load_spec

    render_rewards(load_spec(path), run)
    return path


class PhaseMeter:
    """Peak allocated memory and wall time per phase, measured around the trainer's own methods."""

    def __init__(self, cuda: bool):
        self.cuda = cuda
        self.peak = {"generation": 0.0, "training": 0.0}
        self.calls = {"generation": 0, "training": 0}
        self.seconds = {"generation": 0.0, "training": 0.0}

    def _reset(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()

    def _peak(self, phase: str) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize()
            self.peak[phase] = max(self.peak[phase], torch.cuda.max_memory_allocated() / GIB)

    def _record(self, phase: str, started: float) -> None:
        self._peak(phase)
        self.calls[phase] += 1
        self.seconds[phase] += time.perf_counter() - started

    def attach(self, trainer) -> None:
        generate, step = trainer._generate_and_score_completions, trainer.training_step

        def generate_measured(*args, **kwargs):
            self._peak("training")  # what the step held before generation started
            self._reset()
            started = time.perf_counter()
            out = generate(*args, **kwargs)
            self._record("generation", started)
            self._reset()
            self._t = time.perf_counter()
            return out

        def step_measured(*args, **kwargs):
            self._reset()
            self._t = time.perf_counter()
            out = step(*args, **kwargs)
            self._record("training", self._t)
            return out

        trainer._generate_and_score_completions = generate_measured
        trainer.training_step = step_measured


def _vllm_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def run_model(hub_id: str, work: Path, args: argparse.Namespace) -> dict:
    import torch

    from finetune.config import build as config
    from finetune.spec import load_spec
    from finetune.tinymodel import build_tokenizer

    cuda = torch.cuda.is_available() and not args.dry
    model_dir = work / "model"
    build_model(hub_id, model_dir, dry=args.dry)
    spec_path = write_run(work / "run", model_dir, profile="cpu" if args.dry else args.profile,
                          prompt_len=args.prompt_len, completion_len=args.completion_len, dry=args.dry)
    spec = load_spec(spec_path)
    plan = config.build_plan(spec, spec_path.parent, no_gate=True)
    kwargs = config.grpo_kwargs(plan)
    use_vllm = bool(kwargs.get("use_vllm")) and _vllm_installed() and cuda
    from finetune.placement import arrange

    # without vLLM here the run generates with transformers: placement lays that out (same processes, ZeRO stage)
    topo = plan.topology if use_vllm else arrange(plan.model_info, plan.hardware, plan.topology.method,
                                                  plan.topology.request().pinned(use_vllm=False))
    if not use_vllm:
        kwargs["use_vllm"] = False
        for k in [k for k in kwargs if k.startswith("vllm_")]:
            kwargs.pop(k)
    if not cuda:
        kwargs = config.cpu_safe(kwargs, 1)
    est = config._estimate(plan.model_info, spec, plan.kwargs, topo)
    kwargs.update(output_dir=str(work / "run" / "train"), max_steps=args.steps, save_strategy="no",
                  report_to="none", log_completions=False)

    os.chdir(work / "run")
    sys.path.insert(0, str(work / "run"))
    import importlib

    rewards = importlib.import_module("rewards")
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    trainer = GRPOTrainer(model=str(model_dir), args=GRPOConfig(**kwargs), reward_funcs=rewards.REWARD_FUNCS,
                          train_dataset=Dataset.from_list(ROWS), processing_class=build_tokenizer())
    meter = PhaseMeter(cuda)
    meter.attach(trainer)
    started = time.perf_counter()
    trainer.train()
    sys.path.remove(str(work / "run"))
    del sys.modules["rewards"]
    resident = sum(c.gib for c in est.components if c.phase == "resident")
    estimate = {
        "generation": resident + sum(c.gib for c in est.components if c.phase == "generation" and c.key != "vllm"),
        "training": resident + sum(c.gib for c in est.components if c.phase == "training"),
    }
    return {"model": hub_id, "dry": args.dry, "cuda": cuda, "generation_backend": "vllm colocate" if use_vllm
            else "transformers", "profile": plan.hardware.profile.name, "steps": trainer.state.global_step,
            "batch": {k: kwargs.get(k) for k in ("per_device_train_batch_size", "gradient_accumulation_steps",
                                                 "num_generations", "max_completion_length")},
            "seconds": round(time.perf_counter() - started, 1),
            "phases": {p: {"measured_gib": round(meter.peak[p], 3) if cuda else None,
                           "estimate_gib": round(estimate[p], 3), "calls": meter.calls[p],
                           "seconds": round(meter.seconds[p], 1),
                           "ratio": round(meter.peak[p] / estimate[p], 3) if cuda and estimate[p] else None}
                       for p in ("generation", "training")},
            "estimate_peak_gib": round(est.total_gib, 2)}


def detect_box() -> tuple[str, int]:
    """(hardware profile, GPU count) of this machine: the profile whose memory is nearest the smallest GPU's."""
    import torch

    from finetune.hardware import PROFILES

    count = torch.cuda.device_count()
    gib = min(torch.cuda.get_device_properties(i).total_memory for i in range(count)) / GIB
    gpus = [p for p in PROFILES.values() if not p.is_cpu and not p.unified]
    return min(gpus, key=lambda p: abs(p.memory_gib - gib)).name, count


def layout_of(plan) -> dict:
    t = plan.topology
    return {"mode": t.vllm_mode, "gpus": t.gpus_per_node, "vllm_gpus": t.vllm_gpus, "tp": t.vllm_tp, "dp": t.vllm_dp,
            "training_processes": t.training_processes, "zero_stage": t.zero_stage,
            "generation_gpu_ids": list(t.generation_gpu_ids), "training_gpu_ids": list(t.training_gpu_ids),
            "reason": t.reason, "layout_reason": t.layout_reason}


def _steps_done(run: Path) -> int:
    metrics = run / "train" / "metrics.jsonl"
    steps = [json.loads(line).get("step", 0) for line in metrics.read_text().splitlines() if line.strip()] \
        if metrics.is_file() else []
    return max(steps, default=0)


def run_launch(work: Path, args: argparse.Namespace) -> dict:
    """Render a run for this box (or ``--gpus`` H100s with --dry) and run its config/launch.sh for a few steps."""
    import subprocess

    from finetune.config import build as config
    from finetune.spec import load_spec

    profile, gpus = ("h100-80gb", args.gpus or 8) if args.dry else detect_box()
    gpus = args.gpus or gpus
    model_dir: Path | str = LAUNCH_MODEL  # --dry: the bundled config is all a render needs
    if not args.dry:
        model_dir = work / "model"
        build_model(LAUNCH_MODEL, model_dir, dry=False)
        from finetune.tinymodel import build_tokenizer

        build_tokenizer().save_pretrained(model_dir)  # the rendered train.py loads it from the model folder
    spec_path = write_run(work / "run", model_dir, profile=profile, prompt_len=args.prompt_len,
                          completion_len=args.completion_len, dry=False, gpus=gpus)
    plan = config.build_plan(load_spec(spec_path), spec_path.parent, no_gate=True)
    row: dict = {"model": LAUNCH_MODEL, "launch": True, "profile": profile, "layout": layout_of(plan), "steps": 0}
    print(f"layout for {gpus} × {profile}: {plan.topology.reason}" + (f" — {plan.topology.layout_reason}"
          if plan.topology.layout_reason else ""), flush=True)
    from finetune.cli import main as finetune

    if finetune(["config", "render", str(spec_path), "--no-gate"]) != 0:
        raise RuntimeError("finetune config render failed")
    command = ["bash", "config/launch.sh", "--max-steps", str(args.steps)]
    row["command"] = " ".join(command)
    if args.dry:  # no GPU: the rendered launch cannot run here
        return row
    started = time.perf_counter()
    res = subprocess.run(command, cwd=spec_path.parent, capture_output=True, text=True, timeout=args.launch_timeout)
    row.update(seconds=round(time.perf_counter() - started, 1), rc=res.returncode,
               steps=_steps_done(spec_path.parent))
    if res.returncode != 0 or row["steps"] < args.steps:
        raise RuntimeError(f"launch.sh exit {res.returncode}, {row['steps']} step(s): "
                           + (res.stderr or res.stdout)[-600:])
    return row


def run_tier(layout: dict) -> dict:
    """The vLLM test tier (tests/vllm/), when present, on this box with the layout in FINETUNE_GPU_LAYOUT."""
    import subprocess

    tier = ROOT / "tests" / "vllm"
    if not tier.is_dir():
        return {"model": "vLLM tier", "tier": "absent (no tests/vllm/)", "rc": None}
    env = dict(os.environ, FINETUNE_GPU_LAYOUT=json.dumps(layout))
    started = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", str(tier)], cwd=ROOT, env=env, capture_output=True,
                         text=True)
    tail = res.stdout.strip().splitlines()[-1:] or [""]
    return {"model": "vLLM tier", "tier": tail[0], "rc": res.returncode,
            "seconds": round(time.perf_counter() - started, 1)}


def print_table(rows: list[dict]) -> None:
    print("\n| model | backend | steps | phase | calls | measured GiB (max_memory_allocated) | estimate GiB | ratio |")
    print("|---|---|---:|---|---:|---:|---:|---:|")
    for r in rows:
        if r.get("launch") or "tier" in r:
            continue
        if "error" in r:
            print(f"| {r['model']} | — | — | FAILED | — | — | — | {r['error']} |")
            continue
        for phase, p in r["phases"].items():
            measured = f"{p['measured_gib']:.2f}" if p["measured_gib"] is not None else "n/a (no GPU)"
            ratio = f"{p['ratio']:.2f}" if p["ratio"] is not None else "n/a"
            print(f"| {r['model']} | {r['generation_backend']} | {r['steps']} | {phase} | {p['calls']} | {measured} | "
                  f"{p['estimate_gib']:.2f} | {ratio} |")
    print("\nestimate = the estimator's components for that phase as torch's allocator sees them (no CUDA context,"
          " no vLLM engine pool); ratio = measured / estimate.")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dry", action="store_true", help="CPU path for CI: shrunk versions (2 layers, hidden 64), "
                   "no memory figures")
    p.add_argument("--models", nargs="+", default=list(MODELS))
    p.add_argument("--profile", default="h100-80gb", help="hardware profile the config is rendered for (1 GPU)")
    p.add_argument("--steps", type=int, default=None, help="GRPO steps per model (default 2; 1 with --dry)")
    p.add_argument("--prompt-len", type=int, default=None)
    p.add_argument("--completion-len", type=int, default=None)
    p.add_argument("--json", help="write the rows here")
    p.add_argument("--gpus", type=int, default=None, help="GPUs to render the launch for (default: this box's; "
                   "8 with --dry)")
    p.add_argument("--no-launch", action="store_true", help="skip the rendered launch.sh (memory rows only)")
    p.add_argument("--launch-timeout", type=int, default=900, help="seconds the launch may take")
    args = p.parse_args(argv)
    args.steps = args.steps or (1 if args.dry else 2)
    args.prompt_len = args.prompt_len or (32 if args.dry else 128)
    args.completion_len = args.completion_len or (16 if args.dry else 512)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    cwd, rows = Path.cwd(), []
    jobs = [("launch", None)] if not args.no_launch else []
    jobs += [("memory", hub_id) for hub_id in args.models]
    for kind, hub_id in jobs:
        with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
            try:
                rows.append(run_launch(Path(tmp), args) if kind == "launch" else run_model(hub_id, Path(tmp), args))
            except Exception as exc:  # noqa: BLE001 - report every job, then fail
                traceback.print_exc()
                rows.append({"model": hub_id or LAUNCH_MODEL, "launch": kind == "launch",
                             "error": f"{type(exc).__name__}: {exc}".replace("|", "/")[:600]})
            finally:
                os.chdir(cwd)
        print(json.dumps(rows[-1]), flush=True)
    launch = next((r for r in rows if r.get("launch") and "layout" in r), None)
    if launch and not args.dry:
        rows.append(run_tier(launch["layout"]))
        print(json.dumps(rows[-1]), flush=True)
        if rows[-1]["rc"]:
            rows[-1]["error"] = f"vLLM tier exit {rows[-1]['rc']}: {rows[-1]['tier']}"
    print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
