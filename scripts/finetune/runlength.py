"""How long a rendered run is, in the units a reader of its logs counts: optimiser steps, generation
batches, log points, warm-up steps, checkpoints — and whether that is long enough to diagnose.

The arithmetic is TRL 1.16's and transformers 5's, restated (a test checks it against a real run):

* ``RepeatSampler`` yields ``rows // P`` generation batches per epoch, P = prompts per generation batch
  = per_device_train_batch_size × training processes × steps_per_generation / num_generations (a
  trailing partial batch is dropped), each repeated ``num_iterations × steps_per_generation`` times
  as dataloader batches;
* the Trainer makes ``ceil(dataloader batches / gradient_accumulation_steps)`` optimiser steps per
  epoch (at least 1) and ``ceil(num_train_epochs × that)`` in all unless ``max_steps`` > 0;
* with ``logging_first_step`` a step is logged when it is 1 or a multiple of ``logging_steps``.

``finetune diagnose`` needs :data:`MIN_LOG_POINTS` logged steps; a warm-up longer than
:data:`MAX_WARMUP_FRACTION` of the run spends the run ramping up. Both are warnings with the spec
change that fixes them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

MIN_LOG_POINTS = 10  # finetune diagnose reads trends over at least this many logged steps
MAX_WARMUP_FRACTION = 0.2  # warm-up over a fifth of the run: most of it trains at a ramping rate
DEFAULT_WARMUP_STEPS = 10  # training.warmup_steps when the spec leaves it out


@dataclass
class RunLength:
    """The rendered run's length; every figure from the values actually rendered."""

    rows: int
    prompts_per_generation: int  # prompts in one generation batch (all training processes together)
    prompts_per_step: float  # prompts one optimiser step learns from
    steps_per_epoch: int
    optimiser_steps: int
    generation_batches: int
    logging_steps: int
    log_points: int
    warmup_steps: int
    save_steps: int
    checkpoints: int
    epochs: float
    max_steps: int
    warnings: list[str] = field(default_factory=list)

    def to_markdown(self) -> str:
        how = (f"max_steps {self.max_steps}" if self.max_steps > 0 else
               f"{self.epochs:g} epoch(s) × {self.steps_per_epoch} steps per epoch")
        return "\n".join([
            "| quantity | value | from |",
            "|---|---|---|",
            f"| prompts in the dataset | {self.rows} | the dataset as measured at render |",
            f"| prompts per generation batch | {self.prompts_per_generation} | generation batch ÷ num_generations |",
            f"| prompts per optimiser step | {self.prompts_per_step:g} "
            "| batch × processes × accumulation ÷ num_generations |",
            f"| optimiser steps | **{self.optimiser_steps}** | {how} |",
            f"| generation batches | {self.generation_batches} "
            "| steps × accumulation ÷ (steps_per_generation × num_iterations) |",
            f"| log points | {self.log_points} "
            f"| step 1 and every {self.logging_steps} steps (diagnose needs {MIN_LOG_POINTS}) |",
            f"| warm-up steps | {self.warmup_steps} "
            f"| {_pct(self.warmup_steps, self.optimiser_steps)} of the run (at most {MAX_WARMUP_FRACTION:.0%}) |",
            f"| checkpoints | {self.checkpoints} "
            f"| every {self.save_steps} steps; the final model is saved at the end |",
        ])


    def verdict(self) -> str:
        """One sentence for a run long enough to read (the warnings say what is wrong otherwise)."""
        return (f"Long enough to read: {self.log_points} log points (`finetune diagnose` needs {MIN_LOG_POINTS}), "
                f"warm-up {_pct(self.warmup_steps, self.optimiser_steps)} of the steps (at most "
                f"{MAX_WARMUP_FRACTION:.0%}).")


def _pct(part: int, whole: int) -> str:
    return f"{part / whole:.0%}" if whole else "all"


def run_length(*, rows: int, num_generations: int, per_device_train_batch_size: int, processes: int,
               gradient_accumulation_steps: int, steps_per_generation: int, num_iterations: int,
               num_train_epochs: float, max_steps: int, logging_steps: int, warmup_steps: int,
               save_steps: int) -> RunLength:
    """The run length of these rendered values, with a warning (and its fix) for a run too short to read."""
    completions = per_device_train_batch_size * processes * steps_per_generation
    per_gen = completions // num_generations  # the renderer has checked divisibility
    batches_per_epoch = rows // per_gen if per_gen else 0
    dataloader_batches = batches_per_epoch * num_iterations * steps_per_generation
    per_epoch = max(math.ceil(dataloader_batches / gradient_accumulation_steps), 1)
    steps = max_steps if max_steps > 0 else math.ceil(num_train_epochs * per_epoch)
    if batches_per_epoch == 0:
        steps = 0  # TRL's sampler yields nothing: the run ends before its first step
    generations = math.ceil(steps * gradient_accumulation_steps / (steps_per_generation * num_iterations))
    log_points = len({1} | set(range(logging_steps, steps + 1, logging_steps))) if steps else 0
    out = RunLength(rows, per_gen, per_device_train_batch_size * processes * gradient_accumulation_steps
                    / num_generations, per_epoch if batches_per_epoch else 0, steps, generations, logging_steps,
                    log_points, warmup_steps, save_steps, steps // save_steps, num_train_epochs, max_steps)
    out.warnings = _warnings(out, batches_per_epoch)
    return out


def _warnings(r: RunLength, batches_per_epoch: int) -> list[str]:
    if batches_per_epoch == 0:
        return [f"run length: the dataset's {r.rows} prompts are fewer than one generation batch "
                f"({r.prompts_per_generation} prompts), so TRL trains 0 steps — fix: add prompts, or lower "
                "training.per_device_train_batch_size / training.steps_per_generation in the spec"]
    out = []
    if r.log_points < MIN_LOG_POINTS:
        if r.optimiser_steps >= MIN_LOG_POINTS:
            fix = f"set `training.logging_steps: {max(1, r.optimiser_steps // MIN_LOG_POINTS)}` in the spec"
        else:
            epochs = math.ceil(MIN_LOG_POINTS / max(r.steps_per_epoch, 1))
            fix = ("set `training.logging_steps: 1` and " + (
                f"`training.max_steps: {MIN_LOG_POINTS}`" if r.max_steps > 0 else
                f"`training.num_train_epochs: {epochs}`") + " in the spec (or add prompts)")
        out.append(f"run length: {r.optimiser_steps} optimiser steps logged every {r.logging_steps} give "
                   f"{r.log_points} log point(s); `finetune diagnose` needs {MIN_LOG_POINTS} and can only say "
                   f"'insufficient' — fix: {fix}")
    if r.optimiser_steps and r.warmup_steps > MAX_WARMUP_FRACTION * r.optimiser_steps:
        ok = int(MAX_WARMUP_FRACTION * r.optimiser_steps)
        out.append(f"run length: warm-up of {r.warmup_steps} steps is {_pct(r.warmup_steps, r.optimiser_steps)} "
                   f"of the {r.optimiser_steps} optimiser steps (over {MAX_WARMUP_FRACTION:.0%}) — fix: set "
                   f"`training.warmup_steps: {ok}` in the spec (default {DEFAULT_WARMUP_STEPS})")
    return out
