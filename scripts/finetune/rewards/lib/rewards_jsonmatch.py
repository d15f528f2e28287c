"""The answer's JSON object against the gold JSON, field by field — copied verbatim beside rewards.py.

Standalone (stdlib; jsonschema only for the format companion): the renderer copies this file into the run
directory as ``rewards_jsonmatch.py`` and the inspection gate binds its sha256 like rewards.py itself.

How the answer is read (the shapes instruct models write):

* Only the text after the last ``</think>`` counts; a ``<think>`` block never closed has no answer (a JSON
  object inside the reasoning followed by a refusal is not an answer).
* The answer is the last ```` ```json ```` (or bare ```` ``` ````) fenced block holding an object, else the
  object written bare — alone or after / before a sentence. Several different objects are a hedge; the same
  object twice is fine. An object opened and never closed is truncated.
* Correctness reads the object leniently (trailing commas are accepted) and compares VALUES: a total written
  as the string ``"1,234.50"`` or a date written ``15/03/2024`` names the gold's value. Whether the value has
  the required SHAPE (strict JSON, a number, an ISO date, the code's form, no extra keys) is the format
  companion's question (:func:`format_reason`, a JSON Schema derived from the gold or given).

Per-field rules (``match``): ``exact`` (JSON equality, 1 == 1.0), ``text`` (case, whitespace, accents and
punctuation ignored), ``number`` (within ``tolerance``; numeric strings with thousands separators or a
currency symbol read as numbers), ``date`` (normalised to ISO ``YYYY-MM-DD``; ``day_first`` settles 03/04),
``code`` (an enum or identifier: case and surrounding whitespace ignored, nothing else; ``values`` lists the
allowed codes).
"""

from __future__ import annotations

import datetime
import json
import re
import unicodedata
from typing import Any

# reason id -> what it means (a row's reason is the id, or ``id:field`` naming the first field at fault)
REASONS = {
    "ok": "every gold field matches and no other key is present",
    "no_json": "no JSON object in the answer (after any <think> block)",
    "only_in_think": "the only JSON object is inside the <think> reasoning; the answer after it has none",
    "unclosed_think": "the <think> block is never closed (truncated in its reasoning: no answer)",
    "truncated": "the JSON object is opened and never closed (truncated output)",
    "invalid_json": "the JSON object does not parse, even allowing trailing commas",
    "several_objects": "several different JSON objects in the answer (a hedge)",
    "too_large": "the JSON is larger or deeper than the limits",
    "missing_field": "a required field is missing or null",
    "wrong_value": "a field's value differs from the gold under the field's rule",
    "hallucinated_key": "a key that is not in the gold (extra_keys: forbid)",
    "hallucinated_value": "a field the gold leaves null has a value",
    "schema": "the object does not validate against the format schema",
    "not_strict_json": "the object parses only leniently (trailing commas): json.loads would refuse it",
    "in_array": "the answer object is an element of a JSON array, not the object itself",
    "no_gold": "the row's gold is not a JSON object (not applicable)",
}

MATCHES = ("exact", "text", "number", "date", "code")
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.S)
_LOOKS_LIKE_OBJECT = re.compile(r"\{\s*(?:\"|\}|')")
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_NUMBER = re.compile(r"^[+-]?(?:\d{1,3}(?:[, \u00a0\u202f']\d{3})+|\d+)(?:\.\d+)?$")
_EUROPEAN = re.compile(r"^[+-]?(?:\d{1,3}(?:[. \u00a0\u202f']\d{3})+|\d+),\d{1,2}$")
_CURRENCY = "$€£¥₹₩₽¤"
_MONTHS = {m: i + 1 for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                           "nov", "dec"))}
# a trailing currency code; tried only where a whitespace run starts (from inside a long run it re-read the run)
_CODE_TAIL = re.compile(r"(?<!\s)\s*[A-Z]{3}$")
_DATE_YMD = re.compile(r"^(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?:[T ][\d:.]+(?:Z|[+-]\d\d:?\d\d)?)?$")
_DATE_NUM = re.compile(r"^(\d{1,2})[-/.](\d{1,2})[-/.](\d{4})$")
_DATE_DMONY = re.compile(r"^(\d{1,2})(?:st|nd|rd|th)?\s+([A-Za-z]{3,9})\.?,?\s+(\d{4})$")
_DATE_MONDY = re.compile(r"^([A-Za-z]{3,9})\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})$")
_ISO_DATE = r"^\d{4}-\d{2}-\d{2}$"

# ------------------------------------------------------------------------------------ reading --


def after_thinking(text: str) -> tuple[str | None, bool]:
    """(the answer text after the last </think>, whether a think block held text); None: never closed."""
    if "</think>" in text:
        cut = text.rfind("</think>")
        return text[cut + len("</think>"):], True
    if "<think>" in text:
        return None, True
    return text, False


def _objects(text: str) -> tuple[list[tuple[str, int]], int]:
    """Top-level {...} spans outside strings with their offsets, in order, and where an object left open at
    the end starts (-1)."""
    spans: list[tuple[str, int]] = []
    depth, start, in_string, escaped = 0, -1, False, False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"' and depth:
            in_string = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                spans.append((text[start:i + 1], start))
    return spans, start if depth > 0 else -1


def _without_comments(text: str) -> str:
    """// and /* */ comments outside JSON strings removed (models annotate values that way)."""
    out, i, in_string = [], 0, False
    while i < len(text):
        ch = text[i]
        if in_string:
            out.append(ch)
            if ch == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
            out.append(ch)
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = len(text) if end < 0 else end + 2
            continue
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def loads(candidate: str, lenient: bool) -> tuple[bool, Any]:
    """(parsed, value): strict json.loads, or leniently with comments and trailing commas dropped."""
    try:
        return True, json.loads(candidate)
    except (ValueError, RecursionError):
        pass
    if lenient:
        try:
            return True, json.loads(_TRAILING_COMMA.sub(r"\1", _without_comments(candidate)))
        except (ValueError, RecursionError):
            pass
    return False, None


def _too_large(candidate: str, max_bytes: int, max_depth: int) -> bool:
    if len(candidate.encode("utf-8", "surrogatepass")) > max_bytes:
        return True
    depth = deepest = 0
    for ch in re.sub(r'"(?:[^"\\]|\\.)*"', "", candidate):
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest > max_depth


def answer_object(text: str, lenient: bool = True, max_bytes: int = 100_000,
                  max_depth: int = 64) -> tuple[dict[str, Any] | None, str]:
    """(the answer's JSON object, "ok") or (None, reason id). See the module doc for the shapes."""
    answer, thought = after_thinking(text)
    if answer is None:
        return None, "unclosed_think"
    if answer.count("```") % 2 and "{" in answer[answer.rfind("```"):]:
        return None, "truncated"  # a fence opened after the last closed block and never closed
    fenced = [body.strip() for lang, body in _FENCE.findall(answer) if lang.lower() in ("", "json", "json5", "jsonc")]
    candidates = [b for b in fenced if _LOOKS_LIKE_OBJECT.match(b)]
    if not candidates:
        spans, open_at = _objects(answer)
        if open_at >= 0 and _LOOKS_LIKE_OBJECT.match(answer[open_at:]):
            return None, "truncated"
        candidates = [s for s, _ in spans if _LOOKS_LIKE_OBJECT.match(s)]
    if not candidates:
        if thought and "{" in text:
            return None, "only_in_think"
        return None, "no_json"
    values = []
    for candidate in candidates:
        if _too_large(candidate, max_bytes, max_depth):
            return None, "too_large"
        ok, value = loads(candidate, lenient)
        if ok and isinstance(value, dict):
            values.append(value)
        elif candidate is candidates[-1]:
            return None, "invalid_json"  # the final object is broken: an earlier one is not the answer
    distinct = {json.dumps(v, sort_keys=True) for v in values}
    if len(distinct) > 1:
        return None, "several_objects"
    return values[-1], "ok"


def strict_ok(text: str, max_bytes: int = 100_000, max_depth: int = 64) -> bool:
    """The answer object parses with plain json.loads (no comments, no trailing commas)."""
    value, reason = answer_object(text, lenient=False, max_bytes=max_bytes, max_depth=max_depth)
    return value is not None and reason == "ok"


def in_array(text: str) -> bool:
    """The bare answer object is an element of a JSON array ('[{...}]'): not the object asked for."""
    answer = after_thinking(text)[0] or ""
    if any(_LOOKS_LIKE_OBJECT.match(b.strip()) for _, b in _FENCE.findall(answer)):
        return False  # a fenced block that is an object is the answer (answer_object reads it)
    spans = [(s, at) for s, at in _objects(answer)[0] if _LOOKS_LIKE_OBJECT.match(s)]
    return bool(spans) and answer[:spans[-1][1]].rstrip().endswith(("[", ","))

# ------------------------------------------------------------------------------------ values --


def text_key(value: str) -> str:
    """Case, whitespace, accents and punctuation dropped: 'Müller  GmbH.' == 'muller gmbh'."""
    value = unicodedata.normalize("NFKD", value)
    value = "".join(ch for ch in value if not unicodedata.combining(ch))
    value = "".join(ch if not unicodedata.category(ch).startswith(("P", "S")) else " " for ch in value)
    return " ".join(value.casefold().split())


def as_number(value: Any) -> float | None:
    """A JSON number, or a numeric string ('1,234.50', '$ 1 234.50', '1234.5 EUR'); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str):
        return None
    text = value.strip().strip(_CURRENCY).strip()
    text = _CODE_TAIL.sub("", text).strip().strip(_CURRENCY).strip()
    if _EUROPEAN.match(text):  # 1.234,50 / 1 234,50 / 46,80: the comma is the decimal separator
        text = re.sub(r"[. \u00a0\u202f']", "", text).replace(",", ".")
    if not _NUMBER.match(text):
        return None
    try:
        return float(re.sub(r"[, \u00a0\u202f']", "", text))
    except ValueError:
        return None


def _day(year: int, month: int, day: int) -> str | None:
    try:
        return datetime.date(year, month, day).isoformat()
    except ValueError:
        return None


def iso_date(value: Any, day_first: bool = True) -> str | None:
    """The ISO day a date string names ('2024-03-15', '15/03/2024', 'March 15, 2024', '15 Mar 2024')."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    m = _DATE_YMD.match(text)
    if m:
        return _day(int(m[1]), int(m[2]), int(m[3]))
    m = _DATE_NUM.match(text)
    if m:
        a, b, year = int(m[1]), int(m[2]), int(m[3])
        first, second = _day(year, b, a), _day(year, a, b)  # day-first, month-first readings
        if first and second and first != second:
            return first if day_first else second
        return first or second
    for pattern, day_group, month_group in ((_DATE_DMONY, 1, 2), (_DATE_MONDY, 2, 1)):
        m = pattern.match(text)
        month = _MONTHS.get(m[month_group][:3].lower()) if m else None
        if m and month:
            return _day(int(m[3]), month, int(m[day_group]))
    return None


def field_matches(answer: Any, gold: Any, rule: dict[str, Any]) -> bool:
    """Whether ``answer`` names the gold value under ``rule`` ({"match": ..., "tolerance", "day_first", ...})."""
    match = rule.get("match", "text")
    if isinstance(gold, (dict, list)) or match == "exact":
        return bool(_canon(answer) == _canon(gold))
    if match == "number":
        a, g = as_number(answer), as_number(gold)
        return a is not None and g is not None and abs(a - g) <= float(rule.get("tolerance", 0.0)) + 1e-9
    if match == "date":
        day = iso_date(gold, True) or iso_date(gold, False)
        return day is not None and iso_date(answer, bool(rule.get("day_first", True))) == day
    if not isinstance(answer, (str, int, float)) or isinstance(answer, bool):
        return bool(answer == gold)
    if match == "code":
        return str(answer).strip().casefold() == str(gold).strip().casefold()
    return text_key(str(answer)) == text_key(str(gold)) and text_key(str(gold)) != ""


def _canon(value: Any) -> Any:
    """JSON equality with 1 == 1.0 (dict key order ignored)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, list):
        return [_canon(v) for v in value]
    if isinstance(value, dict):
        return {k: _canon(v) for k, v in sorted(value.items())}
    return value

# ------------------------------------------------------------------------------------ scoring --


def gold_object(gold: Any) -> dict[str, Any] | None:
    """The gold as a dict (a JSON string is parsed); None when it is not an object."""
    if isinstance(gold, str):
        ok, gold = loads(gold.strip(), lenient=False)
        if not ok:
            return None
    return gold if isinstance(gold, dict) and gold else None


def field_report(answer: dict[str, Any], gold: dict[str, Any], rules: dict[str, dict[str, Any]], default: str,
                 required: list[str] | None, extra_keys: str) -> dict[str, str]:
    """field -> reason id ("ok", missing_field, wrong_value, hallucinated_value, hallucinated_key)."""
    report: dict[str, str] = {}
    for key, gold_value in gold.items():
        rule = rules.get(key, {"match": default})
        value = answer.get(key)
        if gold_value is None or gold_value == "":
            report[key] = "ok" if value is None or value == "" else "hallucinated_value"
        elif value is None:
            needed = required is None or key in required
            report[key] = "missing_field" if needed else "ok"
        else:
            report[key] = "ok" if field_matches(value, gold_value, rule) else "wrong_value"
    if extra_keys == "forbid":
        for key in answer:
            if key not in gold and key not in rules:
                report[key] = "hallucinated_key"
    return report


def score(text: str, gold: Any, rules: dict[str, dict[str, Any]], default: str = "text",
          required: list[str] | None = None, extra_keys: str = "forbid", partial: bool = False,
          ceiling: float = 0.5, max_bytes: int = 100_000, max_depth: int = 64) -> tuple[float | None, str]:
    """(score, reason): 1.0 when every gold field matches and no hallucinated key is present; with
    ``partial`` ``ceiling`` × the share of fields right otherwise; 0.0 for no / broken JSON; None when the
    gold is not an object. The reason is ``ok``, a reading reason, or ``<id>:<field>`` for the first field
    at fault (the gate groups disagreements by it)."""
    gold_obj = gold_object(gold)
    if gold_obj is None:
        return None, "no_gold"
    answer, reason = answer_object(text, True, max_bytes, max_depth)
    if answer is None:
        return 0.0, reason
    report = field_report(answer, gold_obj, rules, default, required, extra_keys)
    bad = [(k, r) for k, r in report.items() if r != "ok"]
    if not bad:
        return 1.0, "ok"
    why = f"{bad[0][1]}:{bad[0][0]}"
    if not partial:
        return 0.0, why
    return ceiling * (len(report) - len(bad)) / len(report), why

# ------------------------------------------------------------------------------------ format --


def _code_pattern(gold: str) -> str:
    """The code's form: 'EUR' -> ^[A-Z]{3}$, 'INV-2024-0042' -> ^[A-Z]{3}-[0-9]{4}-[0-9]{4}$."""
    out, prev, count = [], None, 0
    for ch in gold:
        cls = "[A-Z]" if "A" <= ch <= "Z" else "[a-z]" if "a" <= ch <= "z" else "[0-9]" if ch.isdigit() \
            else re.escape(ch)
        if cls == prev:
            count += 1
            continue
        if prev is not None:
            out.append(prev + (f"{{{count}}}" if count > 1 else ""))
        prev, count = cls, 1
    if prev is not None:
        out.append(prev + (f"{{{count}}}" if count > 1 else ""))
    return "^" + "".join(out) + "$"


def _field_schema(gold_value: Any, rule: dict[str, Any]) -> dict[str, Any]:
    match = rule.get("match", "text")
    if gold_value is None:
        return {}
    if isinstance(gold_value, (dict, list)) or match == "exact":
        kind = {bool: "boolean", int: "number", float: "number", str: "string", list: "array", dict: "object"}
        return {"type": kind[type(gold_value)]}
    if match == "number":
        return {"type": "number"}
    if match == "date":
        return {"type": "string", "pattern": _ISO_DATE}
    if match == "code":
        if rule.get("values"):
            return {"enum": list(rule["values"])}
        return {"type": "string", "pattern": _code_pattern(str(gold_value))}
    return {"type": "string", "minLength": 1}


def derived_schema(gold: dict[str, Any], rules: dict[str, dict[str, Any]], default: str,
                   required: list[str] | None, extra_keys: str) -> dict[str, Any]:
    """The JSON Schema a well-formed answer to this row meets: the gold's keys (required unless the gold is
    null or ``required`` leaves them out), each field's shape by its rule, no other key when forbidden."""
    properties = {k: _field_schema(v, rules.get(k, {"match": default})) for k, v in gold.items()}
    properties.update({k: _field_schema(None, r) for k, r in rules.items() if k not in properties})
    for key in properties:  # null is how a model says "not on the document": a shape, maybe a wrong value
        if properties[key]:
            properties[key] = {"anyOf": [properties[key], {"type": "null"}]}
    needed = [k for k, v in gold.items() if v is not None and (required is None or k in required)]
    schema: dict[str, Any] = {"type": "object", "properties": properties, "required": needed}
    if extra_keys == "forbid":
        schema["additionalProperties"] = False
    return schema


def format_reason(text: str, gold: Any, schema: dict[str, Any] | None, rules: dict[str, dict[str, Any]],
                  default: str = "text", required: list[str] | None = None, extra_keys: str = "forbid",
                  max_bytes: int = 100_000, max_depth: int = 64) -> str | None:
    """"ok" when the answer is one strict-JSON object valid against ``schema`` (or the schema derived from
    the row's gold), else the reason id; None when there is no schema and the gold is not an object."""
    import jsonschema

    if schema is None:
        gold_obj = gold_object(gold)
        if gold_obj is None:
            return None
        schema = derived_schema(gold_obj, rules, default, required, extra_keys)
    answer, reason = answer_object(text, True, max_bytes, max_depth)
    if answer is None:
        return reason
    if not strict_ok(text, max_bytes, max_depth):
        return "not_strict_json"
    if in_array(text):
        return "in_array"
    validator = jsonschema.validators.validator_for(schema)(schema)
    error = next(iter(validator.iter_errors(answer)), None)
    if error is None:
        return "ok"
    if error.validator == "required":
        missing = [k for k in schema.get("required", []) if k not in answer]
        return f"schema:{missing[0]}" if missing else "schema"
    if error.validator == "additionalProperties":
        extra = sorted(set(answer) - set(schema.get("properties", {})))
        return f"schema:{extra[0]}" if extra else "schema"
    return f"schema:{error.path[0]}" if error.path else "schema"
