"""The demo's toy GRPO run on CPU: the rendered config with the demo CPU profile, and what TRL logged.

lr/beta (base-recipe contract): the rendered config is the base recipe for the target GPU (lr 5e-7,
beta 0.01) and stays so. The toy run on this CPU uses that config with the fields of
:data:`DEMO_CPU_PROFILE` replaced — hardware fields, a larger learning rate, a step budget and
logging — stated field by field in config/BRIEF.md (a section the demo adds, marked as such), in
``train/demo_profile.json`` and in the report. The profile lives only here: `finetune config
render` never writes it, and a user's run cannot get it. Both demo tasks train through
:func:`demo_training_kwargs`; :func:`train_toy` is the digit task's run, which checks the gate first and
trains with config/train.py's inspection callback.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from finetune import jsonio, rundir
from finetune.errors import CheckFailed

if TYPE_CHECKING:
    from transformers import TrainerControl, TrainerState, TrainingArguments
    from trl import GRPOTrainer

    from finetune.spec import RunSpec

DEMO_STEPS = 40
EARLY_STEPS = 5  # frac_reward_zero_std of the first steps: the policy the filter sampled, before GRPO moves it

# The toy run's departures from the rendered base recipe: field -> (value, why). Everything else —
# every algorithm-defining field (loss_type, beta, epsilon, scale_rewards, num_generations,
# temperature, max_completion_length, ...) and the batch arithmetic — comes from config/grpo_config.yaml.
DEMO_CPU_PROFILE: dict[str, tuple[Any, str]] = {
    "use_cpu": (True, "the demo trains on this machine's CPU, not the target GPU"),
    "bf16": (False, "no bf16 on CPU"),
    "use_vllm": (False, "no vLLM on CPU: TRL generates with transformers"),
    "model_init_kwargs": ({"dtype": "float32"}, "fp32 weights on CPU"),
    "learning_rate": (3e-4, "DEMO ONLY, outside the base-recipe contract: at 5e-7 a 2-layer toy model does "
                            "not move in 40 steps (at 1e-3 it learns the whole task in 20, and every group turns "
                            "all-correct); a real run keeps 5e-7 until a PASS gate and a healthy diagnosis of "
                            "its base run"),
    "lr_scheduler_type": ("constant", "a 40-step run has no room for a warm-up"),
    "warmup_steps": (0, "see lr_scheduler_type"),
    "max_steps": (DEMO_STEPS, "a demo-sized budget (the rendered config runs whole epochs)"),
    "save_strategy": ("no", "no checkpoints; the demo saves the final model and trainer_state.json itself"),
    "log_completions": (False, "keeps the demo's console readable"),
    "disable_tqdm": (True, "the demo draws its own progress bar"),
}


# ----------------------------------------------------------------------------------------------
# the toy GRPO run: the rendered config + DEMO_CPU_PROFILE, after the gate still holds


def demo_training_kwargs(run_dir: Path, seed: int, output_dir: Path, steps: int,
                         tracked: bool = False) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(GRPOConfig kwargs, the profile's changes as rows) from config/grpo_config.yaml + DEMO_CPU_PROFILE."""
    import yaml
    from trl import GRPOConfig

    rendered = yaml.safe_load((run_dir / rundir.CONFIG_DIR / "grpo_config.yaml").read_text(encoding="utf-8"))
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    kwargs = {k: v for k, v in rendered.items() if k in fields}
    changes = []
    profile = dict(DEMO_CPU_PROFILE)
    profile["max_steps"] = (steps, profile["max_steps"][1])
    if seed != rendered.get("seed"):
        profile["seed"] = (seed, "the second seed of the before/after measurement")
    profile["output_dir"] = (str(output_dir), "this seed's folder in the run directory")
    for key, (value, why) in profile.items():
        if key not in fields:
            continue
        if kwargs.get(key, "(TRL default)") != value:
            changes.append({"field": key, "rendered": kwargs.get(key, "(not rendered)"), "demo": value, "why": why})
        kwargs[key] = value
    kwargs["report_to"] = "none"
    if tracked:  # logged to the run's local Trackio project, as the rendered train.py logs (finetune.tracking)
        from finetune import tracking
        from finetune.spec import load_spec

        kwargs.update(tracking.in_process(run_dir, tracking.trackio_project(load_spec(run_dir / rundir.SPEC))))
    return kwargs, changes


def train_toy(run_dir: Path, spec: RunSpec, seed: int, output_dir: Path, steps: int,
              on_step: Callable[[int, int], None], *,
              unfiltered: bool = False) -> tuple[GRPOTrainer, list[dict[str, Any]]]:
    """Verify the gate, then train with TRL's GRPOTrainer on CPU; returns (trainer, profile changes).

    ``unfiltered``: train on dataset.path instead of the difficulty-filtered file — the demo's baseline for
    what the filter changed (same gated rewards, same seed); a real run trains on what the gate binds."""
    from datasets import load_dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from finetune.inspect.gate import verify_gate
    from finetune.inspect.rewardmod import load_rewards

    check = verify_gate(run_dir, spec)  # the rendered train.py refuses the same way
    if not check.ok:
        raise CheckFailed(f"refusing to train: {check.reason}")
    kwargs, changes = demo_training_kwargs(run_dir, seed, output_dir, steps, tracked=not unfiltered)
    rewards = load_rewards(run_dir, [r.name for r in spec.rewards])
    reward_funcs, inspector = inspection_wiring(spec, rewards.module, kwargs)
    data = spec.resolve_path(spec.dataset.path) if unfiltered else spec.training_data_path()
    dataset = load_dataset("json", data_files=str(data), split="train")

    class _Progress(TrainerCallback):
        def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                        **kw: Any) -> None:
            on_step(state.global_step, state.max_steps)

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = GRPOTrainer(model=str(spec.resolve_path(spec.model)), args=GRPOConfig(**kwargs),
                              reward_funcs=reward_funcs, train_dataset=dataset, callbacks=[_Progress(), inspector])
        inspector.attach(trainer)  # its inspection/* metrics go into the trainer's log, as in train.py
        from transformers.trainer_callback import PrinterCallback, ProgressCallback

        for callback in (PrinterCallback, ProgressCallback):  # the demo draws its own progress bar
            trainer.remove_callback(callback)
        trainer.train()
    trainer.save_model(str(output_dir))
    trainer.save_state()
    jsonio.write_json(output_dir / "demo_profile.json", {
        "note": "DEMO CPU PROFILE — the toy run's departures from config/grpo_config.yaml "
                "(finetune.demo.train.DEMO_CPU_PROFILE)",
        "dataset": str(data), "changes": changes})
    return trainer, changes


def inspection_wiring(spec: RunSpec, module: Any, kwargs: dict[str, Any]) -> tuple[list[Any], Any]:
    """The gated rewards wrapped and the inspection callback, as config/train.py wires them: `watch.instrument`
    with the values `config render` put in train.py (`config.inspection_settings`) and the run's
    max_completion_length. The wrappers return the rewards' own scores and draw no random numbers."""
    from finetune import watch
    from finetune.config import build as config

    settings = config.inspection_settings(spec)
    return watch.instrument(list(module.REWARD_FUNCS), meta=list(module.REWARD_META),
                            every_steps=int(settings["every_steps"].value),
                            sample_rows=int(settings["sample_rows"].value),
                            max_completion_length=kwargs.get("max_completion_length"))


def inspection_record(output_dir: Path, base: Path) -> dict[str, Any]:
    """What the inspection callback left in a toy run's folder: each inspection (inspections/index.jsonl),
    the stop rules and live red flags it fired, and a stop (STOPPED.json: the rule, step, reward and why).
    Paths are relative to ``base``."""
    from finetune import watch

    folder = output_dir / watch.INSPECTIONS
    index = [row for _, row in jsonio.read_jsonl(folder / "index.jsonl")] if (folder / "index.jsonl").is_file() \
        else []
    stop = None
    if (output_dir / watch.STOPPED).is_file():
        doc = jsonio.read_json(output_dir / watch.STOPPED)
        doc = doc if isinstance(doc, dict) else {}
        stop = {k: doc.get(k) for k in ("rule", "step", "reward", "message")}
    rel = str(folder.relative_to(base))
    return {"dir": rel, "inspections": len(index), "steps": [row.get("step") for row in index],
            "files": [{"step": row.get("step"), "path": f"{rel}/{row['file']}"} for row in index if row.get("file")],
            "rules_fired": sorted({r.get("rule") for row in index for r in row.get("stop") or []}),
            "flags": flag_steps(index),
            "stopped": stop}


def brief_addendum(changes: list[dict[str, Any]]) -> str:
    lines = ["", "", "## Demo CPU profile (added by `finetune demo` — NOT rendered, NOT for a real run)", "",
             "Everything above is the rendered base recipe for the target GPU and is what a real run uses. The "
             "demo's toy run on this CPU replaced only these fields (`finetune.demo.train.DEMO_CPU_PROFILE`); every "
             "algorithm-defining field and the batch arithmetic are as rendered. The learning rate departs from "
             "the base-recipe contract for the demo only: a real run keeps 5e-7 until a PASS gate and a healthy "
             "diagnosis of its base run.", "", "| field | rendered | demo | why |", "|---|---|---|---|"]
    for c in changes:
        if c["field"] in ("output_dir", "seed"):
            continue
        lines.append(f"| `{c['field']}` | `{c['rendered']}` | `{c['demo']}` | {c['why']} |")
    return "\n".join(lines) + "\n"


def flag_steps(index: list[dict[str, Any]]) -> dict[str, list[int]]:
    """Each live red flag an inspection raised -> the steps of the inspections that raised it."""
    out: dict[str, list[int]] = {}
    for row in index:
        for flag in row.get("flags") or []:
            out.setdefault(str(flag.get("id")), []).append(int(row["step"]))
    return dict(sorted(out.items()))


def stop_words(record: dict[str, Any] | None, which: str) -> str:
    """A stop by the inspection callback, in the phase's detail line (not an error of the demo: the report says why)."""
    stop = (record or {}).get("stopped")
    if not stop:
        return ""
    return f"; the{which} run was stopped at step {stop.get('step')} by the inspection callback ({stop.get('rule')})"


def reward_gain(output_dir: Path, window: int = 10) -> float | None:
    """TRL's logged `reward`, mean of the last ``window`` steps minus the first ``window``."""
    state = jsonio.read_json(output_dir / "trainer_state.json")
    values = [float(e["reward"]) for e in state.get("log_history", []) if "reward" in e]
    if len(values) < 2 * window:
        return None
    return sum(values[-window:]) / window - sum(values[:window]) / window


def measured_zero_std(output_dir: Path, first: int | None = None) -> float | None:
    """TRL's logged frac_reward_zero_std of a run, averaged over its logged steps or the ``first`` of them
    (None if never logged)."""
    state = jsonio.read_json(output_dir / "trainer_state.json")
    values = [e["frac_reward_zero_std"] for e in state.get("log_history", []) if "frac_reward_zero_std" in e]
    values = values[:first] if first is not None else values
    return sum(values) / len(values) if values else None
