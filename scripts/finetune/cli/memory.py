"""`finetune memory SPEC | --model M ...`: GPU memory for a run spec or a model, the recommended settings with
their reasons, and RUN/memory.md (finetune.memory; SFT / DPO steps: finetune.memory_trainers)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from finetune import rundir
from finetune.cli.argtypes import count, real  # every numeric option range-checked: bad → one line, exit 2
from finetune.errors import UserError
from finetune.hardware import PROFILES, resolve_hardware
from finetune.memory.formulas import METHODS, OPTIMIZERS, VLLM_MODES
from finetune.memory.recommend import Recommendation
from finetune.memory.result import Estimate
from finetune.memory.run import estimate_for_model, estimate_for_spec, write_memory_md

# Options that fix a training setting instead of letting the recommendation choose it.
_EXPLICIT = ("per_device_train_batch_size", "gradient_accumulation_steps", "use_vllm", "vllm_mode",
             "vllm_gpu_memory_utilization", "vllm_enable_sleep_mode", "vllm_tensor_parallel_size",
             "gradient_checkpointing", "optimizer", "zero_stage")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`finetune memory SPEC | --model M [--profile P] [--gpus N] [--method X] ...`."""
    parser.add_argument("spec", nargs="?", help="run spec (spec.yaml) or run directory; writes memory.md there")
    parser.add_argument("--model", help="hub id (HF cache, bundled config, or config.json alone from the hub) or local "
                        "model folder, instead of a spec")
    parser.add_argument("--model-config", help="config.json for a model that is not bundled")
    parser.add_argument("--profile", help="hardware profile: " + ", ".join(PROFILES))
    parser.add_argument("--gpus", type=count(1, 1024), help="GPUs per node")
    parser.add_argument("--nodes", type=count(1, 4096))
    parser.add_argument("--gpu-memory-gib", type=real(0, 16384, above=True),
                        help="override the profile's per-GPU memory")
    parser.add_argument("--vllm-gpus", type=count(0, 1024), help="GPUs given to `trl vllm-serve` (server mode)")
    parser.add_argument("--method", choices=METHODS)
    parser.add_argument("--batch", type=count(1, 65536), dest="per_device_train_batch_size",
                        help="per_device_train_batch_size")
    parser.add_argument("--accumulation", type=count(1, 65536), dest="gradient_accumulation_steps")
    parser.add_argument("--num-generations", type=count(2, 4096), help="completions per prompt (GRPO needs ≥ 2)")
    parser.add_argument("--max-prompt-length", type=count(1, 1 << 22))
    parser.add_argument("--max-completion-length", type=count(1, 1 << 22))
    parser.add_argument("--beta", type=real(0, 1e6))
    parser.add_argument("--vllm", dest="use_vllm", action=argparse.BooleanOptionalAction, default=None)
    parser.add_argument("--vllm-mode", choices=VLLM_MODES)
    parser.add_argument("--vllm-util", type=real(0, 1, above=True), dest="vllm_gpu_memory_utilization")
    parser.add_argument("--sleep-mode", dest="vllm_enable_sleep_mode", action=argparse.BooleanOptionalAction,
                        default=None)
    parser.add_argument("--tp", type=count(1, 1024), dest="vllm_tensor_parallel_size", help="vLLM tensor-parallel size")
    parser.add_argument("--gradient-checkpointing", action=argparse.BooleanOptionalAction, default=None)
    parser.add_argument("--optimizer", choices=OPTIMIZERS)
    parser.add_argument("--zero", type=int, choices=(0, 2, 3), dest="zero_stage")
    parser.add_argument("--lora-r", type=count(1, 65536))
    parser.add_argument("--target-modules", type=_target_modules, metavar="all-linear|NAME,NAME",
                        help="LoRA target_modules: all-linear, or module names / dotted suffixes separated by commas "
                             "(q_proj,v_proj); a regex goes in the spec's lora.target_modules")
    parser.add_argument("-o", "--out", help="run directory for memory.md (default: the spec's folder)")
    parser.add_argument("--json", action="store_true", help="print the estimate as JSON")
    parser.add_argument("--trainer", choices=("grpo", "sft", "dpo"), default="grpo",
                        help="grpo (default: generation, vLLM, reference model); sft / dpo: no generation "
                             "(finetune.memory_trainers; needs --model)")
    parser.add_argument("--seq-len", type=count(1, 1 << 22), default=2048, help="sft / dpo: tokens per sequence")


def _target_modules(value: str) -> str | list[str]:
    """--target-modules: PEFT's shorthand, or a comma-separated list of module names (argparse type)."""
    if value.strip().lower() == "all-linear":
        return value.strip()
    names = [n.strip() for n in value.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"{value!r}: an empty module name (write q_proj,v_proj or all-linear)")
    return names


def _for_spec(args: argparse.Namespace, explicit: dict[str, Any], hw_overrides: dict[str, Any]
              ) -> tuple[Recommendation, Estimate, str, Path]:
    from finetune.spec import load_spec

    spec_path, out_dir = rundir.resolve(args.spec, args.out)
    if spec_path is None:
        raise UserError(f"no {rundir.SPEC} in {args.spec}", where=str(args.spec), fix="pass the run spec")
    spec = load_spec(spec_path)
    hw = spec.hardware.model_dump()
    hw.update({k: v for k, v in hw_overrides.items() if v is not None})
    if args.lora_r:
        spec.lora.r = args.lora_r
    if args.target_modules:
        spec.lora.target_modules = args.target_modules
    spec.hardware = type(spec.hardware).model_validate(hw)
    if args.model_config:
        spec.model_config_path = args.model_config
    rec, est = estimate_for_spec(spec, method=args.method, num_generations=args.num_generations,
                                 max_prompt_length=args.max_prompt_length,
                                 max_completion_length=args.max_completion_length, beta=args.beta, **explicit)
    return rec, est, f"GPU memory estimate — {spec.name}", out_dir


def _for_model(args: argparse.Namespace, explicit: dict[str, Any], hw_overrides: dict[str, Any]
               ) -> tuple[Recommendation, Estimate, str]:
    from finetune.models import load_model_info

    model = load_model_info(args.model, args.model_config)
    hardware = resolve_hardware({k: v for k, v in hw_overrides.items() if v is not None})
    rec, est = estimate_for_model(model, hardware, method=args.method, num_generations=args.num_generations,
                                  max_prompt_length=args.max_prompt_length,
                                  max_completion_length=args.max_completion_length, beta=args.beta,
                                  lora_r=args.lora_r, lora_target_modules=args.target_modules, **explicit)
    return rec, est, f"GPU memory estimate — {model.name}"


def run(args: argparse.Namespace) -> int:
    if args.trainer != "grpo":  # SFT / DPO: no generation engine to size (finetune.memory_trainers)
        return _run_trainer(args)
    if bool(args.spec) == bool(args.model):
        raise UserError("give a run spec or --model (one of them)", where="finetune memory",
                        fix="`finetune memory runs/x/spec.yaml` or `finetune memory --model Qwen/Qwen2.5-7B`")
    explicit = {k: getattr(args, k) for k in _EXPLICIT}
    hw_overrides = {"profile": args.profile, "gpus": args.gpus, "nodes": args.nodes,
                    "gpu_memory_gib": args.gpu_memory_gib, "vllm_gpus": args.vllm_gpus}
    out_dir: str | Path | None = None
    if args.spec:
        rec, est, title, out_dir = _for_spec(args, explicit, hw_overrides)
    else:
        if args.out:
            out_dir = args.out
        rec, est, title = _for_model(args, explicit, hw_overrides)
    if args.json:
        print(json.dumps({"estimate": est.to_dict(), "recommendation": rec.as_dict()}, indent=2, default=str))
    else:
        _print_estimate(est, rec)
    if out_dir is not None:
        path = write_memory_md(out_dir, title, est, rec)
        if not args.json:
            print(f"wrote {path}")
    return 0


def _run_trainer(args: argparse.Namespace) -> int:
    """`finetune memory --model M --trainer sft|dpo [--method X] [--seq-len N] [--batch B] [--lora-r R]
    [--target-modules q_proj,v_proj] [--profile P --gpus N --nodes K --zero S]`."""
    from finetune.memory_trainers import estimate_step
    from finetune.models import load_model_info
    from finetune.placement import Request, arrange

    if not args.model or args.spec:
        raise UserError(f"--trainer {args.trainer} sizes a model, not a GRPO run spec", where="finetune memory",
                        fix=f"`finetune memory --model M --trainer {args.trainer} --method qlora`")
    info = load_model_info(args.model, args.model_config)
    method = args.method or "lora"
    hardware = resolve_hardware({"profile": args.profile, "gpus": args.gpus, "nodes": args.nodes,
                                 "gpu_memory_gib": args.gpu_memory_gib})
    layout = arrange(info, hardware, method, Request(use_vllm=False, zero_stage=args.zero_stage))
    est = estimate_step(info, args.trainer, method, seq_len=args.seq_len,
                        batch=args.per_device_train_batch_size or 1, lora_r=args.lora_r or 16,
                        lora_target_modules=args.target_modules or "all-linear", where="--target-modules",
                        checkpointing=args.gradient_checkpointing is not False, layout=layout)
    mem = hardware.memory_gib
    verdict = "fits" if est.peak / 2**30 <= mem else "does not fit"
    if args.json:
        print(json.dumps({"trainer": est.trainer, "method": est.method, "peak_bytes": est.peak,
                          "load_bytes": est.load, "step_bytes": est.step, "components": est.components,
                          "reasons": est.reasons, "training_processes": layout.training_processes,
                          "zero_stage": layout.zero_stage, "memory_gib": mem, "verdict": verdict}, indent=2))
        return 0
    print(f"{args.model}: {est.trainer.upper()} ({est.method}), {args.seq_len} tokens × "
          f"{args.per_device_train_batch_size or 1} sequence(s) per micro-batch — no generation, no vLLM, no KV cache")
    for name, n in est.components.items():
        print(f"  {name:<12} {n / 2**30:8.2f} GiB  {est.reasons[name]}")
    where = (f"{layout.training_processes} processes, ZeRO-{layout.zero_stage}" if layout.zero_stage else
             f"{layout.training_processes} process(es), no sharding")
    if est.load:
        print(f"  {'load':<12} {est.load / 2**30:8.2f} GiB  {est.load_reason}")
    print(f"  {'peak':<12} {est.peak / 2**30:8.2f} GiB per GPU ({where}) — {verdict} on {hardware.describe()}")
    return 0


def _print_moments(console: Any, est: Estimate) -> None:
    """Every moment of start-up and the step against its limit; the binding one in bold."""
    from rich.table import Table

    if not est.moments:
        return
    lay = est.layout
    table = Table(title="moments" + (f" — layout: {lay.reason}" if lay else ""))
    for column in ("moment", "GiB", "limit", "share", "what is held"):
        table.add_column(column, justify="right" if column in ("GiB", "limit", "share") else "left",
                         overflow="fold")
    for m in est.moments:
        style = "bold" if m is est.binding else ""
        table.add_row(m.title, f"{m.gib:.1f}", f"{m.limit_gib:.1f}", f"{100 * m.ratio:.0f}%", m.detail, style=style)
    console.print(table)
    b = est.binding
    if b is not None:
        console.print(f"binding moment: {b.title} ({b.gib:.1f} of {b.limit_gib:.1f} GiB)", soft_wrap=True)


def _print_estimate(est: Estimate, rec: Recommendation) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    s = est.settings
    table = Table(title=f"{est.model.name} on {est.hardware.describe()} — method {s['method']}, "
                        f"batch {s['per_device_train_batch_size']} × {s['gradient_accumulation_steps']}")
    table.add_column("component (per training GPU)")
    table.add_column("GiB", justify="right")
    table.add_column("held")
    table.add_column("formula", overflow="fold")
    for c in est.components:
        table.add_row(c.label, f"{c.gib:.2f}", c.phase, c.formula)
    table.add_section()
    table.add_row("peak during generation", f"{est.generation_peak_gib:.2f}", "", "")
    table.add_row("peak during training", f"{est.training_peak_gib:.2f}", "", "")
    console.print(table)
    _print_moments(console, est)
    from finetune.models import config_origin

    console.print(config_origin(est.model), soft_wrap=True)
    colour = {"fits": "green", "tight": "yellow"}.get(est.verdict, "red")
    console.print(f"[bold {colour}]{est.verdict}[/]: peak {est.total_gib:.1f} GiB of {est.memory_gib:.1f} GiB per GPU")
    for p in est.problems:
        console.print(f"[red]✗[/] {p}")
    for w in est.warnings:
        console.print(f"[yellow]⚠[/] {w}")
    for sug in est.suggestions:
        console.print(f"  → {sug.action}: saves {sug.saves_gib:.1f} GiB (peak {sug.total_after_gib:.1f}"
                      f"{', fits' if sug.fits_after else ''})")
    rtable = Table(title="recommended (finetune.memory.recommend)")
    rtable.add_column("keyword")
    rtable.add_column("value")
    rtable.add_column("why", overflow="fold")
    values = rec.as_dict()
    for key, why in rec.reasons.items():
        rtable.add_row(key, str(values.get(key, "")), why)
    console.print(rtable)
