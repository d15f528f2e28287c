"""The labelled reward corpora (tests/data): every row well-formed and consistent, the files what their
generators write, every kind renderable under its default spec, and the accuracy targets (no false positive on the development
set, fewer errors than TRL and math-verify on the external one); `benchmarks/bench_reward_accuracy.py` prints
the current numbers beside TRL's and math-verify's.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
# Peers on reward_external.jsonl (unambiguous rows), measured by bench_reward_accuracy.py with the pinned
# trl==1.16.0 / math-verify==0.9.0; test_peer_numbers_still_hold (slow) re-measures them.
PEER_EXTERNAL = {"trl": {"fp": 53, "fn": 86}, "math_verify": {"fp": 53, "fn": 42}}
MATH_KINDS = ("boxed_math", "answer_tag_math", "gsm8k_hash", "answer_tag_exact", "math_any")
# Every answer-reading rule the rewards apply, and the hack families, must be exercised by the development set.
REQUIRED_RULES = {
    "box_then_prose", "bold_box", "closing_remark", "box_delims", "box_check_line", "same_value_twice",
    "hedge_text_or", "hedge_paren", "hedge_multi_box", "hedge_pm", "hedge_either", "hedge_list", "retraction",
    "number_thin_space", "number_brace_comma", "number_space", "number_comma", "number_decimal", "number_sci",
    "number_unicode", "units", "gold_latex_whole", "gold_interval", "gold_list", "gold_pi", "tex_shorthand",
    "truncated", "wrong_answer", "no_box", "hack_spray", "hack_hidden", "hack_injection", "hack_exit",
    "hack_always_equal", "hack_empty_box", "json_invalid", "json_syntax", "code_fenced",
}


def _bench():
    spec = importlib.util.spec_from_file_location("bench_reward_accuracy", ROOT / "benchmarks" /
                                                  "bench_reward_accuracy.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


BENCH = _bench()
CORPORA = {name: BENCH.load_rows(name) for name in BENCH.CORPORA}
KINDS = BENCH.spec_kinds()


def _columns_read(kind: str) -> set[str]:
    keys = ("answer_column", "schema_column", "tests_column")
    return {r[k] for r in KINDS[kind] for k in keys if k in r}


@pytest.mark.parametrize("name", sorted(CORPORA))
def test_rows_are_well_formed(name):
    rows = CORPORA[name]
    assert len({r["id"] for r in rows}) == len(rows), "duplicate ids"
    for r in rows:
        where = f"{name}:{r['id']}"
        assert r["kind"] in KINDS, f"{where}: unknown kind {r['kind']}"
        assert isinstance(r["prompt"], str) and r["prompt"].strip(), where
        assert isinstance(r["completion"], str), where
        assert isinstance(r["reason"], str) and r["reason"].strip() and "\n" not in r["reason"], where
        assert isinstance(r["rule"], str) and r["rule"].strip(), where
        assert isinstance(r["ambiguous"], bool), where
        label = r["label"]
        assert set(label) == {"accept", "correct", "well_formed"} and all(isinstance(v, bool) for v in
                                                                          label.values()), where
        assert label["accept"] == (label["correct"] and label["well_formed"]), f"{where}: accept != correct ∧ " \
                                                                                "well_formed"
        assert _columns_read(r["kind"]) <= set(r["columns"]), f"{where}: a column the rewards read is missing"
        if r["kind"] in MATH_KINDS:
            assert isinstance(r["gold"], str) and r["columns"]["answer"] == r["gold"], where


def test_sizes_and_coverage():
    corpus, heldout = CORPORA["corpus"], CORPORA["heldout"]
    assert len(corpus) >= 300
    assert len(heldout) >= 100 and len(CORPORA["external"]) >= 200
    missing = REQUIRED_RULES - {r["rule"] for r in corpus}
    assert not missing, f"rules without a row in the development set: {sorted(missing)}"
    for name, rows in CORPORA.items():
        labels = [r["label"]["accept"] for r in rows if not r["ambiguous"]]
        assert any(labels) and not all(labels), f"{name}: one-sided labels"
    assert {r["kind"] for r in corpus} >= {"boxed_math", "answer_tag_math", "gsm8k_hash", "json", "code"}


def test_heldout_is_kept_apart():
    dev = CORPORA["corpus"]
    held = CORPORA["heldout"]
    assert not {r["completion"] for r in dev} & {r["completion"] for r in held}
    assert not {r["prompt"] for r in dev} & {r["prompt"] for r in held}, "a problem appears in both sets"


def test_files_are_what_the_generator_writes():
    sys.path.insert(0, str(DATA))
    try:
        spec = importlib.util.spec_from_file_location("build_corpus", DATA / "build_corpus.py")
        build = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(build)
        for rows, name in ((build.build_dev(), "corpus"), (build.build_heldout(), "heldout")):
            assert rows == CORPORA[name], f"{name} differs from build_corpus.py: regenerate it"
    finally:
        sys.path.remove(str(DATA))


@pytest.mark.slow
def test_every_kind_renders_and_judges(tmp_path):
    """One row per kind through the real CLI render and the gate's scorer: each gets a full judgement."""
    sample = {}
    for rows in CORPORA.values():
        for r in rows:
            sample.setdefault(r["kind"], r)
    assert set(sample) == set(KINDS)
    judged = BENCH.project_judgements(list(sample.values()), tmp_path)
    for kind, row in sample.items():
        j = judged[row["id"]]
        assert isinstance(j["accept"], bool) and isinstance(j["correct"], bool), kind
        assert all(v is None or isinstance(v, float) for v in j["scores"].values()), kind


@pytest.mark.slow
def test_accuracy_targets_hold_and_beat_the_peers(tmp_path):
    dev = CORPORA["corpus"]
    t = BENCH.tally(dev, BENCH.project_judgements(dev, tmp_path / "dev"))["all"]
    assert t.fp == 0, f"false positives on the development set: {t.fp_ids}"
    assert t.fn <= 0.01 * t.rows, f"false negatives {t.fn}/{t.rows}: {t.fn_ids}"
    ext = CORPORA["external"]
    e = BENCH.tally(ext, BENCH.project_judgements(ext, tmp_path / "ext"))["all"]
    for peer, counts in PEER_EXTERNAL.items():
        assert e.fp < counts["fp"] and e.fn < counts["fn"], f"external: FP {e.fp} FN {e.fn} vs {peer} {counts}"
    assert e.fp <= 0.01 * e.rows, f"external false positives {e.fp_ids}"


@pytest.mark.slow
def test_peer_numbers_still_hold():
    ext = CORPORA["external"]
    for peer in PEER_EXTERNAL:
        t = BENCH.tally(ext, BENCH.JUDGES[peer](ext))["all"]
        assert {"fp": t.fp, "fn": t.fn} == PEER_EXTERNAL[peer], peer


# The math reward's last false-positive classes: an answer in another unit, a decimal differing in a late
# significant digit, a box the completion's own words reject — each with its right neighbours.
READING_FAMILIES = ("pit:unit_mismatch", "pit:decimal_tolerance", "pit:rejected_box")


def test_unit_decimal_and_rejected_box_families_are_read_right(tmp_path):
    rows = [r for r in CORPORA["external"] if r["rule"] in READING_FAMILIES]
    for family in READING_FAMILIES:
        labels = [r["label"]["accept"] for r in rows if r["rule"] == family and not r["ambiguous"]]
        assert labels.count(False) >= 15 and labels.count(True) >= 15, f"{family}: too few rows on a side"
    per = BENCH.tally(rows, BENCH.project_judgements(rows, tmp_path), key="rule")
    for family in READING_FAMILIES:
        assert (per[family].fp, per[family].fn) == (0, 0), \
            f"{family}: false positives {per[family].fp_ids}, false negatives {per[family].fn_ids}"
