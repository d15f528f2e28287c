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

Moments (the layout classes): the smallest real instance of each layout class — LoRA colocated on 1 GPU, QLoRA
on 1 GPU (generating with transformers: vLLM 0.30 cannot load a 4-bit policy), full fine-tuning with `trl vllm-serve` on 2 GPUs — rendered for this box and run through the
rendered ``config/launch.sh --dry-run``: one optimiser step that times each moment (model load, vLLM start, the
first weight sync, the first generation, the step; config/watchdog.py) and records the GPU memory torch's allocator
held in it, printed beside the estimator's figure for that moment and their ratio. A class this box has too few
GPUs for is reported as skipped. (The runs are ungated renders of this script's toy task: the launch gets the
person's override phrase, ``config.UNGATED_OVERRIDE``, from this script.)

    python benchmarks/gpu_check.py                       # on a GPU: the launch, the classes, both models
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
              dry: bool, gpus: int | None = None, method: str | None = None, vllm_gpus: int | None = None) -> Path:
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
    if method:
        spec["method"] = method
    if vllm_gpus is not None:
        spec["hardware"]["vllm_gpus"] = vllm_gpus
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
    env = dict(os.environ, FINETUNE_UNGATED_OVERRIDE=config.UNGATED_OVERRIDE)  # this script's ungated toy render
    res = subprocess.run(command, cwd=spec_path.parent, env=env, capture_output=True, text=True,
                         timeout=args.launch_timeout)
    row.update(seconds=round(time.perf_counter() - started, 1), rc=res.returncode,
               steps=_steps_done(spec_path.parent))
    if res.returncode != 0 or row["steps"] < args.steps:
        raise RuntimeError(f"launch.sh exit {res.returncode}, {row['steps']} step(s): "
                           + (res.stderr or res.stdout)[-600:])
    return row


# The smallest real instance of each layout class: name, method, GPUs (and server GPUs) it needs.
LAYOUT_CLASSES = (
    {"name": "lora-colocate", "method": "lora", "gpus": 1, "mode": "colocate"},
    # QLoRA generates with transformers: vLLM 0.30 has no bitsandbytes (finetune.placement.layout.QLORA_VLLM)
    {"name": "qlora-generate", "method": "qlora", "gpus": 1, "mode": None},
    {"name": "full-server", "method": "full", "gpus": 2, "vllm_gpus": 1, "mode": "server"},
)
MOMENTS = ("model_load", "vllm_start", "weight_sync", "generation", "step")


def estimate_moments(est) -> dict[str, float | None]:
    """The estimate of each moment as torch's allocator sees it (no CUDA context), from the estimator's own moments
    (``Estimate.moments``, finetune.memory.moments): the policy as loaded; with a colocated engine's share at its
    start; the weight sync; the generation and training peaks. None where nothing sizes the moment."""
    ctx, by = _context(est), {m.key: m.gib for m in est.moments}
    share = est.vllm.share_gib if est.vllm is not None and est.vllm.mode == "colocate" else 0.0
    return {"model_load": by["load"] - share - ctx, "vllm_start": by["load"] - ctx if share else None,
            "weight_sync": by["sync"] - ctx if "sync" in by else None,
            "generation": est.generation_peak_gib - ctx, "step": est.training_peak_gib - ctx}


def _context(est) -> float:
    return sum(c.gib for c in est.components if c.phase == "context")


def moment_rows(record: dict, estimate: dict[str, float | None]) -> dict[str, dict]:
    """Per moment of a dry run (train/dryrun.json): seconds, measured peak, estimate and measured / estimate."""
    out = {}
    for m in MOMENTS:
        seconds, measured, est = record["moments"].get(m), record.get("peak_allocated_gib", {}).get(m), estimate.get(m)
        if seconds is None and measured is None:
            continue
        out[m] = {"seconds": seconds, "measured_gib": measured, "estimate_gib": None if est is None else round(est, 3),
                  "ratio": round(measured / est, 3) if measured is not None and est else None}
    return out


def run_layout_class(cls: dict, work: Path, args: argparse.Namespace, box: tuple[str, int]) -> dict:
    """Render one layout class for this box and run its launch.sh --dry-run; the moments beside the estimate."""
    import subprocess

    from finetune.config import build as config
    from finetune.spec import load_spec

    profile, count = box
    row: dict = {"model": LAUNCH_MODEL, "class": cls["name"], "profile": profile}
    if not args.dry and count < cls["gpus"]:
        row["skipped"] = f"needs {cls['gpus']} GPUs, this box has {count}"
        return row
    model_dir: Path | str = LAUNCH_MODEL
    if not args.dry:
        model_dir = work / "model"
        build_model(LAUNCH_MODEL, model_dir, dry=False)
        from finetune.tinymodel import build_tokenizer

        build_tokenizer().save_pretrained(model_dir)
    spec_path = write_run(work / "run", model_dir, profile=profile, prompt_len=args.prompt_len,
                          completion_len=args.completion_len, dry=False, gpus=cls["gpus"], method=cls["method"],
                          vllm_gpus=cls.get("vllm_gpus"))
    plan = config.build_plan(load_spec(spec_path), spec_path.parent, no_gate=True)
    row.update(layout=layout_of(plan), method=plan.kwargs["_method"].value, estimate_gib=estimate_moments(plan.estimate))
    if plan.topology.vllm_mode != cls["mode"] or row["method"] != cls["method"]:
        raise RuntimeError(f"rendered {row['method']} / {plan.topology.vllm_mode}, not the class's "
                           f"{cls['method']} / {cls['mode']}")
    from finetune.cli import main as finetune

    if finetune(["config", "render", str(spec_path), "--no-gate"]) != 0:
        raise RuntimeError("finetune config render failed")
    row["command"] = "bash config/launch.sh --dry-run"
    if args.dry:  # no GPU: rendered and sized, not run
        return row
    env = dict(os.environ, FINETUNE_UNGATED_OVERRIDE=config.UNGATED_OVERRIDE)
    res = subprocess.run(["bash", "config/launch.sh", "--dry-run"], cwd=spec_path.parent, env=env,
                         capture_output=True, text=True, timeout=args.launch_timeout)
    record_path = spec_path.parent / "train" / "dryrun.json"
    if res.returncode != 0 or not record_path.is_file():
        raise RuntimeError(f"launch.sh --dry-run exit {res.returncode}: " + (res.stderr or res.stdout)[-600:])
    record = json.loads(record_path.read_text())
    row.update(moments=moment_rows(record, row["estimate_gib"]), attention=record.get("attention"))
    return row


def print_moments(rows: list[dict]) -> None:
    classes = [r for r in rows if "class" in r]
    if not classes:
        return
    print("\n| class | layout | moment | seconds | measured GiB (allocator peak) | estimate GiB | ratio |")
    print("|---|---|---|---:|---:|---:|---:|")
    for r in classes:
        lay = r.get("layout") or {}
        where = f"{lay.get('mode') or 'transformers'} ×{lay.get('gpus')}" if lay else "—"
        if "skipped" in r or "error" in r:
            print(f"| {r['class']} | {where} | — | — | — | — | {r.get('skipped') or r.get('error')} |")
            continue
        moments = r.get("moments") or {m: {"seconds": None, "measured_gib": None, "estimate_gib": e, "ratio": None}
                                       for m, e in r["estimate_gib"].items()}
        for m, v in moments.items():
            def cell(x, fmt="{:.2f}"):
                return "n/a" if x is None else fmt.format(x)
            print(f"| {r['class']} | {where} | {m} | {cell(v['seconds'], '{:.1f}')} | {cell(v['measured_gib'])} | "
                  f"{cell(v['estimate_gib'])} | {cell(v['ratio'])} |")
    print("\nmeasured = torch.cuda.max_memory_allocated within the moment (config/watchdog.py, dry run); estimate = "
          "the estimator's figure for it, allocator view; n/a: not run here or not sized by the estimator.")


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
        if r.get("launch") or "tier" in r or "class" in r:
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
    p.add_argument("--no-classes", action="store_true", help="skip the layout classes' dry runs")
    args = p.parse_args(argv)
    args.steps = args.steps or (1 if args.dry else 2)
    args.prompt_len = args.prompt_len or (32 if args.dry else 128)
    args.completion_len = args.completion_len or (16 if args.dry else 512)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    cwd, rows = Path.cwd(), []
    jobs: list[tuple[str, object]] = [("launch", None)] if not args.no_launch else []
    box = ("h100-80gb", 8) if args.dry else detect_box()
    jobs += [("class", cls) for cls in LAYOUT_CLASSES] if not args.no_classes else []
    jobs += [("memory", hub_id) for hub_id in args.models]
    for kind, job in jobs:
        with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
            try:
                rows.append(run_launch(Path(tmp), args) if kind == "launch" else
                            run_layout_class(job, Path(tmp), args, box) if kind == "class" else  # type: ignore[arg-type]
                            run_model(str(job), Path(tmp), args))
            except Exception as exc:  # noqa: BLE001 - report every job, then fail
                traceback.print_exc()
                rows.append({"model": job if isinstance(job, str) else LAUNCH_MODEL, "launch": kind == "launch",
                             **({"class": job["name"]} if isinstance(job, dict) else {}),
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
    print_moments(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
