"""The `tool_call` reward: calls read in each chat template's format, judged by schema and value, with a
reason per row; the labelled corpus (tests/data/tool_call_corpus.jsonl) meets 0 FP / <= 1% FN and beats the
naive "regex the JSON and compare dicts" peer (benchmarks/bench_tool_reward.py prints the numbers)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError

from finetune.rewards.registry import RewardSpec

ROOT = Path(__file__).resolve().parents[2]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                     "unit": {"type": "string", "enum": ["c", "f"], "default": "c"}},
    "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
EXPECTED = {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}


def _bench():
    spec = importlib.util.spec_from_file_location("bench_tool_reward", ROOT / "benchmarks" / "bench_tool_reward.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _call(name: str = "get_weather", **args: object) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


def _score(module, completions, expected=EXPECTED):
    whys: list[list[str]] = []
    scores = module.tool_ok(prompts=["p"] * len(completions), completions=completions,
                            expected_call=[expected] * len(completions), tools=[TOOLS] * len(completions),
                            log_extra=lambda key, values: whys.append(values))
    return list(zip(scores, whys[0]))


@pytest.fixture
def reward(render):
    return render([{"name": "tool_ok", "type": "tool_call", "tools_column": "tools", "partial_credit": True,
                    "threshold": 1.0, "arguments": {"city": {"match": "text"}}}])


def test_reason_codes(reward):
    got = _score(reward, [
        _call(city="Paris", days=3),
        "The forecast is sunny.",
        f"<think>{_call(city='Paris', days=3)}</think>It is sunny.",
        _call(city="Paris", days=3) + _call(city="Paris", days=3),
        _call("get_time", city="Paris"),
        _call(city="Paris", days="three"),
        _call(city="Paris", days=3, country="FR"),
        _call(city="Paris", days=4),
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris", "days": 3,}}</tool_call>',
    ])
    assert got == [(1.0, "ok"), (0.0, "no_call"), (0.0, "no_call"), (0.0, "several_calls"),
                   (0.0, "wrong_function"), (0.0, "bad_arguments"), (0.0, "hallucinated_argument"),
                   (0.25, "not_equal"), (0.0, "bad_arguments")]


def test_schema_typing_rules_and_formats(reward):
    got = _score(reward, [
        _call(city=" paris ", days="3"),  # text rule + integer typed by the schema
        _call(city="Paris", days=3, unit="c"),  # explicit default
        _call(city="Paris", days=3, unit="k"),  # enum violation
        json.dumps({"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}),  # Llama 3.1
        "Let me check.\n" + json.dumps({"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}),
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]',
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": 3}',
        [{"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": EXPECTED}]}],
    ])
    assert [w for _, w in got] == ["ok", "ok", "bad_arguments", "ok", "no_call", "ok", "ok", "ok"]


def test_last_call_after_lookup(render):
    module = render([{"name": "tool_ok", "type": "tool_call", "tools": TOOLS, "which": "last"}])
    whys: list[list[str]] = []
    trajectory = [{"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "get_time", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "name": "get_time", "content": "10:00"},
        {"role": "assistant", "content": _call(city="Paris", days=3)}]
    scores = module.tool_ok(prompts=["p"], completions=[trajectory], expected_call=[json.dumps(EXPECTED)],
                            log_extra=lambda key, values: whys.append(values))
    assert (scores, whys[0]) == ([1.0], ["ok"])


def test_missing_expected_is_not_applicable(reward):
    assert _score(reward, [_call(city="Paris")], expected=None) == [(None, "no_expected")]


@pytest.mark.parametrize("entry, message", [
    ({"tools": TOOLS, "tools_column": "tools"}, "at most one"),
    ({"tools": [{"name": "f", "parameters": {"type": "nonsense"}}]}, "not a valid JSON Schema"),
    ({"arguments": {"city": {"match": "fuzzy"}}}, "match"),
    ({"partial_credit": True, "threshold": 0.5}, "above 0.5"),
])
def test_spec_refuses(entry, message):
    with pytest.raises(ValidationError, match=message):
        TypeAdapter(RewardSpec).validate_python({"name": "t", "type": "tool_call", **entry})


def test_corpus_targets_and_peer():
    bench = _bench()
    rows = bench.load_rows()
    assert len(rows) >= 150 and {"call_only_in_think", "two_calls", "trailing_comma", "stringified_number",
                                 "extra_argument", "hermes_prose_before", "llama3_clean", "mistral_list"} <= \
        {r["family"] for r in rows}
    result = bench.measure(rows)
    ours, peer = result["finetune"], result["naive_peer"]
    assert ours["fp"] == 0 and ours["fn"] <= 0.01 * len(rows), ours
    assert result["reason_mismatches"] == []
    assert ours["fp"] < peer["fp"] and ours["fn"] < peer["fn"], (ours, peer)


def test_corpus_is_what_its_builder_writes(tmp_path):
    out = subprocess.run([sys.executable, "-c", "import json, sys; sys.path.insert(0, 'tests/data'); "
                          "import build_tool_corpus as b; sys.stdout.write(''.join(json.dumps(r, ensure_ascii=False, "
                          "sort_keys=True) + '\\n' for r in b.build()))"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out == (ROOT / "tests" / "data" / "tool_call_corpus.jsonl").read_text(encoding="utf-8")


def _runtime_calls(completion: str, tools: list) -> list | None:
    """The calls TRL 1.16 would execute for a Qwen completion: transformers' parse_response with TRL's own
    Qwen3 (JSON) or Qwen3.5 (XML) response template, typed by the tools, then TRL's tool-call check; None
    where TRL falls back to plain text (nothing runs)."""
    from transformers.utils.chat_parsing.response_parser import parse_response
    from trl.chat_template_utils import _validate_tool_calls, qwen3_5_template, qwen3_template

    template = qwen3_5_template if "<function=" in completion else qwen3_template
    prefilled = "</think>" in completion and "<think>" not in completion
    try:
        message = parse_response(completion, template, prefix="<|im_start|>assistant\n" + "<think>\n" * prefilled,
                                 tools=tools)
        _validate_tool_calls(message.get("tool_calls"))
    except (ValueError, TypeError):
        return None
    return message.get("tool_calls") or []


def test_qwen_labels_agree_with_the_runtime_parser():
    """Every Qwen-format row's label is re-derived from what TRL's runtime parser hands the tools: a row is
    accepted only where that parse yields exactly the expected call, and the reward's own text reading
    scores the row as the runtime's parsed message would be scored."""
    bench = _bench()
    rows = [r for r in bench.load_rows() if isinstance(r["completion"], str) and "<tool_call>" in r["completion"]]
    assert len(rows) >= 80
    runtime = [_runtime_calls(r["completion"], r["tools"]) for r in rows]
    parsed_rows = [{**r, "completion": [{"role": "assistant", "content": "", "tool_calls": calls}]}
                   for r, calls in zip(rows, runtime) if calls]
    structured = iter(bench.finetune_scores(parsed_rows))
    disagree = []
    for r, calls in zip(rows, runtime):
        runs_expected = bool(calls) and (next(structured)[0] or 0.0) >= 1.0
        if runs_expected != r["accept"]:
            disagree.append(r["id"])
    assert disagree == []
    assert sum(c is None for c in runtime) >= 10  # broken JSON, envelopes... really exercise the fallback


@pytest.mark.parametrize("schema", [{"type": "integer"}, {"type": "number"}, {"type": "boolean"},
                                    {"type": "string"}, {"type": ["string", "integer"]}, {"type": "array"},
                                    {"type": "object"}, {"anyOf": [{"type": "null"}, {"type": "integer"}]},
                                    {"type": "integer", "nullable": True}, {}])
def test_argument_typing_is_transformers(schema):
    """String arguments are typed exactly as transformers' parse_response(tools=...) types them."""
    from transformers.utils.chat_parsing.response_parser import _coerce, _schema_types

    from finetune.rewards.lib import rewards_toolcall

    for raw in ["3", "3.0", "3.5", "-2", "1e3", "nan", "inf", "true", "False", "1", "0", "null", "None", "",
                "three", '["a", 1]', '{"k": 2}', "[1,", " 7 "]:
        want = _coerce(raw, _schema_types(schema))
        got = rewards_toolcall._coerce(raw, schema)
        assert (type(got), got) == (type(want), want) or (got != got and want != want), (raw, schema, got, want)


def test_adversarial_completions_are_read_in_linear_time():
    """Long runs a policy can emit (spaces with no closing tag, thousands of openers, deep nesting) are read
    at once: TRL's own XML parameter pattern backtracks cubically on the first of these (minutes at 5,000
    spaces), and a reward that hangs stalls the training step. A regression shows as this test hanging."""
    from finetune.rewards.lib import rewards_toolcall as rt

    n = 200_000
    cases = {
        "<tool_call><function=get_weather><parameter=city>" + " " * n + "x": {"name": "get_weather", "arguments": {}},
        "<tool_call><function=get_weather>" + "<parameter=city>" * (n // 16) + " " * n:
            {"name": "get_weather", "arguments": {}},
        "<tool_call><function=get_weather>" + "<parameter=c\n>" * (n // 16) + "</parameter>" * 3:
            {"name": "get_weather", "arguments": {}},
    }
    for text, want in cases.items():
        assert rt.text_calls(text) == [want]
    assert rt.text_calls("<tool_call>" + '{"a":' * n)[0]["error"]
    assert rt.text_calls("[TOOL_CALLS]" + "a" * n + " " * n) == [{"name": "a" * n, "arguments": {}}]
    assert rt.text_calls("<think>" * n + "</think>" * n) == []
    assert rt.score("<tool_call><function=get_weather>\n<parameter=city>\n Paris \n</parameter>\n"
                    "<parameter=days>\n3\n</parameter>\n</function></tool_call>", EXPECTED, TOOLS) == (1.0, "ok")
