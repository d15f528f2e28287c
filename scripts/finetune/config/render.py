"""Rendering a plan: ``config/`` written atomically from the Jinja templates (BRIEF.md, grpo_config.yaml,
train.py, launch files, target.json, watch.py), :func:`render` (`finetune config render`), and the skill's
recipe block (generated; `finetune docs` fills the marked region of SKILL.md).

What config/ holds: ``grpo_config.yaml`` (GRPOConfig kwargs + ``trl grpo`` script args), ``target.json`` +
``env_check.py``, ``train.py`` (standalone; every GRPOConfig kwarg written out; ``--cpu --max-steps N`` smoke test;
refuses a TRL other than the rendered pin; re-checks gate.json's hashes and the score report's binding; loads
rewards.py and its helpers by path from the bytes it hashed, never by module search; its callbacks append every
logged step to ``train/metrics.jsonl`` and run watch.py's inspection callback, loaded from bytes that must equal
``WATCH_SHA256``; on a stop rule it writes ``train/STOPPED.json`` and exits with ``watch.STOPPED_EXIT``),
``launch.sh`` (env check first; ``python`` / ``trl`` / ``accelerate`` from the rendering interpreter or
``FINETUNE_PYTHON``, never PATH; waits for ``trl vllm-serve``'s ``/health`` within ``VLLM_HEALTH_TIMEOUT``; pins
each process to the layout's GPU ordinals within an inherited ``CUDA_VISIBLE_DEVICES``), ``launch.slurm`` for
several nodes (node 0 serves vLLM, nodes 1.. train through ``srun``), ``accelerate.yaml`` +
``deepspeed_zero{2,3}.json`` when more than one process trains, and ``BRIEF.md``. ``--no-gate`` renders an UNGATED
preview: its train.py runs at most a CPU smoke test and the launch files refuse to start unless
``FINETUNE_UNGATED_OVERRIDE`` holds ``config.UNGATED_OVERRIDE`` (a phrase a person sets).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from finetune import __version__, heldout, literals, rundir, tracking, watch, watchdog
from finetune.config import jobs
from finetune.config.build import (
    UNGATED_OVERRIDE,
    UNGATED_SMOKE_STEPS,
    VLLM_SERVER_PORT,
    _run_length,
    build_plan,
    inspection_settings,
)
from finetune.config.overrides import TRL_VERSION_PIN
from finetune.config.plan import RenderPlan
from finetune.errors import UserError
from finetune.variants import ALGORITHM_FIELDS

if TYPE_CHECKING:
    import jinja2

    from finetune.memory.result import Estimate


TEMPLATES = Path(__file__).resolve().parents[1] / "templates"

EXAMPLE_SPEC = Path(__file__).resolve().parents[3] / "examples" / "spec.yaml"

# ----------------------------------------------------------------------------------------------
# rendering

def _env() -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)
    literals.register(env)
    return env


def _context(plan: RenderPlan) -> dict[str, Any]:
    from finetune import hashing
    from finetune.diagnose.licence import uses_licence
    from finetune.env.target import sandbox_target
    from finetune.inspect.bounds import line as bound_line
    from finetune.inspect.gate import person_acts

    spec, topo = plan.spec, plan.topology
    gate_hashes = dict(plan.gate.hashes) if plan.gate else {}
    reward_section = spec.reward_section()
    rec_reasons = plan.recommendation.reasons
    return {
        "plan": plan, "spec": spec, "topo": topo, "version": __version__, "trl_version": TRL_VERSION_PIN,
        "kwargs": {k: s for k, s in plan.kwargs.items() if not k.startswith("_")},
        "sections": plan.sections, "method": plan.kwargs["_method"], "rec_reasons": rec_reasons,
        "reward_names": [r.name for r in spec.rewards], "reward_weights": [r.weight for r in spec.rewards],
        "gate_required": not plan.no_gate, "gate_hashes": gate_hashes,
        "gate_bounds": [bound_line(b.model_dump()) for b in plan.gate.bounds] if plan.gate else [],
        "ungated_override": UNGATED_OVERRIDE, "ungated_smoke_steps": UNGATED_SMOKE_STEPS,
        "watch_sha256": hashlib.sha256(watch_source().encode("utf-8")).hexdigest(),
        "watchdog_sha256": hashlib.sha256(watchdog_source().encode("utf-8")).hexdigest(),
        "preflight_sha256": hashlib.sha256(preflight_source().encode("utf-8")).hexdigest(),
        "sandbox": sandbox_target(plan),  # the reward sandbox's CPU sizing, as target.json states it
        "score_report_sha256": plan.gate.inputs.get(rundir.SCORE_REPORT) if plan.gate else None,
        "person_acts": person_acts(plan.run_dir, licensed=uses_licence(spec, plan.model_info.is_moe))
        if plan.gate else {},
        "reward_section_json": json.dumps(reward_section, sort_keys=True, separators=(",", ":"), ensure_ascii=False),
        "reward_section_sha256": hashing.reward_section_digest(reward_section),
        "sampling": spec.sampling_binding(),  # train.py hashes it as the gate did (hashing.SAMPLING)
        "inspection_section": spec.inspection_binding(),  # and this (hashing.INSPECTION)
        # dataset.filter bound like the reward section (None without a filter)
        "data_filter_sha256": (hashing.bound_hashes(plan.run_dir, reward_section, **spec.filter_binding())
                               .get(hashing.FILTER_SECTION)),
        "data_filter": spec.dataset.filter.model_dump(mode="json") if spec.dataset.filter else None,
        # the held-out split `finetune eval` measures on: its binding, and the carved rows train.py leaves out
        "heldout_sha256": hashing.bound_hashes(plan.run_dir, reward_section, **spec.heldout_binding())
        .get(hashing.HELDOUT_SECTION),
        "heldout_path": spec.dataset.heldout.path,
        "heldout": None if plan.preview else heldout.carve(spec, plan.run_dir),
        "filter_steps_before": (_run_length(plan.kwargs, topo, spec.dataset.filter.source_rows).optimiser_steps
                                if spec.dataset.filter else None),
        "generation_batch_size": plan.generation_batch_size,
        "vllm_port": VLLM_SERVER_PORT,
        "memory_table": _memory_table(plan.estimate),
        "binding_gib": (f"{plan.estimate.binding.gib:.1f} of {plan.estimate.binding.limit_gib:.1f} GiB"
                        if plan.estimate.binding else ""),
        "algorithm_fields": ALGORITHM_FIELDS, "zero_stage": plan.zero_stage,
        "model_summary": plan.model_info.summary(),
        "zero_reason": rec_reasons.get("zero_stage", ""),
        # launch.sh trains with the interpreter rendering ran in unless FINETUNE_PYTHON names another
        "rendered_python": sys.executable,
        "slurm_job_name": re.sub(r"[^A-Za-z0-9_.-]", "-", spec.name)[:64] or "grpo",
        "inspection": inspection_settings(spec),
        "tracking": tracking.target(spec),  # W&B when the person configured it, else Trackio when importable
        "job_lines": jobs.brief_lines(plan),  # the SkyPilot / HF Jobs files and how the person submits them
        "stopped_exit": STOPPED_EXIT,
        "stalled_exit": STALLED_EXIT, "dry_run_factor": f"{watchdog.FACTOR:g}",
    }


def _memory_table(est: Estimate) -> str:
    # the estimator's own headings sit under BRIEF.md's "Memory fit" section
    return re.sub(r"^(#+) ", lambda m: "#" * (len(m.group(1)) + 2) + " ", est.to_markdown().strip(), flags=re.M)


def render_files(plan: RenderPlan) -> dict[str, str]:
    """Relative path (inside config/) → text, for every file of this render."""
    env = _env()
    ctx = _context(plan)
    files = {"BRIEF.md": env.get_template("BRIEF.md.j2").render(**ctx)}
    if plan.preview:
        return files
    files["grpo_config.yaml"] = env.get_template("grpo_config.yaml.j2").render(**ctx)
    files["train.py"] = env.get_template("train.py.j2").render(**ctx)
    files["launch.sh"] = env.get_template("launch.sh.j2").render(**ctx)
    from finetune.env.target import build_target, checker_source

    files["target.json"] = json.dumps(build_target(plan), indent=2) + "\n"
    files["env_check.py"] = checker_source()
    files["watch.py"] = watch_source()
    files["watchdog.py"] = watchdog_source()
    files["preflight.py"] = preflight_source()
    files[rundir.HELDOUT] = json.dumps(ctx["heldout"].record(), indent=2) + "\n"
    files.update(jobs.files(plan, env, ctx))  # SkyPilot / HF Jobs for a PASS run whose spec asks for them
    if not plan.topology.cpu and plan.topology.nodes > 1:
        files["launch.slurm"] = env.get_template("launch.slurm.j2").render(**ctx)
    # launch.slurm and the multi-node launch.sh always train through `accelerate launch --config_file`, even
    # with one training process; one node with one training process runs train.py directly (no file)
    if not plan.topology.cpu and (plan.topology.training_processes > 1 or plan.topology.nodes > 1):
        files["accelerate.yaml"] = env.get_template("accelerate.yaml.j2").render(**ctx)
        if plan.zero_stage:
            files[f"deepspeed_zero{plan.zero_stage}.json"] = env.get_template("deepspeed.json.j2").render(**ctx)
    return files


STOPPED_EXIT = watch.STOPPED_EXIT  # train.py's and launch.sh's exit status when the inspection callback stopped the run
STALLED_EXIT = watchdog.STALLED_EXIT  # launch.sh's exit status when the stall watchdog stopped the run


def watch_source() -> str:
    """finetune/watch.py, rendered verbatim beside train.py (the inspection callback and its rules)."""
    from finetune import watch

    return Path(watch.__file__).read_text(encoding="utf-8")


def watchdog_source() -> str:
    """finetune/watchdog.py, rendered verbatim beside train.py (the stall watchdog and the dry run's moments)."""
    from finetune import watchdog

    return Path(watchdog.__file__).read_text(encoding="utf-8")


def preflight_source() -> str:
    """finetune/preflight.py, rendered verbatim beside train.py (the checks train.py runs before the model loads)."""
    from finetune import preflight

    return Path(preflight.__file__).read_text(encoding="utf-8")


def write(plan: RenderPlan, files: dict[str, str]) -> Path:
    from finetune.commit import staged_dir

    target = plan.run_dir / rundir.CONFIG_DIR
    # a launch file of an earlier render for another target must not survive beside the new ones
    keep = (lambda name: True) if plan.preview else (lambda name: not _RENDERED_NAME.fullmatch(name))
    with staged_dir(target, keep=keep) as tmp:  # config/ is switched as a whole: one render, never a mix
        for rel, text in files.items():
            p = tmp / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
            if rel.endswith((".sh", ".py")):
                p.chmod(0o755)
    return target


_RENDERED_NAME = re.compile(r"BRIEF\.md|grpo_config\.yaml|train\.py|launch\.sh|launch\.slurm|accelerate\.yaml|"
                            r"deepspeed_zero\d\.json|target\.json|env_check\.py|watch\.py|watchdog\.py|preflight\.py|"
                            r"heldout\.json|sky\.yaml|hf_job\.sh")


def render(spec_path: str | Path, out: str | Path | None = None, *, preview: bool = False,
           no_gate: bool = False) -> tuple[RenderPlan, Path]:
    """Validate and write DIR/config/. Raises UserError / CheckFailed before writing anything."""
    from finetune.spec import load_spec

    spec_file, run_dir = rundir.resolve(spec_path, out)
    if spec_file is None:
        raise UserError(f"no {rundir.SPEC} in {spec_path}", fix="pass the run spec")
    spec = load_spec(spec_file)
    # what is written to train from re-scores the bound samples with the bound rewards (not hashes alone)
    plan = build_plan(spec, run_dir, preview=preview, no_gate=no_gate, rescore=True)
    files = render_files(plan)
    return plan, write(plan, files)


# ----------------------------------------------------------------------------------------------
# the skill's recipe block (generated; `finetune docs` fills the marked region of SKILL.md)

RECIPE_START = "# --- recipe:start"
RECIPE_END = "# --- recipe:end"


def skill_recipe_block() -> str:
    """The GRPO recipe as rendered in train.py for the shipped default spec (examples/spec.yaml)."""
    import tempfile

    from finetune.spec import load_spec

    spec = load_spec(EXAMPLE_SPEC)
    with tempfile.TemporaryDirectory() as tmp:
        plan = build_plan(spec, Path(tmp), no_gate=True)
        plan.no_gate = False  # the skill shows the gated script
        train_py = _env().get_template("train.py.j2").render(**_context(plan))
    m = re.search(re.escape(RECIPE_START) + r"[^\n]*\n(.*?)\n[ \t]*" + re.escape(RECIPE_END), train_py, re.S)
    assert m, "train.py.j2 lost its recipe markers"
    import textwrap

    body = textwrap.dedent(m.group(1)).strip("\n")
    return ("Rendered by `finetune config render` for examples/spec.yaml (generated — do not edit):\n\n"
            f"```python\n{body}\n```\n")
