"""Build tests/data/tool_call_corpus.jsonl: labelled tool-call completions for the `tool_call` reward.

Deterministic: `python tests/data/build_tool_corpus.py` rewrites the file byte for byte. Each row is one
completion as an instruct model writes it in its chat template's format — Qwen2.5/Qwen3 (Hermes
`<tool_call>` blocks, often after a sentence of prose or a `<think>` block), Llama 3.1/3.2 (the whole reply
one `{"name", "parameters"}` object, `<|python_tag|>` optional), Mistral (`[TOOL_CALLS][...]`, v11
`[TOOL_CALLS]name[ARGS]{...}`), or TRL's parsed conversational message (`tool_calls`) — with the failure
styles seen in practice: prose before the call, the call only inside the reasoning, two calls, trailing
commas, single-quoted Python dicts, stringified numbers, extra (hallucinated) arguments, enum violations,
fenced JSON that no template parser reads, answers with no call at all.

Label rule (the reader): `accept` is true when the runtime (the chat template's own parser, then the
Python tool) would execute exactly the expected call: the right function, arguments that type-check against
the tool's JSON Schema (a string number for an integer parameter is typed by the schema, as transformers'
`parse_response(tools=...)` does), no undeclared argument, every value equal under the row's per-argument
rule. `reason` is the reason code the reward should give; `why` says it in words.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "tool_call_corpus.jsonl"


def _tool(name: str, desc: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": desc, "parameters": {
        "type": "object", "properties": props, "required": required}}}


# Each scenario: tools, the expected call, another tool of the list (wrong function), one argument to change
# (with a wrong value), an integer argument to stringify (or None), a name an over-eager model invents.
SCENARIOS: list[dict[str, Any]] = [
    {"ask": "What's the weather in Paris for the next 3 days?",
     "tools": [_tool("get_weather", "Forecast for a city", {
         "city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 14},
         "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}}, ["city"]),
         _tool("get_time", "Local time in a city", {"city": {"type": "string"}}, ["city"])],
     "call": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}},
     "other": "get_time", "change": ("city", "London"), "stringify": "days", "invent": "country",
     "enum": ("unit", "kelvin"), "rules": {"city": {"match": "text", "tolerance": 0.0}}},
    {"ask": "Convert 2.5 miles to kilometers.",
     "tools": [_tool("convert_units", "Convert a quantity", {
         "value": {"type": "number"}, "from_unit": {"type": "string", "enum": ["mi", "km", "m", "ft"]},
         "to_unit": {"type": "string", "enum": ["mi", "km", "m", "ft"]}}, ["value", "from_unit", "to_unit"]),
         _tool("calculator", "Evaluate an arithmetic expression", {"expression": {"type": "string"}},
               ["expression"])],
     "call": {"name": "convert_units", "arguments": {"value": 2.5, "from_unit": "mi", "to_unit": "km"}},
     "other": "calculator", "change": ("to_unit", "m"), "stringify": "value", "invent": "precision",
     "enum": ("from_unit", "miles"), "rules": {"value": {"match": "numeric", "tolerance": 1e-9}}},
    {"ask": "Book a table for 4 people at Luigi's tomorrow at 7pm.",
     "tools": [_tool("book_table", "Reserve a restaurant table", {
         "restaurant": {"type": "string"}, "party_size": {"type": "integer", "minimum": 1},
         "time": {"type": "string"}, "date": {"type": "string"}}, ["restaurant", "party_size", "time"]),
         _tool("search_restaurants", "Find restaurants", {"query": {"type": "string"}}, ["query"])],
     "call": {"name": "book_table", "arguments": {"restaurant": "Luigi's", "party_size": 4, "time": "19:00",
                                                 "date": "tomorrow"}},
     "other": "search_restaurants", "change": ("party_size", 2), "stringify": "party_size",
     "invent": "phone_number", "enum": None, "rules": {"restaurant": {"match": "text", "tolerance": 0.0}}},
    {"ask": "What is 17 times 23?",
     "tools": [_tool("multiply", "Multiply two integers", {"a": {"type": "integer"}, "b": {"type": "integer"}},
                     ["a", "b"]),
               _tool("add", "Add two integers", {"a": {"type": "integer"}, "b": {"type": "integer"}}, ["a", "b"])],
     "call": {"name": "multiply", "arguments": {"a": 17, "b": 23}},
     "other": "add", "change": ("b", 32), "stringify": "a", "invent": "c", "enum": None, "rules": {}},
    {"ask": "Send an email to alice@example.com and bob@example.com saying the meeting moved to 3pm.",
     "tools": [_tool("send_email", "Send an email", {
         "to": {"type": "array", "items": {"type": "string"}}, "subject": {"type": "string"},
         "body": {"type": "string"}, "priority": {"type": "string", "enum": ["low", "normal", "high"]}},
         ["to", "body"]),
         _tool("create_event", "Create a calendar event", {"title": {"type": "string"}, "time": {"type": "string"}},
               ["title", "time"])],
     "call": {"name": "send_email", "arguments": {"to": ["alice@example.com", "bob@example.com"],
                                                 "body": "The meeting moved to 3pm."}},
     "other": "create_event", "change": ("to", ["alice@example.com"]), "stringify": None, "invent": "cc",
     "enum": ("priority", "urgent"),
     "rules": {"to": {"match": "unordered", "tolerance": 0.0}, "body": {"match": "text", "tolerance": 0.0}}},
    {"ask": "Look up the stock price of NVDA.",
     "tools": [_tool("get_stock_price", "Latest price of a ticker", {
         "ticker": {"type": "string"}, "exchange": {"type": "string", "enum": ["NASDAQ", "NYSE"]}}, ["ticker"]),
         _tool("get_company_news", "Recent news", {"ticker": {"type": "string"}, "limit": {"type": "integer"}},
               ["ticker"])],
     "call": {"name": "get_stock_price", "arguments": {"ticker": "NVDA"}},
     "other": "get_company_news", "change": ("ticker", "AMD"), "stringify": None, "invent": "currency",
     "enum": ("exchange", "LSE"), "rules": {}},
]


def _js(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)


def _hermes(call: dict[str, Any]) -> str:
    return f"<tool_call>\n{_js(call)}\n</tool_call>"


def _llama(call: dict[str, Any]) -> str:
    return _js({"name": call["name"], "parameters": call["arguments"]})


def _qwen35(call: dict[str, Any]) -> str:
    """Qwen3.5's chat template: a string argument verbatim, anything else as JSON text."""
    params = "".join(f"<parameter={k}>\n{v if isinstance(v, str) else _js(v)}\n</parameter>\n"
                     for k, v in call["arguments"].items())
    return f"<tool_call>\n<function={call['name']}>\n{params}</function>\n</tool_call>"


def _with(call: dict[str, Any], **args: Any) -> dict[str, Any]:
    return {"name": call["name"], "arguments": {**call["arguments"], **args}}


def _rows_for(i: int, s: dict[str, Any]) -> list[tuple[str, Any, bool, str, str]]:
    """(family, completion, accept, reason, why) for one scenario."""
    call, ask = s["call"], s["ask"]
    key, wrong = s["change"]
    rows: list[tuple[str, Any, bool, str, str]] = [
        ("hermes_clean", _hermes(call), True, "ok", "a bare Qwen/Hermes call"),
        ("hermes_prose_before", f"Sure! I'll use the {call['name']} tool for that.\n{_hermes(call)}", True, "ok",
         "a sentence before the call: the Qwen parser keeps it as content and runs the call"),
        ("hermes_think_then_call", f"<think>\nThe user asks: {ask} I should call {call['name']}.\n</think>\n\n"
         f"{_hermes(call)}", True, "ok", "reasoning, then the call outside it"),
        ("prefilled_think_then_call", f"The user wants {call['name']}; the arguments are clear.\n</think>\n\n"
         f"{_hermes(call)}", True, "ok", "the template pre-filled <think>; the call follows its close"),
        ("call_only_in_think", f"<think>\nI could answer with {_hermes(call)} but let me just reply.\n</think>\n\n"
         "I have taken care of it.", False, "no_call", "the call is inside the reasoning: nothing runs"),
        ("unclosed_think_call", f"<think>\nPlan: {_hermes(call)}", False, "no_call",
         "the reply is still reasoning (truncated inside <think>)"),
        ("two_calls", f"{_hermes(call)}\n{_hermes(call)}", False, "several_calls",
         "the same call twice: the tool would run twice"),
        ("two_calls_other_first", f"{_hermes({'name': s['other'], 'arguments': {}})}\n{_hermes(call)}", False,
         "several_calls", "an extra call before the expected one"),
        ("trailing_comma", "<tool_call>\n" + _js(call)[:-2] + ",}}\n</tool_call>", False, "bad_arguments",
         "a trailing comma: json.loads (the template parser) rejects the block, so nothing runs"),
        ("single_quotes", "<tool_call>\n" + str(call) + "\n</tool_call>", False, "bad_arguments",
         "a Python dict with single quotes is not JSON"),
        ("extra_argument", _hermes(_with(call, **{s["invent"]: "yes"})), False, "hallucinated_argument",
         f"'{s['invent']}' is not a parameter of {call['name']}: the Python tool raises TypeError"),
        ("wrong_function", _hermes({"name": s["other"], "arguments": call["arguments"]}), False,
         "wrong_function", f"{s['other']} instead of {call['name']}"),
        ("wrong_value", _hermes(_with(call, **{key: wrong})), False, "not_equal",
         f"{key} = {wrong!r}, expected {call['arguments'][key]!r}"),
        ("answer_without_call", f"I can't check live data, but {ask.lower()} — probably fine!", False, "no_call",
         "an answer in prose with no call"),
        ("fenced_json_no_tags", f"```json\n{_js(call)}\n```", False, "no_call",
         "a fenced JSON block: Qwen's template parser reads <tool_call> blocks only, so nothing runs"),
        ("llama3_clean", _llama(call), True, "ok", "Llama 3.1 JSON with \"parameters\""),
        ("llama3_python_tag", "<|python_tag|>" + _llama(call) + "<|eom_id|>", True, "ok",
         "Llama 3.1 with <|python_tag|>"),
        ("llama3_prose_before", f"Let me look that up.\n{_llama(call)}", False, "no_call",
         "Llama renders no prose beside a call: its parser reads this reply as plain content"),
        ("mistral_list", "[TOOL_CALLS][" + _js(call) + "]", True, "ok", "Mistral v3 [TOOL_CALLS] list"),
        ("mistral_v11", f"[TOOL_CALLS]{call['name']}[ARGS]{_js(call['arguments'])}", True, "ok",
         "Mistral v11 name[ARGS]{...}"),
        ("trl_parsed_message", [{"role": "assistant", "content": "",
                                 "tool_calls": [{"type": "function", "function": call}]}], True, "ok",
         "TRL's conversational completion: tool_calls parsed by the chat template"),
        ("trl_parsed_wrong_value", [{"role": "assistant", "content": "",
                                     "tool_calls": [{"type": "function", "function": _with(call, **{key: wrong})}]}],
         False, "not_equal", "the parsed call has a wrong value"),
        ("arguments_as_json_string", _hermes({"name": call["name"], "arguments": _js(call["arguments"])}), False,
         "bad_arguments", "arguments given as a JSON string: TRL calls tool(**arguments) and fails"),
        ("key_order_and_spacing", "<tool_call>" + json.dumps({"arguments": dict(reversed(list(
            call["arguments"].items()))), "name": call["name"]}, indent=2) + "</tool_call>", True, "ok",
         "keys in another order, pretty-printed, no newlines around the block"),
    ]
    rows += [
        ("qwen35_xml", _qwen35(call), True, "ok",
         "Qwen3.5 / Qwen3-Coder XML call: values are text, typed by the tool's schema (TRL's qwen3_5 template)"),
        ("qwen35_xml_wrong_value", _qwen35(_with(call, **{key: wrong})), False, "not_equal",
         f"the XML call has {key} = {wrong!r}"),
        ("qwen35_xml_think", f"<think>\nI need {call['name']}.\n</think>\n\n{_qwen35(call)}", True, "ok",
         "Qwen3.5 reasoning, then the XML call"),
        ("mistral_v11_decoded", f"[TOOL_CALLS]{call['name']}{_js(call['arguments'])}", True, "ok",
         "Mistral v11+ decoded without its [ARGS] control token (vLLM's test_extract_tool_calls form)"),
        ("mistral_v11_two_calls", f"[TOOL_CALLS]{call['name']}[ARGS]{_js(call['arguments'])}"
         f"[TOOL_CALLS]{s['other']}[ARGS]{{}}", False, "several_calls", "two v11 calls where one was expected"),
        ("mistral_trailing_text", "[TOOL_CALLS] [" + _js(call) + "]\nLet me know if you need anything else.",
         True, "ok", "text after the call list is content (vLLM reads the list and keeps the rest)"),
        ("mistral_prose_before", f"Let me check.[TOOL_CALLS]{call['name']}[ARGS]{_js(call['arguments'])}", True,
         "ok", "a sentence before [TOOL_CALLS] (vLLM's content_before_tool_args form)"),
        ("openai_envelope_in_tool_call", _hermes({"type": "function", "function": call}), False, "bad_arguments",
         "the OpenAI wire envelope inside <tool_call>: the template parser takes the object as the function, "
         "finds no name, and runs nothing"),
        ("cut_off_before_close", _hermes(call)[: -len("</tool_call>")], True, "ok",
         "generation stopped after the JSON, before </tool_call>: transformers' and vLLM's parsers run it"),
        ("missing_closing_brace", _hermes(call).replace("}}\n", "}\n"), False, "bad_arguments",
         "the object is not closed: not JSON (vLLM's invalid-JSON case)"),
    ]
    missing = next((r for r in s["tools"][0]["function"]["parameters"]["required"]), None)
    if missing is not None and len(call["arguments"]) > 1:
        args = {k: v for k, v in call["arguments"].items() if k != missing}
        rows.append(("missing_required", _hermes({"name": call["name"], "arguments": args}), False, "bad_arguments",
                     f"required '{missing}' is missing"))
    if s["stringify"]:
        name = s["stringify"]
        rows.append(("stringified_number", _hermes(_with(call, **{name: str(call["arguments"][name])})), True, "ok",
                     f"{name} as a string; the schema types it as a number (transformers parse_response(tools=))"))
        rows.append(("stringified_non_number", _hermes(_with(call, **{name: "three"})), False, "bad_arguments",
                     f"{name} = 'three' is not a number"))
    if s["enum"]:
        name, bad = s["enum"]
        rows.append(("enum_violation", _hermes(_with(call, **{name: bad})), False, "bad_arguments",
                     f"{name} = {bad!r} is not in the enum"))
    for name, rule in s["rules"].items():
        value = call["arguments"][name]
        if rule["match"] == "text":
            rows.append(("normalised_text", _hermes(_with(call, **{name: "  " + value.upper() + " "})), True, "ok",
                         f"{name} differs only in case and spaces (rule: text)"))
        elif rule["match"] == "unordered":
            rows.append(("unordered_list", _hermes(_with(call, **{name: list(reversed(value))})), True, "ok",
                         f"{name} in another order (rule: unordered)"))
        elif rule["match"] == "numeric":
            rows.append(("numeric_form", _hermes(_with(call, **{name: float(value) + 0.0})).replace(
                str(float(value)), f"{float(value):.2f}"), True, "ok", f"{name} written {float(value):.2f}"))
    default_tool = s["tools"][0]["function"]["parameters"]["properties"]
    for name, prop in default_tool.items():
        if "default" in prop and name not in call["arguments"]:
            rows.append(("explicit_default", _hermes(_with(call, **{name: prop["default"]})), True, "ok",
                         f"{name} given explicitly at its default"))
    return rows


# Outputs as public parser test suites and docs write them (shapes and values kept; the tools are the
# functions those tests call). `source` names where each form comes from.
_VLLM_MISTRAL = "vllm-project/vllm tests/tool_parsers/test_mistral_tool_parser.py"
_VLLM_HERMES = "vllm-project/vllm tests/tool_parsers/test_hermes_tool_parser.py"
_SGLANG_LLAMA = "sgl-project/sglang tool_parser llama tests (test_llama_python_tag_format)"
_TRL_DOCS = "huggingface/trl chat_template_utils.py parse_response / add_response_schema docstrings"
_NUM = {"type": "number"}
_ADD = _tool("add", "Add two numbers", {"a": _NUM, "b": _NUM}, ["a", "b"])
_ADD_THIS = _tool("add_this_and_that", "Add two numbers", {"a": _NUM, "b": _NUM}, ["a", "b"])
_MULTIPLY = _tool("multiply", "Multiply two numbers", {"a": _NUM, "b": _NUM}, ["a", "b"])
_ADD_STRINGS = _tool("add_two_strings", "Concatenate", {"a": {"type": "string"}, "b": {"type": "string"}},
                     ["a", "b"])
_WEATHER = _tool("get_current_weather", "Current weather", {
    "city": {"type": "string"}, "state": {"type": "string"},
    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, ["city", "state", "unit"])
_AGE = _tool("get_age", "Age of a person", {"name": {"type": "string"}}, ["name"])
_NO_ARGS = _tool("toolname_no_args", "A tool without parameters", {}, [])
_FINAL = _tool("final_answer", "Finish", {"trigger": {"type": "boolean"}}, ["trigger"])
_DB = _tool("get_db_config", "Read a setting", {"param": {"type": "string"}}, ["param"])
_SEARCH = _tool("search", "Web search", {"q": {"type": "string"}}, ["q"])
_SEARCH_Q = _tool("search", "Web search", {"query": {"type": "string"}}, ["query"])
_TEMP = _tool("get_current_temperature", "Temperature", {
    "location": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, ["location"])
_MUL_INT = _tool("multiply", "Multiply two integers", {"a": {"type": "integer"}, "b": {"type": "integer"}},
                 ["a", "b"])
_SF = {"city": "San Francisco", "state": "CA", "unit": "celsius"}

# (family, source, tools, expected call, completion, accept, reason, why)
REAL: list[tuple[str, str, list[dict[str, Any]], dict[str, Any], Any, bool, str, str]] = [
    ("mistral_v11_decoded", _VLLM_MISTRAL, [_ADD_THIS], {"name": "add_this_and_that", "arguments": {"a": 3.5, "b": 4}},
     '[TOOL_CALLS]add_this_and_that{"a": 3.5, "b": 4}', True, "ok", "v11 call decoded without [ARGS]"),
    ("mistral_v11_decoded", _VLLM_MISTRAL, [_WEATHER], {"name": "get_current_weather", "arguments": _SF},
     '[TOOL_CALLS]get_current_weather{"city": "San Francisco", "state": "CA", "unit": "celsius"}', True, "ok",
     "v11 call decoded without [ARGS], three string arguments"),
    ("mistral_v11_two_calls", _VLLM_MISTRAL, [_ADD, _MULTIPLY], {"name": "add", "arguments": {"a": 3.5, "b": 4}},
     '[TOOL_CALLS]add{"a": 3.5, "b": 4}[TOOL_CALLS]multiply{"a": 3, "b": 6}', False, "several_calls",
     "two decoded v11 calls where one was expected"),
    ("mistral_v11", _VLLM_MISTRAL, [_ADD_THIS], {"name": "add_this_and_that", "arguments": {"a": 3.5, "b": 4}},
     '[TOOL_CALLS]add_this_and_that[ARGS]{"a": 3.5, "b": 4}', True, "ok", "v11 with its [ARGS] token"),
    ("mistral_v11_two_calls", _VLLM_MISTRAL, [_ADD, _MULTIPLY], {"name": "add", "arguments": {"a": 3.5, "b": 4}},
     '[TOOL_CALLS]add[ARGS]{"a": 3.5, "b": 4}[TOOL_CALLS]multiply[ARGS]{"a": 3, "b": 6}', False, "several_calls",
     "two v11 calls where one was expected"),
    ("mistral_prose_before", _VLLM_MISTRAL, [_ADD], {"name": "add", "arguments": {"a": 1, "b": 2}},
     'hi[TOOL_CALLS]add[ARGS]{"a": 1, "b": 2}', True, "ok", "content before the v11 call"),
    ("mistral_list", _VLLM_MISTRAL, [_ADD], {"name": "add", "arguments": {"a": 3, "b": 4}},
     '[TOOL_CALLS]  [ {"name":"add" , "arguments" : {"a": 3, "b": 4} } ]', True, "ok",
     "v3 list with loose spacing"),
    ("mistral_list", _VLLM_MISTRAL, [_ADD_STRINGS], {"name": "add_two_strings", "arguments": {"a": "3", "b": "4"}},
     '[TOOL_CALLS] [{"name": "add_two_strings", "arguments":{"a": "3", "b": "4"}}]', True, "ok",
     "v3 list, string arguments that look like numbers stay strings"),
    ("mistral_list", _VLLM_MISTRAL, [_WEATHER], {"name": "get_current_weather", "arguments": _SF},
     '[TOOL_CALLS] [{"arguments": {"city": "San Francisco", "state": "CA", "unit": "celsius"}, '
     '"name": "get_current_weather"}]', True, "ok", "arguments before the name"),
    ("mistral_list", _VLLM_MISTRAL, [_AGE], {"name": "get_age", "arguments": {"name": "John Doe"}},
     '[TOOL_CALLS] [{"arguments": {"name": "John Doe"}, "name": "get_age"}]', True, "ok",
     "an argument called 'name' before the function name"),
    ("mistral_two_in_list", _VLLM_MISTRAL, [_ADD, _WEATHER], {"name": "add", "arguments": {"a": 3.5, "b": 4}},
     '[TOOL_CALLS] [{"name": "add", "arguments": {"a": 3.5, "b": 4}}, {"name": "get_current_weather", '
     '"arguments":{"city": "San Francisco", "state": "CA", "unit": "celsius"}}]', False, "several_calls",
     "two calls in one list where one was expected"),
    ("mistral_trailing_text", _VLLM_MISTRAL, [_WEATHER],
     {"name": "get_current_weather", "arguments": {"city": "Dallas", "state": "TX", "unit": "fahrenheit"}},
     '[TOOL_CALLS] [{"name": "get_current_weather", "arguments":{"city": "Dallas", "state": "TX", '
     '"unit": "fahrenheit"}}]\nextra trailing data', True, "ok", "trailing text after the list is content"),
    ("mistral_no_arguments", _VLLM_MISTRAL, [_NO_ARGS], {"name": "toolname_no_args", "arguments": {}},
     "[TOOL_CALLS]toolname_no_args", True, "ok", "a v11 call of a tool without parameters"),
    ("mistral_wrong_value", _VLLM_MISTRAL, [_WEATHER], {"name": "get_current_weather", "arguments": _SF},
     '[TOOL_CALLS]get_current_weather[ARGS]{"city": "San Francisco", "state": "CA", "unit": "fahrenheit"}',
     False, "not_equal", "unit fahrenheit, expected celsius"),
    ("hermes_clean", _VLLM_HERMES, [_FINAL], {"name": "final_answer", "arguments": {"trigger": True}},
     '<tool_call>\n{"name": "final_answer", "arguments": {"trigger": true}}\n</tool_call>', True, "ok",
     "a boolean argument (vLLM bug 19056's output)"),
    ("cut_off_before_close", _VLLM_HERMES, [_FINAL], {"name": "final_answer", "arguments": {"trigger": True}},
     '<tool_call>\n{"name": "final_answer", "arguments": {"trigger": true}}', True, "ok",
     "the call runs until the end of the text (test_hermes_parser_non_streaming_tool_call_until_eos)"),
    ("missing_closing_brace", _VLLM_HERMES, [_FINAL], {"name": "final_answer", "arguments": {"trigger": True}},
     '<tool_call>\n{"name": "final_answer", "arguments": {"trigger": true}', False, "bad_arguments",
     "the object is never closed: not JSON"),
    ("arguments_as_json_string", _VLLM_HERMES, [_DB], {"name": "get_db_config", "arguments": {"param": "max_connections"}},
     '<tool_call>\n{"name": "get_db_config", "arguments": "{\\"param\\": \\"max_connections\\"}"}\n</tool_call>',
     False, "bad_arguments", "Granite-4-style serialised arguments: TRL calls tool(**arguments) with a string "
     "and the call fails (vLLM re-reads it; TRL does not)"),
    ("two_calls", _VLLM_HERMES, [_SEARCH], {"name": "search", "arguments": {"q": "cats"}},
     '<tool_call>{"name": "search", "arguments": {"q": "cats"}}</tool_call>'
     '<tool_call>{"name": "search", "arguments": {"q": "dogs"}}</tool_call>', False, "several_calls",
     "two searches where one was expected"),
    ("hermes_prose_before", _VLLM_HERMES, [_TEMP],
     {"name": "get_current_temperature", "arguments": {"location": "San Francisco", "unit": "celsius"}},
     'Sure, let me check the weather.<tool_call>{"name": "get_current_temperature", '
     '"arguments": {"location": "San Francisco", "unit": "celsius"}}</tool_call>', True, "ok",
     "content right before the tag, no newline"),
    ("hermes_multiline_json", _VLLM_HERMES, [_TEMP],
     {"name": "get_current_temperature",
      "arguments": {"location": "San Francisco, California, United States", "unit": "celsius"}},
     '<tool_call>{"name": "get_current_temperature",\n"arguments": {"location":\n'
     '"San Francisco, California, United States", "unit": "celsius"}}</tool_call>', True, "ok",
     "JSON broken over lines between tokens"),
    ("llama3_python_tag", _SGLANG_LLAMA, [_SEARCH_Q], {"name": "search", "arguments": {"query": "weather"}},
     '<|python_tag|>{"name": "search", "parameters": {"query": "weather"}}', True, "ok",
     "Llama 3.1 JSON after <|python_tag|>"),
    ("llama3_prose_before", _SGLANG_LLAMA, [_SEARCH_Q], {"name": "search", "arguments": {"query": "weather"}},
     'Here are some results: <|python_tag|>{"name": "search", "parameters": {"query": "weather"}}', False,
     "no_call", "prose before the call: TRL's Llama 3 template reads no call there (its parse fails and the "
     "reply is plain text)"),
    ("hermes_im_end", _TRL_DOCS, [_MUL_INT], {"name": "multiply", "arguments": {"a": 3, "b": 4}},
     '<tool_call>\n{"name": "multiply", "arguments": {"a": 3, "b": 4}}\n</tool_call><|im_end|>', True, "ok",
     "the Qwen3 call with its end-of-turn token"),
    ("qwen35_xml", _TRL_DOCS, [_MUL_INT], {"name": "multiply", "arguments": {"a": 3, "b": 4}},
     "<tool_call>\n<function=multiply>\n<parameter=a>\n3\n</parameter>\n<parameter=b>\n4\n</parameter>\n"
     "</function>\n</tool_call><|im_end|>", True, "ok", "Qwen3.5 XML call; '3' is typed 3 by the schema"),
]


def build() -> list[dict[str, Any]]:
    out = []
    for i, s in enumerate(SCENARIOS):
        for family, completion, accept, reason, why in _rows_for(i, s):
            out.append({"id": f"{family}@{s['call']['name']}", "family": family, "prompt": s["ask"],
                        "completion": completion, "expected_call": s["call"], "tools": s["tools"],
                        "rules": s["rules"], "accept": accept, "reason": reason, "why": why})
    for n, (family, source, tools, call, completion, accept, reason, why) in enumerate(REAL):
        out.append({"id": f"{family}@{call['name']}#{n}", "family": family, "prompt": "", "source": source,
                    "completion": completion, "expected_call": call, "tools": tools, "rules": {},
                    "accept": accept, "reason": reason, "why": why})
    return out


if __name__ == "__main__":
    rows = build()
    OUT.write_text("".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows), encoding="utf-8")
    print(f"{len(rows)} rows -> {OUT}")
