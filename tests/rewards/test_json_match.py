"""`type: json_match`: the answer's JSON object against the gold, field by field, and its format role (a JSON
Schema derived from the gold); the labelled corpus's targets against the naive peer."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError

from finetune.rewards.registry import RewardSpec, explain

ROOT = Path(__file__).resolve().parents[2]
GOLD = {"vendor": "Müller GmbH", "date": "2024-03-15", "total": 1234.5, "currency": "EUR",
        "invoice_number": "INV-2024-0042"}
FIELDS = {"vendor": "text", "date": "date", "total": {"match": "number", "tolerance": 0.01}, "currency": "code",
          "invoice_number": "code"}


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


BENCH = _load("bench_json_reward", ROOT / "benchmarks" / "bench_json_reward.py")
BUILDER = _load("build_json_corpus", ROOT / "tests" / "data" / "build_json_corpus.py")


@pytest.fixture(scope="module")
def rewards(tmp_path_factory):
    return BENCH.render(tmp_path_factory.mktemp("json_match"))


def _call(func, completions, gold=GOLD):
    whys: dict = {}
    scores = func(prompts=["p"] * len(completions), completions=completions, gold=[gold] * len(completions),
                  log_extra=lambda key, values: whys.__setitem__(key, values))
    return scores, next(iter(whys.values()))


def _dump(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, indent=2)


def test_answer_shapes_read_like_a_careful_reader(rewards):
    answers = {
        f"Here is the extracted information:\n```json\n{_dump(GOLD)}\n```\nLet me know!": (1.0, "ok"),
        json.dumps(GOLD): (1.0, "ok"),
        f"Extracted: {json.dumps(GOLD)}.": (1.0, "ok"),
        _dump({**GOLD, "vendor": "MULLER GMBH."}): (1.0, "ok"),
        f"<think>\n```json\n{_dump(GOLD)}\n```\n</think>\nI can't help with that.": (0.0, "only_in_think"),
        f"<think>{json.dumps(GOLD)}": (0.0, "unclosed_think"),
        _dump(GOLD)[:60]: (0.0, "truncated"),
        _dump({**GOLD, "total": 1324.5}): (0.0, "wrong_value:total"),
        _dump({**GOLD, "tax": 1.0}): (0.0, "hallucinated_key:tax"),
        _dump({k: v for k, v in GOLD.items() if k != "date"}): (0.0, "missing_field:date"),
        f"{json.dumps({**GOLD, 'total': 0})} then {json.dumps(GOLD)}": (0.0, "several_objects"),
    }
    scores, whys = _call(rewards.json_fields, list(answers))
    assert list(zip(scores, whys)) == list(answers.values())


def test_values_right_in_the_wrong_shape_are_correct_but_malformed(rewards):
    """Correctness reads values; the format role (schema derived from the gold) reads the shape and gates it."""
    malformed = [_dump({**GOLD, "total": "1,234.50"}), _dump({**GOLD, "date": "15/03/2024"}),
                 _dump(GOLD)[:-2] + ",\n}", _dump({**GOLD, "currency": "eur"})]
    shape, whys = _call(rewards.json_shape, malformed)
    assert shape == [0.0] * 4
    assert whys == ["schema:total", "schema:date", "not_strict_json", "schema:currency"]
    fields, field_whys = _call(rewards.json_fields, malformed)
    assert fields == [0.0] * 4 and set(field_whys) == {"format_failed"}
    module = sys.modules["rewards_jsonmatch"]
    rules = {k: v if isinstance(v, dict) else {"match": v} for k, v in FIELDS.items()}
    assert [module.score(m, GOLD, rules)[0] for m in malformed] == [1.0] * 4


def test_partial_credit_stays_below_the_ceiling(render):
    module = render([{"name": "fields", "type": "json_match", "answer_column": "gold", "fields": FIELDS,
                      "partial_credit": True, "threshold": 1.0}])
    scores, whys = _call(module.fields, [_dump({**GOLD, "vendor": "Other", "total": 1.0}), _dump(GOLD)])
    assert scores == [pytest.approx(0.5 * 3 / 5), 1.0]
    assert whys[0] == "wrong_value:vendor"


def test_null_gold_fields_and_given_schema(render):
    gold = {**GOLD, "invoice_number": None}
    module = render([{"name": "shape", "type": "json_match", "role": "format", "answer_column": "gold",
                      "schema": {"type": "object", "required": ["vendor"]}},
                     {"name": "fields", "type": "json_match", "answer_column": "gold", "fields": FIELDS}])
    omitted = _dump({k: v for k, v in gold.items() if k != "invoice_number"})
    invented = _dump({**gold, "invoice_number": "INV-1"})
    scores, whys = _call(module.fields, [omitted, invented, "no json"], gold)
    assert scores == [1.0, 0.0, 0.0]
    assert whys == ["ok", "hallucinated_value:invoice_number", "no_json"]
    assert _call(module.shape, ['{"total": 1}'], gold) == ([0.0], ["schema:vendor"])


def test_spec_refuses_settings_that_break_the_roles():
    adapter = TypeAdapter(RewardSpec)
    with pytest.raises(ValidationError, match="format reward is binary"):
        adapter.validate_python({"name": "x", "type": "json_match", "role": "format", "partial_credit": True})
    with pytest.raises(ValidationError, match="format role's shape"):
        adapter.validate_python({"name": "x", "type": "json_match", "schema": {"type": "object"}})
    with pytest.raises(ValidationError):
        adapter.validate_python({"name": "x", "type": "json_match", "fields": {"total": "fuzzy"}})


def test_field_reasons_name_the_field_and_its_fix():
    text, fix = explain("wrong_value:vendor", "json_match")
    assert "vendor" in text and fix.startswith("`fields.vendor`")
    assert "extra_keys" in explain("hallucinated_key:tax", "json_match")[1]
    assert "type: python" not in explain("schema:date", "json_match")[1]


def test_corpus_is_what_its_builder_writes_and_meets_the_targets():
    rows = BUILDER.build()
    expected = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
    assert BENCH.CORPUS.read_text(encoding="utf-8") == expected, "run tests/data/build_json_corpus.py"
    assert len(rows) >= 150 and all(r["reason"] for r in rows)
    results = BENCH.measure(rows)
    ours, peer = results["finetune/accept"], results["naive_peer/accept"]
    assert ours["fp"] == 0 and ours["fn"] <= 0.01 * ours["positives"], ours["errors_at"]
    for label in ("correct", "well_formed"):
        r = results[f"finetune/{label}"]
        assert r["fp"] == 0 and r["fn"] <= 0.01 * r["positives"], (label, r["errors_at"])
    assert ours["fp"] + ours["fn"] < peer["fp"] + peer["fn"]
    assert peer["fp"] > 0  # the peer credits the JSON inside <think> followed by a refusal


def test_reasons_no_field_answers_get_the_fix_for_their_reward_kind():
    text, fix = explain("unexplained", "json_schema")
    assert "type: json_match" in fix and "read the reward's code" not in fix
    text, fix = explain("ok", "json_schema")
    assert "single final answer" not in text and "type: python" not in fix
    assert "`fields`" in explain("ok", "json_match")[1]
    assert "pattern" in explain("ok", "format")[1]
    assert "rewards.py" in explain("ok", None)[1]  # no kind known: read its code
    text, fix = explain("made_up", "json_match")  # an id the kind's entry does not declare says so
    assert "does not declare" in text and "`fields`" in fix
