"""Load a run's rendered rewards.py by file path and call its functions exactly as TRL does.

TRL 1.16 calls ``f(prompts=..., completions=..., completion_ids=..., **columns, trainer_state=...,
log_extra=..., log_metric=...)`` with every dataset column as a keyword list; conversational
completions arrive as ``[{"role": "assistant", "content": ...}]``. Scoring the same way means the
gate judges the very calls training will make.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import itertools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from finetune import rundir
from finetune.errors import UserError
from finetune.inspect.samplesio import trajectory_text
from finetune.rewards.lib.rewards_meta import RewardMeta

_counter = itertools.count()


@dataclass
class RewardModule:
    """A run's loaded rewards.py: its rewards as rewards.py declares them (REWARD_META, in spec order) and the
    functions TRL calls, by reward name."""

    path: Path
    module: Any
    rewards: list[RewardMeta]
    funcs: dict[str, Callable[..., Any]] = field(repr=False)

    def disable_caches(self) -> None:
        fn = getattr(self.module, "disable_caches", None)
        if callable(fn):
            fn()

    def by_role(self, *roles: str) -> list[RewardMeta]:
        return [r for r in self.rewards if r.role in roles]

    def score(self, reward: RewardMeta, items: list[dict[str, Any]], batch_size: int = 32,
              whys: list[str | None] | None = None) -> tuple[list[float | None], list[str | None]]:
        """:func:`score_items` with ``reward``'s function."""
        return score_items(self.funcs[reward.name], reward.name, items, batch_size, whys)


def load_rewards(run_dir: str | Path, spec_reward_names: list[str] | None = None) -> RewardModule:
    """Import ``run_dir/rewards.py`` under a unique module name; check it exposes the interface."""
    run_dir = Path(run_dir).resolve()
    path = run_dir / rundir.REWARDS
    if not path.is_file():
        raise UserError(f"no {rundir.REWARDS} in {run_dir}", where=str(run_dir),
                        fix="run `finetune rewards render SPEC` first")
    # Helpers rendered beside rewards.py (rewards_*.py) are imported by plain name; drop any copy a
    # previous run directory left in sys.modules so this run gets its own.
    for helper in run_dir.glob("rewards_*.py"):
        sys.modules.pop(helper.stem, None)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    name = f"_finetune_run_rewards_{digest}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None  # a .py path always has a source loader
    module = importlib.util.module_from_spec(spec)
    # The run dir is NOT put on sys.path (train.py does not either): rewards.py loads its helpers by path,
    # and a module left in the run dir (a math_verify.py, a sympy/ folder) must not shadow a dependency.
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # any import-time failure of user code is bad input, not a crash
        raise UserError(f"cannot import: {type(exc).__name__}: {exc}", where=str(path),
                        fix="fix the reward module (or re-render it with `finetune rewards render`)") from None
    for attr in ("REWARD_FUNCS", "REWARD_META"):
        if not hasattr(module, attr):
            raise UserError(f"{rundir.REWARDS} does not define {attr}", where=str(path),
                            fix="re-render it with `finetune rewards render SPEC`")
    funcs, metas = list(module.REWARD_FUNCS), list(module.REWARD_META)
    if len(funcs) != len(metas) or not funcs:
        raise UserError("REWARD_FUNCS and REWARD_META differ in length (or are empty)",
                        where=str(path), fix="re-render it with `finetune rewards render SPEC`")
    rewards: list[RewardMeta] = []
    for i, (func, meta) in enumerate(zip(funcs, metas)):
        where = f"{path}: REWARD_META[{i}]"
        try:
            rewards.append(RewardMeta.of(meta))  # the run folder's copy of the class, read field by field
        except (TypeError, ValueError) as exc:
            raise UserError(str(exc), where=where, fix="re-render rewards.py with `finetune rewards render SPEC`"
                            ) from None
        if not callable(func):
            raise UserError("REWARD_FUNCS entry is not callable", where=where, fix="re-render rewards.py")
    names = [r.name for r in rewards]
    if spec_reward_names is not None and names != list(spec_reward_names):
        raise UserError(f"rewards.py defines {names} but the spec names {list(spec_reward_names)}",
                        where=str(path), fix="re-render rewards.py from the current spec")
    if len(set(names)) != len(names):
        raise UserError(f"REWARD_META names a reward twice: {names}", where=str(path), fix="re-render rewards.py")
    return RewardModule(path=path, module=module, rewards=rewards, funcs=dict(zip(names, funcs)))


def as_completion(text: str, conversational: bool, trajectory: list[dict[str, Any]] | None = None) -> Any:
    """The completion as TRL passes it to a reward. A multi-turn rollout goes as its messages (assistant turns
    with ``tool_calls``, ``tool`` results), never as the review's canonical text: there a tool result that
    holds a ``<tool_call>`` block or a number would read as the model's own call or answer. Only while the
    text is still that rollout's: a probe that swaps the text of a sample keeps its own completion."""
    if trajectory and text == trajectory_text(trajectory):
        return trajectory
    return [{"role": "assistant", "content": text}] if conversational else text


def _normalise(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return float(value)
    try:
        return float(value)  # int, float, numpy / torch scalars
    except (TypeError, ValueError):
        raise TypeError(f"returned {type(value).__name__} {value!r:.60}, not a number or None") from None


def _call(func: Callable[..., Any], items: list[dict[str, Any]], extra_out: dict[str, Any] | None = None
          ) -> list[float | None]:
    columns: dict[str, list[Any]] = {}
    keys = sorted({k for it in items for k in it.get("columns", {})} - {"prompts", "completions"})
    for k in keys:
        columns[k] = [it.get("columns", {}).get(k) for it in items]
    extra: dict[str, list[Any]] = {}
    metrics: dict[str, float] = {}
    out = func(
        prompts=[it["prompt"] for it in items],
        completions=[as_completion(it["completion"], bool(it.get("conversational")), it.get("trajectory"))
                     for it in items],
        completion_ids=None,
        **columns,
        trainer_state=None,
        log_extra=lambda column, values: extra.setdefault(column, list(values)),
        log_metric=lambda name, value: metrics.__setitem__(name, value),
    )
    if asyncio.iscoroutine(out):  # TRL also accepts async reward functions
        out = asyncio.run(out)
    if out is None or not hasattr(out, "__len__") or isinstance(out, (str, bytes, dict)):
        raise TypeError(f"returned {type(out).__name__}, not a list with one value per completion")
    out = list(out)
    if len(out) != len(items):
        raise TypeError(f"returned {len(out)} values for {len(items)} completions")
    if extra_out is not None:
        extra_out.update(extra)
    return [_normalise(v) for v in out]


def _whys(name: str, extra: dict[str, Any], n: int) -> list[str | None]:
    """The per-row reason ids a reward logged as ``<name>/why`` (None where it logged none)."""
    got = extra.get(f"{name}/why")
    if not isinstance(got, list) or len(got) != n:
        return [None] * n
    return [w if isinstance(w, str) else None for w in got]


def _raise_refusal(name: str, exc: Exception) -> None:
    """Agent-written code the sandbox cannot run (or that does not import in it) is refused in one line, never
    scored as a batch of None: it must not run at all outside the sandbox."""
    if getattr(exc, "agent_code_refused", False):
        raise UserError(str(exc), where=f"reward '{name}'", fix=str(getattr(exc, "fix", ""))) from None


def score_items(func: Callable[..., Any], name: str, items: list[dict[str, Any]], batch_size: int = 32,
                whys: list[str | None] | None = None) -> tuple[list[float | None], list[str | None]]:
    """Score ``items`` (dicts with prompt, completion, conversational, columns) with one reward function
    (``name``: the reward's, which its ``<name>/why`` column carries).

    Returns (values, errors): a batch that raises is re-scored one item at a time so an exception
    is attributed to the completions that cause it (TRL would crash the whole training step). When
    ``whys`` is a list it is extended with the reason id the reward logged per item (``<name>/why``).
    """
    values: list[float | None] = []
    errors: list[str | None] = []
    for start in range(0, len(items), batch_size):
        batch = items[start:start + batch_size]
        extra: dict[str, Any] = {}
        try:
            values.extend(_call(func, batch, extra))
            errors.extend([None] * len(batch))
            if whys is not None:
                whys.extend(_whys(name, extra, len(batch)))
            continue
        except Exception as exc:
            _raise_refusal(name, exc)
        for it in batch:
            extra = {}
            try:
                values.extend(_call(func, [it], extra))
                errors.append(None)
            except Exception as exc:
                values.append(None)
                errors.append(f"{type(exc).__name__}: {exc}"[:300])
            if whys is not None:
                whys.extend(_whys(name, extra, 1))
    return values, errors
