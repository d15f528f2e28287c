"""How good a reward is, with a bound: exact one-sided Clopper–Pearson lower bounds on a reward's precision and
recall against the reading, per reward and per verdict field.

A reading of 50–100 samples with zero disagreements says little about a reward that is wrong on 2–5 % of answers:
with 10 correct answers read, recall is bounded at no better than ~74 % (95 %, one-sided). The gate states the bound
(and, with ``inspection.min_recall`` / ``min_precision``, needs it), so a PASS says how much the reading proves.

The bound is exact only on a uniformly random reading (the samples read are drawn independently of the rewards'
verdicts); an enriched reading serves detection, not the bound.

- recall: of the samples the reader calls positive (correct / well-formed / accepted), the share the reward passes;
- precision: of the samples the reward passes, the share the reader calls positive.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scipy.stats import beta

from finetune.rewards.lib.rewards_meta import RewardMeta

LEVEL = 0.95  # one-sided confidence of every bound the gate states
ALL = "all_pass"  # the `accept` field is compared with every format and correctness reward passing together
_MAX_MORE = 1_000_000  # a floor of 1.0 is never reached; the search stops here
# what a read positive / a reward's pass is called, per verdict field (the printed line)
POSITIVES = {"correct": "correct answers", "well_formed": "well-formed outputs", "accept": "accepted outputs"}


def lower_bound(successes: int, trials: int, level: float = LEVEL) -> float | None:
    """Exact one-sided ``level`` lower Clopper–Pearson bound on a proportion: the p below which ``successes`` or
    more of ``trials`` has probability < 1 - level. None on no trials (nothing is bounded)."""
    if trials <= 0:
        return None
    if successes <= 0:
        return 0.0
    return float(beta.ppf(1.0 - level, successes, trials - successes + 1))


def more_needed(successes: int, trials: int, floor: float, level: float = LEVEL) -> int | None:
    """How many more trials, every one a success, lift the lower bound to ``floor`` (0: it holds; None: unreachable,
    a floor of 1 or more). The bound rises with each success, so the least count is found by bisection."""
    if floor >= 1.0:
        return None

    def holds(k: int) -> bool:
        bound = lower_bound(successes + k, trials + k, level)
        return bound is not None and bound >= floor

    if holds(0):
        return 0
    lo, hi = 0, 1
    while not holds(hi):
        lo, hi = hi, hi * 2
        if hi > _MAX_MORE:
            return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if holds(mid) else (mid, hi)
    return hi


@dataclass(frozen=True)
class Tally:
    """One reward against one verdict field on the samples read."""

    reward: str
    field: str
    agreed: int = 0
    true_positive: int = 0
    false_positive: int = 0
    false_negative: int = 0

    @property
    def positives(self) -> int:
        """Samples the reader calls positive on this field (recall's trials)."""
        return self.true_positive + self.false_negative

    @property
    def accepted(self) -> int:
        """Samples the reward passes (precision's trials)."""
        return self.true_positive + self.false_positive


def _pairs(row: Mapping[str, Any], verdict: Any, metas: Sequence[RewardMeta]) -> list[tuple[str, str, bool, bool]]:
    """(reward, field, reward passes, reader says positive) for each comparison `verdicts.compare` makes."""
    from finetune.inspect.verdicts import _gated_excuse

    rewards, passes = row.get("rewards", {}), row.get("passes", {})
    out = [(ALL, "accept", bool(row.get("all_pass")), bool(verdict.accept))]
    for field, role in (("correct", "correctness"), ("well_formed", "format")):
        said = getattr(verdict, field)
        if said is None:
            continue
        for m in metas:
            if m.role != role or (rewards.get(m.name) is None and not row.get("errors", {}).get(m.name)):
                continue
            # a format-gated correctness reward means "correct and well-formed": the reader's view of it is False
            positive = False if field == "correct" and _gated_excuse(m, verdict) else bool(said)
            out.append((m.name, field, bool(passes.get(m.name)), positive))
    return out


def tallies(read: Sequence[Any], by_id: Mapping[str, Mapping[str, Any]], metas: Sequence[RewardMeta]) -> list[Tally]:
    """Per reward and verdict field, the agreements and disagreements of the reading ``read`` (verdicts)."""
    counts: dict[tuple[str, str], list[int]] = {}
    for v in read:
        for reward, field, passed, positive in _pairs(by_id[v.id], v, metas):
            c = counts.setdefault((reward, field), [0, 0, 0, 0])
            c[0] += passed == positive
            c[1] += passed and positive
            c[2] += passed and not positive
            c[3] += positive and not passed
    return [Tally(r, f, *c) for (r, f), c in counts.items()]


def bound_entry(t: Tally, min_recall: float | None = None, min_precision: float | None = None,
                level: float = LEVEL) -> dict[str, Any]:
    """The gate record's entry for one tally: counts, both bounds, the floors and what more reading they need."""
    recall = lower_bound(t.true_positive, t.positives, level)
    precision = lower_bound(t.true_positive, t.accepted, level)
    return {"reward": t.reward, "field": t.field, "agreed": t.agreed, "false_positives": t.false_positive,
            "false_negatives": t.false_negative, "read_positives": t.positives, "accepted": t.accepted,
            "recall_lower": recall, "precision_lower": precision, "level": level,
            "min_recall": min_recall, "min_precision": min_precision,
            "more_positives": None if min_recall is None else more_needed(t.true_positive, t.positives, min_recall,
                                                                          level),
            "more_accepted": None if min_precision is None else more_needed(t.true_positive, t.accepted,
                                                                            min_precision, level)}


def _pct(x: float | None) -> str:
    return "unbounded" if x is None else f"{100 * x:.1f} %"


def line(entry: Mapping[str, Any]) -> str:
    """One line per reward and field: "'r' on correct: recall ≥ 94.3 % on 51 read correct answers; precision ≥
    95.1 % on 60 accepted (95 % one-sided; 0 false positives, 0 false negatives)"."""
    noun = POSITIVES.get(str(entry["field"]), "positives")
    who = "all format and correctness rewards" if entry["reward"] == ALL else f"'{entry['reward']}'"
    return (f"{who} on {entry['field']}: recall ≥ {_pct(entry['recall_lower'])} on {entry['read_positives']} read "
            f"{noun}; precision ≥ {_pct(entry['precision_lower'])} on {entry['accepted']} accepted "
            f"({100 * entry['level']:.0f} % one-sided; {entry['false_positives']} false positive(s), "
            f"{entry['false_negatives']} false negative(s))")


def floor_reasons(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    """A reason per bound below its floor, saying how many more of which kind to read."""
    out = []
    for e in entries:
        noun = POSITIVES.get(str(e["field"]), "positives")
        who = "all format and correctness rewards" if e["reward"] == ALL else f"'{e['reward']}'"
        for what, floor, bound, more, kind in (
                ("recall", e["min_recall"], e["recall_lower"], e["more_positives"], noun),
                ("precision", e["min_precision"], e["precision_lower"], e["more_accepted"],
                 "samples the reward accepts")):
            if floor is None or (bound is not None and bound >= floor):
                continue
            need = ("the floor cannot be reached (lower it)" if more is None
                    else f"read {more} more {kind}, with no disagreement among them")
            out.append(f"{who} on {e['field']}: {what} ≥ {_pct(bound)} is below inspection.min_{what} "
                       f"{_pct(floor)}: {need}")
    return out
