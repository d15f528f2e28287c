"""What PEFT adapts for a LoraConfig's ``target_modules`` on one model, from its inventory (no weights, no torch).

PEFT 0.21's semantics, re-derived from the model's real module and parameter names (``ModelInfo.linear_groups``
paths, ``ModelInfo.fused_params``) and checked against PEFT itself in tests/memory/test_estimate_lora.py:

- ``all-linear`` (any case): every ``nn.Linear`` but the output head (peft.tuners.tuners_utils.
  ``_maybe_include_all_linear_layers``);
- any other string: a regular expression the module's full name must match entirely (``re.fullmatch``);
- a list: names matched against the full name or a dotted suffix of it (``q_proj``, ``self_attn.q_proj``);
- MoE models whose transformers-5 layout fuses the experts (peft.utils.transformers_weight_conversion.
  ``_convert_peft_config_moe``): the old per-expert names (``gate_proj``, ``up_proj``, ``down_proj``, the router
  ``gate``) become ``target_parameters`` on the fused tensors — an ``(E, d1, d2)`` tensor trains
  rank·E·(d1 + d2) parameters, at twice the rank where two old projections share one tensor (``gate_up_proj``);
  a string (the shorthand or a regex) is first resolved to leaf names, so a regex then selects by name in
  every layer. ``all-linear`` thus adapts every expert.

A name matching nothing, half of a fused pair, or the LM head is a problem (:func:`lora_target_problem`): TRL
1.16's GRPOTrainer computes log-probs with a fused LM head that reads ``lm_head.weight`` directly, so an
adapter there never trains.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from finetune.modelparts import FusedParam, Inventory, LinearGroup

Targets = str | list[str] | tuple[str, ...]
ALL_LINEAR = "all-linear"  # peft.utils.INCLUDE_LINEAR_LAYERS_SHORTHAND (matched case-insensitively)
HEAD_PROBLEM = ("target_modules adapts the output head: TRL 1.16's GRPOTrainer computes log-probs with a fused LM "
                "head that reads lm_head.weight directly, so a LoRA adapter there would never train")


def is_all_linear(target_modules: Targets) -> bool:
    """PEFT's shorthand: the string all-linear, any case (a list holding it names a module)."""
    return isinstance(target_modules, str) and target_modules.lower() == ALL_LINEAR


@dataclass(frozen=True)
class Adapted:
    """What PEFT adapts: linear groups cut to their matched modules, fused parameters with their rank factor."""

    groups: tuple[LinearGroup, ...]
    params: tuple[tuple[FusedParam, int], ...]
    problem: tuple[str, str] | None  # (what, fix) when PEFT would refuse it, or it would not train

    def trainable(self, r: int) -> int:
        linear = sum(r * (g.d_in + g.d_out) * g.count for g in self.groups)
        fused = 0
        for p, factor in self.params:
            experts, dims = (p.shape[0], p.shape[1:]) if len(p.shape) == 3 else (1, p.shape)
            fused += factor * r * experts * sum(dims)
        return linear + fused


def _matches(target_modules: Targets, path: str, is_head: bool) -> bool:
    """Whether PEFT adapts the module named ``path`` (peft.tuners.tuners_utils.check_target_module_exists)."""
    if is_all_linear(target_modules):
        return not is_head
    if isinstance(target_modules, str):
        return re.fullmatch(target_modules, path) is not None
    return any(path == key or path.endswith("." + key) for key in target_modules)


def leaf_names(info: Inventory) -> list[str]:
    """The distinct last components of the model's linear layers but the head (q_proj, ...), and of the old
    per-expert names PEFT maps onto fused tensors (gate_proj, ...), in order."""
    linear = [g.name for g in info.linear_groups if not g.is_output_head]
    return list(dict.fromkeys(linear + [old for old, _ in info.peft_moe_targets]))


def _fix(info: Inventory) -> str:
    return f"name layers of {info.name} ({', '.join(leaf_names(info))}) in a list, or use all-linear"


def _regex_leaves(info: Inventory, pattern: str) -> set[str]:
    """A regex resolved to leaf names as PEFT does for an MoE conversion (_resolve_string_target_modules)."""
    keys = [p for g in info.linear_groups for p in g.paths] + [p.path for p in info.fused_params]
    found = {k.rsplit(".", 1)[-1] for k in keys if re.fullmatch(pattern, k)}
    for old, new in info.peft_moe_targets:
        for p in info.fused_params:
            container = p.path.rsplit(".", 1)[0]
            if p.path.endswith("." + new.rsplit(".", 1)[-1]) and re.fullmatch(pattern, f"{container}.{old}"):
                found.add(old)
                break
    return found


def _moe_conversion(info: Inventory, target_modules: Targets) -> tuple[Targets, dict[str, int], tuple[str, str] | None]:
    """(module targets left, {fused parameter name: rank factor}, problem): PEFT's _convert_peft_config_moe."""
    if not info.peft_moe_targets:
        return target_modules, {}, None
    mapping = dict(info.peft_moe_targets)
    if is_all_linear(target_modules):
        names = {g.name for g in info.linear_groups if not g.is_output_head} | set(mapping)
    elif isinstance(target_modules, str):
        names = _regex_leaves(info, target_modules)
        if not names:
            return target_modules, {}, None  # PEFT leaves it to its not-found error
    else:
        names = set(target_modules)
    fused = {new: set(olds) for new, olds in info.peft_moe_fused}
    present: dict[str, set[str]] = {new: set() for new in fused}
    params: dict[str, int] = {}
    remaining: list[str] = []
    for name in sorted(names):
        hit = next(((old, new) for old, new in mapping.items() if name == old or name.endswith("." + old)), None)
        if hit is None:
            remaining.append(name)
            continue
        params[hit[1]] = 1
        present.setdefault(hit[1], set()).add(hit[0])
    for new, olds in fused.items():
        if 0 < len(present[new]) < len(olds):
            missing, have = sorted(olds - present[new]), sorted(present[new])
            return remaining, params, (f"target_modules {', '.join(have)} without {', '.join(missing)}: PEFT adapts "
                                       f"them as one fused tensor ({new}) in {info.name}",
                                       f"target {', '.join(sorted(olds))} together, or neither")
        if len(present[new]) == len(olds) > 1:
            params[new] = len(olds)  # PEFT's rank_pattern: the fused tensor gets r × the projections it holds
    return remaining, params, None


def _fused_hits(info: Inventory, params: dict[str, int]) -> tuple[tuple[FusedParam, int], ...]:
    names = sorted(params)
    return tuple((p, params[next(n for n in names if p.path == n or p.path.endswith("." + n))])
                 for p in info.fused_params if any(p.path == n or p.path.endswith("." + n) for n in names))


def _unknown(info: Inventory, target_modules: Sequence[str]) -> list[str]:
    paths = [(p, g.is_output_head) for g in info.linear_groups for p in g.paths]
    olds = [old for old, new in info.peft_moe_targets
            if any(p.path.endswith("." + new) or p.path == new for p in info.fused_params)]
    return [k for k in target_modules
            if not any(_matches([k], p, head) for p, head in paths) and not any(k == o or k.endswith("." + o)
                                                                                  for o in olds)]


def adapted(info: Inventory, target_modules: Targets) -> Adapted:
    """What PEFT adapts on ``info`` for ``target_modules``, and whether it is a problem (see the module docstring).
    Memoised: recommend() and the generated docs size the same adapters thousands of times."""
    key = target_modules if isinstance(target_modules, str) else tuple(target_modules)
    return _adapted(info, key)


@functools.lru_cache(maxsize=256)
def _adapted(info: Inventory, target_modules: str | tuple[str, ...]) -> Adapted:
    if isinstance(target_modules, str) and not is_all_linear(target_modules):
        try:
            re.compile(target_modules)
        except re.error as exc:
            return Adapted((), (), (f"target_modules pattern {target_modules!r} is not a regular expression ({exc})",
                                    _regex_fix(info)))
    elif not isinstance(target_modules, str):
        unknown = _unknown(info, target_modules)
        if unknown:
            return Adapted((), (), (f"target_modules {', '.join(map(repr, unknown))}: no layer of {info.name} has "
                                    "that name", _fix(info)))
    modules, params, problem = _moe_conversion(info, target_modules)
    groups = []
    for g in info.linear_groups:
        hit = tuple(p for p in g.paths if _matches(modules, p, g.is_output_head))
        if hit:
            groups.append(replace(g, count=len(hit), paths=hit))
    fused = _fused_hits(info, params)
    if problem is None and not groups and not fused:
        problem = (f"target_modules pattern {target_modules!r} matches no layer of {info.name}", _regex_fix(info))
    if problem is None and any(g.is_output_head for g in groups):
        problem = HEAD_PROBLEM, f"leave the head out ({', '.join(leaf_names(info))} or all-linear)"
    return Adapted(tuple(groups), fused, problem)


def _regex_fix(info: Inventory) -> str:
    example = next((p for g in info.linear_groups for p in g.paths), "model.layers.0.self_attn.q_proj")
    return ("a single string other than all-linear is a regular expression the full module name must match "
            f"(e.g. {example}); {_fix(info)}")


def lora_target_problem(info: Inventory, target_modules: Targets) -> tuple[str, str] | None:
    """(what is wrong, how to fix it) with ``target_modules`` for this model, or None."""
    return adapted(info, target_modules).problem
