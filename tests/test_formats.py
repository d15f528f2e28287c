"""references/formats.md is generated from the models the readers validate with (`finetune.formats`)."""

from __future__ import annotations

import importlib
import re

import pytest
from pydantic import BaseModel, ConfigDict

from finetune import formats
from finetune.rewards.lib.rewards_meta import RewardMeta


def test_every_file_is_one_the_code_reads_and_every_field_is_on_the_page():
    doc = formats.formats_doc()
    for entry in formats.FILES:
        if entry.name is not None:  # the page's file name is the one the code reads and writes
            module, _, constant = entry.name.partition(":")
            assert getattr(importlib.import_module(module), constant) == entry.file, entry
        schema = formats.schema_of(entry.model)
        section = doc[doc.index(f"## {entry.file}\n"):]
        for model in (schema, *schema.get("$defs", {}).values()):
            for field, prop in model["properties"].items():
                assert re.search(rf"^\| `{field}` \| `[^`]+` \| .+ \| .*\S.* \|$", section, re.M), (entry.file, field)
                assert prop["description"]  # no blank cells: every field says what it means
    # the reward's meta: a stdlib dataclass (rendered beside rewards.py, no pydantic there), documented all the same
    meta = doc[doc.index("## rewards.py `REWARD_META`"):]
    assert all(f"| `{f}` |" in meta for f in RewardMeta.__dataclass_fields__)


def test_a_field_without_a_description_fails_the_page():
    class Undocumented(BaseModel):
        model_config = ConfigDict(use_attribute_docstrings=True)

        said: int
        """what it is"""
        unsaid: str

    with pytest.raises(ValueError, match=r"Undocumented\.unsaid has no description"):
        formats.fields_table(Undocumented.model_json_schema(), "Undocumented")


@pytest.mark.parametrize(("prop", "name"), [
    ({"type": "string"}, "str"),
    ({"anyOf": [{"$ref": "#/$defs/Counts"}, {"type": "null"}]}, "Counts | null"),
    ({"type": "array", "items": {"enum": ["human", "agent"]}}, 'list["human" | "agent"]'),
    ({"type": "object", "additionalProperties": {"type": "number"}}, "map[str, float]"),
    ({"const": 2}, "2"),
])
def test_type_names(prop, name):
    assert formats.type_name(prop) == name
