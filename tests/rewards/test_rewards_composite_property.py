"""Composite ordering, proven over random specs the renderer accepts, with the length penalty on:

    correct and formatted  >  formatted but wrong  >  malformed

in the weighted sum TRL computes (None counts as 0, as TRL's nansum does). Each example renders a
real rewards.py, imports it, and scores real completions built for the spec's answer dialect; the
correct completions get the longest lengths (the penalty at its worst) and the others the shortest.
"""

from __future__ import annotations

import itertools
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reward_helpers import render_module

_RUN = itertools.count()
SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "minLength": 3}, "age": {"type": "integer", "minimum": 0}},
          "required": ["name", "age"]}
TESTS = ["assert add(1, 2) == 3", "assert add(2, 5) == 7"]

weights = st.floats(0.05, 5.0)

LAYOUTS = {"tag": ["none", "answer", "think", "prefilled", "both"], "boxed": ["none", "boxed"],
           "hash": ["none", "hash"], "json": ["json", "schema"]}
KINDS = {"tag": [(), ("exact_match",), ("math",), ("exact_match", "math"), ("json_schema",), ("unit_tests",),
                 ("json_schema", "json_schema")],
         "boxed": [(), ("exact_match",), ("math",), ("exact_match", "math")],
         "hash": [(), ("exact_match",)], "json": [(), ("json_schema",)]}
FORMAT_OF = {"answer": [("answer_tag", False)], "think": [("think_answer", False)],
             "prefilled": [("think_answer", True)], "both": [("answer_tag", False), ("think_answer", False)],
             "boxed": [("boxed", False)], "hash": [("hash_answer", False)], "json": [("json_object", False)],
             "schema": [("json_schema", False)], "none": []}
PAYLOAD_OF = {"exact_match": "number", "math": "number", "json_schema": "json", "unit_tests": "code"}


def structures():
    """Every structural combination the renderer accepts for one answer dialect, with and without a judge."""
    for dialect, layouts in LAYOUTS.items():
        for layout in layouts:
            for kinds in KINDS[dialect]:
                for judge in (False, True):
                    if not FORMAT_OF[layout] and not kinds and not judge:
                        continue  # nothing to order
                    yield pytest.param(dialect, layout, kinds, judge, id=f"{dialect}-{layout}-{'+'.join(kinds) or 'noanswer'}"
                                       f"{'-judge' if judge else ''}")


@st.composite
def specs(draw, dialect: str, layout: str, kinds: tuple, judge: bool, judge_url: str):
    """Random weights, thresholds, options and length penalties for one structure."""
    entries = []

    def add(entry):
        entry["name"] = f"r{len(entries)}"
        entry["weight"] = draw(weights)
        entries.append(entry)

    trailing = draw(st.sampled_from(["allow", "forbid"]))  # one setting for every format reward of the spec
    for pattern, prefilled in FORMAT_OF[layout]:
        if pattern == "json_schema":  # a schema check in the format role (binary)
            add({"type": "json_schema", "role": "format", "schema": {"type": "object"}, "extract": "auto"})
        else:
            add({"type": "format", "pattern": pattern, "prefilled_think": prefilled, "trailing_text": trailing})
    extract = {"tag": "answer_tag", "boxed": "boxed", "hash": "hash_answer", "json": "auto"}[dialect]
    for kind in kinds:
        if kind == "exact_match":
            add({"type": "exact_match", "extract": extract,
                 "normalize": draw(st.lists(st.sampled_from(["strip", "whitespace", "case", "numeric", "punct"]),
                                            unique=True))})
        elif kind == "math":
            add({"type": "math", "extract": "answer_tag" if dialect == "tag" else "boxed", "timeout_s": 5.0})
        elif kind == "json_schema":
            partial = draw(st.booleans())
            add({"type": "json_schema", "schema": SCHEMA, "partial_credit": partial, "extract": extract,
                 "threshold": draw(st.floats(0.51, 1.0)) if partial else None})
        else:
            nothing = draw(st.booleans())
            add({"type": "unit_tests", "tests_column": "tests", "extract": "answer_tag", "all_or_nothing": nothing,
                 "min_isolation": "process", "workers": 2, "timeout_s": 5.0,
                 "threshold": None if nothing else draw(st.floats(0.51, 1.0))})
    if judge:
        add({"type": "judge", "endpoint": judge_url, "model": "m", "rubric": "GOOD is right",
             "max_points": 10, "threshold": draw(st.sampled_from([0.2, 0.5, 0.9]))})
    targets = [e["name"] for e in entries]
    for _ in range(draw(st.integers(1, 2))):
        mode = draw(st.sampled_from(["soft_overlong", "budget"]))
        add({"type": "length_penalty", "mode": mode, "overlong_buffer": draw(st.integers(1, 64)),
             "budget": 100 if mode == "budget" else None, "max_penalty": draw(st.floats(0.1, 10.0)),
             "wraps": draw(st.one_of(st.none(), st.sampled_from(targets)))})
    payload = PAYLOAD_OF[kinds[0]] if kinds else ("json" if dialect == "json" else "number")
    return payload, trailing == "forbid", [{k: v for k, v in e.items() if v is not None} for e in entries]


def payloads(payload: str) -> tuple[str, str]:
    """(correct, wrong) answer bodies; the judge's scripted model says GOOD → 9/10, else 1/10."""
    if payload == "number":
        return "42", "41"
    if payload == "json":
        return json.dumps({"name": "GOOD", "age": 7}), json.dumps({"name": "x", "age": -1})
    return ("```python\n# GOOD\ndef add(a, b):\n    return a + b\n```",
            "```python\ndef add(a, b):\n    return a - b\n```")


def completions(dialect: str, layout: str, payload: str, forbid: bool) -> dict[str, list[str]]:
    """Correct, wrong and malformed completions; text after the final container is malformed only when
    the spec's format rewards say ``trailing_text: forbid`` (by default prose after it is allowed)."""
    right, wrong = payloads(payload)
    if dialect == "tag":
        think = "" if layout == "prefilled" else "<think>"

        def wrap(body, note):
            return f"{think}{note}</think>\n<answer>{body}</answer>"

        formatted = {"correct": [wrap(right, "GOOD")], "wrong": [wrap(wrong, "hmm")]}
        malformed = [f"{think}GOOD\n<answer>{right}</answer>",                         # think never closed
                     f"{think}GOOD</think>\n<answer>{right}",                          # answer never closed
                     "GOOD " + right]                                                   # no structure at all
        if layout == "answer":
            malformed = malformed[1:]  # think-free layouts: only break the answer block
        if forbid:
            malformed.append(f"{think}GOOD</think>\n<answer>{right}</answer> trailing words")
        formatted["malformed"] = malformed
        return formatted
    if dialect == "boxed":
        return {"correct": [f"GOOD so \\boxed{{{right}}}", f"GOOD so \\(\\boxed{{{right}}}\\)."]
                + ([] if forbid else [f"GOOD so \\(\\boxed{{{right}}}\\) in all."]),
                "wrong": [f"so \\boxed{{{wrong}}}"],
                "malformed": [f"GOOD \\boxed{{{right}", f"GOOD \\boxed{{}} {right}", f"GOOD {right}"]
                + ([f"GOOD \\boxed{{{right}}} and more words"] if forbid else [])}
    if dialect == "hash":
        return {"correct": [f"GOOD\n#### {right}"], "wrong": [f"so\n#### {wrong}"],
                "malformed": [f"GOOD {right}", "GOOD\n####\n"] + ([f"GOOD\n#### {right}\nmore"] if forbid else [])}
    return {"correct": [right], "wrong": [wrong], "malformed": [right + " trailing", right[:-1]]}


def composite(module, texts: list[str], lengths: list[int]) -> list[float]:
    n = len(texts)
    kwargs = {"prompts": ["Q"] * n, "completions": texts, "answer": ["42"] * n, "tests": [TESTS] * n,
              "completion_ids": [[0] * k for k in lengths]}
    totals = [0.0] * n
    for func, weight in zip(module.REWARD_FUNCS, module.REWARD_WEIGHTS):
        for i, score in enumerate(func(**kwargs)):
            if score is not None and not math.isnan(score):
                totals[i] += weight * score
    return totals


@pytest.mark.slow
@pytest.mark.parametrize("dialect, layout, kinds, judge", list(structures()))
def test_ordering_holds_for_every_renderable_spec(dialect, layout, kinds, judge, judge_server, tmp_path_factory):
    url, _ = judge_server
    root = tmp_path_factory.mktemp("composite")

    @settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(case=specs(dialect, layout, kinds, judge, url))
    def check(case):
        payload, forbid, entries = case
        module = render_module(entries, root / f"run{next(_RUN)}", max_completion_length=256)
        groups = completions(dialect, layout, payload, forbid)
        has_format = any(m.role == "format" for m in module.REWARD_META)
        has_correct = any(m.role == "correctness" for m in module.REWARD_META)
        long, short = 10_000, 1
        levels = {}
        for name, texts in groups.items():
            worst = long if name == "correct" else short
            best = short if name == "correct" else long
            scores = composite(module, texts * 2, [worst] * len(texts) + [best] * len(texts))
            levels[name] = (min(scores), max(scores))
        if has_correct:
            assert levels["correct"][0] > levels["wrong"][1], (entries, levels)
        if has_format:
            assert levels["wrong"][0] > levels["malformed"][1], (entries, levels)
            assert levels["correct"][0] > levels["malformed"][1], (entries, levels)

    check()
