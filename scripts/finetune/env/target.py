"""What a rendered config needs on the machine that trains it: ``config/target.json``.

Written by `finetune config render` beside train.py; read by the standalone checker
(:mod:`finetune.env.check`, rendered as ``config/env_check.py``). Every version comes from this
package's own pins (pyproject.toml: the core dependencies and the ``[train]`` extra), so the check
and the install lines it prints cannot drift from what the plugin is tested with.
"""

from __future__ import annotations

import hashlib
import importlib
from functools import lru_cache
from pathlib import Path
from typing import Any

from finetune import __version__

DIST = "llm-finetuning"
SCHEMA = 1
CHECKER_SOURCE = Path(__file__).with_name("check.py")
# import name where it differs from the distribution name
MODULES = {"math-verify": "math_verify", "pyyaml": "yaml", "latex2sympy2_extended": "latex2sympy2_extended"}
CURL_INSTALL = "sudo apt-get install -y curl  (Debian/Ubuntu; `sudo dnf install -y curl` on RHEL)"


@lru_cache(maxsize=1)
def pins() -> dict[str, str]:
    """Distribution name → specifier ('==1.16.0') for the core pins and the [train] extra."""

    from packaging.requirements import Requirement

    out: dict[str, str] = {}
    for line in _requirement_lines():
        req = Requirement(line)
        marker = str(req.marker or "")
        if marker and 'extra == "train"' not in marker:
            continue
        if str(req.specifier):
            out.setdefault(req.name.lower(), str(req.specifier))
    return out


def _requirement_lines() -> list[str]:
    """pyproject.toml's own lines in a source checkout (never stale), else the installed metadata."""
    from importlib import metadata

    pyproject = Path(__file__).resolve().parents[3] / "pyproject.toml"
    try:
        # imported by name: Python 3.10 has no tomllib (ImportError below), and mypy checks for 3.10
        tomllib = importlib.import_module("tomllib")
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    except (ImportError, OSError, KeyError, ValueError):
        return list(metadata.requires(DIST) or [])
    lines = list(project.get("dependencies", []))
    return lines + [f'{r}; extra == "train"' for r in project.get("optional-dependencies", {}).get("train", [])]


def _package(name: str, why: str, require: str | None = None) -> dict[str, Any]:
    spec = pins().get(name, "") if require is None else require
    return {"name": name, "module": MODULES.get(name, name.replace("-", "_")), "require": spec, "why": why}


def trl_vllm_range() -> str:
    """TRL's own supported vLLM range (its `vllm` extra), e.g. '>=0.22.0,<=0.31.0'."""
    from importlib import metadata

    from packaging.requirements import Requirement

    for line in metadata.requires("trl") or []:
        req = Requirement(line)
        if req.name == "vllm" and 'extra == "vllm"' in str(req.marker or ""):
            return ",".join(sorted(str(s) for s in req.specifier))
    return pins().get("vllm", "")


def build_target(plan: Any) -> dict[str, Any]:
    """The needs of ``plan`` (a finetune.config.plan.RenderPlan) as target.json's dict."""
    from finetune.hardware import gpu_requirements
    from finetune.rewards.render import _requirements

    topo, spec = plan.topology, plan.spec
    packages = [
        _package("torch", "the model and training"),
        _package("trl", "train.py refuses any other TRL: every algorithm field assumes its semantics"),
        _package("transformers", "the TRL release was tested with this one"),
        _package("accelerate", "launches the training processes"),
        _package("datasets", "loads the prompts"),
    ]
    if plan.peft:
        packages.append(_package("peft", f"method {plan.kwargs['_method'].value}"))
    if plan.quantization:
        packages.append(_package("bitsandbytes", "qlora loads the policy in 4 bits", ""))
    if topo.use_vllm:
        vllm = _package("vllm", f"generation ({topo.vllm_mode} mode); TRL {pins().get('trl', '')} supports "
                        "this range", trl_vllm_range())
        vllm["install_require"] = pins().get("vllm", "")  # the [train] pin: resolves with the core pins
        packages.append(vllm)
    if plan.zero_stage:
        packages.append(_package("deepspeed", f"accelerate.yaml uses DeepSpeed ZeRO-{plan.zero_stage}"))
    reward_packages, _ = _requirements(spec.rewards)
    have = {p["name"] for p in packages}
    for requirement in reward_packages:
        name, _, version = requirement.partition("==")
        if name.lower() not in have:
            packages.append(_package(name, "rewards.py imports it", f"=={version}" if version else ""))
    scripts = []
    if topo.vllm_mode == "server":
        scripts.append({"name": "trl", "package": f"trl{pins().get('trl', '')}"})
    if topo.training_processes > 1:
        scripts.append({"name": "accelerate", "package": f"accelerate{pins().get('accelerate', '')}"})
    tools = ([{"name": "curl", "why": "launch.sh polls trl vllm-serve's /health", "install": CURL_INSTALL}]
             if topo.vllm_mode == "server" else [])
    hw = plan.hardware
    return {
        "schema": SCHEMA, "run": spec.name, "rendered_by": f"llm-finetuning {__version__}",
        "summary": topo.reason, "python": {"min": [3, 10]},
        "hardware": {"profile": hw.profile.name, "cpu": topo.cpu, "nodes": topo.nodes,
                     "gpus_per_node": topo.gpus_per_node, "gpu_memory_gib": round(float(hw.memory_gib), 1),
                     # the GPUs `trl vllm-serve` uses (placement's generation ordinals; 0 colocated), the GPU the
                     # profile names (compute capability, the torch arch, the oldest CUDA) and the layout's
                     # training processes per node (the reward sandbox sizes its workers by it)
                     "vllm_gpus": topo.vllm_serving_gpus, "host_cpus": hw.host_cpus,
                     "generation_gpu_ids": list(topo.generation_gpu_ids),
                     "training_gpu_ids": list(topo.training_gpu_ids),
                     "gpu": gpu_requirements(hw.profile), "processes_per_node": topo.processes_per_node},
        "sandbox": sandbox_target(plan),
        "packages": packages, "scripts": scripts, "tools": tools,
        # where train.py finds its inputs (relative to the run directory unless absolute)
        "inputs": {"model": plan.model_ref, "model_is_path": spec.resolve_path(spec.model).exists(),
                   "dataset": plan.dataset["path"]},
    }


def sandbox_target(plan: Any) -> dict[str, Any] | None:
    """The reward sandbox's needs on the training host (None when no rewards_sandbox.py is rendered): the isolation
    its rewards ask for and the CPU sizing of its pools. Workers of a pool whose reward leaves ``workers`` unset are
    sized per training process from the host's CPUs (``check.sandbox_workers``) and reach the pool through
    FINETUNE_SANDBOX_WORKERS, which train.py sets: never through rewards.py, so sizing never voids a gate PASS."""
    from finetune.env.check import ISOLATION_LEVELS, sandbox_workers
    from finetune.rewards.lib import HELPERS
    from finetune.rewards.render import uses_sandbox
    from finetune.sandbox.runner import TOOL_DEFAULTS

    name, source = HELPERS["sandbox"]
    if not (plan.run_dir / name).is_file():
        return None
    topo, rewards = plan.topology, plan.spec.rewards
    levels = {r.name: str(r.min_isolation) for r in rewards if getattr(r, "min_isolation", None)}
    env_file = plan.run_dir / "rewards_env.py"
    tool = env_file.is_file() and uses_sandbox(env_file.read_text(encoding="utf-8"))
    if tool:
        levels["the environment's code tool"] = str(TOOL_DEFAULTS["min_isolation"])
    need = max(levels.values(), key=ISOLATION_LEVELS.index, default="namespaces")
    # a pool per settings: rewards with the same unset-workers settings share one (unit_tests.py.j2 `_sandbox`)
    sized = {(r.timeout_s, r.memory_mb, r.min_isolation) for r in rewards
             if hasattr(r, "workers") and getattr(r, "min_isolation", None) and r.workers is None}
    fixed = sum(int(r.workers) for r in rewards if isinstance(getattr(r, "workers", None), int))
    fixed += int(TOOL_DEFAULTS["workers"]) if tool else 0
    per = max(1, topo.processes_per_node)
    reserved = topo.vllm_serving_gpus if topo.vllm_mode == "server" and topo.nodes == 1 else 0
    cpus = plan.hardware.host_cpus
    return {"file": name, "sha256": hashlib.sha256(source.read_bytes()).hexdigest(), "min_isolation": need,
            "why": ", ".join(f"{k}: {v}" for k, v in levels.items() if v == need),
            "processes_per_node": per, "reserved_cpus": reserved, "fixed_workers": fixed,
            "sized_pools": len(sized), "host_cpus": cpus,
            "workers_per_pool": sandbox_workers(cpus, per, reserved, fixed, len(sized)) if cpus and sized else None}


def checker_source() -> str:
    """The standalone checker, rendered verbatim as config/env_check.py."""
    return CHECKER_SOURCE.read_text(encoding="utf-8")
