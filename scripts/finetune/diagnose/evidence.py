"""What every detector reads and returns: the run (its logs, context and caveats), the trend statistics,
and the :class:`Finding` a check produces."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from finetune import watch
from finetune.diagnose.context import RunContext
from finetune.diagnose.logs import Logs, Series
from finetune.watch import MIN_POINTS

# ----------------------------------------------------------------------------------------------
# statistics


def median(xs: list[float]) -> float:
    return watch.median(xs)


def window_points(n: int) -> int:
    return watch.window(n)


def trend(s: Series) -> dict[str, Any]:
    """Spearman rho / p against the step, Theil-Sen slope, and start/end levels (finetune.watch.trend)."""
    f = s.finite()
    return watch.trend(s.key, f.steps, f.values)


def correlation(a: Series, b: Series) -> dict[str, Any]:
    from scipy import stats  # heavy: only when a length drift is judged

    common = {s: v for s, v in zip(a.steps, a.values) if math.isfinite(v)}
    pairs = [(common[s], v) for s, v in zip(b.steps, b.values) if s in common and math.isfinite(v)]
    if len(pairs) < 3 or len({x for x, _ in pairs}) < 2 or len({y for _, y in pairs}) < 2:
        return {"spearman_rho": 0.0, "p_value": 1.0, "points": len(pairs)}
    rho, p = stats.spearmanr([x for x, _ in pairs], [y for _, y in pairs])
    return {"spearman_rho": float(rho), "p_value": float(p), "points": len(pairs)}


def after_step(s: Series, step: int) -> Series:
    keep = [(a, v) for a, v in zip(s.steps, s.values) if a >= step]
    return Series(s.key, [a for a, _ in keep], [v for _, v in keep])


def second_half(s: Series) -> Series:
    f = s.finite()
    half = len(f) // 2
    return Series(s.key, f.steps[half:], f.values[half:])


def rounded(x: Any, digits: int = 4) -> Any:
    """JSON-safe copy: floats to ``digits`` significant digits, non-finite values to null."""
    if isinstance(x, float):
        return None if not math.isfinite(x) else float(f"{x:.{digits}g}")
    if isinstance(x, dict):
        return {k: rounded(v, digits) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [rounded(v, digits) for v in x]
    return x


# ----------------------------------------------------------------------------------------------
# what a check returns, and what it reads


@dataclass
class Finding:
    """One detector's outcome. ``symptom`` carries name, summary, evidence and the marked window."""

    name: str
    status: str
    why: str
    evidence: dict[str, Any] = field(default_factory=dict)
    window: tuple[int, int] | None = None

    def symptom(self) -> dict[str, Any]:
        out = {"name": self.name, "summary": self.why, "evidence": rounded(self.evidence)}
        if self.window is not None:
            out["window"] = {"from_step": self.window[0], "to_step": self.window[1]}
        return out


class Run:
    """One run's logs and context, the readings several detectors share, and the caveats they add."""

    def __init__(self, logs: Logs, ctx: RunContext):
        self.logs, self.ctx = logs, ctx
        self.caveats: list[str] = list(logs.notes) + list(ctx.notes)

    def correctness_keys(self) -> list[str]:
        return [f"rewards/{n}/mean" for n, role in self.ctx.roles.items()
                if role == "correctness" and self.logs.get(f"rewards/{n}/mean") is not None]

    def correctness_series(self) -> Series | None:
        """The correctness reward (weighted sum when several); None when no reward is known to be correctness."""
        keys = self.correctness_keys()
        if not keys:
            return None
        if len(keys) == 1:
            return self.logs.get(keys[0])
        parts = [self.logs.series[k] for k in keys]  # each logged: correctness_keys() checked
        steps = sorted(set.intersection(*(set(p.steps) for p in parts)))
        values: list[float] = []
        for st in steps:
            values.append(sum(self.weight(k.split("/")[1]) * p.values[p.steps.index(st)] for k, p in zip(keys, parts)))
        return Series("+".join(keys), steps, values)

    def weight(self, name: str) -> float:
        """A reward's weight (its RewardMeta's; 1.0 for one whose role was only named)."""
        meta = self.ctx.meta(name)
        return meta.weight if meta is not None else 1.0

    def reward_scale(self, key: str) -> float:
        """Span of a reward series: from the RewardMeta's min/max when known (weighted, for the total),
        else the observed range; never 0 (finetune.watch.scale)."""
        s = self.logs.get(key)
        return watch.scale(key, {key: (s.steps, s.values)} if s is not None else {}, self.ctx.rewards,
                           self.ctx.named_roles)

    def enough(self, s: Series | None) -> TypeGuard[Series]:
        return s is not None and len(s.finite()) >= MIN_POINTS
