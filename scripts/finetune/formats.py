"""references/formats.md: the run directory's files, generated from the models their readers validate with.

Each entry of :data:`FILES` names a file, the command that writes it and the model every reader validates it
into (pydantic, or the rendered rewards' ``RewardMeta`` dataclass). :func:`formats_doc` renders each model's JSON
schema — every field with its type, whether it is required (else its default) and its description — and every
nested model once, so the page cannot drift from what the code refuses (``finetune docs --check``). A field's
description is the model's own (``Field(description=...)`` or the docstring under the attribute): a field without
one is a failure here, never a blank cell.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, TypeAdapter


@dataclass(frozen=True)
class FileFormat:
    """One file of a run directory and the model its readers validate it with."""

    file: str
    model: str  # "package.module:Class"
    writer: str
    shape: str  # how the model's instances sit in the file
    name: str | None = None  # "package.module:CONSTANT": the file name as the code spells it (None: not one file)


FILES: tuple[FileFormat, ...] = (
    FileFormat("gate.json", "finetune.inspect.gaterecord:GateRecord", "`finetune inspect gate`",
               "one object; `verify_gate` and every later stage load it with `gaterecord.load_record`",
               "finetune.rundir:GATE"),
    FileFormat("verdicts.jsonl", "finetune.inspect.verdicts:Verdict",
               "`finetune inspect verdict` / `human-verdict`, the terminal review",
               "one object per line; it only grows (`verdicts.effective` picks the verdict that counts)",
               "finetune.rundir:VERDICTS"),
    FileFormat("reveals.json", "finetune.inspect.verdicts:Reveal", "`finetune inspect review --key`, the page export, "
               "the terminal review", "an object: sample id → entry", "finetune.inspect.verdicts:REVEALS"),
    FileFormat("confirmation.json", "finetune.inspect.verdicts:Confirmation", "`finetune inspect confirm`",
               "one object", "finetune.inspect.verdicts:CONFIRMATION"),
    FileFormat("acks.json", "finetune.inspect.verdicts:Ack", "`finetune inspect ack`", "an object: flag id → entry",
               "finetune.inspect.verdicts:ACKS"),
    FileFormat("scored.jsonl", "finetune.inspect.runfiles:ScoredRow", "`finetune inspect score`",
               "one object per sample and line; extra keys allowed", "finetune.rundir:SCORED"),
    FileFormat("score_report.json", "finetune.inspect.runfiles:ScoreReport", "`finetune inspect score`",
               "one object; extra keys allowed", "finetune.rundir:SCORE_REPORT"),
    FileFormat("reading_set.json", "finetune.inspect.readingset:ReadingSet", "`finetune inspect review --fresh`",
               "one object", "finetune.inspect.readingset:FILE"),
    FileFormat("rewards.py `REWARD_META`", "finetune.rewards.lib.rewards_meta:RewardMeta",
               "`finetune rewards render`", "one per reward, in spec order (also each `score_report.json` "
               "reward entry)"),
    FileFormat("the router's answers (`finetune route --answers FILE`)", "finetune.route:Answers",
               "the user (YAML or JSON; flags override it)", "one object"),
)


def _load(ref: str) -> Any:
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def schema_of(ref: str) -> dict[str, Any]:
    """The JSON schema a file's model validates against (a stdlib dataclass through pydantic's adapter)."""
    model = _load(ref)
    if isinstance(model, type) and issubclass(model, BaseModel):
        schema: dict[str, Any] = model.model_json_schema()
    else:
        schema = TypeAdapter(model).json_schema()  # a stdlib dataclass: its own __pydantic_config__
    return schema


def type_name(prop: dict[str, Any]) -> str:
    """A schema property's type, short: ``str``, ``list[Verdict]``, ``"PASS" | "FAIL"``, ``map[str, float]``."""
    if "$ref" in prop:
        return str(prop["$ref"]).rsplit("/", 1)[-1]
    if "const" in prop:
        return json.dumps(prop["const"])
    if "enum" in prop:
        return " | ".join(json.dumps(v) for v in prop["enum"])
    if "anyOf" in prop:
        return " | ".join(type_name(p) for p in prop["anyOf"])
    kind = prop.get("type")
    if kind == "array":
        return f"list[{type_name(prop.get('items', {}))}]"
    if kind == "object":
        extra = prop.get("additionalProperties")
        return f"map[str, {type_name(extra)}]" if isinstance(extra, dict) else "object"
    names = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "null"}
    return names.get(str(kind), "any") if kind else "any"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def fields_table(schema: dict[str, Any], where: str) -> list[str]:
    """A model's fields as Markdown rows; ValueError naming the field when one has no description."""
    required = set(schema.get("required", []))
    rows = ["| field | type | required / default | description |", "|---|---|---|---|"]
    for name, prop in schema.get("properties", {}).items():
        description = prop.get("description")
        if not description:
            raise ValueError(f"{where}.{name} has no description: give it one (Field(description=...) or a "
                             "docstring under the attribute)")
        default = ("required" if name in required else f"`{json.dumps(prop['default'])}`" if "default" in prop
                   else "optional (empty)")
        rows.append(f"| `{name}` | `{_cell(type_name(prop))}` | {default} | {_cell(description)} |")
    return rows


def _section(entry: FileFormat, seen: set[str]) -> list[str]:
    schema = schema_of(entry.model)
    ref = entry.model.replace(":", ".")
    out = [f"## {entry.file}", "", f"Written by {entry.writer}; {entry.shape}. Model: `{ref}`."]
    if schema.get("description"):
        out += ["", _cell(schema["description"])]
    out += ["", *fields_table(schema, ref)]
    for name, sub in schema.get("$defs", {}).items():
        if name in seen:
            continue
        seen.add(name)
        out += ["", f"### {name}", ""]
        if sub.get("description"):
            out += [_cell(sub["description"]), ""]
        out += fields_table(sub, f"{ref}/{name}")
    return out


def formats_doc() -> str:
    """references/formats.md: every file of :data:`FILES`, then its nested models (each once)."""
    lines = ["# Run-directory file formats", "",
             "<!-- generated by finetune.formats.formats_doc(); run `finetune docs` — do not edit -->", "",
             "What each file of a run directory holds, generated from the model every reader validates it with: a "
             "file that does not match is bad input (one line naming the file, exit 2), never a guess. The run spec "
             "(`spec.yaml`, `finetune.spec.RunSpec`) has its own page, [run-spec.md](run-spec.md); the sample files "
             "are in [reward-functions.md](reward-functions.md). No one edits these files by hand: the command "
             "named under each writes it.", ""]
    seen: set[str] = set()
    for entry in FILES:
        lines += [*_section(entry, seen), ""]
    return "\n".join(lines)
