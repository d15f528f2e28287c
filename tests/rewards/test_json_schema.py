"""JSON-schema reward: validation with jsonschema, partial credit below a full pass, huge/deep input."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0},
                                           "tags": {"type": "array", "items": {"type": "string"}}},
          "required": ["name", "age"], "additionalProperties": False}


@pytest.fixture(scope="module")
def mod(tmp_path_factory):
    from reward_helpers import render_module

    return render_module([
        {"name": "strict", "type": "json_schema", "schema": SCHEMA},
        {"name": "partial", "type": "json_schema", "schema": SCHEMA, "partial_credit": True},
        {"name": "per_row", "type": "json_schema", "schema_column": "schema"},
        {"name": "in_tag", "type": "json_schema", "schema": SCHEMA, "extract": "answer_tag", "max_bytes": 2_000_000,
         "max_depth": 1000},
    ], tmp_path_factory.mktemp("json"))


def one(func, text, **cols):
    return func(prompts=["Q"], completions=[text], **{k: [v] for k, v in cols.items()})[0]


@pytest.mark.parametrize("text, strict, partial", [
    ('{"name": "Ann", "age": 3}', 1.0, 1.0),
    ('Here:\n```json\n{"name": "Ann", "age": 3, "tags": ["a"]}\n```', 1.0, 1.0),
    ('{"name": "Ann", "age": -1}', 0.0, 0.5 * 2 / 3),        # age fails
    ('{"name": "Ann"}', 0.0, 0.5 * 2 / 3),                   # age missing
    ('{"name": 1, "age": "x", "tags": 3}', 0.0, 0.0),
    ('{"name": "Ann", "age": 3, "extra": 1}', 0.0, 0.5),     # only additionalProperties fails
    ('[1, 2]', 0.0, 0.0),
    ('{"name": "Ann", "age": 3', 0.0, 0.0),
    ('', 0.0, 0.0),
])
def test_validation_and_partial_credit(mod, text, strict, partial):
    assert one(mod.strict, text) == strict
    assert one(mod.partial, text) == pytest.approx(partial)
    assert one(mod.partial, text) <= 0.5 or one(mod.partial, text) == 1.0


def test_per_row_schema(mod):
    completions = ['{"a": 1}', '{"a": 1}', '{"a": 1}', '{"a": 1}']
    schemas = [{"type": "object", "required": ["a"]}, json.dumps({"type": "object", "required": ["b"]}),
               {"type": 12}, None]
    assert mod.per_row(prompts=["Q"] * 4, completions=completions, schema=schemas) == [1.0, 0.0, None, None]


def test_huge_and_deep_json_do_not_hang_or_crash(mod):
    deep = "[" * 200_000 + "]" * 200_000
    big = json.dumps({"name": "x" * 1_100_000, "age": 1})
    start = time.perf_counter()
    assert one(mod.strict, deep) == 0.0
    assert one(mod.strict, big) == 0.0  # over max_bytes
    assert one(mod.in_tag, f"<answer>{deep}</answer>") == 0.0  # over max_depth
    assert one(mod.in_tag, f"<answer>{big}</answer>") == 1.0  # within this reward's 2 MB limit
    assert time.perf_counter() - start < 10


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=10),
                          lambda c: st.lists(c, max_size=4) | st.dictionaries(st.sampled_from(["name", "age", "tags", "z"]),
                                                                               c, max_size=4), max_leaves=20))
def test_agrees_with_jsonschema(mod, value):
    import jsonschema

    text = json.dumps(value)
    expected = 1.0 if jsonschema.Draft202012Validator(SCHEMA).is_valid(value) else 0.0
    assert one(mod.strict, text) == expected
    score = one(mod.partial, text)
    assert score == 1.0 if expected else 0.0 <= score <= 0.5


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(st.text(), st.text(alphabet='{}[]":,0123456789 ', max_size=500), st.none(),
                      st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1)))
def test_never_raises(mod, text):
    assert one(mod.strict, text) in (0.0, 1.0)
    assert 0.0 <= one(mod.partial, text) <= 1.0
