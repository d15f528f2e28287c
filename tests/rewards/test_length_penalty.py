"""Length-penalty wrapper: TRL's DAPO soft overlong punishment, scaled to an ordering-safe floor."""

from __future__ import annotations

import pytest
from reward_helpers import reward_specs

from finetune.rewards.specs import ordering_margin, penalty_floors


def test_matches_trl_soft_overlong_when_unbounded(render):
    from trl.rewards import get_soft_overlong_punishment

    mod = render([{"name": "overlong", "type": "length_penalty", "max_completion_length": 100,
                   "overlong_buffer": 20}])
    ids = [[0] * n for n in (10, 80, 85, 90, 100, 101, 500)]
    expected = get_soft_overlong_punishment(max_completion_len=100, soft_punish_cache=20)(completion_ids=ids)
    got = mod.overlong(prompts=["Q"] * len(ids), completions=["x"] * len(ids), completion_ids=ids)
    assert got == pytest.approx(expected)
    assert mod.REWARD_META[0].min == -1.0 and mod.REWARD_META[0].role == "shaping"


def test_budget_mode_and_length_without_ids(render):
    mod = render([{"name": "budget", "type": "length_penalty", "mode": "budget", "budget": 50,
                   "overlong_buffer": 50}])
    ids = [[0] * n for n in (50, 75, 100, 1000)]
    assert mod.budget(prompts=["Q"] * 4, completions=["x"] * 4, completion_ids=ids) == pytest.approx(
        [0.0, -0.5, -1.0, -1.0])
    # Outside the trainer (no completion_ids) the length is estimated as characters / 4.
    assert mod.budget(prompts=["Q"] * 2, completions=["x" * 200, "x" * 400]) == pytest.approx([0.0, -1.0])


def test_floor_is_bounded_by_the_ordering_margin(render):
    entries = [{"name": "format", "type": "format", "weight": 0.1},
               {"name": "correct", "type": "exact_match", "weight": 2.0},
               {"name": "overlong", "type": "length_penalty", "weight": 3.0, "max_completion_length": 10,
                "overlong_buffer": 5}]
    specs = reward_specs(entries)
    assert ordering_margin(specs) == pytest.approx(0.1)
    floor = penalty_floors(specs)["overlong"]
    assert floor == pytest.approx(-0.5 * 0.1 / 3.0)
    mod = render(entries)
    assert mod.overlong(prompts=["Q"], completions=["x"], completion_ids=[[0] * 99])[0] == pytest.approx(floor)
    assert mod.REWARD_META[2].min == pytest.approx(floor)


def test_wraps_penalises_only_where_the_wrapped_reward_passes(render):
    mod = render([{"name": "correct", "type": "exact_match"},
                  {"name": "long_correct", "type": "length_penalty", "wraps": "correct", "max_completion_length": 10,
                   "overlong_buffer": 5}])
    kwargs = {"prompts": ["Q"] * 3, "completions": ["<answer>1</answer>", "<answer>2</answer>", "<answer>1</answer>"],
              "answer": ["1", "1", "1"], "completion_ids": [[0] * 50, [0] * 50, [0] * 2]}
    assert mod.correct(**kwargs) == [1.0, 0.0, 1.0]
    assert mod.long_correct(**kwargs) == pytest.approx([-1.0 * abs(mod.REWARD_META[1].min), 0.0, 0.0])


def test_property_bounded_monotone_and_trl_shaped(render):
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from trl.rewards import get_soft_overlong_punishment

    mod = render([{"name": "format", "type": "format", "weight": 0.3},
                  {"name": "overlong", "type": "length_penalty", "max_completion_length": 200, "overlong_buffer": 50,
                   "weight": 2.0}])
    floor = mod.REWARD_META[1].min
    assert floor == pytest.approx(-0.5 * 0.3 / 2.0)
    reference = get_soft_overlong_punishment(max_completion_len=200, soft_punish_cache=50)

    @settings(max_examples=100, deadline=None)
    @given(lengths=st.lists(st.integers(0, 1000), min_size=1, max_size=20))
    def check(lengths):
        ids = [[0] * n for n in lengths]
        got = mod.overlong(prompts=["Q"] * len(ids), completions=["x"] * len(ids), completion_ids=ids)
        assert all(floor - 1e-12 <= g <= 0.0 for g in got)
        assert got == pytest.approx([abs(floor) * r for r in reference(completion_ids=ids)])
        ordered = [g for _, g in sorted(zip(lengths, got))]
        assert all(a >= b for a, b in zip(ordered, ordered[1:]))  # longer never scores higher

    check()
