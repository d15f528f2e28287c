"""Probes for the verifier itself: a correct answer in an equivalent form a reward must pass (1/2, 0.5,
\\frac{1}{2}), and master-key answers ("One Token to Fool LLM-as-a-Judge": ":", "Thought process:") no
correctness reward may pass."""

from __future__ import annotations

import json

import pytest
from inspect_helpers import craft_samples

from finetune.inspect.probes import MASTER_KEYS, equivalent_forms


def test_equivalent_forms_of_a_rational_gold():
    assert [f[1] for f in equivalent_forms("1/2")] == ["\\frac{1}{2}", "0.5"]
    assert [f[1] for f in equivalent_forms("0.5")] == ["1/2", "\\frac{1}{2}"]
    assert [f[1] for f in equivalent_forms("\\frac{1}{2}")] == ["1/2", "0.5"]
    assert [f[1] for f in equivalent_forms("-3/4")] == ["-\\frac{3}{4}", "-0.75"]
    assert [f[0] for f in equivalent_forms("1/3")] == ["latex_fraction_form"]  # 0.333… is no exact form
    assert equivalent_forms("72") == equivalent_forms("x/0") == equivalent_forms("abc") == []


def _score(cli, run) -> dict:
    r = cli("inspect", "score", run)
    assert r.code == 0, r
    return json.loads((run / "score_report.json").read_text())


@pytest.mark.slow  # one scoring child: a few seconds
def test_a_reward_that_rejects_0_5_for_a_gold_of_1_2_is_flagged_with_the_form(cli, make_run):
    samples = craft_samples()
    for s in samples:  # golds that are fractions; the exact-match reward compares strings (float() fails on them)
        s["columns"] = {"answer": f"{2 * s['row'] + 1}/2"}
    report = _score(cli, make_run("good", samples=samples))
    lost = next(f for f in report["flags"] if f["id"] == "lost_signal:correctness")
    assert {"decimal_form", "latex_fraction_form"} <= set(lost["evidence"]["controls"])
    assert "decimal_form" in lost["message"]
    failed = next(c for c in report["controls"] if c["probe"] == "decimal_form")
    assert "<answer>0.5</answer>" in failed["completion"] and failed["failed_by"] == ["correctness"]
    # master keys and another row's gold pass no correctness reward of this module
    keys = {p["probe"]: p for p in report["probes"]}
    assert {n for n, _, _ in MASTER_KEYS} | {"question_restated", "other_row_gold"} <= set(keys)
    assert not any(keys[n]["passing"] for n in keys)


@pytest.mark.slow  # one scoring child against the local judge
def test_a_judge_that_accepts_a_lone_colon_fails_the_probe(cli, make_run, judge_endpoint):
    judge_endpoint.master_key = True
    report = _score(cli, make_run("judge_injection", "judge"))
    passing = {p["probe"]: p["passed_by"] for p in report["probes"] if p["passing"]}
    assert passing.get("master_key_colon") == ["judge_correct"]
    assert passing.get("master_key_thought") == ["judge_correct"] and "master_key_solve" not in passing
