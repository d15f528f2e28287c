"""The filter's small statistics (no model): doctests, the Wilson interval, the dispersion index, the check subset."""

from __future__ import annotations

import doctest
import random

import pytest

from finetune import datafilter
from finetune.datafilter import check_subset, dispersion, wilson
from finetune.demo import report as demo_report
from finetune.demo import task as demo_task


@pytest.mark.parametrize("module", [datafilter, demo_task, demo_report])
def test_doctests(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


def test_bench_filter_sign_test(repo_root):
    """The benchmark that carries the filter's effect claim prints a sign test over its seeds."""
    import importlib.util

    loaded = importlib.util.spec_from_file_location("bench_filter", repo_root / "benchmarks" / "bench_filter.py")
    assert loaded is not None and loaded.loader is not None
    bench = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(bench)
    # the docstring's examples run directly: testmod would skip them when another test has already imported
    # benchmarks/bench_filter.py under its own name (bench_tooldemo does), as inspect.getmodule then names that one
    runner = doctest.DocTestRunner()
    for test in doctest.DocTestFinder().find(bench.sign_test_p, "sign_test_p", globs=vars(bench)):
        runner.run(test)
    assert runner.tries > 0 and runner.failures == 0
    assert bench.sign_test_p(8, 8) < 0.05 < bench.sign_test_p(2, 2)  # two seeds can never show the effect


def test_wilson_covers_the_rate_and_narrows_with_n():
    lo, hi = wilson(16, 64)
    assert lo < 0.25 < hi and hi - lo < 0.25
    assert wilson(160, 640)[1] - wilson(160, 640)[0] < hi - lo
    assert wilson(0, 0) == (0.0, 1.0) and wilson(64, 64)[1] == 1.0


def test_dispersion_is_about_one_for_equally_hard_prompts_and_large_for_tiers():
    rng = random.Random(0)
    k = 8
    same = [sum(rng.random() < 0.3 for _ in range(k)) for _ in range(4000)]
    assert dispersion(same, k)["index"] == pytest.approx(1.0, abs=0.1)
    tiers = [sum(rng.random() < p for _ in range(k)) for p in (0.02, 0.3, 0.97) for _ in range(1000)]
    d = dispersion(tiers, k)
    assert d["index"] > 4
    assert d["expected_never"] < sum(c == 0 for c in tiers) / 3  # far more 0/k than luck alone gives
    assert dispersion([0, 0, 0], k) is None and dispersion([k, k], k) is None


def test_check_subset_is_seeded_sorted_and_bounded():
    kept = list(range(0, 300, 3))
    a = check_subset(kept, 10, 3407)
    assert a == check_subset(kept, 10, 3407) and a == sorted(a) and set(a) <= set(kept) and len(a) == 10
    assert a != check_subset(kept, 10, 3408)
    assert check_subset(kept[:5], 64, 0) == kept[:5]


def test_tiers_cover_every_first_digit_once_and_each_mix_sums_to_one():
    recipe = demo_task.WarmupRecipe()
    firsts = "".join(f for f, _ in recipe.tiers.values())
    assert sorted(firsts) == list("0123456789")
    for _, mix in recipe.tiers.values():
        assert sum(mix.values()) == pytest.approx(1.0)
    assert recipe.tier_of("071") == "mastered" and recipe.tier_of("471") == "partial"
    assert recipe.tier_of("971") == "beyond"
    # the beyond tier is never taught the copy: its warm-up targets are never the digits themselves
    rng = random.Random(0)
    assert all(demo_task.warmup_target("972", rng, recipe.mix_for("972"))[1] != "<answer>972</answer>"
               for _ in range(500))
