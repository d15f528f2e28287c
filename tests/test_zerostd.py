"""finetune.zerostd predicts frac_reward_zero_std as TRL 1.16 logs it (fp32 totals, nanstd, isclose to 0).

The reference is TRL's own code path, rebuilt here from trl's public pieces (``trl.trainer.utils.nanstd``,
float32 ``rewards_per_func``, ``nansum`` with the weights, ``torch.isclose``), and brute-force enumeration of
the groups; nothing is compared with a hand-written expected number only.
"""

from __future__ import annotations

import itertools
import math
import random

import pytest

from finetune import zerostd

# torch and TRL are imported by the tests that use them, not at collection (every xdist worker collects
# every file: TRL's import alone is seconds of CPU)


def trl_zero_std(groups: list[list[list[float | None]]], weights: list[float]) -> list[bool]:
    """TRL 1.16's _generate_and_score_completions on a batch of groups (sum_then_normalize, scale_rewards
    'group'): rewards_per_func (B*G, F) float32, weighted nansum, all-None rows NaN, nanstd per group, isclose."""
    import torch
    from trl.trainer.utils import nanstd

    g = len(groups[0])
    flat = [[math.nan if v is None else v for v in row] for group in groups for row in group]
    per_func = torch.tensor(flat, dtype=torch.float32)
    rewards = (per_func * torch.tensor(weights, dtype=torch.float32).unsqueeze(0)).nansum(dim=1)
    rewards[torch.isnan(per_func).all(dim=1)] = torch.nan
    std = nanstd(rewards.view(-1, g), dim=1)
    return torch.isclose(std, torch.zeros_like(std)).tolist()


def _trl_is_zero(group: list[list[float | None]], weights: list[float]) -> bool:
    return trl_zero_std([group], weights)[0]


def test_std_is_trl_nanstd_bit_for_bit():
    import torch
    from trl.trainer.utils import nanstd

    gen = torch.Generator().manual_seed(1)
    x = torch.rand(64, 8, generator=gen, dtype=torch.float32)
    x[3, 2] = math.nan
    x[5, :7] = math.nan  # one value left: TRL's std is NaN there
    assert torch.equal(torch.nan_to_num(zerostd.trl_nanstd(x), nan=-1.0), torch.nan_to_num(nanstd(x, dim=1), nan=-1.0))


def test_equal_totals_count_only_when_fp32_makes_them_exactly_equal():
    # format 0.2 + correct 1.0 on every completion: equal totals, but an fp32 std residue above 1e-8
    residue = [[1.0, 1.0]] * 8
    assert _trl_is_zero(residue, [0.2, 1.0]) is False
    assert zerostd.group_zero_std(residue, [0.2, 1.0], 8) == 0.0
    # weights exact in binary: TRL counts the same group as zero std, and so does the prediction
    assert _trl_is_zero(residue, [0.25, 1.0]) is True
    assert zerostd.group_zero_std(residue, [0.25, 1.0], 8) == 1.0
    assert zerostd.group_zero_std([[1.0, 1.0]] * 7 + [[1.0, 0.0]], [0.25, 1.0], 8) == 0.0


def test_none_is_nan_and_an_unscorable_row_is_left_out():
    weights = [0.5, 1.0]
    group = [[1.0, None]] * 4 + [[None, None]]  # the unscorable completion is NaN, excluded from the std
    assert zerostd.group_zero_std(group, weights, 5) == float(_trl_is_zero(group, weights)) == 1.0


@pytest.mark.parametrize(("k", "g"), [(6, 4), (4, 8), (5, 5)])
def test_enumerated_share_is_the_brute_force_share_of_groups(k, g):
    rng = random.Random(k * 10 + g)
    scores = [[float(rng.random() < 0.8), float(rng.random() < 0.7)] for _ in range(k)]
    if g <= k:
        groups = list(itertools.combinations(scores, g))
    else:  # with replacement from the k: every ordered draw equally likely
        groups = list(itertools.product(scores, repeat=g))
    want = sum(trl_zero_std([list(gr) for gr in groups], [0.25, 1.0])) / len(groups)
    assert zerostd.group_zero_std(scores, [0.25, 1.0], g) == pytest.approx(want)


def test_sampled_share_is_close_to_the_enumerated_one(monkeypatch):
    scores = [[1.0, 1.0]] * 10 + [[1.0, 0.0]] * 2
    exact = zerostd.group_zero_std(scores, [0.25, 1.0], 6)  # C(12, 6) = 924 groups, enumerated
    assert exact == pytest.approx(math.comb(10, 6) / math.comb(12, 6))
    monkeypatch.setattr(zerostd, "MAX_ENUMERATED", 10)
    sampled = zerostd.group_zero_std(scores, [0.25, 1.0], 6)
    assert sampled == pytest.approx(exact, abs=0.03) and sampled == zerostd.group_zero_std(scores, [0.25, 1.0], 6)


def test_prediction_is_the_mean_over_prompts():
    all_right, mixed = [[1.0, 1.0]] * 4, [[1.0, 1.0], [1.0, 0.0], [0.0, 0.0], [1.0, 1.0]]
    assert zerostd.predicted_zero_std([all_right, mixed], [0.25, 1.0], 4) == 0.5
    assert zerostd.predicted_zero_std([], [0.25, 1.0], 4) is None


def test_a_note_when_fp32_rounding_hides_prompts_at_0_of_k_and_k_of_k():
    """Weights 0.2 + 1.0: equal totals are not exact in float32, so TRL's zero-std count (the prediction) stays
    near 0 while a quarter of the prompts teach nothing; score's output says so."""
    from finetune.inspect.score import base_success, zero_std_note

    scores = {0: [[1.0, 1.0]] * 8, 1: [[1.0, 0.0]] * 4 + [[1.0, 1.0]] * 4, 2: [[1.0, 0.0]] * 4 + [[1.0, 1.0]] * 4,
              3: [[1.0, 0.0]] * 3 + [[1.0, 1.0]] * 5}
    succ = {row: [s[1] == 1.0 for s in rows] for row, rows in scores.items()}
    base = base_success(succ, 8, "samples", 1.0, scores, [0.2, 1.0])
    assert base["share_all"] == 0.25
    assert base["predicted_frac_reward_zero_std"] < 0.2  # TRL's float32 residue hides the k/k prompt
    note = zero_std_note(base)
    assert note and "25% of prompts are at 0/k or k/k" in note and "0/k + k/k share" in note
    exact = dict(base, predicted_frac_reward_zero_std=0.25)
    assert zero_std_note(exact) is None
