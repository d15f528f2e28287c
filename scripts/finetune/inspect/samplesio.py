"""The sample row format shared by ``inspect sample`` (generated or imported) and ``inspect score``.

A row: ``id`` (stable), ``row`` (dataset row or prompt key), ``prompt`` (a string or a list of chat
messages, exactly as TRL will pass it to the reward), ``completion`` (text), ``conversational``
(completions are passed as ``[{"role": "assistant", "content": ...}]``), ``columns`` (the other
dataset columns, passed to rewards as keyword lists), and optionally ``completion_tokens``,
``truncated``, ``source``, ``trajectory``.

A multi-turn rollout (TRL's conversational completion with tool calls: assistant turns carrying
``tool_calls``, ``tool`` results between them) is kept whole as ``trajectory``, and ``completion`` is its
canonical text (:func:`trajectory_text`): every turn in order, each call as a ``<tool_call>`` block, each
result as a ``<tool_response>`` block. Rewards read the calls from that text exactly as from TRL's messages,
and the review page shows every turn, call and result.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from finetune import jsonio
from finetune.errors import UserError
from finetune.rewards.lib.rewards_toolcall import escape_special_tokens

FIX = ('one JSON object per line: {"prompt": str or [{"role","content"}...], "completion": str, '
       '"id"?: str, "columns"?: {...} or extra top-level columns}')
RESERVED = {"id", "row", "prompt", "completion", "conversational", "columns", "completion_tokens",
            "truncated", "source", "group", "trajectory"}


def _is_trajectory(messages: Any) -> bool:
    """A whole rollout: assistant / tool messages, at least one tool call or tool result among them."""
    if not isinstance(messages, list) or not messages:
        return False
    for m in messages:
        if not isinstance(m, dict) or m.get("role") not in ("assistant", "tool"):
            return False
        if not isinstance(m.get("content", ""), (str, type(None))):
            return False
        calls = m.get("tool_calls")
        if calls is not None and not (isinstance(calls, list) and all(isinstance(c, dict) for c in calls)):
            return False
    return any(m.get("tool_calls") or m["role"] == "tool" for m in messages)


def trajectory_text(messages: list[dict[str, Any]]) -> str:
    """The canonical text of a rollout: turns in order, calls as <tool_call> blocks, results as
    <tool_response> blocks (what the review shows and the rewards read)."""
    parts: list[str] = []
    for m in messages:
        content = m.get("content") or ""
        if m["role"] == "tool":
            name = m.get("name")
            label = f" {name}" if isinstance(name, str) and name else ""
            # the result's own markers escaped: a result holding "</tool_response>" cannot end its block and
            # pass what follows off as the model's text or call
            parts.append(f"<tool_response>{label}\n{escape_special_tokens(str(content))}\n</tool_response>")
            continue
        if content:
            parts.append(content)
        for call in m.get("tool_calls") or []:
            function = call.get("function", call)
            parts.append("<tool_call>\n" + json.dumps({"name": function.get("name"),
                                                        "arguments": function.get("arguments")},
                                                       ensure_ascii=False) + "\n</tool_call>")
    return "\n".join(parts)


MAX_DEPTH = 32  # nesting levels a sample may hold: real rows use a few; 500 levels broke pickling the row


def _plain(value: Any, where: str, depth: int = 0) -> None:
    """Bounded nesting (never a RecursionError later, in a reward or while pickling) and text that is
    text (an unpaired surrogate from a ``\\ud800`` escape cannot be written back as UTF-8)."""
    if depth > MAX_DEPTH:
        raise UserError(f"nested more than {MAX_DEPTH} levels deep", where=where,
                        fix="flatten the column (or store it as a JSON string)")
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise UserError(f"an unpaired surrogate (\\u{ord(value[exc.start]):04x}) is not text", where=where,
                            fix="re-export the file as valid UTF-8 text") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _plain(key, where, depth + 1)
            _plain(item, where, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _plain(item, where, depth + 1)


def _typed_extras(obj: dict[str, Any], where: str) -> None:
    """completion_tokens is a count, truncated a flag, source a name: stored as given, they are read as such."""
    tokens = obj.get("completion_tokens")
    if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0):
        raise UserError(f"'completion_tokens' must be a whole number >= 0, not {tokens!r:.40}", where=where, fix=FIX)
    if "truncated" in obj and obj["truncated"] is not None and not isinstance(obj["truncated"], bool):
        raise UserError(f"'truncated' must be true or false, not {obj['truncated']!r:.40}", where=where, fix=FIX)
    if "source" in obj and not isinstance(obj["source"], str):
        raise UserError(f"'source' must be a string, not {type(obj['source']).__name__}", where=where, fix=FIX)


def _messages_ok(prompt: Any) -> bool:
    return isinstance(prompt, list) and bool(prompt) and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in prompt)


# A sample id is a name, shown on every sheet, in headings and code spans of review.md and on the terminal: no
# Markdown, HTML, control, invisible or direction-changing character can be in one.
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@#/+=,~-]{0,127}")
ID_FIX = ("give every sample an 'id' of at most 128 ASCII letters, digits and . _ : @ # / + = , ~ - "
          "(starting with a letter or digit), or leave 'id' out")


def check_id(sid: str, where: str, made_from: str = "") -> str:
    """``sid`` when it is a plain name (:data:`ID_PATTERN`); else one line naming the place."""
    if not ID_PATTERN.fullmatch(sid):
        raise UserError(f"sample id {sid!a:.80} {made_from}is not a plain name", where=where, fix=ID_FIX)
    return sid


def normalise_row(obj: Any, where: str, index: int, prompt_column: str = "prompt") -> dict[str, Any]:
    """Validate one imported/stored row; unknown top-level keys become reward columns. A row without
    ``prompt`` may carry it under the spec's ``dataset.prompt_column`` (a dataset row with a completion)."""
    if not isinstance(obj, dict):
        raise UserError(f"expected a JSON object, got {type(obj).__name__}", where=where, fix=FIX)
    _plain(obj, where)
    _typed_extras(obj, where)
    if "prompt" not in obj and prompt_column != "prompt" and prompt_column in obj:
        obj = {"prompt": obj[prompt_column], **{k: v for k, v in obj.items() if k != prompt_column}}
    prompt = obj.get("prompt")
    if not (isinstance(prompt, str) or _messages_ok(prompt)):
        raise UserError("'prompt' must be a string or a list of {role, content} messages", where=where, fix=FIX)
    completion = obj.get("completion")
    trajectory = obj.get("trajectory")
    if _is_trajectory(completion):
        trajectory, completion = completion, trajectory_text(completion)
    elif trajectory is not None and not _is_trajectory(trajectory):
        raise UserError("'trajectory' must be the rollout's assistant / tool messages", where=where, fix=FIX)
    if isinstance(completion, list) and _messages_ok(completion) and len(completion) == 1:
        completion = completion[0]["content"]  # TRL's conversational completion form
    if not isinstance(completion, str):
        raise UserError("'completion' must be a string", where=where, fix=FIX)
    columns = obj.get("columns", {})
    if not isinstance(columns, dict):
        raise UserError("'columns' must be an object", where=where, fix=FIX)
    columns = {**{k: v for k, v in obj.items() if k not in RESERVED}, **columns}
    row = obj.get("row", obj.get("group"))
    sid = obj.get("id")
    if sid is not None and (not isinstance(sid, str) or not sid.strip()):
        raise UserError("'id' must be a non-empty string", where=where, fix=FIX)
    if sid is not None:
        check_id(sid, where)
    conv = obj.get("conversational", isinstance(prompt, list))
    if not isinstance(conv, bool):
        raise UserError("'conversational' must be true or false", where=where, fix=FIX)
    if row is not None and (isinstance(row, bool) or not isinstance(row, (int, str))):
        raise UserError(f"'row' must be a whole number or a string, not {type(row).__name__}", where=where,
                        fix="name the prompt's dataset row (or leave 'row' out)")
    if row is None:  # group by prompt so pass@k is per prompt even when the file does not say
        row = "q" + hashlib.sha256(json.dumps(prompt, sort_keys=True).encode()).hexdigest()[:10]
    return {"id": sid, "row": row,
            "prompt": prompt, "completion": completion, "conversational": conv, "columns": columns,
            **{k: obj[k] for k in ("completion_tokens", "truncated", "source") if k in obj},
            **({"trajectory": trajectory} if trajectory is not None else {})}


def load_samples(path: Path, prompt_column: str = "prompt") -> list[dict[str, Any]]:
    """Rows of a samples file, validated; duplicate ids are an error naming both lines."""
    rows: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    per_group: dict[Any, int] = {}
    for n, obj in jsonio.read_jsonl(path):
        row = normalise_row(obj, f"{path}:{n}", len(rows), prompt_column)
        k = per_group[row["row"]] = per_group.get(row["row"], -1) + 1
        if not row["id"]:  # stable: same file, same ids
            row["id"] = check_id(f"{row['row']}-s{k:02d}", f"{path}:{n}", "(made from its 'row') ")
        if row["id"] in seen:
            raise UserError(f"duplicate id '{row['id']}' (first on line {seen[row['id']]})", where=f"{path}:{n}",
                            fix="give every sample a unique id")
        seen[row["id"]] = n
        rows.append(row)
    if not rows:
        raise UserError("no samples", where=str(path), fix="sample again or import a non-empty JSONL")
    return rows
