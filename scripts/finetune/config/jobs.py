"""Jobs on existing engines for a PASS run: a SkyPilot task (``config/sky.yaml``) and a Hugging Face Jobs command
(``config/hf_job.sh``), each written by `config render` when the spec's ``jobs.engines`` names it.

Both run the rendered ``config/launch.sh`` on the rented machine, so the env check runs there first, and both carry
the whole run directory (gate.json, the gated rewards and samples): train.py verifies the gate on the machine that
trains. The placement is launch.slurm's: one node runs launch.sh as it is; several nodes run it on every node with
``NODE_RANK`` / ``VLLM_HOST`` / ``MAIN_HOST`` from SkyPilot's own variables, node 0 serving vLLM and the others
training. Each job stops at the person's limit: ``jobs.max_hours`` (SkyPilot: ``timeout`` around launch.sh; HF Jobs:
``--timeout``), and for HF Jobs ``jobs.max_cost_usd`` at the flavour's listed price (read when the person submits).

What an engine cannot express is refused in one line (exit 2, nothing written): a profile with no SkyPilot
accelerator name, a layout with no HF Jobs flavour of its profile and GPU count, more than one node on HF Jobs, an
input train.py reads from outside the run directory. The flavours are huggingface_hub's ``JobHardware`` names (the
installed, pinned client; a test checks every one); SkyPilot's accelerator catalogue needs the network, so its names
here are checked against its task schema only (tests/config/test_jobs.py, in the skypilot environment).
"""

from __future__ import annotations

import math
import shlex
from typing import TYPE_CHECKING, Any

from finetune.errors import UserError

if TYPE_CHECKING:
    from finetune.config.plan import RenderPlan

SKY_FILE, HF_FILE = "sky.yaml", "hf_job.sh"
HF_MOUNT = "/workspace/run"  # the run directory inside an HF job (a read-write bucket volume)
HF_VENV = "/workspace/venv"

# SkyPilot accelerator names of the GPU profiles (hardware.PROFILES); a profile without one is refused
SKY_ACCELERATORS: dict[str, str] = {"h100-80gb": "H100", "a100-80gb": "A100-80GB", "a100-40gb": "A100",
                                    "l40s-48gb": "L40S", "h200-141gb": "H200", "rtx-4090-24gb": "RTX4090"}
# HF Jobs flavours (huggingface_hub 2.4.0's JobHardware) per profile and GPU count on one node
HF_FLAVORS: dict[str, dict[int, str]] = {
    "a100-80gb": {1: "a100-large", 4: "a100x4", 8: "a100x8"},
    "h200-141gb": {1: "h200", 2: "h200x2", 4: "h200x4", 8: "h200x8"},
    "l40s-48gb": {1: "l40sx1", 4: "l40sx4", 8: "l40sx8"},
}


def _shown(flavors: dict[int, str]) -> str:
    return ", ".join(f"{n} GPU(s): {f}" for n, f in sorted(flavors.items())) or "none"


def sky_accelerators(plan: RenderPlan) -> str:
    """``NAME:GPUS`` for the task's resources, or UserError naming what SkyPilot cannot be asked for."""
    topo = plan.topology
    name = SKY_ACCELERATORS.get(plan.hardware.profile.name)
    if topo.cpu or name is None:
        raise UserError(f"SkyPilot cannot rent the {plan.hardware.profile.name} profile (no accelerator name for it)",
                        where="jobs.engines", fix=f"use a profile of {', '.join(SKY_ACCELERATORS)}, or drop "
                                                  "skypilot from jobs.engines")
    return f"{name}:{topo.gpus_per_node}"


def hf_flavor(plan: RenderPlan) -> str:
    """The HF Jobs flavour of the layout, or UserError: several nodes, or no flavour of the profile × GPUs."""
    topo, profile = plan.topology, plan.hardware.profile.name
    if topo.nodes > 1:
        raise UserError(f"HF Jobs runs one node; this layout has {topo.nodes}", where="jobs.engines",
                        fix="use skypilot for several nodes, or hardware.nodes: 1")
    flavors = HF_FLAVORS.get(profile, {})
    if topo.cpu or topo.gpus_per_node not in flavors:
        raise UserError(f"HF Jobs has no flavour for {profile} × {topo.gpus_per_node} GPU(s) (its flavours of this "
                        f"profile: {_shown(flavors)})", where="jobs.engines",
                        fix="set hardware.profile / hardware.gpus to a flavour's (a100-80gb, h200-141gb, l40s-48gb), "
                            "or drop hf from jobs.engines")
    return flavors[topo.gpus_per_node]


def check_inputs(plan: RenderPlan) -> None:
    """Every file train.py reads must travel with the run directory (a hub id model is fetched on the machine)."""
    spec, run_dir = plan.spec, plan.run_dir.resolve()
    named = {"model": spec.model if spec.resolve_path(spec.model).exists() else None,
             "dataset.path": spec.dataset.path, "dataset.heldout.path": spec.dataset.heldout.path,
             "dataset.filter.path": spec.dataset.filter.path if spec.dataset.filter else None}
    for field, value in named.items():
        if value is None:
            continue
        path = spec.resolve_path(value).resolve()
        if not path.is_relative_to(run_dir):
            raise UserError(f"{field} ({value}) lies outside the run directory, which is what a job carries",
                            where=field, fix="copy it into the run directory and name it there (or a hub id)")


def requirements(plan: RenderPlan) -> list[str]:
    """pip requirements for the machine: target.json's packages at their pins, and the tracker train.py uses."""
    from finetune.env.target import build_target, pins
    from finetune.tracking import wandb_project

    target = build_target(plan)
    reqs = [f"{p['name']}{p.get('install_require') or p['require']}" for p in target["packages"]]
    reqs.append(f"trackio{pins().get('trackio', '')}")
    if wandb_project():
        reqs.append("wandb")
    return reqs


def context(plan: RenderPlan) -> dict[str, Any]:
    """The templates' values; UserError (one line) for what an engine cannot express."""
    jobs = plan.spec.jobs
    assert jobs is not None
    check_inputs(plan)
    reqs = requirements(plan)
    install = " ".join(shlex.quote(r) for r in reqs)
    return {"jobs": jobs, "seconds": int(math.ceil(jobs.max_hours * 3600)), "requirements": reqs,
            "sky_accelerators": sky_accelerators(plan) if "skypilot" in jobs.engines else None,
            "hf_flavor": hf_flavor(plan) if "hf" in jobs.engines else None,
            "hf_timeout": f"{max(1, math.ceil(jobs.max_hours * 60))}m",
            "hf_command": f"cd {HF_MOUNT} && python -m venv {HF_VENV} && {HF_VENV}/bin/pip install -q {install} && "
                          "bash config/launch.sh"}


def files(plan: RenderPlan, env: Any, ctx: dict[str, Any]) -> dict[str, str]:
    """config/sky.yaml and / or config/hf_job.sh for a PASS run whose spec asks for them (none for a preview)."""
    if plan.spec.jobs is None or plan.no_gate or plan.preview:
        return {}
    values = {**ctx, **context(plan)}
    out = {}
    if "skypilot" in plan.spec.jobs.engines:
        out[SKY_FILE] = env.get_template("sky.yaml.j2").render(**values)
    if "hf" in plan.spec.jobs.engines:
        out[HF_FILE] = env.get_template("hf_job.sh.j2").render(**values)
    return out


def brief_lines(plan: RenderPlan) -> list[str]:
    """BRIEF.md's "Where to run" lines: the job files and how the person submits each (never the agent)."""
    jobs = plan.spec.jobs
    if jobs is None:
        return ["No job files: add a `jobs:` section to the spec (engines, max_hours) to get a SkyPilot task and / "
                "or a Hugging Face Jobs command with your time and cost limits."]
    if plan.no_gate:
        return ["No job files for an UNGATED preview: pass the Phase 1 gate first."]
    cost = f", cost at most ${jobs.max_cost_usd:g}" if jobs.max_cost_usd else ""
    lines = [f"Limits: {jobs.max_hours:g} h{cost}. Submitting spends money: the person runs these, never the agent."]
    if "skypilot" in jobs.engines:
        lines.append(f"- SkyPilot (`{SKY_FILE}`): `cd RUN && sky launch -c {plan.spec.name} config/{SKY_FILE} --down` "
                     "— it prints the hourly price before it asks; `timeout` stops launch.sh at the time limit and "
                     "`--down` tears the cluster down after it (SkyPilot itself caps no cost).")
    if "hf" in jobs.engines:
        lines.append(f"- Hugging Face Jobs (`{HF_FILE}`): `bash config/{HF_FILE}` (`--dry-run` first): the run "
                     f"directory is synced to a bucket and mounted read-write at {HF_MOUNT}; pull train/ back with "
                     "the `hf buckets sync` line it prints.")
    return lines
