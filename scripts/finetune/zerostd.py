"""``frac_reward_zero_std`` predicted as TRL 1.16 logs it: the one prediction Phase 1 and the filter make.

TRL (``GRPOTrainer._generate_and_score_completions``, ``multi_objective_aggregation
'sum_then_normalize'``, ``scale_rewards`` 'group' or 'none' — every variant this project renders)
builds ``rewards_per_func`` as float32 (None → NaN), sums ``rewards_per_func * reward_weights``
with ``nansum`` (a row where every reward is None becomes NaN), takes
``trl.trainer.utils.nanstd`` of each group of ``num_generations`` totals, and logs the share of
groups where ``torch.isclose(std, 0)`` (atol 1e-8). Equal totals that are not exact in binary
(0.2 + 1.0) leave an fp32 rounding residue of ~1e-8..1e-7 in that std, so TRL does not count such a
group: a prediction on exact arithmetic would disagree with the logged value. Everything here is
computed in torch float32 with TRL's operations, in TRL's order (tests/test_zerostd.py checks the
std against ``trl.trainer.utils.nanstd`` itself).

From k scored completions of a prompt the share of its GRPO groups of G with zero std is the share
of G-subsets of the k (without replacement, G ≤ k; with replacement from the k, G > k) whose
TRL std is zero: enumerated exactly (multisets weighted by their multinomial probability) while
there are at most :data:`MAX_ENUMERATED` of them, else estimated on :data:`SAMPLED_GROUPS` random
groups drawn with a fixed seed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

MAX_ENUMERATED = 20_000
SAMPLED_GROUPS = 4096
SAMPLING_SEED = 0

Scores = Sequence[Sequence[float | None]]  # per completion: one score per reward function, spec order


def trl_rewards(scores: Scores, weights: Sequence[float]) -> torch.Tensor:
    """(k,) float32 weighted totals of k completions, as TRL's ``rewards`` before the group std."""
    import torch

    per_func = torch.tensor([[math.nan if v is None else float(v) for v in row] for row in scores],
                            dtype=torch.float32).reshape(len(scores), len(weights))
    w = torch.tensor(list(weights), dtype=torch.float32)
    rewards = (per_func * w.unsqueeze(0)).nansum(dim=1)
    rewards[torch.isnan(per_func).all(dim=1)] = torch.nan  # unscorable: excluded from the group's stats
    return rewards


def trl_nanstd(groups: torch.Tensor) -> torch.Tensor:
    """Std over the last dimension ignoring NaNs, Bessel-corrected: ``trl.trainer.utils.nanstd(x, dim=-1)``."""
    import torch

    mean = torch.nanmean(groups, dim=-1, keepdim=True)
    variance = torch.nanmean((groups - mean) ** 2, dim=-1, keepdim=True)
    count = torch.sum(~torch.isnan(groups), dim=-1, keepdim=True)
    correction = count / (count - 1)
    correction = torch.where(count > 1, correction, torch.full_like(correction, float("nan")))
    variance *= correction
    return torch.sqrt(variance).squeeze(-1)


def is_std_zero(groups: torch.Tensor) -> torch.Tensor:
    """(n, G) totals → (n,) bool: TRL's ``torch.isclose(std_rewards, torch.zeros_like(std_rewards))``."""
    import torch

    std = trl_nanstd(groups)
    return torch.isclose(std, torch.zeros_like(std))


def _groups(k: int, g: int) -> tuple[list[tuple[int, ...]], list[int], int] | None:
    """Every distinct group of g drawn from k completions, its count of draws and the number of draws
    (integers: the share is one exact division); None when there are more than :data:`MAX_ENUMERATED`."""
    if g <= k:
        if math.comb(k, g) > MAX_ENUMERATED:
            return None
        subsets = list(itertools.combinations(range(k), g))
        return subsets, [1] * len(subsets), len(subsets)
    if math.comb(k + g - 1, g) > MAX_ENUMERATED:
        return None
    multisets = list(itertools.combinations_with_replacement(range(k), g))
    ways = []
    for m in multisets:  # ordered draws giving this multiset: the multinomial coefficient
        n = math.factorial(g)
        for i in set(m):
            n //= math.factorial(m.count(i))
        ways.append(n)
    return multisets, ways, k ** g


def _sampled_groups(k: int, g: int) -> torch.Tensor:
    """:data:`SAMPLED_GROUPS` random groups of g indices into k (fixed seed: the same prediction every run)."""
    import torch

    gen = torch.Generator().manual_seed(SAMPLING_SEED)
    if g > k:
        return torch.randint(0, k, (SAMPLED_GROUPS, g), generator=gen)
    return torch.stack([torch.randperm(k, generator=gen)[:g] for _ in range(SAMPLED_GROUPS)])


def group_zero_std(scores: Scores, weights: Sequence[float], num_generations: int) -> float:
    """The share of GRPO groups of ``num_generations`` completions of one prompt that TRL logs as zero std,
    from that prompt's k scored completions (with G = k: 1.0 or 0.0, TRL's judgement on these k)."""
    import torch

    rewards = trl_rewards(scores, weights)
    k, g = len(scores), num_generations
    drawn = _groups(k, g)
    if drawn is None:
        return float(is_std_zero(rewards[_sampled_groups(k, g)]).float().mean().item())
    index, ways, draws = drawn
    zero = is_std_zero(rewards[torch.tensor(index, dtype=torch.long)])
    return sum(w for w, z in zip(ways, zero.tolist()) if z) / draws


def predicted_zero_std(scores_by_prompt: Sequence[Scores], weights: Sequence[float],
                       num_generations: int) -> float | None:
    """Expected ``frac_reward_zero_std`` over prompts: the mean of :func:`group_zero_std` (None: no prompts)."""
    if not scores_by_prompt:
        return None
    return sum(group_zero_std(s, weights, num_generations) for s in scores_by_prompt) / len(scores_by_prompt)
