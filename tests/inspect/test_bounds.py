"""The gate's bounds: exact one-sided Clopper–Pearson lower bounds, their coverage on the project's labelled corpora,
the tallies per reward and verdict field, and the floor's "read N more" reasons."""

from __future__ import annotations

import json
import random
from pathlib import Path
from types import SimpleNamespace

import pytest

from finetune.inspect import bounds as B
from finetune.rewards.lib import rewards_answers as A
from finetune.rewards.lib.rewards_meta import RewardMeta

DATA = Path(__file__).resolve().parents[1] / "data"


def test_lower_bound_is_the_exact_clopper_pearson_value():
    # all n agree: the bound is alpha^(1/n) exactly (Beta(n, 1) quantile)
    for n in (10, 51, 59, 100):
        assert B.lower_bound(n, n) == pytest.approx(0.05 ** (1 / n), rel=1e-9)
    assert B.lower_bound(10, 10) == pytest.approx(0.741, abs=5e-4)  # 10 correct answers read bound recall at ~74 %
    assert B.lower_bound(0, 7) == 0.0 and B.lower_bound(0, 0) is None
    # one failure in 20: P(X >= 19 | p) = 0.05 at the bound
    p = B.lower_bound(19, 20)
    assert p is not None and p ** 20 + 20 * p ** 19 * (1 - p) == pytest.approx(0.05, rel=1e-6)


def test_more_needed_is_the_least_count_that_reaches_the_floor():
    assert B.more_needed(0, 0, 0.95) == 59  # a 95 % floor needs 59 read positives, all agreeing
    assert B.more_needed(58, 58, 0.95) == 1 and B.more_needed(59, 59, 0.95) == 0
    k = B.more_needed(19, 20, 0.9)
    assert k is not None and k > 0
    assert B.lower_bound(19 + k, 20 + k) >= 0.9 > B.lower_bound(19 + k - 1, 20 + k - 1)  # type: ignore[operator]
    assert B.more_needed(5, 5, 1.0) is None


def _boxed_reward(row: dict) -> bool:
    """A plain boxed-answer reward (the project's own extraction, canonical numbers): wrong on some corpus rows,
    which is what a bound's coverage is tested on."""
    values, reason = A.final_answers(row["completion"], "boxed")
    if reason != "ok":
        return False
    got, gold = A.canonical_number(values[0]), A.canonical_number(str(row["gold"]))
    return got is not None and got == gold or A.key(values[0]) == A.key(str(row["gold"]))


def _population() -> list[tuple[bool, bool]]:
    """(reward passes, reader says correct) on every unambiguous boxed-math row of the labelled corpora."""
    out = []
    for name in ("reward_corpus", "reward_heldout", "reward_external"):
        for line in (DATA / f"{name}.jsonl").read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if row["kind"] == "boxed_math" and not row["ambiguous"]:
                out.append((_boxed_reward(row), bool(row["label"]["correct"])))
    return out


@pytest.mark.parametrize("size", [50, 100])  # inspection.min_read's range: the readings the gate bounds
def test_the_bound_covers_the_rewards_true_recall_and_precision_on_the_corpora(size):
    population = _population()
    tp = sum(p and c for p, c in population)
    true_recall = tp / sum(c for _, c in population)
    true_precision = tp / sum(p for p, _ in population)
    assert 0.5 < true_recall < 1 and 0.5 < true_precision < 1  # the reward is wrong somewhere: coverage can fail
    rng = random.Random(size)
    draws, covered = 1000, {"recall": 0, "precision": 0}
    for _ in range(draws):
        reading = rng.sample(population, size)
        t = B.Tally("r", "correct", true_positive=sum(p and c for p, c in reading),
                    false_positive=sum(p and not c for p, c in reading),
                    false_negative=sum(c and not p for p, c in reading))
        e = B.bound_entry(t)
        covered["recall"] += e["recall_lower"] is None or e["recall_lower"] <= true_recall
        covered["precision"] += e["precision_lower"] is None or e["precision_lower"] <= true_precision
    assert covered["recall"] / draws >= B.LEVEL and covered["precision"] / draws >= B.LEVEL, covered


def _meta(name: str, role: str, gated: bool = False) -> RewardMeta:
    return RewardMeta(name=name, type="exact_match", role=role, weight=1.0, threshold=0.5, min=0.0, max=1.0,
                      gated=gated, episode=False)


def test_tallies_count_per_reward_and_field_and_respect_format_gating():
    metas = [_meta("fmt", "format"), _meta("acc", "correctness", gated=True)]
    rows = {
        "a": {"rewards": {"fmt": 1.0, "acc": 1.0}, "passes": {"fmt": True, "acc": True}, "all_pass": True},
        "b": {"rewards": {"fmt": 1.0, "acc": 0.0}, "passes": {"fmt": True, "acc": False}, "all_pass": False},
        "c": {"rewards": {"fmt": 0.0, "acc": 0.0}, "passes": {"fmt": False, "acc": False}, "all_pass": False},
    }
    read = [SimpleNamespace(id="a", accept=True, correct=True, well_formed=True),
            SimpleNamespace(id="b", accept=True, correct=True, well_formed=True),  # acc misses it: a false negative
            SimpleNamespace(id="c", accept=False, correct=True, well_formed=False)]  # gated: agreement
    by = {(t.reward, t.field): t for t in B.tallies(read, rows, metas)}
    acc = by[("acc", "correct")]
    assert (acc.true_positive, acc.false_negative, acc.false_positive, acc.agreed) == (1, 1, 0, 2)
    assert by[("fmt", "well_formed")].agreed == 3 and by[(B.ALL, "accept")].false_negative == 1
    entry = B.bound_entry(acc, min_recall=0.9)
    assert entry["read_positives"] == 2 and entry["accepted"] == 1 and entry["more_positives"] > 0
    assert B.line(entry).startswith("'acc' on correct: recall ≥ 2.5 % on 2 read correct answers; precision ≥ 5.0 %")


def test_a_floor_the_reading_cannot_support_says_how_many_more_of_which_kind():
    t = B.Tally("correctness", "correct", agreed=60, true_positive=10)
    reasons = B.floor_reasons([B.bound_entry(t, min_recall=0.95, min_precision=0.7)])
    assert reasons == [
        "'correctness' on correct: recall ≥ 74.1 % is below inspection.min_recall 95.0 %: read 49 more correct "
        "answers, with no disagreement among them"]  # precision ≥ 74.1 % meets its 70 % floor
    assert B.floor_reasons([B.bound_entry(t)]) == []  # no floor: report only
