"""Role-wise disagreements: which rewards a false negative or positive names as its cause."""

from __future__ import annotations

from finetune.inspect import verdicts as V
from finetune.rewards.lib.rewards_meta import RewardMeta


def _meta(name: str) -> RewardMeta:
    return RewardMeta(name=name, type="unit_tests", role="correctness", weight=1.0, threshold=1.0, min=0.0, max=1.0,
                      gated=False, episode=False)


def test_a_reward_that_did_not_apply_is_never_blamed():
    """A mixed stdin + function set judged by two rewards: on a stdin row the function reward scores None (not
    applicable); a false negative names only the reward that judged the row, an error still counts."""
    metas = [_meta("stdin_tests"), _meta("function_tests")]
    accepted = V.Verdict(id="r1", accept=True, reader="human")
    row = {"id": "r1", "rewards": {"stdin_tests": 0.0, "function_tests": None},
           "passes": {"stdin_tests": False, "function_tests": False}, "all_pass": False}
    assert [d["rewards"] for d in V.compare(row, accepted, metas)] == [["stdin_tests"]]
    crashed = {**row, "errors": {"function_tests": "KeyError: 'fn'"}}
    assert [d["rewards"] for d in V.compare(crashed, accepted, metas)] == [["stdin_tests", "function_tests"]]
    rejected = V.Verdict(id="r1", accept=False, reader="human")
    passing = {**row, "rewards": {"stdin_tests": 1.0, "function_tests": None},
               "passes": {"stdin_tests": True, "function_tests": False}, "all_pass": True}
    assert [d["rewards"] for d in V.compare(passing, rejected, metas)] == [["stdin_tests"]]


def test_a_code_false_positive_names_stronger_hidden_tests():
    """Wrong code that every test passed: the gate's cause names the tests as too weak and hidden tests as the fix
    (not the reading fields, which a passed row says nothing about)."""
    from finetune.inspect.gate import group_causes

    meta = _meta("tests_pass")
    row = {"id": "s1", "rewards": {"tests_pass": 1.0}, "passes": {"tests_pass": True}, "all_pass": True,
           "why": {"tests_pass": "ok"}}
    disagreements = V.compare(row, V.Verdict(id="s1", accept=False, reader="human"), [meta])
    (cause,) = group_causes(disagreements, {"s1": row}, [meta])
    assert (cause["kind"], cause["reason"]) == ("false_positive", "ok")
    assert "stronger hidden tests" in cause["fix"] and "`hidden_tests_column`" in cause["fix"]
    assert "every test its row has" in cause["summary"]
