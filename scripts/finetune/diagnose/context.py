"""The run around the logs: its directory, spec, the GRPOConfig kwargs it trained with, the reward roles
(declared by the spec or REWARD_META, named by --correctness, else read off the names) and the model."""

from __future__ import annotations

import ast
import dataclasses
import enum
import importlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from finetune import rundir, watch
from finetune.diagnose.logs import ASSUMED_ROLES, ROLE_OVERRIDE, role_from_name
from finetune.errors import UserError
from finetune.models import load_model_info
from finetune.rewards.lib.rewards_meta import RewardMeta
from finetune.spec import RunSpec, load_spec
from finetune.variants import VARIANT_BETA, VARIANTS
from finetune.yamlio import load_with_lines


@dataclass
class RunContext:
    """What the diagnosis knows about the run besides its logs, and where each fact came from."""

    run_dir: Path
    spec_path: Path | None = None
    spec: RunSpec | None = None
    config: dict[str, Any] = field(default_factory=dict)
    config_source: str | None = None
    rewards: list[RewardMeta] = field(default_factory=list)  # as rendered: from the spec or the run's rewards.py
    named_roles: dict[str, str] = field(default_factory=dict)  # --correctness, or read off names (no meta)
    roles_source: str | None = None
    assumed: dict[str, str] = field(default_factory=dict)  # roles guessed from names (ROLE_STEMS)
    unassumed: list[str] = field(default_factory=list)  # logged rewards whose role nothing says
    model: str | None = None
    model_info: Any = None
    model_source: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def roles(self) -> dict[str, str]:
        """name -> role of every reward the diagnosis knows: the RewardMeta's, under the named ones."""
        return watch.reward_roles(self.rewards, self.named_roles)

    def meta(self, name: str) -> RewardMeta | None:
        return next((m for m in self.rewards if m.name == name), None)


def _run_dir_of(run: Path, log_file: Path) -> Path:
    """The pipeline run directory: the one holding spec.yaml / config/ above the log, else the log's folder."""
    start = run if run.is_dir() else log_file.parent
    folder = start
    for _ in range(3):  # RUN, its train/ parent, a checkpoint's grandparent
        if (folder / rundir.SPEC).is_file() or (folder / rundir.CONFIG_DIR / "grpo_config.yaml").is_file():
            return folder
        if folder.parent == folder:
            break
        folder = folder.parent
    return start


def _read_yaml(path: Path) -> dict[str, Any]:
    data, _ = load_with_lines(path)
    if not isinstance(data, dict):
        raise UserError("expected a YAML mapping of GRPOConfig kwargs", where=str(path), fix="pass the run's config")
    return data


_SAFE_ARG_MODULES = ("transformers.", "trl.", "accelerate.", "peft.")
# TrainingArguments pickles accelerate's process state too (a plain attribute bag when unpickled).
_SAFE_ARG_CLASSES = {"accelerate.state.PartialState"}


def _training_args(path: Path) -> dict[str, Any] | None:
    """TRL's saved training_args.bin, read with torch's weights-only unpickler (no arbitrary code).

    Only dataclasses and enums defined by transformers / TRL / accelerate / peft are allowed, one by
    one as the unpickler names them; anything else leaves the config unknown.
    """
    import torch  # heavy: only when a run left training_args.bin and no readable config

    allowed: list[Any] = []
    for _ in range(16):
        try:
            with torch.serialization.safe_globals(allowed):
                args = torch.load(path, weights_only=True)
            return args.to_dict() if hasattr(args, "to_dict") else None
        except Exception as exc:  # noqa: BLE001 — any failure means "config unknown", never a crash
            m = re.search(r"Unsupported global: GLOBAL ([\w.]+)\.(\w+)", str(exc))
            if not m or not m.group(1).startswith(_SAFE_ARG_MODULES):
                return None
            try:
                obj = getattr(importlib.import_module(m.group(1)), m.group(2))
            except (ImportError, AttributeError):
                return None
            named = f"{m.group(1)}.{m.group(2)}" in _SAFE_ARG_CLASSES
            if not (isinstance(obj, type) and (named or dataclasses.is_dataclass(obj) or issubclass(obj, enum.Enum))):
                return None
            allowed.append(obj)
    return None


def _reward_meta_from_rewards_py(path: Path) -> list[RewardMeta] | None:
    """REWARD_META of a rendered rewards.py — ``RewardMeta(name=..., ...)`` calls (or mappings) of literals —
    read from its syntax tree (the file is never imported or run); None when it has none this can read."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    node = next((n.value for n in tree.body if isinstance(n, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == "REWARD_META" for t in n.targets)), None)
    if not isinstance(node, (ast.Tuple, ast.List)):
        return None
    try:
        return [RewardMeta.of({k.arg: ast.literal_eval(k.value) for k in e.keywords if k.arg}
                              if isinstance(e, ast.Call) else ast.literal_eval(e)) for e in node.elts]
    except (ValueError, TypeError, SyntaxError):
        return None


def _spec_config(spec: RunSpec) -> dict[str, Any]:
    """The GRPOConfig kwargs a spec implies where it states them (the renderer fills the rest)."""
    t, g = spec.training, spec.generation
    cfg: dict[str, Any] = {f: p.value for f, p in VARIANTS[spec.variant].items()}
    beta = VARIANT_BETA[spec.variant]
    cfg.update(learning_rate=t.learning_rate, beta=t.beta if beta is None else beta,
               num_generations=t.num_generations, num_iterations=t.num_iterations,
               max_completion_length=g.max_completion_length, temperature=g.temperature, top_p=g.top_p,
               reward_weights=[r.weight for r in spec.rewards])
    for name in ("per_device_train_batch_size", "gradient_accumulation_steps", "steps_per_generation"):
        if getattr(t, name) is not None:
            cfg[name] = getattr(t, name)
    return cfg



def _assume_roles(ctx: RunContext, names: list[str], *, explicit: bool) -> None:
    """Fill the roles of logged rewards nobody declared from their names; with --correctness, that flag
    alone says which rewards are correctness (a name is then never guessed into that role)."""
    for name in names:
        if name in ctx.roles:
            continue
        role = role_from_name(name)
        if role is not None and not (explicit and role == "correctness"):
            ctx.named_roles[name] = role
            ctx.assumed[name] = role
        else:
            ctx.unassumed.append(name)
    if ctx.assumed:
        ctx.roles_source = ASSUMED_ROLES if ctx.roles_source is None else f"{ctx.roles_source}; others {ASSUMED_ROLES}"


def _spec_metas(ctx: RunContext) -> list[RewardMeta]:
    """The spec's RewardMeta as ``rewards render`` decides them (:func:`finetune.rewards.render.reward_metas`)."""
    from finetune.rewards.render import reward_metas

    assert ctx.spec is not None
    try:
        return reward_metas(ctx.spec)
    except UserError as exc:  # a spec the renderer refuses: its rewards' roles are still the spec's
        ctx.notes.append(f"the spec's rewards do not render ({exc.what}): their ranges are unknown")
        ctx.named_roles.update((r.name, r.effective_role) for r in ctx.spec.rewards)
        return []


def _read_roles(ctx: RunContext, log_file: Path, correctness: list[str] | None,
                logged_rewards: set[str] | None) -> None:
    """Reward roles: the spec > rewards.py's REWARD_META > --correctness > the names (ROLE_STEMS); only
    names the logs carry count."""
    meta_path = next((p for p in (ctx.run_dir / rundir.REWARDS, log_file.parent / rundir.REWARDS) if p.is_file()),
                     ctx.run_dir / rundir.REWARDS)
    meta = _reward_meta_from_rewards_py(meta_path) if meta_path.is_file() else None
    spec_names = [r.name for r in ctx.spec.rewards] if ctx.spec is not None else []
    if ctx.spec is not None and spec_names and (logged_rewards is None or set(spec_names) & logged_rewards):
        ctx.rewards = _spec_metas(ctx)  # what `rewards render` decides for the spec, by the renderer itself
        ctx.roles_source = str(ctx.spec_path)
    elif meta:
        if spec_names:
            ctx.notes.append(f"the spec's rewards ({', '.join(spec_names)}) are not in the logs: reward roles "
                             f"taken from {meta_path} instead")
        ctx.rewards = meta
        ctx.roles_source = f"{meta_path} (REWARD_META)"
    if correctness:
        ctx.named_roles.update((name, "correctness") for name in correctness)
        ctx.roles_source = "--correctness"
    if ctx.roles_source in (None, "--correctness") and logged_rewards:
        _assume_roles(ctx, sorted(logged_rewards), explicit=bool(correctness))


def load_context(run: Path, log_file: Path, spec_path: Path | None = None,
                 model: str | None = None, correctness: list[str] | None = None,
                 logged_rewards: set[str] | None = None) -> RunContext:
    """Find the spec, the run's GRPOConfig kwargs, the reward roles and the model config.

    ``logged_rewards`` (the names behind ``rewards/<name>/mean`` in the logs) keeps a spec that
    does not describe this run's rewards from assigning roles to nothing.
    """
    ctx = RunContext(run_dir=_run_dir_of(run, log_file))
    candidate = spec_path or ctx.run_dir / rundir.SPEC
    if spec_path is not None and not spec_path.is_file():
        raise UserError(f"no such spec: {spec_path}", where="--spec", fix="pass the run's spec.yaml")
    if candidate.is_file():
        ctx.spec_path, ctx.spec = candidate, load_spec(candidate)

    # the config the run trained with: rendered > beside the logs > TRL's saved args > implied by the spec
    for path in (ctx.run_dir / rundir.CONFIG_DIR / "grpo_config.yaml", log_file.parent / "grpo_config.yaml"):
        if path.is_file():
            ctx.config, ctx.config_source = _read_yaml(path), str(path)
            break
    else:
        bin_path = log_file.parent / "training_args.bin"
        args = _training_args(bin_path) if bin_path.is_file() else None
        if args is not None:
            ctx.config, ctx.config_source = args, str(bin_path)
        elif ctx.spec is not None:
            ctx.config, ctx.config_source = _spec_config(ctx.spec), f"{ctx.spec_path} (implied by the spec)"
        else:
            ctx.notes.append("no grpo_config.yaml, training_args.bin or spec found: the current config is "
                             "unknown, so the recommended change is shown against the base GRPO recipe")

    _read_roles(ctx, log_file, correctness, logged_rewards)

    # the model: --model > the config's model_name_or_path > the spec's model > a config.json beside the logs
    ctx.model = model or ctx.config.get("model_name_or_path") or (ctx.spec.model if ctx.spec else None)
    base = ctx.spec_path.parent if ctx.spec_path else ctx.run_dir
    if ctx.model is None and (log_file.parent / "config.json").is_file():
        ctx.model = str(log_file.parent)
    if ctx.model is not None:
        model_config = ctx.spec.model_config_path if ctx.spec is not None and not model else None
        try:
            ctx.model_info = load_model_info(str(ctx.model), model_config, base_dir=base)
            ctx.model_source = str(ctx.model)
        except UserError as exc:
            ctx.notes.append(f"model config not read ({exc.what}): the MoE check was not made")
    else:
        ctx.notes.append("no model named (no --model, config model_name_or_path or spec): the MoE check was not made")
    return ctx


def assumed_roles(ctx: RunContext) -> dict[str, Any] | None:
    """The roles guessed from reward names, the rewards left without one, and how to override them."""
    if not ctx.assumed and not (ctx.unassumed and not any(r == "correctness" for r in ctx.roles.values())):
        return None
    return {"roles": dict(ctx.assumed), "unassumed": list(ctx.unassumed), "override": ROLE_OVERRIDE}
